"""Printing a report of ``python -m eval`` (the paper's, ``Report.paper_dict``, or the
ladder's, ``Report.to_dict``): a rendering of the dict that is written as JSON, by the tables
the card also writes (``gridplan.evaluation.tabular``)."""

from __future__ import annotations

from gridplan.evaluation.schema import report_task
from gridplan.evaluation.tabular import report_tables


def _header(report: dict) -> list[tuple[str, str]]:
    """What was evaluated: the model, task and depth, world, planner and tie rule."""
    rows = [
        ("model", ", ".join(f"{k}={v}" for k, v in report["model"].items())),
        ("task / depth", f"{report['task']} / {report['depth']}"),
        ("world", report_task(report).world.describe()),
    ]
    planner = report.get("planner")
    if planner is not None:
        settings = ", ".join(f"{k}={v}" for k, v in planner["settings"].items())
        rows.append(("planner", f"{planner['name']} {settings}".strip()))
    if "ties" in report:
        rows.append(("ties", f"{report['ties']} (rule among tied best first actions)"))
    return rows


def format_table(report: dict) -> str:
    """A report dict as text: what was evaluated, then every measured part's table
    (``report_tables``: closed loop, L1 and its profile ordered by relevance, latent, each
    ladder level), then the report's notes."""
    header = _header(report)
    width = max(len(k) for k, _ in header)
    lines = [f"{k:<{width}}  {v}" for k, v in header]
    for table in report_tables(report):
        lines += table.text()
    lines += [f"note: {note}" for note in report.get("notes", [])]
    return "\n".join(lines)
