"""Bootstrap intervals for paired comparisons and for statistics of resampled units.

- ``paired_hierarchical_bootstrap``: the difference of two arms measured on the same units
  (common random numbers), resampled at every level of a nested design such as training seed
  -> evaluation seed -> episode: a resample draws top-level units with replacement, then,
  independently inside each drawn unit, the units of the next level, and so on down to the
  episodes; the statistic is the mean paired difference over the drawn leaves. Every episode
  weighs the same. With three or fewer units at the top level that actually varies, the
  interval is indicative only (it cannot represent the spread between top-level units).
- ``resample_means``: bootstrap replicates of the means of ``(..., N)`` per-unit values,
  resampling the units of several inputs jointly (for statistics of means that are not
  means themselves: ranking metrics over anchor policies, value errors).
- ``resample_spearman``: bootstrap replicates of Spearman's rho of paired samples, each the
  exact rho of its resample (average ranks for ties), computed from the resample's
  multinomial counts without sorting each resample (``O(R n)`` after one sort).
- ``cluster_counts``: multinomial unit counts of a two-stage cluster bootstrap (clusters drawn
  with replacement, then the units of every drawn cluster with replacement inside it), for
  statistics of units nested in clusters (models = configurations x training seeds).
- ``percentile_interval``: the percentile interval of bootstrap replicates.

All resampling draws from ``numpy.random.default_rng(seed)``: a seed gives the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Top-level unit counts at or below this make an interval indicative only.
INDICATIVE_MAX_UNITS = 3
DEFAULT_LEVELS = ("training seed", "evaluation seed", "episode")


def _finite_array(values, name: str) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric: {err}") from err
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds non-finite values (NaN or inf)")
    return arr


def _check_bootstrap_args(n_resamples: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")


def percentile_interval(replicates, confidence: float = 0.95) -> tuple[float, float]:
    """``(low, high)`` percentiles of the finite bootstrap replicates (NaN if there are none)."""
    rep = np.asarray(replicates, dtype=np.float64).reshape(-1)
    rep = rep[np.isfinite(rep)]
    if rep.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(rep, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


@dataclass(frozen=True)
class PairedDifference:
    """Mean of arm A, of arm B, their paired difference ``A - B`` and its bootstrap interval.

    Attributes:
        mean_a, mean_b: means over all leaves (every episode weighs the same).
        difference: ``mean_a - mean_b``.
        low, high: percentile interval of the resampled differences.
        confidence: interval level.
        levels: names of the nesting levels, top first.
        units: units per level, e.g. ``(1, 10, 30)``.
        n_resamples: bootstrap resamples.
        warning: why the interval is only indicative, or ``None``.
        notes: other caveats (a level with a single unit is not resampled).
    """

    mean_a: float
    mean_b: float
    difference: float
    low: float
    high: float
    confidence: float
    levels: tuple[str, ...]
    units: tuple[int, ...]
    n_resamples: int
    warning: str | None
    notes: tuple[str, ...]

    @property
    def indicative(self) -> bool:
        return self.warning is not None

    def to_dict(self) -> dict:
        """JSON-ready dict (NaN as ``None``)."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return {
            "mean_a": num(self.mean_a),
            "mean_b": num(self.mean_b),
            "difference": num(self.difference),
            "low": num(self.low),
            "high": num(self.high),
            "confidence": self.confidence,
            "levels": list(self.levels),
            "units": list(self.units),
            "n_resamples": self.n_resamples,
            "indicative": self.indicative,
            "warning": self.warning,
            "notes": list(self.notes),
        }


def _nested_indices(shape: Sequence[int], n_resamples: int, rng) -> tuple[np.ndarray, ...]:
    """Index arrays that draw, per resample, every level's units inside each drawn parent.

    Level ``k`` gets an array of shape ``(R, n_1, ..., n_k)`` broadcast to the full
    ``(R, n_1, ..., n_K)``, so ``values[tuple(indices)]`` gathers one resampled design."""
    k = len(shape)
    out = []
    for level, n in enumerate(shape):
        draw = rng.integers(0, n, size=(n_resamples, *shape[: level + 1]))
        out.append(draw.reshape(draw.shape + (1,) * (k - level - 1)))
    return tuple(out)


def paired_hierarchical_bootstrap(
    a,
    b,
    levels: Sequence[str] = DEFAULT_LEVELS,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedDifference:
    """Paired hierarchical bootstrap of the mean difference ``A - B``.

    Args:
        a: arm A's per-episode values, one axis per level in ``levels`` order (e.g.
            ``(T, S, E)`` success of training seed x evaluation seed x episode).
        b: arm B's values on the same units (paired by position), same shape.
        levels: level names, top first; their number is the arrays' dimension.
        n_resamples: bootstrap resamples (>= 1).
        seed: resampling seed.
        confidence: interval level in ``(0, 1)``.

    Returns:
        PairedDifference; ``warning`` is set when the top level that has more than one unit
        has at most ``INDICATIVE_MAX_UNITS`` of them.

    Raises:
        ValueError: on arrays of different shapes or of the wrong dimension, empty or
            non-finite values, or bad ``n_resamples`` / ``confidence``.
    """
    _check_bootstrap_args(n_resamples, confidence)
    xa, xb = _finite_array(a, "a"), _finite_array(b, "b")
    levels = tuple(levels)
    if xa.shape != xb.shape:
        raise ValueError(f"paired arms must have the same shape, got {xa.shape} and {xb.shape}")
    if xa.ndim != len(levels):
        raise ValueError(
            f"arrays have {xa.ndim} dimensions but {len(levels)} levels were named {levels}"
        )
    diff = xa - xb
    rng = np.random.default_rng(seed)
    replicates = diff[_nested_indices(diff.shape, n_resamples, rng)]
    replicates = replicates.reshape(n_resamples, -1).mean(axis=1)
    low, high = percentile_interval(replicates, confidence)
    notes = tuple(
        f"one {name} per arm: the interval is conditional on it"
        for name, n in zip(levels, diff.shape, strict=True)
        if n == 1
    )
    varying = [(name, n) for name, n in zip(levels, diff.shape, strict=True) if n > 1]
    warning = None
    if varying and varying[0][1] <= INDICATIVE_MAX_UNITS:
        name, n = varying[0]
        warning = (
            f"only {n} top-level units ({name}): the interval is indicative only "
            f"(it cannot represent the spread between {name}s)"
        )
    elif not varying:
        warning = "a single unit per arm: no interval can be estimated"
    return PairedDifference(
        mean_a=float(xa.mean()),
        mean_b=float(xb.mean()),
        difference=float(diff.mean()),
        low=low,
        high=high,
        confidence=confidence,
        levels=levels,
        units=tuple(int(n) for n in diff.shape),
        n_resamples=n_resamples,
        warning=warning,
        notes=notes,
    )


def resample_means(arrays: Sequence, n_resamples: int = 2000, seed: int = 0) -> list[np.ndarray]:
    """Bootstrap replicates of per-unit means, resampling the units of all inputs jointly.

    A replicate draws ``N`` units with replacement (multinomial counts, so one matrix product
    per input) and averages each input over them.

    Args:
        arrays: inputs of shape ``(..., N)`` sharing the unit axis (last).
        n_resamples: ``R >= 1``.
        seed: resampling seed.

    Returns:
        One ``(R, ...)`` float64 array of resampled means per input.

    Raises:
        ValueError: on empty or non-finite inputs, differing unit counts or bad ``R``.
    """
    _check_bootstrap_args(n_resamples, 0.5)
    xs = [_finite_array(x, f"arrays[{i}]") for i, x in enumerate(arrays)]
    n = xs[0].shape[-1]
    if any(x.shape[-1] != n for x in xs):
        raise ValueError(f"arrays must share the unit axis, got {[x.shape for x in xs]}")
    weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_resamples)
    weights = weights.T / n
    return [np.moveaxis(x @ weights, -1, 0) for x in xs]


def _ranks_under_counts(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``(R, n)`` average ranks of each unit inside resamples that hold ``counts[r, j]``
    copies of unit ``j``: the copies of units with values below it, plus the mean position
    of its value's tied copies. Units drawn 0 times get the rank they would have."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    group = np.cumsum(np.r_[True, sorted_values[1:] != sorted_values[:-1]]) - 1
    per_group = np.add.reduceat(counts[:, order], starts, axis=1)
    group_rank = np.cumsum(per_group, axis=1) - per_group + (per_group + 1) / 2
    ranks = np.empty_like(counts, dtype=np.float64)
    ranks[:, order] = group_rank[:, group]
    return ranks


def _constant(values: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """``(R,)`` whether the units drawn in each resample (``drawn`` ``(R, n)`` bool) share one
    value: decided on the values, since the weighted variance of equal ranks rounds to about
    1e-33 rather than 0."""
    return np.where(drawn, values, -np.inf).max(axis=1) == np.where(drawn, values, np.inf).min(
        axis=1
    )


def spearman_of_counts(x, y, counts) -> np.ndarray:
    """``(R,)`` Spearman rho of the resamples of paired ``(x, y)`` with ``(R, n)`` unit
    ``counts`` (NaN where either side of a resample is constant)."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w = np.asarray(counts, dtype=np.float64)
    rx, ry = _ranks_under_counts(xa, w), _ranks_under_counts(ya, w)
    flat = _constant(xa, w > 0) | _constant(ya, w > 0)
    w = w / w.sum(axis=1, keepdims=True)
    dx = rx - (w * rx).sum(axis=1, keepdims=True)
    dy = ry - (w * ry).sum(axis=1, keepdims=True)
    vx, vy = (w * dx * dx).sum(axis=1), (w * dy * dy).sum(axis=1)
    cov = (w * dx * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(flat, np.nan, cov / np.sqrt(vx * vy))


def resample_spearman(x, y, n_resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """``(R,)`` bootstrap replicates of Spearman's rho of paired samples ``x``, ``y``.

    A replicate draws ``n`` pairs with replacement and is the exact rho of that resample
    (``spearman_of_counts``); NaN where a resample is constant on a side. Same statistic as
    ``gridplan.metrics.stats.spearman_ci``'s replicates, at about half its cost for a thousand pairs
    (no per-resample sort), which is what the uncertainty level needs.

    Raises:
        ValueError: on lengths that differ, fewer than 3 pairs, non-finite values or bad
            ``n_resamples``.
    """
    _check_bootstrap_args(n_resamples, 0.5)
    xa = _finite_array(x, "x").reshape(-1)
    ya = _finite_array(y, "y").reshape(-1)
    if xa.size != ya.size or xa.size < 3:
        raise ValueError(f"need at least 3 pairs of equal length, got {xa.size} and {ya.size}")
    n = xa.size
    draws = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    draws += n * np.arange(n_resamples)[:, None]
    counts = np.bincount(draws.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)
    return spearman_of_counts(xa, ya, counts)


def cluster_counts(clusters: Sequence, n_resamples: int, seed: int = 0) -> np.ndarray:
    """``(R, n)`` copies of each unit in ``R`` two-stage cluster bootstrap resamples.

    Stage one draws ``C`` clusters (``C`` = the number of distinct labels) with replacement;
    stage two draws, independently for every drawn cluster, as many of its units as it has
    with replacement. A cluster drawn twice contributes two independent within-cluster draws.
    Units nested in clusters (training seeds within configurations) are then not counted as
    independent: the spread between clusters enters every interval (the two-stage bootstrap
    of hierarchical data, Davison & Hinkley 1997, *Bootstrap Methods and their Application*,
    §3.8). Every draw comes from ``numpy.random.default_rng(seed)``: the cluster draws first,
    ``(R, C)``, then, slot by slot and cluster by cluster, the units of the resamples that
    drew that cluster in that slot.

    Args:
        clusters: ``(n,)`` a cluster label per unit (compared as strings).
        n_resamples: ``R >= 1``.
        seed: resampling seed.

    Returns:
        ``(R, n)`` float64 counts; row ``r`` sums to the sizes of the clusters drawn in it.

    Raises:
        ValueError: on no units or bad ``n_resamples``.
    """
    _check_bootstrap_args(n_resamples, 0.5)
    labels = np.asarray([str(c) for c in clusters])
    if labels.size == 0:
        raise ValueError("cluster_counts needs at least one unit")
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(labels == c) for c in dict.fromkeys(labels.tolist())]
    drawn = rng.integers(0, len(members), size=(n_resamples, len(members)))
    counts = np.zeros((n_resamples, labels.size))
    rows = np.arange(n_resamples)[:, None]
    for slot in range(len(members)):
        for c, idx in enumerate(members):
            picked = rows[drawn[:, slot] == c, 0]
            if picked.size:
                units = idx[rng.integers(0, idx.size, size=(picked.size, idx.size))]
                np.add.at(counts, (picked[:, None], units), 1.0)
    return counts
