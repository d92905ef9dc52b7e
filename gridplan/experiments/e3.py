"""E3: learned world models (paper §5.4, Table 3, §5.2 "learned pool", appendix E, G, Fig. 8).

Seven MLP world models of Table 3 — ``uniform`` / ``event_weighted`` / ``anti_weighted`` /
``rel_heavy`` / ``rel_only`` on 20k balanced transitions, ``uniform`` on 12k and 4k — plus the
model trained on 12k uniform-random transitions (``data.policy=random``), each trained once per
training seed (``gridplan.experiments.learned_runs``; the full profile trains with
``python -m train``'s defaults). Protocol (``gridplan.core.protocols.LEARNED``):

- The models of training seed ``k`` (all rows at once, one setting each) play the
  ``episodes`` start states of closed-loop seed ``k`` with the depth-2 planner: the rows share
  start states within a seed (common random numbers), the seeds differ.
- Success is the mean over the seeds' success rates; **its SE is taken over the per-seed
  success rates** (n = number of training seeds), so it contains training-seed variance as
  well as episode noise. ``E_tot``, DRPE (graded, binary), the per-dimension profile and the
  event audit are means over the seeds' models, each scored by
  ``gridplan.metrics.prediction.prediction_metrics`` on the held-out windows shared with E1 (so e2
  can pool these models with the controlled grid).

Writes ``models.json``/``models.csv`` (the 7 Table 3 models, family ``"learned"``, which e2
pools; the random-data model, family ``"learned_extra"``), ``runs.csv`` (every training run:
epochs, seconds, best validation metrics, checkpoint relative to the group folder),
``table3.csv``, ``results.json``, ``fig_table3_success.png`` and
``fig8_random_data_failure.png`` (the random-data model's closed-loop path beside the
uniform-20k model's from one start state, and the predicted ``carrying`` at pickup).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core.constants import CARRYING, DOOR_OPEN
from gridplan.core.protocols import LEARNED
from gridplan.core.tasks import TASK_A
from gridplan.experiments import paper
from gridplan.experiments.figures import failure_figure, learned_success_figure
from gridplan.experiments.learned_runs import ModelStack, cpu_threads, train_runs
from gridplan.experiments.measure import closed_loop, standard_windows
from gridplan.experiments.records import LearnedRecord, Record, TrainingRun, write_models
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import ROWS, UNIFORM_20K, E3Config, LearnedRow
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho, fmt_se, paper_cell
from gridplan.metrics.prediction import PredictionMetrics, prediction_metrics
from gridplan.metrics.stats import SpearmanResult, mean_se, spearman_ci
from gridplan.models.learned import load_world_model
from gridplan.planning.closed_loop import GOAL, OUTCOMES, EpisodeResults

#: The random-data model "never reaches the goal" when it succeeds at most this often (paper 0%;
#: its event failure is judged separately: predicted ``carrying`` at pickup below 0.5).
MAX_RANDOM_SUCCESS = 0.10
#: Neither metric "ranks the learned variants" while its Spearman ρ with success stays above
#: this (paper: +0.43 for both).
MAX_RANKING_RHO = -0.5
#: Event-audit fields averaged over the seeds' models.
AUDIT_KEYS = ("carrying_at_pickup", "pickup_mse", "door_open_at_opening", "door_mse")


@dataclass(frozen=True)
class SeedResult:
    """One training seed's model of one row: its prediction metrics, closed-loop success and
    outcomes, and the fraction of its true episodes that ever picked up the key and ever
    opened the door."""

    metrics: PredictionMetrics
    success: float
    outcomes: dict[str, int]
    picked_up_key: float
    opened_door: float


@dataclass(frozen=True, kw_only=True)
class Table3Row(Record):
    """One row of Table 3 (``table3.csv``)."""

    row: str
    name: str
    success: float
    success_se: float
    success_paper: float | None
    E_tot: float
    E_tot_paper: float | None
    DRPE_graded: float
    DRPE_paper: float | None
    DRPE_binary: float
    carrying_at_pickup: float
    n_seeds: int
    n_episodes: int

    @classmethod
    def of(cls, rec: LearnedRecord) -> Table3Row:
        ref = paper.TABLE_3.get(rec.key, {})
        return cls(
            row=rec.key,
            name=rec.name,
            success=rec.success,
            success_se=rec.success_se,
            success_paper=ref["success"].value if ref else None,
            E_tot=rec.E_tot,
            E_tot_paper=ref["E_tot"].value if ref else None,
            DRPE_graded=rec.DRPE_graded,
            DRPE_paper=ref["DRPE"].value if ref else None,
            DRPE_binary=rec.DRPE_binary,
            carrying_at_pickup=rec.carrying_at_pickup,
            n_seeds=rec.n_seeds,
            n_episodes=rec.n_episodes,
        )


# --------------------------------------------------------------------------- compute


def train_all(ctx: GroupContext, cfg: E3Config) -> tuple[dict[tuple[str, int], TrainingRun], float]:
    """Every row's model of every training seed, trained as vectorized groups
    (``learned_runs.train_runs``; seed-major jobs dealt round-robin, so the groups hold the
    same mix of rows); ``(key, seed) -> run`` and the wall time of all training."""
    jobs = [(row, seed) for seed in cfg.protocol.seeds for row in cfg.settings]
    t0 = time.perf_counter()
    runs = train_runs(ctx, cfg, jobs)
    wall = time.perf_counter() - t0
    groups = sorted({r.wall_seconds for r in runs.values()})
    ctx.log(
        f"trained {len(jobs)} models in {wall:.0f} s as {len(groups)} vectorized group(s) "
        f"({', '.join(f'{g:.0f} s' for g in groups)}), "
        f"{np.mean([r.epochs for r in runs.values()]):.0f} epochs on average"
    )
    return runs, wall


def milestones(trajectory: torch.Tensor, settings: int) -> list[tuple[float, float]]:
    """Per setting, the fraction of its true episodes in which the key was ever carried and
    the door ever opened, from a recorded ``(T + 1, M * E, 12)`` setting-major trajectory."""
    carried = (trajectory[..., CARRYING] > 0.5).any(dim=0).view(settings, -1).float()
    opened = (trajectory[..., DOOR_OPEN] > 0.5).any(dim=0).view(settings, -1).float()
    return [(float(c.mean()), float(o.mean())) for c, o in zip(carried, opened, strict=True)]


def evaluate_seed(
    ctx: GroupContext, cfg: E3Config, runs: dict, seed: int
) -> tuple[list[SeedResult], EpisodeResults]:
    """Prediction metrics and closed-loop success of every row's model of one seed
    (``cfg.settings`` order), and the raw setting-major ``EpisodeResults`` with
    trajectories."""
    models = [
        load_world_model(ctx.out / runs[(r.key, seed)].checkpoint, ctx.device) for r in cfg.settings
    ]
    stack = ModelStack(models)
    windows = standard_windows(ctx, cfg.protocol)
    with cpu_threads(ctx):
        metrics = prediction_metrics(stack, windows, TASK_A)
        loop, results = closed_loop(
            ctx, stack, TASK_A, cfg.protocol.replace(seeds=(seed,)), record=True
        )
    marks = milestones(results.trajectory, len(models))
    out = [
        SeedResult(pm, summary.success, summary.outcomes, *mark)
        for pm, summary, mark in zip(metrics, loop, marks, strict=True)
    ]
    return out, results


def _avg(values) -> float:
    """Mean of the values that are not NaN (NaN if none is)."""
    values = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(values)) if values else float("nan")


def _success(per_seed: list[SeedResult], episodes: int) -> tuple[float, float, str]:
    """Success, its SE over the seeds' success rates (one seed: over its episodes), and
    what the SE is over."""
    succ = [p.success for p in per_seed]
    if len(succ) > 1:
        success, se, _ = mean_se(succ)
        return success, se, "seeds"
    k = round(succ[0] * episodes)
    success, se, _ = mean_se([1.0] * k + [0.0] * (episodes - k))
    return success, se, "episodes"


def aggregate(
    row: LearnedRow, family: str, per_seed: list[SeedResult], episodes: int, checkpoints=()
) -> LearnedRecord:
    """One model record from a row's per-seed results (``episodes`` per seed)."""
    success, se, se_over = _success(per_seed, episodes)
    pms = [p.metrics for p in per_seed]
    profile = torch.stack([pm.profile for pm in pms]).mean(dim=0)
    audit = {k: _avg(pm.event_audit[k] for pm in pms) for k in AUDIT_KEYS}
    return LearnedRecord(
        name=row.name,
        family=family,
        key=row.key,
        variant=row.variant,
        data=row.data,
        policy=row.policy,
        E_tot=_avg(pm.E_tot for pm in pms),
        E_tot_se=mean_se([pm.E_tot for pm in pms])[1] if len(pms) > 1 else None,
        DRPE_graded=_avg(pm.DRPE["graded"] for pm in pms),
        DRPE_binary=_avg(pm.DRPE["binary"] for pm in pms),
        VPE=_avg(pm.VPE for pm in pms),
        success=success,
        success_se=se,
        success_se_over=se_over,
        n_seeds=len(per_seed),
        n_episodes=len(per_seed) * episodes,
        per_seed=tuple(p.success for p in per_seed),
        outcomes={o: sum(p.outcomes[o] for p in per_seed) for o in OUTCOMES},
        picked_up_key=_avg(p.picked_up_key for p in per_seed),
        opened_door=_avg(p.opened_door for p in per_seed),
        **audit,
        profile=tuple(float(v) for v in profile.tolist()),
        checkpoints=tuple(checkpoints),
    )


def learned_records(
    ctx: GroupContext, cfg: E3Config, runs: dict
) -> tuple[list[LearnedRecord], LearnedRecord, EpisodeResults]:
    """The Table 3 records, the random-data record, and the first seed's recorded closed
    loop (for Fig. 8)."""
    per_row: dict[str, list[SeedResult]] = {r.key: [] for r in cfg.settings}
    recorded = None
    for seed in ctx.bar(cfg.protocol.seeds, "evaluate"):
        out, results = evaluate_seed(ctx, cfg, runs, seed)
        if recorded is None:
            recorded = results
        for row, res in zip(cfg.settings, out, strict=True):
            per_row[row.key].append(res)

    def record(row: LearnedRow, family: str) -> LearnedRecord:
        checkpoints = [runs[(row.key, s)].checkpoint for s in cfg.protocol.seeds]
        return aggregate(row, family, per_row[row.key], cfg.protocol.episodes, checkpoints)

    records = [record(r, "learned") for r in cfg.rows]
    return records, record(cfg.random_row, "learned_extra"), recorded


def learned_spearman(records: list[LearnedRecord], n_resamples: int) -> dict[str, SpearmanResult]:
    """Spearman ρ of E_tot and DRPE with success over the learned pool (§5.2), if ≥ 3."""
    if len(records) < 3:
        return {}
    s = [r.success for r in records]
    return {
        key: spearman_ci([getattr(r, col) for r in records], s, n_resamples)
        for key, col in [("E_tot", "E_tot"), ("DRPE", "DRPE_graded")]
    }


def balanced_index(records: list[LearnedRecord]) -> int:
    """The uniform-20k record Fig. 8 and the random-data table compare with (else the first)."""
    return next((k for k, r in enumerate(records) if r.key == UNIFORM_20K), 0)


def pick_episode(outcome: torch.Tensor, n: int, random_idx: int, ref_idx: int) -> tuple[int, str]:
    """Episode for Fig. 8 from setting-major ``(M * n,)`` outcomes: the first where the random-
    data model fails and the reference model reaches the goal, else the first where the random-
    data model fails, else episode 0; and why it was chosen."""
    rnd = outcome[random_idx * n : (random_idx + 1) * n]
    ref = outcome[ref_idx * n : (ref_idx + 1) * n]
    for mask, why in [
        ((rnd != GOAL) & (ref == GOAL), "random-data model fails, balanced model succeeds"),
        (rnd != GOAL, "random-data model fails"),
    ]:
        hits = torch.nonzero(mask).flatten()
        if hits.numel():
            return int(hits[0]), why
    return 0, "the random-data model never failed here; first episode shown"


# --------------------------------------------------------------------------- tables


def table3(
    report: GroupReport, cfg: E3Config, rows: list[Table3Row], runs: list, wall: float
) -> None:
    """Table 3 — ours beside the paper's, with the training protocol in the note."""
    cells = []
    for t in rows:
        ref = paper.TABLE_3.get(t.row, {})
        cells.append(
            [
                t.name,
                fmt_se(t.success, t.success_se),
                paper_cell(ref, "success"),
                fmt(t.E_tot),
                paper_cell(ref, "E_tot"),
                fmt(t.DRPE_graded),
                paper_cell(ref, "DRPE"),
                fmt(t.DRPE_binary),
                fmt(t.carrying_at_pickup, 2),
            ]
        )
    p = cfg.protocol
    se_note = (
        f"SE over the {len(p.seeds)} training seeds' success rates"
        if len(p.seeds) > 1
        else "SE over the episodes (one training seed in this profile)"
    )
    epochs = sorted({r.epochs for r in runs})
    first = runs[0]
    report.table(
        "Table 3 — learned world models: does total error or DRPE rank them?",
        [
            "variant",
            "success",
            "success (paper)",
            "E_tot",
            "E_tot (paper)",
            "DRPE graded",
            "DRPE (paper)",
            "DRPE binary",
            "carrying at pickup",
        ],
        cells,
        f"Success: mean over {len(p.seeds)} training seeds x {p.episodes} episodes, depth-"
        f"{p.depth} planner; {se_note}. E_tot and DRPE: means over the seeds' models on "
        f"{p.n_windows} held-out H = {p.horizon} windows (the windows E1 uses). Training: "
        "`python -m train` defaults"
        + (f" with {', '.join(cfg.train_overrides)}" if cfg.train_overrides else "")
        + f" (MLP {first.hidden}, lr {first.lr:g}, batch {first.batch_size}, at most "
        f"{first.max_epochs} epochs, best checkpoint and early stopping on "
        f"{first.monitor} with patience {first.patience}); epochs run "
        f"{epochs[0]}–{epochs[-1]}, {wall:.0f} s of training in all: the runs trained as "
        "members of vectorized groups, each equal to its run alone (same initial weights, "
        "minibatch order, early stopping). Every run: `runs.csv`.",
    )


def ranking_table(report: GroupReport, records: list, corr: dict, n_resamples: int) -> None:
    """The learned pool (§5.2): do E_tot or DRPE rank the seven variants?"""
    ref = paper.TABLE_1["learned"]
    report.table(
        "Learned pool: Spearman ρ with success (§5.2)",
        ["metric", "n", "ρ [95% CI]", "ρ (paper)"],
        [[k, len(records), fmt_rho(corr.get(k)), ref[k].cell()] for k in ("E_tot", "DRPE")],
        f"Bootstrap CIs over the {len(records)} models ({n_resamples} resamples); DRPE "
        "graded. A positive ρ ranks the models backwards.",
    )


def _mean_pickups(runs: dict, key: str, seeds) -> float:
    return np.mean([runs[(key, s)].data_events.get("pickups", np.nan) for s in seeds])


def random_data_table(
    report: GroupReport, rnd: LearnedRecord, balanced: LearnedRecord, runs: dict, seeds
) -> None:
    """The random-data 12k model beside the balanced one (§5.4 (i), appendix E, G)."""
    ref = paper.RANDOM_DATA_12K
    pos = rnd.profile[:4]
    both = (rnd, balanced)
    rows = [
        ["success", *[fmt_se(r.success, r.success_se) for r in both]],
        ["predicted carrying at pickup", *[fmt(r.carrying_at_pickup, 2) for r in both]],
        ["pickup event MSE (carrying)", *[fmt(r.pickup_mse, 2) for r in both]],
        [
            "carrying MSE (H = 10 rollouts)",
            fmt(rnd.profile[CARRYING]),
            f"{fmt(balanced.profile[CARRYING])} (paper {ref['balanced_carrying_mse'].text})",
        ],
        ["position MSE (agent, key)", f"{fmt(min(pos))}–{fmt(max(pos))}", "—"],
        [
            "closed loop: episodes that pick up the key / open the door",
            *[f"{fmt(r.picked_up_key, 2)} / {fmt(r.opened_door, 2)}" for r in both],
        ],
        ["E_tot / DRPE graded", *[f"{fmt(r.E_tot)} / {fmt(r.DRPE_graded)}" for r in both]],
        [
            "training pickups (per dataset, mean)",
            *[fmt(_mean_pickups(runs, r.key, seeds), 1) for r in both],
        ],
    ]
    papers = [
        ref["success"].text,
        ref["carrying_at_pickup"].text,
        ref["pickup_event_mse"].text,
        ref["carrying_mse"].text,
        f"{ref['position_mse_low'].text}–{ref['position_mse_high'].text}",
        "—",
        "—",
        "rare",
    ]
    report.table(
        "The random-data 12k model fails at the pickup event (§5.4 (i), appendix E, G)",
        ["quantity", "random-data 12k", "paper", f"balanced {balanced.name}"],
        [[row[0], row[1], p, row[2]] for row, p in zip(rows, papers, strict=True)],
        "Event audit: one step from the true pre-pickup state of every pickup in the held-out "
        "windows, teacher-forced (truth: carrying = 1). The door opens only if the predicted "
        "carrying exceeds 0.5 when the planner reads it.",
    )


# --------------------------------------------------------------------------- verdicts


def _protocol_verdict(report: GroupReport, cfg: E3Config, records: list) -> None:
    n_seeds = len(LEARNED.seeds)
    full = [r.key for r in records] == [r.key for r in ROWS] and len(cfg.protocol.seeds) == n_seeds
    report.sanity(
        f"Table 3 has all {len(ROWS)} rows with SE over {n_seeds} training seeds (paper Table 3)",
        full or cfg.protocol != LEARNED,
        "the protocol trains every row on every seed",
        f"{len(records)} rows, {len(cfg.protocol.seeds)} training seeds x "
        f"{cfg.protocol.episodes} episodes"
        + (
            ""
            if full
            else f" (a reduced profile; the full profile has {len(ROWS)} rows x {n_seeds} seeds)"
        ),
    )


def _random_data_verdicts(report: GroupReport, rnd: LearnedRecord) -> None:
    c, s = rnd.carrying_at_pickup, rnd.success
    ref = paper.RANDOM_DATA_12K
    report.verdict(
        "The random-data 12k model fails at the pickup event: its predicted carrying at a true "
        "pickup stays below the 0.5 flag threshold (§5.4 (i))",
        None if math.isnan(c) else c < 0.5,
        f"predicted carrying at pickup {fmt(c, 2)} (paper {ref['carrying_at_pickup'].text}), "
        f"pickup MSE {fmt(rnd.pickup_mse, 2)} (paper {ref['pickup_event_mse'].text}); "
        "criterion carrying < 0.5",
    )
    report.verdict(
        "The random-data 12k model never reaches the goal (§5.4 (i), appendix E: 0%)",
        s <= MAX_RANDOM_SUCCESS,
        f"success {fmt_se(s, rnd.success_se)} (paper {ref['success'].text}; criterion ≤ "
        f"{MAX_RANDOM_SUCCESS}); in the true episodes it picked up the key in "
        f"{100 * rnd.picked_up_key:.0f}% and opened the door in "
        f"{100 * rnd.opened_door:.0f}%",
    )


def _ranking_verdict(report: GroupReport, records: list, corr: dict) -> None:
    if not corr:
        return
    re, rd = corr["E_tot"].rho, corr["DRPE"].rho
    ok = None if np.isnan(re) or np.isnan(rd) else re > MAX_RANKING_RHO and rd > MAX_RANKING_RHO
    report.verdict(
        "Within the learned pool neither E_tot nor DRPE ranks the variants (§5.2)",
        ok,
        f"n = {len(records)}: ρ(E_tot) {fmt(re, 2)}, ρ(DRPE) {fmt(rd, 2)} (paper "
        f"{paper.TABLE_1['learned']['E_tot'].text} for both; criterion both > "
        f"{MAX_RANKING_RHO})",
    )


def _reweighting_verdicts(report: GroupReport, records: list) -> None:
    by = {r.key: r for r in records}
    worse = ("anti_weighted_20k", "rel_heavy_20k", "rel_only_20k")
    if UNIFORM_20K in by and all(k in by for k in worse):
        u = by[UNIFORM_20K].success
        report.verdict(
            "Dimension-level loss re-weighting does not help: anti-weighted, rel-heavy and "
            "rel-only plan worse than uniform (§5.4 (iii))",
            all(by[k].success < u for k in worse),
            "success "
            + ", ".join(f"{by[k].name} {fmt(by[k].success, 2)}" for k in worse)
            + f" vs uniform {fmt(u, 2)} (paper 0.40, 0.35, 0.04 vs 0.75)",
        )
    else:
        report.verdict(
            "Dimension-level loss re-weighting does not help (§5.4 (iii))",
            None,
            "not every variant is in this profile",
        )
    claim = "Event-weighted training gives the best learned model (§5.4 (iii))"
    if "event_weighted_20k" not in by:
        report.verdict(claim, None, "the event-weighted variant is not in this profile")
        return
    ev = by["event_weighted_20k"]
    best = max(records, key=lambda r: r.success)
    report.verdict(
        claim,
        ev.success + (ev.success_se or 0.0) >= best.success,
        f"event-weighted {fmt_se(ev.success, ev.success_se)}, best {best.name} "
        f"{fmt(best.success, 2)} (paper 0.79 vs uniform 0.75; criterion within one SE "
        "of the best)",
    )


def verdicts(report: GroupReport, cfg: E3Config, records: list, rnd: LearnedRecord, corr) -> None:
    """The six effects of Table 3, §5.2 and §5.4."""
    _protocol_verdict(report, cfg, records)
    _random_data_verdicts(report, rnd)
    _ranking_verdict(report, records, corr)
    _reweighting_verdicts(report, records)


# --------------------------------------------------------------------------- run


def save_figures(
    ctx: GroupContext,
    cfg: E3Config,
    records: list[LearnedRecord],
    rnd: LearnedRecord,
    recorded: EpisodeResults,
) -> tuple[int, str]:
    """Fig. 8 (the episode it shows is picked by ``pick_episode``; returned with why) and the
    success bars."""
    n, ref_idx = cfg.protocol.episodes, balanced_index(records)
    episode, why = pick_episode(recorded.outcome.cpu(), n, len(records), ref_idx)
    paths = [(len(records), rnd.name), (ref_idx, records[ref_idx].name)]
    carrying = {r.name: r.carrying_at_pickup for r in [*records, rnd]}
    fig8 = failure_figure(recorded, n, episode, why, paths, carrying)
    ctx.save_figure(fig8, "fig8_random_data_failure.png")
    ctx.save_figure(learned_success_figure(records), "fig_table3_success.png")
    return episode, why


def run(ctx: GroupContext) -> GroupReport:
    """E3 (see the module docstring)."""
    cfg: E3Config = ctx.config
    runs, train_wall = train_all(ctx, cfg)
    records, rnd, recorded = learned_records(ctx, cfg, runs)
    corr = learned_spearman(records, cfg.n_resamples)
    t3 = [Table3Row.of(r) for r in records]
    ref_idx = balanced_index(records)

    write_models(ctx, [*records, rnd])
    ctx.write_csv("runs.csv", list(runs.values()))
    ctx.write_csv("table3.csv", t3)
    episode, why = save_figures(ctx, cfg, records, rnd, recorded)

    report = GroupReport("E3 — learned world models (§5.4, Table 3, appendix E)")
    table3(report, cfg, t3, list(runs.values()), train_wall)
    ranking_table(report, records, corr, cfg.n_resamples)
    random_data_table(report, rnd, records[ref_idx], runs, cfg.protocol.seeds)
    report.figure(
        "fig8_random_data_failure.png",
        "The random-data model's closed-loop path beside the balanced model's, and the "
        "predicted carrying at pickup of every model (Fig. 8)",
    )
    report.figure("fig_table3_success.png", "Success of the learned models beside the paper's")
    verdicts(report, cfg, records, rnd, corr)
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "models": records,
            "random_data": rnd,
            "runs": list(runs.values()),
            "train_wall_seconds": train_wall,
            "spearman": corr,
            "figure8_episode": {
                "index": episode,
                "why": why,
                "closed_loop_seed": cfg.protocol.seeds[0],
            },
            "paper": {
                "table3": paper.TABLE_3,
                "random_data_12k": paper.RANDOM_DATA_12K,
                "learned": paper.TABLE_1["learned"],
            },
        },
    )
    return report
