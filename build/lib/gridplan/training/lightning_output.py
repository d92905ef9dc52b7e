"""Lightning's console output for ``gridplan.training.runs.train``: readable in a terminal and in a
log.

In a terminal training shows Lightning's ``TQDMProgressBar``; piped into a file (as
``scripts/run_demo.sh`` does through ``tee``) the bar's carriage-return redraws would become
megabytes of file content, so off a terminal the bar is replaced by ``EpochLines``, one line
per epoch (``gridplan.util.progress.is_terminal`` decides).

``quiet_lightning_chatter`` drops two messages that carry no information for a gridplan
user: Lightning's cloud-product tip banners and torch's ``LeafSpec`` deprecation notice
raised from Lightning's own code. Both are matched by message and category only; every other
warning and log line is kept.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from typing import IO

import lightning.pytorch as pl

from gridplan.util.progress import is_terminal

#: Lightning's advertisement lines, logged at INFO by its rank-zero logger.
TIP_PREFIX = "💡 Tip:"
#: torch's FutureWarning raised by Lightning's ``utilities._pytree``.
LEAFSPEC_MESSAGE = r"`isinstance\(treespec, LeafSpec\)` is deprecated"


class EpochLines(pl.Callback):
    """One line per training epoch, for logs that are not a terminal:
    ``epoch 3/100  train/loss 0.03120  val/loss 0.02466  (1.2 s)``.

    Args:
        file: where the lines go (default ``sys.stdout``, as Lightning's bar).
    """

    def __init__(self, file: IO | None = None) -> None:
        self.file = file
        self._start = time.perf_counter()

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Runs after the epoch's validation, so val/loss is this epoch's.
        metrics = trainer.callback_metrics
        parts = [f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}"]
        # train/loss is logged per step and per epoch; the line shows the epoch mean.
        train = metrics.get("train/loss_epoch", metrics.get("train/loss"))
        for name, value in (("train/loss", train), ("val/loss", metrics.get("val/loss"))):
            if value is not None:
                parts.append(f"{name} {float(value):.5f}")
        parts.append(f"({time.perf_counter() - self._start:.1f} s)")
        file = sys.stdout if self.file is None else self.file
        print("  ".join(parts), file=file, flush=True)


def trainer_progress(progress_bar: bool) -> tuple[bool, list[pl.Callback]]:
    """``(enable_progress_bar, extra_callbacks)`` for ``pl.Trainer``: Lightning's bar in a
    terminal, ``EpochLines`` off one, nothing when ``progress_bar`` is False."""
    if not progress_bar:
        return False, []
    if is_terminal(sys.stdout):
        return True, []
    return False, [EpochLines()]


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(TIP_PREFIX)


_TIP_FILTER = _DropTips()


def quiet_lightning_chatter() -> None:
    """Drop Lightning's tip banners and the ``LeafSpec`` FutureWarning, and print each of
    Lightning's log lines once (idempotent)."""
    warnings.filterwarnings("ignore", message=LEAFSPEC_MESSAGE, category=FutureWarning)
    # Lightning prints through its own handler on the "lightning" logger; under Hydra the
    # root logger has one too, and every line came out twice.
    lightning_logger = logging.getLogger("lightning")
    if lightning_logger.handlers:
        lightning_logger.propagate = False
    # Lightning logs through the logger of whichever rank_zero module was imported last.
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if _TIP_FILTER not in logger.filters:
            logger.addFilter(_TIP_FILTER)
