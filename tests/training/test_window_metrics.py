"""trainer.metrics_every_n_epochs: the held-out window metrics are logged only in the epochs
it names, in a run alone and in a group alike, and training (early stopping and the best
checkpoint on val/loss) is the same whatever it is."""

from __future__ import annotations

import pytest
import torch
from helpers_learned import debug_overrides
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gridplan.models.learned import load_world_model
from gridplan.training.config import compose
from gridplan.training.module import metrics_due
from gridplan.training.runs import train
from gridplan.training.vectorized import Member, train_group


def _logged_epochs(run_dir: str, tag: str) -> list[int]:
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    if tag not in events.Tags()["scalars"]:
        return []
    steps = [e.step for e in events.Scalars(tag)]
    epochs = {e.step: int(e.value) for e in events.Scalars("epoch")}
    return [epochs[s] for s in steps]


def test_metrics_due_every_n_epochs_from_the_first_and_at_max_epochs():
    t = {"metrics_every_n_epochs": 3, "max_epochs": 8}
    assert [e for e in range(8) if metrics_due(t, e)] == [0, 3, 6, 7]
    assert all(metrics_due({"metrics_every_n_epochs": 1, "max_epochs": 8}, e) for e in range(8))
    assert not any(metrics_due({"metrics_every_n_epochs": 0, "max_epochs": 8}, e) for e in range(8))


def test_a_window_monitor_needs_the_metrics_every_epoch(tmp_path):
    with pytest.raises(ValueError, match="trainer.monitor 'val/E_tot' needs the window metrics"):
        compose(
            [
                *debug_overrides(tmp_path),
                "trainer.monitor=val/E_tot",
                "trainer.metrics_every_n_epochs=2",
            ]
        )
    with pytest.raises(ValueError, match="metrics_every_n_epochs must be >= 0"):
        compose([*debug_overrides(tmp_path), "trainer.metrics_every_n_epochs=-1"])


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory):
    """One 4-epoch run: alone with metrics every epoch, alone and in a group every 3rd."""
    tmp = tmp_path_factory.mktemp("metrics")

    def config(out: str, *extra: str):
        kept = [o for o in debug_overrides(tmp) if not o.startswith("out_dir=")]
        return compose(
            [
                *kept,
                f"out_dir={tmp / out}",
                "trainer.max_epochs=4",
                "trainer.min_epochs=4",
                "trainer.figures_every_n_epochs=0",
                *extra,
            ]
        )

    every = train(config("every"))
    cfg = config("third", "trainer.metrics_every_n_epochs=3")
    alone = train(cfg)
    grouped = train_group([Member(cfg, tmp / "group" / "m")], progress=False).runs[0]
    return every, alone, grouped


def test_the_metrics_are_logged_in_the_epochs_named_alone_and_in_a_group(three_ways):
    every, alone, grouped = three_ways
    assert _logged_epochs(every[1]["tensorboard"], "val/E_tot") == [0, 1, 2, 3]
    assert _logged_epochs(alone[1]["tensorboard"], "val/E_tot") == [0, 3]
    assert _logged_epochs(grouped[1]["tensorboard"], "val/E_tot") == [0, 3]
    for _, artifacts in three_ways:
        assert _logged_epochs(artifacts["tensorboard"], "val/loss") == [0, 1, 2, 3]


def test_training_is_the_same_whatever_the_metrics_cadence(three_ways):
    (m_every, a_every), (m_alone, a_alone), (m_group, a_group) = three_ways
    for metrics in (m_alone, m_group):
        assert metrics["epochs"] == m_every["epochs"] == 4
        assert metrics["best_score"] == pytest.approx(m_every["best_score"], rel=1e-5)
        assert metrics["best/E_tot"] == pytest.approx(m_every["best/E_tot"], rel=1e-4)
    net = load_world_model(a_every["best_checkpoint"]).net
    for artifacts in (a_alone, a_group):
        other = load_world_model(artifacts["best_checkpoint"]).net
        for p, q in zip(net.parameters(), other.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
