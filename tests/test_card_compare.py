"""The evaluation card (contract, gates fixed up front, profile, figures, verdict) and the paired
comparison of two models on common random numbers."""

from __future__ import annotations

import json

import pytest

import gridplan
from gridplan.card import CARD_SCHEMA, GATES, build_card, card_paths, write_card
from gridplan.ladder.evaluate import LadderProtocol
from gridplan.models import NoiseModel, OracleModel
from gridplan.report import check_schema, ladder_scalars

PROTOCOL = LadderProtocol(
    seeds=(0, 1),
    episodes=6,
    horizon=4,
    n_windows=32,
    branch_states=32,
    anchor_starts=16,
    anchor_rollouts=2,
    probe_questions=16,
    xgap_states=32,
    n_resamples=100,
)
KWARGS = {"depth": 2, "protocol": PROTOCOL}


@pytest.fixture(scope="module")
def oracle_report() -> dict:
    return gridplan.evaluate(OracleModel(), model_info={"name": "oracle"}, **KWARGS).to_dict()


@pytest.fixture(scope="module")
def noisy_report() -> dict:
    model = NoiseModel.controlled(0.35, 0.1)
    info = {"name": "noise", "sigma_r": 0.35, "sigma_i": 0.1}
    return gridplan.evaluate(model, model_info=info, **KWARGS).to_dict()


def test_card_paths_sit_beside_the_report(tmp_path):
    assert card_paths(tmp_path / "out.json")["markdown"] == tmp_path / "out.card.md"
    paths = card_paths(tmp_path / "best.eval.json")
    assert paths["markdown"].name == "best.eval.card.md"
    assert paths["json"].name == "best.eval.card.json"


def test_the_oracle_passes_every_gate(oracle_report):
    card = build_card(oracle_report, "oracle.json")
    assert card["card_schema_version"] == CARD_SCHEMA
    assert [g["passed"] for g in card["gates"]] == [True, True, True]
    assert card["verdict"].startswith("Fit for planning with the depth-2 planner on task A")
    assert card["contract"]["task"]["relevant_dims"] == [
        "agent_x",
        "agent_y",
        "key_x",
        "key_y",
        "carrying",
        "door_open",
    ]
    assert card["levels"] == ["L1", "L4", "L5", "L6", "L7", "probe"]


def test_relevant_noise_fails_the_gates_and_the_verdict_says_why(noisy_report):
    card = build_card(noisy_report)
    by_level = {g["level"]: g for g in card["gates"]}
    assert by_level["L4"]["passed"] is False
    assert by_level["L4"]["rule"] == "decision_agreement >= 0.9"
    assert card["verdict"].startswith("Not fit for planning")
    assert "L4 fails (decision_agreement >= 0.9)" in card["verdict"]
    assert "In closed loop it succeeds in" in card["verdict"]


def test_gates_are_fixed_thresholds_and_missing_levels_give_no_verdict():
    assert [(g.level, g.metric, g.threshold) for g in GATES] == [
        ("L4", "decision_agreement", 0.90),
        ("L5", "value_error", 0.05),
        ("L6", "pra", 0.80),
    ]
    only_l4 = gridplan.evaluate(OracleModel(), levels=["L4"], **KWARGS).to_dict()
    card = build_card(only_l4)
    assert [g["passed"] for g in card["gates"]] == [True, None, None]
    assert card["verdict"].startswith("No verdict") and "L5, L6" in card["verdict"]


def test_write_card_writes_markdown_json_and_figures_and_never_overwrites(tmp_path, noisy_report):
    written = write_card(noisy_report, tmp_path / "out.json")
    assert set(written) == {"markdown", "json", "profile", "values"}
    text = written["markdown"].read_text()
    for heading in ("## Decision contract", "## Gates", "## Profile", "## Figures", "## Verdict"):
        assert heading in text
    assert "| L0 | visual plausibility | not applicable" in text
    assert "![values](out.card.values.png)" in text
    card = json.loads(written["json"].read_text())
    assert card["figures"] == {"profile": "out.card.profile.png", "values": "out.card.values.png"}
    assert all(p.stat().st_size > 0 for p in written.values())
    before = written["markdown"].read_text()
    with pytest.raises(FileExistsError, match="--force"):
        write_card(noisy_report, tmp_path / "out.json")
    assert written["markdown"].read_text() == before
    write_card(noisy_report, tmp_path / "out.json", overwrite=True)


def test_cards_need_a_current_report():
    with pytest.raises(ValueError, match="schema_version None"):
        build_card({"success": {"mean": 1.0}})
    with pytest.raises(ValueError, match="schema 2.x"):
        check_schema({"schema_version": "1.0"})


def test_every_ladder_number_becomes_a_tensorboard_scalar(noisy_report):
    tags = ladder_scalars(noisy_report)
    for tag in (
        "eval/ladder/L4/decision_agreement",
        "eval/ladder/L4/decision_regret",
        "eval/ladder/L5/value_error",
        "eval/ladder/L5/value_error_per_policy/greedy",
        "eval/ladder/L6/pra",
        "eval/ladder/L6/J_true/greedy",
        "eval/ladder/L7/xgap",
        "eval/ladder/probe/regret",
    ):
        assert tag in tags
    assert (
        tags["eval/ladder/L4/decision_agreement"]
        == (noisy_report["ladder"]["L4"]["decision_agreement"]["mean"])
    )


def test_irrelevant_noise_against_the_oracle_differs_by_exactly_nothing():
    # Common random numbers and Prop. 1: M(0, sigma_i) decides exactly like the oracle, so every
    # paired difference is 0 and so is its interval.
    result = gridplan.compare(NoiseModel.controlled(0.0, 0.5), OracleModel(), **KWARGS)
    assert (result.success.difference, result.success.low, result.success.high) == (0, 0, 0)
    assert result.decision_regret.difference == 0.0
    rows = {(r["level"], r["metric"]): r for r in result.side_by_side}
    assert rows[("L4", "decision_agreement")]["difference"] == 0.0
    assert result.to_dict()["arms"] == ["A", "B"]


def test_relevant_noise_against_the_oracle_with_few_training_seeds_is_indicative():
    arm_a = [NoiseModel.controlled(1.5, 0.1), NoiseModel.controlled(1.5, 0.1)]
    arm_b = [OracleModel(), OracleModel()]
    result = gridplan.compare(arm_a, arm_b, names=("noisy", "oracle"), **KWARGS)
    assert result.success.difference < 0 and result.decision_regret.difference > 0
    assert result.success.units == (2, 2, 6)
    assert "only 2 top-level units (training seed)" in result.success.warning
    text = "\n".join(result.lines())
    assert "success A - B" in text and "warning: only 2" in text
    with pytest.raises(ValueError, match="same number of models"):
        gridplan.compare(arm_a, [OracleModel()], **KWARGS)
