"""The adapters' only calls into the gridplan core: environment, reward geometry, V*, planner,
and imagined steps of a world model.

Every adapter resolves its ``task`` once with ``gridplan.core.tasks.get`` and goes through these
functions, so a change of a core signature is a change here only. The task's dynamics, reward
and V* go through the task protocol (``gridplan.core.dynamics``), so every function here serves
the paper's gridworld and MiniGrid DoorKey alike (the action count is
``task.world.n_actions``). Every adapter that steps a world model goes through
``Imagination``, which holds the model to the plug-in contract that ``python -m eval`` applies
(``gridplan.models.plugins``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gridplan.core import dynamics, env, tasks
from gridplan.core.doorkey_task import DoorKeyValueTable
from gridplan.core.tasks import TaskKind
from gridplan.core.values import ValueTable
from gridplan.models.capabilities import capabilities_of
from gridplan.models.contract import WorldModel, check_model_world
from gridplan.models.plugins import check_contract, checked
from gridplan.planning import closed_loop as loop
from gridplan.planning.closed_loop import EpisodeResults
from gridplan.planning.planner import Planner


def resolve(task: str | TaskKind, world=None) -> TaskKind:
    """A task name or task (on ``world``, a name, ``World`` or ``DoorKey``, when given) -> the
    task (``gridplan.core.tasks.Task`` or ``DoorKeyTask``). Raises ValueError/TypeError as
    ``tasks.get``."""
    return tasks.get(task, world=world)


def model_world(model, world=None):
    """``world`` if given, else the world ``model`` declares (a checkpoint's, a built-in's),
    else None: an imagination env plays in its model's world unless told otherwise."""
    return world if world is not None else capabilities_of(model).world


def reset(batch: int, generator: torch.Generator, task: TaskKind) -> torch.Tensor:
    """``gridplan.core.dynamics.reset``: ``(batch, S)`` float32 start states on
    ``generator.device``."""
    return dynamics.reset(task, batch, generator)


def step(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: TaskKind
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """``gridplan.core.dynamics.step``: ``(next_state, reward, terminated, info)`` of a
    validated batch; ``info`` holds ``(B,)`` bools ``goal``, ``hazard``, ``pickup`` and
    ``door_opened`` (a DoorKey step adds MiniGrid's own events)."""
    return dynamics.step(task, state, action, generator)


def outcome(state: torch.Tensor, task: TaskKind) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reward of arriving in (possibly predicted) states ``(N, S)``, read through rounded cells
    (``gridplan.core.dynamics.outcome``): ``(reward, goal, hazard)``, each ``(N,)``."""
    return dynamics.outcome(task, state)


def value_table(task: TaskKind, device: torch.device | str) -> ValueTable | DoorKeyValueTable:
    """The task's exact V* table on ``device`` (built once per device, shared, read-only):
    ``lookup(state (N, S)) -> (N,)``, ``q_values(state) -> (N, A)``."""
    return dynamics.value_table(task, device)


def planner(model: WorldModel, depth: int, task: TaskKind, **kwargs) -> Planner:
    """The full-width planner of ``gridplan.planning.planner`` over ``model``."""
    return Planner(model, depth, task, **kwargs)


def closed_loop(
    plan: Planner, start: torch.Tensor, generator: torch.Generator, task: TaskKind
) -> EpisodeResults:
    """``gridplan.planning.closed_loop.run_closed_loop`` to the task's horizon."""
    return loop.run_closed_loop(plan, start, generator, horizon=task.horizon)


def start_states(
    seeds: Sequence[int], episodes: int, task: TaskKind, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``gridplan.planning.closed_loop.start_states``: ``(len(seeds) * episodes, S)``,
    seed-major."""
    return loop.start_states(seeds, episodes, task, device)


class Imagination:
    """A world model's ``predict`` as the dynamics of imagined steps, read as the planner reads
    predicted states (``gridplan.planning.planner``): the task's true reward and termination of
    the predicted state through rounded cells (``gridplan.core.dynamics.outcome``).

    The model goes through ``gridplan.models.plugins.checked`` and ``check_contract``, as in
    ``python -m eval``: a plug-in's broken output (type, shape, dtype, device, NaN/inf) is a
    ``PluginError`` naming the method and the imagined step, and predicted values outside
    ``[0, 1]`` are clamped into it (one ``OutOfRangeWarning`` per model; ``clamped`` counts
    them), so every predicted state lies in the adapters' ``[0, 1]`` observation box.
    Built-in models (``gridplan.models.plugins.TRUSTED``) run as they are.

    Args:
        model: anything with ``predict(state (N, S), action (N,), generator) -> (N, S)``
            and optionally ``start_rollout(batch, generator)``.
        task: resolved task (``resolve``).
        device: where the contract check runs (the model's device).
        name: what to call the model in messages (default its type name).

    Raises:
        PluginError: if the model has no callable ``predict`` or fails the contract check.
    """

    def __init__(
        self, model, task: TaskKind, device: torch.device | str, name: str | None = None
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
        if capabilities_of(self.model).rollout_start:
            self.model.start_rollout(batch, generator)

    def step(
        self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """One imagined step of ``(N, S)`` states and ``(N,)`` long actions:
        ``(next_state (N, S) in [0, 1], reward (N,), terminated (N,), events)``; ``events``
        holds ``(N,)`` bools ``goal``, ``hazard`` and, thresholded at 0.5
        (``gridplan.core.env.to_flag``), ``pickup`` (the world's carrying dim turned on) and
        ``door_opened`` (its ``door_openness`` turned on: the door flag in the paper's world;
        on DoorKey the door read open, so re-opening a closed door counts too)."""
        nxt = self.model.predict(state, action, generator)
        reward, goal, hazard = outcome(nxt, self.task)
        turned_on = _flags(nxt, self.task.world) & ~_flags(state, self.task.world)
        events = {
            "goal": goal,
            "hazard": hazard,
            "pickup": turned_on[:, 0],
            "door_opened": turned_on[:, 1],
        }
        return nxt, reward, goal | hazard, events


def _flags(state: torch.Tensor, world) -> torch.Tensor:
    """``(N, 2)`` bool: carrying, door open, of ``(N, S)`` states of ``world``."""
    flags = torch.stack([state[:, world.carrying_dim], world.door_openness(state)], dim=1)
    return env.to_flag(flags)
