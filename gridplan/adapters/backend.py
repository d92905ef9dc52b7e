"""The adapters' only calls into the gridplan core: environment, reward geometry, V*, planner,
and imagined steps of a world model.

Every adapter resolves its ``task`` once with ``gridplan.core.tasks.get`` and goes through these
functions, so a change of a core signature is a change here only. Every adapter that steps a
world model goes through ``Imagination``, which holds the model to the plug-in contract that
``python -m eval`` applies (``gridplan.models.plugins``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gridplan.core import env, tasks, values
from gridplan.core.constants import CARRYING, DOOR_OPEN
from gridplan.core.tasks import Task
from gridplan.core.values import ValueTable
from gridplan.models.contract import WorldModel, check_model_world
from gridplan.models.plugins import check_contract, checked
from gridplan.planning import closed_loop as loop
from gridplan.planning.closed_loop import EpisodeResults
from gridplan.planning.planner import Planner


def resolve(task: str | Task, world=None) -> Task:
    """A task name or ``Task`` (on ``world``, a name or ``World``, when given) -> ``Task``.
    Raises ValueError/TypeError as ``tasks.get``."""
    return tasks.get(task, world=world)


def model_world(model, world=None):
    """``world`` if given, else the world ``model`` declares (a checkpoint's, a built-in's),
    else None: an imagination env plays in its model's world unless told otherwise."""
    return world if world is not None else getattr(model, "world", None)


def reset(batch: int, generator: torch.Generator, task: Task) -> torch.Tensor:
    """``gridplan.core.env.reset``: ``(batch, S)`` float32 start states on ``generator.device``."""
    return env.reset(batch, generator, task)


def step(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: Task
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """``gridplan.core.env.step``: ``(next_state, reward, terminated, info)`` of a validated
    batch."""
    return env.step(state, action, generator, task)


def outcome(state: torch.Tensor, task: Task) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reward of arriving in (possibly predicted) states ``(N, S)``, read through rounded cells
    and the thresholded ``c1``: ``(reward, goal, hazard)``, each ``(N,)``."""
    return env.state_outcome(state, task)


def value_table(task: Task, device: torch.device | str) -> ValueTable:
    """The task's exact V* table on ``device`` (built once per device, shared, read-only)."""
    return values.value_table(task, device)


def planner(model: WorldModel, depth: int, task: Task, **kwargs) -> Planner:
    """The full-width planner of ``gridplan.planning.planner`` over ``model``."""
    return Planner(model, depth, task, **kwargs)


def closed_loop(
    plan: Planner, start: torch.Tensor, generator: torch.Generator, task: Task
) -> EpisodeResults:
    """``gridplan.planning.closed_loop.run_closed_loop`` to the task's horizon."""
    return loop.run_closed_loop(plan, start, generator, horizon=task.horizon)


def start_states(
    seeds: Sequence[int], episodes: int, task: Task, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``gridplan.planning.closed_loop.start_states``: ``(len(seeds) * episodes, 12)``,
    seed-major."""
    return loop.start_states(seeds, episodes, task, device)


class Imagination:
    """A world model's ``predict`` as the dynamics of imagined steps, read as the planner reads
    predicted states (``gridplan.planning.planner``): the task's true reward and termination of
    the predicted state through rounded cells and the thresholded ``c1``.

    The model goes through ``gridplan.models.plugins.checked`` and ``check_contract``, as in
    ``python -m eval``: a plug-in's broken output (type, shape, dtype, device, NaN/inf) is a
    ``PluginError`` naming the method and the imagined step, and predicted values outside
    ``[0, 1]`` are clamped into it (one ``OutOfRangeWarning`` per model; ``clamped`` counts
    them), so every predicted state lies in the adapters' ``[0, 1]`` observation box.
    Built-in models (``gridplan.models.plugins.TRUSTED``) run as they are.

    Args:
        model: anything with ``predict(state (N, 12), action (N,), generator) -> (N, 12)``
            and optionally ``start_rollout(batch, generator)``.
        task: resolved ``Task``.
        device: where the contract check runs (the model's device).
        name: what to call the model in messages (default its type name).

    Raises:
        PluginError: if the model has no callable ``predict`` or fails the contract check.
    """

    def __init__(
        self, model, task: Task, device: torch.device | str, name: str | None = None
    ) -> None:
        name = name or type(model).__name__
        self.source = model
        check_model_world(model, task.world)
        self.model = checked(model, name)
        check_contract(self.model, task, device, name)
        self.task = task

    @property
    def clamped(self) -> int:
        """Predicted values clamped into ``[0, 1]`` so far (0 for a built-in model)."""
        return getattr(self.model, "clamped", 0)

    def start(self, batch: int, generator: torch.Generator) -> None:
        """The model's ``start_rollout(batch, generator)``, where it has one."""
        start = getattr(self.model, "start_rollout", None)
        if callable(start):
            start(batch, generator)

    def step(
        self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """One imagined step of ``(N, S)`` states and ``(N,)`` long actions:
        ``(next_state (N, S) in [0, 1], reward (N,), terminated (N,), events)``; ``events``
        holds ``(N,)`` bools ``goal``, ``hazard`` and, read through the thresholded flags,
        ``pickup`` (carrying turned on) and ``door_opened`` (the door flag turned on)."""
        nxt = self.model.predict(state, action, generator)
        reward, goal, hazard = outcome(nxt, self.task)
        before, after = env.to_flag(state[:, [CARRYING, DOOR_OPEN]]), env.to_flag(
            nxt[:, [CARRYING, DOOR_OPEN]]
        )
        turned_on = after & ~before
        events = {
            "goal": goal,
            "hazard": hazard,
            "pickup": turned_on[:, 0],
            "door_opened": turned_on[:, 1],
        }
        return nxt, reward, goal | hazard, events
