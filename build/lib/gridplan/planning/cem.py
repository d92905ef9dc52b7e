"""The cross-entropy method over action sequences (Rubinstein 1999; MPC use as in PETS and
PlaNet; TorchRL's ``torchrl.modules.planners.CEMPlanner``): the ``K`` best candidates of a
round refit the Gaussian by their mean and sample standard deviation. The loop, the
candidates' return and the draws are ``gridplan.planning.sampling``'s.
"""

from __future__ import annotations

import torch

from gridplan.planning.sampling import SequencePlanner


class CrossEntropyPlanner(SequencePlanner):
    """CEM: ``mean = elite.mean()``, ``std = elite.std()`` (Bessel-corrected, as
    ``torch.std`` and TorchRL) over the ``K`` elites. Arguments as ``SequencePlanner``."""

    name = "cem"

    def update(self, elite: torch.Tensor, returns: torch.Tensor):
        return elite.mean(dim=1, keepdim=True), elite.std(dim=1, keepdim=True)
