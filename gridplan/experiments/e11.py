"""E11: which metric ranks the field's world-model architectures by closed-loop success?
(paper §7 limitation "transfer to pixel-scale models is untested"; ``docs/DESIGN.md``, "Latent
world models"; ``docs/PREREGISTERED.md``, Rule 8.)

E9 ranks two latent families; E11 asks the same question of the architectures the field
builds, side by side in one zoo:

- **The zoo** (``configs/experiments/e11/``, ``settings.E11Config``): the state MLP
  (``model=mlp``) and a five-member ensemble of it (``model=ensemble5``) on the state, and the
  latent families of ``gridplan.models.latent`` (``latent_recon``, ``jepa``, ``rssm``,
  ``tdmpc``) on the state, the symbolic grid and pixels, x data budgets x training seeds; each
  model trained exactly as ``python -m train model=<family> obs=<observation> data=<budget>
  seed=<seed>`` trains it (``gridplan.experiments.e9.train_zoo``) and measured as ``python -m
  eval --ckpt`` measures it (``gridplan.experiments.e9.measure_run``: a latent model through
  the frozen-decoder protocol and the decoder the planner uses, a state model directly).
- **Every model's numbers**: ``E_tot`` and DRPE (graded) of ``H``-step open-loop rollouts on
  the held-out windows (decoded for a latent model), ``E_pred`` and ``E_excess`` of the frozen
  decoder (latent families only), decision regret and agreement at start states, closed-loop
  success of the depth-``D`` planner; success and the decision numbers under both tie rules
  on the same start states (``gridplan.planning.planner.TIES``; Rule 1).
- **The meta-evaluation** (E9's functions): Spearman ρ of each metric with success over the
  zoo and over the latent families alone, sorted by ``|ρ|``, with the two-stage bootstrap 95%
  CI (configurations, then the training seeds inside each drawn one) and the model-level CI;
  and the paired margins ``|ρ(a)| − |ρ(b)|`` with a CI from the same two-stage resamples for
  both ρ (``margin_row``).

The verdicts (``CLAIMS``) were written before the first full run (Rule 8); only the ``full``
profile states them (``quick`` and ``tiny`` print the same tables), once per tie rule (the
other rule's carry ``[ties=<rule>]``). ``span`` is a precondition: where it fails, the ranking
claims under that rule are void (reported as not checked). Writes ``models.csv``, ``meta.csv``,
``margins.csv`` and ``fig_architecture_zoo.png`` under the run's rule, the same suffixed
``_ties-<rule>`` under the other, and ``results.json``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from gridplan.experiments import e9
from gridplan.experiments.learned_runs import cpu_threads
from gridplan.experiments.measure import tie_rules
from gridplan.experiments.records import Record
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E11Config
from gridplan.experiments.tables import GroupReport, RuleReport, fmt_rho
from gridplan.metrics.bootstrap import percentile_interval, spearman_of_counts
from gridplan.models.latent import LATENT_FAMILIES

#: Metric key -> label, in the order tables list them before sorting.
METRICS: dict[str, str] = {
    "E_tot": "E_tot (H-step rollouts, decoded for latent models)",
    "DRPE": "DRPE graded (H-step rollouts, decoded for latent models)",
    "E_pred": "E_pred (frozen decoder, latent families)",
    "E_excess": "E_excess = E_pred − E_repr (frozen decoder, latent families)",
    "decision_regret": "decision regret",
    "decision_agreement": "decision agreement",
}
#: The paired margins ``(pool, a, b)``: ``|ρ(a)| − |ρ(b)|`` over the pool's models.
MARGINS = (("all", "DRPE", "E_tot"), ("latent", "DRPE", "E_tot"), ("latent", "DRPE", "E_pred"))
#: The pools ranked: every model, and the latent families' alone.
POOLS = {
    "all": "every architecture",
    "latent": f"the latent families ({', '.join(LATENT_FAMILIES)})",
}

#: The verdicts, stated before the run; each holds or fails on the full profile's numbers.
CLAIMS = {
    "span": (
        f"Precondition: the zoo spans success: some configuration's mean success is ≤ "
        f"{e9.SPAN_LOW:g} and another's ≥ {e9.SPAN_HIGH:g} (where it fails, the other claims "
        "under the same tie rule are void)"
    ),
    "drpe_over_etot": (
        "Across the architectures, DRPE ranks success better than E_tot: the margin "
        "|ρ(DRPE)| − |ρ(E_tot)| has a paired 95% CI over configurations then seeds above 0"
    ),
    "drpe_over_etot_latent": (
        "The ranking holds within the latent families: over their models alone "
        "|ρ(DRPE)| > |ρ(E_tot)|"
    ),
    "drpe_over_epred": (
        "Within the latent families, decoded DRPE ranks success better than the frozen "
        "decoder's E_pred: |ρ(DRPE)| > |ρ(E_pred)|"
    ),
    "excess_negative": (
        "E_excess (frozen decoder) correlates negatively with success within the latent "
        "families: its 95% CI over configurations then seeds lies below 0"
    ),
    "regret_strong": (
        f"Decision regret ranks the whole zoo strongly: ρ ≤ −{e9.STRONG_RHO:g} with a 95% CI "
        "over configurations then seeds below 0"
    ),
}


@dataclass(frozen=True, kw_only=True)
class MarginRow(Record):
    """``|ρ(a)| − |ρ(b)|`` with success over a pool's models (a row of ``margins.csv``), its
    95% CI from configuration-then-seed resamples shared by both ρ, and the share of
    resamples where both ρ are defined; None where the point margin is undefined."""

    pool: str
    a: str
    b: str
    n: int
    margin: float | None
    low: float | None
    high: float | None
    defined: float | None


def pool_of(records, pool: str) -> list:
    """The records of ``pool`` (``POOLS``): every one, or the latent families' only.

    Raises:
        ValueError: on an unknown pool.
    """
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; valid: {', '.join(POOLS)}")
    return [r for r in records if pool == "all" or r.family in LATENT_FAMILIES]


def margin_row(records, pool: str, a: str, b: str, n_resamples: int, seed: int = 0) -> MarginRow:
    """The margin ``|ρ(a)| − |ρ(b)|`` over the models of ``pool`` that define both metrics
    (``MarginRow``): each resample (``e9.config_seed_counts``) draws configurations, then
    seeds, and both ρ are taken on it; NaN where success or either metric is constant."""
    keep = [
        r for r in pool_of(records, pool) if r.metrics.get(a) is not None
        and r.metrics.get(b) is not None
    ]  # fmt: skip
    row = {"pool": pool, "a": a, "b": b, "n": len(keep)}
    if len(keep) < 3:
        return MarginRow(**row, margin=None, low=None, high=None, defined=None)
    x, y = ([r.metrics[k] for r in keep] for k in (a, b))
    s = [r.success for r in keep]

    def margin(counts) -> np.ndarray:
        return np.abs(spearman_of_counts(x, s, counts)) - np.abs(spearman_of_counts(y, s, counts))

    point = float(margin(np.ones((1, len(keep))))[0])
    reps = margin(e9.config_seed_counts([r.key for r in keep], n_resamples, seed))
    low, high = percentile_interval(reps)
    return MarginRow(
        **row,
        margin=e9.finite_or_none(point),
        low=e9.finite_or_none(low),
        high=e9.finite_or_none(high),
        defined=float(np.isfinite(reps).mean()),
    )


def rank(records, n_resamples: int) -> dict:
    """One tie rule's meta-evaluation: ``meta`` (``e9.meta_table`` of every pool),
    ``margins`` (``MARGINS``) and ``configurations`` (``e9.config_means``)."""
    return {
        "meta": {
            pool: e9.meta_table(pool_of(records, pool), n_resamples, METRICS) for pool in POOLS
        },
        "margins": [margin_row(records, *m, n_resamples) for m in MARGINS],
        "configurations": e9.config_means(records, METRICS),
    }


def verdicts(report: GroupReport | RuleReport, ranked: dict) -> None:
    """Every claim of ``CLAIMS`` on one tie rule's ``rank`` (a smoke run's report states none;
    the other rule's through a ``RuleReport``); the ranking claims are void (None) where the
    ``span`` precondition fails."""
    every = {r.metric: r for r in ranked["meta"]["all"]}
    latent = {r.metric: r for r in ranked["meta"]["latent"]}
    overall = ranked["margins"][0]
    text = fmt_rho({"rho": overall.margin, "low": overall.low, "high": overall.high})
    results: dict[str, tuple[bool | None, str]] = {
        "span": e9.spans(ranked["configurations"]),
        "drpe_over_etot": (
            None if overall.low is None else overall.low > 0,
            f"margin {text} over {overall.n} models",
        ),
        "drpe_over_etot_latent": e9.beats(latent, "DRPE", "E_tot"),
        "drpe_over_epred": e9.beats(latent, "DRPE", "E_pred"),
        "excess_negative": e9.ci_side(latent, "E_excess", -1),
        "regret_strong": e9.ci_side(every, "decision_regret", -1, e9.STRONG_RHO),
    }
    spanned = results["span"][0]
    for key, claim in CLAIMS.items():
        ok, detail = results[key]
        if key != "span" and not spanned:
            ok, detail = None, f"void: the zoo does not span success ({detail})"
        report.verdict(claim, ok, detail)


def tables(report: GroupReport, ranked: dict, cfg: E11Config, n: int, ties: str) -> None:
    """One tie rule's tables: ρ with success over every pool, the margins and the
    configurations' means."""
    for pool, what in POOLS.items():
        rows = ranked["meta"][pool]
        e9.rho_table(
            report,
            f"Which metric ranks {what} by closed-loop success (ties={ties}, sorted by |ρ|)",
            rows,
            f"Spearman ρ over the models of {what} ({n} models in the zoo: "
            f"{len(e9.configurations(cfg))} configurations x {len(cfg.train_seeds)} seeds), "
            f"success at depth {cfg.protocol.depth} over {len(cfg.protocol.seeds)} seeds × "
            f"{cfg.protocol.episodes} episodes each, tied best first actions broken by "
            f"`{ties}`. CIs: {cfg.n_resamples} bootstrap resamples of configurations then the "
            "training seeds inside each drawn one, then of models (E9's). E_pred and E_excess "
            "are defined for the latent families only. The paper's reference for state models "
            "is Table 1 (grid of 48: ρ E_tot −.32, DRPE −.98).",
        )
    report.table(
        f"Margins: |ρ(a)| − |ρ(b)| with success (ties={ties})",
        ["pool", "a", "b", "models", "margin (95% CI: configurations → seeds)", "resamples kept"],
        [
            [
                POOLS[m.pool],
                m.a,
                m.b,
                m.n,
                fmt_rho({"rho": m.margin, "low": m.low, "high": m.high}),
                "—" if m.defined is None else f"{m.defined:.0%}",
            ]
            for m in ranked["margins"]
        ],
        "Both ρ of a margin are taken on the same resample (configurations, then seeds); a "
        "resample where either is undefined is left out.",
    )
    keys = ("E_tot", "DRPE", "E_excess", "decision_regret", "decision_agreement")
    e9.configs_report(report, ranked["configurations"], ties, keys, "Configurations", METRICS)


def family_times(records) -> dict[str, dict]:
    """Per family: models, mean training and measuring seconds."""
    out = {}
    for family in dict.fromkeys(r.family for r in records):
        rs = [r for r in records if r.family == family]
        out[family] = {
            "models": len(rs),
            "train_seconds": float(np.mean([r.train_seconds for r in rs])),
            "eval_seconds": float(np.mean([r.eval_seconds for r in rs])),
        }
    return out


def run(ctx: GroupContext) -> GroupReport:
    """E11 (see the module docstring)."""
    cfg: E11Config = ctx.config
    rules = tie_rules(ctx.reading.ties)
    t0 = time.perf_counter()
    trained = e9.train_zoo(ctx, cfg)
    train_wall = time.perf_counter() - t0
    ctx.log(f"trained {len(trained)} models in {train_wall:.0f} s")
    t0 = time.perf_counter()
    records = e9.evaluate_zoo(ctx, cfg, trained, METRICS)
    eval_wall = time.perf_counter() - t0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    report = GroupReport(
        "E11 — which metric ranks the field's world-model architectures (§7 limitation)",
        ctx.profile,
    )
    by_rule = {rule: rank(records[rule], cfg.n_resamples) for rule in rules}
    for rule in rules:
        verdicts(report if rule == rules[0] else RuleReport(report, rule), by_rule[rule])
    with cpu_threads(ctx):
        references = e9.reference_sanity(ctx, cfg, report)
    for rule in rules:
        suffix = "" if rule == rules[0] else f"_ties-{rule}"
        tables(report, by_rule[rule], cfg, len(records[rule]), rule)
        ctx.write_csv(f"models{suffix}.csv", records[rule])
        ctx.write_csv(f"meta{suffix}.csv", [r for p in POOLS for r in by_rule[rule]["meta"][p]])
        ctx.write_csv(f"margins{suffix}.csv", by_rule[rule]["margins"])
        figure = e9.zoo_figure(records[rule], by_rule[rule]["meta"]["all"])
        ctx.save_figure(figure, f"fig_architecture_zoo{suffix}.png")
        report.figure(
            f"fig_architecture_zoo{suffix}.png",
            f"Each metric against closed-loop success under ties={rule}, one point per model "
            "(colour: family; squares: grid, circles: pixels, triangles: state)",
        )
    times = family_times(records[rules[0]])
    load_text = "" if load is None else f" (1-minute load average at the end: {load:.1f})"
    report.text(
        f"Wall time: training {len(trained)} models took {train_wall:.0f} s, measuring them "
        f"under {len(rules)} tie rules {eval_wall:.0f} s on {ctx.device.type}{load_text}. Per "
        "family, mean training / measuring seconds per model: "
        + "; ".join(
            f"{f} {t['train_seconds']:.0f} / {t['eval_seconds']:.0f}" for f, t in times.items()
        )
        + "."
    )
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "ties": list(rules),
            "models": records[rules[0]],
            "by_ties": {rule: {"models": records[rule], **by_rule[rule]} for rule in rules},
            "references": references,
            "claims": CLAIMS,
            "verdicts_stated": not report.smoke,
            "family_times": times,
            "train_wall_seconds": train_wall,
            "eval_wall_seconds": eval_wall,
        },
    )
    return report
