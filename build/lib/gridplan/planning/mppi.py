"""Model-predictive path integral control over action sequences (Williams et al. 2017;
TorchRL's ``torchrl.modules.planners.MPPIPlanner``): the ``K`` best candidates of a round
refit the Gaussian with weights ``exp(temperature * G)``. The loop, the candidates' return
``G`` and the draws are ``gridplan.planning.sampling``'s.
"""

from __future__ import annotations

import math

import torch

from gridplan.core.tasks import TASK_A, Task
from gridplan.planning.sampling import SequencePlanner


class PathIntegralPlanner(SequencePlanner):
    """MPPI: weights ``w_k = exp(temperature * (G_k - G_max))`` over the ``K`` elites (the
    shift by the best return cancels in the normalisation and keeps ``exp`` finite); ``mean``
    and ``std`` are the ``w``-weighted mean and (biased) standard deviation, as TorchRL's.

    Args:
        temperature: inverse temperature ``> 0`` (return units^-1): large is CEM-like
            (the best elite dominates), small averages the elites evenly.
        others: as ``SequencePlanner``.

    Raises:
        ValueError: as ``SequencePlanner``, or on a temperature that is not a finite
            positive number.
    """

    name = "mppi"

    def __init__(
        self,
        model,
        task: Task = TASK_A,
        value=None,
        horizon: int = 4,
        candidates: int = 64,
        elites: int = 8,
        iterations: int = 4,
        temperature: float = 10.0,
    ) -> None:
        super().__init__(model, task, value, horizon, candidates, elites, iterations)
        if isinstance(temperature, bool) or not (
            isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0
        ):
            raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
        self.temperature = float(temperature)

    def update(self, elite: torch.Tensor, returns: torch.Tensor):
        w = (self.temperature * (returns - returns[:, :1])).exp()[:, :, None, None]
        total = w.sum(dim=1, keepdim=True)
        mean = (w * elite).sum(dim=1, keepdim=True) / total
        std = ((w * (elite - mean).pow(2)).sum(dim=1, keepdim=True) / total).sqrt()
        return mean, std
