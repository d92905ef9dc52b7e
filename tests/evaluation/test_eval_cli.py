"""``python -m eval``: protocol defaults, overrides, the JSON report (strict JSON, named by its
protocol) and the checks made before any evaluation."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from helpers_learned import module_checkpoint, tiny_module

from eval.cli import build_parser, checkpoint_json_path, fill_defaults, main
from eval.report import format_table
from gridplan.evaluation.spec import CONTROLLED, LEARNED
from gridplan.util.jsonio import dumps


def _protocol(*argv: str):
    args = build_parser().parse_args(list(argv))
    fill_defaults(args)
    return args.spec


def test_built_in_models_default_to_the_controlled_protocol_and_checkpoints_to_the_learned():
    assert _protocol("--model", "oracle") == CONTROLLED
    assert _protocol() == CONTROLLED
    assert _protocol("--ckpt", "x.ckpt") == LEARNED


def test_protocol_options_override_single_fields_of_the_default():
    p = _protocol("--ckpt", "x.ckpt", "--seeds", "3", "--eval-windows", "50", "--horizon", "5")
    assert p == LEARNED.replace(seeds=(0, 1, 2), n_windows=50, horizon=5)


def test_a_noise_model_is_reported_as_json_with_its_protocol(tmp_path, capsys):
    out = tmp_path / "noise.json"
    args = ["--model", "noise", "--sigma-r", "0.35", "--depth", "1", "--seeds", "2"]
    args += ["--episodes", "2", "--eval-windows", "8", "--horizon", "3", "--no-progress"]
    assert main([*args, "--json", str(out)]) == 0
    assert "success rate" in capsys.readouterr().out
    report = json.loads(out.read_text())
    # The paper's layout (schema 1), in this order: scripts read these keys.
    assert list(report) == [
        *("model", "task", "world", "depth", "seeds", "episodes", "success", "outcomes"),
        "mean_steps",
        *("device", "E_tot", "DRPE", "profile", "step_profile", "event_audit", "VPE"),
        *("horizon", "n_windows", "ties", "spec", "spec_hash"),
    ]
    assert report["ties"] == "first"  # the default reading's rule (docs/PREREGISTERED.md)
    assert (report["task"], report["depth"], report["seeds"], report["episodes"]) == (
        "A",
        1,
        [0, 1],
        2,
    )
    assert report["success"]["n"] == 4
    assert sum(report["outcomes"].values()) == 4
    assert (report["horizon"], report["n_windows"]) == (3, 8)
    assert report["model"] == {"name": "noise", "sigma_r": 0.35, "sigma_i": 0.0}
    assert report["DRPE"]["graded"] > 0  # relevant noise errs on the relevant dims
    with pytest.raises(SystemExit):
        main([*args, "--json", str(out)])  # refuses to overwrite without --force
    assert "already exists" in capsys.readouterr().err


def _reject(constant: str):
    raise ValueError(f"bare {constant} in JSON")


def strict_load(text: str):
    """``json.loads`` as a strict parser reads it: NaN, Infinity and -Infinity refused."""
    return json.loads(text, parse_constant=_reject)


def test_dumps_writes_undefined_numbers_as_null():
    text = dumps({"se": math.nan, "hi": math.inf, "xs": [1.0, -math.inf], "n": 1})
    assert strict_load(text) == {"se": None, "hi": None, "xs": [1.0, None], "n": 1}
    with pytest.raises(ValueError, match="bare NaN"):
        strict_load(json.dumps({"se": math.nan}))


def test_a_single_episode_report_is_strict_json_with_a_null_se_printed_as_na(tmp_path, capsys):
    out = tmp_path / "one.json"
    args = ["--model", "oracle", "--depth", "1", "--seeds", "1", "--episodes", "1"]
    args += ["--eval-windows", "4", "--horizon", "2", "--no-progress", "--json", str(out)]
    assert main(args) == 0
    report = strict_load(out.read_text())
    assert report["success"]["n"] == 1
    assert report["success"]["se"] is None
    printed = capsys.readouterr().out
    assert "(SE, n=1)" in printed and "± n/a" in printed
    assert "± n/a" in format_table(report)  # the saved report prints the same
    assert "ties          first (rule among tied best first actions)" in printed
    assert "random (rule" in format_table({**report, "ties": "random"})


def test_a_non_default_protocol_names_its_report_file():
    ckpt = Path("runs/x/version_0/checkpoints/best.ckpt")
    smoke = LEARNED.replace(seeds=(0,), episodes=5)
    assert checkpoint_json_path(ckpt, smoke).name == "best.eval.A-d2-s1x5.json"
    assert checkpoint_json_path(ckpt, LEARNED.replace(episodes=10)).name == (
        "best.eval.A-d2-s5x10.json"
    )
    assert checkpoint_json_path(ckpt, LEARNED.replace(seeds=(3, 4))).name == (
        "best.eval.A-d2-sfrom3-2x40.json"
    )
    quick = LEARNED.replace(depth=3, n_windows=100, horizon=5)
    assert checkpoint_json_path(ckpt, quick.replace(task="B")).name == "best.eval.B-d3-w100-h5.json"
    assert checkpoint_json_path(ckpt, LEARNED).name == "best.eval.json"


def test_a_smoke_evaluation_of_a_checkpoint_never_takes_the_protocol_report(tmp_path, capsys):
    ckpt = module_checkpoint(tiny_module(tmp_path), tmp_path / "best.ckpt")
    args = ["--ckpt", str(ckpt), "--seeds", "1", "--episodes", "2", "--eval-windows", "4"]
    assert main([*args, "--no-progress"]) == 0
    written = tmp_path / "best.eval.A-d2-s1x2-w4.json"
    assert strict_load(written.read_text())["episodes"] == 2
    assert not (tmp_path / "best.eval.json").exists()
    assert f"json: {written}" in capsys.readouterr().out


def test_eval_cli_rejects_a_too_deep_search_up_front_naming_depth_and_budget(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--model", "oracle", "--depth", "20", "--no-progress"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "depth 20 needs" in err and "max_memory = 2.00 GiB" in err
    assert "largest depth that fits is 11" in err


def test_ties_random_is_recorded_and_names_a_checkpoint_report_of_its_own(tmp_path, capsys):
    out = tmp_path / "oracle.json"
    args = ["--model", "oracle", "--depth", "1", "--seeds", "1", "--episodes", "2"]
    args += ["--eval-windows", "4", "--horizon", "2", "--no-progress", "--ties", "random"]
    assert main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["ties"] == "random"
    ckpt = Path("runs/x/version_0/checkpoints/best.ckpt")
    first = LEARNED.replace(planner={"ties": "first"})
    assert checkpoint_json_path(ckpt, first).name == "best.eval.json"
    assert checkpoint_json_path(ckpt, LEARNED.replace(planner={"ties": "random"})).name == (
        "best.eval.A-d2-ties-random.json"
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--ties", "lowest"])
    assert "invalid choice: 'lowest'" in capsys.readouterr().err


def test_another_planner_takes_its_own_checkpoint_file(tmp_path):
    ckpt = tmp_path / "best.ckpt"
    search = LEARNED.replace(planner={"name": "search"})
    assert checkpoint_json_path(ckpt, search).name == "best.eval.json"
    assert checkpoint_json_path(
        ckpt, LEARNED.replace(planner={"name": "cem"})
    ).name == "best.eval.A-d2-cem.json"
    mppi = {"name": "mppi", "ties": "random", "settings": {"candidates": 32}}
    named = checkpoint_json_path(ckpt, LEARNED.replace(planner=mppi))
    assert named.name == "best.eval.A-d2-ties-random-mppi-candidates=32.json"


def test_usage_names_the_command_the_user_typed(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/gridplan-eval", "--help"])
    assert build_parser().format_usage().startswith("usage: gridplan-eval ")
    monkeypatch.setattr(sys, "argv", ["/repo/eval/__main__.py", "--help"])
    assert build_parser().format_usage().startswith("usage: python -m eval ")
