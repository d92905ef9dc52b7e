"""Shared pieces of the ladder levels: estimates with intervals, the relevant-projection error,
and rewards read from a model's predictions.

Rewards inside a model: a model with ``predict_reward(state, action, next_state) -> (N,)`` is
scored with its own reward; every other model with the task's true sparse reward applied to
its predicted state (the planner's rule, paper §3 "Planner"). Termination is always read from
the predicted state (agent on the active goal or the hazard cell).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from gridplan.core import dynamics
from gridplan.core.tasks import Task
from gridplan.models.capabilities import capabilities_of

#: Normal quantile of the 95% intervals of means.
Z95 = 1.959963984540054
#: Interval bounds of a rate and of a non-negative quantity.
RATE = (0.0, 1.0)
NON_NEGATIVE = (0.0, float("inf"))


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


class Estimate(NamedTuple):
    """A mean over units with its standard error and a 95% interval.

    ``low``/``high``: ``mean ± 1.96 SE`` for means of many units (``Estimate.of``), or a
    bootstrap percentile interval (``Estimate.bootstrap``). NaN where undefined.
    """

    mean: float
    se: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values, bounds: tuple[float, float] | None = None) -> Estimate:
        """Mean, SE (``ddof=1``) and normal 95% interval of ``values`` (flattened), the
        interval clipped to ``bounds`` if given (e.g. ``(0, 1)`` for a rate).

        Raises:
            ValueError: if ``values`` is empty or holds non-finite numbers.
        """
        if isinstance(values, torch.Tensor):
            values = values.detach().double().cpu().numpy()
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        if arr.size == 0:
            raise ValueError("an estimate needs at least one value")
        if not np.isfinite(arr).all():
            raise ValueError("an estimate's values must be finite")
        mean = float(arr.mean())
        se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else float("nan")
        low, high = mean - Z95 * se, mean + Z95 * se
        if bounds is not None:
            low, high = max(low, bounds[0]), min(high, bounds[1])
        return cls(mean, se, low, high, int(arr.size))

    @classmethod
    def bootstrap(cls, value: float, replicates, n: int, confidence: float = 0.95) -> Estimate:
        """A statistic with the spread and percentile interval of its bootstrap replicates."""
        from gridplan.metrics.bootstrap import percentile_interval

        rep = np.asarray(replicates, dtype=np.float64)
        rep = rep[np.isfinite(rep)]
        se = float(rep.std(ddof=1)) if rep.size > 1 else float("nan")
        low, high = percentile_interval(rep, confidence)
        return cls(float(value), se, low, high, int(n))

    def to_dict(self) -> dict:
        """``{"mean", "se", "low", "high", "n"}`` with NaN as ``None``."""
        return {
            "mean": _num(self.mean),
            "se": _num(self.se),
            "low": _num(self.low),
            "high": _num(self.high),
            "n": int(self.n),
        }


def relevant_sq_error(pred: torch.Tensor, target: torch.Tensor, task: Task) -> torch.Tensor:
    """Squared error on the task's relevant projection, averaged over those dims: shaped like
    ``pred`` without its last axis (normalized units)."""
    dims = list(task.relevant_dims)
    return (pred[..., dims].float() - target[..., dims].float()).square().mean(dim=-1)


def has_reward(model) -> bool:
    """Whether ``model`` predicts its own reward (``predict_reward``)."""
    return capabilities_of(model).reward


def predicted_outcome(
    model, state: torch.Tensor, action: torch.Tensor, nxt: torch.Tensor, task: Task
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reward, goal and hazard of one imagined step ``state --action--> nxt``.

    Returns:
        ``(reward, goal, hazard)``, each ``(N,)``: the model's own reward where it has
        ``predict_reward``, else the true reward of the predicted state; ``goal``/``hazard``
        always from the predicted state (the step terminates where either holds).
    """
    reward, goal, hazard = dynamics.outcome(task, nxt)
    if has_reward(model):
        reward = model.predict_reward(state, action, nxt).to(reward.dtype)
    return reward, goal, hazard
