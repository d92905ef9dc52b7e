"""Paired comparisons: common random numbers, the bootstrap's levels and warnings, and the
side-by-side table."""

from __future__ import annotations

import json

import pytest

import gridplan
from gridplan.evaluation.spec import EvalSpec
from gridplan.models.noise import NoiseModel, OracleModel

PROTOCOL = EvalSpec(
    seeds=(0, 1),
    episodes=5,
    horizon=4,
    n_windows=32,
    branch_states=32,
    anchor_starts=8,
    anchor_rollouts=2,
    probe_questions=8,
    xgap_states=16,
    n_resamples=200,
)


def test_a_model_compared_with_itself_differs_by_exactly_zero():
    c = gridplan.compare(
        NoiseModel.controlled(0.2, 0.1),
        NoiseModel.controlled(0.2, 0.1),
        depth=2,
        spec=PROTOCOL,
    )
    assert (c.success.difference, c.success.low, c.success.high) == (0.0, 0.0, 0.0)
    assert c.decision_regret.difference == 0.0
    assert all(row["difference"] == 0.0 for row in c.side_by_side)


def test_irrelevant_noise_against_the_oracle_differs_by_exactly_nothing():
    # Common random numbers and Prop. 1: M(0, sigma_i) decides exactly like the oracle, so
    # every decision-level difference is 0 and so is its interval.
    c = gridplan.compare(NoiseModel.controlled(0.0, 0.5), OracleModel(), depth=2, spec=PROTOCOL)
    assert (c.success.difference, c.success.low, c.success.high) == (0.0, 0.0, 0.0)
    assert c.decision_regret.difference == 0.0
    rows = {(r["level"], r["metric"]): r["difference"] for r in c.side_by_side}
    assert rows[("L4", "decision_agreement")] == 0.0 and rows[("probe", "regret")] == 0.0
    assert rows[("L4", "ipe")] == 0.0  # the relevant projection only


def test_oracle_against_relevant_noise_with_an_indicative_interval():
    c = gridplan.compare(
        OracleModel(),
        # Strong relevant noise, so that a few depth-2 episodes surely tell the two apart.
        NoiseModel.controlled(1.5, 0.1),
        names=("oracle", "noisy"),
        depth=2,
        spec=PROTOCOL,
        levels=["L4", "L7"],
    )
    assert c.success.levels == ("training seed", "evaluation seed", "episode")
    assert c.success.units == (1, 2, 5)
    assert c.success.difference > 0 and c.success.low <= c.success.difference
    # Two evaluation seeds at the top level that varies: indicative only.
    assert "indicative" in c.success.warning
    assert c.decision_regret.difference < 0
    metrics = {(r["level"], r["metric"]) for r in c.side_by_side}
    assert ("L4", "decision_regret") in metrics and ("L5", "value_error") not in metrics
    text = "\n".join(c.lines())
    assert "oracle" in text and "warning" in text
    json.dumps(c.to_dict(), allow_nan=False)


def test_training_seeds_pair_by_position():
    arm_a = [NoiseModel.controlled(0.0, 0.1), NoiseModel.controlled(0.0, 0.3)]
    arm_b = [NoiseModel.controlled(0.3, 0.1), NoiseModel.controlled(0.3, 0.3)]
    c = gridplan.compare(arm_a, arm_b, depth=2, spec=PROTOCOL, levels=["L7"])
    assert c.success.units == (2, 2, 5)
    assert "only 2 top-level units (training seed)" in c.success.warning
    assert len(c.reports_a) == 2
    with pytest.raises(ValueError, match="same number of models"):
        gridplan.compare(arm_a, arm_b[:1], depth=2, spec=PROTOCOL, levels=["L7"])
