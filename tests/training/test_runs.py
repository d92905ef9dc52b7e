"""Run folders that say what they are, resume from ``last.ckpt``, safe concurrent writers,
TensorBoard hparams and the Hydra launchers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_learned import debug_overrides, tiny_config
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import SIGTERMException

from gridplan.training import runs
from gridplan.training.config import compose, run_name
from gridplan.training.hparams_summary import flat_config
from gridplan.training.run_status import read_status, write_status
from gridplan.training.vectorized import Member
from gridplan.util.files import write_text_atomic
from train.__main__ import INTERRUPTED, main

ROOT = Path(__file__).resolve().parents[2]
#: Four epochs that early stopping cannot end, so an interrupted run has epochs left.
LONGER = ["trainer.max_epochs=4", "trainer.patience=10"]


def _eval(*args: str) -> int:
    from eval.cli import main as eval_main

    tiny = ["--seeds", "1", "--episodes", "2", "--eval-windows", "8", "--no-progress"]
    return eval_main([*args, *tiny])


class _SigtermAfter(Callback):
    """Sends this process SIGTERM when epoch ``n`` (1-based) has ended, as a scheduler would."""

    def __init__(self, n: int) -> None:
        self.n = n

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch + 1 == self.n:
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.fixture
def sigterm_after_second_epoch(monkeypatch):
    """Every trainer ``gridplan.training.runs`` builds gets SIGTERM after its second epoch."""
    build = runs._trainer

    monkeypatch.setattr(
        runs, "_trainer", lambda *a, **k: _with_callback(build(*a, **k), _SigtermAfter(2))
    )


def test_a_finished_run_is_complete_with_hparams_and_config_text(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    metrics, artifacts = runs.train(tiny_config(tmp_path, "seed=2"))
    run_dir = Path(artifacts["run_dir"])
    status = read_status(run_dir)
    assert status["status"] == "complete" and status["epochs"] == metrics["epochs"] == 2
    assert artifacts["status"] == str(run_dir / "status.json")
    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    tags = events.Tags()
    assert {"hp/E_tot", "hp/DRPE_graded", "hp/DRPE_binary", "hp/best_score"} <= set(tags["scalars"])
    assert events.Scalars("hp/E_tot")[-1].value == pytest.approx(metrics["best/E_tot"])
    assert "config/text_summary" in tags["tensors"]
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "    seed: 2" in text
    from tensorboard.plugins.hparams import metadata

    content = events.SummaryMetadata(metadata.SESSION_START_INFO_TAG).plugin_data.content
    session = metadata.parse_session_start_info_plugin_data(content)
    assert session.group_name == f"{run_dir.parent.name}/{run_dir.name}"
    values = {k: getattr(v, v.WhichOneof("kind")) for k, v in session.hparams.items()}
    assert values == flat_config(json.loads(json.dumps(_resolved(tmp_path, "seed=2"))))
    assert (values["seed"], values["model.hidden"], values["experiment"]) == (2, "[32, 32]", "null")


def _resolved(tmp_path: Path, *overrides: str) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(tiny_config(tmp_path, *overrides), resolve=True)


def test_a_run_whose_data_cannot_be_made_fails_before_any_folder(tmp_path, capsys):
    tiny = [a for a in debug_overrides(tmp_path) if not a.startswith("data.budget=")]
    assert main([*tiny, "data.budget=1"]) == 2
    assert "error: cannot split 1 episode(s) into train and validation" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_sigterm_marks_the_run_interrupted_and_eval_refuses_it(
    tmp_path, sigterm_after_second_epoch, capsys
):
    assert main([*debug_overrides(tmp_path), *LONGER]) == INTERRUPTED
    (run_dir,) = (tmp_path / "runs").glob("*/version_0")
    status = read_status(run_dir)
    assert (status["status"], status["signal"]) == ("interrupted", "SIGTERMException")
    assert "no checkpoint line" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        _eval("--ckpt", str(run_dir / "checkpoints" / "last.ckpt"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "belongs to a run that is interrupted" in err and "--allow-incomplete" in err
    assert _eval("--ckpt", str(run_dir / "checkpoints" / "last.ckpt"), "--allow-incomplete") == 0


@pytest.mark.slow
def test_resume_after_sigterm_ends_where_the_uninterrupted_run_ends(tmp_path, monkeypatch, capsys):
    whole, _ = runs.train(tiny_config(tmp_path / "whole", *LONGER))
    build = runs._trainer
    monkeypatch.setattr(
        runs,
        "_trainer",
        lambda *a, **k: _with_callback(build(*a, **k), _SigtermAfter(2)),
    )
    with pytest.raises(SIGTERMException):
        runs.train(tiny_config(tmp_path / "cut", *LONGER))
    monkeypatch.setattr(runs, "_trainer", build)
    (run_dir,) = (tmp_path / "cut" / "runs").glob("*/version_0")
    assert read_status(run_dir)["status"] == "interrupted"
    assert main([f"resume={run_dir}"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == f"checkpoint: {run_dir / 'checkpoints' / 'best.ckpt'}"
    assert read_status(run_dir)["status"] == "complete"
    resumed = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    assert resumed["epochs"] == whole["epochs"] == 4
    for key in ("best/E_tot", "best/DRPE_graded", "best/DRPE_binary", "best_score"):
        assert resumed[key] == pytest.approx(whole[key], rel=1e-5, abs=1e-7), key
    assert _tag_events(run_dir) == {"_hparams_/session_start_info": 1, "config/text_summary": 1}
    assert main([f"resume={run_dir}"]) == 2
    assert "already complete" in capsys.readouterr().err


def _tag_events(run_dir: Path) -> dict[str, int]:
    """How many events of the HParams session and the config text the run's files hold (a
    resumed run writes neither again)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    counts = dict.fromkeys(("_hparams_/session_start_info", "config/text_summary"), 0)
    for path in run_dir.glob("events.out.tfevents.*"):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.tag in counts:
                    counts[value.tag] += 1
    return counts


def _with_callback(trainer, callback):
    trainer.callbacks.append(callback)
    return trainer


@pytest.mark.slow
def test_a_requeued_slurm_job_resumes_the_run_it_left(tmp_path, monkeypatch, capsys):
    for var in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    build = runs._trainer
    monkeypatch.setattr(
        runs, "_trainer", lambda *a, **k: _with_callback(build(*a, **k), _SigtermAfter(2))
    )
    args = [*debug_overrides(tmp_path), *LONGER]
    assert main(args) == INTERRUPTED
    monkeypatch.setattr(runs, "_trainer", build)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")  # what SLURM sets on a requeued job
    assert main(args) == 0
    assert "(requeued, resuming " in capsys.readouterr().out
    (parent,) = (tmp_path / "runs").glob("uniform-*")
    assert [p.name for p in parent.iterdir()] == ["version_0"]
    status = read_status(parent / "version_0")
    assert (status["status"], status["job"], status["epochs"]) == ("complete", "4242", 4)


def test_a_requeued_sweep_job_of_a_run_alone_resumes_it_too(tmp_path, monkeypatch, capsys):
    for var in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "4243")
    build = runs._trainer
    monkeypatch.setattr(
        runs, "_trainer", lambda *a, **k: _with_callback(build(*a, **k), _SigtermAfter(2))
    )
    args = ["-m", *debug_overrides(tmp_path), *LONGER, "seed=0", "train.vectorize=false"]
    assert main(args) == INTERRUPTED
    monkeypatch.setattr(runs, "_trainer", build)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert main(args) == 0
    (parent,) = (tmp_path / "runs").glob("uniform-*")
    assert [p.name for p in parent.iterdir()] == ["version_0"]
    status = read_status(parent / "version_0")
    assert (status["status"], status["job"], status["epochs"]) == ("complete", "4243", 4)


def test_a_rerun_group_job_trains_in_new_folders_and_keeps_the_old_ones(tmp_path):
    cfg = compose([*debug_overrides(tmp_path), "trainer.figures_every_n_epochs=0"])
    run_dir, _ = runs.new_run_dir(cfg.out_dir, run_name(cfg))
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text("- seed=0\n")
    member = Member(cfg, run_dir)
    job = {"name": "g", "progress": False, "threads": 1, "record_dir": tmp_path / "g"}
    first = runs._group_job([member], **job).runs[0]
    best = (run_dir / "checkpoints" / "best.ckpt").read_bytes()
    (run_dir / "metrics.json").unlink()  # as if the job stopped before its member finished
    again = runs._group_job([member], **job).runs[0]
    new = Path(again[1]["run_dir"])
    assert (first[1]["run_dir"], new.name) == (str(run_dir), "version_1")
    assert (run_dir / "checkpoints" / "best.ckpt").read_bytes() == best  # never overwritten
    assert read_status(run_dir)["continued_in"] == str(new)
    assert (new / ".hydra" / "overrides.yaml").read_text() == "- seed=0\n"
    assert again[0]["best_score"] == first[0]["best_score"]  # the same run, trained again


def test_resume_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main([f"resume={tmp_path}"]) == 2
    assert "is not a run folder (no config.yaml)" in capsys.readouterr().err
    assert main([f"resume={tmp_path}", "seed=1"]) == 2
    assert "resume= takes no other argument" in capsys.readouterr().err


def test_status_records_are_checked(tmp_path):
    assert read_status(tmp_path) is None
    write_status(tmp_path, "running")
    assert read_status(tmp_path)["pid"] == os.getpid()
    with pytest.raises(ValueError, match="unknown run status 'done'"):
        write_status(tmp_path, "done")
    (tmp_path / "status.json").write_text('{"status": "odd"}')
    with pytest.raises(ValueError, match="holds no run status"):
        read_status(tmp_path)


def test_atomic_writes_leave_no_temporary_file_and_keep_the_old_one_on_error(tmp_path):
    from gridplan.util.files import write_atomic

    path = write_text_atomic(tmp_path / "a" / "f.txt", "one")
    assert path.read_text() == "one"

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, broken)
    assert path.read_text() == "one"
    assert [p.name for p in path.parent.iterdir()] == ["f.txt"]


_COLLECT = """
import sys
from gridplan.core.tasks import TASK_A
from gridplan.training.module import cached_dataset
print(cached_dataset("balanced", 3000, 5, TASK_A, sys.argv[1]).fingerprint())
"""


@pytest.mark.slow
def test_four_processes_asking_for_one_dataset_write_one_identical_cache_file(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _COLLECT, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outputs]
    prints = {out.strip() for out, _ in outputs}
    assert len(prints) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["A-balanced-3000-seed5.pt"]
    from gridplan.data.datasets import TransitionDataset

    assert TransitionDataset.load(tmp_path / "A-balanced-3000-seed5.pt").fingerprint() in prints


def _train_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "train", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_four_concurrent_train_processes_share_one_cache_file(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "train", *debug_overrides(tmp_path), f"name=job{i}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    errors = [p.communicate(timeout=900)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    # One dataset and one file of held-out windows, each written once by whichever came first.
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "A-balanced-600-seed0.pt",
        "A-windows-balanced-16x10-seed10000.pt",
    ]
    for i in range(4):
        assert read_status(tmp_path / "runs" / f"job{i}" / "version_0")["status"] == "complete"


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_a_launcher_sweep_makes_complete_evaluable_runs(tmp_path, launcher):
    start = time.perf_counter()
    done = _train_cli(
        "-m", *debug_overrides(tmp_path), "seed=0,1", f"hydra/launcher={launcher}", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_dirs = sorted((tmp_path / "runs").glob("*-seed*/version_0"))
    assert [d.parent.name for d in run_dirs] == [
        "uniform-balanced-600-seed0",
        "uniform-balanced-600-seed1",
    ]
    for run_dir in run_dirs:
        assert read_status(run_dir)["status"] == "complete"
        assert (run_dir / ".hydra" / "overrides.yaml").is_file()
        assert _eval("--ckpt", str(run_dir / "checkpoints" / "best.ckpt")) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "runs"]
    print(f"{launcher}: {time.perf_counter() - start:.1f} s")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="ignore")
            if proc.name.isdigit() and text in cmdline:
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_a_sweep_in_worker_processes_stops_them_all_and_marks_the_runs(tmp_path, sig):
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "train", "-m", *debug_overrides(tmp_path), "seed=0,1,2"]
    cmd += ["trainer.max_epochs=200", "trainer.patience=200", "train.workers=2"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while len(list(out.glob("uniform-*/version_0/config.yaml"))) < 3:  # the groups started
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
        time.sleep(0.2)
    time.sleep(4)  # a few epochs: each member has a best checkpoint to keep
    proc.send_signal(sig)  # to the main process only, as a scheduler's kill does
    assert proc.wait(timeout=90) == INTERRUPTED
    assert "training was interrupted" in proc.stdout.read().decode()
    statuses = [read_status(d)["status"] for d in out.glob("uniform-*/version_0")]
    assert statuses == ["interrupted"] * 3
    assert all((d / "checkpoints" / "last.ckpt").is_file() for d in out.glob("uniform-*/version_0"))
    time.sleep(1)
    assert _processes_mentioning(str(out)) == [], "no worker is left behind"


@pytest.mark.slow
def test_a_member_of_a_vectorized_group_cannot_resume(tmp_path, capsys):
    assert main(["-m", *debug_overrides(tmp_path), "seed=0,1", "train.workers=1"]) == 0
    (run_dir,) = Path(tmp_path / "runs").glob("uniform-*seed0/version_0")
    write_status(run_dir, "interrupted")
    assert main([f"resume={run_dir}"]) == 2
    assert "trained as a member of a vectorized group" in capsys.readouterr().err


#: A run interrupted by SIGTERM after its second of four epochs (``debug_overrides``, seed 3,
#: ``out_dir=runs``, ``data.cache_dir=cache``), written by the trainer this repository had
#: before ``WorldModelModule`` held a stack: Lightning's automatic optimization, the loss
#: weights as a ``dim_weights`` buffer. Only its status, config and ``last.ckpt`` are kept.
MAIN_RUN = Path(__file__).parent / "data" / "main-run" / "uniform-balanced-600-seed3"


def test_a_run_of_the_earlier_trainer_resumes_and_ends_as_the_uninterrupted_run(
    tmp_path, monkeypatch
):
    import shutil

    import torch

    from gridplan.models.learned import load_world_model

    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "runs" / MAIN_RUN.name / "version_0"
    shutil.copytree(MAIN_RUN / "version_0", run_dir)
    last = run_dir / "checkpoints" / "last.ckpt"
    old = torch.load(last, weights_only=True)
    _moved_run(old, run_dir)
    torch.save(old, last)
    assert "dim_weights" in old["state_dict"] and old["global_step"] == 6
    assert load_world_model(run_dir / "checkpoints" / "last.ckpt").metadata["epoch"] == 1
    cfg = runs.resumable_config(run_dir)
    resumed, artifacts = runs.resume(run_dir)
    whole, whole_artifacts = runs.train(cfg)
    assert Path(whole_artifacts["run_dir"]).name == "version_1"
    assert resumed["epochs"] == whole["epochs"] == 4
    for key in ("last_checkpoint", "best_checkpoint"):
        a = torch.load(artifacts[key], weights_only=True)
        b = torch.load(whole_artifacts[key], weights_only=True)
        assert (a["epoch"], a["global_step"]) == (b["epoch"], b["global_step"])
        assert set(a["state_dict"]) == set(old["state_dict"]) == set(b["state_dict"])
        for name, value in b["state_dict"].items():
            torch.testing.assert_close(a["state_dict"][name], value, rtol=1e-6, atol=0)
    assert resumed["best_score"] == pytest.approx(whole["best_score"], rel=1e-6)


def _moved_run(checkpoint: dict, run_dir: Path) -> None:
    """Point the checkpoint callback's paths at ``run_dir``, where the run now lies (the
    callback forgets its best score when its folder moved)."""

    def moved(value):
        if isinstance(value, dict):
            return {moved(k): moved(v) for k, v in value.items()}
        if isinstance(value, str) and value.startswith(old):
            return str(run_dir) + value[len(old) :]
        return value

    for name, state in checkpoint["callbacks"].items():
        if name.startswith("ModelCheckpoint"):
            old = str(Path(state["dirpath"]).parent)
            checkpoint["callbacks"][name] = moved(state)
