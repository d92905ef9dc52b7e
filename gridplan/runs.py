"""One training run of a learned world model: ``train(cfg) -> (metrics, artifacts)``.

``python -m train`` and the learned-model experiment groups (E3, E4) both train through
``train``. Importing this module imports Lightning (seconds); import it where a run starts.

The run folder ``<out_dir>/<run name>/version_<N>/`` is created fresh (a new version number
if earlier runs exist, never reusing one) and holds::

    config.yaml          the resolved config
    checkpoints/best.ckpt, checkpoints/last.ckpt   self-describing Lightning checkpoints
    events.out.tfevents.*                          TensorBoard scalars and images
    metrics.json         the best checkpoint's prediction metrics and training summary
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

from gridplan import tasks
from gridplan.config import run_name, to_yaml, validate
from gridplan.learned import load_world_model
from gridplan.tasks import Task
from gridplan.training import (
    TransitionDataModule,
    WorldModelModule,
    log_figures,
    metric_scalars,
    score_windows,
)


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


def _score_best(path: str, windows, task: Task, logger, step: int) -> dict[str, Any]:
    """Prediction metrics of the best checkpoint on the held-out ``windows``, also logged to
    TensorBoard under ``best/`` (scalars and both figures)."""
    scored = score_windows(load_world_model(path), windows, task)
    metrics: dict[str, Any] = metric_scalars(scored, "best")
    for name, value in metrics.items():
        logger.experiment.add_scalar(name, value, step)
    log_figures(logger.experiment, scored, step, "best", task)
    logger.experiment.flush()
    return metrics


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

    Raises:
        ValueError: if the config fails validation.
    """
    validate(cfg)
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
    metrics = _score_best(best.best_model_path, data.windows, task, logger, trainer.global_step)
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
