"""Readings at the boundaries: ``python -m eval --reading``, ``reproduce.py --reading`` and the
runner's folders (a non-default reading never writes over the default's results)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from eval.cli import main as eval_main
from gridplan.core import readings
from gridplan.experiments import GROUPS
from gridplan.experiments.profiles import PROFILES
from gridplan.experiments.runner import (
    Group,
    group_folders,
    read_done,
    reading_record,
    run_groups,
)
from gridplan.experiments.tables import GroupReport
from tests.experiments.test_templates import load_script

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--depth", "1", "--seeds", "1", "--episodes", "2", "--eval-windows", "16"]
SMALL += ["--horizon", "10", "--no-progress"]


def eval_json(tmp_path: Path, name: str, *argv: str) -> dict:
    out = tmp_path / f"{name}.json"
    assert eval_main([*argv, *SMALL, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_eval_takes_a_reading_and_names_it_only_when_it_is_not_the_default(tmp_path):
    noise = ["--model", "noise", "--sigma-r", "0.35", "--sigma-i", "0.1"]
    default = eval_json(tmp_path, "default", *noise)
    explicit = eval_json(tmp_path, "explicit", *noise, "--reading", "project")
    other = eval_json(tmp_path, "other", *noise, "--reading", "carried-flags")
    assert default["model"] == {"name": "noise", "sigma_r": 0.35, "sigma_i": 0.1}
    assert explicit == default
    assert other["model"] == {**default["model"], "reading": "carried-flags"}
    # Carried c1/c2 noise compounds and the flags get sigma_r itself: more error everywhere.
    assert other["E_tot"] > default["E_tot"]
    assert other["DRPE"]["graded"] > 2 * default["DRPE"]["graded"]
    oracle = eval_json(tmp_path, "oracle", "--model", "oracle", "--reading", "carried-flags")
    assert oracle["model"]["reading"] == "carried-flags"
    assert oracle["E_tot"] < eval_json(tmp_path, "oracle-default", "--model", "oracle")["E_tot"]


def test_eval_rejects_an_unknown_reading_and_a_reading_for_a_checkpoint(capsys):
    with pytest.raises(SystemExit):
        eval_main(["--model", "oracle", "--reading", "no-such-reading"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        eval_main(["--ckpt", "x.ckpt", "--reading", "belief"])
    assert "--reading applies to the built-in models" in capsys.readouterr().err


def toy_group(name: str, reads=(), reading_free: bool = False, seen=None) -> Group:
    """A group recording the reading it ran under and looking up the groups it reads."""

    def run(ctx):
        if seen is not None:
            seen.append((ctx.name, ctx.reading.name))
        for other in reads:
            ctx.finished_group(other)
        ctx.write_csv("numbers.csv", [{"value": 1}])
        report = GroupReport(f"{name} report")
        report.verdict("the toy effect", True, "always")
        return report

    configs = {p: 1 for p in PROFILES}
    return Group(name, "toy", run, configs, tuple(reads), reading_free)


def test_a_reading_writes_its_own_folders_and_shares_the_reading_free_ones(tmp_path):
    seen = []
    registry = {
        "free": toy_group("free", reading_free=True, seen=seen),
        "grid": toy_group("grid", reads=("free",), seen=seen),
    }
    belief = readings.get("belief")
    assert group_folders(registry, tmp_path, belief) == {
        "free": tmp_path / "free",
        "grid": tmp_path / "belief" / "grid",
    }
    assert run_groups(registry, None, tmp_path, "tiny", progress=False) == {
        "free": "ran",
        "grid": "ran",
    }
    default_grid = read_done(tmp_path / "grid")
    assert default_grid["reading"] == reading_record(readings.PROJECT)
    status = run_groups(registry, None, tmp_path, "tiny", progress=False, reading=belief)
    assert status == {"free": "skipped", "grid": "ran"}
    assert seen == [("free", "project"), ("grid", "project"), ("grid", "belief")]
    done = read_done(tmp_path / "belief" / "grid")
    assert done["reading"] == {"name": "belief", **belief.switches()}
    assert done["inputs"] == {"free": read_done(tmp_path / "free")["run_id"]}
    assert read_done(tmp_path / "free")["reading"] is None
    assert read_done(tmp_path / "grid") == default_grid, "the default's results are untouched"
    assert "reading `belief`" in (tmp_path / "belief" / "grid" / "table.md").read_text()
    assert "reading `" not in (tmp_path / "grid" / "table.md").read_text()


def test_a_group_of_another_reading_is_not_reused(tmp_path):
    registry = {"grid": toy_group("grid"), "user": toy_group("user", reads=("grid",))}
    run_groups(registry, ["grid"], tmp_path, "tiny", progress=False)
    # A finished "grid" of the default reading planted where the belief reading looks.
    (tmp_path / "belief").mkdir()
    (tmp_path / "grid").rename(tmp_path / "belief" / "grid")
    belief = readings.get("belief")
    run_groups(registry, ["user"], tmp_path, "tiny", progress=False, reading=belief)
    assert read_done(tmp_path / "belief" / "user")["inputs"] == {"grid": None}


def test_reproduce_reading_runs_the_controlled_groups_into_the_readings_folder(tmp_path):
    cli = load_script("reproduce")
    args = ["--profile", "tiny", "--out", str(tmp_path), "--no-progress", "--only", "e5"]
    assert cli.main(args) == 0
    assert cli.main([*args, "--reading", "noisy-bits"]) == 0
    default = json.loads((tmp_path / "e5" / "results.json").read_text())
    carried = json.loads((tmp_path / "noisy-bits" / "e5" / "results.json").read_text())
    assert "reading" not in default and "reading" not in default["config"]
    e_default = {(r["model"], r["task"]): r["E_tot"] for r in default["models"]}
    e_carried = {(r["model"], r["task"]): r["E_tot"] for r in carried["models"]}
    # c1/c2 noise of 0.8 compounds when the bits carry their noisy value.
    assert all(e_carried[k] > 2 * e_default[k] for k in e_default)


def test_every_group_but_the_learned_models_depends_on_the_reading():
    assert {n for n, g in GROUPS.items() if g.reading_free} == {"e3"}
    assert all(dataclasses.is_dataclass(r) for r in map(readings.get, readings.names()))


def test_the_readings_script_tabulates_each_reading_and_results_doc_includes_it(tmp_path):
    out = tmp_path / "results"
    args = ["--profile", "tiny", "--out", str(out), "--no-progress"]
    assert load_script("readings").main([*args, "--readings", "project,carried-flags"]) == 0
    assert (out / "e1" / "done.json").exists()
    assert (out / "carried-flags" / "e5" / "done.json").exists()
    text = (out / "readings.md").read_text()
    recorded = json.loads((out / "readings.json").read_text())
    summary = recorded["readings"]
    assert set(summary) == {"project", "carried-flags"}
    assert [c["scorer"] for c in recorded["decision_costs"]] == [
        "FusedNoiseScorer",
        "FusedNoiseScorer",
        "GenericScorer",
        "TreeScorer",
    ]
    e1 = {n: s["e1"] for n, s in summary.items()}
    # The expected-distractor oracle halves the floor; the pair's E_tot moves with the reading.
    assert e1["carried-flags"]["oracle_E_tot"] < 0.7 * e1["project"]["oracle_E_tot"]
    for heading in ("Table 2 under each reading", "Which reading reproduces which effect"):
        assert f"### {heading}" in text
    assert "| **paper** | 0.020 | 0.151 / 0.152 | 1% |" in text
    assert "**effects reproduced**" in text
    doc = tmp_path / "RESULTS.md"
    results_doc = load_script("results_doc")
    argv = ["--results", str(out), "--doc", str(doc), "--allow-profile", "tiny"]
    assert results_doc.main(argv) == 0
    assert "## Readings of the paper's ambiguous choices" in doc.read_text()


def test_the_readings_script_rejects_an_unknown_reading(tmp_path, capsys):
    with pytest.raises(SystemExit):
        load_script("readings").main(["--readings", "nope", "--out", str(tmp_path)])
    assert "unknown reading 'nope'" in capsys.readouterr().err


def _finished(folder: Path, profile: str, verdicts: dict[str, bool | None]) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text("{}")
    rows = [{"claim": c, "reproduced": v} for c, v in verdicts.items()]
    (folder / "done.json").write_text(json.dumps({"profile": profile, "verdicts": rows}))


def test_learned_groups_are_tabulated_per_tie_rule_and_training_preset(tmp_path):
    script = load_script("readings")
    _finished(tmp_path / "e3", "full", {"random data fails": False, "ordering": True})
    _finished(tmp_path / "e7", "full", {"DRPE ranks": True})
    _finished(tmp_path / "paper-error-scale" / "e3", "full", {"random data fails": True})
    _finished(tmp_path / "project-ties-random" / "e7", "quick", {"DRPE ranks": False})
    _finished(tmp_path / "paper" / "e1", "full", {"pair": True})
    columns = script.learned_columns(tmp_path, "full")
    assert columns == {
        "default": {
            "verdicts": {
                "e3": {"random data fails": False, "ordering": True},
                "e7": {"DRPE ranks": True},
            }
        },
        "paper-error-scale": {"verdicts": {"e3": {"random data fails": True}}},
    }
    table = script.verdict_matrix(columns, script.LEARNED).splitlines()
    assert table[2] == "| e3 | random data fails | ✗ | ✓ |"
    assert table[3] == "| e3 | ordering | ✓ | — |"
    assert table[-1] == "|  | **effects reproduced** | 2 of 3 | 1 of 1 |"
