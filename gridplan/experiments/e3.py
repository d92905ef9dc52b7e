"""E3: learned world models (paper §5.4, Table 3, §5.2 "learned pool", appendix E, G, Fig. 8).

Seven MLP world models of Table 3 — ``uniform`` / ``event_weighted`` / ``anti_weighted`` /
``rel_heavy`` / ``rel_only`` on 20k balanced transitions, ``uniform`` on 12k and 4k — plus the
model trained on 12k uniform-random transitions (``data.policy=random``), each trained once per
training seed (``gridplan.experiments.learned_runs``; the full profile trains with
``python -m train``'s defaults). Protocol (``gridplan.evaluation.spec.LEARNED``):

- The models of training seed ``k`` (all rows at once, one setting each) play the
  ``episodes`` start states of closed-loop seed ``k`` with the depth-2 planner: the rows share
  start states within a seed (common random numbers), the seeds differ.
- Success is the mean over the seeds' success rates; **its SE is taken over the per-seed
  success rates** (n = number of training seeds), so it contains training-seed variance as
  well as episode noise. ``E_tot``, DRPE (graded, binary), the per-dimension profile and the
  event audit are means over the seeds' models, each scored by
  ``gridplan.metrics.prediction.prediction_metrics`` on the held-out windows shared with E1 (so e2
  can pool these models with the controlled grid).
- Every model plays its episodes twice, under both tie rules of the planner
  (``gridplan.planning.planner.TIES``: ``first``, the default reading's, ``docs/PREREGISTERED.md``
  Rule 1, and ``random``), on the same start states and noise streams; Table 3, the ranking,
  the random-data table and the verdicts are reported under each, beside the paper's, with the
  Spearman ρ of our success against the paper's over the rows. ``models.json`` (which e2 pools)
  and the figures hold the ``first`` rule's.
- §5.4 (ii) tested (``gridplan.experiments.bias_noise``): how often the episodes cycle, and each
  learned model beside a noise model of the controlled family at the same E_tot (its "noise
  twin"); the claims (``CLAIMS``) were written before any run.

Writes ``models.json``/``models.csv`` (the 7 Table 3 models, family ``"learned"``, which e2
pools; the random-data model, family ``"learned_extra"``), ``runs.csv`` (every training run:
epochs, seconds, best validation metrics, checkpoint relative to the group folder),
``table3.csv`` (``table3_ties-random.csv`` under the other rule), ``results.json`` (every rule's
records under ``by_ties``, the twins under ``noise_twins``), ``fig_table3_success.png`` and
``fig8_random_data_failure.png`` (the random-data model's closed-loop path beside the
uniform-20k model's from one start state, and the predicted ``carrying`` at pickup).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core.constants import CARRYING, DOOR_OPEN
from gridplan.core.readings import PROJECT
from gridplan.core.tasks import TASK_A
from gridplan.evaluation.spec import LEARNED
from gridplan.experiments import bias_noise, paper
from gridplan.experiments.bias_noise import Cycling, add_cycling, setting_cycling
from gridplan.experiments.figures import failure_figure, learned_success_figure
from gridplan.experiments.learned_runs import ModelStack, cpu_threads, train_runs
from gridplan.experiments.measure import closed_loop, standard_windows, tie_rules
from gridplan.experiments.records import LearnedRecord, Record, TrainingRun, write_models
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import ROWS, UNIFORM_20K, E3Config, LearnedRow
from gridplan.experiments.tables import (
    GroupReport,
    RuleReport,
    fmt,
    fmt_rho,
    fmt_se,
    paper_cell,
)
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
#: The tie rule of E3's main records (``models.json``, which e2 pools), figures and first
#: verdicts: the default reading's (``docs/PREREGISTERED.md``, Rule 1). Every model is also
#: played under the other rule (``RULES``), on the same start states, and reported beside it.
MAIN_TIES = PROJECT.ties
RULES = tie_rules(MAIN_TIES)
#: The claims of §5.4 (i)-(ii) tested by ``gridplan.experiments.bias_noise``, written before
#: any run; each verdict's criterion is in ``section54_verdicts``.
CLAIMS = {
    "cycles": "Without noise injection the deterministic closed-loop policy cycles: under "
    "ties=first most failed episodes of the Table 3 models revisit a (relevant state, action) "
    "pair (§5.4 (ii))",
    "loops": "The random-data model's planner loops (§5.4 (i)): under ties=first most of its "
    "failed episodes revisit a (relevant state, action) pair",
    "ties_cycle": "Deterministic ties make the random-data model cycle: it cycles in more "
    "episodes under ties=first than under ties=random",
    "bias_random": "Learned models fail where noise models succeed at equal MSE: the "
    "random-data model's noise twin at equal E_tot succeeds more often than the model "
    "(§5.4 (i), (ii))",
    "bias_rows": "Systematic bias is worse than noise: at equal E_tot most Table 3 models plan "
    "worse than their noise twins (§5.4 (ii))",
}


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
    """One row of Table 3 under the tie rule ``ties`` (``table3.csv``: ``MAIN_TIES``;
    ``table3_ties-<rule>.csv``: the other rule)."""

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
    ties: str

    @classmethod
    def of(cls, rec: LearnedRecord, ties: str = MAIN_TIES) -> Table3Row:
        ref = paper.TABLE_3.get(rec.key, {})
        return cls(
            ties=ties,
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
) -> dict[str, tuple[list[SeedResult], EpisodeResults]]:
    """Prediction metrics and closed-loop success of every row's model of one seed
    (``cfg.settings`` order) under each tie rule of ``RULES`` (the metrics are measured once;
    the closed loops play the same start states), with the raw setting-major
    ``EpisodeResults`` and their trajectories; rule -> ``(results per row, EpisodeResults)``."""
    models = [
        load_world_model(ctx.out / runs[(r.key, seed)].checkpoint, ctx.device) for r in cfg.settings
    ]
    stack = ModelStack(models)
    windows = standard_windows(ctx, cfg.protocol)
    out = {}
    with cpu_threads(ctx):
        metrics = prediction_metrics(stack, windows, TASK_A)
        for rule in RULES:
            loop, results = closed_loop(
                ctx, stack, TASK_A, cfg.protocol.replace(seeds=(seed,)), record=True, ties=rule
            )
            marks = milestones(results.trajectory, len(models))
            rows = [
                SeedResult(pm, summary.success, summary.outcomes, *mark)
                for pm, summary, mark in zip(metrics, loop, marks, strict=True)
            ]
            out[rule] = (rows, results)
    return out


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


@dataclass(frozen=True)
class RuleResults:
    """E3's learned models under one tie rule.

    Attributes:
        records: the Table 3 records.
        random: the random-data record.
        recorded: the first seed's recorded closed loop (Fig. 8).
        cycling: row key -> ``Cycling`` of its episodes over every seed
            (``gridplan.experiments.bias_noise``).
    """

    records: list[LearnedRecord]
    random: LearnedRecord
    recorded: EpisodeResults
    cycling: dict[str, Cycling]


def learned_records(ctx: GroupContext, cfg: E3Config, runs: dict) -> dict[str, RuleResults]:
    """Per tie rule of ``RULES``: the Table 3 records, the random-data record, the first
    seed's recorded closed loop (for Fig. 8) and each row's cycling."""
    per_row = {rule: {r.key: [] for r in cfg.settings} for rule in RULES}
    recorded: dict[str, EpisodeResults] = {}
    cycling: dict[str, dict[str, Cycling | None]] = {
        rule: dict.fromkeys((r.key for r in cfg.settings), None) for rule in RULES
    }
    for seed in ctx.bar(cfg.protocol.seeds, "evaluate"):
        for rule, (out, results) in evaluate_seed(ctx, cfg, runs, seed).items():
            recorded.setdefault(rule, results)
            parts = setting_cycling(results, len(cfg.settings), TASK_A)
            for row, res, part in zip(cfg.settings, out, parts, strict=True):
                per_row[rule][row.key].append(res)
                cycling[rule][row.key] = add_cycling(cycling[rule][row.key], part)

    def record(rule: str, row: LearnedRow, family: str) -> LearnedRecord:
        checkpoints = [runs[(row.key, s)].checkpoint for s in cfg.protocol.seeds]
        return aggregate(row, family, per_row[rule][row.key], cfg.protocol.episodes, checkpoints)

    return {
        rule: RuleResults(
            records=[record(rule, r, "learned") for r in cfg.rows],
            random=record(rule, cfg.random_row, "learned_extra"),
            recorded=recorded[rule],
            cycling=cycling[rule],
        )
        for rule in RULES
    }


def learned_spearman(records: list[LearnedRecord], n_resamples: int) -> dict[str, SpearmanResult]:
    """Spearman ρ of E_tot and DRPE with success over the learned pool (§5.2), if ≥ 3."""
    if len(records) < 3:
        return {}
    s = [r.success for r in records]
    return {
        key: spearman_ci([getattr(r, col) for r in records], s, n_resamples)
        for key, col in [("E_tot", "E_tot"), ("DRPE", "DRPE_graded")]
    }


def paper_ordering(records: list[LearnedRecord], n_resamples: int) -> SpearmanResult | None:
    """Spearman ρ of our success against the paper's Table 3 success over the rows that have a
    paper value (None below 3 rows), with its bootstrap CI over the rows."""
    pairs = [
        (r.success, paper.TABLE_3[r.key]["success"].value)
        for r in records
        if r.key in paper.TABLE_3
    ]
    if len(pairs) < 3:
        return None
    return spearman_ci([a for a, _ in pairs], [b for _, b in pairs], n_resamples)


@dataclass(frozen=True)
class TwinResults:
    """The learned models' noise twins at equal E_tot (``gridplan.experiments.bias_noise``),
    in the order Table 3 rows, then the random-data model.

    Attributes:
        twins: the calibrated twins (each with its E_tot on the windows, single-setting).
        E_tot: each twin's E_tot as the multi-setting model of every twin measures it on the
            same windows (other noise draws: the check of the match).
        success: rule -> each twin's success (mean over the seeds' success rates).
        success_se: rule -> its SE over the seeds.
        cycling: rule -> each twin's ``Cycling``.
    """

    twins: list[bias_noise.Twin]
    E_tot: list[float]
    success: dict[str, list[float]]
    success_se: dict[str, list[float]]
    cycling: dict[str, list[Cycling]]


def noise_twin_results(
    ctx: GroupContext, cfg: E3Config, learned: list[LearnedRecord]
) -> TwinResults:
    """Calibrate a noise twin for each learned record (its mean profile and E_tot over the
    seeds' models) and play the twins under E3's protocol, on every seed's start states,
    under each tie rule of ``RULES``."""
    windows = standard_windows(ctx, cfg.protocol)
    with cpu_threads(ctx):
        twins = bias_noise.noise_twins(
            [r.name for r in learned],
            [torch.tensor(r.profile, dtype=torch.float64) for r in learned],
            [r.E_tot for r in learned],
            windows,
            TASK_A,
        )
        model = bias_noise.twin_model(twins, TASK_A)
        e_tot = [pm.E_tot for pm in prediction_metrics(model, windows, TASK_A)]
        success, se, cycling = {}, {}, {}
        for rule in RULES:
            means, ses, results = bias_noise.twin_success(ctx, model, cfg.protocol, rule, TASK_A)
            success[rule], se[rule] = means, ses
            cycling[rule] = setting_cycling(results, len(twins), TASK_A)
    return TwinResults(twins, e_tot, success, se, cycling)


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
    report: GroupReport,
    cfg: E3Config,
    rows: list[Table3Row],
    runs: list,
    wall: float,
    ties: str = MAIN_TIES,
    ordering: SpearmanResult | None = None,
) -> None:
    """Table 3 under tie rule ``ties`` — ours beside the paper's, with the training protocol
    and the Spearman ρ of our success against the paper's over the rows in the note."""
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
        f"Table 3 — learned world models (ties={ties}): does total error or DRPE rank them?",
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
        f"{p.depth} planner, tied best first actions broken by `{ties}`; {se_note}. "
        f"Spearman ρ of our success against the paper's over these {len(rows)} rows: "
        f"{fmt_rho(ordering)}. E_tot and DRPE: means over the seeds' models on "
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


def ranking_table(
    report: GroupReport, records: list, corr: dict, n_resamples: int, ties: str = MAIN_TIES
) -> None:
    """The learned pool (§5.2): do E_tot or DRPE rank the seven variants?"""
    ref = paper.TABLE_1["learned"]
    report.table(
        f"Learned pool: Spearman ρ with success (§5.2, ties={ties})",
        ["metric", "n", "ρ [95% CI]", "ρ (paper)"],
        [[k, len(records), fmt_rho(corr.get(k)), ref[k].cell()] for k in ("E_tot", "DRPE")],
        f"Bootstrap CIs over the {len(records)} models ({n_resamples} resamples); DRPE "
        "graded. A positive ρ ranks the models backwards.",
    )


def _mean_pickups(runs: dict, key: str, seeds) -> float:
    return np.mean([runs[(key, s)].data_events.get("pickups", np.nan) for s in seeds])


def random_data_table(
    report: GroupReport,
    rnd: LearnedRecord,
    balanced: LearnedRecord,
    runs: dict,
    seeds,
    ties: str = MAIN_TIES,
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
        f"The random-data 12k model fails at the pickup event (§5.4 (i), appendix E, G; "
        f"ties={ties})",
        ["quantity", "random-data 12k", "paper", f"balanced {balanced.name}"],
        [[row[0], row[1], p, row[2]] for row, p in zip(rows, papers, strict=True)],
        "Event audit: one step from the true pre-pickup state of every pickup in the held-out "
        "windows, teacher-forced (truth: carrying = 1). The door opens only if the predicted "
        "carrying exceeds 0.5 when the planner reads it.",
    )


# --------------------------------------------------------------------------- §5.4 (ii)


def ordering_table(report: GroupReport, by_rule: dict[str, RuleResults], ordering: dict) -> None:
    """Table 3's success ordering, ours against the paper's, and the random-data row, under
    each tie rule."""
    ref = paper.RANDOM_DATA_12K
    rows = []
    for rule in RULES:
        r = by_rule[rule]
        u = next((x for x in r.records if x.key == UNIFORM_20K), None)
        rows.append(
            [
                f"`{rule}`",
                len(r.records),
                fmt_rho(ordering[rule]),
                "—" if u is None else fmt_se(u.success, u.success_se),
                fmt_se(r.random.success, r.random.success_se),
                ref["success"].text,
            ]
        )
    report.table(
        "Table 3's ordering under each tie rule: Spearman ρ of our success against the paper's",
        [
            "ties",
            "rows",
            "ρ(ours, paper) [95% CI]",
            "uniform-20k success (paper 0.75)",
            "random-data 12k success",
            "random-data (paper)",
        ],
        rows,
        "ρ over the Table 3 rows of this profile (bootstrap CI over the rows). The same trained "
        "models play the same start states under both rules; only exact ties between first "
        "actions decide differently (`gridplan.planning.planner`).",
    )


def _cycle_cells(c: Cycling) -> list[str]:
    failed = f"{c.failed_cycling} / {c.failed}"
    if c.failed:
        failed += f" ({fmt(c.failed_cycling_rate, 2)})"
    return [failed, str(c.failed_short), fmt(c.cycling_rate, 2), str(c.timeouts)]


def cycling_table(
    report: GroupReport, by_rule: dict[str, RuleResults], cfg: E3Config, twins: TwinResults
) -> None:
    """Cycling of every learned model and of its noise twin under each tie rule (§5.4 (ii))."""
    rows = []
    for i, row in enumerate(cfg.settings):
        for rule in RULES:
            r = by_rule[rule]
            rec = [*r.records, r.random][i]
            rows.append(
                [
                    rec.name,
                    f"`{rule}`",
                    fmt_se(rec.success, rec.success_se),
                    *_cycle_cells(r.cycling[row.key]),
                    fmt(twins.success[rule][i], 2),
                    _cycle_cells(twins.cycling[rule][i])[0],
                ]
            )
    report.table(
        "Does the deterministic closed-loop policy cycle? (§5.4 (ii))",
        [
            "model",
            "ties",
            "success",
            "failed episodes that cycle",
            f"of them period ≤ {bias_noise.SHORT_PERIOD}",
            "all episodes: cycling rate",
            "timeouts",
            "noise twin success",
            "twin: failed that cycle",
        ],
        rows,
        "An episode cycles when its true trajectory takes the same action twice in the same "
        "task-relevant discrete state (agent cell, key cell, carrying, door); the period is the "
        "fewest steps between two such visits (`gridplan.experiments.bias_noise`). Counts over "
        f"{len(cfg.protocol.seeds)} training seeds x {cfg.protocol.episodes} episodes. The "
        "noise twin: the controlled family's model at the learned model's E_tot (next table).",
    )


def bias_table(report: GroupReport, by_rule: dict[str, RuleResults], twins: TwinResults) -> None:
    """Bias vs noise at equal error: each learned model beside its noise twin (§5.4 (ii))."""
    learned = {rule: [*by_rule[rule].records, by_rule[rule].random] for rule in RULES}
    rows = []
    for i, rec in enumerate(learned[MAIN_TIES]):
        t = twins.twins[i]
        cells = [
            rec.name,
            fmt(rec.E_tot),
            f"{fmt(t.E_tot)} ({fmt(twins.E_tot[i])})",
            fmt(t.scale, 3),
            "yes" if t.matched else "no",
        ]
        for rule in RULES:
            ours = learned[rule][i]
            cells.append(f"{fmt(ours.success, 2)} / {fmt(twins.success[rule][i], 2)}")
        rows.append(cells)
    report.table(
        "Bias vs noise at equal E_tot: learned models beside their noise twins (§5.4 (ii))",
        [
            "model",
            "E_tot",
            "twin E_tot (redrawn)",
            "twin scale c",
            "matched",
            *[f"success ties={rule}: learned / twin" for rule in RULES],
        ],
        rows,
        "Twin: per-dimension noise std c·sqrt(excess), excess the learned model's per-dimension "
        "error above the expected-distractor oracle's, c found by bisection so that the twin's "
        "E_tot equals the learned model's (in brackets: remeasured with other noise draws; "
        "`gridplan.experiments.bias_noise`); the "
        "project reading otherwise, independent leaves. Twins play every training seed's "
        "start states, the learned models' episodes.",
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


def verdicts(
    report: GroupReport,
    cfg: E3Config,
    records: list,
    rnd: LearnedRecord,
    corr,
    ties: str = MAIN_TIES,
) -> None:
    """The six effects of Table 3, §5.2 and §5.4 under tie rule ``ties`` (the protocol check
    once, under ``MAIN_TIES``; the other rule's claims carry ``[ties=<rule>]``)."""
    if ties == MAIN_TIES:
        _protocol_verdict(report, cfg, records)
        target = report
    else:
        target = RuleReport(report, ties)
    _random_data_verdicts(target, rnd)
    _ranking_verdict(target, records, corr)
    _reweighting_verdicts(target, records)


def _se_diff(p: float, q: float, n: int, m: int) -> float:
    """SE of the difference of two independent proportions ``p`` of ``n`` and ``q`` of ``m``."""
    return math.sqrt(p * (1 - p) / n + q * (1 - q) / m)


def section54_verdicts(
    report: GroupReport, by_rule: dict[str, RuleResults], cfg: E3Config, twins: TwinResults
) -> None:
    """The claims ``CLAIMS`` of §5.4 (i)-(ii), each with the criterion stated in its detail."""
    main = by_rule[MAIN_TIES]
    pooled = None
    for row in cfg.rows:
        pooled = add_cycling(pooled, main.cycling[row.key])
    report.verdict(
        CLAIMS["cycles"],
        None if pooled is None or not pooled.failed else pooled.failed_cycling_rate > 0.5,
        "pooled over the Table 3 models: "
        + (
            "no model"
            if pooled is None
            else f"{pooled.failed_cycling} of {pooled.failed} "
            f"failed episodes cycle ({fmt(pooled.failed_cycling_rate, 2)})"
        )
        + "; criterion more than half",
    )
    rc = {rule: by_rule[rule].cycling[cfg.random_row.key] for rule in RULES}
    first = rc[MAIN_TIES]
    report.verdict(
        CLAIMS["loops"],
        None if not first.failed else first.failed_cycling_rate > 0.5,
        f"{first.failed_cycling} of {first.failed} failed episodes cycle "
        f"({fmt(first.failed_cycling_rate, 2)}), {first.failed_short} with period ≤ "
        f"{bias_noise.SHORT_PERIOD}; criterion more than half",
    )
    other = next(r for r in RULES if r != MAIN_TIES)
    p, q = rc[MAIN_TIES].cycling_rate, rc[other].cycling_rate
    se = _se_diff(p, q, rc[MAIN_TIES].episodes, rc[other].episodes)
    report.verdict(
        CLAIMS["ties_cycle"],
        p - q > 2 * se if se > 0 else p > q,
        f"episodes that cycle: {fmt(p, 2)} under ties={MAIN_TIES}, {fmt(q, 2)} under "
        f"ties={other} (difference {fmt(p - q, 2)}, SE {fmt(se, 2)}); criterion difference "
        "beyond 2 SE",
    )
    k = len(cfg.rows)
    for rule in RULES:
        r = by_rule[rule]
        twin, t = twins.twins[k], twins.success[rule][k]
        d = t - r.random.success
        se = math.hypot(
            *(0.0 if math.isnan(x) else x for x in (r.random.success_se, twins.success_se[rule][k]))
        )
        report.verdict(
            f"{CLAIMS['bias_random']} [ties={rule}]",
            (d > 2 * se if se > 0 else d > 0) if twin.matched else None,
            f"random-data model {fmt(r.random.success, 2)}, its twin {fmt(t, 2)} at E_tot "
            f"{fmt(twin.E_tot)} (model {fmt(r.random.E_tot)}"
            + ("" if twin.matched else "; NOT matched: outside the twin grid")
            + f"); difference {fmt(d, 2)}, SE {fmt(se, 2)}; criterion beyond 2 SE",
        )
        matched = [i for i in range(k) if twins.twins[i].matched]
        worse = [i for i in matched if r.records[i].success < twins.success[rule][i]]
        report.verdict(
            f"{CLAIMS['bias_rows']} [ties={rule}]",
            len(worse) > len(matched) / 2 if matched else None,
            f"{len(worse)} of {len(matched)} matched Table 3 models plan worse than their twins"
            + (
                " ("
                + ", ".join(
                    f"{r.records[i].name} {fmt(r.records[i].success, 2)} vs "
                    f"{fmt(twins.success[rule][i], 2)}"
                    for i in matched
                )
                + ")"
                if matched
                else ""
            )
            + "; criterion more than half",
        )


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
    by_rule = learned_records(ctx, cfg, runs)
    main = by_rule[MAIN_TIES]
    records, rnd, recorded = main.records, main.random, main.recorded
    corr = {rule: learned_spearman(by_rule[rule].records, cfg.n_resamples) for rule in RULES}
    ordering = {rule: paper_ordering(by_rule[rule].records, cfg.n_resamples) for rule in RULES}
    twins = noise_twin_results(ctx, cfg, [*records, rnd])
    t3 = {rule: [Table3Row.of(r, rule) for r in by_rule[rule].records] for rule in RULES}
    ref_idx = balanced_index(records)

    write_models(ctx, [*records, rnd])
    ctx.write_csv("runs.csv", list(runs.values()))
    ctx.write_csv("table3.csv", t3[MAIN_TIES])
    for rule in RULES[1:]:
        ctx.write_csv(f"table3_ties-{rule}.csv", t3[rule])
    episode, why = save_figures(ctx, cfg, records, rnd, recorded)

    report = GroupReport("E3 — learned world models (§5.4, Table 3, appendix E)")
    for rule in RULES:
        table3(report, cfg, t3[rule], list(runs.values()), train_wall, rule, ordering[rule])
    ordering_table(report, by_rule, ordering)
    for rule in RULES:
        ranking_table(report, by_rule[rule].records, corr[rule], cfg.n_resamples, rule)
    for rule in RULES:
        r = by_rule[rule]
        random_data_table(report, r.random, r.records[ref_idx], runs, cfg.protocol.seeds, rule)
    cycling_table(report, by_rule, cfg, twins)
    bias_table(report, by_rule, twins)
    report.figure(
        "fig8_random_data_failure.png",
        "The random-data model's closed-loop path beside the balanced model's, and the "
        f"predicted carrying at pickup of every model (Fig. 8; ties={MAIN_TIES})",
    )
    report.figure(
        "fig_table3_success.png",
        f"Success of the learned models beside the paper's (ties={MAIN_TIES})",
    )
    for rule in RULES:
        r = by_rule[rule]
        verdicts(report, cfg, r.records, r.random, corr[rule], rule)
    section54_verdicts(report, by_rule, cfg, twins)
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "ties": MAIN_TIES,
            "models": records,
            "random_data": rnd,
            "runs": list(runs.values()),
            "train_wall_seconds": train_wall,
            "spearman": corr[MAIN_TIES],
            "spearman_vs_paper": ordering[MAIN_TIES],
            "by_ties": {
                rule: {
                    "models": by_rule[rule].records,
                    "random_data": by_rule[rule].random,
                    "spearman": corr[rule],
                    "spearman_vs_paper": ordering[rule],
                    "cycling": {k: c.to_dict() for k, c in by_rule[rule].cycling.items()},
                    "twin_success": twins.success[rule],
                    "twin_success_se": twins.success_se[rule],
                    "twin_cycling": [c.to_dict() for c in twins.cycling[rule]],
                }
                for rule in RULES
            },
            "noise_twins": [
                {**dataclasses.asdict(t), "E_tot_all_twins": e}
                for t, e in zip(twins.twins, twins.E_tot, strict=True)
            ],
            "claims": CLAIMS,
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
