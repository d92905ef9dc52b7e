"""What a latent model carries of an episode in the closed loop (``docs/DESIGN.md``, "Latent
world models").

A memoryless latent model plans each decision from ``encode`` of the current observation.
Two kinds of model carry more:

* a history model (``gridplan.models.opaque``) plans from ``init`` of its episode's last
  ``history`` observations and actions (``EpisodeHistory``);
* a recurrent latent model with ``filter_latent`` (Dreamer's RSSM, Hafner et al. 2019) that
  observes a partial observation (``gridplan.core.render.PARTIAL_OBS_KINDS``: MiniGrid's
  egocentric view, which shows neither the cells behind the agent nor those behind walls)
  plans from its belief filtered over the whole episode, as a Dreamer agent acts from its
  posterior: ``z_0 = encode(o_0)``, ``z_{t+1} = filter_latent(z_t, a_t, o_{t+1})``
  (``EpisodeBelief``). On a full observation one observation is a complete history, so such a
  model encodes the current one.

``episode_memory(model, start)`` picks the memory of the planner's model, or None.
"""

from __future__ import annotations

import torch

from gridplan.core.render import PARTIAL_OBS_KINDS
from gridplan.models.capabilities import capabilities_of
from gridplan.models.latent_contract import LatentThroughDecoder, encode_states, next_latents
from gridplan.models.opaque import EpisodeHistory, OpaqueLatent


class EpisodeBelief:
    """The filtered latent of every episode of a closed loop (module docstring).

    Args:
        latent: the latent model planned through (it has ``filter_latent``).
        start: ``(B, S)`` start states; the beliefs start at ``encode`` of their observations.

    ``push(rows, action, state)`` filters one environment step: the actions ``(n,)`` long
    taken in episodes ``rows`` and every episode's state after it ``(B, S)``; ``roots(rows)``
    is those episodes' ``(n, Z)`` beliefs.
    """

    def __init__(self, latent, start: torch.Tensor) -> None:
        self.latent = latent
        self.z = encode_states(latent, start)

    @staticmethod
    def of(model, start: torch.Tensor) -> EpisodeBelief | None:
        """The belief to keep for the planner's ``model``: one for a latent model with
        ``filter_latent`` on a partial observation (seen through ``LatentThroughDecoder``),
        else None."""
        if not isinstance(model, LatentThroughDecoder) or not filters(model.latent):
            return None
        return EpisodeBelief(model.latent, start)

    def push(self, rows: torch.Tensor, action: torch.Tensor, state: torch.Tensor) -> None:
        self.z[rows] = next_latents(self.latent, self.z[rows], action, state[rows])

    def roots(self, rows: torch.Tensor) -> torch.Tensor:
        return self.z[rows]


def filters(latent) -> bool:
    """Whether ``latent`` plans from a belief filtered over the episode: it has
    ``filter_latent`` and observes a partial observation."""
    return capabilities_of(latent).history_filter and latent.obs_kind in PARTIAL_OBS_KINDS


def memory_words(latent) -> str:
    """What the planning latent ``Z`` of ``latent`` holds, for reports: ``""`` for the
    encoding of the current observation."""
    if isinstance(latent, OpaqueLatent):
        return (
            f"Z is the model's state flattened, init from the last {latent.history} "
            "observation(s)"
        )
    return "Z is the belief filtered over the episode" if filters(latent) else ""


def episode_memory(model, start: torch.Tensor) -> EpisodeHistory | EpisodeBelief | None:
    """The episode memory of the planner's ``model`` from ``(B, S)`` start states (module
    docstring): an ``EpisodeHistory``, an ``EpisodeBelief``, or None for a model that plans
    from the current state or observation alone."""
    return EpisodeHistory.of(model, start) or EpisodeBelief.of(model, start)


__all__ = ["EpisodeBelief", "episode_memory", "filters", "memory_words"]
