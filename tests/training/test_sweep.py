"""Sweeps of ``python -m train -m``: vectorizable points train as groups, one job per group,
and every member ends as the same run trained alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers_learned import debug_overrides
from omegaconf import OmegaConf

from gridplan.training import runs, vectorized
from gridplan.training.config import compose
from gridplan.training.dispatch import Launcher
from gridplan.training.run_status import read_status
from gridplan.training.vectorized import Member
from gridplan.util.threads import chosen_threads
from train.__main__ import main
from train.sweep import plan

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
    # Three tiny runs do not pay for a worker's start: one group, trained in this process
    # (train.workers unset; gridplan.training.vectorized.auto_workers).
    records = sorted((tmp_path / "vec" / "runs" / "_sweeps").glob("*/*/group.json"))
    assert len(records) == 1
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
    assert not list((tmp_path / "seq" / "runs" / "_sweeps").glob("*/*/group.json"))
    for a, b in zip(grouped, alone, strict=True):
        got, want = _final(a), _final(b)
        for key in FINAL:
            assert got[key] == pytest.approx(want[key], rel=1e-5, abs=1e-7), key


def test_a_sweep_whose_data_cannot_be_made_leaves_no_run_folder(tmp_path, capsys):
    tiny = [a for a in debug_overrides(tmp_path) if not a.startswith("data.budget=")]
    assert main(["-m", *tiny, "data.budget=1", "seed=0,1"]) == 2
    assert "cannot split 1 episode(s) into train and validation" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["_sweeps"]


def test_a_sweep_plan_composes_every_point_in_command_line_order(tmp_path):
    args = [*debug_overrides(tmp_path), "seed=0,1", "model.lr=0.001,0.002"]
    sweep = plan([*args, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    assert [(c.seed, c.model.lr) for c in sweep.configs] == [
        (0, 0.001),
        (0, 0.002),
        (1, 0.001),
        (1, 0.002),
    ]
    assert (sweep.launcher.name, sweep.launcher.jobs) == ("joblib", 2)
    assert sweep.launcher.overrides == ("hydra.launcher.n_jobs=2",)
    assert sweep.folder.parent == tmp_path / "runs" / "_sweeps"  # configs/train/config.yaml
    overrides = OmegaConf.create(sweep.records[3][".hydra/overrides.yaml"])
    assert list(overrides[-2:]) == ["seed=1", "model.lr=0.002"]
    hydra = OmegaConf.create(sweep.records[3][".hydra/hydra.yaml"])
    assert (hydra.job.num, hydra.runtime.choices["hydra/launcher"]) == (3, "joblib")
    assert plan([*args, f"hydra.sweep.dir={tmp_path / 'jobs'}"]).folder == tmp_path / "jobs"
    assert plan(args).launcher == Launcher()
    with pytest.raises(ValueError, match="only hydra/launcher.*got hydra.job.chdir=true"):
        plan([*args, "hydra.job.chdir=true"])
    with pytest.raises(ValueError, match="nope"):
        plan([*args, "variant=nope"])


def test_each_architecture_is_dealt_into_the_jobs(tmp_path):
    cfgs = [compose([*debug_overrides(tmp_path), f"seed={s}"]) for s in range(4)]
    narrow = [a for a in debug_overrides(tmp_path) if not a.startswith("model.hidden=")]
    narrow.append("model.hidden=[16]")
    cfgs += [compose([*narrow, f"seed={s}"]) for s in (0, 1)]
    members = [Member(cfg, tmp_path / str(k)) for k, cfg in enumerate(cfgs)]
    groups, order = runs._groups(members, {}, Launcher("joblib", jobs=2))
    assert [name for name, _ in groups] == ["group1.1", "group1.2", "group2.1", "group2.2"]
    assert order == [[0, 2], [1, 3], [4], [5]]
    _, per_arch = runs._groups(members, {}, Launcher("submitit_slurm"))
    assert per_arch == [[0, 1, 2, 3], [4, 5]]  # a cluster: one job per architecture


@pytest.mark.slow
def test_joblib_sends_one_group_per_job(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = ["-m", *debug_overrides(tmp_path), "seed=0,1,2"]
    cmd += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    done = subprocess.run(
        [sys.executable, "-m", "train", *cmd], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "launching 2 job(s) through hydra/launcher=joblib" in done.stderr
    assert len(_checkpoints(done.stdout)) == 3
    records = sorted((tmp_path / "runs" / "_sweeps").glob("*/*/group.json"))
    seeds = sorted(sorted(m["seed"] for m in json.loads(r.read_text())["members"]) for r in records)
    assert seeds == [[0, 2], [1]]
    for run_dir in (tmp_path / "runs").glob("uniform-*/version_0"):
        assert read_status(run_dir)["status"] == "complete"


def test_an_interrupted_group_marks_its_runs_interrupted_and_keeps_their_folders(
    tmp_path, monkeypatch
):
    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runs, "launch", stopped)
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


def test_a_lone_group_takes_the_idle_cores_its_step_pays_for_unless_threads_are_chosen(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(vectorized, "available_cpus", lambda: 2)
    monkeypatch.setattr(vectorized, "THREAD_STEP_FLOP", 1.0)  # any step pays for a thread
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()

    def group_records(name: str, *extra: str, seeds=(0, 1)) -> list[dict]:
        cfgs = [compose([*debug_overrides(tmp_path / name), f"seed={s}", *extra]) for s in seeds]
        runs.train_all(cfgs, progress=False)
        records = sorted((tmp_path / name / "runs" / "groups").glob("*/*/group.json"))
        return [json.loads(r.read_text()) for r in records]

    # Two tiny runs take no worker: one group in this process, with both cores' threads,
    # also when train.workers=1 asks for that one process.
    assert [r["threads"] for r in group_records("auto")] == [2]
    assert torch.get_num_threads() == before  # the job's threads end with it
    assert [r["threads"] for r in group_records("one_worker", "train.workers=1")] == [2]
    assert [r["threads"] for r in group_records("chosen", "threads=1")] == [1]
    assert [r["threads"] for r in group_records("three", "threads=3")] == [3]
    with chosen_threads(1):  # as the experiment runner's --threads 1
        assert [r["threads"] for r in group_records("runner")] == [1]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert [r["threads"] for r in group_records("omp")] == [1]


def test_runs_of_different_threads_train_in_different_groups_and_a_run_alone_keeps_one(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cfgs = [compose([*debug_overrides(tmp_path), "seed=0", f"threads={t}"]) for t in (1, 2)]
    members = [Member(cfg, tmp_path / str(k)) for k, cfg in enumerate(cfgs)]
    groups, order = runs._groups(members, {}, Launcher("basic"))
    assert order == [[0], [1]]
    assert [runs.job_threads(ms[0].config, len(ms), 4) for _, ms in groups] == [1, 2]
    alone = compose(debug_overrides(tmp_path))
    assert runs.job_threads(alone, None, 4) == 1  # a run alone, threads left to the default
