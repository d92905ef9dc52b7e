"""E2: DRPE predicts planning quality while total error does not (paper §5.2, Table 1, Fig. 4, 9).

Spearman ρ of ``E_tot`` and of DRPE with closed-loop success, with seeded bootstrap 95% CIs
(2,000 resamples), over the model pools of Table 1:

- ``grid``: the 48 controlled models of E1 (read from ``<out>/e1`` when a finished e1 of the
  same profile and config exists, else computed here);
- ``sweep_graded`` / ``sweep_binary``: the 24-model relevance sweep ``σR ∈ {0, .1, .2, .25,
  .3, .35}`` x ``σI ∈ {0, .3, .6, 1.2}``, depth 4, 4 seeds x 30 episodes, DRPE with graded and
  with binary weights. Its seeds (100-103) differ from the grid's, so it is an independent
  replication rather than a subset of the grid's episodes;
- ``all``: the grid plus the learned models of ``<out>/e3/models.json`` whose family is
  ``"learned"`` (the paper's 7 variants); ``learned``: those alone. Without a finished e3 both
  rows say "learned pool not available: run e3" and the controlled pools are still reported.

Also the iso-error-pair correlation (Spearman of ``|ΔDRPE|`` against ``|Δsuccess|`` over pairs
within 10% E_tot; paper ρ = .97 over 77 pairs) and the scatter figures. DRPE means the graded
weighting unless a row says binary.

Writes ``spearman.csv``, ``sweep_models.csv``, ``pool.csv`` (every pooled model),
``iso_pairs.csv``, ``results.json``, ``fig4_scatter.png`` and ``fig9_etot_by_sigma_i.png``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridplan.experiments import paper
from gridplan.experiments.figures import scatter_figures
from gridplan.experiments.pools import controlled_grid, sweep_records
from gridplan.experiments.records import LearnedRecord, Record, read_models
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E2Config
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho
from gridplan.metrics.stats import IsoPairs, SpearmanResult, iso_error_pairs, spearman_ci

#: DRPE's ρ at most this, and E_tot's |ρ| smaller by at least MIN_GAP (paper Table 1: -0.98
#: against -0.32 on the grid).
MAX_DRPE_RHO = -0.9
MIN_GAP = 0.4
#: The iso-pair correlation counts as reproduced when at least this (paper 0.97).
MIN_PAIR_RHO = 0.8
NOT_AVAILABLE = "learned pool not available: run e3"
LABELS = {
    "all": "All models",
    "grid": "Controlled grid",
    "sweep_graded": "Relevance sweep, graded",
    "sweep_binary": "Relevance sweep, binary",
    "learned": "Learned variants",
}


@dataclass(frozen=True)
class DrpePool:
    """A model pool of Table 1 and the DRPE weighting it is scored with."""

    records: list
    drpe_key: str


@dataclass(frozen=True)
class PoolCorrelation:
    """Spearman ρ of E_tot and of DRPE with success over one pool (None: < 3 models)."""

    n: int
    E_tot: SpearmanResult | None
    DRPE: SpearmanResult | None
    DRPE_weights: str


@dataclass(frozen=True, kw_only=True)
class SpearmanRow(Record):
    """One metric of one pool (``spearman.csv``)."""

    pool: str
    n: int
    metric: str
    rho: float | None
    low: float | None
    high: float | None
    paper_rho: float
    paper_n: float


@dataclass(frozen=True, kw_only=True)
class PairRow(Record):
    """One iso-error pair of a pool (``iso_pairs.csv``)."""

    pool: str
    model_a: str
    model_b: str
    delta_DRPE: float
    delta_success: float


# --------------------------------------------------------------------------- compute


def _col(records, key: str) -> np.ndarray:
    return np.array([float(getattr(r, key)) for r in records])


def learned_pool(ctx: GroupContext) -> list[LearnedRecord] | None:
    """The ``"learned"`` models of a finished e3 (its ``models.json``), or None."""
    e3 = ctx.finished_group("e3")
    learned = None
    if e3 is not None:
        learned = [r for r in read_models(e3, LearnedRecord) if r.family == "learned"]
    if not learned:
        ctx.log(NOT_AVAILABLE)
        return None
    return learned


def pools(grid: list, sweep: list, learned: list | None) -> dict[str, DrpePool | None]:
    """Table 1's pools (None where the learned models are missing)."""
    return {
        "all": DrpePool(grid + learned, "DRPE_graded") if learned else None,
        "grid": DrpePool(grid, "DRPE_graded"),
        "sweep_graded": DrpePool(sweep, "DRPE_graded"),
        "sweep_binary": DrpePool(sweep, "DRPE_binary"),
        "learned": DrpePool(learned, "DRPE_graded") if learned else None,
    }


def correlate(pool: DrpePool | None, n_resamples: int) -> PoolCorrelation | None:
    """Spearman ρ with success of E_tot and of the pool's DRPE."""
    if pool is None:
        return None
    recs = pool.records

    def rho(key: str) -> SpearmanResult | None:
        if len(recs) < 3:
            return None
        return spearman_ci(_col(recs, key), _col(recs, "success"), n_resamples)

    return PoolCorrelation(len(recs), rho("E_tot"), rho(pool.drpe_key), pool.drpe_key)


def iso_pairs(pool: DrpePool, cfg: E2Config) -> IsoPairs:
    """The pool's iso-error pairs (graded DRPE)."""
    recs = pool.records
    return iso_error_pairs(
        _col(recs, "E_tot"),
        _col(recs, "DRPE_graded"),
        _col(recs, "success"),
        cfg.iso_tolerance,
        cfg.n_resamples,
    )


def spearman_rows(corr: dict[str, PoolCorrelation | None]) -> list[SpearmanRow]:
    """``spearman.csv``: both metrics of every available pool."""
    rows = []
    for key, c in corr.items():
        if c is None:
            continue
        ref = paper.TABLE_1[key]
        for metric, r in [("E_tot", c.E_tot), ("DRPE", c.DRPE)]:
            rows.append(
                SpearmanRow(
                    pool=key,
                    n=c.n,
                    metric=metric if metric == "E_tot" else c.DRPE_weights,
                    rho=r.rho if r else None,
                    low=r.low if r else None,
                    high=r.high if r else None,
                    paper_rho=ref[metric].value,
                    paper_n=ref["n"].value,
                )
            )
    return rows


def pair_rows(pools_: dict[str, DrpePool | None], iso: dict[str, IsoPairs]) -> list[PairRow]:
    """``iso_pairs.csv``: every pair of every pool with pairs."""
    rows = []
    for key, res in iso.items():
        recs = pools_[key].records
        for (i, j), dd, ds in zip(res.pairs, res.delta_drpe, res.delta_success, strict=True):
            rows.append(
                PairRow(
                    pool=key,
                    model_a=recs[i].name,
                    model_b=recs[j].name,
                    delta_DRPE=dd,
                    delta_success=ds,
                )
            )
    return rows


# --------------------------------------------------------------------------- tables


def table1(report: GroupReport, corr: dict, grid_source: str, n_resamples: int) -> None:
    """Table 1 — Spearman ρ with closed-loop success, ours beside the paper's."""
    rows = []
    for key, c in corr.items():
        ref = paper.TABLE_1[key]
        ours = ["n/a", NOT_AVAILABLE, NOT_AVAILABLE]
        if c is not None:
            ours = [c.n, fmt_rho(c.E_tot), fmt_rho(c.DRPE)]
        rows.append(
            [
                LABELS[key],
                ours[0],
                ref["n"].text,
                ours[1],
                ref["E_tot"].cell(),
                ours[2],
                ref["DRPE"].cell(),
            ]
        )
    report.table(
        "Table 1 — Spearman ρ with closed-loop success",
        ["model pool", "n", "n (paper)", "E_tot ρ", "E_tot ρ (paper)", "DRPE ρ", "DRPE ρ (paper)"],
        rows,
        f"The grid pool was {'read from e1' if grid_source == 'e1' else 'computed here'}. "
        "Brackets: seeded bootstrap 95% CIs "
        f"({n_resamples} resamples). DRPE: graded weights unless the row says binary.",
    )


def pairs_table(report: GroupReport, iso: dict[str, IsoPairs]) -> None:
    """The iso-pair correlation of the grid and of all models."""
    ref = paper.ISO_PAIRS
    rows = []
    for key in ("grid", "all"):
        res = iso.get(key)
        ours = ["n/a", NOT_AVAILABLE] if res is None else [len(res), fmt_rho(res.spearman)]
        rows.append([LABELS[key], *ours, ref["rho"].cell(), ref["n_pairs"].text])
    report.table(
        "Iso-error pairs (E_tot within 10%): Spearman of |ΔDRPE| against |Δsuccess|",
        ["pool", "pairs", "ρ", "ρ (paper)", "pairs (paper)"],
        rows,
    )


# --------------------------------------------------------------------------- verdicts


def _undefined(c: PoolCorrelation) -> str | None:
    if np.isnan(c.DRPE.rho) or np.isnan(c.E_tot.rho):
        return f"n = {c.n}: ρ undefined (success or error constant over the pool)"
    return None


def decoupled(corr: dict, key: str) -> tuple[bool | None, str]:
    """Whether DRPE tracks success (ρ ≤ MAX_DRPE_RHO) and E_tot does not (|ρ| smaller by
    MIN_GAP) over pool ``key``, and the numbers."""
    c = corr[key]
    if c is None or c.DRPE is None or c.E_tot is None:
        return None, NOT_AVAILABLE if key == "all" else "too few models"
    reason = _undefined(c)
    if reason:
        return None, reason
    rd, re = c.DRPE.rho, c.E_tot.rho
    ok = rd <= MAX_DRPE_RHO and abs(re) <= abs(rd) - MIN_GAP
    ref = paper.TABLE_1[key]
    return ok, (
        f"n = {c.n}: DRPE ρ {fmt(rd, 2)}, E_tot ρ {fmt(re, 2)} (paper {ref['DRPE'].text} "
        f"vs {ref['E_tot'].text}; criterion DRPE ρ ≤ {MAX_DRPE_RHO} and |E_tot ρ| smaller "
        f"by ≥ {MIN_GAP})"
    )


def pooled(corr: dict) -> tuple[bool | None, str]:
    """Whether DRPE still beats E_tot by MIN_GAP over the grid plus the learned models."""
    c = corr["all"]
    if c is None:
        return None, NOT_AVAILABLE
    reason = _undefined(c)
    if reason:
        return None, reason
    rd, re = c.DRPE.rho, c.E_tot.rho
    ref = paper.TABLE_1["all"]
    return abs(rd) - abs(re) >= MIN_GAP, (
        f"n = {c.n}: DRPE ρ {fmt(rd, 2)}, E_tot ρ {fmt(re, 2)} (paper {ref['DRPE'].text} vs "
        f"{ref['E_tot'].text}; criterion |DRPE ρ| − |E_tot ρ| ≥ {MIN_GAP})"
    )


def verdicts(report: GroupReport, corr: dict, iso: dict[str, IsoPairs]) -> None:
    """The four effects of Table 1 and §5.2."""
    report.verdict(
        "In the controlled grid DRPE tracks success and E_tot does not (Table 1)",
        *decoupled(corr, "grid"),
    )
    ok_g, _ = decoupled(corr, "sweep_graded")
    ok_b, _ = decoupled(corr, "sweep_binary")
    cg, cb = corr["sweep_graded"], corr["sweep_binary"]
    ref = paper.TABLE_1["sweep_graded"]
    report.verdict(
        "In the relevance sweep graded and binary weights both track success (Table 1)",
        None if ok_g is None or ok_b is None else ok_g and ok_b,
        f"n = {cg.n}: DRPE ρ graded {fmt(cg.DRPE.rho, 2)}, binary "
        f"{fmt(cb.DRPE.rho, 2)}; E_tot ρ {fmt(cg.E_tot.rho, 2)} (paper "
        f"{ref['DRPE'].text}, {paper.TABLE_1['sweep_binary']['DRPE'].text} vs "
        f"{ref['E_tot'].text}; the grid's criterion for both weightings)",
    )
    grid_iso = iso.get("grid")
    claim = "|ΔDRPE| tracks |Δsuccess| across iso-error pairs (§5.2)"
    if grid_iso is None or np.isnan(grid_iso.spearman.rho):
        report.verdict(claim, None, "fewer than 3 iso-error pairs with varying gaps")
    else:
        report.verdict(
            claim,
            grid_iso.spearman.rho >= MIN_PAIR_RHO,
            f"grid: ρ {fmt_rho(grid_iso.spearman)} over {len(grid_iso)} pairs (paper "
            f"{paper.ISO_PAIRS['rho'].text} over {paper.ISO_PAIRS['n_pairs'].text}; criterion "
            f"ρ ≥ {MIN_PAIR_RHO})",
        )
    report.verdict(
        "Pooled with the learned models DRPE still tracks success better (Table 1)",
        *pooled(corr),
    )


# --------------------------------------------------------------------------- run


def run(ctx: GroupContext) -> GroupReport:
    """E2 (see the module docstring)."""
    cfg: E2Config = ctx.config
    grid, grid_source = controlled_grid(ctx)
    sweep = sweep_records(ctx, cfg)
    learned = learned_pool(ctx)
    by_pool = pools(grid, sweep, learned)
    corr = {key: correlate(pool, cfg.n_resamples) for key, pool in by_pool.items()}
    iso = {key: iso_pairs(by_pool[key], cfg) for key in ("grid", "all") if by_pool[key]}

    ctx.write_csv("sweep_models.csv", sweep)
    ctx.write_csv("pool.csv", grid + (learned or []))
    ctx.write_csv("spearman.csv", spearman_rows(corr))
    ctx.write_csv("iso_pairs.csv", pair_rows(by_pool, iso), PairRow.header())
    fig4, fig9 = scatter_figures(grid, learned)
    ctx.save_figure(fig4, "fig4_scatter.png")
    ctx.save_figure(fig9, "fig9_etot_by_sigma_i.png")

    report = GroupReport(
        "E2 — DRPE predicts planning quality, total error does not (§5.2, Table 1)"
    )
    table1(report, corr, grid_source, cfg.n_resamples)
    pairs_table(report, iso)
    report.figure("fig4_scatter.png", "Success against E_tot and DRPE, coloured by σR (Fig. 4)")
    report.figure("fig9_etot_by_sigma_i.png", "Success against E_tot, coloured by σI (Fig. 9)")
    verdicts(report, corr, iso)
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "grid_source": grid_source,
            "learned_available": learned is not None,
            "spearman": corr,
            "iso_pairs": {k: {**v.to_dict(), "strongest": v.strongest(5)} for k, v in iso.items()},
            "sweep": sweep,
            "learned": learned,
            "paper": {"table1": paper.TABLE_1, "iso_pairs": paper.ISO_PAIRS},
        },
    )
    return report
