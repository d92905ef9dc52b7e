"""Terminal values a planner may put at the end of its imagined rollouts (paper §3 "Planner";
the paper's limitation that an exact V* heuristic may weight errors unlike other planners).

Every planner of ``gridplan.planning.planners`` scores an imagined rollout by the true reward
of its predicted states plus ``gamma^H`` times a terminal value of its last state. Three kinds
(``VALUE_KINDS``):

* ``"exact"``: the exact V* table (``gridplan.core.values.value_table``), the paper's planner;
* ``"learned"``: a fitted value function (``LearnedValue``: fitted value iteration on logged
  data through a world model, ``gridplan.metrics.relevance_estimation``), which records the
  world and task it was fitted for and is refused for any other;
* ``"none"``: no heuristic (``ZeroValue``): the depth-limited return only.

A terminal value offers ``lookup((N, S)) -> (N,)`` float, ``device`` and ``task``, like
``gridplan.core.values.ValueTable``, so the full-width search's generic scorers read it where
they read V* (``gridplan.planning.value_search``).
"""

from __future__ import annotations

import torch

from gridplan.core import dynamics
from gridplan.core.tasks import TaskKind, check
from gridplan.core.values import ValueTable

#: The kinds of terminal value a planner can use.
VALUE_KINDS: tuple[str, ...] = ("exact", "learned", "none")


class ZeroValue:
    """No heuristic: ``V(s) = 0`` for every state.

    Args:
        task: the task the planner plans (recorded, as every terminal value records it).
        device: where the returned zeros live.
    """

    kind = "none"

    def __init__(self, task: TaskKind, device: torch.device | str = "cpu") -> None:
        self.task = check(task)
        self.world = task.world
        self._device = torch.device(device)

    @property
    def device(self) -> torch.device:
        return self._device

    def lookup(self, state: torch.Tensor) -> torch.Tensor:
        """``(N,)`` zeros for ``(N, S)`` states."""
        return state.new_zeros(state.shape[0])


class LearnedValue:
    """A fitted value function as a planner's terminal value, bound to its world and task.

    Args:
        fn: callable ``(N, S) -> (N,)`` values (``gridplan.metrics.relevance_estimation.
            FittedValue``); it receives states clamped to ``[0, 1]`` (the fitted value's
            training range: ``one_step_backup_inputs`` clamps the model's predictions).
        task: the task whose reward and discount it was fitted with.
        device: where its values are returned (default: CPU).

    Attributes:
        task, world: the task and world it was fitted for (``check_value``).

    Raises:
        TypeError: if ``fn`` is not callable or ``task`` is not a task (``TaskKind``).
        ValueError: if ``fn`` declares a ``world`` other than the task's.
    """

    kind = "learned"

    def __init__(self, fn, task: TaskKind, device: torch.device | str = "cpu") -> None:
        if not callable(fn):
            raise TypeError(f"a learned value must be callable, got {type(fn).__name__}")
        self.task = check(task)
        self.world = task.world
        own = getattr(fn, "world", None)
        if own is not None and own != task.world:
            raise ValueError(
                f"the value function values states of world {own.name!r}, not the world "
                f"{task.world.name!r} of task {task.name!r}"
            )
        self.fn = fn
        self._device = torch.device(device)

    @property
    def device(self) -> torch.device:
        return self._device

    @torch.no_grad()
    def lookup(self, state: torch.Tensor) -> torch.Tensor:
        """``(N,)`` float values of ``(N, S)`` states, on the states' device."""
        out = self.fn(state.clamp(0.0, 1.0))
        return out.to(state.device, torch.float32)


def check_value(value, task: TaskKind) -> None:
    """Refuse a terminal value made for another world or task.

    Raises:
        ValueError: if ``value.task`` (or its world) differs from ``task``; the message names
            both.
    """
    own = getattr(value, "task", None)
    if own is None:
        raise ValueError(f"terminal value {type(value).__name__} records no task")
    if own.world != task.world:
        raise ValueError(
            f"the {getattr(value, 'kind', 'terminal')} value was fitted for world "
            f"{own.world.name!r}; this planner plans in world {task.world.name!r}"
        )
    if own != task:
        raise ValueError(
            f"the {getattr(value, 'kind', 'terminal')} value was fitted for task {own.name!r}; "
            f"this planner plans task {task.name!r}"
        )


def terminal_value(
    kind: str,
    task: TaskKind,
    device: torch.device | str = "cpu",
    learned: LearnedValue | None = None,
) -> ValueTable | LearnedValue | ZeroValue:
    """The terminal value of ``kind`` (one of ``VALUE_KINDS``) for ``task``.

    Raises:
        ValueError: on an unknown kind, ``"learned"`` without a learned value, or a learned
            value made for another world or task (``check_value``).
    """
    if kind not in VALUE_KINDS:
        raise ValueError(f"value must be one of {', '.join(VALUE_KINDS)}, got {kind!r}")
    if kind == "exact":
        return dynamics.value_table(task, device)
    if kind == "none":
        return ZeroValue(task, device)
    if learned is None:
        raise ValueError(
            "value 'learned' needs a fitted value function (LearnedValue; fit one with "
            "gridplan.evaluation.planner_relevance.fit_learned_value)"
        )
    check_value(learned, task)
    return learned
