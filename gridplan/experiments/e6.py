"""E6: deep imagination amplifies decision-relevant error (paper §5.4, Fig. 6, 7; appendix A).

- Depth sweep (Fig. 6a): a few irrelevant-noise and relevant-noise models, and the oracle,
  planned at depths ``D ∈ {1, 2, 4}`` (one batched closed loop per depth).
- Horizon sweep (Fig. 6b): E_tot and DRPE of the same models on H-step rollouts,
  ``H ∈ {1, 2, 5, 10, 20}`` (held-out windows of each length).
- Imagination fans (Fig. 7): from every true state of one oracle episode, all ``4^D`` leaves
  of a depth-D imagined rollout of an irrelevant-noise and a relevant-noise model; the imagined
  agent positions are scattered over the world, and their mean distance (in cells) from the
  oracle's imagined position on the same action sequence is reported.
- AR(1)-correlated noise (appendix A): ``AR1NoiseModel`` (ρ = 0.8, same per-step marginal σ)
  against independent noise at the deepest depth; the independent side is the depth sweep's.
- VPE vs DRPE (appendix A): Spearman of VPE, DRPE and E_tot with success over the 48-model grid
  (e1's models when a finished e1 of the same profile exists, else computed here).

Writes ``depth.csv``, ``horizon.csv``, ``fans.csv``, ``ar1.csv``, ``vpe.csv``,
``results.json`` and ``fig6a_depth.png``, ``fig6b_horizon.png``, ``fig7_fans.png``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core.constants import AGENT_X, AGENT_Y, KEY_X, KEY_Y
from gridplan.core.readings import Reading
from gridplan.core.tasks import TASK_A
from gridplan.core.world import DEFAULT as PAPER_WORLD
from gridplan.experiments import paper
from gridplan.experiments.figures import depth_figure, fans_figure, horizon_figure
from gridplan.experiments.measure import closed_loop, standard_windows
from gridplan.experiments.pools import controlled_grid
from gridplan.experiments.records import Record, model_name, noise_kind, outcomes_field
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E6Config
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho, fmt_se
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import SpearmanResult, difference_se, spearman_ci
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel
from gridplan.planning.closed_loop import run_closed_loop, start_states
from gridplan.planning.planner import Planner, action_sequences

#: Success gaps count when they exceed this many standard errors of the gap.
Z = 2.0
#: VPE "matches" DRPE when their Spearman correlations with success differ by at most this
#: (paper: both -0.98).
MAX_VPE_GAP = 0.05

Sigma = tuple[float, float]


@dataclass(frozen=True, kw_only=True)
class DepthRow(Record):
    """Closed-loop success of one model at one planner depth (``depth.csv``)."""

    model: str
    sigma_r: float
    sigma_i: float
    kind: str
    depth: int
    success: float
    success_se: float
    n_episodes: int
    outcomes: dict[str, int] = outcomes_field()


@dataclass(frozen=True, kw_only=True)
class HorizonRow(Record):
    """E_tot and DRPE of one model on H-step rollouts (``horizon.csv``)."""

    model: str
    sigma_r: float
    sigma_i: float
    kind: str
    horizon: int
    E_tot: float
    DRPE_graded: float
    DRPE_binary: float


@dataclass(frozen=True, kw_only=True)
class FanRow(Record):
    """How far one model's imagined agent positions stray from the oracle's (``fans.csv``)."""

    model: str
    sigma_r: float
    sigma_i: float
    kind: str
    depth: int
    true_states: int
    leaves: int
    mean_leaf_displacement_cells: float
    mean_displacement_cells: float
    frac_off_true_cell: float


@dataclass(frozen=True, kw_only=True)
class AR1Row(Record):
    """One model with AR(1) noise beside independent noise and the oracle at the deepest
    depth (``ar1.csv``)."""

    model: str
    sigma_r: float
    sigma_i: float
    kind: str
    depth: int
    rho: float
    success_ar1: float
    success_ar1_se: float
    success_indep: float
    success_indep_se: float
    success_oracle: float
    success_oracle_se: float
    E_tot_ar1: float
    E_tot_indep: float
    DRPE_ar1: float
    DRPE_indep: float
    n_episodes: int


@dataclass(frozen=True, kw_only=True)
class VPERow(Record):
    """Spearman ρ of one metric with success over the grid (``vpe.csv``)."""

    metric: str
    n: int
    rho: float
    low: float
    high: float

    @classmethod
    def of(cls, metric: str, res: SpearmanResult) -> VPERow:
        return cls(metric=metric, n=res.n, rho=res.rho, low=res.low, high=res.high)


def _model_fields(m: Sigma) -> dict:
    return {"model": model_name(*m), "sigma_r": m[0], "sigma_i": m[1], "kind": noise_kind(m)}


def _controlled(models, reading: Reading) -> NoiseModel:
    return NoiseModel.controlled([m[0] for m in models], [m[1] for m in models], reading=reading)


# --------------------------------------------------------------------------- compute


def depth_sweep(ctx: GroupContext, cfg: E6Config) -> list[DepthRow]:
    """Closed-loop success of every model at every depth."""
    model = _controlled(cfg.models, ctx.reading)
    rows = []
    for depth in ctx.bar(cfg.depths, "depth sweep"):
        loop, _ = closed_loop(ctx, model, TASK_A, cfg.protocol.replace(depth=depth))
        for m, s in zip(cfg.models, loop, strict=True):
            rows.append(
                DepthRow(
                    **_model_fields(m),
                    depth=depth,
                    success=s.success,
                    success_se=s.success_se,
                    n_episodes=s.n_episodes,
                    outcomes=s.outcomes,
                )
            )
    return rows


def horizon_sweep(ctx: GroupContext, cfg: E6Config) -> list[HorizonRow]:
    """E_tot and DRPE (graded, binary) of every model on H-step rollouts, per H."""
    model = _controlled(cfg.models, ctx.reading)
    rows = []
    for h in ctx.bar(cfg.horizons, "horizon sweep"):
        windows = standard_windows(ctx, cfg.protocol.replace(horizon=h))
        for m, pm in zip(cfg.models, prediction_metrics(model, windows, TASK_A), strict=True):
            rows.append(
                HorizonRow(
                    **_model_fields(m),
                    horizon=h,
                    E_tot=pm.E_tot,
                    DRPE_graded=pm.DRPE["graded"],
                    DRPE_binary=pm.DRPE["binary"],
                )
            )
    return rows


def _oracle_episode(ctx: GroupContext, cfg: E6Config) -> torch.Tensor:
    """The true states ``(T + 1, 12)`` of the oracle's episode from the fans' start state."""
    start = start_states([cfg.fan_seed], 1, TASK_A, ctx.device)
    planner = Planner(OracleModel(ctx.reading), cfg.fan_depth, TASK_A, device=ctx.device)
    res = run_closed_loop(planner, start, ctx.generator(cfg.fan_seed), record=True)
    return res.trajectory[: int(res.steps[0]) + 1, 0]


@torch.no_grad()
def imagination_fans(ctx: GroupContext, cfg: E6Config) -> tuple[dict, list[FanRow]]:
    """Imagined agent positions of all ``4^D`` leaves from each true state of one oracle episode.

    Returns:
        ``(fans, rows)``: ``fans`` holds the true path ``(T + 1, 2)`` in cells, the key cell and,
        per fan model name, imagined positions ``(T * L * D, 2)`` in cells; ``rows`` per model
        the mean leaf displacement from the oracle's imagined position (cells) and the fraction
        of imagined steps off the oracle's cell.
    """
    depth = cfg.fan_depth
    path = _oracle_episode(ctx, cfg)
    steps = path.shape[0] - 1
    roots = path[:steps] if steps > 0 else path[:1]
    seqs = action_sequences(depth, ctx.device)
    state0 = roots.repeat_interleave(seqs.shape[0], dim=0)
    actions = seqs.repeat(roots.shape[0], 1)

    def imagine(model, gen):
        state, out = state0, []
        for t in range(depth):
            state = model.predict(state, actions[:, t], gen)
            out.append(state[:, [AGENT_X, AGENT_Y]] * PAPER_WORLD.cell_scale)
        return torch.stack(out, dim=1)  # (T * L, D, 2) in cells

    truth = imagine(OracleModel(ctx.reading), ctx.generator(cfg.fan_seed))
    fans = {
        "path": (path[:, [AGENT_X, AGENT_Y]] * PAPER_WORLD.cell_scale).cpu().numpy(),
        "key": (path[0, [KEY_X, KEY_Y]] * PAPER_WORLD.cell_scale).cpu().numpy(),
        "steps": steps,
        "models": {},
    }
    rows = []
    for m in cfg.fan_models:
        model = NoiseModel.controlled(*m, reading=ctx.reading)
        pos = imagine(model, ctx.generator(cfg.fan_seed + 1))
        dist = (pos - truth).norm(dim=2)
        off = (pos.round() != truth.round()).any(dim=2)
        fans["models"][model_name(*m)] = pos.reshape(-1, 2).cpu().numpy()
        rows.append(
            FanRow(
                **_model_fields(m),
                depth=depth,
                true_states=int(roots.shape[0]),
                leaves=seqs.shape[0],
                mean_leaf_displacement_cells=float(dist[:, -1].mean()),
                mean_displacement_cells=float(dist.mean()),
                frac_off_true_cell=float(off.float().mean()),
            )
        )
    return fans, rows


def ar1_rows(ctx: GroupContext, cfg: E6Config, depth_rows: list[DepthRow]) -> list[AR1Row]:
    """AR(1) noise vs independent noise at the deepest depth (same marginal σ per step)."""
    p = cfg.protocol
    sr, si = [m[0] for m in cfg.ar1_models], [m[1] for m in cfg.ar1_models]
    model = AR1NoiseModel.controlled(sr, si, cfg.ar1_rho, reading=ctx.reading)
    loop, _ = closed_loop(ctx, model, TASK_A, p)
    windows = standard_windows(ctx, p)
    metrics = prediction_metrics(model, windows, TASK_A)
    independent = NoiseModel.controlled(sr, si, reading=ctx.reading)
    indep_metrics = prediction_metrics(independent, windows, TASK_A)
    indep = {(r.sigma_r, r.sigma_i): r for r in depth_rows if r.depth == p.depth}
    oracle = indep[(0.0, 0.0)]
    rows = []
    for m, s, pm, pi in zip(cfg.ar1_models, loop, metrics, indep_metrics, strict=True):
        rows.append(
            AR1Row(
                **_model_fields(m),
                depth=p.depth,
                rho=cfg.ar1_rho,
                success_ar1=s.success,
                success_ar1_se=s.success_se,
                success_indep=indep[m].success,
                success_indep_se=indep[m].success_se,
                success_oracle=oracle.success,
                success_oracle_se=oracle.success_se,
                E_tot_ar1=pm.E_tot,
                E_tot_indep=pi.E_tot,
                DRPE_ar1=pm.DRPE["graded"],
                DRPE_indep=pi.DRPE["graded"],
                n_episodes=s.n_episodes,
            )
        )
    return rows


def vpe_rows(ctx: GroupContext, cfg: E6Config) -> tuple[list[VPERow], str]:
    """Spearman of VPE, DRPE (graded) and E_tot with success over the controlled grid, and
    of VPE with DRPE; and where the grid came from."""
    grid, source = controlled_grid(ctx)
    s = np.array([r.success for r in grid])
    col = {key: np.array([getattr(r, key) for r in grid]) for key in ("VPE", "DRPE_graded")}
    col["E_tot"] = np.array([r.E_tot for r in grid])
    rows = [
        VPERow.of(key, spearman_ci(col[key], s, cfg.n_resamples))
        for key in ("VPE", "DRPE_graded", "E_tot")
    ]
    both = spearman_ci(col["VPE"], col["DRPE_graded"], cfg.n_resamples)
    rows.append(VPERow.of("VPE vs DRPE_graded", both))
    return rows, source


# --------------------------------------------------------------------------- tables & verdicts


def _at(rows, m: Sigma, key: str, value) -> object:
    return next(r for r in rows if (r.sigma_r, r.sigma_i) == m and getattr(r, key) == value)


def depth_report(report: GroupReport, cfg: E6Config, rows: list[DepthRow]) -> None:
    """Fig. 6a's table and verdict."""
    report.table(
        "Depth sweep: success by planner depth (Fig. 6a)",
        ["model", "noise", *[f"D = {d}" for d in cfg.depths]],
        [
            [model_name(*m), noise_kind(m)]
            + [
                fmt_se(r.success, r.success_se)
                for r in (_at(rows, m, "depth", d) for d in cfg.depths)
            ]
            for m in cfg.models
        ],
        f"Paper: {paper.E6_CLAIMS['depth']}. The paper gives this as a figure without numbers.",
    )
    report.figure("fig6a_depth.png", "Success against planner depth (Fig. 6a)")
    dmin, dmax = min(cfg.depths), max(cfg.depths)

    def fall(m: Sigma) -> tuple[float, float]:
        a, b = _at(rows, m, "depth", dmin), _at(rows, m, "depth", dmax)
        return difference_se(a.success, a.success_se, b.success, b.success_se)

    relevant = [m for m in cfg.models if noise_kind(m) == "relevant"]
    strongest = max(relevant, key=lambda m: m[0])
    drop, drop_se = fall(strongest)
    irr_falls = {m: fall(m) for m in cfg.models if noise_kind(m) == "irrelevant"}
    report.verdict(
        "Success under relevant noise falls with depth (§5.4, Fig. 6a)",
        drop > Z * drop_se,
        f"{model_name(*strongest)}: D = {dmin} minus D = {dmax} = {fmt(drop, 2)} (SE "
        f"{fmt(drop_se, 2)}; criterion beyond {Z:g} SE)",
    )
    report.sanity(
        "Irrelevant noise never costs success at any depth (§5.4, Fig. 6a)",
        all(d <= Z * se for d, se in irr_falls.values()),
        "irrelevant noise never reaches a leaf score",
        f"D = {dmin} minus D = {dmax}: "
        + ", ".join(
            f"{model_name(*m)} {fmt(d, 2)} (SE {fmt(se, 2)})" for m, (d, se) in irr_falls.items()
        ),
    )


def horizon_report(report: GroupReport, cfg: E6Config, rows: list[HorizonRow]) -> None:
    """Fig. 6b's table and verdict."""

    def cell(m: Sigma, h: int) -> HorizonRow:
        return _at(rows, m, "horizon", h)

    report.table(
        "Horizon sweep: E_tot / DRPE (graded) by rollout horizon (Fig. 6b)",
        ["model", "noise", *[f"H = {h}" for h in cfg.horizons]],
        [
            [model_name(*m), noise_kind(m)]
            + [f"{fmt(cell(m, h).E_tot)} / {fmt(cell(m, h).DRPE_graded)}" for h in cfg.horizons]
            for m in cfg.models
        ],
        f"Paper: {paper.E6_CLAIMS['horizon']}; a figure without numbers.",
    )
    report.figure("fig6b_horizon.png", "E_tot and DRPE against horizon (Fig. 6b)")
    hmin, hmax = min(cfg.horizons), max(cfg.horizons)
    relevant = [m for m in cfg.models if noise_kind(m) == "relevant"]
    irrelevant = [m for m in cfg.models if noise_kind(m) == "irrelevant"]
    irr_zero = all(cell(m, h).DRPE_graded == 0.0 for m in irrelevant for h in cfg.horizons)
    grows = all(cell(m, hmax).DRPE_graded > cell(m, hmin).DRPE_graded for m in relevant)
    def path(ms) -> str:
        return ", ".join(
            f"{model_name(*m)} {fmt(cell(m, hmin).DRPE_graded)} → {fmt(cell(m, hmax).DRPE_graded)}"
            for m in ms
        )

    report.verdict(
        "Relevant-noise DRPE grows with the horizon (Fig. 6b)",
        grows,
        f"DRPE at H = {hmin} → {hmax}: {path(relevant)}",
    )
    report.sanity(
        "Irrelevant-noise DRPE stays zero at every horizon (Fig. 6b)",
        irr_zero,
        "DRPE weighs only the relevant dims, which irrelevant noise never touches",
        f"DRPE at H = {hmin} → {hmax}: {path(irrelevant)}",
    )


def fans_report(report: GroupReport, rows: list[FanRow]) -> None:
    """Fig. 7's table and verdict."""
    report.table(
        "Imagination fans: imagined agent positions vs the oracle's (Fig. 7)",
        [
            "model",
            "noise",
            "depth",
            "true states",
            "mean leaf displacement (cells)",
            "imagined steps off the true cell",
        ],
        [
            [
                r.model,
                r.kind,
                r.depth,
                r.true_states,
                fmt(r.mean_leaf_displacement_cells, 2),
                fmt(r.frac_off_true_cell, 2),
            ]
            for r in rows
        ],
        f"Paper: {paper.E6_CLAIMS['fans']}; a figure without numbers.",
    )
    report.figure(
        "fig7_fans.png", "Imagined agent positions of all leaves along one episode (Fig. 7)"
    )
    irr, rel = rows
    irr_shift, rel_shift = irr.mean_leaf_displacement_cells, rel.mean_leaf_displacement_cells
    report.sanity(
        "Irrelevant-noise imagination traces the true path, relevant-noise imagination fans out "
        "(Fig. 7)",
        irr_shift == 0.0 and rel_shift > 0.0,
        "irrelevant noise never moves the imagined agent, relevant noise moves it",
        f"mean leaf displacement {irr.model} {fmt(irr_shift, 2)} vs {rel.model} "
        f"{fmt(rel_shift, 2)} cells",
    )


def ar1_report(report: GroupReport, cfg: E6Config, rows: list[AR1Row]) -> None:
    """The AR(1) table (appendix A) and its verdict."""
    depth = cfg.protocol.depth
    report.table(
        f"AR(1)-correlated noise (ρ = {cfg.ar1_rho:g}) vs independent noise, D = {depth} "
        "(appendix A)",
        [
            "model",
            "noise",
            "success AR(1)",
            "success independent",
            "E_tot AR(1) / indep.",
            "DRPE AR(1) / indep.",
        ],
        [
            [
                r.model,
                r.kind,
                fmt_se(r.success_ar1, r.success_ar1_se),
                fmt_se(r.success_indep, r.success_indep_se),
                f"{fmt(r.E_tot_ar1)} / {fmt(r.E_tot_indep)}",
                f"{fmt(r.DRPE_ar1)} / {fmt(r.DRPE_indep)}",
            ]
            for r in rows
        ],
        f"Paper: {paper.E6_CLAIMS['ar1']}; no numbers given. Oracle success at D = {depth}: "
        f"{fmt_se(rows[0].success_oracle, rows[0].success_oracle_se)}.",
    )
    harm = {
        r.model: (
            r.kind,
            *difference_se(r.success_oracle, r.success_oracle_se, r.success_ar1, r.success_ar1_se),
        )
        for r in rows
    }
    irr_ok = all(d <= Z * se for k, d, se in harm.values() if k == "irrelevant")
    top = max((r for r in rows if r.kind == "relevant"), key=lambda r: r.sigma_r)
    _, top_d, top_se = harm[top.model]
    report.verdict(
        "With AR(1) noise relevant noise is harmful (appendix A)",
        top_d > Z * top_se,
        f"oracle minus AR(1) success of {top.model}: {fmt(top_d, 2)} (SE {fmt(top_se, 2)}; "
        f"criterion beyond {Z:g} SE)",
    )
    relevant = sorted((r for r in rows if r.kind == "relevant"), key=lambda r: r.sigma_r)
    rises = []
    for lo, hi in itertools.pairwise(relevant):
        a, b = (r.success_ar1 for r in (lo, hi))
        rise, se = difference_se(b, hi.success_ar1_se, a, lo.success_ar1_se)
        if rise > Z * se:
            rises.append(f"{lo.model} → {hi.model}: {fmt(a, 2)} → {fmt(b, 2)}")
    report.verdict(
        "With AR(1) noise the relevant-noise dose response is not monotone (appendix A)",
        bool(rises) if len(relevant) > 2 else None,
        (f"success rises with σR beyond {Z:g} SE: {'; '.join(rises)}" if rises else
         "AR(1) success over σR "
         + " → ".join(f"{fmt(r.success_ar1, 2)}" for r in relevant)
         + f": no rise beyond {Z:g} SE"),
    )
    report.sanity(
        "With AR(1) noise irrelevant noise stays harmless (appendix A)",
        irr_ok,
        "irrelevant noise never reaches a leaf score",
        "oracle minus AR(1) success: "
        + ", ".join(
            f"{n} {fmt(d, 2)} (SE {fmt(se, 2)})"
            for n, (k, d, se) in harm.items()
            if k == "irrelevant"
        ),
    )


def vpe_report(report: GroupReport, rows: list[VPERow], source: str) -> None:
    """VPE against DRPE (appendix A): table and verdict."""
    vpe, drpe, etot, both = rows
    report.table(
        "VPE vs DRPE: Spearman with success over the controlled grid (appendix A)",
        ["metric", "n", "ρ with success", "ρ (paper)"],
        [
            ["VPE", vpe.n, fmt_rho(vpe), paper.E6["VPE_rho"].cell()],
            ["DRPE (graded)", drpe.n, fmt_rho(drpe), paper.E6["DRPE_rho"].cell()],
            ["E_tot", etot.n, fmt_rho(etot), paper.TABLE_1["grid"]["E_tot"].cell()],
            ["VPE vs DRPE (ρ between them)", both.n, fmt_rho(both), "—"],
        ],
        f"Grid {'read from e1' if source == 'e1' else 'computed here'}.",
    )
    rv, rd = vpe.rho, drpe.rho
    report.verdict(
        "VPE tracks success as closely as DRPE over the grid (appendix A)",
        None if np.isnan(rv) or np.isnan(rd) else abs(rv - rd) <= MAX_VPE_GAP,
        f"VPE ρ {fmt(rv, 2)} vs DRPE ρ {fmt(rd, 2)} (paper {paper.E6['VPE_rho'].text} for "
        f"both; criterion |difference| ≤ {MAX_VPE_GAP})",
    )


# --------------------------------------------------------------------------- run


def run(ctx: GroupContext) -> GroupReport:
    """E6 (see the module docstring)."""
    cfg: E6Config = ctx.config
    depth_rows = depth_sweep(ctx, cfg)
    horizon_rows = horizon_sweep(ctx, cfg)
    fans, fan_rows = imagination_fans(ctx, cfg)
    ar1 = ar1_rows(ctx, cfg, depth_rows)
    vrows, source = vpe_rows(ctx, cfg)

    for name, rows in [
        ("depth.csv", depth_rows),
        ("horizon.csv", horizon_rows),
        ("fans.csv", fan_rows),
        ("ar1.csv", ar1),
        ("vpe.csv", vrows),
    ]:
        ctx.write_csv(name, rows)
    ctx.save_figure(depth_figure(depth_rows, cfg.models, cfg.depths), "fig6a_depth.png")
    ctx.save_figure(horizon_figure(horizon_rows, cfg.models, cfg.horizons), "fig6b_horizon.png")
    ctx.save_figure(fans_figure(fans, fan_rows, cfg.fan_depth), "fig7_fans.png")

    report = GroupReport(
        "E6 — deep imagination amplifies decision-relevant error (§5.4, Fig. 6, 7)"
    )
    depth_report(report, cfg, depth_rows)
    horizon_report(report, cfg, horizon_rows)
    fans_report(report, fan_rows)
    ar1_report(report, cfg, ar1)
    vpe_report(report, vrows, source)
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "depth": depth_rows,
            "horizon": horizon_rows,
            "fans": fan_rows,
            "fan_path_cells": fans["path"],
            "ar1": ar1,
            "vpe": {"rows": vrows, "grid_source": source},
            "paper": {"numbers": paper.E6, "claims": paper.E6_CLAIMS},
        },
    )
    return report
