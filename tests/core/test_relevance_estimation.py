"""Estimated relevance weights: fitted value iteration
(gridplan/metrics/relevance_estimation.py) and perturbation saliency, Eq. 1
(gridplan/core/values.py); paper §4.1, appendix A."""

from __future__ import annotations

import pytest
import torch
from paper_layout import CELL_SCALE, D1_X, STATE_DIM

from gridplan.core.constants import AGENT_X, C1, CARRYING
from gridplan.core.env import reset
from gridplan.core.relevance import optimal_state_distribution, relevance_weights
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.values import perturbation_saliency, value_table
from gridplan.metrics.relevance_estimation import (
    FVIConfig,
    estimate_relevance,
    fitted_value_iteration,
    one_step_backup_inputs,
)
from gridplan.models.noise import NoiseModel, OracleModel
from tests.conftest import build_state

IRRELEVANT_A = [d for d in range(STATE_DIM) if d not in TASK_A.relevant_dims]


@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
def test_saliency_of_the_exact_value_is_the_graded_weights_of_eq1_with_zero_on_irrelevant_dims(
    task,
):
    states = optimal_state_distribution(task)
    w = perturbation_saliency(value_table(task).lookup, states)
    assert torch.equal(w, relevance_weights(task))
    irrelevant = [d for d in range(STATE_DIM) if d not in task.relevant_dims]
    assert (w[irrelevant] == 0).all()
    assert w.sum() == pytest.approx(1.0)


def test_saliency_of_a_value_reading_agent_x_and_carrying_matches_the_hand_computation():
    # V = agent_x (normalized) + 2 * carrying: a one-cell move changes V by exactly 1/7 in
    # either direction, a flag flip by exactly 2; nothing else moves it.
    states = torch.cat(
        [
            build_state(agent=(3, 2), key=(1, 1)),
            build_state(agent=(0, 5), carrying=True),
            build_state(agent=(7, 7), key=(4, 0), door_open=True),
        ]
    )

    def value(s):
        return s[:, AGENT_X] + 2 * s[:, CARRYING]

    raw = perturbation_saliency(value, states, normalize=False)
    expected = torch.zeros(STATE_DIM)
    expected[AGENT_X] = 1 / CELL_SCALE
    expected[CARRYING] = 2.0
    assert torch.allclose(raw, expected, atol=1e-6)
    w = perturbation_saliency(value, states)
    assert w[AGENT_X] == pytest.approx((1 / 7) / (1 / 7 + 2), abs=1e-6)
    assert w[CARRYING] == pytest.approx(2 / (1 / 7 + 2), abs=1e-6)


def test_saliency_averages_only_the_directions_that_stay_on_the_grid():
    # V = (agent_x cell)^2. Cell 0 can only move to 1: |1 - 0| = 1. Cell 3 moves to 2 and 4:
    # (|4 - 9| + |16 - 9|) / 2 = 6. The expectation over both states is 3.5.
    states = torch.cat([build_state(agent=(0, 0)), build_state(agent=(3, 0))])

    def value(s):
        return (s[:, AGENT_X] * CELL_SCALE).round() ** 2

    raw = perturbation_saliency(value, states, normalize=False)
    assert raw[AGENT_X] == pytest.approx(3.5)
    assert (raw[[d for d in range(STATE_DIM) if d != AGENT_X]] == 0).all()


def test_one_backup_from_zero_learns_the_immediate_reward_of_the_best_action():
    # Next to the goal (7, 4) the best action earns 1 and ends the episode; on the door cell
    # no action reaches the goal, so V_1 = max_a r = 0 there.
    near = build_state(agent=(6, 4), carrying=True, door_open=True, rows=64)
    door = build_state(agent=(5, 4), carrying=True, door_open=True, rows=64)
    states = torch.cat([near, door])
    states[:, D1_X:] = torch.randint(0, 8, (128, 4), generator=torch.Generator().manual_seed(1)) / 7
    cfg = FVIConfig(iterations=1, epochs=100, hidden=(32, 32), lr=1e-2, batch_size=128)
    fitted = fitted_value_iteration(OracleModel(), states, TASK_A, cfg)
    assert fitted(states[:64]).mean() == pytest.approx(1.0, abs=0.05)
    assert fitted(states[64:]).mean() == pytest.approx(0.0, abs=0.05)
    assert fitted.backup_change == [pytest.approx(0.5)]
    assert len(fitted.fit_mse) == 1


def test_backup_inputs_score_every_action_with_the_true_reward_on_the_predicted_state():
    near = build_state(agent=(6, 4), carrying=True, door_open=True)
    nxt, reward, terminal = one_step_backup_inputs(OracleModel(), near)
    assert nxt.shape == (1, 4, STATE_DIM)
    # Only "right" (action 3) reaches the goal.
    assert reward.tolist() == [[0.0, 0.0, 0.0, 1.0]]
    assert terminal.tolist() == [[False, False, False, True]]


def test_estimated_weights_on_a_tiny_problem_sum_to_one_and_report_their_irrelevant_mass():
    states = reset(128, torch.Generator().manual_seed(0))
    cfg = FVIConfig(iterations=2, epochs=1, hidden=(16,), batch_size=64)
    est = estimate_relevance(OracleModel(), states[:96], TASK_A, cfg, saliency_states=states[96:])
    assert est.weights.shape == (STATE_DIM,)
    assert (est.weights >= 0).all()
    assert est.weights.sum() == pytest.approx(1.0, abs=1e-6)
    assert est.irrelevant_mass == pytest.approx(float(est.weights[IRRELEVANT_A].sum()))
    summary = est.to_dict()
    assert len(summary["weights"]) == STATE_DIM and len(summary["backup_change"]) == 2
    assert est.task is TASK_A and summary["task"] == "A"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"iterations": 0}, "iterations"),
        ({"epochs": 1.5}, "epochs"),
        ({"hidden": ()}, "hidden"),
        ({"lr": 0.0}, "lr"),
        ({"gamma": 1.5}, "gamma"),
    ],
)
def test_fvi_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FVIConfig(**kwargs)


def test_bad_inputs_are_rejected_with_a_message_naming_the_problem():
    states = build_state(rows=4)
    with pytest.raises(ValueError, match=r"shape \(B, 12\)"):
        fitted_value_iteration(OracleModel(), states[:, :11])
    with pytest.raises(ValueError, match="one-setting model"):
        one_step_backup_inputs(NoiseModel.controlled([0.0, 0.1], [0.0, 0.0]), states)
    with pytest.raises(ValueError, match="constant under every perturbation"):
        perturbation_saliency(lambda s: torch.zeros(s.shape[0]), states)
    with pytest.raises(ValueError, match="must map"):
        perturbation_saliency(lambda s: s[:, C1:], states)
