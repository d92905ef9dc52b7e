"""Uncertainty scores of models that say how sure they are, at the ladder's rollouts.

A model exposes uncertainty in one of two optional ways (checked in this order):

- ``uncertainty(state (N, 12), action (N,)) -> (N,)``: a finite, non-negative score of the
  imagined step from ``state`` under ``action`` (larger = less sure);
- ``predict_members(state (N, 12), action (N,)) -> (K, N, 12)``: the next-state predictions of
  ``K >= 2`` ensemble members; the score is the members' variance on the task's relevant dims,
  averaged over those dims (their disagreement, in squared normalized units).

Scores are taken at every step of the model's own open-loop rollouts of the branch set under
random actions (the IPE rollouts, ``gridplan.evaluation.fidelity``) and averaged over the ``H``
steps of each row; each row's error is its IPE. The ladder's ``uncertainty`` level scores them
with ``gridplan.metrics.calibration.uncertainty_quality``: Spearman of uncertainty with rollout
error (bootstrap interval over rows), the risk-coverage curve and its area AURC against the
optimal and the random one.

Definitions: "How Should World Models Be Evaluated for Embodied Decision-Making?"
(arXiv 2606.15032), §5 (uncertainty calibration: risk-coverage, error-uncertainty correlation).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gridplan.core.tasks import Task
from gridplan.models.capabilities import capabilities_of


def uncertainty_source(model) -> str | None:
    """``"uncertainty"``, ``"predict_members"`` or ``None``: how ``model`` exposes uncertainty.

    A ``predict_members`` model with a ``members`` attribute below 2 has no disagreement to
    read and counts as ``None``.
    """
    return capabilities_of(model).uncertainty_source


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
