"""Training the learned world models of E3 and E4 (paper §5.4, Table 3; appendix A).

Every model is trained once per training seed with ``gridplan.training.runs.train`` (Lightning; the
``configs/`` groups ``variant`` and ``data``): training seed ``k`` sets the network
initialisation and the logged dataset (``data.seed`` follows ``seed``). Datasets are cached
under ``<results root>/data_cache`` (derived data, keyed by task, policy, budget and seed), so
a rerun and e4 do not collect them again; run folders go to ``<group>/runs/``. e4 takes e3's
models from e3's ``results.json`` (``training_checkpoint``) and trains them itself with the
same settings only when e3 has not finished with the same config.

``ModelStack`` puts several one-setting models into one batch, so the planner and the
metrics evaluate all of a seed's models in one call; ``DeterministicStack`` does so for
models that plan deterministically, so the planner shares the tree's prefixes (e7, e8).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from omegaconf import DictConfig

from gridplan.core import tasks
from gridplan.data.datasets import parse_budget
from gridplan.experiments.records import TrainingRun
from gridplan.experiments.runner import RESULTS_FILE, GroupContext
from gridplan.experiments.settings import E3Config, LearnedRow
from gridplan.models.capabilities import capabilities_of
from gridplan.models.contract import WorldModel
from gridplan.models.learned import load_world_model
from gridplan.planning.scorers import is_deterministic
from gridplan.training.config import compose, validate
from gridplan.util.threads import available_cpus, intra_op_threads

#: Shared dataset cache under the results root.
DATA_CACHE = "data_cache"
#: Training run folders inside the group folder.
RUNS = "runs"


class ModelStack(WorldModel):
    """Several one-setting world models sharing one batch: ``n_settings = len(models)``.

    Rows are split into ``M`` equal contiguous blocks (the ``WorldModel`` convention); block
    ``m`` is predicted by ``models[m]``.

    Args:
        models: one-setting world models (e.g. ``LearnedWorldModel``).

    Raises:
        ValueError: if ``models`` is empty or one of them has several settings.
    """

    def __init__(self, models: Sequence) -> None:
        models = list(models)
        if not models:
            raise ValueError("ModelStack needs at least one model")
        for k, m in enumerate(models):
            if capabilities_of(m).n_settings != 1:
                raise ValueError(f"model {k} has {m.n_settings} settings; stack one-setting models")
        self.models = models
        self.n_settings = len(models)

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        for m in self.models:
            if hasattr(m, "start_rollout"):
                m.start_rollout(batch // self.n_settings, generator)

    def predict(
        self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """``(N, S)``, ``(N,)`` -> ``(N, S)`` (``S``: the world's state width), block ``m`` by
        model ``m``.

        Raises:
            ValueError: if ``N`` does not split into ``n_settings`` equal blocks.
        """
        n = state.shape[0]
        if n % self.n_settings:
            raise ValueError(f"batch of {n} rows does not split into {self.n_settings} blocks")
        per = n // self.n_settings
        parts = [
            m.predict(state[k * per : (k + 1) * per], action[k * per : (k + 1) * per], generator)
            for k, m in enumerate(self.models)
        ]
        return torch.cat(parts)


def plans_deterministically(model) -> bool:
    """Whether ``model``'s ``predict`` is a fixed function of state and action: declared
    deterministic, or an ensemble planning with its members' mean (which declares itself
    stochastic only because its other mode, trajectory sampling, is)."""
    return is_deterministic(model) or capabilities_of(model).sampling == "mean"


class DeterministicStack(WorldModel):
    """One-setting models that plan deterministically (``plans_deterministically``) in one
    batch (``ModelStack``), declared deterministic, so the planner scores them with the
    shared-prefix tree: one prediction per tree node, the scores of independent leaves bit
    for bit (``gridplan.planning.tree``).

    Raises:
        ValueError: if a model does not plan deterministically, or as ``ModelStack``.
    """

    deterministic = True

    def __init__(self, models: Sequence) -> None:
        bad = [k for k, m in enumerate(models) if not plans_deterministically(m)]
        if bad:
            raise ValueError(f"models {bad} are not deterministic")
        self.stack = ModelStack(models)
        self.n_settings = self.stack.n_settings

    def predict(self, state, action, generator):
        return self.stack.predict(state, action, generator)


@contextlib.contextmanager
def quiet_lightning():
    """Silence Lightning's per-run banners and deprecation chatter (our bar shows progress)."""
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"lightning(\.|$)")
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def cpu_threads(ctx: GroupContext):
    """One intra-op thread for the small-batch MLP work on CPU (``intra_op_threads``)."""
    return intra_op_threads(1) if ctx.device.type == "cpu" else contextlib.nullcontext()


#: Composed configs of ``seeded_compose``, keyed by their overrides besides the seed.
_COMPOSED: dict[tuple[str, ...], DictConfig] = {}


def seeded_compose(overrides: Sequence[str], seed: int) -> DictConfig:
    """``compose([*overrides, f"seed={seed}"])``, composed by Hydra once per ``overrides``
    (cached per process, a second of Hydra's work each on 2 cores) and given each seed by
    setting ``seed``, which the config's other seeds interpolate (``data.seed``); validated
    again (``gridplan.training.config.validate``). Equal to a fresh ``compose`` of the same
    overrides (``tests/experiments/test_e7.py``).

    Raises:
        ValueError: if ``overrides`` set the seed themselves, or as ``compose``.
    """
    overrides = tuple(str(o) for o in overrides)
    if any(o.split("=", 1)[0].strip().lstrip("+~") == "seed" for o in overrides):
        raise ValueError("seeded_compose sets the seed itself; drop seed= from the overrides")
    if overrides not in _COMPOSED:
        _COMPOSED[overrides] = compose([*overrides, "seed=0"])
    cfg = copy.deepcopy(_COMPOSED[overrides])
    cfg.seed = int(seed)
    return validate(cfg)


def run_config(
    ctx: GroupContext, cfg: E3Config, row: LearnedRow, seed: int, out_dir: Path, *extra: str
):
    """The composed training config of one row and seed (``seeded_compose``), plus ``extra``
    overrides."""
    accelerator = "cpu" if ctx.device.type == "cpu" else "gpu"
    return seeded_compose(
        [
            *row.overrides(),
            *cfg.train_overrides,
            f"out_dir={out_dir}",
            f"data.cache_dir={ctx.root / DATA_CACHE}",
            "trainer.progress_bar=false",
            f"trainer.accelerator={accelerator}",
            *extra,
        ],
        seed,
    )


def group_relative(path: str | Path, folder: Path) -> str:
    """``path`` relative to the group ``folder`` when inside it, else absolute.

    Both are resolved first: Lightning reports absolute checkpoint paths while the results
    root is often relative, and the group folder is renamed when it is finished, so only a
    relative path stays valid.
    """
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return str(path.relative_to(folder)) if path.is_relative_to(folder) else str(path)


def train_run(
    ctx: GroupContext, cfg: E3Config, row: LearnedRow, seed: int, out_dir: Path | None = None
) -> TrainingRun:
    """Train one model as its run alone (``gridplan.training.runs.train``), as a job of the
    group's launcher (``ctx.launcher``; this process by default); its run record (checkpoint
    relative to the group folder when inside it).

    Args:
        out_dir: where the run folder goes (default ``<group>/runs``).
    """
    # Lightning is imported only by groups that train (it takes seconds to import).
    from gridplan.training import runs

    out_dir = out_dir or ctx.out / RUNS
    t0 = time.perf_counter()
    with quiet_lightning(), cpu_threads(ctx):
        run_cfg = run_config(ctx, cfg, row, seed, out_dir, "train.vectorize=false")
        [(metrics, artifacts)] = runs.train_all(
            [run_cfg], progress=ctx.progress, record_dir=out_dir / "jobs", launcher=ctx.launcher
        )
    return _record(row, seed, run_cfg, metrics, artifacts, ctx, time.perf_counter() - t0)


def train_runs(
    ctx: GroupContext, cfg: E3Config, jobs: Sequence[tuple[LearnedRow, int]]
) -> dict[tuple[str, int], TrainingRun]:
    """Train every ``(row, seed)`` job as members of vectorized groups
    (``gridplan.training.vectorized``); ``(key, seed) -> run record``.

    Each model is its run alone (``gridplan.training.runs.train``): the same initial weights,
    minibatch order, epochs, early stopping and checkpoint, up to float rounding. The jobs,
    in the given order, are dealt into groups (on CPU one per usable core, at most one per 8
    jobs; ``ctx.launcher.jobs`` if given), so each group holds a similar mix of rows; a GPU
    trains one group. Each group is one job of a Hydra launcher
    (``gridplan.training.runs.train_groups``): ``ctx.launcher``, else this machine (this
    process for one group, else one worker process per group, one thread each); every
    model is the same. The runs draw no dashboard images
    (``trainer.figures_every_n_epochs=0``: Matplotlib renders, the slowest part of a small
    run's epoch) and score the held-out windows only with their best checkpoint
    (``trainer.metrics_every_n_epochs=0``: a sixth of a group's arithmetic, logged curves
    only); neither is part of the training protocol, which early-stops and keeps the best
    checkpoint on ``val/loss`` every epoch. ``train_seconds`` of a record is the
    time its group took until that model finished; ``wall_seconds`` the group's whole time.
    The groups' records go to ``<group>/runs/groups/``.
    """
    from gridplan.training import runs
    from gridplan.training.config import run_name
    from gridplan.training.dispatch import Launcher
    from gridplan.training.vectorized import Member, deal

    out_dir = ctx.out / RUNS
    if ctx.launcher is not None and ctx.launcher.jobs is not None:
        workers = ctx.launcher.jobs
    elif ctx.device.type == "cpu":
        workers = max(1, min(available_cpus(), len(jobs) // 8))
    else:
        workers = 1
    members, configs = [], []
    for row, seed in jobs:
        run_cfg = run_config(
            ctx,
            cfg,
            row,
            seed,
            out_dir,
            "trainer.figures_every_n_epochs=0",
            "trainer.metrics_every_n_epochs=0",
        )
        members.append(Member(run_cfg, runs.new_run_dir(out_dir, run_name(run_cfg))[0]))
        configs.append(run_cfg)
    slots = deal(list(range(len(jobs))), workers)
    groups = [(f"group{g + 1}", [members[i] for i in part]) for g, part in enumerate(slots)]
    launcher = ctx.launcher or Launcher()
    launcher = Launcher(launcher.name, workers, launcher.overrides)
    if launcher.name is not None:
        ctx.log(f"{len(groups)} training group(s) as jobs of hydra/launcher={launcher.name}")
    with quiet_lightning(), cpu_threads(ctx):
        results = runs.train_groups(groups, out_dir / "groups", launcher, ctx.progress)
    trained = {}
    for part, result in zip(slots, results, strict=True):
        for i, run in zip(part, result.runs, strict=True):
            trained[i] = (*run, ctx, result.record["wall_seconds"])
    # In the jobs' order, however they were dealt.
    return {
        (row.key, seed): _record(row, seed, configs[i], *trained[i])
        for i, (row, seed) in enumerate(jobs)
    }


def _record(row, seed, run_cfg, metrics, artifacts, ctx, wall) -> TrainingRun:
    meta = load_world_model(artifacts["best_checkpoint"]).metadata
    return TrainingRun(
        key=row.key,
        name=row.name,
        seed=seed,
        checkpoint=group_relative(artifacts["best_checkpoint"], ctx.out),
        epochs=metrics["epochs"],
        max_epochs=run_cfg.trainer.max_epochs,
        patience=run_cfg.trainer.patience,
        monitor=run_cfg.trainer.monitor,
        hidden=list(run_cfg.model.hidden),
        lr=run_cfg.model.lr,
        batch_size=run_cfg.data.batch_size,
        train_seconds=metrics["train_seconds"],
        wall_seconds=round(wall, 2),
        val_E_tot=metrics["best/E_tot"],
        val_DRPE_graded=metrics["best/DRPE_graded"],
        transitions=meta["dataset"]["meta"]["transitions"],
        data_events=dict(meta["dataset"]["event_counts"]),
    )


def training_checkpoint(folder: Path, key: str, seed: int) -> Path | None:
    """The best checkpoint of row ``key`` and training ``seed`` recorded in a finished e3
    folder's ``results.json``, or None when that run is not there."""
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        return None
    for run in json.loads(path.read_text()).get("runs", []):
        if run["key"] == key and run["seed"] == seed:
            ckpt = Path(folder) / run["checkpoint"]
            return ckpt if ckpt.is_file() else None
    return None


def logged_states(
    ctx: GroupContext, cfg: E3Config, row: LearnedRow, seed: int, n_fit: int, n_saliency: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Disjoint random samples of the logged states the model of ``row`` and ``seed`` was
    trained on (its cached dataset): ``(n_fit, 12)`` and ``(n_saliency, 12)`` (fewer if the
    data is smaller)."""
    # gridplan.training.module imports Lightning: only when this runs.
    from gridplan.training.module import cached_dataset

    data = compose([*row.overrides(), *cfg.train_overrides, f"seed={seed}"]).data
    dataset = cached_dataset(
        data.policy, parse_budget(data.budget), seed, tasks.get(data.task), ctx.root / DATA_CACHE
    )
    states = dataset.states.to(ctx.device)
    order = torch.randperm(states.shape[0], generator=torch.Generator().manual_seed(seed))
    n_fit = min(n_fit, states.shape[0] // 2)
    fit = states[order[:n_fit].to(ctx.device)]
    rest = order[n_fit : n_fit + n_saliency].to(ctx.device)
    return fit, states[rest]
