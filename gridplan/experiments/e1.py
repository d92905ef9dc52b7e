"""E1: matched total error, different decision quality (paper §5.1, Fig. 2, Table 2, appendix F, J).

The controlled 8x6 grid ``M(σR, σI)``, ``σR ∈ {0, .05, ..., .35}`` grid cells on the relevant
dims, ``σI ∈ {0, .1, .2, .3, .6, 1.2}`` normalized units on the irrelevant ones: all 48 settings
planned in one batched closed loop under the controlled protocol (depth 4, 10 seeds x 30
episodes) and scored in one batch by ``prediction_metrics`` on the shared held-out windows
(``gridplan.experiments.pools``).

Writes ``models.json``/``models.csv`` (the full grid, appendix F; read by e2, e4 and e6),
``table2.csv``, ``iso_pairs.csv`` (every pair within 10% E_tot, strongest first, appendix J),
``rows.csv`` (success and E_tot along each fixed-σR row), ``results.json`` and
``fig2_heatmap.png`` (success over (σR, σI) with iso-E_tot contours).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2_contingency

from gridplan.core.readings import Reading
from gridplan.experiments import paper
from gridplan.experiments.figures import heatmap_figure
from gridplan.experiments.pools import grid_records
from gridplan.experiments.records import ControlledRecord, Record, write_models
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E1Config
from gridplan.experiments.tables import GroupReport, fmt, fmt_rho, fmt_se, paper_cell
from gridplan.metrics.stats import IsoPairs, difference_se, iso_error_pairs

#: Success gap (absolute) an iso-error pair must show for the effect to count as reproduced
#: (paper §5.1: 60 points).
MIN_ISO_GAP = 0.40
#: A fixed-σR row counts as "statistically constant" when a chi-square test of homogeneity of
#: its success counts across σI does not reject at this level.
ROW_ALPHA = 0.01
#: Table 2's total errors count as reproduced when each is within this fraction of the
#: paper's (its oracle floor, 0.020, is the most sensitive to the reading).
SCALE_TOLERANCE = 0.25
#: The rows' E_tot factors count as the paper's ×14-×91 when both ends are within this factor.
FACTOR_TOLERANCE = 1.5
#: A success difference counts when it exceeds this many standard errors of the difference.
Z = 2.0
#: Table 2's rows: label -> (σR, σI).
TABLE_2_MODELS = {"oracle": (0.0, 0.0), "M(0, 0.3)": (0.0, 0.3), "M(0.35, 0.1)": (0.35, 0.1)}
PARTNER = "iso partner of M(0, 0.3)"


@dataclass(frozen=True, kw_only=True)
class IsoPairRow(Record):
    """One iso-error pair of the grid (``iso_pairs.csv``)."""

    model_a: str
    model_b: str
    E_tot_a: float
    E_tot_b: float
    E_tot_rel_gap: float
    DRPE_a: float
    DRPE_b: float
    success_a: float
    success_b: float
    delta_DRPE: float
    delta_success: float


@dataclass(frozen=True, kw_only=True)
class Table2Row(Record):
    """One row of Table 2 (``table2.csv``); ours None when the model is not in this grid."""

    row: str
    model: str
    E_tot: float | None
    E_tot_paper: float | None
    DRPE_graded: float | None
    DRPE_paper: float | None
    success: float | None
    success_se: float | None
    success_paper: float | None

    @classmethod
    def of(cls, label: str, rec: ControlledRecord | None) -> Table2Row:
        ref = paper.TABLE_2.get(label, {})

        def value(key: str) -> float | None:
            return ref[key].value if key in ref else None

        return cls(
            row=label,
            model=rec.name if rec else "not in this grid",
            E_tot=rec.E_tot if rec else None,
            E_tot_paper=value("E_tot"),
            DRPE_graded=rec.DRPE_graded if rec else None,
            DRPE_paper=value("DRPE"),
            success=rec.success if rec else None,
            success_se=rec.success_se if rec else None,
            success_paper=value("success"),
        )


@dataclass(frozen=True, kw_only=True)
class RowSummary(Record):
    """A fixed-σR row of the grid (``rows.csv``): E_tot range and factor, success range, and
    the chi-square p of homogeneity of its success counts across σI (1 without variation)."""

    sigma_r: float
    E_tot_min: float
    E_tot_max: float
    E_tot_factor: float
    success_min: float
    success_max: float
    success_spread: float
    chi2_p: float


# --------------------------------------------------------------------------- compute


def find(records: list[ControlledRecord], sigma_r: float, sigma_i: float) -> int | None:
    """Index of the record of ``M(sigma_r, sigma_i)``, or None."""
    for k, r in enumerate(records):
        if np.isclose(r.sigma_r, sigma_r) and np.isclose(r.sigma_i, sigma_i):
            return k
    return None


def iso_partner(records: list[ControlledRecord], ref: int) -> int | None:
    """The model with the largest σR closest in E_tot to ``records[ref]`` (the paper pairs
    the irrelevant-only M(0, 0.3) with the strongest relevant noise, §5.1)."""
    top = max(r.sigma_r for r in records)
    cands = [k for k, r in enumerate(records) if np.isclose(r.sigma_r, top) and k != ref]
    if not cands or np.isclose(top, records[ref].sigma_r):
        return None
    e = records[ref].E_tot
    return min(cands, key=lambda k: abs(records[k].E_tot - e))


def rel_gap(a: float, b: float) -> float:
    """Relative E_tot difference ``|a - b| / max(a, b)``, as in the iso-error criterion."""
    return abs(a - b) / max(a, b) if max(a, b) > 0 else 0.0


def iso_pairs(records: list[ControlledRecord], cfg: E1Config) -> tuple[IsoPairs, list[IsoPairRow]]:
    """The grid's iso-error pairs and their rows, strongest success gap first."""
    e = np.array([r.E_tot for r in records])
    d = np.array([r.DRPE_graded for r in records])
    s = np.array([r.success for r in records])
    iso = iso_error_pairs(e, d, s, cfg.iso_tolerance, cfg.n_resamples)
    rows = []
    for p in np.lexsort((-iso.delta_drpe, -iso.delta_success)):
        i, j = (int(v) for v in iso.pairs[p])
        rows.append(
            IsoPairRow(
                model_a=records[i].name,
                model_b=records[j].name,
                E_tot_a=e[i],
                E_tot_b=e[j],
                E_tot_rel_gap=rel_gap(e[i], e[j]),
                DRPE_a=d[i],
                DRPE_b=d[j],
                success_a=s[i],
                success_b=s[j],
                delta_DRPE=float(iso.delta_drpe[p]),
                delta_success=float(iso.delta_success[p]),
            )
        )
    return iso, rows


def table2_models(records: list[ControlledRecord]) -> dict[str, int | None]:
    """Table 2's label -> record index, plus the σR = max partner closest in E_tot to
    M(0, 0.3)."""
    idx = {label: find(records, *sigma) for label, sigma in TABLE_2_MODELS.items()}
    i03 = idx["M(0, 0.3)"]
    idx[PARTNER] = iso_partner(records, i03) if i03 is not None else None
    return idx


def row_homogeneity(records: list[ControlledRecord]) -> list[RowSummary]:
    """One ``RowSummary`` per fixed-σR row."""
    rows = []
    for sr in sorted({r.sigma_r for r in records}):
        row = [r for r in records if np.isclose(r.sigma_r, sr)]
        wins = np.array([round(r.success * r.n_episodes) for r in row])
        n = np.array([r.n_episodes for r in row])
        table = np.stack([wins, n - wins])
        if len(row) < 2 or (table.sum(axis=1) == 0).any():
            p = 1.0
        else:
            p = float(chi2_contingency(table).pvalue)
        e = [r.E_tot for r in row]
        s = [r.success for r in row]
        rows.append(
            RowSummary(
                sigma_r=sr,
                E_tot_min=min(e),
                E_tot_max=max(e),
                E_tot_factor=max(e) / min(e) if min(e) > 0 else float("nan"),
                success_min=min(s),
                success_max=max(s),
                success_spread=max(s) - min(s),
                chi2_p=p,
            )
        )
    return rows


# --------------------------------------------------------------------------- tables


def error_channels(reading: Reading) -> list[str]:
    """What keeps this reading's errors below the paper's, switch by switch (the readings
    table of ``docs/RESULTS.md`` measures each); empty when none does."""
    out = []
    if reading.bits == "thresholded":
        out.append(
            "σI on c1 and c2 is re-read as a clean bit every step, so it never compounds (carried "
            "noisy it is a random walk, t σ² after t steps)"
        )
    if reading.clamp:
        out.append("every prediction is clamped to [0, 1], so no squared error exceeds 1")
    if reading.flag_noise == "sigma_r/7":
        out.append(
            "the carrying and door flags get σR / 7 ≤ 0.05, ten standard deviations from their "
            "0.5 threshold, so they never flip"
        )
    elif reading.flags == "thresholded":
        out.append("flag noise is drawn afresh every step and does not compound")
    if reading.distractors == "sampled":
        out.append(
            "the oracle samples d1's walk and d2's redraw, doubling their error (2 Var instead "
            "of Var: the floor is about 0.046, predicting their expected position 0.023)"
        )
    return out


def _table2_note(
    records: list[ControlledRecord], idx: dict, tolerance: float, reading: Reading
) -> str:
    i03, i35, partner = idx["M(0, 0.3)"], idx["M(0.35, 0.1)"], idx[PARTNER]
    if i03 is None or i35 is None or partner is None:
        return ""
    a, b, c = records[i03], records[i35], records[partner]
    gap_b = rel_gap(a.E_tot, b.E_tot)
    gap_c = rel_gap(a.E_tot, c.E_tot)
    within = gap_b <= tolerance
    note = (
        f"Under the reading `{reading.name}` M(0, 0.3) and M(0.35, 0.1) are "
        f"{'' if within else 'NOT '}within {100 * tolerance:.0f}% in E_tot ({fmt(a.E_tot)} vs "
        f"{fmt(b.E_tot)}, {100 * gap_b:.0f}% apart; paper 1%). "
    )
    channels = error_channels(reading)
    if channels:
        note += "Below the paper's totals because " + "; ".join(channels) + ". "
    return note + (
        f"The σR = {c.sigma_r:g} model closest in E_tot to M(0, 0.3) is {c.name} "
        f"({fmt(c.E_tot)}, {100 * gap_c:.0f}% apart): success "
        f"{fmt(a.success, 2)} vs {fmt(c.success, 2)}, a gap of "
        f"{100 * abs(a.success - c.success):.0f} points (paper: 60 points at 1%). "
        "DRPE is graded-weighted (dims 0-5), E_tot over all 12 dims, both on H = 10 "
        "teacher-forced rollouts."
    )


def table2(report: GroupReport, rows: list[Table2Row], note: str) -> None:
    """Table 2 — ours beside the paper's."""
    cells = []
    for t in rows:
        ref = paper.TABLE_2.get(t.row, {})
        found = t.E_tot is not None
        cells.append(
            [
                f"{t.row} = {t.model}" if t.row != t.model and found else t.row,
                fmt(t.E_tot),
                paper_cell(ref, "E_tot"),
                fmt(t.DRPE_graded),
                paper_cell(ref, "DRPE"),
                fmt_se(t.success, t.success_se) if found else "n/a",
                paper_cell(ref, "success"),
            ]
        )
    headers = ["model", "E_tot", "E_tot (paper)", "DRPE", "DRPE (paper)", "success"]
    headers.append("success (paper)")
    report.table("Table 2 — total error does not determine decision quality", headers, cells, note)


def _pair_cells(records: list[ControlledRecord], p: dict) -> list[str]:
    a, b = records[p["i"]], records[p["j"]]
    return [
        a.name,
        b.name,
        f"{fmt(a.E_tot)} / {fmt(b.E_tot)}",
        f"{100 * rel_gap(a.E_tot, b.E_tot):.1f}%",
        f"{fmt(a.DRPE_graded)} / {fmt(b.DRPE_graded)}",
        f"{fmt(a.success, 2)} / {fmt(b.success, 2)}",
        f"{100 * p['delta_success']:.0f}",
    ]


def pairs_table(report: GroupReport, records: list[ControlledRecord], iso: IsoPairs) -> None:
    """The strongest iso-error pairs (appendix J)."""
    headers = ["model A", "model B", "E_tot A / B", "ΔE_tot", "DRPE A / B", "success A / B"]
    headers.append("gap (points)")
    report.table(
        "Strongest iso-error pairs (E_tot within 10%; appendix J)",
        headers,
        [_pair_cells(records, p) for p in iso.strongest(5)],
        f"{len(iso)} iso-error pairs in the grid (paper: 77 over its pool); Spearman of "
        f"|ΔDRPE| against |Δsuccess| over them: {fmt_rho(iso.spearman)} "
        f"(paper {paper.ISO_PAIRS['rho'].cell()}). Every pair: `iso_pairs.csv`.",
    )


def rows_table(report: GroupReport, rows: list[RowSummary], reading: Reading) -> None:
    """Success and E_tot along each fixed-σR row (§5.1)."""
    report.table(
        "Rows of fixed σR: success is flat while E_tot varies (§5.1)",
        ["σR", "E_tot min–max", "E_tot factor", "success min–max", "χ² p (homogeneity)"],
        [
            [
                f"{r.sigma_r:g}",
                f"{fmt(r.E_tot_min)}–{fmt(r.E_tot_max)}",
                f"×{fmt(r.E_tot_factor, 1)}",
                f"{fmt(r.success_min, 2)}–{fmt(r.success_max, 2)}",
                fmt(r.chi2_p, 3),
            ]
            for r in rows
        ],
        "Paper: along any row success is statistically constant while E_tot varies by a factor "
        f"of {paper.E1_TEXT['row_etot_factor_low'].text} to "
        f"{paper.E1_TEXT['row_etot_factor_high'].text}. A row's factor is its largest E_tot, "
        "M(σR, 1.2), over its smallest, M(σR, 0)"
        + (
            ": ours stay smaller because " + "; ".join(error_channels(reading)) + "."
            if error_channels(reading)
            else "."
        ),
    )


# --------------------------------------------------------------------------- verdicts


def _exact_pair_verdict(
    report: GroupReport, records: list[ControlledRecord], idx: dict, tolerance: float
) -> None:
    claim = (
        "The paper's own pair M(0, 0.3) and M(0.35, 0.1) is matched in total error and differs "
        "widely in success (Table 2: 1% apart, 60 points)"
    )
    i03, i35 = idx["M(0, 0.3)"], idx["M(0.35, 0.1)"]
    if i03 is None or i35 is None:
        report.verdict(claim, None, "the pair is not in this grid")
        return
    a, b = records[i03], records[i35]
    gap = rel_gap(a.E_tot, b.E_tot)
    report.verdict(
        claim,
        gap <= tolerance and a.success - b.success >= MIN_ISO_GAP,
        f"E_tot {fmt(a.E_tot)} vs {fmt(b.E_tot)} ({100 * gap:.0f}% apart), success "
        f"{fmt(a.success, 2)} vs {fmt(b.success, 2)} ({100 * (a.success - b.success):.0f} "
        f"points); criterion within {100 * tolerance:.0f}% and ≥ {100 * MIN_ISO_GAP:.0f} points",
    )


def _scale_verdict(report: GroupReport, records: list[ControlledRecord], idx: dict) -> None:
    claim = "Table 2's total errors: oracle 0.020, M(0, 0.3) 0.151, M(0.35, 0.1) 0.152"
    found = {label: idx[label] for label in TABLE_2_MODELS}
    if any(k is None for k in found.values()):
        report.verdict(claim, None, "a Table 2 model is not in this grid")
        return
    ratios = {
        label: records[k].E_tot / paper.TABLE_2[label]["E_tot"].value for label, k in found.items()
    }
    report.verdict(
        claim,
        all(abs(r - 1) <= SCALE_TOLERANCE for r in ratios.values()),
        ", ".join(
            f"{label} {fmt(records[found[label]].E_tot)} (×{r:.2f})" for label, r in ratios.items()
        )
        + f"; criterion each within {100 * SCALE_TOLERANCE:.0f}% of the paper's",
    )


def _row_factor_verdict(report: GroupReport, rows: list[RowSummary]) -> None:
    low, high = (paper.E1_TEXT[k].value for k in ("row_etot_factor_low", "row_etot_factor_high"))
    factors = [r.E_tot_factor for r in rows if np.isfinite(r.E_tot_factor)]
    ours = (min(factors), max(factors)) if factors else (float("nan"), float("nan"))
    within = all(
        ref / FACTOR_TOLERANCE <= x <= ref * FACTOR_TOLERANCE
        for x, ref in zip(ours, (low, high), strict=True)
    )
    report.verdict(
        f"Along a row of fixed σR, E_tot varies by a factor of {low:g} to {high:g} (§5.1)",
        within if factors else None,
        f"×{fmt(ours[0], 1)}–×{fmt(ours[1], 1)} over the rows; criterion both ends within a "
        f"factor {FACTOR_TOLERANCE:g} of the paper's",
    )


def _column_verdict(report: GroupReport, records: list[ControlledRecord]) -> None:
    rises = []
    for si in sorted({r.sigma_i for r in records}):
        column = sorted((r for r in records if np.isclose(r.sigma_i, si)), key=lambda r: r.sigma_r)
        for lo, hi in itertools.pairwise(column):
            rise, se = difference_se(hi.success, hi.success_se, lo.success, lo.success_se)
            if rise > Z * se:
                rises.append(f"{lo.name} → {hi.name}: {fmt(lo.success, 2)} → {fmt(hi.success, 2)}")
    report.verdict(
        "Along any column of fixed σI, success is non-increasing in σR (§5.1)",
        not rises,
        (f"rises beyond {Z:g} SE: {'; '.join(rises)}" if rises else
         f"no rise beyond {Z:g} SE between neighbouring σR in any column"),
    )


def verdicts(
    report: GroupReport,
    records: list[ControlledRecord],
    iso: IsoPairs,
    rows: list[RowSummary],
    idx: dict,
    tolerance: float,
) -> None:
    """The effects of §5.1, Table 2 and appendix J, and the sanity check of the rows."""
    strongest = iso.strongest(5)
    if not strongest:
        report.verdict(
            "Models matched in total error differ widely in success (§5.1)",
            False,
            "no iso-error pair in this grid",
        )
    else:
        best = strongest[0]
        a, b = records[best["i"]], records[best["j"]]
        report.verdict(
            "Models matched in total error (within 10%) differ widely in success (§5.1, Table 2)",
            best["delta_success"] >= MIN_ISO_GAP,
            f"strongest pair {a.name} vs {b.name}: E_tot {fmt(a.E_tot)} vs "
            f"{fmt(b.E_tot)} ({100 * rel_gap(a.E_tot, b.E_tot):.0f}% apart), success "
            f"{fmt(a.success, 2)} vs {fmt(b.success, 2)}, gap "
            f"{100 * best['delta_success']:.0f} points (criterion ≥ {100 * MIN_ISO_GAP:.0f}; "
            "paper 60 points at 1%)",
        )
    _exact_pair_verdict(report, records, idx, tolerance)
    _scale_verdict(report, records, idx)
    agree = [
        (p["drpe"][0] - p["drpe"][1]) * (p["success"][0] - p["success"][1]) < 0
        for p in strongest
        if p["success"][0] != p["success"][1]
    ]
    report.verdict(
        "In the strongest iso-error pairs the model with the larger DRPE plans worse (appendix J)",
        all(agree) if agree else None,
        f"{sum(agree)} of {len(agree)} of the strongest pairs with a success gap agree",
    )
    _row_factor_verdict(report, rows)
    _column_verdict(report, records)
    worst = min(rows, key=lambda r: r.chi2_p)
    report.sanity(
        "Along a row of fixed σR success is statistically constant (§5.1)",
        all(r.chi2_p >= ROW_ALPHA for r in rows),
        "the planner reads only the relevant dims and σI noise is independent of them, so the "
        "settings of a row plan alike in distribution (Prop. 1)",
        f"smallest χ² homogeneity p over the rows {fmt(worst.chi2_p, 3)} at σR = "
        f"{worst.sigma_r:g} (p ≥ {ROW_ALPHA} expected)",
    )


# --------------------------------------------------------------------------- run


def run(ctx: GroupContext) -> GroupReport:
    """E1 (see the module docstring)."""
    cfg: E1Config = ctx.config
    records = grid_records(ctx, cfg)
    iso, pair_rows = iso_pairs(records, cfg)
    idx = table2_models(records)
    t2 = [Table2Row.of(label, records[k] if k is not None else None) for label, k in idx.items()]
    rows = row_homogeneity(records)

    write_models(ctx, records)
    ctx.write_csv("iso_pairs.csv", pair_rows, IsoPairRow.header())
    ctx.write_csv("table2.csv", t2)
    ctx.write_csv("rows.csv", rows)
    ctx.save_figure(
        heatmap_figure(records, cfg.sigma_r, cfg.sigma_i, cfg.protocol.depth), "fig2_heatmap.png"
    )

    report = GroupReport(
        "E1 — matched total error, different decision quality (§5.1, Table 2, Fig. 2)"
    )
    table2(report, t2, _table2_note(records, idx, cfg.iso_tolerance, ctx.reading))
    pairs_table(report, records, iso)
    rows_table(report, rows, ctx.reading)
    report.figure("fig2_heatmap.png", "Success over (σR, σI) with iso-E_tot contours (Fig. 2)")
    verdicts(report, records, iso, rows, idx, cfg.iso_tolerance)
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "models": records,
            "table2": t2,
            "iso_pairs": {
                **iso.to_dict(),
                "strongest": iso.strongest(5),
                "names": [[records[int(i)].name, records[int(j)].name] for i, j in iso.pairs],
            },
            "rows": rows,
            "paper": {"table2": paper.TABLE_2, "iso_pairs": paper.ISO_PAIRS, "text": paper.E1_TEXT},
        },
    )
    return report
