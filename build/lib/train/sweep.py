"""The points of a ``python -m train -m`` sweep, composed, and where their jobs go.

Hydra's own override parser and basic sweeper expand the command line into its points (the
cartesian product, in command-line order: ``seed=0,1 variant=uniform,rel_only`` is four
runs). ``plan`` composes every point (``gridplan.training.config.compose``) before any trains,
so a bad point trains nothing, and keeps each one's ``.hydra/`` record (config, overrides,
Hydra's config). ``gridplan.training.runs.train_all`` then trains them: the vectorizable points
as vectorized groups, each other point alone, every group and every run alone one job of a
Hydra launcher (``gridplan.training.dispatch``).

Of Hydra's own settings a sweep takes the launcher (``hydra/launcher=NAME`` and
``hydra.launcher.KEY=VALUE``; none: this machine, a worker process per usable core where the
work pays for the workers' start, else this process) and
``hydra.sweep.dir`` (the folder of the jobs, the groups' records and Hydra's
``multirun.yaml``; ``configs/train/config.yaml`` sets its default under ``out_dir``). ``joblib``'s
``hydra.launcher.n_jobs=N`` deals each architecture's points into ``N`` groups;
``train.workers=N`` does so on any launcher (unset, here as many groups as pay for a worker's
start, one per usable core at most, and one per architecture on a cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gridplan.training.config import DEFAULT_CONFIG_DIR, compose, global_hydra_aside
from gridplan.training.dispatch import Launcher

#: Overrides choosing and configuring the launcher.
LAUNCHER_KEYS = ("hydra/launcher=", "hydra.launcher.")
#: Override naming the folder of the jobs.
SWEEP_DIR = "hydra.sweep.dir="
#: Override adding config folders (the one other Hydra setting a sweep's points compose with).
SEARCHPATH = "hydra.searchpath="


@dataclass
class Sweep:
    """A sweep ready to train.

    Attributes:
        configs: every point's run config, in sweep order.
        records: per point, its ``.hydra/`` files (``{relative path: text}``).
        launcher: where the jobs go.
        folder: the jobs' folder (``hydra.sweep.dir``).
    """

    configs: list[DictConfig]
    records: list[dict[str, str]]
    launcher: Launcher
    folder: Path


def plan(
    overrides: list[str], config_dir: Path | str = DEFAULT_CONFIG_DIR, config_name: str = "config"
) -> Sweep:
    """The sweep of command-line ``overrides`` (Hydra's override grammar, no flags) over the
    primary config ``config_name`` of ``config_dir``; ``hydra.searchpath`` adds config folders
    (``python -m train --config-dir`` joins it).

    Raises:
        ValueError: on a bad override or point (naming it), or a Hydra setting a sweep does
            not take.
    """
    launch = [a for a in overrides if a.startswith(LAUNCHER_KEYS)]
    folders = [a.split("=", 1)[1].strip("'\"") for a in overrides if a.startswith(SWEEP_DIR)]
    task = [a for a in overrides if a not in launch and not a.startswith(SWEEP_DIR)]
    other = [
        a
        for a in task
        if a.lstrip("+~").startswith(("hydra.", "hydra/")) and not a.startswith(SEARCHPATH)
    ]
    if other:
        raise ValueError(
            f"a sweep takes of Hydra's settings only hydra/launcher, hydra.launcher.*, "
            f"hydra.sweep.dir and hydra.searchpath, got {', '.join(other)}"
        )
    try:
        with (
            global_hydra_aside(),
            initialize_config_dir(str(config_dir), version_base="1.3", job_name="train"),
        ):
            loader = GlobalHydra.instance().config_loader()
            parser = OverridesParser.create(config_loader=loader)
            (points,) = BasicSweeper.split_arguments(parser.parse_overrides(task), None)
            configs = [compose(list(point), config_dir, config_name) for point in points]
            nodes = [hydra_compose(config_name, [*p, *launch], True) for p in points]
    except (HydraException, OmegaConfBaseException) as err:
        raise ValueError(str(err).splitlines()[0]) from err
    records = []
    for num, (cfg, point, node) in enumerate(zip(configs, points, nodes, strict=True)):
        hydra = node.hydra
        with open_dict(hydra):
            hydra.job.num = num
            hydra.job.id = f"{hydra.job.name}_{num}"
        records.append(
            {
                ".hydra/config.yaml": OmegaConf.to_yaml(cfg),
                ".hydra/overrides.yaml": OmegaConf.to_yaml(list(point)),
                ".hydra/hydra.yaml": OmegaConf.to_yaml(hydra),
            }
        )
    name = nodes[0].hydra.runtime.choices.get("hydra/launcher") if launch else None
    jobs = None
    if name == "joblib":
        n_jobs = OmegaConf.select(nodes[0], "hydra.launcher.n_jobs")
        jobs = int(n_jobs) if n_jobs is not None and int(n_jobs) >= 1 else None
    settings = tuple(a for a in launch if a.startswith("hydra.launcher."))
    launcher = Launcher(name, jobs, settings)
    folder = folders[-1] if folders else str(nodes[0].hydra.sweep.dir)
    return Sweep(configs, records, launcher, Path(folder))
