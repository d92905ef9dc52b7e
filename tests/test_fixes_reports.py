"""Report files: strict JSON (no bare NaN), protocol-named report files."""

from __future__ import annotations

import json
import math

import pytest

from eval.cli import main
from eval.report import format_table
from gridplan.jsonio import dumps


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
