"""Report files: strict JSON (no bare NaN), protocol-named report files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers_learned import module_checkpoint, tiny_module

from eval.cli import main
from eval.report import format_table
from gridplan.util.jsonio import dumps


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


def test_a_non_default_protocol_names_its_report_file():
    from eval.cli import checkpoint_json_path
    from gridplan.core.protocols import LEARNED

    ckpt = Path("runs/x/version_0/checkpoints/best.ckpt")
    smoke = LEARNED.replace(seeds=(0,), episodes=5)
    assert checkpoint_json_path(ckpt, "A", smoke).name == "best.eval.A-d2-s1x5.json"
    assert checkpoint_json_path(ckpt, "A", LEARNED.replace(episodes=10)).name == (
        "best.eval.A-d2-s5x10.json"
    )
    assert checkpoint_json_path(ckpt, "A", LEARNED.replace(seeds=(3, 4))).name == (
        "best.eval.A-d2-sfrom3-2x40.json"
    )
    quick = LEARNED.replace(depth=3, n_windows=100, horizon=5)
    assert checkpoint_json_path(ckpt, "B", quick).name == "best.eval.B-d3-w100-h5.json"
    assert checkpoint_json_path(ckpt, "A", LEARNED).name == "best.eval.json"


def test_a_smoke_evaluation_of_a_checkpoint_never_takes_the_protocol_report(tmp_path, capsys):
    ckpt = module_checkpoint(tiny_module(tmp_path), tmp_path / "best.ckpt")
    args = ["--ckpt", str(ckpt), "--seeds", "1", "--episodes", "2", "--eval-windows", "4"]
    assert main([*args, "--no-progress"]) == 0
    written = tmp_path / "best.eval.A-d2-s1x2-w4.json"
    assert strict_load(written.read_text())["episodes"] == 2
    assert not (tmp_path / "best.eval.json").exists()
    assert f"json: {written}" in capsys.readouterr().out
