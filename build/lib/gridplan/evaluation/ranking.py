"""L6 policy ranking: does the model order policies like the true environment?

For anchor policies ``pi_1 .. pi_n`` with true values ``J_E`` and values inside the model
``J_hat`` (``gridplan.evaluation.outcome``):

- Spearman ``rho(J_E, J_hat)``; NaN when either is constant.
- Pairwise ranking accuracy ``PRA``: over the pairs ``i < j`` whose true values differ, the
  fraction the model orders the same way, ``(J_E_i - J_E_j) * (J_hat_i - J_hat_j) > 0`` (a
  model tie counts as a miss); NaN when every true value is equal.
- Mean maximum rank violation ``MMRV = (1/n) sum_i max_j |J_E_i - J_E_j| *
  1[(J_hat_i < J_hat_j) != (J_E_i < J_E_j)]``: for each policy, the largest true-value gap
  among the policies it is mis-ranked against, averaged; in units of ``J``, 0 for a perfect
  ranking.

Every function takes ``(..., n)`` arrays and reduces the last axis, so bootstrap replicates
``(R, n)`` are scored in one call. Definitions: "How Should World Models Be Evaluated for
Embodied Decision-Making?" (arXiv 2606.15032), §5, policy ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from gridplan.evaluation.common import Estimate
from gridplan.metrics.bootstrap import resample_means

#: True-value differences at or below this count as ties (PRA drops those pairs).
TIE = 1e-9


def _diff(x: np.ndarray) -> np.ndarray:
    """``(..., n, n)`` pairwise differences ``x_i - x_j``."""
    return x[..., :, None] - x[..., None, :]


def _check(j_true, j_model) -> tuple[np.ndarray, np.ndarray]:
    t, m = np.asarray(j_true, dtype=np.float64), np.asarray(j_model, dtype=np.float64)
    if t.shape != m.shape:
        raise ValueError(f"J_true and J_model must have the same shape, got {t.shape}, {m.shape}")
    if t.ndim < 1 or t.shape[-1] < 2:
        raise ValueError(f"ranking needs at least 2 policies on the last axis, got {t.shape}")
    if not (np.isfinite(t).all() and np.isfinite(m).all()):
        raise ValueError("policy values must be finite")
    return t, m


def pairwise_ranking_accuracy(j_true, j_model) -> np.ndarray | float:
    """PRA over the last axis (module docstring); ``float`` for 1-D inputs.

    Raises:
        ValueError: on shapes that differ, fewer than 2 policies or non-finite values.
    """
    t, m = _check(j_true, j_model)
    dt, dm = _diff(t), _diff(m)
    n = t.shape[-1]
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    counted = (np.abs(dt) > TIE) & upper
    agree = ((dt * dm) > 0) & counted
    total = counted.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(total > 0, agree.sum(axis=(-2, -1)) / np.maximum(total, 1), np.nan)
    return float(out) if out.ndim == 0 else out


def mean_max_rank_violation(j_true, j_model) -> np.ndarray | float:
    """MMRV over the last axis (module docstring); ``float`` for 1-D inputs.

    Raises:
        ValueError: on shapes that differ, fewer than 2 policies or non-finite values.
    """
    t, m = _check(j_true, j_model)
    lt_true = t[..., :, None] < t[..., None, :]
    lt_model = m[..., :, None] < m[..., None, :]
    violation = np.abs(_diff(t)) * (lt_true != lt_model)
    out = violation.max(axis=-1).mean(axis=-1)
    return float(out) if out.ndim == 0 else out


def spearman(j_true, j_model) -> np.ndarray | float:
    """Spearman rho over the last axis (average ranks for ties); NaN where either input is
    constant. ``float`` for 1-D inputs.

    Raises:
        ValueError: on shapes that differ, fewer than 2 policies or non-finite values.
    """
    t, m = _check(j_true, j_model)
    rt = rankdata(t, axis=-1)
    rm = rankdata(m, axis=-1)
    rt -= rt.mean(axis=-1, keepdims=True)
    rm -= rm.mean(axis=-1, keepdims=True)
    denom = np.sqrt((rt * rt).sum(axis=-1) * (rm * rm).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(denom > 0, (rt * rm).sum(axis=-1) / np.where(denom > 0, denom, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def constant_sides(anchors: list[dict]) -> str | None:
    """Why the Spearman rho of a report's L6 anchors is undefined, when it is because a side
    is constant: ``"constant: J_model 0 at every anchor"`` (a JEPA model whose imagined
    policies never reach a reward), ``"constant: J_true ..."``, or both sides named; None
    when neither side is constant.

    Args:
        anchors: ``PolicyRanking.to_dict()["anchors"]``: ``{"name", "J_true", "J_model"}``.
    """
    constant = []
    for key in ("J_true", "J_model"):
        values = {a[key] for a in anchors}
        if len(values) == 1:
            constant.append(f"{key} {values.pop():.4g} at every anchor")
    return f"constant: {' and '.join(constant)}" if constant else None


def spearman_text(text: str, anchors: list[dict]) -> str:
    """A formatted Spearman rho of L6, ``text``; where it reads ``n/a`` because a side is
    constant, ``"n/a (constant: J_model 0 at every anchor)"`` (``constant_sides``)."""
    reason = constant_sides(anchors) if text == "n/a" else None
    return f"n/a ({reason})" if reason else text


@dataclass(frozen=True)
class PolicyRanking:
    """L6 numbers: per-policy values and the three ranking scores with bootstrap intervals
    over start states.

    Attributes:
        names: anchor names.
        j_true, j_model: ``(A,)`` policy values in the environment and inside the model.
        spearman, pra, mmrv: Estimates (point value on all starts, percentile interval of
            the start-state bootstrap).
    """

    names: tuple[str, ...]
    j_true: tuple[float, ...]
    j_model: tuple[float, ...]
    spearman: Estimate
    pra: Estimate
    mmrv: Estimate

    def to_dict(self) -> dict:
        return {
            "anchors": [
                {"name": n, "J_true": t, "J_model": m}
                for n, t, m in zip(self.names, self.j_true, self.j_model, strict=True)
            ],
            "spearman": self.spearman.to_dict(),
            "pra": self.pra.to_dict(),
            "mmrv": self.mmrv.to_dict(),
        }


def policy_ranking(names, j_true, j_model, n_resamples: int = 2000, seed: int = 0) -> PolicyRanking:
    """Ranking scores of per-start policy values.

    Args:
        names: ``A`` policy names.
        j_true: ``(A, N)`` true value of each policy from each start state.
        j_model: ``(A, N)`` the same inside the model.
        n_resamples: bootstrap resamples over start states.
        seed: bootstrap seed.

    Raises:
        ValueError: on shapes that differ, fewer than 2 policies or non-finite values.
    """
    t, m = _check(j_true, j_model)
    if t.ndim != 2 or t.shape[0] != len(names):
        raise ValueError(f"expected ({len(names)}, N) policy values, got {t.shape}")
    jt, jm = t.mean(axis=1), m.mean(axis=1)
    n = t.shape[1]
    rt, rm = resample_means((t, m), n_resamples, seed)
    out = {
        key: Estimate.bootstrap(fn(jt, jm), fn(rt, rm), n)
        for key, fn in (
            ("spearman", spearman),
            ("pra", pairwise_ranking_accuracy),
            ("mmrv", mean_max_rank_violation),
        )
    }
    return PolicyRanking(
        names=tuple(names),
        j_true=tuple(float(v) for v in jt),
        j_model=tuple(float(v) for v in jm),
        **out,
    )
