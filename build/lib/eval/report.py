"""Printing the paper's reports (``gridplan.evaluation.ladder.paper_report``) for ``python -m
eval``; ``gridplan.evaluation.schema.write_report`` writes them."""

from __future__ import annotations

import math

from gridplan.core.values import relevance_weights
from gridplan.evaluation.schema import report_task


def _fmt(value, digits: int = 4) -> str:
    """``value`` to ``digits`` decimals; ``n/a`` for an undefined one (None or NaN)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def _planner_row(report: dict) -> list[tuple[str, str]]:
    """The ``planner`` row of a report that records one (none for the paper's search)."""
    planner = report.get("planner")
    if planner is None:
        return []
    settings = ", ".join(f"{k}={v}" for k, v in planner["settings"].items())
    return [("planner", f"{planner['name']} {settings}".strip())]


def format_table(report: dict) -> str:
    """Human-readable table of a ``paper_report`` dict (or of any report holding its keys); the
    profile is ordered by relevance."""
    model = ", ".join(f"{k}={v}" for k, v in report["model"].items())
    s, o = report["success"], report["outcomes"]
    drpe = ", ".join(f"{k} {v:.4f}" for k, v in report["DRPE"].items())
    rows = [
        ("model", model),
        ("task / depth", f"{report['task']} / {report['depth']}"),
        ("world", report_task(report).world.describe()),
        *_planner_row(report),
        *(
            [("ties", f"{report['ties']} (rule among tied best first actions)")]
            if "ties" in report
            else []
        ),
        ("success rate", f"{s['mean']:.3f} ± {_fmt(s['se'], 3)} (SE, n={s['n']})"),
        ("outcomes", f"goal {o['goal']}, hazard {o['hazard']}, timeout {o['timeout']}"),
        ("mean steps", f"{report['mean_steps']:.1f}"),
        ("E_tot", f"{report['E_tot']:.4f}  (H={report['horizon']}, {report['n_windows']} windows)"),
        ("DRPE", drpe),
        ("VPE", f"{report['VPE']:.4f}"),
    ]
    audit = report["event_audit"]
    rows.append(
        (
            "event audit",
            f"carrying at pickup {_fmt(audit.get('carrying_at_pickup'))} "
            f"(pickup MSE {_fmt(audit.get('pickup_mse'))}, n={audit.get('n_pickup')}); "
            f"door MSE {_fmt(audit.get('door_mse'))} (n={audit.get('n_door')})",
        )
    )
    rows += latent_rows(report)
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    task = report_task(report)
    weights = relevance_weights(task).tolist()
    names = task.world.dim_names
    order = sorted(range(len(names)), key=lambda d: -weights[d])
    lines.append("per-dimension error (ordered by graded relevance weight):")
    for d in order:
        name = names[d]
        lines.append(f"  {name:<10} w={weights[d]:.3f}  err={report['profile'][name]:.5f}")
    return "\n".join(lines)


def latent_rows(report: dict) -> list[tuple[str, str]]:
    """A latent model's frozen-decoder protocol rows (``gridplan.metrics.frozen_decoder``),
    or none."""
    latent = report.get("latent")
    if not latent:
        return []
    rows = []
    for which in ("frozen", "own"):
        f = latent.get(which)
        if f is None:
            continue
        rows.append(
            (
                f"latent ({which} decoder)",
                f"E_repr {f['E_repr']:.4f}, E_pred {f['E_pred']:.4f}, E_excess "
                f"{f['E_excess']:+.4f}; decoded DRPE {f['DRPE_pred']:.5f} (excess "
                f"{f['DRPE_excess']:+.5f}); persistence E {f['E_persistence']:.4f}",
            )
        )
    probe = latent["action_consistency"]
    consistency = _fmt(probe["consistency"], 3)
    rows.append(
        (
            "action consistency",
            f"{consistency} (accuracy real {probe['accuracy_real']:.3f}, predicted "
            f"{probe['accuracy_pred']:.3f})",
        )
    )
    return rows
