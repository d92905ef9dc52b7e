"""The leaderboard's figures: per suite, success against an error metric (E_tot, DRPE), one
point per (model, track), with their 95% intervals as error bars (Matplotlib's Agg canvas,
PNG bytes; no pyplot state). A model keeps one colour, a track one marker, across a figure.
"""

from __future__ import annotations

import io
from itertools import cycle

from matplotlib.figure import Figure

from gridplan.board.leaderboard import SuiteTable, value

_MARKERS = "osD^vP*Xph"


def _half_widths(row: dict, metric: str, center: float) -> list[float] | None:
    """``[below, above]`` error-bar lengths of ``metric``'s CI (None without one)."""
    ci = row["metrics"][metric].get("ci")
    return None if ci is None else [max(center - ci[0], 0.0), max(ci[1] - center, 0.0)]


def points(table: SuiteTable, metric: str) -> list[tuple[str, str, float, float]]:
    """``(fingerprint, track name, metric value, success)`` of every shown row with both
    measured, in table order (models, then tracks)."""
    found = []
    for fp in table.models:
        for track in table.tracks:
            row = table.cells.get((fp, track["name"]))
            x, y = value(row, metric), value(row, "success")
            if x is not None and y is not None:
                found.append((fp, track["name"], x, y))
    return found


def success_scatter(table: SuiteTable, metric: str, title: str) -> bytes | None:
    """The PNG of success (y) against ``metric`` (x, titled ``title``) for ``table``; None if
    no row has both."""
    found = points(table, metric)
    if not found:
        return None
    colours = dict(zip(table.models, cycle(f"C{i}" for i in range(10)), strict=False))
    markers = dict(zip((t["name"] for t in table.tracks), cycle(_MARKERS), strict=False))
    # Fixed margins: the labels do not change size, and a constrained layout doubles the cost.
    figure = Figure(figsize=(6.4, 4.4))
    figure.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.92)
    ax = figure.add_subplot()
    for fp, track, x, y in found:
        row = table.cells[(fp, track)]
        ax.errorbar(
            x, y, xerr=_as_bars(_half_widths(row, metric, x)),
            yerr=_as_bars(_half_widths(row, "success", y)), fmt=markers[track],
            color=colours[fp], ecolor=colours[fp], elinewidth=0.8, capsize=2, markersize=6,
        )
    for fp in dict.fromkeys(fp for fp, *_ in found):
        ax.plot([], [], "o", color=colours[fp], label=_plain(table.labels[fp]))
    for track in dict.fromkeys(t for _, t, *_ in found):
        ax.plot([], [], markers[track], color="0.4", label=f"track {track}")
    ax.set_xlabel(title)
    ax.set_ylabel("success rate")
    ax.set_title(f"suite {table.suite}: success vs {title}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def _plain(text: str) -> str:
    """``text`` as Matplotlib draws it literally: a ``$`` would start mathtext."""
    return text.replace("$", r"\$")


def _as_bars(widths: list[float] | None):
    """Matplotlib's ``(2, 1)`` error-bar shape for one point, or None."""
    return None if widths is None else [[widths[0]], [widths[1]]]
