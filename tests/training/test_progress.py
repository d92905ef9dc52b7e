"""Progress output off a terminal: a line per epoch or item, no bar redraws, no chatter."""

from __future__ import annotations

import io
import logging
import logging.handlers
import warnings

from helpers_learned import debug_overrides

from gridplan.training.lightning_output import (
    EpochLines,
    quiet_lightning_chatter,
    trainer_progress,
)
from gridplan.util.progress import bar, is_terminal
from train.__main__ import main as train_main


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_bar_prints_one_line_per_item_or_nothing():
    log = io.StringIO()
    assert list(bar(range(3), "e1: models", file=log)) == [0, 1, 2]
    lines = log.getvalue().splitlines()
    assert [ln.split(" (")[0] for ln in lines] == [
        "e1: models: 1/3",
        "e1: models: 2/3",
        "e1: models: 3/3",
    ]
    assert "\r" not in log.getvalue()
    quiet = io.StringIO()
    assert list(bar(range(3), "closed loop", piped=False, file=quiet)) == [0, 1, 2]
    assert list(bar(iter(range(2)), "off", enabled=False, file=quiet)) == [0, 1]
    assert quiet.getvalue() == ""


def test_in_a_terminal_a_bar_is_tqdm():
    term = FakeTerminal()
    assert is_terminal(term) and not is_terminal(io.StringIO())
    assert list(bar(range(3), "groups", file=term)) == [0, 1, 2]
    assert "\r" in term.getvalue()  # tqdm redraws in place


def test_trainer_progress_picks_the_bar_in_a_terminal_and_epoch_lines_otherwise(monkeypatch):
    monkeypatch.setattr("sys.stdout", FakeTerminal())
    assert trainer_progress(True) == (True, [])
    monkeypatch.setattr("sys.stdout", io.StringIO())
    enabled, callbacks = trainer_progress(True)
    assert not enabled and [type(c) for c in callbacks] == [EpochLines]
    assert trainer_progress(False) == (False, [])


def test_a_piped_training_run_logs_one_line_per_epoch_without_chatter(tmp_path, capfd):
    overrides = [*debug_overrides(tmp_path), "trainer.progress_bar=true"]
    assert train_main(overrides) == 0
    out, err = capfd.readouterr()
    assert "\r" not in out + err
    epochs = [ln for ln in out.splitlines() if ln.startswith("epoch ")]
    assert [ln.split("  ")[0] for ln in epochs] == ["epoch 1/2", "epoch 2/2"]
    assert all("train/loss 0." in ln and "val/loss 0." in ln for ln in epochs)
    assert "Tip:" not in out + err
    assert "LeafSpec" not in out + err


def test_only_the_named_chatter_is_dropped(caplog):
    quiet_lightning_chatter()
    quiet_lightning_chatter()  # idempotent: one filter per logger
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    assert len(rank_zero.filters) == len(set(map(id, rank_zero.filters)))
    # A handler on the logger itself: quiet_lightning_chatter may stop Lightning's lines from
    # propagating to the root logger, where caplog listens.
    lines = logging.handlers.BufferingHandler(capacity=10)
    rank_zero.addHandler(lines)
    try:
        with caplog.at_level(logging.INFO, logger=rank_zero.name):
            rank_zero.info("💡 Tip: install our cloud product")
            rank_zero.info("GPU available: False, used: False")
    finally:
        rank_zero.removeHandler(lines)
    assert [r.getMessage() for r in lines.buffer] == ["GPU available: False, used: False"]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        quiet_lightning_chatter()
        warnings.warn("a real deprecation", FutureWarning, stacklevel=1)
        msg = "`isinstance(treespec, LeafSpec)` is deprecated, use ..."
        warnings.warn(msg, FutureWarning, stacklevel=1)
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated", UserWarning, stacklevel=1)
    assert [(type(w.message), str(w.message)) for w in seen] == [
        (FutureWarning, "a real deprecation"),
        (UserWarning, "`isinstance(treespec, LeafSpec)` is deprecated"),
    ]
