"""The action-consistency probe: is the action identifiable from a latent transition?
(``docs/DESIGN.md``, "Latent world models": a seconds-cheap screening score for latent models.)

Definition. A probe classifier ``q(a | z, z')`` — a two-layer ReLU MLP on
``[z, z' - z]`` (``2Z -> hidden -> 4``), standardized by the fit latents — is fitted by Adam
on the cross-entropy of the actual latent transitions ``(E(o_t), E(o_{t+1}), a_t)`` of the
fit episodes, with explicitly seeded initialization and shuffles, for a fixed number of
epochs (no model selection: the probe is a fixed instrument). On isolated test episodes:

* ``accuracy_real``: the probe's accuracy on actual pairs ``(E(o_t), E(o_{t+1}))``. It is below
  1 even for a perfect encoder: a move into a wall or the grid's edge leaves the agent in place,
  and its action cannot be told from the other blocked ones.
* ``accuracy_pred``: its accuracy on predicted pairs ``(E(o_t), P(E(o_t), a_t))``: whether the
  predictor keeps the action's effect where the encoder puts it.
* ``consistency = (accuracy_pred - chance) / (accuracy_real - chance)``, ``chance = 1/A``
  (``A`` the world's action count, 4 on the paper's world):
  1 when predicted transitions carry the action as well as real ones, 0 at chance, negative
  below it (never clipped). None when ``accuracy_real <= chance`` (nothing to compare to).

Accuracies are means within episodes, then over episodes with equal weight, like the
frozen-decoder protocol (``gridplan.metrics.frozen_decoder``). Fit and test episodes must be
disjoint (ValueError naming them otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gridplan.core.constants import N_ACTIONS
from gridplan.metrics.frozen_decoder import LatentTransitions, check_disjoint, episode_mean

#: Probe width, epochs, learning rate and batch size.
PROBE_HIDDEN = 64
PROBE_EPOCHS = 20
PROBE_LR = 3e-3
PROBE_BATCH = 256


@dataclass(frozen=True)
class ActionConsistency:
    """The probe's result (module docstring)."""

    accuracy_real: float
    accuracy_pred: float
    consistency: float | None
    n_test: int
    n_episodes: int

    def to_dict(self) -> dict:
        return dict(vars(self))


def _features(z: torch.Tensor, z_next: torch.Tensor) -> torch.Tensor:
    return torch.cat([z, z_next - z], dim=1)


def action_consistency(
    fit: LatentTransitions,
    test: LatentTransitions,
    seed: int = 0,
    hidden: int = PROBE_HIDDEN,
    epochs: int = PROBE_EPOCHS,
    n_actions: int = N_ACTIONS,
) -> ActionConsistency:
    """Fit the probe on ``fit``'s actual pairs and score it on ``test`` (module docstring);
    ``n_actions`` is the world's action count (the probe's classes, chance ``1 / n_actions``).

    Raises:
        ValueError: if ``fit`` and ``test`` share an episode, or ``test`` has no predictions.
    """
    check_disjoint(fit.keys, test.keys, "probe's fit episodes", "test episodes")
    if test.z_pred is None:
        raise ValueError("the probe needs predicted latents (encode_transitions predict=True)")
    x = _features(fit.z, fit.z_next)
    mean, std = x.mean(dim=0), x.std(dim=0, unbiased=False).clamp_min(1e-6)
    x = (x - mean) / std
    y = fit.actions.long()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, n_actions))
        net = net.to(x.device)
    opt = torch.optim.Adam(net.parameters(), lr=PROBE_LR)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        order = torch.randperm(x.shape[0], generator=gen).to(x.device)
        for lo in range(0, order.numel(), PROBE_BATCH):
            idx = order[lo : lo + PROBE_BATCH]
            opt.zero_grad(set_to_none=True)
            loss_fn(net(x[idx]), y[idx]).backward()
            opt.step()
    net.eval()
    with torch.no_grad():

        def accuracy(z_next: torch.Tensor) -> float:
            logits = net((_features(test.z, z_next) - mean) / std)
            hit = (logits.argmax(dim=1) == test.actions).float()
            return float(episode_mean(hit, test.episode))

        real, pred = accuracy(test.z_next), accuracy(test.z_pred)
    chance = 1.0 / n_actions
    consistency = (pred - chance) / (real - chance) if real > chance else None
    return ActionConsistency(
        accuracy_real=real,
        accuracy_pred=pred,
        consistency=consistency,
        n_test=int(test.actions.numel()),
        n_episodes=int(torch.unique(test.episode).numel()),
    )
