"""Shared helpers for the learned-model, training and train-CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gridplan.models.learned import MLPDynamics, load_world_model
from gridplan.training.config import compose
from gridplan.training.engine import WorldModelModule


def debug_overrides(tmp: Path) -> list[str]:
    """Overrides of a tiny CPU run (a few hundred transitions, two short epochs) writing
    only under ``tmp``."""
    return [
        "trainer=debug",
        "data.budget=600",
        "data.windows=16",
        "data.batch_size=64",
        "model.hidden=[32,32]",
        f"out_dir={tmp / 'runs'}",
        f"data.cache_dir={tmp / 'cache'}",
    ]


def tiny_config(tmp: Path, *overrides: str):
    """A composed debug config (see ``debug_overrides``) plus ``overrides``."""
    return compose([*debug_overrides(tmp), *overrides])


def module_checkpoint(module: WorldModelModule, path: Path) -> Path:
    """Write ``module`` as Lightning would: its state dict plus ``on_save_checkpoint``'s
    additions (no Trainer needed)."""
    ckpt = {"state_dict": module.state_dict(), "pytorch-lightning_version": "test"}
    module.on_save_checkpoint(ckpt)
    torch.save(ckpt, path)
    return path


def tiny_module(tmp: Path, *overrides: str) -> WorldModelModule:
    """An untrained module of ``tiny_config`` with a placeholder dataset summary."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(tiny_config(tmp, *overrides), resolve=True)
    return WorldModelModule(cfg, {"fingerprint": "test", "event_counts": {"pickups": 0}})


def tiny_stack(tmp: Path, *overrides: str, **rows: torch.Tensor) -> WorldModelModule:
    """An untrained stack of one member of ``tiny_config`` (its data collected under
    ``tmp``), whose training buffers are replaced by ``rows`` where given: ``states (N, 12)``,
    ``actions (N,)``, ``next_states (N, 12)``, ``event (N,)`` bool, ``next (N,)`` long (the
    row of the next logged step, -1 at an episode's end)."""
    from gridplan.training.members import alone

    run, buffers = alone(tiny_config(tmp, *overrides))
    for name, value in rows.items():
        buffers[f"train_{name}"] = value
    return WorldModelModule(run.config, run.summary, [run], buffers)


def probe_batch(n: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n, 12)`` random states in ``[0, 1]`` and ``(n,)`` random actions."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(n, 12, generator=gen), torch.randint(0, 4, (n,), generator=gen)


def zero_last_layer(net: MLPDynamics, bias: float = 0.0) -> MLPDynamics:
    """Set the output layer to ``0 * x + bias``, so a delta model predicts ``state + bias``."""
    last = net.layers[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(bias)
    return net


def assert_members_equal_runs_alone(alone, grouped, metrics: tuple[str, ...]) -> None:
    """Each ``(metrics, artifacts)`` of a group member matches its run alone: best and last
    weights (rtol 1e-5), epochs, best score (rel 1e-5) and ``metrics`` (rel 1e-4)."""
    for (m_alone, a_alone), (m_group, a_group) in zip(alone, grouped, strict=True):
        for key in ("best_checkpoint", "last_checkpoint"):
            net_a = load_world_model(a_alone[key]).net
            net_g = load_world_model(a_group[key]).net
            for p, q in zip(net_a.parameters(), net_g.parameters(), strict=True):
                torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        assert m_group["epochs"] == m_alone["epochs"]
        assert m_group["best_score"] == pytest.approx(m_alone["best_score"], rel=1e-5)
        for name in metrics:
            assert m_group[name] == pytest.approx(m_alone[name], rel=1e-4)
