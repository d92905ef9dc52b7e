"""The controlled model pools: E1's grid and E2's relevance sweep (paper §5.1, §5.2).

A pool is a ``noise_grid`` of ``M(σR, σI)`` models, all settings scored in one batch by
``prediction_metrics`` on the shared held-out windows and planned in one batched closed loop.
E1 and E2 compute their pools here; the groups that reuse them (e2, e4, e6) read the finished
group's result files through ``controlled_grid`` / ``relevance_sweep``, which compute the pool
themselves when that group has not finished with the same config.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from gridplan.core.tasks import TASK_A
from gridplan.evaluation.spec import EvalSpec
from gridplan.experiments import settings
from gridplan.experiments.measure import closed_loop, standard_windows
from gridplan.experiments.records import ControlledRecord, SweepRecord, read_models
from gridplan.experiments.runner import RESULTS_FILE, GroupContext
from gridplan.experiments.settings import E1Config, E2Config
from gridplan.metrics.prediction import prediction_metrics
from gridplan.models.noise import noise_grid


def controlled_pool(
    ctx: GroupContext, sigma_r: Sequence[float], sigma_i: Sequence[float], protocol: EvalSpec
) -> list[ControlledRecord]:
    """Prediction metrics and closed-loop success of every ``(σR, σI)`` setting, σR-major."""
    model = noise_grid(sigma_r, sigma_i, reading=ctx.reading)
    windows = standard_windows(ctx, protocol)
    metrics = prediction_metrics(model, windows, TASK_A)
    summaries, _ = closed_loop(ctx, model, TASK_A, protocol)
    sigmas = [(r, i) for r in sigma_r for i in sigma_i]
    return [
        ControlledRecord.measured(sigma, pm, summary)
        for sigma, pm, summary in zip(sigmas, metrics, summaries, strict=True)
    ]


def grid_records(ctx: GroupContext, cfg: E1Config) -> list[ControlledRecord]:
    """E1's controlled grid."""
    n = len(cfg.sigma_r) * len(cfg.sigma_i)
    ctx.log(f"closed loop: {n} settings x {cfg.protocol.n_episodes} episodes")
    return controlled_pool(ctx, cfg.sigma_r, cfg.sigma_i, cfg.protocol)


def sweep_records(ctx: GroupContext, cfg: E2Config) -> list[SweepRecord]:
    """E2's relevance sweep."""
    n = len(cfg.sweep_sigma_r) * len(cfg.sweep_sigma_i)
    ctx.log(f"relevance sweep: {n} settings x {cfg.protocol.n_episodes} eps")
    pool = controlled_pool(ctx, cfg.sweep_sigma_r, cfg.sweep_sigma_i, cfg.protocol)
    return [SweepRecord.of(r) for r in pool]


def controlled_grid(ctx: GroupContext) -> tuple[list[ControlledRecord], str]:
    """E1's grid from a finished e1 of the same profile and config under the results root,
    else computed here. Returns ``(records, source)``, source ``"e1"`` or ``"computed"``."""
    cfg = settings.E1[ctx.profile]
    folder = ctx.finished_group("e1", cfg)
    if folder is not None:
        ctx.log(f"reusing the controlled grid of {folder}")
        return read_models(folder, ControlledRecord), "e1"
    ctx.log("no finished e1 with this config; computing the controlled grid")
    return grid_records(ctx, cfg), "computed"


def relevance_sweep(ctx: GroupContext) -> tuple[list[SweepRecord], str]:
    """E2's sweep from a finished e2 of the same profile and config (its ``results.json``),
    else planned here. Returns ``(records, source)``, source ``"e2"`` or ``"computed"``."""
    cfg = settings.E2[ctx.profile]
    folder = ctx.finished_group("e2", cfg)
    if folder is not None:
        results = json.loads((folder / RESULTS_FILE).read_text())
        return [SweepRecord.from_dict(r) for r in results["sweep"]], "e2"
    ctx.log("no finished e2 with this config; planning the relevance sweep here")
    return sweep_records(ctx, cfg), "computed"
