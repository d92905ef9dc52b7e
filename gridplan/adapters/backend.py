"""The adapters' only calls into the gridplan core: environment, reward geometry, V*, planner.

Every adapter resolves its ``task`` once with ``gridplan.core.tasks.get`` and goes through these
functions, so a change of a core signature is a change here only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gridplan.core import env, tasks, values
from gridplan.core.tasks import Task
from gridplan.core.values import ValueTable
from gridplan.models.contract import WorldModel
from gridplan.planning import closed_loop as loop
from gridplan.planning.closed_loop import EpisodeResults
from gridplan.planning.planner import Planner


def resolve(task: str | Task, world: str | None = None) -> Task:
    """A task name or ``Task`` (on ``world`` when given) -> ``Task``. Raises
    ValueError/TypeError as ``tasks.get``."""
    return tasks.get(task, world=world)


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
