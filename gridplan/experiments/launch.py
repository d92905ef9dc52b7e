"""Vectorized training groups as the jobs of a Hydra launcher (paper §5.4 protocol per member).

``launch_groups`` sends each group of ``gridplan.training.vectorized`` members to one job of a Hydra
multirun over the launchers ``python -m train`` uses (``configs/hydra/launcher/`` and the
installed launcher plugins): ``joblib`` (local processes, ``n_jobs`` at a time),
``submitit_local``, ``submitit_slurm`` or its preset ``slurm`` (one SLURM array task per
group), or any other installed launcher (``ray``). Launcher keys are ordinary Hydra
overrides (``hydra.launcher.partition=gpu``).

Each group's members (configs and run folders) are written to
``<folder>/<group>.members.pt`` before the launch; its job trains them with
``gridplan.training.vectorized.train_group`` (one torch thread, the threads of one worker of the
default path, so the numbers are the same), writes the group's record to
``<folder>/<group>/group.json`` and, last and atomically, ``<folder>/<group>.result.json``
with every member's ``(metrics, artifacts)``. A member trains exactly as it does in any
other group: its run folder, checkpoints and metrics are those of its run alone. Hydra's
``multirun.yaml`` (and submitit's logs) stay in ``folder``. Jobs import this checkout's
``gridplan`` (``PYTHONPATH`` names it), as the launching process does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
import torch
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig

from gridplan.training.config import DEFAULT_CONFIG_DIR
from gridplan.util.files import write_atomic, write_text_atomic

if TYPE_CHECKING:
    from gridplan.training.vectorized import GroupResult, Member

#: ConfigStore name of a group job's config (the primary config of the launched multirun).
JOB_CONFIG = "gridplan_group_job"
#: Hydra's job name of a group job.
JOB_NAME = "train_group"
MEMBERS = ".members.pt"
RESULT = ".result.json"


@dataclass(frozen=True)
class Launcher:
    """How an experiment sends its training groups to a Hydra launcher.

    Attributes:
        name: a ``hydra/launcher`` choice (``launcher_options``), e.g. ``"joblib"``.
        jobs: training groups, one job each (None: as many as the default path deals:
            one per usable core, at most one per 8 runs); also ``joblib``'s ``n_jobs``.
        overrides: further Hydra overrides of the launch (``hydra.launcher.partition=gpu``).
    """

    name: str
    jobs: int | None = None
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise ValueError(f"jobs must be an integer >= 1, got {self.jobs!r}")
        bad = [o for o in self.overrides if "=" not in o]
        if bad:
            raise ValueError(f"launcher overrides are KEY=VALUE, got {bad}")


@dataclass
class GroupJob:
    """One launched job: train group ``group`` whose members ``folder`` holds."""

    folder: str = MISSING
    group: str = MISSING
    #: torch CPU threads of the job.
    threads: int = 1
    #: One progress line per group (``gridplan.training.vectorized.GroupProgress``).
    progress: bool = True


ConfigStore.instance().store(name=JOB_CONFIG, node=GroupJob)


def launcher_options() -> list[str]:
    """The launchers Hydra finds for ``python -m train`` (``hydra/launcher`` choices)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(str(DEFAULT_CONFIG_DIR), version_base="1.3"):
        return sorted(GlobalHydra.instance().config_loader().get_group_options("hydra/launcher"))


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
    names: Sequence[str],
    folder: Path,
    launcher: str,
    jobs: int,
    progress: bool,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of the multirun launching groups ``names`` (without ``-m``).

    ``jobs`` caps the jobs running at once on the local launchers that take a cap
    (``joblib``'s ``n_jobs``); a cluster launcher's preset sets its own (``array_parallelism``).
    """
    out = [
        f"hydra/launcher={launcher}",
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
        f"hydra.sweep.dir={_quoted(folder)}",
        "hydra.sweep.subdir=${group}",
        "hydra.output_subdir=null",
        "hydra.job.chdir=false",
        f"hydra.job.name={JOB_NAME}",
        f"folder={_quoted(folder)}",
        f"progress={str(progress).lower()}",
    ]
    if launcher == "joblib":
        out.append(f"hydra.launcher.n_jobs={int(jobs)}")
    out.extend(extra)
    out.append("group=" + ",".join(names))
    return out


def _job(cfg: DictConfig) -> None:
    """Train one group (a Hydra job): members from ``<folder>/<group>.members.pt``."""
    from gridplan.experiments.learned_runs import quiet_lightning
    from gridplan.training.vectorized import train_group

    folder = Path(cfg.folder)
    members = torch.load(folder / f"{cfg.group}{MEMBERS}", weights_only=False)
    torch.set_num_threads(int(cfg.threads))
    with quiet_lightning():
        result = train_group(
            members, name=cfg.group, record_dir=folder / cfg.group, progress=cfg.progress
        )
    write_text_atomic(
        folder / f"{cfg.group}{RESULT}",
        json.dumps({"runs": result.runs, "record": result.record}, indent=2),
    )


_app = hydra.main(version_base="1.3", config_path=str(DEFAULT_CONFIG_DIR), config_name=JOB_CONFIG)(
    _job
)


def launch_groups(
    groups: Sequence[tuple[str, Sequence[Member]]],
    launcher: str,
    jobs: int,
    folder: str | os.PathLike,
    progress: bool = True,
    overrides: Sequence[str] = (),
) -> list[GroupResult]:
    """Train every group as one job of Hydra launcher ``launcher``; results in order.

    Args:
        groups: ``(name, members)`` pairs; names are unique words (no commas).
        launcher: a ``hydra/launcher`` choice (``launcher_options``).
        jobs: jobs running at once where the launcher takes a cap (``joblib``).
        folder: where the members, results, records and Hydra's sweep files go (created).
        progress: one progress line per group.
        overrides: further Hydra overrides of the launch (``hydra.launcher.partition=gpu``).

    Raises:
        ValueError: on an unknown launcher or a bad group name, before anything is launched.
        RuntimeError: if a job ended without its result, naming the groups and ``folder``.
    """
    from gridplan.training.vectorized import GroupResult

    check_launcher(launcher)
    names = [name for name, _ in groups]
    bad = [n for n in names if not n or any(c in n for c in ",=/ '\"")]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"group names must be unique words, got {names}")
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for name, members in groups:
        write_atomic(folder / f"{name}{MEMBERS}", lambda tmp, m=list(members): torch.save(m, tmp))
    argv = ["-m", *job_overrides(names, folder, launcher, jobs, progress, overrides)]
    print(
        f"launching {len(groups)} training group(s) through hydra/launcher={launcher} "
        f"(records in {folder})",
        file=sys.stderr,
        flush=True,
    )
    _run_app(argv)
    missing = [n for n in names if not (folder / f"{n}{RESULT}").is_file()]
    if missing:
        raise RuntimeError(
            f"groups {', '.join(missing)} did not finish (their jobs' output and "
            f"Hydra's multirun.yaml are in {folder})"
        )
    results = []
    for name in names:
        done = json.loads((folder / f"{name}{RESULT}").read_text())
        results.append(GroupResult([tuple(run) for run in done["runs"]], done["record"]))
    return results


def _run_app(argv: list[str]) -> None:
    """Run the Hydra app on ``argv`` (Hydra reads ``sys.argv``), jobs importing this
    checkout; a failed job's error is Hydra's exit status, turned into the missing result."""
    saved_argv, saved_path = sys.argv, os.environ.get("PYTHONPATH")
    root = str(Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, saved_path) if p)
    sys.argv = [saved_argv[0] if saved_argv else JOB_NAME, *argv]
    try:
        _app()
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            print(f"hydra multirun exited with status {exit_.code}", file=sys.stderr)
    finally:
        sys.argv = saved_argv
        if saved_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_path
