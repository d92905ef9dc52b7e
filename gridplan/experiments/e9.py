"""E9: which metric ranks latent world models by closed-loop success? (paper §7 limitation
"transfer to pixel-scale models is untested"; seed 004; ``docs/DESIGN.md``, "Latent world
models".)

The world models researchers build today encode an observation and predict a latent. E9 trains
a zoo of them and asks which cheap number orders them as the planner does:

- **The zoo** (``configs/experiments/e9/``, ``settings.E9Config``): the latent families of
  ``gridplan.models.latent`` (``latent_recon``: a reconstruction model; ``jepa``: a JEPA
  predictor without reconstruction) x observation kinds (``grid``, ``pixels``,
  ``gridplan.core.render``) x data budgets x training seeds, each trained with ``python -m
  train``'s config with nothing overridden in the full profile (``docs/PREREGISTERED.md``,
  Rule 6: each family's own trainer settings).
- **Every model's numbers**: its training losses (``best/recon_mse``, the reconstruction loss,
  ``latent_recon`` only; ``best/latent_mse``, the latent prediction loss, each family in its
  own latent space); the frozen-decoder protocol (``gridplan.evaluation.latent_eval.
  prepare_latent``: ``E_repr``, ``E_pred``, ``E_excess`` of the frozen decoder, latent drift)
  and the action-consistency probe; decoded ``E_tot`` and DRPE (graded) of ``H``-step
  open-loop latent rollouts on the held-out windows, read through the decoder the planner
  uses (``gridplan.metrics.prediction.prediction_metrics`` on the ``LatentThroughDecoder``);
  decision regret at start states (``gridplan.evaluation.decisions``); closed-loop success
  of the depth-``D`` planner, which plans in latent space through the model's own decoder
  (``latent_recon``) or the frozen protocol decoder (``jepa``), leaves scored with the true
  reward of the decoded states and exact V* (``gridplan.planning.latent_scorer``). Success,
  decision regret and agreement are measured under both tie rules on the same start states
  (``gridplan.planning.planner.TIES``; Rule 1), the run's reading's rule first.
- **The meta-evaluation**: Spearman ρ of each metric with success over the zoo, sorted by
  ``|ρ|``, with two bootstrap 95% CIs: resampling configurations, then the training seeds
  within each drawn configuration (``config_seed_counts``; the interval the claims use), and
  resampling models (``spearman_ci``).

The verdicts (``CLAIMS``) were written before the first full run; they are checked only by
the ``full`` profile (``quick`` and ``tiny`` print the same tables and state none), once per tie
rule (the other rule's carry ``[ties=<rule>]``). Sanity checks on the reference latent models
(``gridplan.models.latent_reference``) hold by construction. Writes ``models.csv`` (every
model, every metric), ``meta.csv`` (the sorted table) and ``fig_latent_zoo.png`` under the
run's rule, the same files suffixed ``_ties-<rule>`` under the other, and ``results.json``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gridplan.core.tasks import TASK_A
from gridplan.data.datasets import parse_budget
from gridplan.evaluation.decisions import decide, decision_quality
from gridplan.evaluation.latent_eval import load_run_model, prepare_latent
from gridplan.experiments.learned_runs import (
    DATA_CACHE,
    RUNS,
    cpu_threads,
    group_relative,
    quiet_lightning,
)
from gridplan.experiments.measure import closed_loop, standard_windows, tie_rules
from gridplan.experiments.records import Record
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E9Config, E11Config, EgocentricZoo
from gridplan.experiments.tables import GroupReport, RuleReport, fmt, fmt_rho, fmt_se
from gridplan.metrics.bootstrap import percentile_interval, spearman_of_counts
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import spearman_ci
from gridplan.models.latent import LATENT_KIND
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel
from gridplan.planning.closed_loop import start_states

#: Seed of the start states of the decision-regret measurement (apart from the closed loop's).
BRANCH_SEED = 7001
#: A metric "ranks strongly" when its ρ with success is at most this in magnitude's sign.
STRONG_RHO = 0.7
#: The zoo spans success when some configuration's mean success is at most ``SPAN_LOW`` and
#: some other's at least ``SPAN_HIGH`` (otherwise no metric can rank it).
SPAN_LOW, SPAN_HIGH = 0.2, 0.6

#: Metric key -> label, in the order tables list them before sorting.
METRICS: dict[str, str] = {
    "recon_loss": "reconstruction loss (training, latent_recon only)",
    "latent_pred_loss": "latent prediction loss (training, own latent space)",
    "E_repr": "E_repr (frozen decoder)",
    "E_pred": "E_pred (frozen decoder)",
    "E_excess": "E_excess = E_pred − E_repr (frozen decoder)",
    "latent_drift": "latent drift (relative to latent variance)",
    "E_tot": "decoded E_tot (H-step latent rollouts)",
    "DRPE": "decoded DRPE graded (H-step latent rollouts)",
    "action_consistency": "action consistency (probe)",
    "decision_regret": "decision regret",
}

#: The verdicts, stated before the run; each holds or fails on the full profile's numbers.
CLAIMS = {
    "span": (
        f"The zoo spans success: some configuration's mean success is ≤ {SPAN_LOW:g} and "
        f"another's ≥ {SPAN_HIGH:g}"
    ),
    "drpe_over_latent_loss": (
        "Decoded DRPE ranks latent models by success better than their training objective: "
        "|ρ(DRPE)| > |ρ(latent prediction loss)|"
    ),
    "drpe_over_etot": (
        "The paper's effect transfers to latent models: |ρ(decoded DRPE)| > |ρ(decoded E_tot)|"
    ),
    "excess_negative": (
        "E_excess (frozen decoder) correlates negatively with success: the 95% CI over "
        "configurations then seeds lies below 0"
    ),
    "consistency_screens": (
        "Action consistency, the seconds-cheap screening score, correlates positively with "
        "success: its 95% CI over configurations then seeds lies above 0"
    ),
    "regret_strong": (
        f"Decision regret ranks latent models strongly: ρ ≤ −{STRONG_RHO:g} with a 95% CI "
        "over configurations then seeds below 0"
    ),
}


@dataclass(frozen=True, kw_only=True)
class LatentZooRecord(Record):
    """One model of the zoo (a row of ``models.csv``; E11's zoo holds state models too);
    metric values are None where a model does not define them (``recon_loss`` of a JEPA
    model, ``E_pred`` of a state model). ``success``,
    ``decision_agreement`` and ``metrics["decision_regret"]`` are those under tie rule
    ``ties``."""

    key: str
    family: str
    obs: str
    budget: str
    seed: int
    ties: str
    checkpoint: str
    epochs: int
    train_seconds: float
    eval_seconds: float
    success: float
    success_se: float
    n_episodes: int
    decision_agreement: float
    decoder: str
    metrics: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        row = super().to_dict()
        row.update(row.pop("metrics"))
        return row


@dataclass(frozen=True, kw_only=True)
class LatentMetaRow(Record):
    """One metric's ρ with success over the zoo (a row of ``meta.csv``). ``undefined`` says
    why ``rho`` is None; ``defined`` is the fraction of configuration-then-seed resamples
    whose ρ is defined (a resample with constant success or metric has none), the share the
    CI is read from."""

    metric: str
    label: str
    n: int
    rho: float | None
    low: float | None
    high: float | None
    model_low: float | None
    model_high: float | None
    defined: float | None = None
    undefined: str | None = None

    @property
    def sort_key(self) -> tuple[int, float]:
        return (1, 0.0) if self.rho is None else (0, -abs(self.rho))


def finite_or_none(x) -> float | None:
    """``x`` as a float, None where it is None, NaN or infinite (a CSV / JSON cell)."""
    return None if x is None or not math.isfinite(float(x)) else float(x)


# --------------------------------------------------------------------------- training


def configurations(cfg: E9Config | E11Config | EgocentricZoo) -> list[tuple[str, str, str]]:
    """Every ``(family, observation, budget)`` of the zoo, in config order (``cfg.pairs``,
    each at every budget)."""
    return [(f, o, b) for f, o in cfg.pairs for b in cfg.budgets]


def _key(family: str, obs: str, budget: str) -> str:
    return f"{family}-{obs}-{budget}"


def train_zoo(
    ctx: GroupContext, cfg: E9Config | E11Config | EgocentricZoo, *extra: str
) -> list[dict]:
    """Train every model of the zoo (one Lightning run each; latent runs train alone), each
    run a job of the group's launcher (``ctx.launcher``; this machine by default:
    ``gridplan.training.runs.train_all``), and return its run entries: configuration, seed,
    checkpoint, training metrics and the run's training time (``train_seconds``). ``extra``
    overrides every run after the zoo's own (E12: ``world=<DoorKey world>``). As E3's
    runs (``gridplan.experiments.learned_runs.train_runs``), the runs draw no dashboard images
    (``trainer.figures_every_n_epochs=0``: Matplotlib renders, a third of a state MLP
    group's time, ``docs/PERFORMANCE.md`` §18) and score the held-out windows only with their
    best checkpoint (``trainer.metrics_every_n_epochs=0``); neither is part of the training
    protocol: the weights, epochs and best checkpoint are those of ``python -m train``."""
    from gridplan.training import runs
    from gridplan.training.config import compose

    accelerator = "cpu" if ctx.device.type == "cpu" else "gpu"
    jobs = [(c, s) for c in configurations(cfg) for s in cfg.train_seeds]
    configs = [
        compose(
            [
                f"model={family}",
                f"obs={obs}",
                f"data.budget={parse_budget(budget)}",
                f"seed={seed}",
                f"out_dir={ctx.out / RUNS}",
                f"data.cache_dir={ctx.root / DATA_CACHE}",
                "trainer.progress_bar=false",
                "trainer.figures_every_n_epochs=0",
                "trainer.metrics_every_n_epochs=0",
                f"trainer.accelerator={accelerator}",
                *cfg.train_overrides,
                *extra,
            ]
        )
        for (family, obs, budget), seed in jobs
    ]
    with quiet_lightning(), cpu_threads(ctx):
        results = runs.train_all(
            configs,
            progress=ctx.progress,
            record_dir=ctx.out / RUNS / "jobs",
            launcher=ctx.launcher,
        )
    return [
        {
            "family": family,
            "obs": obs,
            "budget": budget,
            "seed": seed,
            "checkpoint": group_relative(artifacts["best_checkpoint"], ctx.out),
            "metrics": metrics,
            "wall": metrics["train_seconds"],
        }
        for ((family, obs, budget), seed), (metrics, artifacts) in zip(jobs, results, strict=True)
    ]


# --------------------------------------------------------------------------- measurement


def measure_planned(ctx: GroupContext, cfg: E9Config | E11Config, model, task=TASK_A) -> dict:
    """The numbers of a model the planner plans with (a state world model, or a latent model
    through its decoder, ``LatentThroughDecoder``): ``E_tot`` and ``DRPE`` (graded) on the
    protocol's held-out windows, and ``by_ties``, the closed-loop ``summary``,
    ``decision_regret`` and ``decision_agreement`` under each tie rule, the run's reading's
    first (``tie_rules``; the same start states, roots and generator seeds under every
    rule)."""
    windows = standard_windows(ctx, cfg.protocol, task)
    pm = prediction_metrics(model, windows, generator=ctx.generator(0))[0]
    roots = start_states((BRANCH_SEED,), cfg.branch_states, task, ctx.device)
    by_ties = {}
    for rule in tie_rules(ctx.reading.ties):
        summaries, _ = closed_loop(ctx, model, task, cfg.protocol, ties=rule)
        quality = decision_quality(
            decide(model, roots, task, cfg.protocol.depth, ctx.generator(1), ties=rule)
        ).to_dict()
        by_ties[rule] = {
            "summary": summaries[0],
            "decision_regret": quality["decision_regret"]["mean"],
            "decision_agreement": quality["decision_agreement"]["mean"],
        }
    return {"by_ties": by_ties, "E_tot": pm.E_tot, "DRPE": pm.DRPE["graded"]}


def measure_latent(ctx: GroupContext, cfg: E9Config | E11Config, latent) -> dict:
    """Every number of one latent model (module docstring): ``measure_planned`` of the
    wrapper the planner uses, the frozen-decoder protocol's numbers (the whole result in
    ``protocol``) and the probe's."""
    task = TASK_A
    measured = prepare_latent(latent, task, ctx.device)
    latent_report = measured.report
    frozen = latent_report["frozen"]
    planned = measure_planned(ctx, cfg, measured.model, task)
    return {
        "by_ties": planned["by_ties"],
        "E_repr": frozen["E_repr"],
        "E_pred": frozen["E_pred"],
        "E_excess": frozen["E_excess"],
        "latent_drift": frozen["latent_drift_relative"],
        "E_tot": planned["E_tot"],
        "DRPE": planned["DRPE"],
        "action_consistency": latent_report["action_consistency"]["consistency"],
        "decoder": latent_report["planning"]["decoder"]["kind"],
        "protocol": latent_report,
    }


def measure_run(ctx: GroupContext, cfg: E9Config | E11Config, model) -> dict:
    """The numbers of a trained model as ``python -m eval --ckpt`` loads it
    (``gridplan.evaluation.latent_eval.load_run_model``): ``measure_latent`` of a latent
    model; of a state world model (``model=mlp``, an ensemble) ``measure_planned``, with
    decoder ``"none"`` and no latent number."""
    if getattr(model, "metadata", {}).get("kind") == LATENT_KIND:
        return measure_latent(ctx, cfg, model)
    return {**measure_planned(ctx, cfg, model), "decoder": "none"}


def evaluate_zoo(
    ctx: GroupContext,
    cfg: E9Config | E11Config,
    trained: list[dict],
    metrics_of: dict[str, str] = METRICS,
) -> dict[str, list[LatentZooRecord]]:
    """Measure every trained model (``measure_run``): tie rule -> one record per model, its
    ``metrics`` those of ``metrics_of`` (None where the model does not define one)."""
    records: dict[str, list[LatentZooRecord]] = {rule: [] for rule in tie_rules(ctx.reading.ties)}
    for run in ctx.bar(trained, "measuring the zoo"):
        t0 = time.perf_counter()
        model = load_run_model(ctx.out / run["checkpoint"], ctx.device)
        with cpu_threads(ctx):
            m = measure_run(ctx, cfg, model)
        tm = run["metrics"]
        metrics = {k: finite_or_none(m[k]) for k in metrics_of if k in m}
        metrics["recon_loss"] = finite_or_none(tm.get("best/recon_mse"))
        metrics["latent_pred_loss"] = finite_or_none(tm.get("best/latent_mse"))
        eval_seconds = round(time.perf_counter() - t0, 2)
        for rule, played in m["by_ties"].items():
            s = played["summary"]
            metrics["decision_regret"] = finite_or_none(played["decision_regret"])
            metrics["decision_agreement"] = finite_or_none(played["decision_agreement"])
            records[rule].append(
                LatentZooRecord(
                    key=_key(run["family"], run["obs"], run["budget"]),
                    family=run["family"],
                    obs=run["obs"],
                    budget=run["budget"],
                    seed=run["seed"],
                    ties=rule,
                    checkpoint=run["checkpoint"],
                    epochs=int(tm.get("epochs", 0)),
                    train_seconds=round(run["wall"], 2),
                    eval_seconds=eval_seconds,
                    success=float(s.success),
                    success_se=float(s.success_se),
                    n_episodes=int(s.n_episodes),
                    decision_agreement=float(played["decision_agreement"]),
                    decoder=m["decoder"],
                    metrics={k: metrics.get(k) for k in metrics_of},
                )
            )
    return records


# --------------------------------------------------------------------------- meta-evaluation


def config_seed_counts(groups, n_resamples: int, seed: int = 0) -> np.ndarray:
    """``(R, n)`` copies of each model in ``R`` two-stage bootstrap resamples: draw the ``G``
    configurations with replacement, then, inside each drawn configuration, draw its models
    (training seeds) with replacement (``numpy.random.default_rng(seed)``)."""
    labels = np.asarray([str(g) for g in groups])
    names = list(dict.fromkeys(labels))
    members = [np.flatnonzero(labels == g) for g in names]
    rng = np.random.default_rng(seed)
    counts = np.zeros((n_resamples, labels.size))
    picks = rng.integers(0, len(names), size=(n_resamples, len(names)))
    for r in range(n_resamples):
        for g in picks[r]:
            idx = members[g]
            np.add.at(counts[r], idx[rng.integers(0, idx.size, size=idx.size)], 1.0)
    return counts


def rank_metric(
    records, key: str, n_resamples: int, seed: int = 0, metrics_of: dict[str, str] = METRICS
) -> LatentMetaRow:
    """ρ of metric ``key`` (labelled as ``metrics_of`` says) with success over the models that
    define it, with the configuration-then-seed CI and the model CI (None below 3 models or a
    constant side, with the reason in ``undefined``)."""
    keep = [r for r in records if r.metrics.get(key) is not None]

    def undefined(why: str) -> LatentMetaRow:
        return LatentMetaRow(
            metric=key, label=metrics_of[key], n=len(keep), rho=None, low=None, high=None,
            model_low=None, model_high=None, undefined=why,
        )  # fmt: skip

    if len(keep) < 3:
        return undefined(f"{len(keep)} models define it (needs 3)")
    x = np.asarray([r.metrics[key] for r in keep], dtype=np.float64)
    y = np.asarray([r.success for r in keep], dtype=np.float64)
    if np.all(y == y[0]):
        return undefined(f"success is {y[0]:.2f} for every model")
    if np.all(x == x[0]):
        return undefined(f"the metric is {x[0]:.4g} for every model")
    models = spearman_ci(x, y, n_resamples, seed)
    rep = spearman_of_counts(x, y, config_seed_counts([r.key for r in keep], n_resamples, seed))
    defined = float(np.isfinite(rep).mean())
    rep = rep[np.isfinite(rep)]
    low, high = percentile_interval(rep) if rep.size else (None, None)
    return LatentMetaRow(
        metric=key,
        label=metrics_of[key],
        n=len(keep),
        rho=float(models.rho),
        low=finite_or_none(low),
        high=finite_or_none(high),
        model_low=finite_or_none(models.low),
        model_high=finite_or_none(models.high),
        defined=defined,
    )


def meta_table(
    records, n_resamples: int, metrics_of: dict[str, str] = METRICS
) -> list[LatentMetaRow]:
    """Every metric's ``rank_metric``, sorted by ``|ρ|`` (undefined last)."""
    rows = (rank_metric(records, k, n_resamples, metrics_of=metrics_of) for k in metrics_of)
    return sorted(rows, key=lambda r: r.sort_key)


def config_means(records, metrics_of: dict[str, str] = METRICS) -> list[dict]:
    """Per configuration: mean success over its seeds (± SE) and the mean of every metric."""
    out = []
    for key in dict.fromkeys(r.key for r in records):
        rs = [r for r in records if r.key == key]
        succ = np.asarray([r.success for r in rs])
        row = {
            "key": key,
            "n_seeds": len(rs),
            "success": float(succ.mean()),
            "success_se": float(succ.std(ddof=1) / np.sqrt(len(rs))) if len(rs) > 1 else None,
        }
        for k in metrics_of:
            vals = [r.metrics[k] for r in rs if r.metrics.get(k) is not None]
            row[k] = float(np.mean(vals)) if vals else None
        out.append(row)
    return out


# --------------------------------------------------------------------------- verdicts


def _abs(row: LatentMetaRow | None) -> float | None:
    return None if row is None or row.rho is None else abs(row.rho)


def beats(by: dict[str, LatentMetaRow], a: str, b: str) -> tuple[bool | None, str]:
    """Whether metric ``a`` ranks success better than ``b`` in ``by`` (metric -> row):
    ``|ρ(a)| > |ρ(b)|``, None where either is undefined; with the numbers."""
    x, y = _abs(by[a]), _abs(by[b])
    text = f"ρ({a}) {fmt(by[a].rho, 2)} vs ρ({b}) {fmt(by[b].rho, 2)}"
    return (None, text + " (undefined)") if x is None or y is None else (x > y, text)


def ci_side(
    by: dict[str, LatentMetaRow], key: str, sign: int, strong: float | None = None
) -> tuple[bool | None, str]:
    """Whether metric ``key``'s configuration-then-seed 95% CI lies below 0 (``sign`` < 0) or
    above it, and, with ``strong``, ``ρ <= -strong`` too; None where undefined."""
    r = by[key]
    text = f"ρ {fmt_rho({'rho': r.rho, 'low': r.low, 'high': r.high})}"
    if r.rho is None or r.low is None:
        return None, text + " (undefined)"
    inside = r.high < 0 if sign < 0 else r.low > 0
    if strong is not None:
        inside = inside and r.rho <= -strong
    return inside, text


def spans(configs: list[dict]) -> tuple[bool, str]:
    """Whether some configuration's mean success is ``<= SPAN_LOW`` and another's
    ``>= SPAN_HIGH``, with the range."""
    succ = [c["success"] for c in configs]
    return (
        min(succ) <= SPAN_LOW and max(succ) >= SPAN_HIGH,
        f"configuration success from {min(succ):.2f} to {max(succ):.2f}",
    )


def verdicts(
    report: GroupReport | RuleReport, rows: list[LatentMetaRow], configs: list[dict]
) -> None:
    """Every claim of ``CLAIMS`` on one tie rule's table (a smoke run's report states none:
    ``GroupReport``; the other rule's through a ``RuleReport``)."""
    by = {r.metric: r for r in rows}
    results: dict[str, tuple[bool | None, str]] = {"span": spans(configs)}
    results["drpe_over_latent_loss"] = beats(by, "DRPE", "latent_pred_loss")
    results["drpe_over_etot"] = beats(by, "DRPE", "E_tot")
    results["excess_negative"] = ci_side(by, "E_excess", -1)
    results["consistency_screens"] = ci_side(by, "action_consistency", +1)
    results["regret_strong"] = ci_side(by, "decision_regret", -1, STRONG_RHO)
    for key, claim in CLAIMS.items():
        ok, detail = results[key]
        report.verdict(claim, ok, detail)


def reference_sanity(
    ctx: GroupContext, cfg: E9Config | E11Config, report: GroupReport
) -> dict:
    """The reference latent models' known answers (``gridplan.models.latent_reference``),
    played under the run's tie rule."""
    main = ctx.reading.ties
    state = measure_latent(ctx, cfg, StateLatentModel())
    played = state["by_ties"][main]
    own = state["protocol"]["own"]
    report.sanity(
        "The state latent model (encoder = true state, dynamics = oracle) has no relevant "
        "excess error, agrees with every optimal decision and plans to the goal",
        own["DRPE_excess"] == 0.0 and played["decision_agreement"] == 1.0,
        "its decoder is the identity and the oracle's relevant dims are exact",
        f"DRPE excess (own decoder) {own['DRPE_excess']:.4f}, decision agreement "
        f"{played['decision_agreement']:.3f}, success {played['summary'].success:.2f}",
    )
    still = measure_latent(ctx, cfg, PersistenceLatentModel())
    p = still["protocol"]["own"]
    report.sanity(
        "The persistence latent model z' = z measures the persistence baseline",
        p["E_pred"] == p["E_persistence"] and p["DRPE_pred"] == p["DRPE_persistence"],
        "its decoded prediction is the current state",
        f"E_pred {p['E_pred']:.4f} = persistence {p['E_persistence']:.4f}; success "
        f"{still['by_ties'][main]['summary'].success:.2f}",
    )

    def plain(m: dict) -> dict:
        out = {k: v for k, v in m.items() if k not in ("by_ties", "protocol")}
        out["by_ties"] = {
            rule: {
                "success": played["summary"].success,
                "decision_regret": played["decision_regret"],
                "decision_agreement": played["decision_agreement"],
            }
            for rule, played in m["by_ties"].items()
        }
        return out

    return {"state_latent": plain(state), "persistence": plain(still)}


# --------------------------------------------------------------------------- tables, figure


def rho_table(report: GroupReport, title: str, rows: list[LatentMetaRow], caption: str) -> None:
    """A table of ``rows`` (``meta_table``): each metric's ρ with success and both CIs."""

    def cell(lo, hi) -> str:
        return "—" if lo is None else f"[{lo:+.2f}, {hi:+.2f}]"

    def share(r: LatentMetaRow) -> str:
        return "—" if r.defined is None else f"{r.defined:.0%}"

    report.table(
        title,
        [
            "metric",
            "models",
            "ρ with success",
            "95% CI: configurations → seeds",
            "resamples with ρ defined",
            "95% CI: models",
        ],
        [
            [
                r.label,
                r.n,
                f"n/a ({r.undefined})" if r.rho is None else f"{r.rho:+.2f}",
                cell(r.low, r.high),
                share(r),
                cell(r.model_low, r.model_high),
            ]
            for r in rows
        ],
        caption,
    )


def meta_report(
    report: GroupReport, rows: list[LatentMetaRow], cfg: E9Config, n: int, ties: str
) -> None:
    """The sorted table of ρ with success under tie rule ``ties``."""
    rho_table(
        report,
        f"Which metric ranks latent models by closed-loop success (ties={ties}, sorted by |ρ|)",
        rows,
        f"Spearman ρ over the {n} latent models ({len(configurations(cfg))} configurations x "
        f"{len(cfg.train_seeds)} seeds), success at depth {cfg.protocol.depth} over "
        f"{len(cfg.protocol.seeds)} seeds × {cfg.protocol.episodes} episodes each, tied best "
        f"first actions broken by `{ties}`. CIs: "
        f"{cfg.n_resamples} bootstrap resamples, first resampling configurations then the "
        "training seeds inside each drawn one (a resample whose success or metric is "
        "constant has no ρ and is left out; the column beside says how many were kept), "
        "then resampling models. The paper has no "
        "latent models (its §7 names them as untested); its reference for the state models "
        "is Table 1 (grid of 48: ρ E_tot −.32, DRPE −.98) and §5.2 (7 learned models: both "
        "+.43). The latent prediction loss lives in each family's own latent space, so it "
        "is compared across families only by rank.",
    )


def configs_report(
    report: GroupReport,
    configs: list[dict],
    ties: str,
    keys: tuple[str, ...] = ("E_repr", "E_excess", "DRPE", "action_consistency", "decision_regret"),
    what: str = "Latent configurations",
    metrics_of: dict[str, str] = METRICS,
) -> None:
    """Per-configuration means of the metrics ``keys`` under tie rule ``ties``."""
    report.table(
        f"{what} (means over seeds, ties={ties})",
        ["configuration", "seeds", "success", *[metrics_of[k].split(" (")[0] for k in keys]],
        [
            [
                c["key"],
                c["n_seeds"],
                fmt_se(c["success"], c["success_se"]),
                *[fmt(c[k], 4) for k in keys],
            ]
            for c in configs
        ],
    )


#: Each family's colour in ``zoo_figure``.
FAMILY_COLOURS = {
    "latent_recon": "tab:blue",
    "jepa": "tab:orange",
    "rssm": "tab:green",
    "tdmpc": "tab:red",
    "mlp": "tab:purple",
    "ensemble5": "tab:brown",
}


#: Marker of each observation kind in ``zoo_figure``.
OBS_MARKERS = {"grid": "s", "pixels": "o", "state": "^"}
#: A panel's x axis is logarithmic where its positive values span more than this factor.
LOG_SPAN = 100.0


def _log_axis(values: list[float]) -> bool:
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) > 1 and max(positive) > LOG_SPAN * min(positive)


def zoo_figure(records, rows: list[LatentMetaRow]) -> Figure:
    """One panel per metric: its value against success, one point per model (colour: family,
    ``FAMILY_COLOURS``; marker: observation kind, ``OBS_MARKERS``; a legend of both below the
    panels), on a log x axis where the metric spans more than ``LOG_SPAN``."""
    shown = [r for r in rows if r.n]
    cols = 4
    fig = Figure(figsize=(3.0 * cols, 2.4 * math.ceil(len(shown) / cols) + 0.5))
    for i, row in enumerate(shown):
        ax = fig.add_subplot(math.ceil(len(shown) / cols), cols, i + 1)
        points = [r for r in records if r.metrics.get(row.metric) is not None]
        for r in points:
            ax.scatter(
                r.metrics[row.metric],
                r.success,
                s=14,
                c=FAMILY_COLOURS.get(r.family, "grey"),
                marker=OBS_MARKERS.get(r.obs, "x"),
            )
        if _log_axis([r.metrics[row.metric] for r in points]):
            ax.set_xscale("log")
        rho = "n/a" if row.rho is None else f"{row.rho:+.2f}"
        ax.set_title(f"{row.label.split(' (')[0]}  ρ {rho}", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.set_ylim(-0.05, 1.05)
    families = dict.fromkeys(r.family for r in records)
    kinds = dict.fromkeys(r.obs for r in records)
    handles = [
        Line2D([], [], ls="", marker="o", color=FAMILY_COLOURS.get(f, "grey"), label=f)
        for f in families
    ] + [
        Line2D([], [], ls="", marker=OBS_MARKERS.get(k, "x"), color="black", label=k)
        for k in kinds
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7, frameon=False)
    fig.supylabel("closed-loop success", fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


# --------------------------------------------------------------------------- run


def run(ctx: GroupContext) -> GroupReport:
    """E9 (see the module docstring)."""
    cfg: E9Config = ctx.config
    rules = tie_rules(ctx.reading.ties)
    t0 = time.perf_counter()
    trained = train_zoo(ctx, cfg)
    train_wall = time.perf_counter() - t0
    ctx.log(f"trained {len(trained)} latent models in {train_wall:.0f} s")
    t0 = time.perf_counter()
    records = evaluate_zoo(ctx, cfg, trained)
    eval_wall = time.perf_counter() - t0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    report = GroupReport(
        "E9 — which metric ranks latent world models (§7 limitation, seed 004)", ctx.profile
    )
    by_rule = {}
    for rule in rules:
        rows = meta_table(records[rule], cfg.n_resamples)
        configs = config_means(records[rule])
        by_rule[rule] = {"meta": rows, "configurations": configs}
        verdicts(report if rule == rules[0] else RuleReport(report, rule), rows, configs)
    with cpu_threads(ctx):
        references = reference_sanity(ctx, cfg, report)
    for rule in rules:
        rows, configs = by_rule[rule]["meta"], by_rule[rule]["configurations"]
        suffix = "" if rule == rules[0] else f"_ties-{rule}"
        meta_report(report, rows, cfg, len(records[rule]), rule)
        configs_report(report, configs, rule)
        ctx.write_csv(f"models{suffix}.csv", records[rule])
        ctx.write_csv(f"meta{suffix}.csv", rows)
        ctx.save_figure(zoo_figure(records[rule], rows), f"fig_latent_zoo{suffix}.png")
        report.figure(
            f"fig_latent_zoo{suffix}.png",
            f"Each metric against closed-loop success under ties={rule}, one point per latent "
            "model (blue: latent_recon, orange: jepa; squares: grid, circles: pixels)",
        )
    load_text = "" if load is None else f" (1-minute load average at the end: {load:.1f})"
    report.text(
        f"Wall time: training {len(trained)} latent models took {train_wall:.0f} s, measuring "
        f"them (frozen-decoder protocol, probe, decoded rollouts, and decision regret and the "
        f"closed loop under {len(rules)} tie rules) {eval_wall:.0f} s on {ctx.device.type}"
        f"{load_text}."
    )
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "ties": list(rules),
            "models": records[rules[0]],
            "configurations": by_rule[rules[0]]["configurations"],
            "meta": by_rule[rules[0]]["meta"],
            "by_ties": {rule: {"models": records[rule], **by_rule[rule]} for rule in rules},
            "references": references,
            "claims": CLAIMS,
            "verdicts_stated": not report.smoke,
            "train_wall_seconds": train_wall,
            "eval_wall_seconds": eval_wall,
        },
    )
    return report
