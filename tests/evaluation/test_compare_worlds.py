"""``python -m eval --compare`` on a world other than the default: played on the first
checkpoint's world unless ``--world`` says otherwise, the built-in sides built on it, and a
checkpoint of another world refused naming both before anything is evaluated or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_learned import module_checkpoint, tiny_module

from eval.cli import main
from gridplan.core import world as worlds
from gridplan.training.run_status import write_status

G16 = worlds.get("g16-k8")
TINY = [
    "--ladder-sizes", "tiny", "--depth", "2", "--seeds", "1", "--episodes", "2",
    "--eval-windows", "8", "--horizon", "3", "--no-progress",
]


def _run(root: Path, name: str, *overrides: str) -> Path:
    run = root / name / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    module_checkpoint(tiny_module(run.parent, *overrides), run / "checkpoints" / "best.ckpt")
    write_status(run, "complete")
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {"g16": _run(root, "g16", "world=g16-k8"), "default": _run(root, "default")}


def _refused(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_a_checkpoint_of_another_world_is_refused_naming_it_and_both_worlds(
    runs, tmp_path, capsys
):
    out = tmp_path / "cmp.json"
    err = _refused(["--compare", str(runs["g16"]), str(runs["default"]), "--json", str(out),
                    *TINY], capsys)
    assert f"--compare {runs['default']}: the model predicts world default (8x8, S=12" in err
    assert "the task is played on g16-k8 (16x16, S=24" in err
    assert list(tmp_path.iterdir()) == []


def test_a_world_other_than_the_checkpoints_is_refused(runs, tmp_path, capsys):
    err = _refused(["--compare", "oracle", str(runs["g16"]), "--world", "default", "--json",
                    str(tmp_path / "cmp.json"), *TINY], capsys)
    assert "--world default asks for default" in err and "the model predicts g16-k8" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_builtin_is_compared_with_a_checkpoint_on_the_checkpoints_world(runs, tmp_path):
    out = tmp_path / "cmp.json"
    assert main(["--compare", "oracle", str(runs["g16"]), "--json", str(out), *TINY]) == 0
    result = json.loads(out.read_text())
    assert result["task"] == "A"
    assert len(result["reports"]) == 2
    assert all(rep["world"] == G16.spec() for reps in result["reports"].values() for rep in reps)


def test_a_world_mismatch_is_named_before_an_existing_report_is_refused(runs, capsys):
    report = runs["g16"] / "checkpoints" / "best.eval.json"
    report.write_text("{}")
    try:
        err = _refused(["--ckpt", str(runs["g16"]), "--world", "default", *TINY], capsys)
    finally:
        assert report.read_text() == "{}"  # nothing written over it
        report.unlink()
    assert "--world default asks for default" in err and "the model predicts g16-k8" in err
    assert "already exists" not in err
