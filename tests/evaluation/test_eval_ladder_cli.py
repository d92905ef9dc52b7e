"""``python -m eval`` with the ladder: a plug-in written outside the package with ``--card``,
bad plug-ins ending in clear errors, ``--levels``, ``--compare`` of built-ins and of checkpoint
sets, TensorBoard tags ``eval/ladder/...`` and checkpoints' cards beside their reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_learned import module_checkpoint, tiny_module
from helpers_schema import validate_file

from eval.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "scripts" / "example_model.py"
TINY = [
    "--ladder-sizes",
    "tiny",
    "--depth",
    "2",
    "--seeds",
    "2",
    "--episodes",
    "2",
    "--eval-windows",
    "16",
    "--horizon",
    "4",
    "--no-progress",
]


def _tags(log_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    return set(events.Tags()["scalars"])


def test_a_plugin_file_runs_every_level_and_writes_its_card(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--model", f"{EXAMPLE}:make", "--model-arg", "slip=0.2", "--card", *TINY]) == 0
    out = capsys.readouterr().out
    assert "L4 interventional fidelity" in out and "uncertainty (uncertainty)" in out
    report_path = tmp_path / "example_model.make-slip0.2.eval.json"
    report = json.loads(report_path.read_text())
    assert report["schema_version"] == "2.1"
    assert report["model"] == {
        "name": "example_model.make",
        "factory": f"{EXAMPLE}:make",
        "slip": 0.2,
        "path": str(EXAMPLE),
    }
    assert report["levels"] == ["L1", "L4", "L5", "L6", "L7", "probe", "uncertainty"]
    assert (report["depth"], report["seeds"], report["episodes"]) == (2, [0, 1], 2)
    card = tmp_path / "example_model.make-slip0.2.eval.card.md"
    assert "## Verdict" in card.read_text()
    assert (tmp_path / "example_model.make-slip0.2.eval.card.json").exists()
    # Nothing is replaced without --force, and the refusal comes before any evaluation.
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", f"{EXAMPLE}:make", "--model-arg", "slip=0.2", "--card", *TINY])
    assert exit_info.value.code == 2 and "already exist" in capsys.readouterr().err


def test_the_worked_example_runs_from_a_shell_in_the_repository(tmp_path):
    out = tmp_path / "example.json"
    cmd = [sys.executable, "-m", "eval", "--model", "scripts/example_model.py:make", "--card"]
    done = subprocess.run(
        [*cmd, "--json", str(out), *TINY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"card: {tmp_path / 'example.card.md'}" in done.stdout
    assert json.loads(out.read_text())["ladder"]["L6"]["pra"]["mean"] > 0.5
    # Written by another process: validated here against the published schemas.
    assert validate_file(out) == "eval.schema.json"
    assert validate_file(tmp_path / "example.card.json") == "card.schema.json"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("no_such_package.models:make", "cannot import module 'no_such_package.models'"),
        (f"{EXAMPLE}:build", "has no attribute 'build'; its public callables are: "),
        (f"{EXAMPLE}:MOVES", "is a Tensor, not a callable factory"),
        ("missing/file.py:make", "plug-in file 'missing/file.py' does not exist"),
        ("banana", "neither a built-in model"),
    ],
    ids=["module", "attribute", "not-callable", "file", "name"],
)
def test_bad_plugins_end_in_a_clear_error(model, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", model, "--levels", "L4", *TINY])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_plugin_with_broken_outputs_is_named(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text(
        "import torch\n\n"
        "class Model:\n"
        "    def predict(self, state, action, generator):\n"
        "        return state[:, :6]\n\n"
        "def make():\n"
        "    return Model()\n"
    )
    with pytest.raises(SystemExit):
        main(["--model", f"{path}:make", *TINY])
    err = capsys.readouterr().err
    # The module and its file: two plug-ins of the same file name are told apart.
    assert f"broken.make.predict (from {path}) returned shape (8, 6), expected (8, 12)" in err


def test_bad_ladder_arguments_are_errors(capsys):
    for argv, message in (
        (["--model", "noise", "--levels", "L4,L9"], "unknown levels ['L9']"),
        (["--model", "oracle", "--model-arg", "a=1"], "--model-arg applies to a plug-in"),
        (["--model", "oracle", "--compare", "oracle", "noise"], "drop --model/--ckpt"),
        (["--compare", "oracle", "noise", "--card"], "--card describes one model"),
        (["--compare", "oracle", "noise,colour=red"], "takes only sigma_r and sigma_i"),
        (["--compare", "oracle", "noise", "--model-arg", "a=1"], "arguments inline"),
    ):
        with pytest.raises(SystemExit):
            main([*argv, *TINY])
        assert message in capsys.readouterr().err


def test_levels_select_what_is_measured_and_tensorboard_gets_the_ladder(tmp_path, capsys):
    out, logs = tmp_path / "noisy.json", tmp_path / "tb"
    argv = ["--model", "noise", "--sigma-r", "0.35", "--sigma-i", "0.1", "--levels", "L4,L6"]
    assert main([*argv, "--json", str(out), "--tensorboard", str(logs), *TINY]) == 0
    report = json.loads(out.read_text())
    assert report["levels"] == ["L4", "L6"] and set(report["ladder"]) == {"L4", "L6"}
    assert "success" not in report and "E_tot" not in report
    assert report["model"] == {"name": "noise", "sigma_r": 0.35, "sigma_i": 0.1}
    assert "task / depth  A / 2" in capsys.readouterr().out
    tags = _tags(logs)
    assert {"eval/ladder/L4/decision_regret", "eval/ladder/L6/pra"} <= tags
    assert "eval/ladder/L6/J_model/greedy" in tags


def test_the_paper_report_is_unchanged_without_ladder_options(tmp_path):
    out = tmp_path / "oracle.json"
    assert main(["--model", "oracle", "--json", str(out), *TINY]) == 0
    report = json.loads(out.read_text())
    assert "ladder" not in report and "schema_version" not in report
    assert report["success"]["mean"] == 1.0


def test_compare_of_built_in_models_writes_the_paired_differences(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    argv = ["--compare", "noise,sigma_r=1.5,sigma_i=0.1", "oracle", "--json", str(out)]
    assert main([*argv, *TINY]) == 0
    text = capsys.readouterr().out
    assert "[1] noise,sigma_r=1.5,sigma_i=0.1 (baseline)" in text and "[2] oracle" in text
    result = json.loads(out.read_text())
    assert [m["name"] for m in result["models"]] == ["noise,sigma_r=1.5,sigma_i=0.1", "oracle"]
    rows = {r["metric"]: r for r in result["rows"]}
    success = rows["success"]["differences"]["oracle"]
    assert success["difference"] > 0
    assert success["units"] == [1, 2, 2]
    assert success["indicative"]
    oracle = result["reports"]["oracle"][0]
    assert oracle["ladder"]["L4"]["decision_agreement"]["mean"] == 1.0


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    """Two arms of two untrained 3-member ensembles each, as ``python -m train`` lays runs out."""
    tmp = tmp_path_factory.mktemp("ckpts")
    for arm in ("a", "b"):
        for seed in (0, 1):
            folder = tmp / f"{arm}-seed{seed}" / "version_0" / "checkpoints"
            folder.mkdir(parents=True)
            module = tiny_module(tmp, "model.members=3", f"seed={seed}")
            module_checkpoint(module, folder / "best.ckpt")
    return tmp


def test_a_checkpoint_gets_its_ladder_card_beside_its_report_and_run(checkpoints, capsys):
    ckpt = checkpoints / "a-seed0" / "version_0" / "checkpoints" / "best.ckpt"
    argv = ["--ckpt", str(ckpt), "--levels", "L4,uncertainty", "--card"]
    assert main([*argv, *TINY]) == 0
    # A smoke protocol: the report is named after it, the card after the report.
    name = "best.eval.A-d2-s2x2-w16-h4"
    report = json.loads((ckpt.parent / f"{name}.json").read_text())
    # The learned ensemble exposes its own disagreement score, which the ladder prefers.
    assert report["ladder"]["uncertainty"]["source"] == "uncertainty"
    assert (ckpt.parent / f"{name}.card.md").exists()
    assert "eval/ladder/uncertainty/aurc" in _tags(ckpt.parents[1])
    assert "card:" in capsys.readouterr().out


def test_compare_pairs_checkpoint_sets_by_training_seed(checkpoints, tmp_path, capsys):
    arm_a = str(checkpoints / "a-seed*" / "version_0" / "checkpoints" / "best.ckpt")
    arm_b = str(checkpoints / "b-seed*" / "version_0" / "checkpoints" / "best.ckpt")
    out = tmp_path / "cmp.json"
    assert main(["--compare", arm_a, arm_b, "--levels", "L4,L7", "--json", str(out), *TINY]) == 0
    text = capsys.readouterr().out
    assert f"[1] {arm_a} (baseline), 2 models (training seeds)" in text
    assert "warning: only 2 top-level units (training seed)" in text
    rows = {r["metric"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["success"]["differences"][arm_b]["units"] == [2, 2, 2]
