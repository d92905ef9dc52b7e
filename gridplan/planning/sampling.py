"""Sampling-based MPC over action sequences: the shared loop of CEM and MPPI (paper §3
"Planner"; the paper's limitation "other planners may weight errors differently").

The grid's actions are discrete; the sampling planners search a Gaussian over *action
scores*, ``(H, A)`` real numbers per candidate (``A = task.world.n_actions``: 4 in the paper's
world, 7 in MiniGrid DoorKey's), and a candidate executes the action of the largest score at
each step (the one-hot relaxation; ties have probability 0). Per root:

1. ``mean = 0``, ``std = 1``, shape ``(H, A)``;
2. for each of ``iterations`` rounds: ``P`` candidates ``mean + std * eps`` (``eps`` standard
   normal), each scored by its return through the world model
   (``gridplan.planning.sequences.sequence_returns``: true reward of the predicted states plus
   ``gamma^H`` times the terminal value); the ``K`` best (``torch.topk``) refit ``mean`` and
   ``std`` (``update``: CEM's elite mean and sample std, MPPI's exponentially weighted ones);
3. the committed sequence is the argmax of ``mean`` at each step; the decision is its first
   action.

This is TorchRL's ``CEMPlanner``/``MPPIPlanner`` loop (``torchrl.modules.planners``) with
the grid's reward as the per-step reward; ``scripts/bench_planners.py`` checks the decisions
agree on the same model and candidate noise.

Draws: one draw from the caller's generator seeds the planner's own stream
(``gridplan.planning.sequences.own_generator``), which supplies every ``eps`` (one
``(B, P, H, A)`` draw per round); the model's noise comes from the caller's generator. All
``B`` roots are planned in one batch (``B * P`` rows per ``predict`` call). A latent model seen
through its decoder is rolled in latent space from its roots' latents, encoded once per
decision (``gridplan.planning.sequences.root_latents``).
"""

from __future__ import annotations

import abc

import torch

from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, TaskKind, check
from gridplan.models.contract import check_model_world
from gridplan.planning.learned_value import check_value
from gridplan.planning.sequences import Plan, own_generator, root_latents, sequence_returns


def _count(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


class SequencePlanner(abc.ABC):
    """Sampling MPC over action-score Gaussians (module docstring).

    Args:
        model: any world model (``gridplan.models.contract``).
        task: reward, termination and ``gamma`` of the returns, and the ``A =
            task.world.n_actions`` actions scored (``gridplan.core.tasks.TaskKind``).
        value: terminal value (``lookup``, ``task``; ``gridplan.planning.learned_value``).
        horizon: ``H >= 1`` imagined steps per candidate.
        candidates: ``P >= 2`` candidates per root and round.
        elites: ``K``, ``2 <= K <= P``, candidates that refit the Gaussian.
        iterations: rounds ``>= 1``.

    Raises:
        ValueError: on a count out of range, a model or value of another world, or a value
            fitted for another task.
        TypeError: if ``task`` is not a task (``gridplan.core.tasks.TaskKind``).
    """

    #: The registry name of the planner (``gridplan.planning.planners``).
    name: str

    def __init__(
        self,
        model,
        task: TaskKind = TASK_A,
        value=None,
        horizon: int = 4,
        candidates: int = 64,
        elites: int = 8,
        iterations: int = 4,
    ) -> None:
        check(task)
        check_model_world(model, task.world)
        self.horizon = _count("horizon", horizon, 1)
        self.candidates = _count("candidates", candidates, 2)
        self.elites = _count("elites", elites, 2)
        self.iterations = _count("iterations", iterations, 1)
        if self.elites > self.candidates:
            raise ValueError(f"elites ({elites}) must not exceed candidates ({candidates})")
        if value is None:
            raise ValueError("a sampling planner needs a terminal value (learned_value)")
        check_value(value, task)
        self.model = model
        self.task = task
        self.value = value

    @property
    def gamma(self) -> float:
        return self.task.gamma

    @property
    def predictions_per_decision(self) -> int:
        """Model predictions per root and decision: ``iterations * P * H``."""
        return self.iterations * self.candidates * self.horizon

    @abc.abstractmethod
    def update(
        self, elite: torch.Tensor, returns: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """New ``(mean, std)``, each ``(B, 1, H, A)``, from the elites' action scores
        ``(B, K, H, A)`` and their returns ``(B, K)``, best first."""

    def search(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The final Gaussian mean ``(B, H, A)`` of every root (module docstring).

        Raises:
            ValueError: on a malformed root or a misbehaving model.
        """
        check_state(root, "root state", self.task.world)
        return self._search(root, generator, root_latents(self.model, root))

    @torch.no_grad()
    def _search(
        self, root: torch.Tensor, generator: torch.Generator, latent: torch.Tensor | None
    ) -> torch.Tensor:
        """``search`` on a checked root, with the roots' latents of a latent model
        (``root_latents``: encoded once per decision, not once per round)."""
        own = own_generator(generator, root.device)
        b = root.shape[0]
        shape = (b, self.candidates, self.horizon, self.task.world.n_actions)
        mean = root.new_zeros(b, 1, *shape[2:])
        std = torch.ones_like(mean)
        for _ in range(self.iterations):
            scores = mean + std * torch.randn(shape, generator=own, device=root.device)
            g = sequence_returns(
                self.model, self.task, root, scores.argmax(dim=3), self.value, generator, latent
            )
            top, idx = g.topk(self.elites, dim=1)
            elite = scores.gather(1, idx[:, :, None, None].expand(-1, -1, *shape[2:]))
            mean, std = self.update(elite, top)
        return mean[:, 0]

    def plan(self, root: torch.Tensor, generator: torch.Generator) -> Plan:
        """The committed sequences and their predicted returns (``Plan``).

        Raises:
            ValueError: as ``search``.
        """
        check_state(root, "root state", self.task.world)
        latent = root_latents(self.model, root)
        sequence = self._search(root, generator, latent).argmax(dim=2)
        predicted = sequence_returns(
            self.model, self.task, root, sequence.unsqueeze(1), self.value, generator, latent
        ).squeeze(1)
        return Plan(action=sequence[:, 0], sequence=sequence, predicted=predicted)

    def act(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Chosen first actions ``(B,)`` long.

        Raises:
            ValueError: as ``search``.
        """
        return self.search(root, generator)[:, 0].argmax(dim=1)
