"""Statistics of the paper's reports (§5): mean ± SE, Spearman ρ with bootstrap CIs, iso pairs.

- ``mean_se``: mean and standard error over seeds x episodes (flattened).
- ``EpisodeSummary`` / ``summarize_episodes``: success mean ± SE, per-seed success and
  outcome counts of each model setting of a closed-loop run (``python -m eval`` and the
  experiment groups report these); ``difference_se``: a gap between two success rates and
  its SE.
- ``spearman_ci``: ``scipy.stats.spearmanr`` plus a seeded paired percentile bootstrap
  (2,000 resamples by default, as in the paper); resamples whose ``x`` or ``y`` is constant
  have no Spearman ρ and are dropped from the percentiles.
- ``iso_error_pairs``: model pairs whose ``E_tot`` agree within 10%
  (``|a - b| <= tolerance * max(a, b)``), and the Spearman of ``|ΔDRPE|`` against
  ``|Δsuccess|`` over those pairs (paper §5.2: ρ = 0.97 over 77 pairs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.stats import rankdata, spearmanr

from gridplan.planning.closed_loop import OUTCOMES

#: Iso-error pairs: E_tot within this relative tolerance (paper §5.2: 10%).
ISO_TOLERANCE = 0.10

#: Bootstrap resamples of every bootstrap interval (paper §5: 2,000).
BOOTSTRAP_RESAMPLES = 2000


def _as_1d(values, name: str) -> np.ndarray:
    """Flatten tensors, arrays or sequences to a finite float64 vector."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    try:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric: {err}") from err
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds non-finite values (NaN or inf)")
    return arr


def mean_se(values) -> tuple[float, float, int]:
    """Mean, standard error and count of ``values`` (e.g. success over seeds x episodes).

    ``SE = std(values, ddof=1) / sqrt(n)`` over all values flattened, i.e. the seeds x
    episodes are treated as one sample, as the paper reports it.

    Args:
        values: any shape of numbers (tensor, array or sequence); flattened.

    Returns:
        ``(mean, se, n)``; ``se`` is NaN when ``n == 1`` (no spread can be estimated).

    Raises:
        ValueError: if ``values`` is empty or holds non-finite values.
    """
    arr = _as_1d(values, "values")
    n = arr.size
    if n == 0:
        raise ValueError("values must not be empty")
    se = float(arr.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    return float(arr.mean()), se, n


@dataclass(frozen=True)
class EpisodeSummary:
    """Closed-loop results of one model setting over seeds x episodes.

    Attributes:
        success: success rate over all episodes.
        success_se: its standard error (``mean_se``; NaN for a single episode).
        n_episodes: ``seeds x episodes``.
        per_seed: success rate of each seed, in seed order.
        outcomes: episodes ending at the goal, on the hazard and by timeout
            (``gridplan.planning.closed_loop.OUTCOMES`` order).
    """

    success: float
    success_se: float
    n_episodes: int
    per_seed: tuple[float, ...]
    outcomes: dict[str, int]


def summarize_episodes(results, n_settings: int = 1, n_seeds: int = 1) -> list[EpisodeSummary]:
    """One ``EpisodeSummary`` per model setting of a closed-loop run.

    Args:
        results: ``gridplan.planning.closed_loop.EpisodeResults`` with setting-major ``(M * S *
            E,)`` ``success`` and ``outcome`` (seed-major within a setting, as ``evaluate`` lays
            them out).
        n_settings: ``M``.
        n_seeds: ``S``.

    Raises:
        ValueError: if the episodes do not split into ``M x S`` equal blocks.
    """
    total = results.success.numel()
    if n_settings < 1 or n_seeds < 1 or total == 0 or total % (n_settings * n_seeds):
        raise ValueError(
            f"{total} episodes do not split into {n_settings} settings x {n_seeds} seeds"
        )
    success = results.success.view(n_settings, n_seeds, -1).float().cpu()
    outcome = results.outcome.view(n_settings, -1).cpu()
    out = []
    for k in range(n_settings):
        mean, se, n = mean_se(success[k])
        counts = {name: int((outcome[k] == i).sum()) for i, name in enumerate(OUTCOMES)}
        out.append(EpisodeSummary(mean, se, n, tuple(success[k].mean(dim=1).tolist()), counts))
    return out


def difference_se(
    a: float, a_se: float | None, b: float, b_se: float | None
) -> tuple[float, float]:
    """``a - b`` and the SE of the difference of two independent estimates,
    ``sqrt(a_se^2 + b_se^2)``; a missing (None or zero) SE counts as 0."""
    return a - b, math.sqrt((a_se or 0.0) ** 2 + (b_se or 0.0) ** 2)


class SpearmanResult(NamedTuple):
    """Spearman ρ with a bootstrap CI: ``rho``, ``low``, ``high`` (NaN if undefined) and ``n``."""

    rho: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict:
        """JSON-ready dict with NaN as ``None``."""
        return {
            k: None if isinstance(v, float) and math.isnan(v) else v
            for k, v in self._asdict().items()
        }


def _row_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row pair of ``(R, n)`` arrays (average ranks for ties); NaN for a
    row with constant ``x`` or ``y``."""
    rx = rankdata(x, axis=1)
    ry = rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denom = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    num = (rx * ry).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, num / np.where(denom > 0, denom, 1.0), np.nan)


def spearman_ci(
    x, y, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0, confidence: float = 0.95
) -> SpearmanResult:
    """Spearman ρ of paired samples with a paired percentile bootstrap CI (paper §5).

    ``rho`` is ``scipy.stats.spearmanr(x, y)``. The CI resamples the ``n`` pairs with
    replacement ``n_resamples`` times from ``numpy.random.default_rng(seed)``, so a seed gives
    the same interval; resamples with constant ``x`` or ``y`` are dropped.

    Args:
        x: ``(n,)`` numbers (e.g. DRPE of each model).
        y: ``(n,)`` numbers (e.g. success of each model).
        n_resamples: bootstrap resamples (paper: 2,000), >= 1.
        seed: bootstrap seed.
        confidence: CI level in ``(0, 1)``.

    Returns:
        SpearmanResult; ``rho`` is NaN if ``x`` or ``y`` is constant, ``low``/``high`` NaN if no
        resample has a defined ρ.

    Raises:
        ValueError: on lengths that differ, fewer than 3 pairs, non-finite values,
            ``n_resamples < 1`` or ``confidence`` outside ``(0, 1)``.
    """
    xa, ya = _as_1d(x, "x"), _as_1d(y, "y")
    if xa.size != ya.size:
        raise ValueError(f"x and y must have the same length, got {xa.size} and {ya.size}")
    n = xa.size
    if n < 3:
        raise ValueError(f"Spearman with a bootstrap CI needs at least 3 pairs, got {n}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return SpearmanResult(float("nan"), float("nan"), float("nan"), n)
    rho = float(spearmanr(xa, ya).statistic)
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    boot = _row_spearman(xa[idx], ya[idx])
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return SpearmanResult(rho, float("nan"), float("nan"), n)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(boot, [100 * alpha, 100 * (1 - alpha)])
    return SpearmanResult(rho, float(low), float(high), n)


@dataclass
class IsoPairs:
    """Iso-error pairs of a model pool and how their DRPE gaps track their success gaps.

    Attributes:
        pairs: ``(P, 2)`` int model indices ``i < j``, in lexicographic order.
        delta_drpe: ``(P,)`` ``|DRPE_i - DRPE_j|``.
        delta_success: ``(P,)`` ``|success_i - success_j|``.
        spearman: Spearman of ``delta_drpe`` against ``delta_success`` with a bootstrap CI
            (all NaN with fewer than 3 pairs).
        e_tot, drpe, success: ``(K,)`` the inputs.
        tolerance: the relative E_tot tolerance used.
    """

    pairs: np.ndarray
    delta_drpe: np.ndarray
    delta_success: np.ndarray
    spearman: SpearmanResult
    e_tot: np.ndarray
    drpe: np.ndarray
    success: np.ndarray
    tolerance: float

    def __len__(self) -> int:
        return self.pairs.shape[0]

    def strongest(self, k: int = 5) -> list[dict]:
        """The ``k`` pairs with the largest success gap (ties: larger DRPE gap first), each a
        dict of both models' ``e_tot``, ``drpe``, ``success`` and the gaps."""
        order = np.lexsort((-self.delta_drpe, -self.delta_success))[: max(k, 0)]
        out = []
        for p in order:
            i, j = (int(v) for v in self.pairs[p])
            out.append(
                {
                    "i": i,
                    "j": j,
                    "e_tot": (float(self.e_tot[i]), float(self.e_tot[j])),
                    "drpe": (float(self.drpe[i]), float(self.drpe[j])),
                    "success": (float(self.success[i]), float(self.success[j])),
                    "delta_drpe": float(self.delta_drpe[p]),
                    "delta_success": float(self.delta_success[p]),
                }
            )
        return out

    def to_dict(self) -> dict:
        """JSON-ready summary: tolerance, pair count, indices and the Spearman result."""
        return {
            "tolerance": self.tolerance,
            "n_pairs": len(self),
            "pairs": self.pairs.tolist(),
            "spearman": self.spearman.to_dict(),
        }


def iso_error_pairs(
    e_tot,
    drpe,
    success,
    tolerance: float = ISO_TOLERANCE,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> IsoPairs:
    """All model pairs with matched total error, and Spearman(|ΔDRPE|, |Δsuccess|) over them.

    Models ``i < j`` form a pair when ``|E_i - E_j| <= tolerance * max(E_i, E_j)`` (so two
    models with E_tot 0 pair too).

    Args:
        e_tot: ``(K,)`` non-negative total errors.
        drpe: ``(K,)`` DRPE of the same models.
        success: ``(K,)`` closed-loop success rates.
        tolerance: relative E_tot tolerance, ``>= 0`` (paper: 0.10).
        n_resamples: bootstrap resamples of the pair Spearman CI.
        seed: bootstrap seed.

    Returns:
        IsoPairs.

    Raises:
        ValueError: on lengths that differ, fewer than 2 models, non-finite values, a negative
            E_tot or a negative tolerance.
    """
    e, d, s = _as_1d(e_tot, "e_tot"), _as_1d(drpe, "drpe"), _as_1d(success, "success")
    if not e.size == d.size == s.size:
        raise ValueError(
            f"e_tot, drpe and success must have the same length, got {e.size}, {d.size}, {s.size}"
        )
    if e.size < 2:
        raise ValueError(f"iso-error pairs need at least 2 models, got {e.size}")
    if (e < 0).any():
        raise ValueError("e_tot must be non-negative")
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    i, j = np.triu_indices(e.size, k=1)
    keep = np.abs(e[i] - e[j]) <= tolerance * np.maximum(e[i], e[j])
    pairs = np.stack([i[keep], j[keep]], axis=1)
    delta_drpe = np.abs(d[pairs[:, 0]] - d[pairs[:, 1]])
    delta_success = np.abs(s[pairs[:, 0]] - s[pairs[:, 1]])
    nan = float("nan")
    if len(pairs) >= 3:
        rho = spearman_ci(delta_drpe, delta_success, n_resamples=n_resamples, seed=seed)
    else:
        rho = SpearmanResult(nan, nan, nan, len(pairs))
    return IsoPairs(pairs, delta_drpe, delta_success, rho, e, d, s, float(tolerance))
