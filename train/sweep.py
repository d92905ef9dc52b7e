"""Sweep points as jobs: the vectorizable points of a ``python -m train -m`` sweep train as
vectorized groups, one job per group (the sweeper ``hydra/sweeper=gridplan``, the default).

``plan`` turns the composed points of a sweep into the jobs handed to Hydra's launcher:

- a point with ``train.vectorize=false`` is one job with its own overrides, trained alone
  (``gridplan.training.runs.train``) as the basic sweeper would run it;
- the other points are bucketed by ``gridplan.training.vectorized.GROUP_KEYS`` (runs that can share
  one stack) and dealt round-robin into ``jobs`` jobs (``gridplan.training.vectorized.deal``: job
  ``j`` gets every ``jobs``-th point of each bucket, so the jobs get a similar mix); with
  ``jobs`` unset, each bucket is one job. Such a job's overrides are its first point's plus
  ``++hydra.job.env_set.GRIDPLAN_GROUP=<file>``, a YAML file in the sweep folder listing every
  point of the job with its composed config; the job trains them with
  ``gridplan.training.runs.train_all`` (``run_group``), each in its own run folder with its own
  ``.hydra/`` record (config, overrides, Hydra config) and status, as a run alone gets.

So the default launcher (``basic``) trains ``-m seed=0,1,2,3,4`` as one group of five in this
process, and ``hydra/launcher=joblib hydra.launcher.n_jobs=2`` as two groups (of three and
two seeds) in two processes, each with one torch thread.
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gridplan.training.config import schema, validate
from gridplan.util.files import write_text_atomic

#: Environment variable (set through ``hydra.job.env_set``) naming a job's group file.
GROUP_ENV = "GRIDPLAN_GROUP"


def point_config(point: DictConfig) -> DictConfig:
    """A composed sweep point (with its ``hydra`` node) as the run config ``python -m train``
    trains: Hydra's node dropped, validated (``gridplan.training.config.validate``).

    Raises:
        ValueError: if the config fails validation.
    """
    own = OmegaConf.masked_copy(point, [k for k in point if k != "hydra"])
    return validate(OmegaConf.merge(schema(), own))


def _quoted(text: str) -> str:
    """``text`` as a quoted value of Hydra's override grammar."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def plan(points: list[DictConfig], jobs: int | None, sweep_dir: Path) -> list[list[str]]:
    """The launcher jobs of a sweep's composed points (module docstring).

    Args:
        points: every point of the sweep as its job composes it (``hydra`` node included,
            ``hydra.job.num`` its index).
        jobs: jobs the vectorizable points are dealt into, or None: one per bucket.
        sweep_dir: the sweep folder; group files go to ``<sweep_dir>/groups/`` and jobs name
            them by absolute path (a job may start in another folder).

    Returns:
        One override list per job.

    Raises:
        ValueError: if a point's config fails validation.
    """
    from gridplan.training.vectorized import deal, group_key

    out: list[list[str]] = []
    buckets: dict[tuple, list[DictConfig]] = {}
    for point in points:
        cfg = point_config(point)
        if cfg.train.vectorize:
            key = group_key(OmegaConf.to_container(cfg, resolve=True))
            buckets.setdefault(key, []).append(point)
        else:
            out.append(list(point.hydra.overrides.task))
    if jobs is None:
        parts = list(buckets.values())
    else:
        parts = [[] for _ in range(jobs)]
        for bucket in buckets.values():
            for j, share in enumerate(deal(bucket, jobs)):
                parts[j] += share
    parts = [p for p in parts if p]
    first = len(out)
    for j, group in enumerate(parts):
        path = write_text_atomic(
            Path(sweep_dir).resolve() / "groups" / f"job{first + j}.yaml",
            OmegaConf.to_yaml({"points": [OmegaConf.to_container(p) for p in group]}),
        )
        env = f"++hydra.job.env_set.{GROUP_ENV}={_quoted(str(path))}"
        out.append([*group[0].hydra.overrides.task, env])
    return out


def group_file() -> Path | None:
    """The group file of this job (``GRIDPLAN_GROUP``), or None for a job of one run."""
    value = os.environ.get(GROUP_ENV)
    return Path(value) if value else None


def read_group(path: str | os.PathLike) -> list[tuple[int, DictConfig, dict[str, str]]]:
    """The points of a group file: ``(job number, run config, .hydra record)`` each.

    Raises:
        ValueError: if the file is not a group file, or a config fails validation.
    """
    data = OmegaConf.load(path)
    if "points" not in data:
        raise ValueError(f"{path} is not a sweep group file (no 'points')")
    out = []
    for point in data.points:
        cfg = point_config(point)
        hydra = point.hydra
        record = {
            ".hydra/config.yaml": OmegaConf.to_yaml(cfg),
            ".hydra/overrides.yaml": OmegaConf.to_yaml(hydra.overrides.task),
            ".hydra/hydra.yaml": OmegaConf.to_yaml(hydra),
        }
        out.append((int(hydra.job.num), cfg, record))
    return out
