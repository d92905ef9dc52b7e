"""The learned-error-scale preset: Rule 2's choice (docs/PREREGISTERED.md), the preset's
overrides, and where a run under it writes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from gridplan.core.readings import PROJECT
from gridplan.experiments import GROUPS, presets
from gridplan.experiments.runner import group_folders, preset_folders, preset_registry
from gridplan.training.config import compose

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "error_scale_preset", REPO / "scripts" / "error_scale_preset.py"
    )
    module = importlib.util.module_from_spec(spec)
    # A dataclass looks its module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def _cand(steps: int, *e_tot: float):
    return SCRIPT.Candidate(steps, e_tot, (1,) * len(e_tot), (0.0,) * len(e_tot))


def test_rule_2_picks_the_nearest_mean_in_log_ratio_and_says_whether_the_target_is_inside():
    # |ln(0.10/0.145)| = 0.372 > |ln(0.20/0.145)| = 0.322: 40 steps, inside the range.
    best, reached = SCRIPT.choose([_cand(10, 0.2, 0.2), _cand(40, 0.1, 0.1), _cand(80, 0.05)])
    assert (best.max_steps, reached) == (10, True)
    # All below the target: the largest mean (nearest end) wins, and the target is not reached.
    best, reached = SCRIPT.choose([_cand(10, 0.052), _cand(20, 0.066), _cand(40, 0.052)])
    assert (best.max_steps, reached) == (20, False)
    # An exact tie in |ln| (0.145 * 2 and 0.145 / 2) goes to the larger budget.
    best, _ = SCRIPT.choose([_cand(10, 0.29), _cand(20, 0.0725)])
    assert best.max_steps == 20
    assert best.distance() == pytest.approx(0.6931, abs=1e-4)


def test_rule_2_refuses_no_candidates_and_unusable_errors():
    with pytest.raises(ValueError, match="no candidate"):
        SCRIPT.choose([])
    with pytest.raises(ValueError, match=r"candidates \[20\] have no finite positive"):
        SCRIPT.choose([_cand(10, 0.1), _cand(20, float("nan"))])


def test_rule_2_is_only_the_registered_procedure():
    assert SCRIPT.TARGET == 0.145
    assert SCRIPT.is_rule_2("full", SCRIPT.CANDIDATES, (0, 1, 2))
    assert SCRIPT.CANDIDATES == (10, 20, 40, 80, 160, 320, 640, 1280)
    assert not SCRIPT.is_rule_2("tiny", SCRIPT.CANDIDATES, (0, 1, 2))
    assert not SCRIPT.is_rule_2("full", (10, 20), (0, 1, 2))


def test_an_existing_selection_is_not_replaced_without_force(tmp_path, capsys):
    out = tmp_path / "sel"
    out.mkdir()
    (out / SCRIPT.SELECTION_JSON).write_text(json.dumps({"chosen": 20}))
    with pytest.raises(SystemExit) as err:
        SCRIPT.main(["--out", str(out)])
    assert err.value.code == 2
    assert "exists; --force replaces it" in capsys.readouterr().err
    assert json.loads((out / SCRIPT.SELECTION_JSON).read_text()) == {"chosen": 20}


def test_the_committed_preset_is_the_committed_selections_choice():
    selection = json.loads((REPO / "docs" / "error_scale_selection.json").read_text())
    assert selection["rule_2"] and selection["target"] == 0.145
    assert [c["max_steps"] for c in selection["candidates"]] == list(SCRIPT.CANDIDATES)
    chosen = min(selection["candidates"], key=lambda c: (c["abs_log_ratio"], -c["max_steps"]))[
        "max_steps"
    ]
    assert selection["chosen"] == chosen
    preset = presets.get("paper-error-scale")
    assert preset.overrides() == (f"trainer.max_steps={chosen}",)
    assert compose(["experiment=paper_error_scale"]).trainer.max_steps == chosen


def test_the_preset_trains_the_learned_groups_into_their_own_folders(tmp_path):
    preset = presets.get("paper-error-scale")
    registry = preset_registry(GROUPS, preset)
    extra = preset.overrides()
    for name in ("e3", "e4", "e7"):
        before = GROUPS[name].configs["full"].train_overrides
        assert registry[name].configs["full"].train_overrides == (*before, *extra)
    assert registry["e1"] is GROUPS["e1"]
    folders = preset_folders(registry, tmp_path, PROJECT, preset)
    default = group_folders(GROUPS, tmp_path)
    assert folders["e3"] == tmp_path / "paper-error-scale" / "e3"
    assert folders["e4"] == tmp_path / "paper-error-scale" / "e4"
    assert folders["e1"] == default["e1"] == tmp_path / "e1"
    with pytest.raises(ValueError, match="unknown preset 'bogus'; valid presets: paper-error"):
        presets.get("bogus")


@pytest.mark.slow
def test_reproduce_under_the_preset_writes_its_own_folders_and_e4_reuses_its_e3(tmp_path):
    reproduce = importlib.util.spec_from_file_location(
        "reproduce", REPO / "scripts" / "reproduce.py"
    )
    module = importlib.util.module_from_spec(reproduce)
    reproduce.loader.exec_module(module)
    out = tmp_path / "results"
    args = ["--only", "e3,e4", "--profile", "tiny", "--out", str(out), "--no-progress"]
    assert module.main([*args, "--preset", "paper-error-scale"]) == 0
    assert not (out / "e3").exists() and not (out / "e4").exists()
    done = json.loads((out / "paper-error-scale" / "e3" / "done.json").read_text())
    assert done["config"]["train_overrides"][-1] == "trainer.max_steps=20"
    e4 = json.loads((out / "paper-error-scale" / "e4" / "results.json").read_text())
    assert {e["source"] for e in e4["estimates"]} == {"e3"}
    assert e4["config"]["train_overrides"] == ["trainer.max_steps=20"]
