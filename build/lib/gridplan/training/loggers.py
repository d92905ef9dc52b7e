"""The Lightning logger of a run (``logger`` config group, ``configs/train/logger/``) and one
writer interface over all of them (``docs/DESIGN.md``, "Dashboards and HParams").

``make_logger`` builds the run's logger writing into its run folder: Lightning's
``TensorBoardLogger`` (default), ``CSVLogger``, ``MLFlowLogger`` on a local file store (no
server) or ``WandbLogger`` in offline mode. MLflow and W&B are optional: choosing one that is
not installed raises ``gridplan.util.extras.MissingExtraError`` (a ``ValueError``) naming the
command that installs its ``pyproject.toml`` extra, ``pip install "gridplan[mlflow]"``.

``metric_writer`` gives the code that logs scalars and figures (``gridplan.training.module``'s
``score_best`` and ``log_figures``, the vectorized trainer) a ``SummaryWriter``-shaped object
for any of them: TensorBoard's own ``SummaryWriter``, or ``LoggerWriter``, which sends
scalars to the logger's ``log_metrics`` and figures where that logger keeps images
(MLflow artifacts, W&B images, PNG files beside a CSV log).

``start_run_log`` records the run's config once at the start: the flattened config as
hparams and the YAML text (TensorBoard: the HParams session of
``gridplan.training.hparams_summary`` and a text summary ``config``; the others: their
``log_hyperparams``, MLflow also ``config.yaml`` as an artifact).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from torch.utils.tensorboard import SummaryWriter

from gridplan.training.config import LOGGERS
from gridplan.training.hparams_summary import (
    TRAIN_METRICS,
    end_session,
    flat_config,
    has_session,
    trial_name,
    write_session,
)
from gridplan.util.extras import require

#: Optional loggers; each is the ``pyproject.toml`` extra that installs it
#: (``gridplan.util.extras.EXTRAS``).
OPTIONAL_LOGGERS = ("mlflow", "wandb")
#: MLflow's switch that allows its file store (``file:`` tracking URIs).
MLFLOW_FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"
#: Loggers of which one process can hold several runs at once (a vectorized group writes
#: every member's log from one process); W&B keeps one active run per process.
CONCURRENT_LOGGERS = ("tensorboard", "csv", "mlflow")


def check_installed(name: str) -> None:
    """Check that logger ``name`` is known and its package installed (without importing it).

    Raises:
        ValueError: if ``name`` is not one of ``LOGGERS``.
        gridplan.util.extras.MissingExtraError: (a ``ValueError``) naming the install
            command, ``pip install "gridplan[wandb]"``, if its package is missing.
    """
    if name not in LOGGERS:
        raise ValueError(f"unknown logger {name!r}; valid: {', '.join(LOGGERS)}")
    if name in OPTIONAL_LOGGERS:
        require(name, f"logger={name}")


def check_group_loggers(configs: Iterable[dict]) -> None:
    """Raises ValueError if runs trained together in one process (a vectorized group of
    more than one run) use a logger that holds one run per process (W&B), or a logger that
    is not installed."""
    configs = list(configs)
    for config in configs:
        check_installed(config["logger"]["name"])
    if len(configs) < 2:
        return
    names = sorted({c["logger"]["name"] for c in configs} - set(CONCURRENT_LOGGERS))
    if names:
        raise ValueError(
            f"logger={names[0]} holds one run per process, but a vectorized group trains "
            f"{len(configs)} runs in one process; use train.vectorize=false for these runs, "
            f"or one of the loggers {', '.join(CONCURRENT_LOGGERS)}"
        )


def make_logger(config: dict, run_dir: str | Path) -> Logger:
    """The Lightning logger ``config["logger"]`` chooses, writing into ``run_dir``.

    Args:
        config: a resolved run config (``gridplan.training.config.Config`` as a dict).
        run_dir: the run folder (``out_dir/<name>/version_<N>``).

    Raises:
        ValueError: as ``check_installed``.
    """
    choice = config["logger"]
    name = choice["name"]
    check_installed(name)
    run_dir = Path(run_dir)
    if name == "tensorboard":
        return TensorBoardLogger(
            save_dir=str(run_dir), name="", version="", default_hp_metric=False
        )
    if name == "csv":
        return _csv_logger(run_dir)
    label = trial_name(run_dir)
    if name == "mlflow":
        from lightning.pytorch.loggers import MLFlowLogger

        uri = choice["tracking_uri"] or f"file:{(run_dir / 'mlruns').resolve()}"
        if uri.startswith("file:"):
            # MLflow >= 3.7 refuses its file store unless this is set; a local store without a
            # server is what logger=mlflow is for (a value set in the environment is kept).
            os.environ.setdefault(MLFLOW_FILE_STORE, "true")
        return MLFlowLogger(
            experiment_name=choice["experiment_name"],
            run_name=label,
            tracking_uri=uri,
            tags={"run_dir": str(run_dir)},
        )
    from lightning.pytorch.loggers import WandbLogger

    return WandbLogger(
        name=label,
        project=choice["project"],
        save_dir=str(run_dir),
        offline=bool(choice["offline"]),
    )


def _csv_logger(run_dir: Path) -> CSVLogger:
    """Lightning's ``CSVLogger`` writing ``run_dir/metrics.csv``. Lightning deletes a
    ``metrics.csv`` it finds; a resumed run's earlier one is kept as ``metrics.<k>.csv``."""
    earlier = run_dir / "metrics.csv"
    if earlier.is_file():
        k = 0
        while (run_dir / f"metrics.{k}.csv").exists():
            k += 1
        earlier.rename(run_dir / f"metrics.{k}.csv")
    logger = CSVLogger(save_dir=str(run_dir), name="", version="")
    with warnings.catch_warnings():
        # The run folder holds config.yaml and status.json before the log starts.
        warnings.filterwarnings("ignore", message="Experiment logs directory .* not empty")
        logger.experiment  # noqa: B018 -- creates the writer now, under the filter
    return logger


class LoggerWriter:
    """The ``SummaryWriter`` calls gridplan logs through, sent to a non-TensorBoard
    Lightning logger: ``add_scalar`` to ``log_metrics``; ``add_figure`` to MLflow artifacts
    (``figures/<tag>/step<N>.png``), W&B images, or PNG files under
    ``<run folder>/figures/`` beside a CSV log; ``add_text`` to an MLflow text artifact;
    ``add_custom_scalars`` (TensorBoard's chart layout) is dropped."""

    def __init__(self, logger: Logger, run_dir: str | Path) -> None:
        self.logger = logger
        self.run_dir = Path(run_dir)

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.logger.log_metrics({tag: float(value)}, int(step))

    def add_figure(self, tag: str, figure, step: int) -> None:
        import matplotlib.pyplot as plt

        name = f"{tag.replace('/', '_')}_step{int(step)}.png"
        try:
            if _kind(self.logger) == "mlflow":
                self.logger.experiment.log_figure(self.logger.run_id, figure, f"figures/{name}")
            elif _kind(self.logger) == "wandb":
                self.logger.log_image(key=tag, images=[figure], step=int(step))
            else:
                folder = self.run_dir / "figures"
                folder.mkdir(parents=True, exist_ok=True)
                figure.savefig(folder / name)
        finally:
            plt.close(figure)

    def add_text(self, tag: str, text: str, step: int = 0) -> None:
        if _kind(self.logger) == "mlflow":
            self.logger.experiment.log_text(self.logger.run_id, text, f"{tag}.txt")

    def add_custom_scalars(self, layout: dict) -> None:
        """TensorBoard's chart layout; other loggers have none."""

    def flush(self) -> None:
        self.logger.save()


def _kind(logger: Logger) -> str:
    return {
        "TensorBoardLogger": "tensorboard",
        "CSVLogger": "csv",
        "MLFlowLogger": "mlflow",
        "WandbLogger": "wandb",
    }.get(type(logger).__name__, "other")


def metric_writer(logger: Logger | None, run_dir: str | Path | None = None):
    """A ``SummaryWriter``-shaped writer of ``logger``: TensorBoard's own writer for a
    ``TensorBoardLogger``, ``LoggerWriter`` for the others (``run_dir`` defaults to the
    logger's ``log_dir``), None without a logger."""
    if logger is None:
        return None
    if isinstance(logger, TensorBoardLogger):
        return logger.experiment
    folder = run_dir if run_dir is not None else getattr(logger, "log_dir", None) or "."
    return LoggerWriter(logger, folder)


def start_run_log(logger: Logger, config: dict, yaml_text: str, trial: str) -> None:
    """Record a run's config at its start: its flattened config (``flat_config``) as hparams
    and the resolved YAML ``yaml_text``.

    Every logger gets ``log_hyperparams`` of the flattened config (TensorBoard and CSV keep
    it as ``hparams.yaml``; MLflow params; W&B config); TensorBoard also the HParams session
    (``write_session``: the experiment with every hparam and the training and evaluation
    metrics, the session named ``trial``) and the text summary ``config`` unless its folder
    holds a session already (a resumed run), MLflow ``config.yaml`` as an artifact.
    """
    logger.log_hyperparams(flat_config(config))
    if isinstance(logger, TensorBoardLogger):
        if has_session(logger.log_dir):  # a resumed run: TensorBoard keeps the first session
            return
        writer = logger.experiment
        write_session(writer, config, trial)
        writer.add_text("config", indented(yaml_text), 0)
        writer.flush()
    elif _kind(logger) == "mlflow":
        logger.experiment.log_text(logger.run_id, yaml_text, "config.yaml")


def finish_logger(logger: Logger) -> None:
    """End the run's log: Lightning's ``finalize``, and W&B's ``finish`` so the next run of
    this process starts a run of its own instead of joining this one."""
    logger.finalize("success")
    if _kind(logger) == "wandb":
        logger.experiment.finish()


def indented(text: str) -> str:
    """``text`` as a Markdown code block (TensorBoard's text plugin renders Markdown)."""
    return "\n".join("    " + line for line in text.splitlines())


def log_final_metrics(writer, metrics: dict[str, Any], step: int) -> None:
    """The HParams metrics of a finished run (``TRAIN_METRICS``: ``hp/E_tot`` ... from its
    best checkpoint's ``metrics``) through ``writer`` (``metric_writer``); on TensorBoard
    the session's end (``end_session``)."""
    for tag, (source, _, _) in TRAIN_METRICS.items():
        if source in metrics:
            writer.add_scalar(tag, float(metrics[source]), step)
    if isinstance(writer, SummaryWriter):
        end_session(writer)
    writer.flush()
