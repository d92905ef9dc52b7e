"""The WorldModelGym probe: how the five candidates are built, normalized regret and the
reward error on hand-built questions, and the oracle's known answer."""

from __future__ import annotations

import math

import pytest
import torch

from gridplan.core import tasks
from gridplan.core.constants import N_ACTIONS
from gridplan.evaluation.decisions import leaf_scores
from gridplan.evaluation.probe import KINDS, ProbeQuestions, answer, build_questions, probe
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import start_states
from gridplan.planning.planner import action_sequences

TASK_A = tasks.get("A")


def _questions(n: int = 64, depth: int = 3):
    states = start_states([0], n, TASK_A)
    truth = leaf_scores(OracleModel(), states, TASK_A, depth, torch.Generator())
    return states, truth, build_questions(truth, depth, torch.Generator().manual_seed(4))


def test_candidates_are_the_best_three_near_misses_and_a_random_sequence():
    depth = 3
    _, truth, q = _questions(depth=depth)
    seqs = action_sequences(depth)
    kinds = q.kinds
    assert (kinds == 0).sum(dim=1).eq(1).all() and (kinds == 1).sum(dim=1).eq(3).all()
    assert (kinds == 2).sum(dim=1).eq(1).all()
    best = q.candidates[kinds == 0]
    torch.testing.assert_close(truth.gather(1, best.unsqueeze(1)).squeeze(1), truth.amax(dim=1))
    near = q.candidates[kinds == 1].view(-1, 3)
    differ = (seqs[near] != seqs[best].unsqueeze(1)).sum(dim=2)
    assert differ.eq(1).all()
    torch.testing.assert_close(q.true_return, truth.gather(1, q.candidates))


def test_questions_are_seeded_and_shuffled():
    _, truth, q = _questions()
    again = build_questions(truth, 3, torch.Generator().manual_seed(4))
    assert torch.equal(q.candidates, again.candidates)
    # The best candidate is not always shown first.
    assert len(set((q.kinds == 0).float().argmax(dim=1).tolist())) > 1


def test_normalized_regret_and_reward_error_by_hand():
    questions = ProbeQuestions(
        candidates=torch.tensor([[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]),
        kinds=torch.tensor([[0, 1, 1, 1, 2], [0, 1, 1, 1, 2]]),
        true_return=torch.tensor([[1.0, 0.5, 0.2, 0.2, 0.0], [0.3, 0.3, 0.3, 0.3, 0.3]]),
    )
    # The model prefers candidate 1 in question 0; question 1 has five equal returns.
    scores = torch.tensor([[0.9, 0.95, 0.1, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]])
    result = answer(questions, scores)
    assert result.regret.mean == pytest.approx((1.0 - 0.5) / (1.0 - 0.0))
    assert (result.n_questions, result.n_dropped) == (2, 1)
    assert math.isnan(float(result.per_question[1]))
    assert result.picked == {"best": 0.0, "near_miss": 1.0, "random": 0.0}
    # |G_hat - G| over all ten candidates: .1+.45+.1+.1+0 + .3+.3+.3+.3+.7 = 2.65.
    assert result.reward_error.mean == pytest.approx(2.65 / 10)
    assert set(result.picked) == set(KINDS)


def test_the_oracle_never_regrets_and_noise_on_relevant_dims_does():
    states = start_states([1], 64, TASK_A)
    oracle = probe(OracleModel(), states, TASK_A, 3, torch.Generator().manual_seed(0))
    assert oracle.regret.mean == 0.0 and oracle.reward_error.mean == 0.0
    noisy = probe(NoiseModel.controlled(0.35, 0.1), states, TASK_A, 3, torch.Generator())
    assert noisy.regret.mean > 0.0 and noisy.reward_error.mean > 0.0


def test_scores_must_cover_the_questions():
    _, truth, q = _questions(n=8)
    with pytest.raises(ValueError, match="model_scores must have shape"):
        answer(q, truth[:4])
    with pytest.raises(ValueError, match="true_scores must have shape"):
        build_questions(truth[:, : N_ACTIONS**2], 3, torch.Generator())
