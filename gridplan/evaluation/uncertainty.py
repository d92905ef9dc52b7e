"""Uncertainty quality, for models that say how sure they are.

A model exposes uncertainty in one of two optional ways (checked in this order):

- ``uncertainty(state (N, 12), action (N,)) -> (N,)``: a finite, non-negative score of the
  imagined step from ``state`` under ``action`` (larger = less sure);
- ``predict_members(state (N, 12), action (N,)) -> (K, N, 12)``: the next-state predictions of
  ``K >= 2`` ensemble members; the score is the members' variance on the task's relevant dims,
  averaged over those dims (their disagreement, in squared normalized units).

Scores are taken at every step of the model's own open-loop rollouts of the branch set under
random actions (the IPE rollouts, ``gridplan.evaluation.fidelity``) and averaged over the ``H``
steps of each row; each row's error is its IPE. Then:

- ``spearman``: Spearman of uncertainty with rollout error, with a percentile bootstrap
  interval over rows (``gridplan.metrics.bootstrap.resample_spearman``);
- risk-coverage: rows sorted by uncertainty, most certain first; ``risk(k)`` is the mean error
  of the ``k`` most certain rows, at coverage ``k / N``; tied scores are ordered at random in
  expectation (each tied row counts with its group's mean error), so a constant score gives
  the flat curve at the mean error;
- ``AURC = (1/N) sum_k risk(k)``, the area under that curve; ``aurc_optimal`` sorts by the error
  itself (the best any score can do), ``aurc_random`` is the mean error (an uninformative score).

Definitions: "How Should World Models Be Evaluated for Embodied Decision-Making?"
(arXiv 2606.15032), §5 (uncertainty calibration: risk-coverage, error-uncertainty correlation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core.tasks import Task
from gridplan.metrics.bootstrap import percentile_interval, resample_spearman, spearman_of_counts
from gridplan.metrics.stats import SpearmanResult

#: Points of the risk-coverage curve kept in reports.
CURVE_POINTS = 50


def uncertainty_source(model) -> str | None:
    """``"uncertainty"``, ``"predict_members"`` or ``None``: how ``model`` exposes uncertainty.

    A ``predict_members`` model with a ``members`` attribute below 2 has no disagreement to
    read and counts as ``None``.
    """
    if callable(getattr(model, "uncertainty", None)):
        return "uncertainty"
    if callable(getattr(model, "predict_members", None)):
        members = getattr(model, "members", None)
        if isinstance(members, int) and members < 2:
            return None
        return "predict_members"
    return None


def uncertainty_fn(model, task: Task) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The ``(state, action) -> (N,)`` score of ``model`` (module docstring).

    Raises:
        ValueError: if the model exposes no uncertainty.
    """
    source = uncertainty_source(model)
    if source is None:
        raise ValueError(
            "the model exposes no uncertainty: give it uncertainty(state, action) -> (N,) or "
            "predict_members(state, action) -> (K, N, 12) with K >= 2"
        )
    if source == "uncertainty":
        return lambda state, action: model.uncertainty(state, action).float()
    dims = list(task.relevant_dims)

    def disagreement(state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        members = model.predict_members(state, action)
        return members[..., dims].float().var(dim=0, unbiased=False).mean(dim=-1)

    return disagreement


def risk_coverage(uncertainty, error) -> tuple[np.ndarray, np.ndarray]:
    """``(coverage, risk)``, both ``(N,)``: the risk-coverage curve (module docstring).

    Raises:
        ValueError: on lengths that differ, an empty input or non-finite values.
    """
    u = np.asarray(uncertainty, dtype=np.float64).reshape(-1)
    e = np.asarray(error, dtype=np.float64).reshape(-1)
    if u.shape != e.shape or u.size == 0:
        raise ValueError(
            f"uncertainty and error must be non-empty and alike, got {u.shape}, {e.shape}"
        )
    if not (np.isfinite(u).all() and np.isfinite(e).all()):
        raise ValueError("uncertainty and error must be finite")
    order = np.argsort(u, kind="stable")
    us, es = u[order], e[order]
    _, group, counts = np.unique(us, return_inverse=True, return_counts=True)
    group_mean = np.bincount(group, weights=es) / counts
    n = u.size
    risk = np.cumsum(group_mean[group]) / np.arange(1, n + 1)
    return np.arange(1, n + 1) / n, risk


def aurc(uncertainty, error) -> float:
    """Area under the risk-coverage curve, ``mean_k risk(k)``."""
    return float(risk_coverage(uncertainty, error)[1].mean())


@dataclass(frozen=True)
class UncertaintyQuality:
    """Uncertainty numbers (module docstring); ``curve`` is ``CURVE_POINTS`` pairs
    ``(coverage, risk)`` of the risk-coverage curve."""

    source: str
    spearman: SpearmanResult
    aurc: float
    aurc_optimal: float
    aurc_random: float
    curve: tuple[tuple[float, float], ...]
    n: int

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "spearman": self.spearman.to_dict(),
            "aurc": self.aurc,
            "aurc_optimal": self.aurc_optimal,
            "aurc_random": self.aurc_random,
            "curve": [list(p) for p in self.curve],
            "n": self.n,
        }


def uncertainty_quality(
    uncertainty, error, source: str, n_resamples: int = 2000, seed: int = 0
) -> UncertaintyQuality:
    """Spearman, risk-coverage and AURC of per-row uncertainty against per-row error.

    Raises:
        ValueError: on lengths that differ, fewer than 3 rows or non-finite values.
    """
    u = np.asarray(uncertainty, dtype=np.float64).reshape(-1)
    e = np.asarray(error, dtype=np.float64).reshape(-1)
    point = float(spearman_of_counts(u, e, np.ones((1, u.size)))[0])
    rho = SpearmanResult(
        point, *percentile_interval(resample_spearman(u, e, n_resamples, seed)), int(u.size)
    )
    coverage, risk = risk_coverage(u, e)
    keep = np.unique(np.linspace(0, u.size - 1, min(CURVE_POINTS, u.size)).round().astype(int))
    return UncertaintyQuality(
        source=source,
        spearman=rho,
        aurc=float(risk.mean()),
        aurc_optimal=aurc(e, e),
        aurc_random=float(e.mean()),
        curve=tuple((float(coverage[i]), float(risk[i])) for i in keep),
        n=int(u.size),
    )


def rollout_uncertainty(scores: torch.Tensor) -> torch.Tensor:
    """``(N,)`` per-row uncertainty: the mean over the rollout's ``H`` step scores.

    Raises:
        ValueError: if a score is negative or not finite (naming how many).
    """
    bad = ~torch.isfinite(scores) | (scores < 0)
    if bad.any():
        raise ValueError(
            f"uncertainty scores must be finite and >= 0; {int(bad.sum())} of {scores.numel()} "
            "are not"
        )
    return scores.double().mean(dim=1)
