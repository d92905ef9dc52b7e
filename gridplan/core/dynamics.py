"""The task protocol: what every layer asks of a task, whatever its world.

Two kinds of task exist (``gridplan.core.tasks.TASK_KINDS``): the paper's gridworld
(``tasks.Task``: data; its dynamics are ``gridplan.core.env`` and its V* ``gridplan.core.values``)
and Farama MiniGrid DoorKey (``gridplan.core.doorkey_task.DoorKeyTask``, which carries its own).
The planner, the closed loop, the data, the metrics and the models reach either through the
functions here only, so no layer above ``core`` branches on a task's kind. States are
``(B, S)`` float, ``S = task.world.state_dim``; actions ``(B,)`` long in
``0..task.world.n_actions - 1``.
"""

from __future__ import annotations

import torch

from gridplan.core import env, values
from gridplan.core.doorkey_task import DoorKeyTask, DoorKeyValueTable
from gridplan.core.tasks import TaskKind, check


def reset(task: TaskKind, batch: int, generator: torch.Generator) -> torch.Tensor:
    """``(B, S)`` start states drawn from ``task``'s start distribution.

    Raises:
        ValueError: if ``batch < 1``.
        TypeError: if ``task`` is not a task.
    """
    if isinstance(check(task), DoorKeyTask):
        return task.reset(batch, generator)
    return env.reset(batch, generator, task)


def step(
    task: TaskKind, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """One validated true step: ``(next (B, S), reward (B,), terminated (B,) bool, info)``;
    ``info`` holds ``(B,)`` bool ``goal``, ``hazard``, ``pickup`` and ``door_opened``.

    Raises:
        ValueError: on a malformed state (naming the rule it breaks) or bad actions.
    """
    if isinstance(check(task), DoorKeyTask):
        return task.step(state, action, generator)
    return env.step(state, action, generator, task)


def transition(
    task: TaskKind, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """``step`` of any (possibly noisy) state read through rounded cells, without validation:
    what the controlled family applies to a belief (paper §4.2)."""
    if isinstance(task, DoorKeyTask):
        return task.transition(state, action, generator)
    return env.transition(state, action, generator, task)


def outcome(task: TaskKind, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sparse reward of arriving in ``(B, S)`` (possibly predicted) states: ``(reward (B,)
    float, goal (B,) bool, hazard (B,) bool)``. No validation."""
    if isinstance(task, DoorKeyTask):
        return task.outcome(state)
    return env.state_outcome(state, task)


def value_table(
    task: TaskKind, device: torch.device | str = "cpu"
) -> values.ValueTable | DoorKeyValueTable:
    """The exact V* of ``task``, cached: ``lookup(state) -> (B,)`` (no validation, any float
    state), ``q_values(state) -> (B, A)``, ``gamma`` and ``device``.

    Raises:
        ValueError: if the paper's world is too large for exact V*
            (``gridplan.core.values.check_table_memory``).
    """
    if isinstance(check(task), DoorKeyTask):
        return task.value_table(device)
    return values.value_table(task, device)
