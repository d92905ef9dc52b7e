"""The tables of the leaderboard, computed from board rows (``gridplan.board.store``).

A suite's table holds every model measured on the suite's tracks: the tracks named by rows of
that suite, each at its newest version (``newest_tracks``: the highest ``version``, then the
highest hash), with every row of that track version whatever suite it was measured under (a
track's result does not depend on the suite that ran it). Rows of other versions of a track
are left out and counted (``SuiteTable.left_out``).

Per track, the models are ranked by success (highest first) and by E_tot and DRPE (lowest
first), and the rank agreement of each error ranking with the success ranking is Spearman's
rho of ``(success, -error)`` over the models that have both (``scipy.stats.spearmanr``): 1 when
the error orders the models as their success does, below 0 when it reverses them (the DRPE
paper's point: a prediction error can misrank models for decisions). Undefined (``None``) with
fewer than 3 such models or when a side is constant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import spearmanr

#: The metrics of the suite tables: row key, column title, and whether higher is better.
TABLE_METRICS = (
    ("success", "success", True),
    ("regret", "decision regret", False),
    ("drpe", "DRPE", False),
    ("e_tot", "E_tot", False),
)
#: The error metrics whose ranking is set against the ranking by success.
RANKED_ERRORS = ("e_tot", "drpe")
#: Fewest models with which a rank correlation is reported.
MIN_RANKED = 3


def value(row: dict | None, metric: str) -> float | None:
    """The value of ``metric`` in ``row`` (None when the row, the metric or its value is
    missing)."""
    if row is None or metric not in row["metrics"]:
        return None
    return row["metrics"][metric]["value"]


def newest_tracks(rows: Sequence[dict]) -> dict[str, dict]:
    """Track name -> the ``track`` dict of its newest version among ``rows`` (highest
    ``version``, then highest ``hash``)."""
    newest: dict[str, dict] = {}
    for row in rows:
        track = row["track"]
        held = newest.get(track["name"])
        if held is None or (track["version"], track["hash"]) > (held["version"], held["hash"]):
            newest[track["name"]] = track
    return newest


def model_labels(rows: Sequence[dict]) -> dict[str, str]:
    """Fingerprint -> the model's display name; a name that two fingerprints share gets the
    first 8 hex digits of each fingerprint appended (``"mlp [3fa2c1d0]"``)."""
    names = {row["model"]["fingerprint"]: row["model"]["name"] for row in rows}
    shared = Counter(names.values())
    return {fp: f"{n} [{fp[:8]}]" if shared[n] > 1 else n for fp, n in names.items()}


def rank_agreement(success: Sequence[float], error: Sequence[float]) -> float | None:
    """Spearman's rho of ``(success, -error)`` over paired per-model values (module
    docstring); None with fewer than ``MIN_RANKED`` models or a constant side."""
    if len(success) != len(error):
        raise ValueError(f"success and error differ in length: {len(success)}, {len(error)}")
    if len(success) < MIN_RANKED or len(set(success)) == 1 or len(set(error)) == 1:
        return None
    return float(spearmanr(success, [-e for e in error]).statistic)


@dataclass(frozen=True)
class TrackRanking:
    """The models of one track ranked by success and by each of ``RANKED_ERRORS``.

    Attributes:
        track: the track's name.
        by: metric -> fingerprints, best first, of the models with that metric measured
            (ties keep the models' names in order).
        rho: error metric -> ``rank_agreement`` with success (None: undefined).
        n: error metric -> how many models have both it and success.
    """

    track: str
    by: dict[str, tuple[str, ...]]
    rho: dict[str, float | None]
    n: dict[str, int]


def rank_track(track: str, cells: dict[str, dict], labels: dict[str, str]) -> TrackRanking:
    """The ``TrackRanking`` of ``track`` from its rows, ``cells``: fingerprint -> row."""
    by, rho, n = {}, {}, {}
    for metric in ("success", *RANKED_ERRORS):
        measured = [fp for fp in sorted(cells, key=labels.get) if value(cells[fp], metric)
                    is not None]
        sign = -1.0 if metric == "success" else 1.0
        by[metric] = tuple(sorted(measured, key=lambda fp: sign * value(cells[fp], metric)))
    for metric in RANKED_ERRORS:
        both = [fp for fp in by[metric] if value(cells[fp], "success") is not None]
        n[metric] = len(both)
        rho[metric] = rank_agreement([value(cells[fp], "success") for fp in both],
                                     [value(cells[fp], metric) for fp in both])
    return TrackRanking(track, by, rho, n)


def mean_success(
    cells: dict[tuple[str, str], dict], tracks: Sequence[str], fingerprint: str
) -> float | None:
    """Mean success of model ``fingerprint`` over ``tracks`` (names) in ``cells``:
    ``(fingerprint, track name)`` -> row; None if it misses one."""
    values = [value(cells.get((fingerprint, t)), "success") for t in tracks]
    return None if None in values else sum(values) / len(values)


@dataclass(frozen=True)
class SuiteTable:
    """One suite's leaderboard (module docstring).

    Attributes:
        suite: the suite's name.
        tracks: the ``track`` dicts shown, newest version of each, sorted by name.
        models: fingerprints, by mean success over ``tracks`` (highest first; models that miss
            a track last), then by label.
        labels: fingerprint -> display name (``model_labels`` over the whole board).
        cells: ``(fingerprint, track name)`` -> row, for the rows shown.
        left_out: track name -> rows of its other versions left out (only those with some).
        rankings: one ``TrackRanking`` per track, in ``tracks`` order.
    """

    suite: str
    tracks: tuple[dict, ...]
    models: tuple[str, ...]
    labels: dict[str, str]
    cells: dict[tuple[str, str], dict]
    left_out: dict[str, int]
    rankings: tuple[TrackRanking, ...]

    def mean_success(self, fingerprint: str) -> float | None:
        """Mean success of a model over the suite's tracks; None if it misses one."""
        return mean_success(self.cells, [t["name"] for t in self.tracks], fingerprint)


def suite_table(suite: str, rows: Sequence[dict]) -> SuiteTable:
    """The ``SuiteTable`` of ``suite`` from every row of a board (module docstring).

    Raises:
        ValueError: if no row was measured under ``suite``.
    """
    names = sorted({r["track"]["name"] for r in rows if r["suite"] == suite})
    if not names:
        raise ValueError(f"no row was measured under suite {suite!r}")
    newest, labels = newest_tracks(rows), model_labels(rows)
    shown = [r for r in rows if r["track"]["name"] in names
             and r["track"]["hash"] == newest[r["track"]["name"]]["hash"]]
    left = Counter(r["track"]["name"] for r in rows if r["track"]["name"] in names) - Counter(
        r["track"]["name"] for r in shown)
    cells = {(r["model"]["fingerprint"], r["track"]["name"]): r for r in shown}
    fps = {fp for fp, _ in cells}
    means = {fp: mean_success(cells, names, fp) for fp in fps}
    ranked = sorted(fps, key=lambda fp: (means[fp] is None, -(means[fp] or 0.0), labels[fp]))
    rankings = tuple(
        rank_track(n, {fp: cells[(fp, n)] for fp in fps if (fp, n) in cells}, labels)
        for n in names
    )
    return SuiteTable(suite, tuple(newest[n] for n in names), tuple(ranked), labels, cells,
                      dict(left), rankings)


def suite_tables(rows: Sequence[dict]) -> list[SuiteTable]:
    """The ``SuiteTable`` of every suite named by ``rows``, sorted by suite name."""
    return [suite_table(s, rows) for s in sorted({r["suite"] for r in rows})]
