"""The fused scorer's draw units hold exactly ``randn * sigma`` from the planner's stream: a
unit whose dims share one sigma is drawn scaled by the sampler (``normal_(0, sigma)``), the
others are drawn and then multiplied, and both leave the generator in the same state
(``gridplan/planning/fused.py``, ``FusedNoiseScorer.draw_noise``)."""

from __future__ import annotations

import pytest
import torch

from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.models.noise import AR1NoiseModel, NoiseModel, noise_grid
from gridplan.planning.fused import FusedNoiseScorer


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


@pytest.mark.parametrize(
    ("model", "task", "settings"),
    [
        (NoiseModel.controlled(0.35, 0.1), TASK_A, [0] * 7),  # one sigma on every relevant dim
        (NoiseModel.controlled(0.35, 0.1), TASK_B, [0] * 7),  # c1 gets sigma_i: two sigmas
        (noise_grid([0.1, 0.35], [0.1]), TASK_A, [0, 0, 0, 1, 1, 1, 1]),  # two settings
        (noise_grid([0.1, 0.35], [0.1]), TASK_A, [1] * 7),  # one setting of a grid
        (AR1NoiseModel.controlled(0.35, 0.1), TASK_A, [0] * 7),  # AR(1) after the scaling
    ],
)
def test_a_draw_unit_is_randn_times_sigma_bit_for_bit(model, task, settings):
    scorer = FusedNoiseScorer(model.sigma, getattr(model, "rho", None), task, 3)
    settings = torch.tensor(settings)
    gen = torch.Generator().manual_seed(11)
    noise = scorer.draw_noise(settings, gen).clone()
    replay = torch.Generator().manual_seed(11)
    shape = (3, scorer.hi - scorer.lo, len(settings), 64)
    expected = torch.randn(shape, generator=replay) * scorer.scales[settings].T.unsqueeze(2)
    if scorer.rho is not None:
        keep = (1.0 - scorer.rho**2) ** 0.5
        for t in range(1, 3):
            expected[t].mul_(keep).add_(expected[t - 1] * scorer.rho)
    assert torch.equal(_bits(noise), _bits(expected))
    assert torch.equal(gen.get_state(), replay.get_state())
    assert noise.abs().max() > 0
