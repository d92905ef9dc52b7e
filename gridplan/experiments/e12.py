"""E12: does DRPE's advantage over total error hold on the field's gridworld, MiniGrid DoorKey?

The paper's evidence comes from its own 8x8 world (§5.1, Table 1). E12 repeats E1's design on
Farama MiniGrid's DoorKey (``gridplan.core.doorkey_task``: a heading, turn/forward/pickup/
toggle actions, a locked door, a layout drawn per episode, exact V* per layout), in worlds
whose moving floor tiles are the irrelevant dims. In every world the controlled grid
``M(σR, σI)`` (σR grid cells on dims 0-8, σI normalized units on the tiles,
``NoiseModel.controlled``) is planned in one batched closed loop over MiniGrid's seven actions
and scored by ``prediction_metrics`` on the world's held-out windows; a few learned MLPs,
trained on the factored state of ``learned_worlds``, join the pool there. Per world:
Spearman ρ of ``E_tot`` and of DRPE (graded) with success, seeded bootstrap 95% CIs, and the
margin ``|ρ_DRPE| - |ρ_E_tot|`` with a paired bootstrap CI (``gridplan.experiments.e8``
computes all of these; E12 shares them).

The verdicts (``CLAIMS``) were written before the first full run, with the grid and its
rationale (``configs/experiments/e12/full.yaml``), and only the ``full`` profile checks them
(``docs/PREREGISTERED.md`` Rule 5). The latent families trained on MiniGrid's egocentric
7x7x3 view in one world (``gridplan.experiments.e12_egocentric``; Rule 9) ask the question of
learned models that observe what a MiniGrid agent observes. Writes ``models.csv`` /
``models.json``, ``worlds.csv``, ``egocentric.csv``, ``results.json`` and ``fig_doorkey.png``.
"""

from __future__ import annotations

import time

from gridplan.core import tasks
from gridplan.experiments import e12_egocentric as egocentric
from gridplan.experiments import paper
from gridplan.experiments.e8 import (
    STRONG_RHO,
    ScaleRecord,
    WorldRow,
    lead_claim,
    learned_table,
    measure_worlds,
    strong_claim,
    train_learned,
)
from gridplan.experiments.figures import new_figure
from gridplan.experiments.records import write_models
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E12Config
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho

#: The oracle plans to the goal in a world when its success is at least this.
ORACLE_SUCCESS = 0.99
#: The paper's 12-dimensional grid correlations (Table 1), printed beside every world.
PAPER_GRID = paper.TABLE_1["grid"]

#: The verdicts, stated before the run; each holds or fails on the full profile's numbers.
CLAIMS = {
    "lead": "DRPE's |ρ| with success exceeds E_tot's over the controlled grid in every DoorKey "
    "world",
    "strong": f"DRPE keeps a strong ranking (ρ ≤ {STRONG_RHO:g}; paper −0.98) in every DoorKey "
    "world",
    "margin": "In the world with the most tiles, the paired bootstrap 95% CI of |ρ_DRPE| − "
    "|ρ_E_tot| lies above 0",
    "lead_learned": "With the learned MLPs pooled into the grid, DRPE's |ρ| with success still "
    "exceeds E_tot's in every world with learned models",
    "ego_lead": "Over the learned latent models on MiniGrid's egocentric view, DRPE's |ρ| with "
    "success exceeds E_tot's",
    "ego_pooled": "With the egocentric models pooled into their world's grid, DRPE's |ρ| with "
    "success exceeds E_tot's",
}


def _margin(row: WorldRow) -> tuple[bool | None, str]:
    if row.margin_low is None:
        return None, f"the margin is undefined in {row.world}"
    interval = f"[{row.margin_low:+.2f}, {row.margin_high:+.2f}]"
    return row.margin_low > 0, f"{row.world}: {row.margin:+.2f} {interval}"


def verdicts(
    report: GroupReport,
    cfg: E12Config,
    rows: dict[str, WorldRow],
    ego: egocentric.EgocentricRow | None,
) -> None:
    """Every claim of ``CLAIMS`` (a smoke run's report states none: ``GroupReport``)."""
    measured = [rows[n] for n in cfg.worlds]
    widest = max(measured, key=lambda r: r.state_width)
    learned = [rows[n] for n in cfg.learned_worlds]
    results = {
        "lead": lead_claim(measured),
        "strong": strong_claim(measured),
        "margin": _margin(widest),
        "lead_learned": lead_claim(learned, pooled=True) if learned else (None, "no learned world"),
    }
    none = (None, "no egocentric models")
    results.update(egocentric.claims(ego) if ego else {"ego_lead": none, "ego_pooled": none})
    for key, claim in CLAIMS.items():
        ok, detail = results[key]
        report.verdict(claim, ok, detail)


def sanity(report: GroupReport, rows: list[WorldRow], records: list[ScaleRecord]) -> None:
    """What holds by construction in every world."""
    worst = max(rows, key=lambda r: r.irrelevant_drpe_max)
    report.sanity(
        "Tile-only models M(0, σI) have DRPE 0 in every world",
        worst.irrelevant_drpe_max == 0,
        "σI perturbs only the tiles, which V* never reads: Eq. 1 gives them weight 0",
        f"largest DRPE of a σR = 0 model {fmt(worst.irrelevant_drpe_max, 4)} ({worst.world})",
    )
    oracle = {r.world: r.success for r in records if r.sigma_r == 0 and r.sigma_i == 0}
    same = all(
        r.success == oracle[r.world] for r in records if r.sigma_r == 0 and r.family != "learned"
    )
    report.sanity(
        "Tile-only models M(0, σI) succeed exactly as often as the oracle",
        same,
        "the planner reads the tiles nowhere, so it takes the oracle's actions on the same "
        "seeds",
        ", ".join(f"{w} oracle {fmt(s, 3)}" for w, s in oracle.items()),
    )
    low = min(rows, key=lambda r: r.oracle_success)
    report.sanity(
        f"The oracle M(0, 0) plans to the goal (success ≥ {ORACLE_SUCCESS:g}) in every world",
        low.oracle_success >= ORACLE_SUCCESS,
        "it predicts with MiniGrid's own dynamics and the planner scores its leaves with the "
        "layout's exact V*",
        f"lowest oracle success {fmt(low.oracle_success, 3)} ({low.world})",
    )


def worlds_table(report: GroupReport, rows: list[WorldRow], cfg: E12Config) -> None:
    """Spearman ρ with success in every DoorKey world, the paper's 12-dim numbers beside."""
    cells = [
        [
            r.world,
            r.size,
            r.distractors,
            r.state_width,
            f"{100 * r.irrelevant_share:.0f}%",
            r.horizon,
            fmt(r.oracle_success, 3),
            f"{fmt(r.E_tot_min)}–{fmt(r.E_tot_max)}",
            fmt_rho({"rho": r.rho_E_tot, "low": r.rho_E_tot_low, "high": r.rho_E_tot_high}),
            fmt_rho({"rho": r.rho_DRPE, "low": r.rho_DRPE_low, "high": r.rho_DRPE_high}),
            fmt_rho({"rho": r.margin, "low": r.margin_low, "high": r.margin_high}),
            PAPER_GRID["E_tot"].cell(),
            PAPER_GRID["DRPE"].cell(),
        ]
        for r in rows
    ]
    headers = [
        "world",
        "N",
        "tiles",
        "S",
        "irrelevant share",
        "max steps",
        "oracle success",
        "E_tot range",
        "ρ E_tot",
        "ρ DRPE",
        "margin",
        "paper ρ E_tot (12 dims)",
        "paper ρ DRPE (12 dims)",
    ]
    report.table(
        "Spearman ρ with success over the controlled grid, per DoorKey world",
        headers,
        cells,
        f"Each world's {rows[0].n_grid}-model grid M(σR, σI), σR ∈ {list(cfg.sigma_r)} cells "
        f"on dims 0-8 (agent, heading, key, carrying, door, layout), σI ∈ {list(cfg.sigma_i)} "
        f"on the tiles, depth {cfg.protocol.depth} over MiniGrid's 7 actions, "
        f"{len(cfg.protocol.seeds)} seeds × {cfg.protocol.episodes} episodes per model run to "
        f"MiniGrid's max_steps, {cfg.protocol.n_windows} held-out windows of H = "
        f"{cfg.protocol.horizon} drawn in that world. ρ with a bootstrap 95% CI "
        f"({cfg.n_resamples} resamples); the margin is |ρ_DRPE| − |ρ_E_tot|, its CI resampling "
        "the same models for both ρ. The paper measures only its own 12-dim world (Table 1, "
        "48 models, depth 4): its numbers are the reference of every row, not a prediction "
        "of DoorKey's. The irrelevant share counts the tile dims.",
    )


def doorkey_figure(records: list[ScaleRecord], names: tuple[str, ...]):
    """Success against E_tot and against DRPE, one row of panels per world, coloured by σR;
    learned MLPs as black crosses, egocentric latent models as open triangles."""
    fig = new_figure(9, 3.2 * len(names))
    axes = fig.subplots(len(names), 2, squeeze=False)
    for row, name in zip(axes, names, strict=True):
        grid = [r for r in records if r.world == name and r.family == "controlled"]
        extra = [
            ([r for r in records if r.world == name and r.family == family], style)
            for family, style in (
                ("learned", {"marker": "x", "c": "black", "label": "learned MLP"}),
                (
                    egocentric.FAMILY,
                    {"marker": "^", "facecolors": "none", "edgecolors": "black",
                     "label": "egocentric latent"},
                ),
            )
        ]  # fmt: skip
        for ax, key, label in ((row[0], "E_tot", "E_tot"), (row[1], "DRPE_graded", "DRPE")):
            sc = ax.scatter(
                [getattr(r, key) for r in grid],
                [r.success for r in grid],
                c=[r.sigma_r for r in grid],
                cmap="plasma",
                s=24,
            )
            for points, style in extra:
                if points:
                    x = [getattr(r, key) for r in points]
                    ax.scatter(x, [r.success for r in points], **style)
            if any(points for points, _ in extra):
                ax.legend(loc="best", fontsize=8)
            ax.set_xlabel(f"{label} ({name})")
            ax.set_ylabel("success rate")
            ax.grid(alpha=0.3)
        fig.colorbar(sc, ax=row, label="σR (grid cells)")
    fig.suptitle("MiniGrid DoorKey: success against total error and against DRPE")
    return fig


def egocentric_models(
    ctx: GroupContext, cfg: E12Config, records: list[ScaleRecord]
) -> tuple[egocentric.EgocentricRow | None, list[ScaleRecord]]:
    """The egocentric models of ``cfg.egocentric`` trained and measured
    (``gridplan.experiments.e12_egocentric``) beside their world's grid in ``records``;
    ``(None, [])`` without them."""
    zoo = cfg.egocentric
    if not zoo.families:
        return None, []
    trained, train_wall = egocentric.train(ctx, cfg)
    t0 = time.perf_counter()
    ego = egocentric.measure(ctx, cfg, trained)
    grid = [r for r in records if r.world == zoo.world and r.family == "controlled"]
    seconds = (train_wall, time.perf_counter() - t0)
    return egocentric.summarize(zoo.world, grid, ego, cfg.n_resamples, seconds), ego


def run(ctx: GroupContext) -> GroupReport:
    """E12 (see the module docstring)."""
    cfg: E12Config = ctx.config
    trained, train_wall = train_learned(ctx, cfg)
    records, rows, _ = measure_worlds(ctx, cfg, trained)
    ego, ego_records = egocentric_models(ctx, cfg, records)
    records += ego_records
    ordered = [rows[n] for n in cfg.worlds]
    write_models(ctx, records)
    ctx.write_csv("worlds.csv", ordered)
    if ego is not None:
        ctx.write_csv("egocentric.csv", [ego])
    ctx.save_figure(doorkey_figure(records, cfg.worlds), "fig_doorkey.png")

    report = GroupReport(
        "E12 — DRPE on MiniGrid DoorKey (§5.1 design, the field's gridworld)", ctx.profile
    )
    verdicts(report, cfg, rows, ego)
    sanity(report, ordered, records)
    worlds_table(report, ordered, cfg)
    learned_table(report, ordered, [r for r in records if r.family == "learned"])
    if ego is not None:
        egocentric.tables(report, ego, ego_records)
    report.figure(
        "fig_doorkey.png",
        "Success against E_tot and DRPE in each DoorKey world, coloured by σR; crosses: "
        "learned MLPs on the state; triangles: learned latent models on the egocentric view",
    )
    grid_wall = sum(r.grid_seconds for r in ordered)
    report.text(
        f"Wall time: the controlled grids took {grid_wall:.0f} s ("
        + ", ".join(f"{r.world} {r.grid_seconds:.0f} s" for r in ordered)
        + f"); training {len(trained)} learned models took {train_wall:.0f} s"
        + (
            f"; the {ego.n_models} egocentric models took {ego.train_seconds:.0f} s to train "
            f"and {ego.measure_seconds:.0f} s to measure."
            if ego is not None
            else "."
        )
    )
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "worlds": ordered,
            "models": records,
            "claims": CLAIMS,
            "verdicts_stated": not report.smoke,
            "train_wall_seconds": train_wall,
            "egocentric": ego,
            "tasks": {n: tasks.get("A", world=n).world.describe() for n in cfg.worlds},
            "paper": {"grid": PAPER_GRID},
        },
    )
    return report
