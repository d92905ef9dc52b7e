"""E3's training groups sent through a Hydra launcher (``scripts/reproduce.py --launcher``):
the same models, tables and records as the default path, one job per vectorized group
(``gridplan.training.dispatch``)."""

from __future__ import annotations

import csv
import json
import sys
import warnings
from pathlib import Path

import pytest
import torch

from gridplan.experiments import GROUPS
from gridplan.experiments.runner import run_groups
from gridplan.training.dispatch import Launcher, job_overrides, launcher_options

REPO = Path(__file__).resolve().parents[2]


def _reproduce(*args: str) -> int:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        with warnings.catch_warnings():
            # Importing the script sets OpenMP's wait policy, too late in a test process.
            warnings.simplefilter("ignore", RuntimeWarning)
            import reproduce
    finally:
        sys.path.pop(0)
    return reproduce.main(list(args))


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Path, Path]:
    """Tiny e3 by the default path and through ``--launcher joblib --jobs 2``."""
    default = tmp_path_factory.mktemp("default")
    launched = tmp_path_factory.mktemp("joblib")
    common = ("--only", "e3", "--profile", "tiny", "--no-progress")
    assert _reproduce(*common, "--out", str(default)) == 0
    assert _reproduce(*common, "--out", str(launched), "--launcher", "joblib", "--jobs", "2") == 0
    return default / "e3", launched / "e3"


def _same_models(default: Path, launched: Path) -> None:
    """The two e3 folders hold the same runs (epochs, checkpoints, validation metrics) and the
    same Table 3."""
    a, b = _rows(default / "runs.csv"), _rows(launched / "runs.csv")
    assert [(r["key"], r["seed"], r["epochs"]) for r in a] == [
        (r["key"], r["seed"], r["epochs"]) for r in b
    ]
    for ra, rb in zip(a, b, strict=True):
        for key in ("val_E_tot", "val_DRPE_graded"):
            assert float(ra[key]) == pytest.approx(float(rb[key]), rel=1e-5, abs=1e-7)
        sa = torch.load(default / ra["checkpoint"], weights_only=False)["state_dict"]
        sb = torch.load(launched / rb["checkpoint"], weights_only=False)["state_dict"]
        assert sa.keys() == sb.keys()
        for k in sa:
            torch.testing.assert_close(sa[k], sb[k], rtol=1e-5, atol=1e-6)
    ta, tb = _rows(default / "table3.csv"), _rows(launched / "table3.csv")
    assert [r["row"] for r in ta] == [r["row"] for r in tb]
    for ra, rb in zip(ta, tb, strict=True):
        assert ra["success"] == rb["success"]
        assert float(ra["E_tot"]) == pytest.approx(float(rb["E_tot"]), rel=1e-5)


@pytest.mark.slow
def test_the_launched_groups_train_the_same_models_as_the_default_path(both):
    _same_models(*both)


@pytest.mark.slow
def test_submitit_local_jobs_train_the_same_models_too(both, tmp_path):
    default, _ = both
    args = ("--only", "e3", "--profile", "tiny", "--no-progress", "--out", str(tmp_path))
    assert _reproduce(*args, "--launcher", "submitit_local", "--jobs", "2") == 0
    _same_models(default, tmp_path / "e3")
    assert (tmp_path / "e3" / "runs" / "groups" / ".submitit").is_dir()


@pytest.mark.slow
def test_each_job_trains_one_group_and_leaves_its_record(both):
    default, launched = both
    groups = launched / "runs" / "groups"
    records = sorted(groups.glob("group*/group.json"))
    assert [p.parent.name for p in records] == ["group1", "group2"]
    members = [m["label"] for p in records for m in json.loads(p.read_text())["members"]]
    assert len(members) == len(_rows(launched / "runs.csv")) == 4
    assert sorted(p.name for p in groups.glob("*.result.pt")) == [
        "group1.result.pt",
        "group2.result.pt",
    ]
    assert (groups / "multirun.yaml").is_file()
    # The default path dealt the 4 runs into one group in this process.
    assert [p.parent.name for p in (default / "runs" / "groups").glob("*/group.json")] == [
        "group1"
    ]
    notes = json.loads((launched / "done.json").read_text())["notes"]
    assert any("hydra/launcher=joblib" in n for n in notes)


@pytest.mark.slow
def test_a_finished_group_is_skipped_whatever_launches_it(both, capsys):
    _, launched = both
    done = json.loads((launched / "done.json").read_text())["run_id"]
    args = ("--only", "e3", "--profile", "tiny", "--no-progress", "--out", str(launched.parent))
    assert _reproduce(*args, "--launcher", "joblib", "--jobs", "2") == 0
    assert json.loads((launched / "done.json").read_text())["run_id"] == done
    assert "e3: skipped" in capsys.readouterr().out


def test_the_launchers_are_python_m_trains(tmp_path):
    options = launcher_options()
    for name in ("basic", "joblib", "submitit_local", "submitit_slurm", "slurm"):
        assert name in options
    with pytest.raises(ValueError, match="unknown launcher 'nope'.*joblib"):
        run_groups(GROUPS, ["e3"], tmp_path, "tiny", launcher=Launcher("nope"))
    assert list(tmp_path.iterdir()) == []


def test_the_launch_command_line_sweeps_the_groups_one_job_each(tmp_path):
    argv = job_overrides(["group1", "group2"], tmp_path, "joblib", 2, ["a.b=1"])
    assert argv[0] == "hydra/launcher=joblib"
    assert "hydra.launcher.n_jobs=2" in argv
    assert f"folder='{tmp_path}'" in argv
    assert argv[-2:] == ["a.b=1", "job=group1,group2"]
    capped = job_overrides(["g1"], tmp_path, "joblib", 2, ["hydra.launcher.n_jobs=1"])
    assert [a for a in capped if "n_jobs" in a] == ["hydra.launcher.n_jobs=1"]
    slurm = job_overrides(["g1"], tmp_path, "slurm", 8)
    assert not any("n_jobs" in a for a in slurm)
    with pytest.raises(ValueError, match="quote"):
        job_overrides(["g1"], tmp_path / "it's", "joblib", 1)


def test_launcher_options_are_checked():
    with pytest.raises(ValueError, match="jobs must be an integer >= 1"):
        Launcher("joblib", jobs=0)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        Launcher("slurm", overrides=("partition",))


def test_reproduce_refuses_jobs_without_a_launcher(capsys):
    with pytest.raises(SystemExit) as exit_:
        _reproduce("--only", "e3", "--jobs", "2")
    assert exit_.value.code == 2
    assert "--jobs and --launcher-override need --launcher" in capsys.readouterr().err
