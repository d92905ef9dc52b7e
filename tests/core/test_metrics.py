"""Prediction-error metrics (gridplan.metrics.prediction): hand-worked values, paper effects, bad
input."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from helpers_metrics import (
    BrokenModel,
    ConstantModel,
    ForgetfulCarryingModel,
    OffsetOracle,
    RecordingModel,
    constant_windows,
)
from paper_layout import C2, D1_X, DIM_NAMES, STATE_DIM
from scipy.stats import spearmanr

from gridplan.core.constants import AGENT_X, C1, CARRYING
from gridplan.core.relevance import binary_weights, relevance_weights
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.data.datasets import eval_windows
from gridplan.metrics.prediction import (
    check_weights,
    drpe,
    e_tot,
    prediction_metrics,
    profile,
    rollout_predictions,
    squared_errors,
    standard_weights,
    step_profile,
)
from gridplan.models.noise import NoiseModel, OracleModel


@pytest.fixture(scope="module")
def windows():
    return eval_windows(400, horizon=10)


def offset(**dims: float) -> torch.Tensor:
    """``(12,)`` offset vector from ``dim_name=value`` pairs."""
    out = torch.zeros(STATE_DIM)
    for name, value in dims.items():
        out[DIM_NAMES.index(name)] = value
    return out


def one(model, windows, task=TASK_A, **kwargs):
    (result,) = prediction_metrics(model, windows, task=task, **kwargs)
    return result


def test_constant_offset_model_has_hand_computed_errors():
    # Every prediction is FIXED_STATE + 0.1 on agent_x and + 0.2 on d1_x; every target is
    # FIXED_STATE, so each step's squared errors are 0.01 (agent_x) and 0.04 (d1_x).
    windows = constant_windows(w=3, h=2)
    r = one(ConstantModel(offset(agent_x=0.1, d1_x=0.2)), windows)
    assert r.E_tot == pytest.approx(0.05 / 12, rel=1e-5)
    assert r.DRPE["binary"] == pytest.approx(0.01 / 6, rel=1e-5)
    assert r.DRPE["graded"] == pytest.approx(0.01 * float(relevance_weights(TASK_A)[0]), rel=1e-5)
    expected = torch.zeros(STATE_DIM)
    expected[AGENT_X], expected[D1_X] = 0.01, 0.04
    torch.testing.assert_close(r.profile, expected)
    torch.testing.assert_close(r.step_profile, expected.expand(2, STATE_DIM))
    assert (r.horizon, r.n_windows) == (2, 3)


def test_offset_oracle_adds_exactly_its_offset_error_to_the_oracle(windows):
    # 0.05 normalized = 0.35 cells: rounding never changes the cell, so the relevant rollout
    # stays exact and, with common random numbers, the distractors match the oracle's.
    oracle = one(OracleModel(), windows)
    shifted = one(OffsetOracle(offset(agent_x=0.05)), windows)
    assert shifted.E_tot - oracle.E_tot == pytest.approx(0.0025 / 12, rel=1e-3)
    assert shifted.DRPE["binary"] == pytest.approx(0.0025 / 6, rel=1e-3)
    assert shifted.profile[AGENT_X] == pytest.approx(0.0025, rel=1e-3)
    torch.testing.assert_close(shifted.profile[1:], oracle.profile[1:])
    assert shifted.VPE == 0.0


def test_event_audit_reads_the_predicted_flags_at_hand_made_events():
    windows = constant_windows(w=3, h=2, pickup_at=[(0, 1), (2, 0)], door_at=[(1, 1)])
    r = one(ConstantModel(offset(carrying=0.3, door_open=0.1)), windows)
    audit = r.event_audit
    assert (audit["n_pickup"], audit["n_door"]) == (2, 1)
    assert audit["carrying_at_pickup"] == pytest.approx(0.3)
    assert audit["pickup_mse"] == pytest.approx(0.09)
    assert audit["door_open_at_opening"] == pytest.approx(0.1)
    assert audit["door_mse"] == pytest.approx(0.01)
    assert audit["pickup_state_mse"] == pytest.approx(0.10 / 12)
    assert audit["event_mse"] == pytest.approx((0.09 * 2 + 0.01) / 3)


def test_event_audit_without_events_is_nan_and_null_in_json():
    r = one(ConstantModel(offset()), constant_windows())
    assert r.event_audit["n_pickup"] == 0 and math.isnan(r.event_audit["carrying_at_pickup"])
    as_json = json.loads(json.dumps(r.to_dict()))
    assert as_json["event_audit"]["carrying_at_pickup"] is None
    assert as_json["event_audit"]["n_door"] == 0


def test_oracle_total_error_is_small_but_positive_and_its_drpe_is_exactly_zero(windows):
    r = one(OracleModel(), windows)
    # Measured: 0.046 (d2 redrawn uniformly each step contributes ~0.21 on each of 2 dims).
    assert 0.02 < r.E_tot < 0.07
    assert r.DRPE == {"binary": 0.0, "graded": 0.0}
    assert r.VPE == 0.0
    assert (r.profile[:8] == 0).all() and (r.profile[8:] > 0).all()
    assert r.event_audit["carrying_at_pickup"] == 1.0 and r.event_audit["door_mse"] == 0.0


def test_iso_error_pair_has_matched_total_error_but_opposite_drpe(windows):
    # Measured on these windows: E_tot M(0, .3) = 0.097, M(.35, .1) = 0.077 (ratio 0.80, not
    # iso here); the closest matched pair with sigma_r = .35 is M(.35, .2) at 0.093 (-5%).
    irr = one(NoiseModel.controlled(0.0, 0.3), windows)
    rel_paper = one(NoiseModel.controlled(0.35, 0.1), windows)
    rel_iso = one(NoiseModel.controlled(0.35, 0.2), windows)
    assert 0.7 < rel_paper.E_tot / irr.E_tot < 0.9
    assert abs(rel_iso.E_tot - irr.E_tot) <= 0.10 * max(rel_iso.E_tot, irr.E_tot)
    assert irr.DRPE["binary"] == 0.0 and irr.DRPE["graded"] == 0.0
    assert rel_iso.DRPE["binary"] > 0.03 and rel_paper.DRPE["graded"] > 0.03


def test_a_model_exact_on_relevant_dims_has_zero_drpe_whatever_its_irrelevant_error(windows):
    huge = one(NoiseModel.controlled(0.0, 1.2), windows)
    assert huge.E_tot > 0.15
    assert huge.DRPE["binary"] == 0.0 and huge.DRPE["graded"] == 0.0
    hand = one(ConstantModel(offset(c1=-0.5, c2=0.7, d2_y=0.9)), constant_windows())
    assert hand.E_tot > 0.1 and hand.DRPE == {"binary": 0.0, "graded": 0.0}


def test_profile_sums_to_twelve_times_total_error(windows):
    r = one(NoiseModel.controlled(0.2, 0.3), windows)
    assert float(r.profile.sum()) == pytest.approx(12 * r.E_tot, rel=1e-5)
    torch.testing.assert_close(r.step_profile.mean(dim=0), r.profile)


def test_relevant_error_grows_along_the_rollout(windows):
    r = one(NoiseModel.controlled(0.35, 0.0), windows)
    per_step = r.step_profile[:, :6].sum(dim=1)
    assert per_step[-1] > 3 * per_step[0] > 0


def test_graded_and_binary_drpe_rank_the_relevance_sweep_the_same_way(windows):
    sweep = [(r, i) for r in (0.0, 0.1, 0.2, 0.3) for i in (0.0, 0.6)]
    results = [one(NoiseModel.controlled(r, i), windows) for r, i in sweep]
    graded = [m.DRPE["graded"] for m in results]
    binary = [m.DRPE["binary"] for m in results]
    assert spearmanr(graded, binary).statistic == pytest.approx(1.0)
    # Common random numbers: sigma_i never changes the relevant rollout, so pairs tie exactly.
    assert graded[2] == graded[3] and binary[6] == binary[7]
    assert binary[0] == 0.0 < binary[2] < binary[4] < binary[6]


def test_multi_setting_models_give_one_result_per_setting_in_setting_order(windows):
    model = NoiseModel.controlled([0.0, 0.35], [0.0, 0.0])
    pred = rollout_predictions(model, windows)
    assert pred.shape == (2, 400, 10, 12)
    results = prediction_metrics(model, windows)
    assert len(results) == 2
    assert results[0].DRPE["binary"] == 0.0 < results[1].DRPE["binary"]
    assert results[0].E_tot == pytest.approx(one(OracleModel(), windows).E_tot, rel=0.1)


def test_rollouts_are_open_loop_and_driven_by_the_logged_actions():
    windows = eval_windows(5, horizon=4, seed=3)
    model = RecordingModel()
    pred = rollout_predictions(model, windows)
    assert pred.shape == (5, 4, 12) and model.rollouts == [5]
    torch.testing.assert_close(model.calls[0][0], windows.start)
    for t, (state, action, _) in enumerate(model.calls):
        assert torch.equal(action, windows.actions[:, t])
        if t:
            assert torch.equal(state, model.calls[t - 1][2])


def test_event_audit_catches_a_model_that_never_learned_the_pickup(windows):
    r = one(ForgetfulCarryingModel(0.19), windows)
    audit = r.event_audit
    assert audit["n_pickup"] > 50
    assert audit["carrying_at_pickup"] == pytest.approx(0.19)
    assert audit["pickup_mse"] == pytest.approx(0.81**2, rel=1e-5)
    assert r.DRPE["binary"] > 0


def test_task_b_drpe_separates_noise_on_c1_from_noise_on_c2():
    windows = eval_windows(200, horizon=10, task=TASK_B)
    noise_c1, noise_c2 = torch.zeros(STATE_DIM), torch.zeros(STATE_DIM)
    noise_c1[C1], noise_c2[C2] = 0.8, 0.8
    on_c1 = one(NoiseModel(noise_c1), windows, task=TASK_B)
    on_c2 = one(NoiseModel(noise_c2), windows, task=TASK_B)
    assert on_c1.DRPE["binary"] == on_c2.DRPE["binary"] == 0.0
    assert on_c1.DRPE["task"] > 0.01 and on_c2.DRPE["task"] == 0.0
    assert on_c1.VPE > 0.0 == on_c2.VPE
    assert set(standard_weights(TASK_B)) == {"binary", "graded", "task"}
    assert "task" not in standard_weights(TASK_A)


def test_user_weights_are_normalized_and_reported_by_name(windows):
    r = one(NoiseModel.controlled(0.2, 0.2), windows, weights={"carry": offset(carrying=5.0)})
    assert r.DRPE["carry"] == pytest.approx(float(r.profile[CARRYING]))
    sq = torch.rand(4, 3, 12, generator=torch.Generator().manual_seed(0))
    assert drpe(sq, 3 * binary_weights(TASK_A)) == pytest.approx(drpe(sq, binary_weights(TASK_A)))


def test_metrics_serialize_to_json_with_named_profile(windows):
    d = one(NoiseModel.controlled(0.1, 0.1), windows).to_dict()
    back = json.loads(json.dumps(d))
    assert list(back["profile"]) == list(DIM_NAMES)
    assert len(back["step_profile"]) == 10 and len(back["step_profile"][0]) == 12
    assert set(back) == {
        "E_tot", "DRPE", "profile", "step_profile", "event_audit", "VPE", "horizon", "n_windows"
    }  # fmt: skip
    assert set(back["DRPE"]) == {"binary", "graded"}


def test_standalone_helpers_agree_with_each_other():
    sq = torch.tensor([[[0.0] * 11 + [1.2], [0.6] + [0.0] * 11]])  # (1, 2, 12)
    assert e_tot(sq) == pytest.approx(1.8 / 24)
    torch.testing.assert_close(profile(sq), sq[0].mean(dim=0))
    torch.testing.assert_close(step_profile(sq), sq[0])
    assert drpe(sq, binary_weights(TASK_A)) == pytest.approx(0.3 / 6)
    pred, target = torch.ones(2, 3, 12), torch.zeros(2, 3, 12)
    assert squared_errors(pred, target).sum() == 72
    with pytest.raises(ValueError, match="do not match"):
        squared_errors(pred, torch.zeros(2, 3, 11))


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (torch.ones(11), "shape"),
        (torch.ones(13), "shape"),
        (-binary_weights(TASK_A), "non-negative"),
        (torch.tensor([1.0] * 11 + [-0.1]), "non-negative"),
        (torch.tensor([float("nan")] + [1.0] * 11), "finite"),
        (torch.zeros(12), "all zero"),
        ("abc", "sequence"),
    ],
)
def test_bad_weights_are_rejected(weights, message):
    with pytest.raises(ValueError, match=message):
        check_weights(weights)
    with pytest.raises(ValueError, match=message):
        prediction_metrics(ConstantModel(offset()), constant_windows(), weights={"mine": weights})


def test_user_weights_cannot_shadow_a_built_in_weighting():
    with pytest.raises(ValueError, match="built-in"):
        prediction_metrics(
            ConstantModel(offset()), constant_windows(), weights={"graded": torch.ones(12)}
        )


def test_windows_with_zero_steps_are_rejected():
    windows = constant_windows(w=2, h=2)
    empty = dataclasses.replace(
        windows,
        actions=windows.actions[:, :0],
        targets=windows.targets[:, :0],
        pickup=windows.pickup[:, :0],
        door_opened=windows.door_opened[:, :0],
        prev=windows.prev[:, :0],
    )
    with pytest.raises(ValueError, match="H must be >= 1"):
        prediction_metrics(OracleModel(), empty)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("targets", torch.full((3, 2, 12), float("nan")), "finite"),
        ("targets", torch.zeros(3, 2, 11), "targets"),
        ("start", torch.zeros(0, 12), "empty"),
        ("actions", torch.full((3, 2), 4), "0..3"),
    ],
)
def test_malformed_windows_are_rejected(field, value, message):
    windows = dataclasses.replace(constant_windows(w=3, h=2), **{field: value})
    with pytest.raises(ValueError, match=message):
        prediction_metrics(OracleModel(), windows)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda s: s[:, :11], r"model output at step 1 must have shape \(3, 12\)"),
        (lambda s: torch.full_like(s, float("nan")), "model output at step 1 holds non-finite"),
        (lambda s: s.tolist(), "model output at step 1 must be a torch.Tensor"),
    ],
)
def test_malformed_model_outputs_are_rejected_naming_the_output(bad, message):
    with pytest.raises(ValueError, match=message):
        prediction_metrics(BrokenModel(bad), constant_windows(w=3, h=2))


def test_a_task_name_instead_of_a_task_is_rejected():
    with pytest.raises(TypeError, match="got str 'C'"):
        prediction_metrics(OracleModel(), constant_windows(), task="C")
