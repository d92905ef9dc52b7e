"""Training jobs sent out through a Hydra launcher: the one way runs leave this process
(``docs/DESIGN.md``, "Training").

A *job* is one call ``fn(**kwargs)`` of a module-level function (``Job``): training one
vectorized group (``gridplan.training.runs``) or one run alone. ``launch`` pickles each job to
``<folder>/<name>.job.pt`` and runs a Hydra multirun of the job app (``JobConfig``, one Hydra
job per training job, ``job=<name1>,<name2>,...``) over any launcher ``python -m train``
finds (``configs/train/hydra/launcher/`` and the installed plugins): ``basic`` (one after another
in this process), ``joblib`` (local worker processes, ``n_jobs`` at a time),
``submitit_local``, ``submitit_slurm`` or its preset ``slurm`` (one array task per job), or
any other (``ray``). Launcher keys are ordinary Hydra overrides
(``hydra.launcher.partition=gpu``). A job writes ``<name>.started`` when it begins, then its
return value (or the error it raised) to ``<name>.result.pt``; ``launch`` returns the values in
order and raises a job's error in this process. Hydra's ``multirun.yaml`` (and submitit's
logs) stay in ``folder``. Jobs import this checkout's ``gridplan`` (``PYTHONPATH`` names it),
as the launching process does.

SIGTERM and SIGINT reaching this process while ``joblib`` workers train are passed on to the
workers as SIGTERM, and this process waits (``grace`` seconds) until every started job has
ended, so each group keeps its members' best and last checkpoints before the error is raised
here; joblib would otherwise kill its workers at once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import MISSING, DictConfig

from gridplan.training.config import (
    DEFAULT_CONFIG_DIR,
    global_hydra_aside,
    hydra_config_path,
    hydra_initialized,
)
from gridplan.util.files import write_atomic

#: ConfigStore name of a job's config (the primary config of the launched multirun).
JOB_CONFIG = "gridplan_training_job"
#: Hydra's job name of a training job.
JOB_NAME = "train_job"
#: Launchers whose jobs run on this machine, where a job's count follows the usable cores.
LOCAL_LAUNCHERS = ("basic", "joblib")
JOB = ".job.pt"
STARTED = ".started"
RESULT = ".result.pt"


@dataclass(frozen=True)
class Launcher:
    """Which Hydra launcher the training jobs go to, and how many groups they make.

    Attributes:
        name: a ``hydra/launcher`` choice (``launcher_options``), e.g. ``"joblib"``; None:
            this machine (``basic`` for one job, ``joblib`` for more).
        jobs: vectorized groups the runs of one architecture are dealt into, one job each
            (None: on this machine as many as pay for a worker's start, at most one per
            usable core; one per architecture on a cluster;
            ``gridplan.training.runs.train_all``); also ``joblib``'s ``n_jobs``.
        overrides: further Hydra overrides of the launch (``hydra.launcher.partition=gpu``).

    Raises:
        ValueError: if ``jobs`` is not an integer >= 1 or an override is not KEY=VALUE.
    """

    name: str | None = None
    jobs: int | None = None
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise ValueError(f"jobs must be an integer >= 1, got {self.jobs!r}")
        bad = [o for o in self.overrides if "=" not in o]
        if bad:
            raise ValueError(f"launcher overrides are KEY=VALUE, got {bad}")

    @property
    def local(self) -> bool:
        """Whether the jobs run on this machine."""
        return self.name is None or self.name in LOCAL_LAUNCHERS


@dataclass(frozen=True)
class Job:
    """One training job: ``fn(**kwargs)``, named ``name`` (a unique word) in the launch."""

    name: str
    fn: Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobConfig:
    """The Hydra config of one launched job: run ``<folder>/<job>.job.pt``."""

    folder: str = MISSING
    job: str = MISSING


ConfigStore.instance().store(name=JOB_CONFIG, node=JobConfig)


def launcher_options() -> list[str]:
    """The launchers Hydra finds for ``python -m train`` (``hydra/launcher`` choices)."""
    with global_hydra_aside(), hydra_initialized(DEFAULT_CONFIG_DIR):
        loader = GlobalHydra.instance().config_loader()
        return sorted(loader.get_group_options("hydra/launcher"))


def check_launcher(name: str) -> None:
    """Raises ValueError if ``name`` is not a ``hydra/launcher`` choice, listing them."""
    options = launcher_options()
    if name not in options:
        raise ValueError(f"unknown launcher {name!r}; Hydra's launchers: {', '.join(options)}")


def _quoted(value: str | os.PathLike) -> str:
    text = str(value)
    if "'" in text or "\\" in text:
        raise ValueError(f"path {text!r} holds a quote or backslash; Hydra overrides cannot")
    return f"'{text}'"


def job_overrides(
    names: Sequence[str], folder: Path, launcher: str, parallel: int, extra: Sequence[str] = ()
) -> list[str]:
    """The command line of the multirun launching jobs ``names`` (without ``-m``).

    ``parallel`` caps the jobs running at once on ``joblib`` (its ``n_jobs``, unless
    ``extra`` sets it); a cluster launcher's preset sets its own (``array_parallelism``).
    """
    out = [
        f"hydra/launcher={launcher}",
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
        f"hydra.sweep.dir={_quoted(folder)}",
        "hydra.sweep.subdir=${job}",
        "hydra.output_subdir=null",
        "hydra.job.chdir=false",
        f"hydra.job.name={JOB_NAME}",
        f"folder={_quoted(folder)}",
    ]
    if launcher == "joblib" and not any(o.startswith("hydra.launcher.n_jobs=") for o in extra):
        out.append(f"hydra.launcher.n_jobs={int(parallel)}")
    out.extend(extra)
    out.append("job=" + ",".join(names))
    return out


def _job(cfg: DictConfig) -> None:
    """Run one job (a Hydra job): ``<folder>/<job>.job.pt``; its value, or the error or
    interrupt it raised, saved to ``<folder>/<job>.result.pt``."""
    folder = Path(cfg.folder)
    job: Job = torch.load(folder / f"{cfg.job}{JOB}", weights_only=False)
    (folder / f"{cfg.job}{STARTED}").touch()
    result = folder / f"{cfg.job}{RESULT}"
    try:
        value = job.fn(**job.kwargs)
    except BaseException as err:  # raised again in the launching process (``launch``)
        write_atomic(result, lambda tmp, e=err: torch.save(("error", e), tmp))
        if not isinstance(err, Exception):  # an interrupt also ends this process's work
            raise
        return
    write_atomic(result, lambda tmp: torch.save(("value", value), tmp))


_app = hydra.main(
    version_base="1.3", config_path=hydra_config_path(DEFAULT_CONFIG_DIR), config_name=JOB_CONFIG
)(_job)


def launch(
    jobs: Sequence[Job],
    folder: str | os.PathLike,
    launcher: Launcher | None = None,
    parallel: int = 1,
    grace: float = 60.0,
) -> list[Any]:
    """Run every job through a Hydra launcher; their return values, in order.

    Args:
        jobs: the jobs; names are unique words (no commas, slashes, quotes or spaces).
        folder: where the jobs, results and Hydra's sweep files go (created).
        launcher: where the jobs go (None or ``Launcher()``: ``basic`` for one job or
            ``parallel == 1``, else ``joblib``).
        parallel: jobs running at once on ``joblib`` (its ``n_jobs``).
        grace: seconds to wait for interrupted ``joblib`` workers (module docstring).

    Raises:
        ValueError: on an unknown launcher or a bad job name, before anything is launched.
        Exception: the first error a job raised (in job order), as it raised it.
        RuntimeError: if a job ended without a result, naming the jobs and ``folder``.
        SIGTERMException, KeyboardInterrupt: on SIGTERM or SIGINT.
    """
    launcher = launcher or Launcher()
    name = launcher.name
    if name is None:
        name = "joblib" if parallel > 1 and len(jobs) > 1 else "basic"
    check_launcher(name)
    names = [job.name for job in jobs]
    bad = [n for n in names if not n or any(c in n for c in ",=/ '\"")]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"job names must be unique words, got {names}")
    if not jobs:
        return []
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        for stale in (STARTED, RESULT):  # of an earlier launch into this folder
            (folder / f"{job.name}{stale}").unlink(missing_ok=True)
        write_atomic(folder / f"{job.name}{JOB}", lambda tmp, j=job: torch.save(j, tmp))
    argv = ["-m", *job_overrides(names, folder, name, parallel, launcher.overrides)]
    print(
        f"launching {len(jobs)} job(s) through hydra/launcher={name} "
        f"(records in {folder})",
        file=sys.stderr,
        flush=True,
    )
    if name == "joblib":
        with _passed_on_to_workers(folder, names, grace):
            _run_app(argv)
    else:
        _run_app(argv)
    missing = [n for n in names if not (folder / f"{n}{RESULT}").is_file()]
    if missing:
        raise RuntimeError(
            f"jobs {', '.join(missing)} did not finish (their output and Hydra's "
            f"multirun.yaml are in {folder})"
        )
    values = []
    for n in names:
        kind, value = torch.load(folder / f"{n}{RESULT}", weights_only=False)
        if kind == "error":
            raise value
        values.append(value)
    return values


@contextlib.contextmanager
def _passed_on_to_workers(folder: Path, names: Sequence[str], grace: float):
    """While joblib's workers train: SIGTERM or SIGINT here is sent on to them as SIGTERM,
    then this process waits until every started job has a result (or ``grace`` runs out)
    and raises ``SIGTERMException`` or ``KeyboardInterrupt``."""
    signals = (signal.SIGTERM, signal.SIGINT)

    def stop(signum, frame) -> None:
        for signum_ in signals:  # a second signal does not cut the wait short
            signal.signal(signum_, signal.SIG_IGN)
        # Every live child: joblib keeps its workers between launches, so one started for an
        # earlier launch may be training this one's job.
        workers = multiprocessing.active_children()
        for process in workers:
            process.terminate()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.is_alive() for p in workers):
            started = [n for n in names if (folder / f"{n}{STARTED}").is_file()]
            if all((folder / f"{n}{RESULT}").is_file() for n in started):
                break
            time.sleep(0.2)
        if signum == signal.SIGTERM:
            from lightning.pytorch.utilities.exceptions import SIGTERMException

            raise SIGTERMException
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # signals reach it only
        yield
        return
    previous = {signum: signal.signal(signum, stop) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run_app(argv: list[str]) -> None:
    """Run the job app on ``argv`` (Hydra reads ``sys.argv``), jobs importing this checkout;
    a failed launch is Hydra's exit status, turned into the missing results."""
    saved_argv, saved_path = sys.argv, os.environ.get("PYTHONPATH")
    root = str(Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, saved_path) if p)
    sys.argv = [saved_argv[0] if saved_argv else JOB_NAME, *argv]
    try:
        with global_hydra_aside():
            _app()
    except SystemExit as exit_:
        if type(exit_) is not SystemExit:  # Lightning's SIGTERMException: an interrupt
            raise
        if exit_.code not in (None, 0):
            print(f"hydra multirun exited with status {exit_.code}", file=sys.stderr)
    finally:
        sys.argv = saved_argv
        if saved_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_path
