"""E12's learned models on MiniGrid's egocentric observation (``EgocentricZoo``).

A MiniGrid agent sees a 7x7x3 egocentric view, not the factored state: the cells behind it
and behind walls are hidden. E12 trains the latent families on that view in one DoorKey world
as ``python -m train world=<world> model=<family> obs=egocentric`` trains them
(``gridplan.experiments.e9.train_zoo``), plans each through its decoder with the world's exact
V* and ``python -m eval --ckpt``'s latent protocol (``prepare_latent``; an RSSM from its belief
filtered over the episode, ``gridplan.models.episode_memory``), and measures it as the world's
controlled grid is measured: ``E_tot`` and DRPE (graded) of the decoded predictions on the
world's held-out windows, closed-loop success under E12's protocol. ρ of each metric with
success over the egocentric models alone, the paired-bootstrap margin ``|ρ_DRPE| −
|ρ_E_tot|``, and ρ over the models pooled with the world's grid give E12's egocentric claims
(``gridplan.experiments.e12.CLAIMS``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gridplan.core import tasks
from gridplan.evaluation.latent_eval import load_run_model, prepare_latent
from gridplan.experiments import paper
from gridplan.experiments.e8 import (
    ScaleRecord,
    finite,
    lead_claim,
    margin_replicates,
    measured_fields,
    rho_with_success,
    world_layout,
)
from gridplan.experiments.e9 import train_zoo
from gridplan.experiments.learned_runs import cpu_threads
from gridplan.experiments.measure import closed_loop, standard_windows
from gridplan.experiments.records import Record
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E12Config
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho
from gridplan.metrics.bootstrap import percentile_interval
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import SpearmanResult

#: ``ScaleRecord.family`` of an egocentric model.
FAMILY = "egocentric"
#: Fewest egocentric models a ρ is computed over (a smoke run may train fewer).
MIN_MODELS = 3
#: The paper's ρ over its learned models, alone and pooled with its grid (§5.2, Table 1).
PAPER = paper.TABLE_1


@dataclass(frozen=True, kw_only=True)
class EgocentricRow(Record):
    """The egocentric models of one world (``egocentric.csv``): ρ of E_tot and DRPE (graded)
    with success over them alone (bootstrap 95% CIs), the paired margin, ρ pooled with the
    world's grid, and the wall times of training and measuring them."""

    world: str
    n_models: int
    success_mean: float
    success_max: float
    rho_E_tot: float | None
    rho_E_tot_low: float | None
    rho_E_tot_high: float | None
    rho_DRPE: float | None
    rho_DRPE_low: float | None
    rho_DRPE_high: float | None
    margin: float | None
    margin_low: float | None
    margin_high: float | None
    pooled_rho_E_tot: float | None
    pooled_rho_DRPE: float | None
    train_seconds: float
    measure_seconds: float


def train(ctx: GroupContext, cfg: E12Config) -> tuple[list[dict], float]:
    """Every egocentric model, trained in ``cfg.egocentric.world``; the run entries of
    ``train_zoo`` and the wall time."""
    zoo = cfg.egocentric
    t0 = time.perf_counter()
    trained = train_zoo(ctx, zoo, f"world={zoo.world}")
    return trained, time.perf_counter() - t0


def measure(ctx: GroupContext, cfg: E12Config, trained: list[dict]) -> list[ScaleRecord]:
    """One record per trained model: the world's windows and closed loop through the planning
    wrapper ``python -m eval --ckpt`` builds (``prepare_latent``)."""
    world = cfg.egocentric.world
    task = tasks.get("A", world=world)
    windows = standard_windows(ctx, cfg.protocol, task)
    records = []
    for run in ctx.bar(trained, "measuring the egocentric models"):
        latent = load_run_model(ctx.out / run["checkpoint"], ctx.device)
        with cpu_threads(ctx):
            model = prepare_latent(latent, task, ctx.device).model
            pm = prediction_metrics(model, windows, task)[0]
            summaries, _ = closed_loop(ctx, model, task, cfg.protocol)
        records.append(
            ScaleRecord(
                **world_layout(world),
                name=f"{run['family']} {run['budget']} (seed {run['seed']})",
                family=FAMILY,
                sigma_r=None,
                sigma_i=None,
                key=f"{run['family']}-egocentric-{run['budget']}",
                seed=run["seed"],
                **measured_fields(pm, summaries[0]),
            )
        )
    return records


def summarize(
    world: str,
    grid: list[ScaleRecord],
    ego: list[ScaleRecord],
    n_resamples: int,
    seconds: tuple[float, float],
) -> EgocentricRow:
    """The row of the egocentric models ``ego`` of ``world`` beside its ``grid``;
    ``seconds`` the wall times of training and measuring them."""
    undefined = SpearmanResult(float("nan"), float("nan"), float("nan"), len(ego))
    ranked = len(ego) >= MIN_MODELS
    rho_e = rho_with_success(ego, "E_tot", n_resamples) if ranked else undefined
    rho_d = rho_with_success(ego, "DRPE_graded", n_resamples) if ranked else undefined
    margin, reps = margin_replicates(ego, n_resamples) if ranked else (float("nan"), np.ones(0))
    defined = reps[np.isfinite(reps)]
    low, high = percentile_interval(defined) if defined.size else (float("nan"),) * 2
    pooled = grid + ego
    success = [r.success for r in ego]
    return EgocentricRow(
        world=world,
        n_models=len(ego),
        success_mean=float(np.mean(success)),
        success_max=float(np.max(success)),
        rho_E_tot=finite(rho_e.rho),
        rho_E_tot_low=finite(rho_e.low),
        rho_E_tot_high=finite(rho_e.high),
        rho_DRPE=finite(rho_d.rho),
        rho_DRPE_low=finite(rho_d.low),
        rho_DRPE_high=finite(rho_d.high),
        margin=finite(margin),
        margin_low=finite(low),
        margin_high=finite(high),
        pooled_rho_E_tot=finite(rho_with_success(pooled, "E_tot", n_resamples).rho),
        pooled_rho_DRPE=finite(rho_with_success(pooled, "DRPE_graded", n_resamples).rho),
        train_seconds=round(seconds[0], 2),
        measure_seconds=round(seconds[1], 2),
    )


def claims(row: EgocentricRow) -> dict[str, tuple[bool | None, str]]:
    """``ego_lead`` and ``ego_pooled`` of ``gridplan.experiments.e12.CLAIMS``: whether
    ``|ρ_DRPE| > |ρ_E_tot|`` over the egocentric models alone, and pooled with the grid."""
    alone = lead_claim([row])
    if row.margin is not None:
        interval = f"[{fmt(row.margin_low, 2)}, {fmt(row.margin_high, 2)}]"
        alone = (alone[0], f"{alone[1]}; margin {row.margin:+.2f} {interval}")
    return {
        "ego_lead": alone,
        "ego_pooled": lead_claim([row], pooled=True),
    }


def tables(report: GroupReport, row: EgocentricRow, records: list[ScaleRecord]) -> None:
    """The egocentric models, and ρ over them alone and pooled with the grid."""
    report.table(
        f"Learned latent models on MiniGrid's egocentric view ({row.world})",
        ["model", "E_tot", "DRPE", "success"],
        [[r.name, fmt(r.E_tot), fmt(r.DRPE_graded), fmt(r.success, 3)] for r in records],
        "Each trained by `python -m train world=<world> model=<family> obs=egocentric "
        "data.budget=<budget> seed=<seed>`, planned through its decoder with the "
        "world's exact V* (jepa and tdmpc through the frozen protocol decoder of "
        "`python -m eval --ckpt`; an RSSM from its belief filtered over the episode), E_tot "
        "and DRPE of the decoded predictions on the world's held-out windows. "
        f"{sum(r.success == 0 for r in records)} of {len(records)} never reached the goal.",
    )
    report.table(
        "ρ with success over the egocentric models, alone and pooled with the grid",
        [
            "world",
            "models",
            "mean success",
            "ρ E_tot",
            "ρ DRPE",
            "margin",
            "paper ρ E_tot / DRPE (7 learned)",
            "ρ E_tot (pooled)",
            "ρ DRPE (pooled)",
            "paper ρ E_tot / DRPE (55 pooled)",
        ],
        [
            [
                row.world,
                row.n_models,
                fmt(row.success_mean, 3),
                fmt_rho(
                    {"rho": row.rho_E_tot, "low": row.rho_E_tot_low, "high": row.rho_E_tot_high}
                ),
                fmt_rho({"rho": row.rho_DRPE, "low": row.rho_DRPE_low, "high": row.rho_DRPE_high}),
                fmt_rho({"rho": row.margin, "low": row.margin_low, "high": row.margin_high}),
                f"{PAPER['learned']['E_tot'].cell()} / {PAPER['learned']['DRPE'].cell()}",
                fmt(row.pooled_rho_E_tot, 2),
                fmt(row.pooled_rho_DRPE, 2),
                f"{PAPER['all']['E_tot'].cell()} / {PAPER['all']['DRPE'].cell()}",
            ]
        ],
        "The margin is |ρ_DRPE| − |ρ_E_tot| over the egocentric models, its CI resampling the "
        "same models for both ρ. The paper's numbers are its fully observed 12-dim world's "
        "(§5.2: 7 learned MLPs; Table 1: those pooled with its 48-model grid), the reference "
        "of these rows, not a prediction of a partially observed world's.",
    )


__all__ = ["EgocentricRow", "claims", "measure", "summarize", "tables", "train"]
