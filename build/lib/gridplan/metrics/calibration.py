"""Uncertainty calibration: how well a per-unit uncertainty score predicts per-unit error.

- ``spearman``: Spearman of uncertainty with error, with a percentile bootstrap interval over
  units (``gridplan.metrics.bootstrap.resample_spearman``);
- risk-coverage: units sorted by uncertainty, most certain first; ``risk(k)`` is the mean error
  of the ``k`` most certain units, at coverage ``k / N``; tied scores are ordered at random in
  expectation (each tied unit counts with its group's mean error), so a constant score gives
  the flat curve at the mean error;
- ``AURC = (1/N) sum_k risk(k)``, the area under that curve; ``aurc_optimal`` sorts by the error
  itself (the best any score can do), ``aurc_random`` is the mean error (an uninformative score).

The units are the branch-set rows of the ladder's ``uncertainty`` level
(``gridplan.evaluation.uncertainty``), or held-out windows for an ensemble's disagreement
(``uncertainty_vs_error``, which ``python -m train`` and ``python -m eval --ckpt`` report).

Definitions: "How Should World Models Be Evaluated for Embodied Decision-Making?"
(arXiv 2606.15032), §5 (uncertainty calibration: risk-coverage, error-uncertainty correlation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gridplan.data.datasets import EvalWindows
from gridplan.metrics.bootstrap import percentile_interval, resample_spearman, spearman_of_counts
from gridplan.metrics.stats import SpearmanResult

#: Points of the risk-coverage curve kept in reports.
CURVE_POINTS = 50


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


@torch.no_grad()
def window_disagreement(model, windows: EvalWindows) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-window disagreement and error of the members' mean open-loop rollout.

    From each window's start, under its logged actions, the members' mean is rolled ``H``
    steps (the open-loop rollout of the prediction metrics, paper §4.1). At every imagined
    step the disagreement is ``uncertainty`` at the state the rollout is in and the logged
    action.

    Args:
        model: a learned model of ``K`` members (``K >= 2`` for a non-zero disagreement), e.g.
            an ``EnsembleWorldModel`` or ``load_world_model`` of an ensemble checkpoint.
        windows: held-out ``EvalWindows`` (``W`` windows of ``H`` steps).

    Returns:
        ``(disagreement, error)``, each ``(W,)`` float on the windows' device: the mean over
        the ``H`` steps of the disagreement, and the mean squared error of the mean rollout
        over the ``H`` steps and 12 dims.
    """
    windows.check()
    state = windows.start
    disagreement, preds = [], []
    for t in range(windows.horizon):
        action = windows.actions[:, t].long()
        members = model.predict_members(state, action)
        disagreement.append(members.var(dim=0, unbiased=False).mean(dim=-1))
        state = members.mean(dim=0)
        preds.append(state)
    pred = torch.stack(preds, dim=1)
    error = (pred - windows.targets).square().mean(dim=(1, 2))
    return torch.stack(disagreement, dim=1).mean(dim=1), error


def uncertainty_vs_error(
    model, windows: EvalWindows, n_resamples: int = 2000, seed: int = 0
) -> UncertaintyQuality:
    """How well the ensemble's disagreement predicts its rollout error on ``windows``.

    The per-window disagreement and error of ``window_disagreement`` scored by
    ``uncertainty_quality``: Spearman ρ with a seeded percentile
    bootstrap 95% CI over windows (``n_resamples`` resamples of ``seed``), the risk–coverage
    curve, its area AURC, the optimal AURC (windows ordered by their true error) and the
    random one (the mean error).

    Returns:
        ``UncertaintyQuality`` (``source`` ``"predict_members"``, ``n`` the windows).

    Raises:
        ValueError: on fewer than 3 windows.
    """
    disagreement, error = window_disagreement(model, windows)
    return uncertainty_quality(
        disagreement.cpu().numpy(), error.cpu().numpy(), "predict_members", n_resamples, seed
    )
