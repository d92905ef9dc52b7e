"""E7: which metric ranks learned world models? A learned-model zoo and the metric
meta-evaluation (paper §4.3 Corollary, §5.2 "learned pool", §5.4).

Within the paper's seven learned models neither ``E_tot`` nor DRPE ranks the models (Spearman
+0.43 for both, §5.2); DRPE misses event-level failures and rollout drift (§5.4), and the
Corollary of §4.3 names the distribution of errors over decision-relevant events as the
target of better metrics. E7 measures which metric ranks a harder learned pool:

- **The zoo** (``configs/zoo/<name>.yaml``, ``settings.load_zoo``): learned configurations spanning
  data budget and behaviour policy (``random``, ``balanced``, ``expert``), network size,
  training length, the loss variants of Table 3, a multi-step rollout loss and an ensemble;
  each trained once per training seed, all as vectorized groups
  (``gridplan.training.runs.train_all`` through ``learned_runs.run_config``). A second zoo
  (``replication``: the same configurations, independent training and closed-loop seeds) is
  evaluated once, at the end, the same way.
- **Every metric of every model**: the paper's metrics on E1's held-out windows
  (``gridplan.metrics.prediction.prediction_metrics``: ``E_tot``, DRPE graded and binary, the
  12-dimension profile, the event audit, VPE), and the decision-centric ladder
  (``gridplan.evaluate`` at depth 2: IPE, action-effect consistency, decision agreement and
  regret, the WorldModelGym probe's regret and reward error, reward and value error, success
  calibration (Brier), policy ranking ρ / PRA / MMRV, the exploitability gap, and for
  ensembles the uncertainty's Spearman and AURC). Closed-loop success at depth 2 (the
  paper's learned protocol; the ladder's L7) and depth 4 (one batched closed loop).
- **The meta-evaluation** (``meta_table``): Spearman ρ of each metric with depth-2 success
  over the zoo's models, with two seeded bootstrap 95% CIs (``rank_metric``: resampling
  models; resampling training seeds within each configuration), the replication zoo's ρ, the
  zoo's ρ with depth-4 success, and, for the metrics E1 records, ρ over E1's controlled grid
  (read from e1's result files, or computed when e1 has not finished) and over the pool of
  grid and zoo, both with depth-4 success (the grid's planner).

Nothing is tuned toward a target ρ: the zoo is fixed in its config files, the table is what
it gives. Writes ``zoo.csv`` (every model of both zoos, every metric), ``configurations.csv``
(means over seeds), ``meta.csv`` (the sorted table), ``runs.csv``, ``results.json``,
``fig_zoo_scatter.png`` (one panel per metric) and ``fig_pool_scatter.png``.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gridplan import evaluate as ladder_evaluate
from gridplan.core.tasks import TASK_A
from gridplan.core.world import DEFAULT as PAPER_WORLD
from gridplan.evaluation.ladder import check_levels
from gridplan.experiments import paper
from gridplan.experiments.figures import pool_scatter_figure, zoo_scatter_figure
from gridplan.experiments.learned_runs import (
    RUNS,
    DeterministicStack,
    ModelStack,
    cpu_threads,
    group_relative,
    plans_deterministically,
    quiet_lightning,
    run_config,
)
from gridplan.experiments.measure import closed_loop, standard_windows
from gridplan.experiments.pools import controlled_grid
from gridplan.experiments.records import Record
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E7Config, Zoo
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho, fmt_se
from gridplan.metrics.bootstrap import percentile_interval, spearman_of_counts
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import SpearmanResult, mean_se, spearman_ci
from gridplan.models.learned import load_world_model
from gridplan.util.threads import available_cpus

#: The zoo "spans" success when its configurations' depth-2 success reaches at most this ...
SPAN_LOW = 0.1
#: ... and at least this (otherwise the pool cannot rank anything).
SPAN_HIGH = 0.9
#: As in e3: a metric does not "rank" the learned models while its ρ stays above this
#: (paper §5.2: +0.43 for E_tot and DRPE).
MAX_RANKING_RHO = -0.5
#: A metric defined on fewer models (the uncertainty scores: ensembles only) is listed but
#: not ranked: a Spearman ρ over a handful of points says nothing.
MIN_MODELS = 10
#: The paper's learned-pool ρ, printed beside ours (§5.2).
PAPER_RHO = {
    "E_tot": paper.TABLE_1["learned"]["E_tot"],
    "DRPE_graded": paper.TABLE_1["learned"]["DRPE"],
}


# --------------------------------------------------------------------------- metrics


#: ``(key, label, read)``: every metric; ``read(pm, ladder)`` takes a model's
#: ``PredictionMetrics.to_dict()`` and its ladder ``Report.ladder`` (None where undefined).
def _ladder(level: str, *path: str) -> Callable[[dict, dict], float | None]:
    def read(pm: dict, ladder: dict) -> float | None:
        node: Any = ladder.get(level)
        for part in path:
            node = None if node is None else node.get(part)
        if isinstance(node, dict):
            node = node.get("mean", node.get("rho"))
        return None if node is None else float(node)

    return read


def _pm(*path: str) -> Callable[[dict, dict], float | None]:
    def read(pm: dict, ladder: dict) -> float | None:
        node: Any = pm
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        return None if node is None else float(node)

    return read


METRICS: tuple[tuple[str, str, Callable], ...] = (
    ("E_tot", "E_tot", _pm("E_tot")),
    ("DRPE_graded", "DRPE graded", _pm("DRPE", "graded")),
    ("DRPE_binary", "DRPE binary", _pm("DRPE", "binary")),
    ("VPE", "VPE", _pm("VPE")),
    *((f"err_{d}", f"profile: {d}", _pm("profile", d)) for d in PAPER_WORLD.dim_names),
    ("carrying_at_pickup", "event: carrying at pickup", _pm("event_audit", "carrying_at_pickup")),
    ("pickup_mse", "event: pickup MSE", _pm("event_audit", "pickup_mse")),
    (
        "door_open_at_opening",
        "event: door open at opening",
        _pm("event_audit", "door_open_at_opening"),
    ),
    ("door_mse", "event: door MSE", _pm("event_audit", "door_mse")),
    ("ipe", "IPE (L4)", _ladder("L4", "ipe")),
    ("ipe_shifted", "IPE off the behaviour states (L4)", _ladder("L4", "ipe_shifted")),
    ("teacher_forced", "teacher-forced error on Q (L4)", _ladder("L4", "teacher_forced")),
    ("action_effect", "action-effect consistency error (L4)", _ladder("L4", "action_effect")),
    ("decision_agreement", "decision agreement (L4)", _ladder("L4", "decision_agreement")),
    ("decision_regret", "decision regret (L4)", _ladder("L4", "decision_regret")),
    ("probe_regret", "WorldModelGym regret", _ladder("probe", "regret")),
    ("probe_reward_error", "WorldModelGym reward error", _ladder("probe", "reward_error")),
    ("reward_error", "reward-prediction error (L5)", _ladder("L5", "reward_error")),
    ("value_error", "value error (L5)", _ladder("L5", "value_error")),
    ("brier", "success calibration, Brier (L5)", _ladder("L5", "brier")),
    ("ranking_rho", "policy ranking ρ (L6)", _ladder("L6", "spearman")),
    ("pra", "policy ranking PRA (L6)", _ladder("L6", "pra")),
    ("mmrv", "policy ranking MMRV (L6)", _ladder("L6", "mmrv")),
    ("xgap", "exploitability gap (L7)", _ladder("L7", "xgap")),
    ("uncertainty_rho", "uncertainty-error ρ", _ladder("uncertainty", "spearman")),
    ("uncertainty_aurc", "uncertainty AURC", _ladder("uncertainty", "aurc")),
)
#: Metrics E1's grid records (``ControlledRecord``): the grid and pooled columns.
GRID_METRICS = (
    "E_tot", "DRPE_graded", "DRPE_binary", "VPE", *(f"err_{d}" for d in PAPER_WORLD.dim_names)
)
LABELS = {key: label for key, label, _ in METRICS}


@dataclass(frozen=True, kw_only=True)
class ZooRecord(Record):
    """One trained model of a zoo (a row of ``zoo.csv``): success at both depths and every
    metric (``METRICS``; None where undefined)."""

    zoo: str
    key: str
    name: str
    seed: int
    success: float
    success_se: float
    success_deep: float
    success_deep_se: float
    n_episodes: int
    epochs: int
    checkpoint: str
    metrics: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        row = {k: v for k, v in vars(self).items() if k != "metrics"}
        return {**row, **self.metrics}


# --------------------------------------------------------------------------- compute


def train_zoo(ctx: GroupContext, cfg: E7Config, zoo: Zoo) -> tuple[dict, float]:
    """Every model of ``zoo`` trained as vectorized groups (``gridplan.training.runs.train_all``:
    runs of one architecture share groups, an ensemble's members join them; on CPU one worker
    process per core). Returns ``(key, seed) -> (metrics, checkpoint relative to the group
    folder)`` and the wall time."""
    from gridplan.training import runs

    out = ctx.out / RUNS / zoo.name
    workers = max(1, min(available_cpus(), len(zoo.jobs()) // 8)) if ctx.device.type == "cpu" else 1
    extra = ("trainer.figures_every_n_epochs=0", f"train.workers={workers}")
    jobs = zoo.jobs()
    configs = [run_config(ctx, cfg, model, seed, out, *extra) for model, seed in jobs]
    t0 = time.perf_counter()
    with quiet_lightning(), cpu_threads(ctx):
        results = runs.train_all(configs, progress=ctx.progress, record_dir=out / "groups")
    wall = time.perf_counter() - t0
    ctx.log(f"zoo {zoo.name}: trained {len(jobs)} models in {wall:.0f} s ({workers} worker(s))")
    trained = {
        (model.key, seed): (metrics, group_relative(artifacts["best_checkpoint"], ctx.out))
        for (model, seed), (metrics, artifacts) in zip(jobs, results, strict=True)
    }
    return trained, wall


def _deep_success(ctx: GroupContext, cfg: E7Config, zoo: Zoo, models: list) -> list:
    """Closed-loop summaries at the second depth (``cfg.depths[1]``, ``cfg.deep_episodes``
    per evaluation seed), deterministic models in one shared-prefix batch and the others in
    one independent-leaf batch."""
    protocol = cfg.closed_loop(zoo, cfg.depths[1]).replace(episodes=cfg.deep_episodes)
    out: list = [None] * len(models)
    det = [k for k, m in enumerate(models) if plans_deterministically(m)]
    rest = [k for k in range(len(models)) if k not in det]
    for idx, make in ((det, DeterministicStack), (rest, ModelStack)):
        if idx:
            summaries, _ = closed_loop(ctx, make([models[k] for k in idx]), TASK_A, protocol)
            for k, s in zip(idx, summaries, strict=True):
                out[k] = s
    return out


def _ladder_report(job: tuple) -> Any:
    model, depth, ladder, device = job
    torch.set_num_threads(1)
    levels = [lv for lv in check_levels(None, model) if lv != "L1"]
    return ladder_evaluate(model, TASK_A, depth, ladder, levels, device)


def _ladder_reports(ctx: GroupContext, zoo: Zoo, models: list, depth: int, ladder) -> list:
    """The ladder report of every model, in ``models`` order. On CPU the models are dealt to
    one worker process per core (one thread each); every metric draws from its own seeded
    generator, so the reports equal those of one process."""
    jobs = [(m, depth, ladder, ctx.device) for m in models]
    workers = min(available_cpus(), len(models)) if ctx.device.type == "cpu" else 1
    desc = f"ladder ({zoo.name})"
    if workers <= 1:
        return [_ladder_report(job) for job in ctx.bar(jobs, desc)]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        return list(ctx.bar(pool.map(_ladder_report, jobs), desc, total=len(jobs)))


def evaluate_zoo(ctx: GroupContext, cfg: E7Config, zoo: Zoo, trained: dict) -> list[ZooRecord]:
    """Every metric and both closed loops of every model of ``zoo`` (``Zoo.jobs`` order)."""
    jobs = zoo.jobs()
    models = [load_world_model(ctx.out / trained[(m.key, s)][1], ctx.device) for m, s in jobs]
    windows = standard_windows(ctx, cfg.closed_loop(zoo, cfg.depths[0]))
    ladder = cfg.ladder(zoo)
    with cpu_threads(ctx):
        metrics = prediction_metrics(ModelStack(models), windows, TASK_A)
        deep = _deep_success(ctx, cfg, zoo, models)
        reports = _ladder_reports(ctx, zoo, models, cfg.depths[0], ladder)
    records = []
    for (model, seed), pm, summary, report in zip(jobs, metrics, deep, reports, strict=True):
        pm_dict, loop = pm.to_dict(), report.closed_loop
        records.append(
            ZooRecord(
                zoo=zoo.name,
                key=model.key,
                name=model.name,
                seed=seed,
                success=loop["success"]["mean"],
                success_se=loop["success"]["se"],
                success_deep=summary.success,
                success_deep_se=summary.success_se,
                n_episodes=loop["success"]["n"],
                epochs=int(trained[(model.key, seed)][0]["epochs"]),
                checkpoint=trained[(model.key, seed)][1],
                metrics={key: _finite(read(pm_dict, report.ladder)) for key, _, read in METRICS},
            )
        )
    return records


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# --------------------------------------------------------------------------- meta-evaluation


def within_group_counts(groups: Sequence, n_resamples: int, seed: int) -> np.ndarray:
    """``(R, n)`` copies of each unit in ``R`` stratified bootstrap resamples: every group
    (a configuration) keeps its size and draws its units (its training seeds) with
    replacement from ``numpy.random.default_rng(seed)``."""
    labels = np.asarray([str(g) for g in groups])
    rng = np.random.default_rng(seed)
    counts = np.zeros((n_resamples, labels.size))
    rows = np.arange(n_resamples)[:, None]
    for g in dict.fromkeys(labels):
        idx = np.flatnonzero(labels == g)
        draws = idx[rng.integers(0, idx.size, size=(n_resamples, idx.size))]
        np.add.at(counts, (rows, draws), 1.0)
    return counts


@dataclass(frozen=True)
class MetricRank:
    """Spearman ρ of one metric with success over a set of models.

    Attributes:
        models: ρ with the percentile CI of resampling models (``spearman_ci``).
        seeds: the CI of resampling training seeds within configurations (NaN when no
            configuration has two seeds).
    """

    models: SpearmanResult
    seed_low: float = float("nan")
    seed_high: float = float("nan")

    def to_dict(self) -> dict:
        return {
            **self.models.to_dict(),
            "seed_low": _finite(self.seed_low),
            "seed_high": _finite(self.seed_high),
        }


def rank_metric(
    values: Sequence[float | None],
    success: Sequence[float],
    groups: Sequence | None,
    n_resamples: int,
    seed: int = 0,
) -> MetricRank | None:
    """ρ of ``values`` with ``success`` over the models where the metric is defined, with
    the CI over models and (given ``groups``, a configuration per model) the CI over seeds
    within configurations; None when fewer than 3 models define it."""
    keep = [k for k, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(keep) < 3:
        return None
    x = np.asarray([values[k] for k in keep], dtype=np.float64)
    y = np.asarray([success[k] for k in keep], dtype=np.float64)
    models = spearman_ci(x, y, n_resamples, seed)
    if groups is None or math.isnan(models.rho):
        return MetricRank(models)
    labels = [groups[k] for k in keep]
    if max(labels.count(g) for g in set(labels)) < 2:
        return MetricRank(models)
    rep = spearman_of_counts(x, y, within_group_counts(labels, n_resamples, seed))
    rep = rep[np.isfinite(rep)]
    if rep.size == 0:
        return MetricRank(models)
    low, high = percentile_interval(rep)
    return MetricRank(models, low, high)


@dataclass(frozen=True, kw_only=True)
class MetaRow(Record):
    """One metric of the meta-evaluation (a row of ``meta.csv``)."""

    metric: str
    label: str
    zoo: dict | None
    replication: dict | None
    zoo_deep: dict | None
    grid: dict | None
    pooled: dict | None

    @property
    def sort_key(self) -> tuple[int, float]:
        """``|ρ|`` on the zoo, descending; metrics on fewer than ``MIN_MODELS`` models, then
        undefined ones, last."""
        zoo = self.zoo or {}
        rho = zoo.get("rho")
        if rho is None:
            return (2, 0.0)
        return (0 if zoo["n"] >= MIN_MODELS else 1, -abs(rho))


def _ranked(records: Sequence, key: str, col: str, groups: bool, n_resamples: int) -> dict | None:
    values = [_value(r, key) for r in records]
    succ = [getattr(r, col) for r in records]
    labels = [r.key for r in records] if groups else None
    result = rank_metric(values, succ, labels, n_resamples)
    return None if result is None else result.to_dict()


def _value(record, key: str) -> float | None:
    if isinstance(record, ZooRecord):
        return record.metrics.get(key)
    if key.startswith("err_"):
        return float(record.profile[PAPER_WORLD.dim_names.index(key[4:])])
    return float(getattr(record, key))


def meta_table(
    zoo: Sequence[ZooRecord],
    replication: Sequence[ZooRecord],
    grid: Sequence,
    n_resamples: int,
) -> list[MetaRow]:
    """Every metric's ρ on the zoo (depth-2 success; CIs over models and over seeds within
    configurations), on the replication zoo, on the zoo with depth-4 success, and, for
    ``GRID_METRICS``, on the grid and on the grid pooled with the zoo (depth-4 success);
    sorted by ``|ρ|`` on the zoo (undefined last)."""
    rows = []
    for key, label, _ in METRICS:
        on_grid = key in GRID_METRICS and len(grid) > 0
        pooled = [*grid, *zoo]
        rows.append(
            MetaRow(
                metric=key,
                label=label,
                zoo=_ranked(zoo, key, "success", True, n_resamples),
                replication=_ranked(replication, key, "success", True, n_resamples),
                zoo_deep=_ranked(zoo, key, "success_deep", True, n_resamples),
                grid=_ranked(grid, key, "success", False, n_resamples) if on_grid else None,
                pooled=(rank_pooled(pooled, key, n_resamples) if on_grid else None),
            )
        )
    return sorted(rows, key=lambda r: r.sort_key)


def rank_pooled(pooled: Sequence, key: str, n_resamples: int) -> dict | None:
    """ρ over grid models and zoo models together, each with its depth-4 success."""
    values = [_value(r, key) for r in pooled]
    succ = [r.success_deep if isinstance(r, ZooRecord) else r.success for r in pooled]
    result = rank_metric(values, succ, None, n_resamples)
    return None if result is None else result.to_dict()


def configurations(records: Sequence[ZooRecord]) -> list[dict]:
    """Per configuration of a zoo: success at both depths (mean ± SE over its seeds) and the
    mean over seeds of every metric."""
    out = []
    for key in dict.fromkeys(r.key for r in records):
        rs = [r for r in records if r.key == key]
        row: dict[str, Any] = {"zoo": rs[0].zoo, "key": key, "name": rs[0].name, "n_seeds": len(rs)}
        for col in ("success", "success_deep"):
            values = [getattr(r, col) for r in rs]
            row[col] = float(np.mean(values))
            row[f"{col}_se"] = mean_se(values)[1] if len(values) > 1 else None
        for metric, _, _ in METRICS:
            values = [r.metrics[metric] for r in rs if r.metrics.get(metric) is not None]
            row[metric] = float(np.mean(values)) if values else None
        out.append(row)
    return out


# --------------------------------------------------------------------------- report


def _rho_cell(d: dict | None, seeds: bool = False) -> str:
    if d is None:
        return "—"
    text = fmt_rho(d)
    if seeds and d.get("seed_low") is not None:
        text += f" / [{fmt(d['seed_low'], 2)}, {fmt(d['seed_high'], 2)}]"
    return text


def _signed(cell: str) -> str:
    """A paper value with its sign, as §5.2 writes it (``+0.43``)."""
    return cell if cell.startswith(("-", "+")) else f"+{cell}"


def _n(d: dict | None) -> str:
    return "—" if d is None else str(d["n"])


def meta_report(report: GroupReport, rows: Sequence[MetaRow], cfg: E7Config) -> None:
    """The sorted table: ρ with success on the zoo, beside the replication zoo, depth 4, the
    grid, the pool and the paper."""
    cells = []
    for r in rows:
        ref = PAPER_RHO.get(r.metric)
        cells.append(
            [
                r.label,
                _n(r.zoo),
                _rho_cell(r.zoo, seeds=True),
                _rho_cell(r.replication),
                _rho_cell(r.zoo_deep),
                f"{_rho_cell(r.grid)} (n {_n(r.grid)})" if r.grid else "—",
                f"{_rho_cell(r.pooled)} (n {_n(r.pooled)})" if r.pooled else "—",
                _signed(ref.cell()) if ref else "—",
            ]
        )
    d2, d4 = cfg.depths
    report.table(
        "Which metric ranks learned world models? Spearman ρ with closed-loop success, sorted "
        "by |ρ| on the zoo",
        [
            "metric",
            "n (zoo)",
            f"zoo ρ [CI models] / [CI seeds], depth {d2}",
            f"replication zoo ρ, depth {d2}",
            f"zoo ρ, depth {d4}",
            f"controlled grid ρ, depth {d4}",
            f"grid + zoo ρ, depth {d4}",
            "paper (learned pool)",
        ],
        cells,
        f"Every model of the zoo is one unit (n = configurations x training seeds); metrics "
        f"defined on fewer than {MIN_MODELS} models come last. Brackets: "
        f"seeded percentile bootstrap 95% CIs ({cfg.n_resamples} resamples) resampling models, "
        "then resampling training seeds within each configuration. A negative ρ means the "
        "metric falls as success rises (right for an error; agreement, PRA and policy-ranking "
        "ρ should rise instead). The grid is E1's controlled grid (its result files), which "
        "records only the prediction metrics; grid and pool use depth-"
        f"{d4} success, the grid's planner. The paper's +0.43 is its seven-model learned pool "
        "(§5.2; depth 2).",
    )


def zoo_report(
    report: GroupReport, zoo_rows: list[dict], rep_rows: list[dict], cfg: E7Config
) -> None:
    """Per configuration: success at both depths, the headline metrics, and the replication
    zoo's success."""
    rep = {r["key"]: r for r in rep_rows}
    cells = []
    for r in zoo_rows:
        other = rep.get(r["key"], {})
        cells.append(
            [
                r["name"],
                fmt_se(r["success"], r["success_se"]),
                fmt_se(r["success_deep"], r["success_deep_se"]),
                fmt_se(other.get("success"), other.get("success_se")),
                fmt(r["E_tot"]),
                fmt(r["DRPE_graded"]),
                fmt(r["carrying_at_pickup"], 2),
                fmt(r["decision_regret"]),
            ]
        )
    d2, d4 = cfg.depths
    z = cfg.zoo
    report.table(
        "The zoo: success and headline metrics per configuration",
        [
            "configuration",
            f"success, depth {d2}",
            f"success, depth {d4}",
            f"replication success, depth {d2}",
            "E_tot",
            "DRPE graded",
            "carrying at pickup",
            "decision regret",
        ],
        cells,
        f"Means over {len(z.seeds)} training seed(s) (SE over their success rates); each model "
        f"plays {len(z.eval_seeds)} closed-loop seed(s) x {cfg.episodes} episodes at depth "
        f"{d2}, x {cfg.deep_episodes} at depth {d4}. E_tot and "
        f"DRPE on E1's {cfg.n_windows} held-out H = {cfg.horizon} windows. Every model and "
        "metric: `zoo.csv`.",
    )


def _rho(row: MetaRow | None, part: str = "zoo") -> float:
    d = getattr(row, part) if row is not None else None
    return float("nan") if d is None or d.get("rho") is None else float(d["rho"])


def _ranks(d: dict | None) -> bool:
    """Defined on at least ``MIN_MODELS`` models, and the CI over models excludes zero."""
    if d is None or d.get("low") is None or d["n"] < MIN_MODELS:
        return False
    return d["low"] > 0 or d["high"] < 0


def verdicts(report: GroupReport, cfg: E7Config, rows: list[MetaRow], zoo_rows, rep_rows) -> None:
    """The effects E7 can fail to show."""
    by = {r.metric: r for r in rows}
    succ = [r["success"] for r in zoo_rows]
    lo, hi = min(succ), max(succ)
    report.verdict(
        f"The zoo's configurations span success {SPAN_LOW} to {SPAN_HIGH} (a pool that can rank)",
        lo <= SPAN_LOW and hi >= SPAN_HIGH,
        f"depth-{cfg.depths[0]} success of the {len(zoo_rows)} configurations (means over "
        f"seeds) from {fmt(lo, 2)} to {fmt(hi, 2)}; replication "
        f"{fmt(min(r['success'] for r in rep_rows), 2)} to "
        f"{fmt(max(r['success'] for r in rep_rows), 2)}",
    )
    re, rd = _rho(by.get("E_tot")), _rho(by.get("DRPE_graded"))
    report.verdict(
        "Within the learned pool neither E_tot nor DRPE ranks the models (§5.2: +0.43 for both)",
        None if math.isnan(re) or math.isnan(rd) else re > MAX_RANKING_RHO and rd > MAX_RANKING_RHO,
        f"zoo ρ(E_tot) {fmt(re, 2)}, ρ(DRPE graded) {fmt(rd, 2)}; replication "
        f"{fmt(_rho(by.get('E_tot'), 'replication'), 2)} and "
        f"{fmt(_rho(by.get('DRPE_graded'), 'replication'), 2)} (criterion both > "
        f"{MAX_RANKING_RHO})",
    )
    ranking = [r for r in rows if _ranks(r.zoo)]
    replicated = [
        r
        for r in ranking
        if _ranks(r.replication) and np.sign(_rho(r)) == np.sign(_rho(r, "replication"))
    ]
    report.verdict(
        "Which metrics rank the zoo replicates on the independently seeded zoo",
        None if not ranking else len(replicated) == len(ranking),
        f"{len(ranking)} metric(s) whose CI over models excludes 0 on the zoo; "
        f"{len(replicated)} of them also on the replication zoo, same sign"
        + (
            f"; not replicated: {', '.join(r.label for r in ranking if r not in replicated)}"
            if len(replicated) < len(ranking)
            else ""
        ),
    )
    drpe = sorted(
        zoo_rows, key=lambda r: r["DRPE_graded"] if r["DRPE_graded"] is not None else math.inf
    )
    best = drpe[: max(1, len(drpe) // 4)]
    failing = [r for r in best if r["success"] < 0.5]
    report.verdict(
        "DRPE misses failures: a configuration in DRPE's best quarter plans poorly "
        "(success < 0.5; §5.4: rel-only has the lowest DRPE and the worst success)",
        bool(failing),
        "DRPE's best quarter: "
        + ", ".join(
            f"{r['name']} (DRPE {fmt(r['DRPE_graded'])}, success {fmt(r['success'], 2)})"
            for r in best
        ),
    )


def ranking_text(report: GroupReport, rows: list[MetaRow]) -> None:
    """Which metrics rank the zoo and which do not, in plain words, from the table."""
    ranking = [r for r in rows if _ranks(r.zoo)]
    both = [r for r in ranking if _ranks(r.replication)]
    not_ranking = [
        r for r in rows if r.zoo is not None and r.zoo["n"] >= MIN_MODELS and not _ranks(r.zoo)
    ]
    few = [r for r in rows if r.zoo is not None and r.zoo["n"] < MIN_MODELS]
    lines = [
        "**Metrics that rank the zoo** (CI over models excludes 0): "
        + (", ".join(f"{r.label} ({fmt(_rho(r), 2)})" for r in ranking) or "none")
        + ".",
        "**Of these, also on the replication zoo:** "
        + (", ".join(r.label for r in both) or "none")
        + ".",
        "**Metrics that do not rank it:** "
        + (", ".join(f"{r.label} ({fmt(_rho(r), 2)})" for r in not_ranking) or "none")
        + ".",
    ]
    if few:
        lines.append(
            f"**Defined on fewer than {MIN_MODELS} models, not ranked:** "
            + ", ".join(f"{r.label} (n = {r.zoo['n']})" for r in few)
            + "."
        )
    report.text("\n\n".join(lines))


# --------------------------------------------------------------------------- run


def run(ctx: GroupContext) -> GroupReport:
    """E7 (see the module docstring)."""
    cfg: E7Config = ctx.config
    trained, wall = train_zoo(ctx, cfg, cfg.zoo)
    t0 = time.perf_counter()
    zoo = evaluate_zoo(ctx, cfg, cfg.zoo, trained)
    eval_wall = time.perf_counter() - t0
    ctx.log(f"zoo {cfg.zoo.name}: evaluated {len(zoo)} models in {eval_wall:.0f} s")
    grid, source = controlled_grid(ctx)
    rep_trained, rep_wall = train_zoo(ctx, cfg, cfg.replication)
    replication = evaluate_zoo(ctx, cfg, cfg.replication, rep_trained)
    rows = meta_table(zoo, replication, grid, cfg.n_resamples)
    zoo_rows, rep_rows = configurations(zoo), configurations(replication)

    ctx.write_csv("zoo.csv", [*zoo, *replication])
    ctx.write_csv("configurations.csv", [*zoo_rows, *rep_rows])
    ctx.write_csv("meta.csv", [{"metric": r.metric, "label": r.label, **_flat(r)} for r in rows])
    runs = [
        {
            "zoo": name,
            "key": k,
            "seed": s,
            "epochs": m["epochs"],
            "train_seconds": m["train_seconds"],
            "checkpoint": c,
        }
        for name, table in ((cfg.zoo.name, trained), (cfg.replication.name, rep_trained))
        for (k, s), (m, c) in table.items()
    ]
    ctx.write_csv("runs.csv", runs)
    panels = [r.metric for r in rows if r.zoo is not None]
    ctx.save_figure(
        zoo_scatter_figure(zoo, replication, panels, LABELS, cfg.depths[0]), "fig_zoo_scatter.png"
    )
    ctx.save_figure(
        pool_scatter_figure(grid, zoo, ("E_tot", "DRPE_graded", "VPE"), LABELS, cfg.depths[1]),
        "fig_pool_scatter.png",
    )

    report = GroupReport("E7 — which metric ranks learned world models? (§4.3, §5.2, §5.4)")
    verdicts(report, cfg, rows, zoo_rows, rep_rows)
    meta_report(report, rows, cfg)
    ranking_text(report, rows)
    zoo_report(report, zoo_rows, rep_rows, cfg)
    report.figure(
        "fig_zoo_scatter.png",
        f"Every metric against depth-{cfg.depths[0]} success, one point per model (filled: "
        "zoo, open: replication zoo)",
    )
    report.figure(
        "fig_pool_scatter.png",
        f"E_tot, DRPE and VPE against depth-{cfg.depths[1]} success: E1's grid beside the zoo",
    )
    report.text(
        f"Training: {len(trained)} + {len(rep_trained)} models in {wall:.0f} s + {rep_wall:.0f} s "
        f"(vectorized groups); evaluating the first zoo took {eval_wall:.0f} s. Grid: {source}."
    )
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "zoo": zoo,
            "replication": replication,
            "configurations": {"zoo": zoo_rows, "replication": rep_rows},
            "meta": [{"metric": r.metric, "label": r.label, **_flat(r)} for r in rows],
            "grid_source": source,
            "train_wall_seconds": {cfg.zoo.name: wall, cfg.replication.name: rep_wall},
            "paper": {k: v for k, v in PAPER_RHO.items()},
        },
    )
    return report


def _flat(row: MetaRow) -> dict:
    out = {}
    for part in ("zoo", "replication", "zoo_deep", "grid", "pooled"):
        d = getattr(row, part) or {}
        for k in ("rho", "low", "high", "seed_low", "seed_high", "n"):
            if part == "zoo" or not k.startswith("seed"):
                out[f"{part}_{k}"] = d.get(k)
    return out
