"""Hydra sweeper of ``python -m train``: the points of a sweep that vectorize are sent to the
launcher as groups, one job per group (``train.sweep``, ``docs/DESIGN.md``).

A sweep (``-m seed=0,1,2,3,4 variant=uniform,rel_only``) expands into its points as Hydra's
basic sweeper expands it (the cartesian product, in command-line order). Each point is
composed as its launcher job would be (``load_sweep_config``); then ``train.sweep.plan``
turns the points into jobs: every point with ``train.vectorize=false`` is one job, as with
the basic sweeper; the others are grouped by ``gridplan.training.vectorized.GROUP_KEYS`` and dealt
into ``jobs`` jobs, each of which trains its points as vectorized groups
(``gridplan.training.runs.train_all``). The launcher (``basic``, ``joblib``, ``submitit_*``, ...)
then runs the jobs as it runs any: the sweeper decides what a job is, the launcher where it
runs.

``jobs`` (``hydra.sweeper.jobs``): how many jobs the vectorizable points are dealt into;
unset, the launcher's ``n_jobs`` when it has one (joblib; -1: one per CPU core), else one job
per group of ``GROUP_KEYS`` (the basic launcher runs them one after another in this process,
submitit one array task each).
"""

# No ``from __future__ import annotations``: Hydra's plugin scan runs this module outside
# sys.modules, where dataclasses cannot read string annotations.
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


@dataclass
class GroupSweeperConf:
    _target_: str = "hydra_plugins.gridplan_sweeper.sweeper.GroupSweeper"
    #: Jobs the vectorizable points are dealt into (module docstring); None: from the launcher.
    jobs: Optional[int] = None  # noqa: UP045 (a real type: see the imports)


ConfigStore.instance().store(
    group="hydra/sweeper", name="gridplan", node=GroupSweeperConf, provider="gridplan"
)


class GroupSweeper(Sweeper):
    """Sweeps ``python -m train`` with vectorized groups as jobs (module docstring)."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Launcher | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from train.sweep import plan

        assert self.config is not None and self.hydra_context is not None
        assert self.launcher is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        (points,) = BasicSweeper.split_arguments(parser.parse_overrides(arguments), None)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        composed = []
        for num, point in enumerate(points):
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(point))
            with open_dict(cfg):
                cfg.hydra.job.num = num
                cfg.hydra.job.id = f"{cfg.hydra.job.name}_{num}"
            composed.append(cfg)
        jobs = plan(composed, self._jobs(), sweep_dir)
        log.info("%d sweep point(s) as %d job(s)", len(points), len(jobs))
        results = self.launcher.launch(jobs, initial_job_idx=0)
        for result in results:
            _ = result.return_value  # raises the job's error, as the basic sweeper does
        return [results]

    def _jobs(self) -> int | None:
        """``jobs``, else the launcher's ``n_jobs`` (-1 or 0: the CPU count), else None."""
        if self.jobs is not None:
            return max(1, int(self.jobs))
        n_jobs = OmegaConf.select(self.config, "hydra.launcher.n_jobs")
        if n_jobs is None:
            return None
        if int(n_jobs) < 1:
            import os

            return os.cpu_count() or 1
        return int(n_jobs)

