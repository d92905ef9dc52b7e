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
  (e1's numbers when a finished e1 of the same profile exists, else computed here).

Writes ``depth.csv``, ``horizon.csv``, ``fans.csv``, ``ar1.csv``, ``vpe.csv``,
``results.json`` and ``fig6a_depth.png``, ``fig6b_horizon.png``, ``fig7_fans.png``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.closed_loop import run_closed_loop, start_states
from gridplan.constants import AGENT_X, AGENT_Y, CELL_SCALE, KEY_X, KEY_Y
from gridplan.experiments import e1, paper
from gridplan.experiments.common import (
    GroupContext,
    Report,
    closed_loop,
    draw_gridworld,
    fmt,
    fmt_rho,
    fmt_se,
    model_name,
    new_figure,
    standard_windows,
)
from gridplan.metrics import prediction_metrics
from gridplan.models import AR1NoiseModel, NoiseModel, OracleModel
from gridplan.planner import Planner, action_sequences
from gridplan.stats import spearman_ci
from gridplan.tasks import TASK_A

#: Success gaps count when they exceed this many standard errors of the gap.
Z = 2.0
#: VPE "matches" DRPE when their Spearman correlations with success differ by at most this
#: (paper: both -0.98).
MAX_VPE_GAP = 0.05


@dataclass(frozen=True)
class E6Config:
    """E6 settings. Models are ``(σR, σI)`` pairs of the controlled family.

    Attributes:
        models: depth- and horizon-sweep models; must include the oracle ``(0, 0)``.
        depths: planner depths of the depth sweep (ascending).
        seeds: closed-loop seeds; ``episodes`` each.
        episodes: episodes per seed.
        horizons: rollout lengths of the horizon sweep.
        n_windows: held-out windows per horizon.
        fan_models: ``(irrelevant, relevant)`` models of the fans.
        fan_depth: imagined depth of the fans.
        fan_seed: seed of the fans' start state and noise.
        ar1_rho: AR(1) correlation.
        ar1_models: AR(1) models; each must be in ``models``.
        n_resamples: bootstrap resamples of the VPE Spearman CIs.
    """

    models: tuple[tuple[float, float], ...]
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    episodes: int
    horizons: tuple[int, ...]
    n_windows: int
    fan_models: tuple[tuple[float, float], tuple[float, float]]
    fan_depth: int
    fan_seed: int
    ar1_rho: float
    ar1_models: tuple[tuple[float, float], ...]
    n_resamples: int = 2000

    def __post_init__(self) -> None:
        if (0.0, 0.0) not in self.models:
            raise ValueError("E6Config.models must include the oracle (0, 0)")
        missing = [m for m in self.ar1_models if m not in self.models]
        if missing:
            raise ValueError(f"E6Config.ar1_models {missing} are not in models")


_MODELS = ((0.0, 0.0), (0.0, 0.3), (0.0, 1.2), (0.15, 0.0), (0.25, 0.0), (0.35, 0.0))
CONFIGS = {
    "full": E6Config(
        _MODELS,
        (1, 2, 4),
        tuple(range(10)),
        30,
        (1, 2, 5, 10, 20),
        1000,
        ((0.0, 1.2), (0.35, 0.0)),
        4,
        3,
        0.8,
        _MODELS[1:],
    ),
    "quick": E6Config(
        _MODELS,
        (1, 2, 4),
        (0, 1),
        8,
        (1, 2, 5, 10, 20),
        500,
        ((0.0, 1.2), (0.35, 0.0)),
        4,
        3,
        0.8,
        _MODELS[1:],
    ),
    "tiny": E6Config(
        ((0.0, 0.0), (0.0, 1.2), (0.35, 0.0)),
        (1, 2),
        (0, 1),
        2,
        (1, 2),
        32,
        ((0.0, 1.2), (0.35, 0.0)),
        2,
        3,
        0.8,
        ((0.0, 1.2), (0.35, 0.0)),
        200,
    ),
}


def _kind(m: tuple[float, float]) -> str:
    if m == (0.0, 0.0):
        return "oracle"
    return "relevant" if m[0] > 0 else "irrelevant"


def _diff_se(a: dict, b: dict) -> tuple[float, float]:
    """``a - b`` success and the SE of the difference."""
    se = math.sqrt((a["success_se"] or 0.0) ** 2 + (b["success_se"] or 0.0) ** 2)
    return a["success"] - b["success"], se


def depth_sweep(ctx: GroupContext, cfg: E6Config) -> list[dict]:
    """Closed-loop success of every model at every depth."""
    model = NoiseModel.controlled([m[0] for m in cfg.models], [m[1] for m in cfg.models])
    rows = []
    for depth in ctx.bar(cfg.depths, "depth sweep"):
        loop, _ = closed_loop(ctx, model, "A", depth, cfg.seeds, cfg.episodes)
        for m, cl in zip(cfg.models, loop, strict=True):
            rows.append(
                {
                    "model": model_name(*m),
                    "sigma_r": m[0],
                    "sigma_i": m[1],
                    "kind": _kind(m),
                    "depth": depth,
                    "success": cl["success"],
                    "success_se": cl["success_se"],
                    "n_episodes": cl["n_episodes"],
                    **cl["outcomes"],
                }
            )
    return rows


def horizon_sweep(ctx: GroupContext, cfg: E6Config) -> list[dict]:
    """E_tot and DRPE (graded, binary) of every model on H-step rollouts, per H."""
    model = NoiseModel.controlled([m[0] for m in cfg.models], [m[1] for m in cfg.models])
    rows = []
    for h in ctx.bar(cfg.horizons, "horizon sweep"):
        metrics = prediction_metrics(model, standard_windows(ctx, cfg.n_windows, h), TASK_A)
        for m, pm in zip(cfg.models, metrics, strict=True):
            rows.append(
                {
                    "model": model_name(*m),
                    "sigma_r": m[0],
                    "sigma_i": m[1],
                    "kind": _kind(m),
                    "horizon": h,
                    "E_tot": pm.E_tot,
                    "DRPE_graded": pm.DRPE["graded"],
                    "DRPE_binary": pm.DRPE["binary"],
                }
            )
    return rows


@torch.no_grad()
def imagination_fans(ctx: GroupContext, cfg: E6Config) -> tuple[dict, list[dict]]:
    """Imagined agent positions of all ``4^D`` leaves from each true state of one oracle episode.

    Returns:
        ``(fans, rows)``: ``fans`` holds the true path ``(T + 1, 2)`` in cells, the key cell and,
        per fan model name, imagined positions ``(T * L * D, 2)`` in cells; ``rows`` one dict
        per model with the mean leaf displacement from the oracle's imagined position (cells)
        and the fraction of imagined steps off the oracle's cell.
    """
    depth = cfg.fan_depth
    start = start_states([cfg.fan_seed], 1, TASK_A, ctx.device)
    planner = Planner(OracleModel(), depth, TASK_A, device=ctx.device)
    res = run_closed_loop(planner, start, ctx.generator(cfg.fan_seed), record=True)
    steps = int(res.steps[0])
    path = res.trajectory[: steps + 1, 0]
    roots = path[:steps] if steps > 0 else path[:1]
    seqs = action_sequences(depth, ctx.device)
    n_leaves = seqs.shape[0]
    state0 = roots.repeat_interleave(n_leaves, dim=0)
    actions = seqs.repeat(roots.shape[0], 1)

    def imagine(model, gen):
        state, out = state0, []
        for t in range(depth):
            state = model.predict(state, actions[:, t], gen)
            out.append(state[:, [AGENT_X, AGENT_Y]] * CELL_SCALE)
        return torch.stack(out, dim=1)  # (T * L, D, 2) in cells

    truth = imagine(OracleModel(), ctx.generator(cfg.fan_seed))
    fans = {
        "path": (path[:, [AGENT_X, AGENT_Y]] * CELL_SCALE).cpu().numpy(),
        "key": (path[0, [KEY_X, KEY_Y]] * CELL_SCALE).cpu().numpy(),
        "steps": steps,
        "models": {},
    }
    rows = []
    for m in cfg.fan_models:
        pos = imagine(NoiseModel.controlled(*m), ctx.generator(cfg.fan_seed + 1))
        dist = (pos - truth).norm(dim=2)
        off = (pos.round() != truth.round()).any(dim=2)
        fans["models"][model_name(*m)] = pos.reshape(-1, 2).cpu().numpy()
        rows.append(
            {
                "model": model_name(*m),
                "sigma_r": m[0],
                "sigma_i": m[1],
                "kind": _kind(m),
                "depth": depth,
                "true_states": int(roots.shape[0]),
                "leaves": n_leaves,
                "mean_leaf_displacement_cells": float(dist[:, -1].mean()),
                "mean_displacement_cells": float(dist.mean()),
                "frac_off_true_cell": float(off.float().mean()),
            }
        )
    return fans, rows


def ar1_rows(ctx: GroupContext, cfg: E6Config, depth_rows: list[dict]) -> list[dict]:
    """AR(1) noise vs independent noise at the deepest depth (same marginal σ per step)."""
    depth = max(cfg.depths)
    model = AR1NoiseModel.controlled(
        [m[0] for m in cfg.ar1_models], [m[1] for m in cfg.ar1_models], cfg.ar1_rho
    )
    loop, _ = closed_loop(ctx, model, "A", depth, cfg.seeds, cfg.episodes)
    windows = standard_windows(ctx, cfg.n_windows, 10)
    metrics = prediction_metrics(model, windows, TASK_A)
    indep_metrics = prediction_metrics(
        NoiseModel.controlled([m[0] for m in cfg.ar1_models], [m[1] for m in cfg.ar1_models]),
        windows,
        TASK_A,
    )
    indep = {(r["sigma_r"], r["sigma_i"]): r for r in depth_rows if r["depth"] == depth}
    oracle = indep[(0.0, 0.0)]
    rows = []
    for m, cl, pm, pi in zip(cfg.ar1_models, loop, metrics, indep_metrics, strict=True):
        ind = indep[m]
        rows.append(
            {
                "model": model_name(*m),
                "sigma_r": m[0],
                "sigma_i": m[1],
                "kind": _kind(m),
                "depth": depth,
                "rho": cfg.ar1_rho,
                "success_ar1": cl["success"],
                "success_ar1_se": cl["success_se"],
                "success_indep": ind["success"],
                "success_indep_se": ind["success_se"],
                "success_oracle": oracle["success"],
                "success_oracle_se": oracle["success_se"],
                "E_tot_ar1": pm.E_tot,
                "E_tot_indep": pi.E_tot,
                "DRPE_ar1": pm.DRPE["graded"],
                "DRPE_indep": pi.DRPE["graded"],
                "n_episodes": cl["n_episodes"],
            }
        )
    return rows


def vpe_rows(ctx: GroupContext, cfg: E6Config) -> tuple[list[dict], dict, str]:
    """Spearman of VPE, DRPE (graded) and E_tot with success over the controlled grid."""
    grid, source = e1.load_or_compute_grid(ctx)
    s = np.array([r["success"] for r in grid])
    out, rows = {}, []
    for key in ("VPE", "DRPE_graded", "E_tot"):
        x = np.array([r[key] for r in grid])
        res = spearman_ci(x, s, cfg.n_resamples)
        out[key] = res
        rows.append(
            {"metric": key, "n": len(grid), "rho": res.rho, "low": res.low, "high": res.high}
        )
    vpe_drpe = spearman_ci(
        np.array([r["VPE"] for r in grid]),
        np.array([r["DRPE_graded"] for r in grid]),
        cfg.n_resamples,
    )
    out["VPE_vs_DRPE"] = vpe_drpe
    rows.append(
        {
            "metric": "VPE vs DRPE_graded",
            "n": len(grid),
            "rho": vpe_drpe.rho,
            "low": vpe_drpe.low,
            "high": vpe_drpe.high,
        }
    )
    return rows, out, source


def depth_figure(rows: list[dict], cfg: E6Config):
    """Fig. 6a: success against depth per model."""
    fig = new_figure(6, 4)
    ax = fig.add_subplot()
    styles = {"oracle": ("k", "-"), "irrelevant": (None, "--"), "relevant": (None, "-")}
    for m in cfg.models:
        sub = [r for r in rows if (r["sigma_r"], r["sigma_i"]) == m]
        color, ls = styles[_kind(m)]
        ax.errorbar(
            [r["depth"] for r in sub],
            [r["success"] for r in sub],
            yerr=[r["success_se"] or 0.0 for r in sub],
            ls=ls,
            color=color,
            marker="o",
            capsize=3,
            label=f"{model_name(*m)} ({_kind(m)})",
        )
    ax.set_xticks(cfg.depths)
    ax.set_xlabel("planner depth D")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.05)
    ax.legend(fontsize=7)
    ax.set_title("Relevant noise hurts more with depth; irrelevant never (Fig. 6a)")
    return fig


def horizon_figure(rows: list[dict], cfg: E6Config):
    """Fig. 6b: E_tot and DRPE against the rollout horizon per model."""
    fig = new_figure(10, 4)
    axes = fig.subplots(1, 2)
    for ax, key in zip(axes, ("E_tot", "DRPE_graded"), strict=True):
        for m in cfg.models:
            sub = [r for r in rows if (r["sigma_r"], r["sigma_i"]) == m]
            ls = "--" if _kind(m) == "irrelevant" else "-"
            ax.plot(
                [r["horizon"] for r in sub],
                [r[key] for r in sub],
                ls=ls,
                marker="o",
                label=model_name(*m),
                color="k" if _kind(m) == "oracle" else None,
            )
        ax.set_xlabel("rollout horizon H")
        ax.set_ylabel(key)
        ax.set_xscale("log")
        ax.set_xticks(cfg.horizons, [str(h) for h in cfg.horizons])
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Prediction error by horizon: relevant (solid) vs irrelevant (dashed) (Fig. 6b)")
    return fig


def fans_figure(fans: dict, rows: list[dict], cfg: E6Config):
    """Fig. 7: imagined agent positions of both fan models over the world."""
    fig = new_figure(10, 5)
    axes = fig.subplots(1, 2)
    rng = np.random.default_rng(0)
    for ax, (name, pos), row in zip(axes, fans["models"].items(), rows, strict=True):
        draw_gridworld(ax, "A")
        # Spread points that sit exactly on a cell so their density shows; leave the others.
        on_cell = (pos == np.round(pos)).all(axis=1, keepdims=True)
        jitter = rng.uniform(-0.2, 0.2, size=pos.shape) * on_cell
        ax.scatter(
            pos[:, 0] + jitter[:, 0],
            pos[:, 1] + jitter[:, 1],
            s=2,
            alpha=0.15,
            color="tab:purple",
            label="imagined agent positions",
        )
        ax.plot(
            fans["path"][:, 0],
            fans["path"][:, 1],
            "-o",
            color="k",
            markersize=3,
            label="true path (oracle)",
        )
        ax.plot(*fans["key"], marker="*", color="gold", markersize=12, markeredgecolor="k")
        ax.set_title(
            f"{name} ({row['kind']} noise), D = {cfg.fan_depth}: mean leaf "
            f"displacement {row['mean_leaf_displacement_cells']:.2f} cells",
            fontsize=8,
        )
        ax.legend(loc="upper left", fontsize=7)
    fig.suptitle("Imagination fans (Fig. 7)")
    return fig


def run(ctx: GroupContext) -> Report:
    """E6 (see the module docstring)."""
    cfg: E6Config = ctx.config
    report = Report("E6 — deep imagination amplifies decision-relevant error (§5.4, Fig. 6, 7)")

    depth_rows = depth_sweep(ctx, cfg)
    ctx.write_csv("depth.csv", depth_rows)
    dmin, dmax = min(cfg.depths), max(cfg.depths)
    table = []
    for m in cfg.models:
        sub = {r["depth"]: r for r in depth_rows if (r["sigma_r"], r["sigma_i"]) == m}
        table.append(
            [model_name(*m), _kind(m)]
            + [fmt_se(sub[d]["success"], sub[d]["success_se"]) for d in cfg.depths]
        )
    report.table(
        "Depth sweep: success by planner depth (Fig. 6a)",
        ["model", "noise", *[f"D = {d}" for d in cfg.depths]],
        table,
        f"Paper: {paper.E6_CLAIMS['depth']}. The paper gives this as a figure without numbers.",
    )
    ctx.save_figure(depth_figure(depth_rows, cfg), "fig6a_depth.png")
    report.figure("fig6a_depth.png", "Success against planner depth (Fig. 6a)")

    at = {(r["sigma_r"], r["sigma_i"], r["depth"]): r for r in depth_rows}
    relevant = [m for m in cfg.models if _kind(m) == "relevant"]
    irrelevant = [m for m in cfg.models if _kind(m) == "irrelevant"]
    strongest = max(relevant, key=lambda m: m[0])
    fall, fall_se = _diff_se(at[(*strongest, dmin)], at[(*strongest, dmax)])
    irr_falls = {m: _diff_se(at[(*m, dmin)], at[(*m, dmax)]) for m in irrelevant}
    ok = fall > Z * fall_se and all(d <= Z * max(se, 1e-12) for d, se in irr_falls.values())
    report.verdict(
        "Success under relevant noise falls with depth, under irrelevant noise it does not "
        "(§5.4, Fig. 6a)",
        ok,
        f"{model_name(*strongest)}: D = {dmin} minus D = {dmax} = {fmt(fall, 2)} (SE "
        f"{fmt(fall_se, 2)}); irrelevant: "
        + ", ".join(
            f"{model_name(*m)} {fmt(d, 2)} (SE {fmt(se, 2)})" for m, (d, se) in irr_falls.items()
        )
        + f" (criterion: the relevant drop beyond {Z:g} SE, no irrelevant drop beyond {Z:g} SE)",
    )

    hrows = horizon_sweep(ctx, cfg)
    ctx.write_csv("horizon.csv", hrows)
    hmin, hmax = min(cfg.horizons), max(cfg.horizons)
    hat = {(r["sigma_r"], r["sigma_i"], r["horizon"]): r for r in hrows}
    report.table(
        "Horizon sweep: E_tot / DRPE (graded) by rollout horizon (Fig. 6b)",
        ["model", "noise", *[f"H = {h}" for h in cfg.horizons]],
        [
            [model_name(*m), _kind(m)]
            + [
                f"{fmt(hat[(*m, h)]['E_tot'])} / {fmt(hat[(*m, h)]['DRPE_graded'])}"
                for h in cfg.horizons
            ]
            for m in cfg.models
        ],
        f"Paper: {paper.E6_CLAIMS['horizon']}; a figure without numbers.",
    )
    ctx.save_figure(horizon_figure(hrows, cfg), "fig6b_horizon.png")
    report.figure("fig6b_horizon.png", "E_tot and DRPE against horizon (Fig. 6b)")
    irr_zero = all(hat[(*m, h)]["DRPE_graded"] == 0.0 for m in irrelevant for h in cfg.horizons)
    grows = all(hat[(*m, hmax)]["DRPE_graded"] > hat[(*m, hmin)]["DRPE_graded"] for m in relevant)
    report.verdict(
        "Relevant-noise DRPE grows with the horizon; irrelevant-noise DRPE stays zero (Fig. 6b)",
        irr_zero and grows,
        f"DRPE at H = {hmin} → {hmax}: "
        + ", ".join(
            f"{model_name(*m)} {fmt(hat[(*m, hmin)]['DRPE_graded'])} → "
            f"{fmt(hat[(*m, hmax)]['DRPE_graded'])}"
            for m in relevant + irrelevant
        ),
    )

    fans, fan_rows = imagination_fans(ctx, cfg)
    ctx.write_csv("fans.csv", fan_rows)
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
                r["model"],
                r["kind"],
                r["depth"],
                r["true_states"],
                fmt(r["mean_leaf_displacement_cells"], 2),
                fmt(r["frac_off_true_cell"], 2),
            ]
            for r in fan_rows
        ],
        f"Paper: {paper.E6_CLAIMS['fans']}; a figure without numbers.",
    )
    ctx.save_figure(fans_figure(fans, fan_rows, cfg), "fig7_fans.png")
    report.figure(
        "fig7_fans.png", "Imagined agent positions of all leaves along one episode (Fig. 7)"
    )
    irr_row, rel_row = fan_rows
    irr_shift = irr_row["mean_leaf_displacement_cells"]
    rel_shift = rel_row["mean_leaf_displacement_cells"]
    report.verdict(
        "Irrelevant-noise imagination traces the true path, relevant-noise imagination fans out "
        "(Fig. 7)",
        irr_shift == 0.0 and rel_shift > 0.0,
        f"mean leaf displacement {irr_row['model']} {fmt(irr_shift, 2)} vs {rel_row['model']} "
        f"{fmt(rel_shift, 2)} cells (criterion: zero vs positive)",
    )

    ar1 = ar1_rows(ctx, cfg, depth_rows)
    ctx.write_csv("ar1.csv", ar1)
    report.table(
        f"AR(1)-correlated noise (ρ = {cfg.ar1_rho:g}) vs independent noise, D = {dmax} "
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
                r["model"],
                r["kind"],
                fmt_se(r["success_ar1"], r["success_ar1_se"]),
                fmt_se(r["success_indep"], r["success_indep_se"]),
                f"{fmt(r['E_tot_ar1'])} / {fmt(r['E_tot_indep'])}",
                f"{fmt(r['DRPE_ar1'])} / {fmt(r['DRPE_indep'])}",
            ]
            for r in ar1
        ],
        f"Paper: {paper.E6_CLAIMS['ar1']}; no numbers given. Oracle success at D = {dmax}: "
        f"{fmt_se(ar1[0]['success_oracle'], ar1[0]['success_oracle_se'])}.",
    )
    harm = {}
    for r in ar1:
        d, se = _diff_se(
            {"success": r["success_oracle"], "success_se": r["success_oracle_se"]},
            {"success": r["success_ar1"], "success_se": r["success_ar1_se"]},
        )
        harm[r["model"]] = (r["kind"], d, se)
    irr_ok = all(d <= Z * max(se, 1e-12) for k, d, se in harm.values() if k == "irrelevant")
    top = max((r for r in ar1 if r["kind"] == "relevant"), key=lambda r: r["sigma_r"])
    _, top_d, top_se = harm[top["model"]]
    report.verdict(
        "With AR(1) noise irrelevant noise stays harmless and relevant noise harmful (appendix A)",
        irr_ok and top_d > Z * top_se,
        "oracle minus AR(1) success: "
        + ", ".join(f"{n} {fmt(d, 2)} (SE {fmt(se, 2)})" for n, (_, d, se) in harm.items())
        + f" (criterion: irrelevant within {Z:g} SE of the oracle, {top['model']} below it)",
    )

    vrows, vres, source = vpe_rows(ctx, cfg)
    ctx.write_csv("vpe.csv", vrows)
    report.table(
        "VPE vs DRPE: Spearman with success over the controlled grid (appendix A)",
        ["metric", "n", "ρ with success", "ρ (paper)"],
        [
            ["VPE", vrows[0]["n"], fmt_rho(vres["VPE"]), paper.E6["VPE_rho"].cell()],
            [
                "DRPE (graded)",
                vrows[1]["n"],
                fmt_rho(vres["DRPE_graded"]),
                paper.E6["DRPE_rho"].cell(),
            ],
            ["E_tot", vrows[2]["n"], fmt_rho(vres["E_tot"]), paper.TABLE_1["grid"]["E_tot"].cell()],
            ["VPE vs DRPE (ρ between them)", vrows[3]["n"], fmt_rho(vres["VPE_vs_DRPE"]), "—"],
        ],
        f"Grid {'read from e1' if source == 'e1' else 'computed here'}.",
    )
    rv, rd = vres["VPE"].rho, vres["DRPE_graded"].rho
    report.verdict(
        "VPE tracks success as closely as DRPE over the grid (appendix A)",
        None if np.isnan(rv) or np.isnan(rd) else abs(rv - rd) <= MAX_VPE_GAP,
        f"VPE ρ {fmt(rv, 2)} vs DRPE ρ {fmt(rd, 2)} (paper {paper.E6['VPE_rho'].text} for "
        f"both; criterion |difference| ≤ {MAX_VPE_GAP})",
    )

    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "depth": depth_rows,
            "horizon": hrows,
            "fans": fan_rows,
            "fan_path_cells": fans["path"],
            "ar1": ar1,
            "vpe": {"rows": vrows, "grid_source": source},
            "paper": {"numbers": paper.E6, "claims": paper.E6_CLAIMS},
        },
    )
    return report
