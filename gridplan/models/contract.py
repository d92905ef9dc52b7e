"""The world-model contract: what the planner and the metrics may ask of any model (paper §4.2).

Every model is one imagined step ``predict(state (N, S), action (N,), generator) -> (N, S)``
in the layout of its world (``gridplan.core.world``; ``S = 12`` in the default world);
every metric uses only this, plus ``start_rollout`` before each imagined rollout (models with
memory across imagined steps, such as AR(1) noise, reset it there).

Optional declarations a model may make, read by the planner's scorers
(``gridplan.planning.scorers``):

* ``n_settings = M``: the ``N`` rows of a batch are ``M`` equal contiguous setting blocks,
  block ``m`` belonging to setting ``m`` (``gridplan.models.noise``: one batch evaluates ``M``
  noise settings at once). The planner and the metrics keep the rows of one episode or window
  inside its block.
* ``deterministic = True``: the leaf scores of the model's rollouts do not depend on the
  generator, and ``predict`` keeps no memory across calls.
* ``bytes_per_row``: the model's own working memory per row of a ``predict`` call, in bytes.

A model knows nothing of the planner: which leaf scorer rolls a model's leaves is the
planner's decision (``gridplan.planning.registry``), and a model class with a faster scorer of
its own registers it there.
"""

from __future__ import annotations

import abc

import torch

from gridplan.core.world import WORLD_KINDS, World
from gridplan.models.capabilities import capabilities_of


class WorldModel(abc.ABC):
    """A one-step world model. Subclass it (or duck-type ``predict``) to plug a model in."""

    #: Number of settings sharing a batch (rows are split into this many contiguous blocks).
    n_settings: int = 1

    @abc.abstractmethod
    def predict(
        self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """One imagined step.

        Args:
            state: ``(N, S)`` float, normalized ``[0, 1]`` (possibly the model's own output).
            action: ``(N,)`` long in ``0..3``.
            generator: the only source of randomness a stochastic model may use.

        Returns:
            ``(N, S)`` predicted next states, finite: the planner raises ValueError on NaN
            or inf (``gridplan.planning.scorers.check_prediction``).
        """

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:  # noqa: B027
        """Called before each imagined rollout of ``batch`` rows; stateless models ignore it."""


def keeps_memory(model) -> bool:
    """Whether ``model`` keeps memory across imagined steps: its class defines a
    ``start_rollout`` of its own (``WorldModel``'s does nothing). Such a model's memory belongs
    to the rows of one rollout, so its rows may not be regrouped between steps."""
    start = getattr(type(model), "start_rollout", None)
    return start is not None and start is not WorldModel.start_rollout


def check_model_world(model, world: World) -> None:
    """Refuse a model that declares another world than ``world`` (a ``world`` attribute:
    built-in and learned models have one; a plug-in without one is checked by the width of
    its predictions).

    Raises:
        ValueError: naming both worlds.
    """
    own = capabilities_of(model).world
    if isinstance(own, WORLD_KINDS) and own != world:
        # A plug-in wrapper names its factory and file (gridplan.models.plugins).
        who = getattr(model, "who", None)
        raise ValueError(
            f"{who() if callable(who) else 'the model'} predicts world {own.describe()}, but "
            "the task is played on "
            f"{world.describe()}; evaluate it on its own world (--world {own.name})"
        )
