"""Training runs of learned world models: ``train(cfg)`` and ``train_all(cfgs)``.

``train(cfg) -> (metrics, artifacts)`` trains one run with its own Lightning trainer;
``train_all(cfgs)`` trains many, by default as vectorized groups (``gridplan.training.vectorized``:
runs sharing an architecture train as members of one stack, each ending exactly as it would
alone), alone with ``train.vectorize=false``; every group and every run alone is one job of
a Hydra launcher (``gridplan.training.dispatch``, ``train_groups``). An ensemble
(``model.members=K``, ``gridplan.models.ensemble``) is always trained through its members
(``member_configs``). ``python -m train`` and the
learned-model experiment groups (E3, E4) train through these. Importing this module imports
Lightning (seconds); import it where a run starts.

The run folder ``<out_dir>/<run name>/version_<N>/`` is created fresh (a new version number
if earlier runs exist, never reusing one) and holds::

    config.yaml          the resolved config
    status.json          running, complete, failed or interrupted (``gridplan.training.run_status``)
    checkpoints/best.ckpt, checkpoints/last.ckpt   self-describing Lightning checkpoints
    events.out.tfevents.*   TensorBoard scalars, images, the config as text and the run's
                            HParams session: its flattened config beside its final metrics
                            and, once ``python -m eval --ckpt`` ran, its evaluation's
                            (``gridplan.training.hparams_summary``)
    metrics.json         the best checkpoint's prediction metrics and training summary

With ``logger=csv``, ``mlflow`` or ``wandb`` (``gridplan.training.loggers``) the chosen logger
writes in the run folder instead of TensorBoard (``metrics.csv``, ``mlruns/``, ``wandb/``).

The data are collected (or read from the cache) before the folder is made, so a run that
cannot start leaves nothing behind. ``resume`` continues an interrupted run from its
``last.ckpt``: weights, optimizer, early-stopping and checkpoint state through Lightning,
and the random number generators through ``RNGState``, so it ends where the uninterrupted
run would.

An ensemble's run folder also holds ``members/member<k>/`` (each member's own run folder) and
``group.json`` when its members trained on their own; its checkpoints stack the members' best
(and last) networks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from gridplan.metrics.calibration import uncertainty_vs_error
from gridplan.models import ensemble
from gridplan.training.config import config_task, run_name, schema, to_yaml, validate
from gridplan.training.dispatch import Job, Launcher, launch
from gridplan.training.engine import WorldModelModule
from gridplan.training.hparams_summary import trial_name
from gridplan.training.lightning_output import quiet_lightning_chatter, trainer_progress
from gridplan.training.loggers import (
    check_group_loggers,
    check_installed,
    finish_logger,
    log_final_metrics,
    make_logger,
    metric_writer,
    start_run_log,
)
from gridplan.training.members import Member, alone, group_key
from gridplan.training.module import (
    TransitionDataModule,
    held_out_windows,
    record_run,
    score_best,
)
from gridplan.training.run_status import read_status, requeued_run, write_status
from gridplan.training.vectorized import (
    GroupResult,
    auto_workers,
    deal,
    group_threads,
    train_group,
    usable_cores,
    worker_slots,
)
from gridplan.util.allocator import retain_freed_memory
from gridplan.util.files import write_text_atomic
from gridplan.util.threads import describe, intra_op_threads, threads_chosen, training_threads


def new_run_dir(out_dir: str | os.PathLike, name: str) -> tuple[Path, int]:
    """Create ``out_dir/name/version_<N>`` with the next free ``N``; returns (path, N).

    The folder is created with ``exist_ok=False``, so two runs started at once never share
    one: the loser of the race moves on to the next number.
    """
    parent = Path(out_dir) / name
    parent.mkdir(parents=True, exist_ok=True)
    taken = [
        int(p.name.split("_", 1)[1])
        for p in parent.glob("version_*")
        if p.name.split("_", 1)[1].isdigit()
    ]
    version = max(taken, default=-1) + 1
    while True:
        path = parent / f"version_{version}"
        try:
            path.mkdir()
            return path, version
        except FileExistsError:
            version += 1


class RNGState(Callback):
    """Keeps the Python, NumPy and torch random states in every checkpoint and restores them
    on resume (Lightning restores weights, optimizer and callbacks, not the generators), so
    the batches after a resume are the ones the uninterrupted run would have drawn."""

    # Plain ints, lists and tensors only: checkpoints are read with torch's weights_only.
    def state_dict(self) -> dict[str, Any]:
        version, mt, gauss = random.getstate()
        _, key, pos, has_gauss, cached = np.random.get_state()
        return {
            "python": [version, list(mt), gauss],
            "numpy": [torch.from_numpy(key.astype(np.int64)), pos, has_gauss, cached],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        version, mt, gauss = state_dict["python"]
        random.setstate((version, tuple(mt), gauss))
        key, pos, has_gauss, cached = state_dict["numpy"]
        np.random.set_state(("MT19937", key.numpy().astype(np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(state_dict["torch"])
        if state_dict["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])


class StopAtMaxSteps(Callback):
    """Validate a run at the optimizer step where it reaches ``trainer.max_steps``.

    Lightning ends a run at ``max_steps`` wherever that falls, but validates only at the end
    of an epoch: a run that stops inside one would keep the checkpoint of its last full
    epoch, or none at all when it stops inside the first. At the step that reaches the cap
    this callback signals the stop (``trainer.should_stop``) and lifts ``min_epochs``, which
    ``max_steps`` overrides anyway (Lightning's fit loop checks it first): Lightning then runs
    the validation it runs for any early stop, the checkpoint callbacks see that step's
    ``val/loss``, and the run ends there.

    Args:
        max_steps: the cap, >= 1.
    """

    def __init__(self, max_steps: int) -> None:
        self.max_steps = int(max_steps)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step >= self.max_steps:
            trainer.fit_loop.min_epochs = 0
            trainer.should_stop = True


def _trainer(t: dict, run_dir: Path, logger, best: ModelCheckpoint) -> pl.Trainer:
    """The Lightning trainer of the ``trainer`` config section, early stopping on
    ``t["monitor"]`` and stopping (validated) at ``t["max_steps"]`` when set."""
    stop = EarlyStopping(monitor=t["monitor"], mode="min", patience=t["patience"])
    bar, progress_lines = trainer_progress(t["progress_bar"])
    max_steps = t.get("max_steps")
    at_max = [] if max_steps is None else [StopAtMaxSteps(max_steps)]
    return pl.Trainer(
        accelerator=t["accelerator"],
        devices=1,
        max_epochs=t["max_epochs"],
        max_steps=-1 if max_steps is None else int(max_steps),
        min_epochs=t["min_epochs"],
        limit_train_batches=t["limit_train_batches"],
        deterministic=t["deterministic"],
        enable_progress_bar=bar,
        enable_model_summary=False,
        log_every_n_steps=t["log_every_n_steps"],
        num_sanity_val_steps=0,
        logger=logger,
        callbacks=[best, stop, RNGState(), *at_max, *progress_lines],
        default_root_dir=run_dir,
    )


def train(
    cfg: DictConfig, record: dict[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Train one world model as configured and score its best checkpoint.

    Args:
        cfg: a composed config (``gridplan.training.config.compose``).
        record: more text files for the run folder, ``{relative path: text}`` (the train CLI
            keeps Hydra's config and overrides as ``.hydra/*.yaml``).

    Returns:
        ``(metrics, artifacts)``. ``metrics``: the best checkpoint's held-out prediction
        metrics (``best/E_tot``, ``best/DRPE_graded``, ``best/err_dim/<dim>``, ...) plus
        ``epochs``, ``best_score`` (of ``trainer.monitor``) and ``train_seconds``.
        ``artifacts``: paths of ``run_dir``, ``config``, ``status``, ``best_checkpoint``,
        ``last_checkpoint``, ``metrics`` (JSON) and ``tensorboard`` (the event folder).

    An ensemble config (``model.members > 1``) is trained as ``train_all([cfg])`` does.

    Raises:
        ValueError: if the config fails validation or its data cannot be made; no run
            folder exists then.
        SIGTERMException, KeyboardInterrupt: if training is stopped by SIGTERM or SIGINT;
            the folder's status is then ``interrupted`` and ``resume`` continues it.
    """
    validate(cfg)
    if int(cfg.model.members) > 1:
        return train_all([cfg])[0]
    check_installed(cfg.logger.name)
    quiet_lightning_chatter()
    retain_freed_memory()
    module, data = _build(cfg)
    run_dir, _ = new_run_dir(cfg.out_dir, run_name(cfg))
    write_text_atomic(run_dir / "config.yaml", to_yaml(cfg))
    for name, text in (record or {}).items():
        write_text_atomic(run_dir / name, text)
    return _fit(cfg, module, data, run_dir, ckpt_path=None)


def _build(cfg: DictConfig) -> tuple[pl.LightningModule, TransitionDataModule | None]:
    """The module a run alone fits, made after seeding every generator with ``cfg.seed``,
    and its data: an MLP's ``WorldModelModule`` of one member holds its own
    (``gridplan.training.members.alone``; None is returned beside it), a latent family's
    module reads a ``TransitionDataModule``.

    Raises:
        ValueError: if the data cannot be made.
    """
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    if not is_latent(resolved):
        run, buffers = alone(cfg)
        return WorldModelModule(run.config, run.summary, [run], buffers), None
    # Imported here: the state MLP's runs never load the latent families.
    from gridplan.training.latent_module import LatentWorldModelModule

    data = TransitionDataModule(
        resolved["data"], resolved["variant"]["rollout_horizon"], resolved["world"]
    )
    data.setup()
    return LatentWorldModelModule(resolved, data.summary()), data


def train_run(overrides: list[str] | tuple[str, ...] = ()) -> Path:
    """Compose one run's config from Hydra ``overrides`` (as ``python -m train`` takes them,
    e.g. ``["model=jepa", "obs=grid", "data=4k", "seed=1", "out_dir=runs/zoo"]``), train it
    (``train``) and return its run folder (``checkpoints/best.ckpt`` inside).

    Raises:
        ValueError: as ``gridplan.training.config.compose`` and ``train``; no folder is left.
    """
    from gridplan.training.config import compose

    _, artifacts = train(compose(list(overrides)))
    return Path(artifacts["run_dir"])


def resumable_config(run_dir: str | os.PathLike) -> DictConfig:
    """The saved config of a run folder that ``resume`` can continue.

    Raises:
        ValueError: if the folder is not a run folder, is already complete, has no
            ``checkpoints/last.ckpt`` (it stopped before its first epoch ended), or trained
            as a member of a vectorized group (no loop state to resume from).
    """
    run_dir = Path(run_dir)
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ValueError(f"{run_dir} is not a run folder (no config.yaml)")
    status = (read_status(run_dir) or {}).get("status")
    if status == "complete":
        raise ValueError(f"run {run_dir} is already complete; nothing to resume")
    if not (run_dir / "checkpoints" / "last.ckpt").is_file():
        raise ValueError(
            f"run {run_dir} has no checkpoints/last.ckpt (status {status}); it stopped before "
            "its first epoch ended, start it again instead"
        )
    if not run_dir.name.startswith("version_") or not run_dir.name[8:].isdigit():
        raise ValueError(f"{run_dir} is not a run folder named version_<N>")
    last = torch.load(
        run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False, mmap=True
    )
    if "loops" not in last:  # gridplan.training.vectorized.write_checkpoint keeps no loop state
        raise ValueError(
            f"run {run_dir} trained as a member of a vectorized group: its checkpoints hold no "
            "training-loop state to resume from; train it again (train.vectorize=false makes "
            "runs that can resume)"
        )
    return validate(OmegaConf.merge(schema(), OmegaConf.load(config_path)))


def resume(run_dir: str | os.PathLike) -> tuple[dict[str, Any], dict[str, str]]:
    """Continue an interrupted run in its own folder from ``checkpoints/last.ckpt``.

    Returns:
        ``(metrics, artifacts)`` as ``train`` does, for the whole run.

    Raises:
        ValueError: as ``resumable_config``.
        SIGTERMException, KeyboardInterrupt: as ``train``.
    """
    run_dir = Path(run_dir)
    cfg = resumable_config(run_dir)
    module, data = _build(cfg)
    last = run_dir / "checkpoints" / "last.ckpt"
    return _fit(cfg, module, data, run_dir, ckpt_path=last)


def _fit(
    cfg: DictConfig,
    module: pl.LightningModule,
    data: TransitionDataModule | None,
    run_dir: Path,
    ckpt_path,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Fit ``module`` (on ``data``, unless it holds its own; from ``ckpt_path`` when
    resuming), score the best checkpoint and record the run's status, metrics and hparams."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    status_path = write_status(run_dir, "running", resumed_from=ckpt_path and str(ckpt_path))
    t = resolved["trainer"]
    logger = make_logger(resolved, run_dir)
    writer = metric_writer(logger, run_dir)
    start_run_log(logger, resolved, to_yaml(cfg), trial_name(run_dir))
    best = ModelCheckpoint(
        dirpath=run_dir / "checkpoints",
        filename="best",
        monitor=t["monitor"],
        mode="min",
        save_top_k=1,
        save_last=True,
        auto_insert_metric_name=False,
    )
    trainer = _trainer(t, run_dir, logger, best)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # Resuming writes into the run's own checkpoint folder, which is not empty.
            warnings.filterwarnings("ignore", message="Checkpoint directory .* is not empty")
            # A stack's loaders are plain lists of its batches (the buffers live on it).
            warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
            trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
        seconds = time.perf_counter() - start
        step = trainer.global_step
        if data is not None:
            from gridplan.training.latent_module import latent_scores

            metrics = latent_scores(best.best_model_path, data.val_set)
            for name, value in metrics.items():
                writer.add_scalar(name, value, step)
        else:
            (run,) = module.runs.values()
            figures = int(t["figures_every_n_epochs"]) > 0
            windows, task = run.data.windows, config_task(resolved)
            metrics = score_best(best.best_model_path, windows, task, writer, step, figures)
    except BaseException as err:
        _record_stop(run_dir, err, trainer.current_epoch)
        if isinstance(err, SystemExit) and not isinstance(err, SIGTERMException):
            # Lightning turns Ctrl+C into sys.exit(1) after its graceful shutdown.
            raise KeyboardInterrupt from err
        raise
    metrics.update(
        epochs=trainer.current_epoch,
        best_score=float(best.best_model_score),
        monitor=t["monitor"],
        train_seconds=round(seconds, 2),
    )
    checkpoints = (best.best_model_path, run_dir / "checkpoints" / "last.ckpt")
    summary = module.hparams["dataset"]
    metrics, artifacts = record_run(
        run_dir, metrics, summary, logger, writer, trainer.global_step, checkpoints
    )
    write_status(run_dir, "complete", epochs=metrics["epochs"])
    artifacts["status"] = str(status_path)
    return metrics, artifacts


def is_latent(config) -> bool:
    """Whether a run config trains a latent family (``model.family`` ``latent_recon`` or
    ``jepa``: ``gridplan.training.latent_module``); such a run always trains alone."""
    return config["model"].get("family", "mlp") != "mlp"


def _record_stop(run_dir: Path, err: BaseException, epoch: int) -> None:
    """Mark the run ``interrupted`` (SIGTERM, SIGINT) or ``failed`` (any other error)."""
    if isinstance(err, KeyboardInterrupt | SystemExit):
        write_status(run_dir, "interrupted", epoch=epoch, signal=type(err).__name__)
    else:
        write_status(run_dir, "failed", epoch=epoch, error=f"{type(err).__name__}: {err}")


def member_seed(seed: int, k: int) -> int:
    """Seed of member ``k`` of the ensemble of run ``seed``: ``numpy.random.SeedSequence``
    of ``(seed, k)``, so members of different ensembles never share a seed stream."""
    return int(np.random.SeedSequence((int(seed), int(k))).generate_state(1)[0])


def member_configs(cfg: DictConfig, bootstrap: bool = True) -> list[tuple[DictConfig, int | None]]:
    """The single-run configs of an ensemble's members and their resample seeds
    (``gridplan.models.ensemble``).

    Member ``k`` keeps everything of ``cfg`` except ``model.members`` (1), ``seed``
    (``member_seed(cfg.seed, k)``) and its name (``<run name>-member<k>``); ``data.seed`` is
    pinned to the run's, so every member reads the same logged dataset.

    Args:
        cfg: the ensemble run's composed config (``model.members = K >= 2``).
        bootstrap: resample the training split per member (resample seed = member seed)
            instead of training every member on the split itself.

    Returns:
        ``K`` pairs ``(config, resample_seed or None)``.

    Raises:
        ValueError: if ``model.members < 2``.
    """
    k_members = int(cfg.model.members)
    if k_members < 2:
        raise ValueError(f"an ensemble needs model.members >= 2, got {k_members}")
    base = run_name(cfg)
    data_seed = int(cfg.data.seed)
    out = []
    for k in range(k_members):
        seed = member_seed(int(cfg.seed), k)
        member = OmegaConf.merge(
            cfg,
            {
                "seed": seed,
                "name": f"{base}-member{k}",
                "model": {"members": 1},
                "data": {"seed": data_seed},
            },
        )
        out.append((member, seed if bootstrap else None))
    return out


@dataclasses.dataclass
class _Plan:
    """How ``train_all`` trains its configs: the group members (an ensemble's members
    among them), the config each member is (None: an ensemble's member), the configs
    trained alone, each ensemble's run folder and member slots, and every folder reserved."""

    members: list[Member] = dataclasses.field(default_factory=list)
    owners: list[int | None] = dataclasses.field(default_factory=list)
    alone: list[int] = dataclasses.field(default_factory=list)
    ensembles: dict[int, tuple[Path, list[int]]] = dataclasses.field(default_factory=dict)
    reserved: list[Path] = dataclasses.field(default_factory=list)

    def reserve(self, cfg: DictConfig, record: dict[str, str] | None) -> Path:
        """A new run folder for ``cfg`` holding its ``record`` files and status."""
        run_dir, _ = new_run_dir(cfg.out_dir, run_name(cfg))
        self.reserved.append(run_dir)
        for name, text in (record or {}).items():
            write_text_atomic(run_dir / name, text)
        write_status(run_dir, "running")
        return run_dir

    def add(self, i: int, cfg: DictConfig, record: dict[str, str] | None) -> None:
        """Config ``i``: an ensemble's members, a group member, or a run alone."""
        if int(cfg.model.members) > 1:
            run_dir = self.reserve(cfg, record)
            slots = []
            for k, (mcfg, resample) in enumerate(member_configs(cfg, bool(cfg.model.bootstrap))):
                slots.append(len(self.members))
                member_dir = run_dir / "members" / f"member{k}"
                write_status(member_dir, "running")
                self.members.append(Member(mcfg, member_dir, resample))
                self.owners.append(None)
            self.ensembles[i] = (run_dir, slots)
        elif cfg.train.vectorize and not is_latent(cfg):
            self.members.append(Member(cfg, self.reserve(cfg, record)))
            self.owners.append(i)
        else:
            self.alone.append(i)


def train_all(
    cfgs: list[DictConfig],
    progress: bool = True,
    record_dir: str | os.PathLike | None = None,
    records: list[dict[str, str] | None] | None = None,
    launcher: Launcher | None = None,
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Train every config; ``(metrics, artifacts)`` of each, in order, as ``train`` gives them.

    Runs whose ``train.vectorize`` is true (the default) and whose configs agree on
    ``gridplan.training.vectorized.GROUP_KEYS`` train as vectorized groups: dealt into
    ``launcher.jobs`` groups, else ``train.workers`` (of the first such run), else on this
    machine as many as pay for a worker's start, at most one per usable core
    (``gridplan.training.vectorized.auto_workers``), and one per architecture on a cluster
    launcher. Each group,
    and each other run (trained by ``train``, resumable), is one job of the Hydra launcher
    (``gridplan.training.dispatch``; on this machine: in this process for one job, else in
    worker processes). Each member's run folder, checkpoints, ``metrics.json`` and
    TensorBoard events are those of its run alone. An ensemble's members join the groups
    (or, with ``train.vectorize=false``, are groups of one); then their best and last
    networks are stacked into the ensemble run's checkpoints
    (``gridplan.models.ensemble.assemble``), scored, and ``metrics.json`` adds the members'
    epochs and scores and the disagreement's relation to rollout error on the run's windows
    (``gridplan.metrics.calibration.uncertainty_vs_error``).

    Every run folder records its status (``running``, then ``complete``; ``interrupted`` or
    ``failed`` if training stops). A group whose data cannot be made fails before it trains:
    the folders reserved for its runs, holding nothing but their status and ``records``, are
    removed again, so such a run leaves no folder behind, as ``train`` does.

    Args:
        cfgs: composed configs (``gridplan.training.config.compose``).
        progress: one progress line per group.
        record_dir: folder of the jobs and the groups' ``group.json`` records (default
            ``<out_dir>/groups/version_<N>`` of the first run).
        records: per config, more text files for its run folder (``{relative path: text}``,
            as ``train``'s ``record``), or None.
        launcher: where the jobs go (default: this machine).

    Raises:
        ValueError: if a config fails validation, a run's data cannot be made, or the
            launcher is unknown.
        SIGTERMException, KeyboardInterrupt: if training is stopped by SIGTERM or SIGINT;
            the unfinished runs' status is then ``interrupted``.
    """
    for cfg in cfgs:
        validate(cfg)
    check_group_loggers(_vectorized_runs(cfgs))
    launcher = launcher or Launcher()
    records = list(records) if records is not None else [None] * len(cfgs)
    if len(records) != len(cfgs):
        raise ValueError(f"{len(records)} records for {len(cfgs)} configs")
    if not cfgs:
        return []
    results: list[tuple[dict, dict] | None] = [None] * len(cfgs)
    plan = _Plan()
    for i, cfg in enumerate(cfgs):
        plan.add(i, cfg, records[i])
    members, owners, alone, ensembles, reserved = (
        plan.members, plan.owners, plan.alone, plan.ensembles, plan.reserved
    )
    if record_dir is None:
        record_dir, _ = new_run_dir(cfgs[0].out_dir, "groups")
        reserved.append(record_dir)
    groups, order = _groups(members, ensembles, launcher)
    singles = [
        Job(f"run{i}", _alone_job, {"cfg": cfgs[i], "record": records[i]})
        for i in alone
    ]
    try:
        done, alone_runs = _launch(groups, singles, record_dir, launcher, progress)
    except BaseException as err:
        _stop_members(members, reserved, err)
        raise
    member_results: list[tuple[dict, dict] | None] = [None] * len(members)
    for part, result in zip(order, done, strict=True):
        for slot, run in zip(part, result.runs, strict=True):
            member_results[slot] = run
    for m, (metrics, artifacts) in zip(members, member_results, strict=True):
        artifacts["status"] = str(write_status(m.run_dir, "complete", epochs=metrics["epochs"]))
    for slot, i in enumerate(owners):
        if i is not None:
            results[i] = member_results[slot]
    for i, run in zip(alone, alone_runs, strict=True):
        results[i] = run
    for i, (run_dir, slots) in ensembles.items():
        results[i] = _finish_ensemble(cfgs[i], run_dir, [member_results[s] for s in slots])
    return results


def _vectorized_runs(cfgs: list[DictConfig]) -> list[dict]:
    """The resolved configs of every run ``train_all`` trains in a vectorized group (an
    ensemble's members count once each), for ``check_group_loggers``; a run trained alone
    is checked by itself (a lone run's logger must be installed only)."""
    grouped = []
    for cfg in cfgs:
        resolved = OmegaConf.to_container(cfg, resolve=True)
        members = int(cfg.model.members)
        if cfg.train.vectorize and not is_latent(cfg):
            grouped += [resolved] * members
        else:
            check_installed(cfg.logger.name)
            if members > 1:  # the members are groups of one, one after another
                check_group_loggers([resolved])
    return grouped


def _groups(
    members: list[Member], ensembles: dict, launcher: Launcher
) -> tuple[list[tuple[str, list[Member]]], list[list[int]]]:
    """The vectorized groups of ``members`` (``train_all``) and each one's member slots."""
    sequential = {s for _, slots in ensembles.values() for s in slots}
    sequential = {s for s in sequential if not members[s].config.train.vectorize}
    buckets: dict[tuple, list[int]] = {}
    for slot, m in enumerate(members):
        if slot not in sequential:
            key = group_key(OmegaConf.to_container(m.config, resolve=True))
            buckets.setdefault(key, []).append(slot)
    groups: list[tuple[str, list[Member]]] = []
    order: list[list[int]] = []
    for b, slots in enumerate(buckets.values(), 1):
        config = members[slots[0]].config
        if launcher.jobs is not None:
            parts = launcher.jobs
        elif launcher.local:
            parts = auto_workers(config, len(slots))
        else:
            parts = int(config.train.workers or 1)
        parts = max(1, min(parts, len(slots)))
        for g, part in enumerate(deal(slots, parts), 1):
            name = f"group{b}" if parts == 1 else f"group{b}.{g}"
            groups.append((name, [members[s] for s in part]))
            order.append(part)
    for slot in sorted(sequential):
        groups.append((f"member{slot}", [members[slot]]))
        order.append([slot])
    return groups, order


def train_groups(
    groups: list[tuple[str, list[Member]]],
    record_dir: str | os.PathLike,
    launcher: Launcher | None = None,
    progress: bool = True,
) -> list[GroupResult]:
    """Train each ``(name, members)`` group as one job of ``launcher``
    (``gridplan.training.dispatch``); one ``GroupResult`` per group, in order.

    Args:
        groups: the groups; each one's members agree on ``GROUP_KEYS`` and have their run
            folders (``gridplan.training.vectorized.Member``).
        record_dir: folder of the jobs and of ``<record_dir>/<name>/group.json``.
        launcher: where the jobs go (default: this machine, one worker process per usable
            core; ``launcher.jobs`` caps the jobs running at once on ``joblib``).
        progress: one progress line per group.

    Raises:
        ValueError: as ``gridplan.training.vectorized.train_group``, or on an unknown launcher.
        SIGTERMException, KeyboardInterrupt: on SIGTERM or SIGINT.
    """
    return _launch(groups, [], record_dir, launcher or Launcher(), progress)[0]


def _launch(groups, singles: list[Job], record_dir, launcher: Launcher, progress: bool):
    """Launch the groups and the runs alone as one set of jobs; ``(group results, results
    of the runs alone)``."""
    record_dir = Path(record_dir)
    count = len(groups) + len(singles)
    if launcher.local:
        configs = [m.config for _, ms in groups for m in ms] + [j.kwargs["cfg"] for j in singles]
        slots = max(map(worker_slots, configs), default=1)
        parallel = max(1, min(count, launcher.jobs or slots))
        # The cores each job has to itself: all of them where the jobs run one at a time.
        at_once = 1 if launcher.name == "basic" else parallel
        cores = max(map(usable_cores, configs), default=1) // at_once
    else:
        parallel, cores = max(1, min(count, launcher.jobs or count)), 1
    jobs = [
        Job(name, _group_job, {"members": list(ms), "name": name, "progress": progress,
                               "record_dir": record_dir / name})
        for name, ms in groups
    ]
    jobs = [_with_threads(job, max(1, cores)) for job in [*jobs, *singles]]
    values = launch(jobs, record_dir, launcher, parallel)
    return values[: len(groups)], values[len(groups) :]


def job_threads(config: DictConfig, members: int | None, cores: int) -> int:
    """Torch threads of one training job whose (first) run is ``config``: the ``threads`` it
    chose (or ``OMP_NUM_THREADS``: ``gridplan.util.threads.threads_chosen``); else, for a
    vectorized group of ``members`` runs, as many of the ``cores`` it has to itself as its
    stacked step pays for (``gridplan.training.vectorized.group_threads``), and for a run
    alone (``members`` None) 1."""
    if threads_chosen(config.get("threads")):
        return training_threads(config.get("threads"))
    return 1 if members is None else group_threads(config, members, cores)


def _with_threads(job: Job, cores: int) -> Job:
    """``job`` with its ``threads`` (``job_threads``), announced on stderr."""
    if job.fn is _group_job:
        members = job.kwargs["members"]
        threads = job_threads(members[0].config, len(members), cores)
        what = f"{len(members)} member(s)"
    else:
        threads, what = job_threads(job.kwargs["cfg"], None, cores), "a run alone"
    print(f"{job.name}: {what}, {describe(threads)}", file=sys.stderr, flush=True)
    return Job(job.name, job.fn, {**job.kwargs, "threads": threads})


def _group_job(
    members: list[Member], name: str, progress: bool, threads: int, record_dir: Path
) -> GroupResult:
    """A launcher job: train one vectorized group. A member whose folder holds an earlier
    attempt (a requeued or rerun job) trains in a new ``version_<N>`` folder instead."""
    quiet_lightning_chatter()
    members = [_fresh(m) for m in members]
    try:
        with intra_op_threads(threads):
            return train_group(members, name=name, record_dir=record_dir, progress=progress)
    except ValueError as err:  # name the runs: the message alone does not say which point
        folders = ", ".join(str(m.run_dir) for m in members)
        raise ValueError(f"{err} (group {name}: {folders})") from err


def _fresh(member: Member) -> Member:
    """``member``, or the same run in a new version folder if its folder was trained in
    before (``config.yaml`` is written when a group starts); its records are copied.

    Raises:
        ValueError: for an ensemble member's folder (not a ``version_<N>`` folder).
    """
    old = Path(member.run_dir)
    if not (old / "config.yaml").is_file():
        return member
    if not old.name.startswith("version_"):
        raise ValueError(
            f"{old} holds an earlier attempt of this group; its checkpoints are not "
            "overwritten: train the ensemble again"
        )
    new, _ = new_run_dir(old.parent.parent, old.parent.name)
    if (old / ".hydra").is_dir():
        shutil.copytree(old / ".hydra", new / ".hydra")
    write_status(new, "running", earlier_attempt=str(old))
    if not (old / "metrics.json").is_file():  # a member that finished keeps its status
        write_status(old, "interrupted", continued_in=str(new))
    return dataclasses.replace(member, run_dir=new)


def _alone_job(
    cfg: DictConfig, record: dict[str, str] | None, threads: int
) -> tuple[dict[str, Any], dict[str, str]]:
    """A launcher job: train one run alone (``train``); a job SLURM requeued resumes the
    run it left (``gridplan.training.run_status.requeued_run``)."""
    previous = requeued_run(Path(cfg.out_dir) / run_name(cfg))
    with intra_op_threads(threads):
        if previous is not None:
            return resume(previous)
        return train(cfg, record=record)


def _stop_members(members: list[Member], reserved: list[Path], err: BaseException) -> None:
    """After ``err`` stopped the groups: when the data could not be made (ValueError),
    remove the reserved folders that no group started (no ``config.yaml`` or ``group.json``
    inside: nothing but status and records); mark the members that finished ``complete`` and
    every other run ``interrupted`` or ``failed``."""
    if isinstance(err, ValueError):
        for run_dir in reserved:
            started = [run_dir / "config.yaml", *run_dir.glob("members/*/config.yaml")]
            if not any(p.is_file() for p in started) and not any(run_dir.glob("*/group.json")):
                shutil.rmtree(run_dir)
                if not any(run_dir.parent.iterdir()):
                    run_dir.parent.rmdir()
    for run_dir in [*reserved, *(Path(m.run_dir) for m in members)]:
        if not (run_dir / "status.json").is_file():
            continue
        if (run_dir / "metrics.json").is_file():  # a member of a group that finished
            epochs = json.loads((run_dir / "metrics.json").read_text())["metrics"]["epochs"]
            write_status(run_dir, "complete", epochs=epochs)
        else:
            _record_stop(run_dir, err, epoch=None)


def _finish_ensemble(cfg: DictConfig, run_dir: Path, member_runs) -> tuple[dict, dict]:
    """Stack an ensemble's trained members into its run folder; score it."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    text = to_yaml(cfg)
    (run_dir / "config.yaml").write_text(text)
    info = {"bootstrap": bool(cfg.model.bootstrap), "sampling": cfg.model.sampling}
    ckpts = {}
    for which in ("best", "last"):
        paths = [a[f"{which}_checkpoint"] for _, a in member_runs]
        ckpts[which] = ensemble.assemble(
            paths, resolved, run_dir / "checkpoints" / f"{which}.ckpt", info
        )
    d = resolved["data"]
    task = config_task(resolved)
    windows = held_out_windows(
        d["windows"],
        d["window_horizon"],
        d["window_seed"],
        d["window_policy"],
        task,
        d["cache_dir"],
    )
    model = ensemble.load_ensemble(ckpts["best"])
    logger = make_logger(resolved, run_dir)
    writer = metric_writer(logger, run_dir)
    start_run_log(logger, resolved, text, trial_name(run_dir))
    figures = int(resolved["trainer"]["figures_every_n_epochs"]) > 0
    steps = sum(m["global_step"] for m in model.metadata["ensemble"]["members"])
    member_metrics = [m for m, _ in member_runs]
    try:
        metrics = score_best(ckpts["best"], windows, task, writer, steps, figures)
        quality = uncertainty_vs_error(model, windows)
        rho = quality.spearman
        writer.add_scalar("best/uncertainty_spearman", rho.rho, steps)
        writer.add_scalar("best/uncertainty_aurc", quality.aurc, steps)
        scores = [m["best_score"] for m in member_metrics]
        log_final_metrics(writer, {**metrics, "best_score": sum(scores) / len(scores)}, steps)
    finally:
        finish_logger(logger)
    metrics.update(
        epochs=max(m["epochs"] for m in member_metrics),
        best_score=sum(m["best_score"] for m in member_metrics) / len(member_metrics),
        monitor=resolved["trainer"]["monitor"],
        train_seconds=max(m["train_seconds"] for m in member_metrics),
        uncertainty_spearman=rho.rho,
        uncertainty_spearman_low=rho.low,
        uncertainty_spearman_high=rho.high,
        uncertainty_aurc=quality.aurc,
    )
    summary = {
        "metrics": metrics,
        "dataset": model.metadata["dataset"],
        "members": [
            {k: m[k] for k in ("epochs", "best_score", "best/E_tot", "best/DRPE_graded")}
            for m in member_metrics
        ],
        "uncertainty": quality.to_dict(),
    }
    metrics_path = run_dir / "metrics.json"
    write_text_atomic(metrics_path, json.dumps(summary, indent=2))
    status = write_status(run_dir, "complete", epochs=metrics["epochs"])
    return metrics, {
        "run_dir": str(run_dir),
        "config": str(run_dir / "config.yaml"),
        "status": str(status),
        "best_checkpoint": str(ckpts["best"]),
        "last_checkpoint": str(ckpts["last"]),
        "metrics": str(metrics_path),
        "tensorboard": str(run_dir),
        "members": json.dumps([a["run_dir"] for _, a in member_runs]),
    }
