"""Sweeps of ``python -m train -m``: vectorizable points train as groups, one job per group,
and every member ends as the same run trained alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_learned import debug_overrides
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf, open_dict

from gridplan.training.config import DEFAULT_CONFIG_DIR
from gridplan.training.run_status import read_status
from gridplan.util.threads import available_cpus
from train.__main__ import main
from train.sweep import GROUP_ENV, plan, read_group

ROOT = Path(__file__).resolve().parents[2]
FINAL = ("best/E_tot", "best/DRPE_graded", "best/DRPE_binary", "best_score", "epochs")


def _checkpoints(out: str) -> list[str]:
    return [ln.split(": ", 1)[1] for ln in out.splitlines() if ln.startswith("checkpoint: ")]


def _final(checkpoint: str) -> dict:
    run_dir = Path(checkpoint).parents[1]
    return json.loads((run_dir / "metrics.json").read_text())["metrics"]


@pytest.mark.slow
def test_a_seed_sweep_trains_as_groups_and_each_member_equals_its_run_alone(tmp_path, capsys):
    assert main(["-m", *debug_overrides(tmp_path / "vec"), "seed=0,1,2"]) == 0
    out = capsys.readouterr().out
    assert "training runs 0, 1, 2 as vectorized groups" in out
    grouped = _checkpoints(out)
    assert [Path(c).parents[1].parent.name[-5:] for c in grouped] == ["seed0", "seed1", "seed2"]
    assert out.strip().splitlines()[-1] == f"checkpoint: {grouped[-1]}"
    # One group per worker process, one worker per core (train.workers unset).
    records = sorted((tmp_path / "vec" / "runs" / "groups").glob("version_*/*/group.json"))
    assert len(records) == min(3, available_cpus())
    groups = [[m["seed"] for m in json.loads(r.read_text())["members"]] for r in records]
    assert sorted(s for seeds in groups for s in seeds) == [0, 1, 2]
    for k, ckpt in enumerate(grouped):
        run_dir = Path(ckpt).parents[1]
        assert read_status(run_dir)["status"] == "complete"
        assert OmegaConf.load(run_dir / ".hydra" / "overrides.yaml")[-1] == f"seed={k}"
        assert OmegaConf.load(run_dir / ".hydra" / "config.yaml").seed == k
        assert (run_dir / ".hydra" / "hydra.yaml").is_file()

    sequential = ["-m", *debug_overrides(tmp_path / "seq"), "seed=0,1,2", "train.vectorize=false"]
    assert main(sequential) == 0
    out = capsys.readouterr().out
    assert "as vectorized groups" not in out
    alone = _checkpoints(out)
    assert not (tmp_path / "seq" / "runs" / "groups").exists()
    for a, b in zip(grouped, alone, strict=True):
        got, want = _final(a), _final(b)
        for key in FINAL:
            assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-7), key


def test_a_sweep_whose_data_cannot_be_made_leaves_no_run_folder(tmp_path, capsys):
    tiny = [a for a in debug_overrides(tmp_path) if not a.startswith("data.budget=")]
    assert main(["-m", *tiny, "data.budget=1", "seed=0,1"]) == 2
    assert "cannot split 1 episode(s) into train and validation" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["_sweeps"]


def _points(tmp: Path, *runs: list[str]):
    """Each override list composed as the sweeper composes a sweep point (Hydra node kept)."""
    points = []
    GlobalHydra.instance().clear()  # a Hydra app run earlier in this process may hold it
    with initialize_config_dir(str(DEFAULT_CONFIG_DIR), version_base="1.3", job_name="train"):
        for num, overrides in enumerate(runs):
            point = hydra_compose("config", [*debug_overrides(tmp), *overrides], True)
            with open_dict(point):
                point.hydra.job.num = num
            points.append(point)
    return points


def _job_points(job: list[str]) -> list[int]:
    (env,) = [a for a in job if a.startswith(f"++hydra.job.env_set.{GROUP_ENV}=")]
    return [num for num, _, _ in read_group(env.split("=", 1)[1].strip("'"))]


def test_the_sweeper_deals_each_bucket_of_group_keys_into_the_jobs(tmp_path):
    points = _points(
        tmp_path,
        *[[f"seed={s}"] for s in range(4)],  # 0-3: one architecture
        *[[f"seed={s}", "model.hidden=[16]"] for s in range(2)],  # 4-5: another
        ["seed=9", "train.vectorize=false"],  # 6: trains alone
    )
    jobs = plan(points, 2, tmp_path / "sweep")
    assert jobs[0] == list(points[6].hydra.overrides.task)  # alone: its own overrides only
    assert [_job_points(j) for j in jobs[1:]] == [[0, 2, 4], [1, 3, 5]]
    per_bucket = plan(points, None, tmp_path / "sweep2")
    assert [_job_points(j) for j in per_bucket[1:]] == [[0, 1, 2, 3], [4, 5]]
    num, cfg, record = read_group(per_bucket[2][-1].split("=", 1)[1].strip("'"))[1]
    assert (num, cfg.seed, list(cfg.model.hidden), cfg.variant.name) == (5, 1, [16], "uniform")
    assert "model.hidden=[16]" in OmegaConf.create(record[".hydra/overrides.yaml"])


@pytest.mark.slow
def test_joblib_sends_one_group_per_job(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = ["-m", *debug_overrides(tmp_path), "seed=0,1,2"]
    cmd += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    done = subprocess.run(
        [sys.executable, "-m", "train", *cmd], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 sweep point(s) as 2 job(s)" in done.stderr + done.stdout
    assert len(_checkpoints(done.stdout)) == 3
    records = sorted((tmp_path / "runs" / "groups").glob("version_*/*/group.json"))
    seeds = sorted(sorted(m["seed"] for m in json.loads(r.read_text())["members"]) for r in records)
    assert seeds == [[0, 2], [1]]
    for run_dir in (tmp_path / "runs").glob("uniform-*/version_0"):
        assert read_status(run_dir)["status"] == "complete"


def test_an_interrupted_group_marks_its_runs_interrupted_and_keeps_their_folders(
    tmp_path, monkeypatch
):
    from gridplan.training import runs
    from gridplan.training.config import compose

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runs, "train_groups", stopped)
    cfgs = [compose([*debug_overrides(tmp_path), f"seed={s}"]) for s in (0, 1)]
    record = {".hydra/overrides.yaml": "- seed=0\n"}
    with pytest.raises(KeyboardInterrupt):
        runs.train_all(cfgs, records=[record, None])
    run_dirs = sorted((tmp_path / "runs").glob("uniform-*/version_0"))
    assert [d.parent.name[-5:] for d in run_dirs] == ["seed0", "seed1"]
    for run_dir in run_dirs:
        status = read_status(run_dir)
        assert (status["status"], status["signal"]) == ("interrupted", "KeyboardInterrupt")
    assert (run_dirs[0] / ".hydra" / "overrides.yaml").read_text() == "- seed=0\n"
