"""``python -m eval --compare A B C ...``: any number of models (built-ins, plug-ins, checkpoints,
run folders) under one stated protocol, every metric against the baseline with paired
intervals, JSON + Markdown + figure, and the refusals ``--ckpt`` makes (incomplete runs, missing
paths)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers_learned import module_checkpoint, tiny_module

from eval.cli import build_parser, fill_defaults, main
from gridplan.evaluation.compare_models import compare_models
from gridplan.evaluation.spec import EvalSpec
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.training.run_status import write_status

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
    "3",
    "--eval-windows",
    "24",
    "--horizon",
    "4",
    "--no-progress",
]
PROTOCOL = EvalSpec(
    seeds=(0, 1),
    episodes=4,
    horizon=4,
    n_windows=32,
    branch_states=16,
    anchor_starts=8,
    anchor_rollouts=2,
    probe_questions=8,
    xgap_states=16,
    n_resamples=200,
)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A run folder as ``python -m train`` lays it out, marked complete."""
    run = tmp_path_factory.mktemp("runs") / "uniform-seed0" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    module_checkpoint(tiny_module(run.parent, "seed=0"), run / "checkpoints" / "best.ckpt")
    write_status(run, "complete")
    return run


def _rows(result: dict) -> dict:
    return {(r["level"], r["metric"]): r for r in result["rows"]}


def test_three_models_under_one_protocol_with_every_metric(
    run_folder, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "cmp.json"
    plug = "scripts/example_model.py:make"  # a path inside the working directory stays relative
    specs = ["oracle", f"{EXAMPLE}:make", str(run_folder)]
    assert main(["--compare", *specs, "--levels", "L4", "--json", str(out), *TINY]) == 0
    text = capsys.readouterr().out
    # One protocol, printed, and the rule that chose it (a checkpoint would default to depth 2).
    assert "protocol: task A, depth 2, seeds 0..1 (2) x 3 episodes" in text
    assert "a checkpoint alone would default to the learned models'" in text
    assert "[1] oracle (baseline)" in text and f"[2] {plug}" in text
    assert f"[3] {run_folder}" in text
    result = json.loads(out.read_text())
    assert result["compare_schema_version"] == "1.0"
    assert result["depth"] == 2 and result["protocol"]["episodes"] == 3
    assert "learned models'" in result["protocol_rule"]
    # Every report ran under that protocol, the run folder read as its best checkpoint.
    for reports in result["reports"].values():
        assert [(r["depth"], r["episodes"], r["n_windows"]) for r in reports] == [(2, 3, 24)]
    learned = result["reports"][str(run_folder)][0]["model"]
    assert learned["checkpoint"] == str(run_folder / "checkpoints" / "best.ckpt")
    rows = _rows(result)
    for key in [
        ("closed loop", "success"),
        ("L1", "E_tot"),
        ("L1", "DRPE_graded"),
        ("L1", "DRPE_binary"),
        ("L4", "decision_regret"),
        ("L4", "ipe"),
    ]:
        assert key in rows, key
    e_tot = rows[("L1", "E_tot")]
    assert e_tot["paired_over"] == ["training seed", "window"]
    oracle_e = e_tot["values"]["oracle"]
    assert 0.0 < oracle_e < 0.2  # the stochastic distractors: not 0
    diff = e_tot["differences"][plug]
    assert diff["low"] <= diff["difference"] <= diff["high"]
    # The oracle's DRPE is 0: the relevant dims follow the true dynamics exactly.
    assert rows[("L1", "DRPE_graded")]["values"]["oracle"] == 0.0
    assert rows[("L4", "ipe")]["differences"][str(run_folder)]["low"] is None
    # The Markdown table and the figure beside the JSON.
    table = (tmp_path / "cmp.md").read_text()
    assert "| closed loop | closed-loop success | 1.0000 |" in table
    assert "DRPE, graded weights" in table and "![comparison](cmp.png)" in table
    assert (tmp_path / "cmp.png").stat().st_size > 1000
    with pytest.raises(SystemExit):
        main(["--compare", *specs, "--json", str(out), *TINY])
    assert "already exist" in capsys.readouterr().err


def test_compare_refuses_an_interrupted_run_as_ckpt_does(run_folder, tmp_path, capsys):
    run = tmp_path / "interrupted" / "version_0"
    shutil.copytree(run_folder, run)
    write_status(run, "interrupted")
    ckpt = run / "checkpoints" / "best.ckpt"
    errors = []
    for argv in (["--ckpt", str(ckpt)], ["--compare", "oracle", str(run)]):
        with pytest.raises(SystemExit) as exit_info:
            main([*argv, "--json", str(tmp_path / "x.json"), *TINY])
        assert exit_info.value.code == 2
        errors.append(capsys.readouterr().err)
    message = f"{ckpt} belongs to a run that is interrupted"
    assert all(message in e and "--allow-incomplete" in e for e in errors)
    assert not (tmp_path / "x.json").exists()
    argv = ["--compare", "oracle", str(run), "--levels", "L1", "--allow-incomplete"]
    assert main([*argv, "--json", str(tmp_path / "y.json"), *TINY]) == 0


def test_missing_paths_and_folders_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    for spec, message in (
        (str(tmp_path / "nowhere"), "does not exist (give a checkpoint, a run folder"),
        (str(tmp_path / "empty"), "is a folder without checkpoints/best.ckpt"),
        (str(tmp_path / "x*" / "best.ckpt"), "matches no file"),
    ):
        with pytest.raises(SystemExit):
            main(["--compare", "oracle", spec, *TINY])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--compare", "oracle", *TINY])
    assert "at least two models, got 1" in capsys.readouterr().err


def test_the_protocol_is_the_baselines_default_and_says_so(run_folder):
    args = build_parser().parse_args(["--compare", str(run_folder), "oracle"])
    fill_defaults(args)
    assert (args.spec.depth, len(args.spec.seeds), args.spec.episodes) == (2, 5, 40)
    assert "the learned models'" in args.protocol_rule and "builtin alone" in args.protocol_rule
    args = build_parser().parse_args(["--compare", "oracle", "noise"])
    fill_defaults(args)
    assert args.spec.depth == 4 and args.protocol_rule == ""


def test_two_plugins_of_the_same_file_name_are_told_apart(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for folder, slip in (("a", 0.0), ("b", 0.5)):
        (tmp_path / folder).mkdir()
        body = EXAMPLE.read_text().replace("make(slip: float = 0.1", f"make(slip: float = {slip}")
        (tmp_path / folder / "mine.py").write_text(body)
    argv = ["--compare", "a/mine.py:make", "b/mine.py:make", "--levels", "L1", *TINY]
    assert main(argv) == 0
    result = json.loads((tmp_path / "compare.json").read_text())
    assert [m["name"] for m in result["models"]] == ["a/mine.py:make", "b/mine.py:make"]
    assert result["reports"]["b/mine.py:make"][0]["model"]["path"] == "b/mine.py"
    assert "[2] b/mine.py:make" in capsys.readouterr().out


def test_paired_differences_against_the_baseline_in_python():
    c = compare_models(
        [OracleModel(), NoiseModel.controlled(0.0, 0.5), NoiseModel.controlled(1.5, 0.1)],
        ["oracle", "irrelevant", "relevant"],
        depth=2,
        spec=PROTOCOL,
        levels=["L4"],
    )
    rows = {r["metric"]: r for r in c.rows}
    # Prop. 1 with common random numbers: irrelevant noise decides exactly like the oracle.
    same = rows["success"]["differences"]["irrelevant"]
    assert (same["difference"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    assert rows["DRPE_graded"]["differences"]["irrelevant"]["difference"] == 0.0
    assert rows["E_tot"]["differences"]["irrelevant"]["low"] > 0
    worse = rows["decision_regret"]["differences"]["relevant"]
    assert worse["difference"] > 0 and worse["low"] > 0
    assert rows["success"]["differences"]["relevant"]["difference"] < 0
    assert "oracle (baseline)" in "\n".join(c.lines())
    json.dumps(c.to_dict(), allow_nan=False)


def test_one_model_arms_pair_with_every_training_seed():
    arms = [OracleModel(), [NoiseModel.controlled(0.3, 0.1), NoiseModel.controlled(0.3, 0.3)]]
    c = compare_models(arms, ["oracle", "noisy"], depth=2, spec=PROTOCOL, levels=["L1"])
    diff = next(r for r in c.rows if r["metric"] == "success")["differences"]["noisy"]
    assert diff["units"] == [2, 2, 4]
    assert np.isclose(
        next(r for r in c.rows if r["metric"] == "E_tot")["values"]["noisy"],
        np.mean([r.prediction["E_tot"] for r in c.reports[1]]),
    )
    with pytest.raises(ValueError, match="same number of models"):
        compare_models(
            [arms[1], arms[1][:1] * 3], ["a", "b"], depth=2, spec=PROTOCOL, levels=["L1"]
        )
    with pytest.raises(ValueError, match="its own name"):
        compare_models(arms, ["x", "x"], depth=2, spec=PROTOCOL, levels=["L1"])
