"""The evaluation card: file names beside the report, gates and verdict, figures, no silent
overwrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gridplan
from gridplan.evaluation.card import GATES, build_card, card_paths, write_card
from gridplan.evaluation.schema import check_schema, ladder_scalars
from gridplan.evaluation.spec import EvalSpec
from gridplan.models.noise import NoiseModel, OracleModel

PROTOCOL = EvalSpec(
    seeds=(0,),
    episodes=6,
    horizon=4,
    n_windows=48,
    branch_states=48,
    anchor_starts=16,
    anchor_rollouts=2,
    probe_questions=16,
    xgap_states=32,
    n_resamples=100,
)


@pytest.fixture(scope="module")
def reports() -> dict:
    return {
        "oracle": gridplan.evaluate(
            OracleModel(), depth=2, spec=PROTOCOL, model_info={"name": "oracle"}
        ).to_dict(),
        "noisy": gridplan.evaluate(
            NoiseModel.controlled(0.35, 0.1),
            depth=2,
            spec=PROTOCOL,
            model_info={"name": "noise", "sigma_r": 0.35, "sigma_i": 0.1},
        ).to_dict(),
    }


def test_card_files_sit_beside_the_report():
    paths = card_paths("runs/x/best.eval.json")
    assert paths["markdown"] == Path("runs/x/best.eval.card.md")
    assert paths["json"] == Path("runs/x/best.eval.card.json")
    assert card_paths("out.json")["markdown"] == Path("out.card.md")


def test_the_oracle_passes_every_gate(reports):
    card = build_card(reports["oracle"])
    assert [g["passed"] for g in card["gates"]] == [True] * len(GATES)
    assert card["verdict"].startswith("Fit for planning with the depth-2 planner on task A")
    assert card["levels"] == ["L1", "L4", "L5", "L6", "L7", "probe"]
    relevant = ["agent_x", "agent_y", "key_x", "key_y", "carrying", "door_open"]
    assert card["contract"]["task"]["relevant_dims"] == relevant
    assert card["contract"]["horizon"] == {"episode": 60, "lookahead": 2, "open_loop": 4}


def test_the_gates_are_fixed_thresholds():
    assert [(g.level, g.metric, g.threshold, g.higher_is_better) for g in GATES] == [
        ("L4", "decision_agreement", 0.90, True),
        ("L5", "value_error", 0.05, False),
        ("L6", "pra", 0.80, True),
    ]


def test_relevant_noise_fails_the_gates_with_reasons(reports):
    card = build_card(reports["noisy"])
    failed = [g["level"] for g in card["gates"] if g["passed"] is False]
    assert "L4" in failed
    assert card["verdict"].startswith("Not fit")
    assert "L4 fails (decision_agreement >= 0.9)" in card["verdict"]
    assert "exploits" in card["verdict"]


def test_a_card_without_gate_levels_gives_no_verdict():
    report = gridplan.evaluate(OracleModel(), depth=2, spec=PROTOCOL, levels=["L7"])
    card = build_card(report.to_dict())
    assert all(g["passed"] is None for g in card["gates"])
    assert card["verdict"].startswith("No verdict")


def test_write_card_writes_markdown_json_and_figures_and_never_overwrites(reports, tmp_path):
    out = tmp_path / "noisy.json"
    written = write_card(reports["noisy"], out)
    assert set(written) == {"markdown", "json", "profile", "values"}
    text = written["markdown"].read_text()
    for heading in (
        "## Decision contract",
        "## Levels measured",
        "## Gates",
        "## Profile",
        "## Figures",
        "## Verdict",
    ):
        assert heading in text
    assert "![values](noisy.card.values.png)" in text
    assert "| L0 | visual plausibility | not applicable" in text
    card = json.loads(written["json"].read_text())
    assert card["card_schema_version"] and card["report"] == "noisy.json"
    assert written["profile"].stat().st_size > 1000
    with pytest.raises(FileExistsError, match="already exist"):
        write_card(reports["noisy"], out)
    write_card(reports["noisy"], out, overwrite=True)


def test_cards_need_a_current_report():
    with pytest.raises(ValueError, match="schema"):
        build_card({"task": "A", "depth": 2})
    with pytest.raises(ValueError, match="schema 2.x"):
        check_schema({"schema_version": "1.0"})


def test_every_ladder_number_becomes_a_tensorboard_scalar(reports):
    tags = ladder_scalars(reports["noisy"])
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
    l4 = reports["noisy"]["ladder"]["L4"]
    assert tags["eval/ladder/L4/decision_agreement"] == l4["decision_agreement"]["mean"]


def test_the_card_shows_l1_beside_the_oracle_floor_with_profile_intervals(reports, tmp_path):
    noisy = reports["noisy"]
    floor = reports["oracle"]["E_tot"]
    # The floor is the oracle's own E_tot on the same windows: positive (stochastic
    # distractors) and the same whichever model is evaluated.
    assert noisy["oracle_floor"]["E_tot"] == pytest.approx(floor) and floor > 0
    assert noisy["oracle_floor"]["DRPE"]["graded"] == 0.0
    for dim, (low, high) in noisy["profile_ci"].items():
        assert low <= noisy["profile"][dim] <= high, dim
    assert noisy["profile_ci"]["agent_x"][1] > noisy["profile_ci"]["agent_x"][0]
    written = write_card(noisy, tmp_path / "noisy.json")
    text = written["markdown"].read_text()
    assert f"| oracle_floor/E_tot | {floor:.4f} |  | the oracle's E_tot, same windows" in text
    assert "| agent_x | yes | " in text and "| d2_y | no | 0.000 |" in text
    card = json.loads(written["json"].read_text())
    assert card["l1"]["oracle_floor"]["E_tot"] == pytest.approx(floor)


def test_what_to_fix_is_derived_from_the_measurements(reports):
    fixes = build_card(reports["noisy"])["what_to_fix"]
    # Relevant noise fails the decision gate first, then names the heaviest DRPE dim.
    assert fixes[0].startswith("L4 (decision_agreement >= 0.9)")
    heaviest = next(f for f in fixes if "weighs most in DRPE" in f)
    assert heaviest.split()[0] in ("agent_x", "agent_y", "key_x", "key_y", "carrying", "door_open")
    oracle = build_card(reports["oracle"])["what_to_fix"]
    assert not any("weighs most" in f or f.startswith("L") for f in oracle)
    missed = dict(reports["oracle"], event_audit={**reports["oracle"]["event_audit"]})
    missed["event_audit"]["carrying_at_pickup"] = 0.19
    fixes = build_card(missed)["what_to_fix"]
    assert any(f.startswith("key pickups are missed: predicted carrying 0.19") for f in fixes)
    without_l1 = {k: v for k, v in reports["oracle"].items() if k != "profile"}
    assert build_card(without_l1)["what_to_fix"] != []
