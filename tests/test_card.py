"""The evaluation card: file names beside the report, gates and verdict, figures, no silent
overwrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gridplan
from gridplan.card import GATES, build_card, card_paths, write_card
from gridplan.ladder.evaluate import LadderProtocol
from gridplan.models import NoiseModel, OracleModel

PROTOCOL = LadderProtocol(
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
            OracleModel(), depth=2, protocol=PROTOCOL, model_info={"name": "oracle"}
        ).to_dict(),
        "noisy": gridplan.evaluate(
            NoiseModel.controlled(0.35, 0.1),
            depth=2,
            protocol=PROTOCOL,
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


def test_relevant_noise_fails_the_gates_with_reasons(reports):
    card = build_card(reports["noisy"])
    failed = [g["level"] for g in card["gates"] if g["passed"] is False]
    assert "L4" in failed
    assert card["verdict"].startswith("Not fit")
    assert "L4 fails (decision_agreement >= 0.9)" in card["verdict"]
    assert "exploits" in card["verdict"]


def test_a_card_without_gate_levels_gives_no_verdict():
    report = gridplan.evaluate(OracleModel(), depth=2, protocol=PROTOCOL, levels=["L7"])
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
    card = json.loads(written["json"].read_text())
    assert card["card_schema_version"] and card["report"] == "noisy.json"
    assert written["profile"].stat().st_size > 1000
    with pytest.raises(FileExistsError, match="already exist"):
        write_card(reports["noisy"], out)
    write_card(reports["noisy"], out, overwrite=True)


def test_cards_need_a_current_report():
    with pytest.raises(ValueError, match="schema"):
        build_card({"task": "A", "depth": 2})
