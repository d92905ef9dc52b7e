"""The oracle, the controlled family M(sigma_r, sigma_i) and its AR(1) variant (paper §4.2)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from paper_layout import CELL_SCALE, D1_X, D1_Y

from gridplan.core.constants import AGENT_X, AGENT_Y, KEY_Y, UP
from gridplan.core.env import step, to_cell, transition
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.world import DEFAULT
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel, noise_grid

NOISE_RELEVANT_DIMS = TASK_A.noise_relevant_dims
IRRELEVANT = [d for d in range(12) if d not in NOISE_RELEVANT_DIMS]


def ups(n: int) -> torch.Tensor:
    return torch.full((n,), UP, dtype=torch.long)


def predict_and_truth(model, state, action, seed=0):
    """The model's prediction and the noise-free transition it adds noise to, from the same
    generator state (the transition draws its distractors first, then the model its noise)."""
    g = torch.Generator().manual_seed(seed)
    truth = transition(state, action, torch.Generator().set_state(g.get_state()))[0]
    return model.predict(state, action, g), truth


def test_controlled_puts_sigma_r_in_cells_on_dims_0_to_5_and_sigma_i_on_6_to_11():
    model = NoiseModel.controlled(0.35, 0.1)
    expected = torch.tensor([[0.05] * 6 + [0.1] * 6])
    torch.testing.assert_close(model.sigma, expected)
    assert model.settings() == [{"sigma_r": 0.35, "sigma_i": 0.1}]


def test_controlled_splits_sigma_by_the_tasks_noise_relevant_dims():
    # Task B noises c1 as an irrelevant dim (paper §5.3); a task may declare another split.
    assert torch.equal(
        NoiseModel.controlled(0.7, 0.2, TASK_B).sigma, NoiseModel.controlled(0.7, 0.2).sigma
    )
    agent_only = dataclasses.replace(
        TASK_A, name="agent-only", noise_relevant_dims=(AGENT_X, AGENT_Y)
    )
    model = AR1NoiseModel.controlled(0.7, 0.2, rho=0.5, task=agent_only)
    assert model.sigma[0].tolist() == pytest.approx([0.1, 0.1] + [0.2] * 10)
    assert model.settings() == [{"sigma_r": 0.7, "sigma_i": 0.2}]
    assert noise_grid([0.7], [0.2], agent_only).settings() == model.settings()


def test_controlled_noise_has_the_prescribed_empirical_std(make_state):
    state = make_state(agent=(2, 2), key=(3, 3), d1=(3, 3), rows=20_000)
    pred, truth = predict_and_truth(NoiseModel.controlled(0.35, 0.1), state, ups(20_000))
    noise = pred - truth
    for dim, sigma in [(AGENT_X, 0.05), (KEY_Y, 0.05), (D1_X, 0.1)]:
        assert noise[:, dim].std().item() == pytest.approx(sigma, rel=0.03)
        assert abs(noise[:, dim].mean().item()) < 0.004


def test_a_sigma_r_of_035_cells_moves_the_agents_rounded_cell_in_15_percent_of_steps(make_state):
    # P(|N(0, 0.35)| > 0.5) = 2 * (1 - Phi(1.4286)) = 0.153.
    state = make_state(agent=(2, 0), key=(0, 7), rows=20_000)
    pred = NoiseModel.controlled(0.35, 0.0).predict(state, ups(20_000), torch.Generator())
    off = (to_cell(pred[:, AGENT_X], DEFAULT) != 2).float().mean().item()
    assert off == pytest.approx(0.153, abs=0.01)


def test_noise_compounds_across_imagined_steps(make_state):
    model = NoiseModel.controlled(0.35, 0.0)
    state = make_state(agent=(2, 0), key=(0, 7), rows=20_000)
    g = torch.Generator().manual_seed(1)
    off = []
    for _ in range(4):
        state = model.predict(state, ups(20_000), g)
        off.append((to_cell(state[:, AGENT_X], DEFAULT) != 2).float().mean().item())
    assert off == sorted(off)
    assert off[-1] > 2 * off[0]


def test_predictions_stay_in_the_unit_box(make_state):
    state = make_state(agent=(0, 7), key=(0, 0), d1=(7, 0), rows=500)
    pred = NoiseModel.controlled(2.0, 1.2).predict(state, ups(500), torch.Generator())
    assert pred.min().item() >= 0.0 and pred.max().item() <= 1.0


def test_the_oracle_is_the_true_environment_step(random_states):
    state = random_states(64, torch.Generator().manual_seed(2))
    action = torch.arange(64) % 4
    pred = OracleModel().predict(state, action, torch.Generator().manual_seed(5))
    truth = step(state, action, torch.Generator().manual_seed(5))[0]
    assert torch.equal(pred, truth)


@pytest.mark.parametrize(
    "zero_model",
    [
        NoiseModel.controlled(0.0, 0.0),
        NoiseModel(torch.zeros(12)),
        AR1NoiseModel.controlled(0.0, 0.0, rho=0.5),
    ],
)
def test_noise_models_with_zero_sigma_predict_exactly_what_the_oracle_predicts(
    random_states, zero_model
):
    state = random_states(64, torch.Generator().manual_seed(3))
    action = torch.arange(64) % 4
    pred = zero_model.predict(state, action, torch.Generator().manual_seed(9))
    assert torch.equal(pred, OracleModel().predict(state, action, torch.Generator().manual_seed(9)))


def test_a_multi_setting_model_applies_setting_m_to_the_m_th_block_of_rows(make_state):
    model = NoiseModel.controlled([0.0, 0.35, 0.0], [0.0, 0.0, 0.1])
    assert model.n_settings == 3
    state = make_state(agent=(2, 2), key=(3, 3), d1=(3, 3), rows=3 * 1000)
    pred, truth = predict_and_truth(model, state, ups(3000))
    noise = (pred - truth).view(3, 1000, 12)
    assert (noise[0] == 0).all()
    assert noise[1][:, AGENT_Y].std().item() == pytest.approx(0.05, rel=0.1)
    assert (noise[1][:, IRRELEVANT] == 0).all()
    assert (noise[2][:, list(NOISE_RELEVANT_DIMS)] == 0).all()
    assert noise[2][:, D1_Y].std().item() == pytest.approx(0.1, rel=0.1)


def test_a_multi_setting_model_rejects_a_batch_that_does_not_split_into_blocks(make_state):
    model = NoiseModel.controlled([0.1, 0.2], [0.0, 0.0])
    with pytest.raises(ValueError, match="does not split into 2 equal setting blocks"):
        model.predict(make_state(rows=3), ups(3), torch.Generator())


def test_noise_grid_lists_settings_sigma_r_major():
    grid = noise_grid([0.0, 0.35], [0.0, 0.1, 1.2])
    assert grid.n_settings == 6
    assert grid.settings() == [
        {"sigma_r": r, "sigma_i": i} for r in (0.0, 0.35) for i in (0.0, 0.1, 1.2)
    ]


def test_ar1_noise_keeps_the_marginal_std_and_correlates_consecutive_steps(make_state):
    rho, sigma_r = 0.8, 0.21  # 0.03 normalized: the agent never leaves its cell by noise
    model = AR1NoiseModel.controlled(sigma_r, 0.0, rho=rho)
    n = 20_000
    state = make_state(agent=(3, 0), key=(0, 7), rows=n)
    g = torch.Generator().manual_seed(4)
    model.start_rollout(n, g)
    noises = []
    for _ in range(4):
        truth = transition(state, ups(n), torch.Generator().set_state(g.get_state()))[0]
        state = model.predict(state, ups(n), g)
        noises.append((state - truth)[:, AGENT_X])
    for noise in noises:
        assert noise.std().item() == pytest.approx(sigma_r / CELL_SCALE, rel=0.03)
    lag1 = torch.corrcoef(torch.stack(noises[:2]))[0, 1].item()
    lag3 = torch.corrcoef(torch.stack([noises[0], noises[3]]))[0, 1].item()
    assert lag1 == pytest.approx(rho, abs=0.02)
    assert lag3 == pytest.approx(rho**3, abs=0.02)


def test_ar1_start_rollout_forgets_the_previous_rollout(make_state):
    model = AR1NoiseModel.controlled(0.21, 0.0, rho=0.9)
    state = make_state(agent=(3, 3), key=(0, 7), rows=5000)
    g = torch.Generator().manual_seed(0)
    first = model.predict(state, ups(5000), g)[:, AGENT_X] - 3 / CELL_SCALE
    model.start_rollout(5000, g)
    fresh = model.predict(state, ups(5000), g)[:, AGENT_X] - 3 / CELL_SCALE
    assert abs(torch.corrcoef(torch.stack([first, fresh]))[0, 1].item()) < 0.05


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: NoiseModel.controlled(-0.1, 0.0), "non-negative"),
        (lambda: NoiseModel.controlled(0.0, -0.2), "non-negative"),
        (lambda: NoiseModel.controlled([0.1, -0.1], [0.0, 0.0]), "non-negative"),
        (lambda: noise_grid([0.0], [-1.0]), "non-negative"),
        (lambda: AR1NoiseModel.controlled(-0.1, 0.0), "non-negative"),
        (lambda: NoiseModel.controlled(math.nan, 0.0), "finite"),
        (lambda: NoiseModel.controlled([0.1, 0.2], [0.0, 0.1, 0.2]), "same length"),
        (lambda: NoiseModel(torch.zeros(11)), r"shape \(M, 12\)"),
        (lambda: AR1NoiseModel(torch.zeros(12), rho=1.0), r"rho must lie in \[0, 1\)"),
    ],
)
def test_bad_noise_settings_are_rejected_naming_the_problem(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("model", [OracleModel(), AR1NoiseModel.controlled(0.2, 0.1)])
@pytest.mark.parametrize(
    ("state", "action", "message"),
    [
        (torch.zeros(3, 11), torch.zeros(3, dtype=torch.long), "shape"),
        (torch.full((3, 12), float("nan")), torch.zeros(3, dtype=torch.long), "non-finite"),
        (torch.zeros(3, 12), torch.full((3,), 4), "0..3"),
        (torch.zeros(3, 12), torch.zeros(3), "integer"),
    ],
)
def test_built_in_models_reject_bad_predict_inputs_by_name(model, state, action, message):
    with pytest.raises(ValueError, match=message):
        model.predict(state, action, torch.Generator().manual_seed(0))
