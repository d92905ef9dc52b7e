"""The WorldModelGym probe: a multiple-choice question of plans per true state.

Per start state ``s`` (a question) five candidate ``H``-step action sequences are fixed in
advance, independently of the model being probed (seeded; ``H`` is the planner depth, so a
sequence is one planner leaf):

1. the best sequence by exact value (the highest true return; ties at random);
2. three near-misses: the best sequence with the action of one step (uniform over the ``H``
   steps) replaced by one of the ``A - 1`` other actions (uniform; ``A = task.world.n_actions``,
   4 in the paper's world, 7 in MiniGrid DoorKey's);
3. one uniform random sequence.

The five are shown in a random order. The model scores each with its predicted return (the
planner's leaf score: rewards read from the predicted states, or the model's own
``predict_reward``, plus ``gamma^H V*`` of the last predicted state) and picks the highest
(the first in the shown order on a tie). With ``G`` the true returns of the five:

- normalized regret ``(max G - G_picked) / (max G - min G)``: 0 for the best plan, 1 for the
  worst; questions whose five true returns are all equal are dropped and counted;
- reward-prediction error ``mean |G_hat - G|`` over all candidates of all questions, in
  return units (rewards are +-1, values at most 1).

Source: WorldModelGym (Reka), "The protocol": normalized regret and reward-prediction error of
an argmax pick among five candidate sequences, one of them random.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.tasks import Task
from gridplan.evaluation.common import NON_NEGATIVE, RATE, Estimate
from gridplan.evaluation.decisions import leaf_scores
from gridplan.models.noise import OracleModel
from gridplan.planning.planner import TIE_TOLERANCE

#: Kinds of candidate, in construction order (codes index this tuple).
KINDS = ("best", "near_miss", "random")
_KIND_CODES = (0, 1, 1, 1, 2)
N_CANDIDATES = len(_KIND_CODES)


@dataclass
class ProbeQuestions:
    """Candidates of ``n`` questions, in the order shown to the model.

    Attributes:
        candidates: ``(n, 5)`` long leaf indices (``gridplan.planning.planner.action_sequences``
            order).
        kinds: ``(n, 5)`` long codes into ``KINDS``.
        true_return: ``(n, 5)`` true returns of the candidates.
    """

    candidates: torch.Tensor
    kinds: torch.Tensor
    true_return: torch.Tensor

    def __len__(self) -> int:
        return self.candidates.shape[0]


def build_questions(
    true_scores: torch.Tensor, depth: int, generator: torch.Generator, n_actions: int = N_ACTIONS
) -> ProbeQuestions:
    """The candidates of every question from every leaf's true return (module docstring).

    Args:
        true_scores: ``(n, A^D)`` true return of every sequence from each question's state
            (``gridplan.evaluation.decisions.Decisions.true_scores``).
        depth: ``D`` (sequence length).
        generator: every random choice of the construction, drawn in a fixed order.
        n_actions: ``A``, the world's action count (``task.world.n_actions``; the paper's 4
            by default).

    Raises:
        ValueError: if ``true_scores`` is not ``(n, A^depth)``.
    """
    n_leaves = n_actions**depth
    if true_scores.dim() != 2 or true_scores.shape[1] != n_leaves:
        raise ValueError(
            f"true_scores must have shape (n, {n_leaves}) for depth {depth}, got "
            f"{tuple(true_scores.shape)}"
        )
    n, device = true_scores.shape[0], true_scores.device

    def draw(*shape):
        return torch.rand(*shape, generator=generator, device=generator.device).to(device)

    def integers(high, *shape):
        return torch.randint(0, high, shape, generator=generator, device=generator.device).to(
            device
        )

    top = true_scores >= true_scores.amax(dim=1, keepdim=True) - TIE_TOLERANCE
    best = (draw(n, n_leaves) * top).argmax(dim=1)
    step = integers(depth, n, 3)
    shift = 1 + integers(n_actions - 1, n, 3)
    place = n_actions ** (depth - 1 - step)
    old = (best.unsqueeze(1) // place) % n_actions
    near = best.unsqueeze(1) + ((old + shift) % n_actions - old) * place
    rand = integers(n_leaves, n, 1)
    candidates = torch.cat([best.unsqueeze(1), near, rand], dim=1)
    kinds = torch.tensor(_KIND_CODES, device=device).expand(n, N_CANDIDATES)
    order = draw(n, N_CANDIDATES).argsort(dim=1)
    candidates = candidates.gather(1, order)
    return ProbeQuestions(
        candidates=candidates,
        kinds=kinds.gather(1, order),
        true_return=true_scores.gather(1, candidates),
    )


@dataclass(frozen=True)
class ProbeResult:
    """Probe numbers (module docstring).

    Attributes:
        regret: normalized regret over the kept questions.
        reward_error: ``|G_hat - G|`` over all candidates.
        n_questions: questions asked.
        n_dropped: questions dropped because their five true returns are equal.
        picked: kind -> fraction of kept questions where the model picked that kind.
        per_question: ``(n,)`` normalized regret, NaN for dropped questions.
    """

    regret: Estimate | None
    reward_error: Estimate
    n_questions: int
    n_dropped: int
    picked: dict[str, float]
    per_question: torch.Tensor

    def to_dict(self) -> dict:
        return {
            "regret": None if self.regret is None else self.regret.to_dict(),
            "reward_error": self.reward_error.to_dict(),
            "n_questions": self.n_questions,
            "n_dropped": self.n_dropped,
            "picked": dict(self.picked),
            "candidates": N_CANDIDATES,
        }


def answer(questions: ProbeQuestions, model_scores: torch.Tensor) -> ProbeResult:
    """Score the model's picks.

    Args:
        questions: from ``build_questions``.
        model_scores: ``(n, A^D)`` the model's predicted return of every sequence from each
            question's state.

    Raises:
        ValueError: if the scores do not cover the questions.
    """
    if model_scores.dim() != 2 or model_scores.shape[0] != len(questions):
        raise ValueError(
            f"model_scores must have shape ({len(questions)}, L), got {tuple(model_scores.shape)}"
        )
    predicted = model_scores.gather(1, questions.candidates)
    pick = predicted.argmax(dim=1, keepdim=True)
    g = questions.true_return
    best, worst = g.amax(dim=1), g.amin(dim=1)
    kept = (best - worst) > TIE_TOLERANCE
    spread = torch.where(kept, best - worst, torch.ones_like(best))
    regret = (best - g.gather(1, pick).squeeze(1)) / spread
    per_question = torch.where(kept, regret, torch.full_like(regret, float("nan")))
    picked_kind = questions.kinds.gather(1, pick).squeeze(1)[kept]
    n_kept = int(kept.sum())
    picked = {
        name: (float((picked_kind == code).double().mean()) if n_kept else float("nan"))
        for code, name in enumerate(KINDS)
    }
    return ProbeResult(
        regret=Estimate.of(regret[kept].double(), RATE) if n_kept else None,
        reward_error=Estimate.of((predicted - g).abs().double(), NON_NEGATIVE),
        n_questions=len(questions),
        n_dropped=len(questions) - n_kept,
        picked=picked,
        per_question=per_question,
    )


def probe(
    model,
    states: torch.Tensor,
    task: Task,
    depth: int,
    generator: torch.Generator,
    **planner_kwargs,
) -> ProbeResult:
    """Ask ``model`` one question per true state of ``(n, S)`` ``states``.

    The questions are drawn from ``generator`` first, then the model's noise, so a seed gives
    every model the same questions. ``planner_kwargs`` go to the scoring ``Planner``s.
    """
    oracle = OracleModel(world=task.world)
    truth = leaf_scores(oracle, states, task, depth, generator, **planner_kwargs)
    questions = build_questions(truth, depth, generator, task.world.n_actions)
    scores = leaf_scores(model, states, task, depth, generator, **planner_kwargs)
    return answer(questions, scores)
