"""Training runs of learned world models: ``train(cfg)`` and ``train_all(cfgs)``.

``train(cfg) -> (metrics, artifacts)`` trains one run with its own Lightning trainer;
``train_all(cfgs)`` trains many, by default as vectorized groups (``gridplan.vectorized``:
runs sharing an architecture train as members of one stack, each ending exactly as it would
alone), one after another with ``train.vectorize=false``. An ensemble (``model.members=K``,
``gridplan.ensemble``) is always trained through its members. ``python -m train`` and the
learned-model experiment groups (E3, E4) train through these. Importing this module imports
Lightning (seconds); import it where a run starts.

The run folder ``<out_dir>/<run name>/version_<N>/`` is created fresh (a new version number
if earlier runs exist, never reusing one) and holds::

    config.yaml          the resolved config
    checkpoints/best.ckpt, checkpoints/last.ckpt   self-describing Lightning checkpoints
    events.out.tfevents.*                          TensorBoard scalars and images
    metrics.json         the best checkpoint's prediction metrics and training summary

An ensemble's run folder also holds ``members/member<k>/`` (each member's own run folder) and
``group.json`` when its members trained on their own; its checkpoints stack the members' best
(and last) networks.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from gridplan import ensemble, tasks
from gridplan.config import run_name, to_yaml, validate
from gridplan.training import (
    TransitionDataModule,
    WorldModelModule,
    held_out_windows,
    keep_freed_memory,
    score_best,
)
from gridplan.vectorized import GroupResult, Member, deal, group_key, train_groups


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


def _trainer(t: dict, run_dir: Path, logger, best: ModelCheckpoint) -> pl.Trainer:
    """The Lightning trainer of the ``trainer`` config section, early stopping on
    ``t["monitor"]``."""
    stop = EarlyStopping(monitor=t["monitor"], mode="min", patience=t["patience"])
    return pl.Trainer(
        accelerator=t["accelerator"],
        devices=1,
        max_epochs=t["max_epochs"],
        min_epochs=t["min_epochs"],
        limit_train_batches=t["limit_train_batches"],
        deterministic=t["deterministic"],
        enable_progress_bar=t["progress_bar"],
        enable_model_summary=False,
        log_every_n_steps=t["log_every_n_steps"],
        num_sanity_val_steps=0,
        logger=logger,
        callbacks=[best, stop],
        default_root_dir=run_dir,
    )


def train(cfg: DictConfig) -> tuple[dict[str, Any], dict[str, str]]:
    """Train one world model as configured and score its best checkpoint.

    Args:
        cfg: a composed config (``gridplan.config.compose``).

    Returns:
        ``(metrics, artifacts)``. ``metrics``: the best checkpoint's held-out prediction
        metrics (``best/E_tot``, ``best/DRPE_graded``, ``best/err_dim/<dim>``, ...) plus
        ``epochs``, ``best_score`` (of ``trainer.monitor``) and ``train_seconds``.
        ``artifacts``: paths of ``run_dir``, ``config``, ``best_checkpoint``,
        ``last_checkpoint``, ``metrics`` (JSON) and ``tensorboard`` (the event folder).

    An ensemble config (``model.members > 1``) is trained as ``train_all([cfg])`` does.

    Raises:
        ValueError: if the config fails validation.
    """
    validate(cfg)
    if int(cfg.model.members) > 1:
        return train_all([cfg])[0]
    keep_freed_memory()
    resolved = OmegaConf.to_container(cfg, resolve=True)
    pl.seed_everything(resolved["seed"], workers=True, verbose=False)
    run_dir, version = new_run_dir(resolved["out_dir"], run_name(cfg))
    config_path = run_dir / "config.yaml"
    config_path.write_text(to_yaml(cfg))

    data = TransitionDataModule(resolved["data"])
    data.setup()
    module = WorldModelModule(resolved, data.summary())
    t = resolved["trainer"]
    logger = TensorBoardLogger(
        save_dir=resolved["out_dir"], name=run_name(cfg), version=version, default_hp_metric=False
    )
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
    trainer.fit(module, datamodule=data)
    seconds = time.perf_counter() - start

    task = tasks.get(resolved["data"]["task"])
    figures = int(t["figures_every_n_epochs"]) > 0
    metrics = score_best(
        best.best_model_path, data.windows, task, logger.experiment, trainer.global_step, figures
    )
    metrics.update(
        epochs=trainer.current_epoch,
        best_score=float(best.best_model_score),
        monitor=t["monitor"],
        train_seconds=round(seconds, 2),
    )
    metrics_path = run_dir / "metrics.json"
    summary = {"metrics": metrics, "dataset": module.hparams["dataset"]}
    metrics_path.write_text(json.dumps(summary, indent=2))
    artifacts = {
        "run_dir": str(run_dir),
        "config": str(config_path),
        "best_checkpoint": str(best.best_model_path),
        "last_checkpoint": str(run_dir / "checkpoints" / "last.ckpt"),
        "metrics": str(metrics_path),
        "tensorboard": str(logger.log_dir),
    }
    return metrics, artifacts


def train_all(
    cfgs: list[DictConfig], progress: bool = True, record_dir: str | os.PathLike | None = None
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Train every config; ``(metrics, artifacts)`` of each, in order, as ``train`` gives them.

    Runs whose ``train.vectorize`` is true (the default) and whose configs agree on
    ``gridplan.vectorized.GROUP_KEYS`` train as vectorized groups: dealt into
    ``train.workers`` groups (of the first such run), trained in that many worker processes.
    Each member's run folder, checkpoints, ``metrics.json`` and TensorBoard events are those
    of its run alone. The others train one after another with ``train``. An ensemble's
    members join the groups (or, with ``train.vectorize=false``, train one after another);
    then their best and last networks are stacked into the ensemble run's checkpoints
    (``gridplan.ensemble.assemble``), scored, and ``metrics.json`` adds the members' epochs
    and scores and the disagreement's relation to rollout error on the run's windows
    (``gridplan.ensemble.uncertainty_vs_error``).

    Args:
        cfgs: composed configs (``gridplan.config.compose``).
        progress: one progress line per group.
        record_dir: folder of the groups' ``group.json`` records (default
            ``<out_dir>/groups/version_<N>`` of the first vectorized run).

    Raises:
        ValueError: if a config fails validation.
    """
    for cfg in cfgs:
        validate(cfg)
    results: list[tuple[dict, dict] | None] = [None] * len(cfgs)
    ensembles: dict[int, tuple[Path, list[int]]] = {}
    members: list[Member] = []
    owners: list[int | None] = []
    alone: list[int] = []
    for i, cfg in enumerate(cfgs):
        if int(cfg.model.members) > 1:
            run_dir, _ = new_run_dir(cfg.out_dir, run_name(cfg))
            slots = []
            for k, (mcfg, resample) in enumerate(
                ensemble.member_configs(cfg, bool(cfg.model.bootstrap))
            ):
                slots.append(len(members))
                members.append(Member(mcfg, run_dir / "members" / f"member{k}", resample))
                owners.append(None)
            ensembles[i] = (run_dir, slots)
        elif cfg.train.vectorize:
            members.append(Member(cfg, new_run_dir(cfg.out_dir, run_name(cfg))[0]))
            owners.append(i)
        else:
            alone.append(i)
    member_results = _train_members(cfgs, members, ensembles, progress, record_dir)
    for slot, i in enumerate(owners):
        if i is not None:
            results[i] = member_results[slot]
    for i in alone:
        results[i] = train(cfgs[i])
    for i, (run_dir, slots) in ensembles.items():
        results[i] = _finish_ensemble(cfgs[i], run_dir, [member_results[s] for s in slots])
    return results


def _train_members(cfgs, members, ensembles, progress, record_dir) -> list[tuple[dict, dict]]:
    """Train ``members``; each one's ``(metrics, artifacts)``, in order."""
    if not members:
        return []
    sequential = {s for i, (_, slots) in ensembles.items() for s in slots}
    sequential = {s for s in sequential if not members[s].config.train.vectorize}
    buckets: dict[tuple, list[int]] = {}
    for slot, m in enumerate(members):
        if slot not in sequential:
            key = group_key(OmegaConf.to_container(m.config, resolve=True))
            buckets.setdefault(key, []).append(slot)
    groups: list[tuple[str, list[Member]]] = []
    order: list[list[int]] = []
    for b, slots in enumerate(buckets.values(), 1):
        workers = int(members[slots[0]].config.train.workers)
        for g, part in enumerate(deal(slots, workers), 1):
            name = f"group{b}" if workers == 1 or len(slots) == 1 else f"group{b}.{g}"
            groups.append((name, [members[s] for s in part]))
            order.append(part)
    for slot in sorted(sequential):
        groups.append((run_name(members[slot].config), [members[slot]]))
        order.append([slot])
    first = members[order[0][0]].config
    if record_dir is None:
        record_dir, _ = new_run_dir(first.out_dir, "groups")
    parallel = [g for g, part in zip(groups, order, strict=True) if part[0] not in sequential]
    workers = max([int(m.config.train.workers) for _, ms in parallel for m in ms], default=1)
    done: list[GroupResult] = train_groups(parallel, workers, record_dir, progress)
    done += train_groups(groups[len(parallel) :], 1, record_dir, progress)
    out: list[tuple[dict, dict] | None] = [None] * len(members)
    for part, result in zip(order, done, strict=True):
        for slot, run in zip(part, result.runs, strict=True):
            out[slot] = run
    return out


def _finish_ensemble(cfg: DictConfig, run_dir: Path, member_runs) -> tuple[dict, dict]:
    """Stack an ensemble's trained members into its run folder; score it."""
    from torch.utils.tensorboard import SummaryWriter

    resolved = OmegaConf.to_container(cfg, resolve=True)
    (run_dir / "config.yaml").write_text(to_yaml(cfg))
    info = {"bootstrap": bool(cfg.model.bootstrap), "sampling": cfg.model.sampling}
    ckpts = {}
    for which in ("best", "last"):
        paths = [a[f"{which}_checkpoint"] for _, a in member_runs]
        ckpts[which] = ensemble.assemble(
            paths, resolved, run_dir / "checkpoints" / f"{which}.ckpt", info
        )
    d = resolved["data"]
    task = tasks.get(d["task"])
    windows = held_out_windows(
        d["windows"], d["window_horizon"], d["window_seed"], d["window_policy"], task
    )
    model = ensemble.load_ensemble(ckpts["best"])
    writer = SummaryWriter(log_dir=str(run_dir))
    figures = int(resolved["trainer"]["figures_every_n_epochs"]) > 0
    steps = sum(m["global_step"] for m in model.metadata["ensemble"]["members"])
    try:
        metrics = score_best(ckpts["best"], windows, task, writer, steps, figures)
        report = ensemble.uncertainty_vs_error(model, windows)
        rho = report["spearman"]
        writer.add_scalar("best/uncertainty_spearman", rho.rho, steps)
        writer.add_scalar("best/uncertainty_aurc", report["aurc"], steps)
    finally:
        writer.close()
    member_metrics = [m for m, _ in member_runs]
    metrics.update(
        epochs=max(m["epochs"] for m in member_metrics),
        best_score=sum(m["best_score"] for m in member_metrics) / len(member_metrics),
        monitor=resolved["trainer"]["monitor"],
        train_seconds=max(m["train_seconds"] for m in member_metrics),
        uncertainty_spearman=rho.rho,
        uncertainty_spearman_low=rho.low,
        uncertainty_spearman_high=rho.high,
        uncertainty_aurc=report["aurc"],
    )
    summary = {
        "metrics": metrics,
        "dataset": model.metadata["dataset"],
        "members": [
            {k: m[k] for k in ("epochs", "best_score", "best/E_tot", "best/DRPE_graded")}
            for m in member_metrics
        ],
        "uncertainty": {
            "spearman": rho.to_dict(),
            "aurc": report["aurc"],
            "aurc_oracle": report["aurc_oracle"],
            "mean_error": report["mean_error"],
            "coverage": report["coverage"].tolist(),
            "risk": report["risk"].tolist(),
            "n_windows": report["n_windows"],
        },
    }
    metrics_path = run_dir / "metrics.json"
    metrics_path.write_text(json.dumps(summary, indent=2))
    return metrics, {
        "run_dir": str(run_dir),
        "config": str(run_dir / "config.yaml"),
        "best_checkpoint": str(ckpts["best"]),
        "last_checkpoint": str(ckpts["last"]),
        "metrics": str(metrics_path),
        "tensorboard": str(run_dir),
        "members": json.dumps([a["run_dir"] for _, a in member_runs]),
    }
