"""Tasks as data: goal and hazard geometry, relevant dimensions, horizon, discount, exact V*.

A ``Task`` holds everything that differs between tasks, the way gymnax keeps ``EnvParams``
apart from the state: the environment, the value table, the planner and the metrics read it
and never branch on a task name. A task names its world (``gridplan.core.world.World``: grid,
distractors, colour bits, the state layout), so every layer that takes a task takes the world.
Names are resolved once, at the boundary (the command lines and the top-level API), through the
registry::

    from gridplan.core import tasks
    task_a = tasks.get("A")                      # the paper's world
    big_a = tasks.get("A", world="g32-k64")      # Task A by its rule on a 32-grid
    tasks.register("far_goal", dataclasses.replace(task_a, name="far_goal", goal=(7, 0)))

Adding a task is one ``Task(...)`` and one ``register`` call; nothing else in the library
names a task. The built-in tasks place their cells by a rule of the grid size ``N`` (``N = 8``
gives the paper's cells): Task A's goal is ``(N - 1, door_y)``; Task B's goal is
``(N - 1, N // 4)`` and its hazard ``(N - 1, 5N // 8)``. Paper §3 (Task A), §5.3 (Task B);
``docs/DESIGN.md`` describes how to add a task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gridplan.core import world as worlds
from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    CARRYING,
    DEFAULT_GAMMA,
    DOOR_OPEN,
    KEY_X,
    KEY_Y,
)
from gridplan.core.doorkey_task import DoorKeyTask, task_on
from gridplan.core.world import World

Cell = tuple[int, int]

#: The relevant set of Task A; the controlled family M(sigma_r, sigma_i) splits its noise by
#: it in every task (paper §4.2, §5.3: Task B's c1 is noised as an irrelevant dimension).
#: It is also what V* reads in a task whose goal does not depend on ``c1``.
PAPER_RELEVANT_DIMS = (AGENT_X, AGENT_Y, KEY_X, KEY_Y, CARRYING, DOOR_OPEN)
#: Episode length of the paper's tasks, in environment steps (paper §3): the default world's.
DEFAULT_HORIZON = worlds.DEFAULT.horizon


def _check_cell(name: str, cell: Cell | None, world: World) -> None:
    if cell is None:
        return
    n = world.size
    if (
        not isinstance(cell, tuple)
        or len(cell) != 2
        or not all(isinstance(v, int) and 0 <= v < n for v in cell)
    ):
        raise ValueError(f"{name} must be a cell (x, y) with integers in 0..{n - 1}, "
                         f"got {cell!r}")
    if cell[0] == world.wall_x:
        raise ValueError(f"{name} {cell} lies in the wall column x = {world.wall_x}")


def _check_dims(name: str, dims: tuple[int, ...], world: World) -> None:
    s = world.state_dim
    if (
        not isinstance(dims, tuple)
        or not dims
        or len(set(dims)) != len(dims)
        or not all(isinstance(d, int) and 0 <= d < s for d in dims)
    ):
        raise ValueError(f"{name} must be a non-empty tuple of distinct state dimensions in "
                         f"0..{s - 1}, got {dims!r}")


@dataclass(frozen=True)
class Task:
    """One task of the gridworld (frozen, hashable; compare and cache by value).

    Attributes:
        name: registry name, e.g. ``"A"``.
        goal: goal cell ``(x, y)`` (reward +1, terminal); with ``swap_on_c1`` the goal while
            ``c1 < 0.5``.
        hazard: hazard cell (reward -1, terminal), or ``None`` for a task without one.
        swap_on_c1: when ``True`` the static bit ``c1 >= 0.5`` swaps goal and hazard
            (Task B, paper §5.3); then V* reads ``c1`` and it is decision-relevant.
        relevant_dims: the dimensions V* reads: the task's decision-relevant set, stored in
            state-layout order (agent, key, carrying, door, then ``c1`` when ``swap_on_c1``),
            the order of the V* table's index. ``None`` (the default) fills it in.
        noise_relevant_dims: the set the controlled family ``M(sigma_r, sigma_i)`` noises with
            ``sigma_r`` (the rest get ``sigma_i``); the paper's Task A set in every task.
        horizon: episode length in steps (truncation, not termination); ``None`` (the
            default) fills in the world's ``horizon``.
        gamma: discount of V* in ``(0, 1)``.
        world: the gridworld the task is played in (``gridplan.core.world``).

    Raises:
        ValueError: on a malformed cell (off the grid or in the wall), dimension set, horizon
            or discount; if the hazard sits on the goal; if ``swap_on_c1`` is set without a
            hazard; or if ``relevant_dims`` is not the set V* reads (the task's rules fix it).
        TypeError: if ``world`` is not a ``World``.
    """

    name: str
    goal: Cell
    hazard: Cell | None = None
    swap_on_c1: bool = False
    relevant_dims: tuple[int, ...] | None = None
    noise_relevant_dims: tuple[int, ...] = PAPER_RELEVANT_DIMS
    horizon: int | None = None
    gamma: float = DEFAULT_GAMMA
    world: World = worlds.DEFAULT

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"task name must be a non-empty string, got {self.name!r}")
        worlds.check(self.world)
        _check_cell("goal", self.goal, self.world)
        _check_cell("hazard", self.hazard, self.world)
        if self.hazard is not None and self.hazard == self.goal:
            raise ValueError(f"task {self.name!r}: hazard {self.hazard} sits on the goal")
        if self.swap_on_c1 and self.hazard is None:
            raise ValueError(f"task {self.name!r}: swap_on_c1 needs a hazard to swap with")
        # V* reads the agent, the key, both flags and, when it swaps the goal, c1: the
        # relevant set follows from the rules, so a declared one is checked against them.
        read = PAPER_RELEVANT_DIMS + ((C1,) if self.swap_on_c1 else ())
        if self.relevant_dims is not None:
            _check_dims("relevant_dims", self.relevant_dims, self.world)
            if set(self.relevant_dims) != set(read):
                raise ValueError(
                    f"task {self.name!r}: relevant_dims must be the dims V* reads, {read} "
                    f"(c1 only with swap_on_c1), got {self.relevant_dims!r}; pass "
                    "relevant_dims=None to have it filled in"
                )
        object.__setattr__(self, "relevant_dims", read)
        _check_dims("noise_relevant_dims", self.noise_relevant_dims, self.world)
        if self.horizon is None:
            object.__setattr__(self, "horizon", self.world.horizon)
        if not isinstance(self.horizon, int) or self.horizon < 1:
            raise ValueError(f"horizon must be a positive int, got {self.horizon!r}")
        if not 0.0 < float(self.gamma) < 1.0:
            raise ValueError(f"gamma must lie in (0, 1), got {self.gamma!r}")

    @property
    def reads_c1(self) -> bool:
        """Whether the goal geometry, hence V*, depends on ``c1``."""
        return self.swap_on_c1

    def goal_cells(self, c1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Active goal and hazard cells per row.

        Args:
            c1: ``(B,)`` bool, the static colour bit (read only when ``swap_on_c1``).

        Returns:
            ``(goal, hazard)``: ``(B, 2)`` long cells; ``hazard`` is ``None`` without a hazard.
        """
        goal = torch.tensor(self.goal, device=c1.device).expand(c1.shape[0], 2)
        if self.hazard is None:
            return goal, None
        hazard = torch.tensor(self.hazard, device=c1.device).expand(c1.shape[0], 2)
        if not self.swap_on_c1:
            return goal, hazard
        pick = c1.unsqueeze(1)
        return torch.where(pick, hazard, goal), torch.where(pick, goal, hazard)


def task_a(world: World = worlds.DEFAULT) -> Task:
    """Task A on ``world`` (paper §3): the goal on the east edge, in the door's row."""
    return Task(name="A", goal=(world.size - 1, world.door_y), world=world)


def task_b(world: World = worlds.DEFAULT) -> Task:
    """Task B on ``world`` (paper §5.3): goal and hazard on the east edge at rows ``N // 4``
    and ``5N // 8``, swapped by ``c1``."""
    n = world.size
    return Task(
        name="B",
        goal=(n - 1, n // 4),
        hazard=(n - 1, (5 * n) // 8),
        swap_on_c1=True,
        relevant_dims=(*PAPER_RELEVANT_DIMS, C1),
        world=world,
    )


TASK_A = task_a()
TASK_B = task_b()

#: The kinds of task every layer takes: the paper's gridworld and MiniGrid DoorKey
#: (``gridplan.core.doorkey_task``). What a layer asks of either (reset, step, reward, V*)
#: goes through ``gridplan.core.dynamics``.
TASK_KINDS = (Task, DoorKeyTask)
TaskKind = Task | DoorKeyTask

_REGISTRY: dict[str, Task] = {}
#: Tasks defined on every world by a rule of its geometry.
_RULES: dict[str, Callable[[World], Task]] = {"A": task_a, "B": task_b}


def register(name: str, task: Task, *, overwrite: bool = False) -> Task:
    """Add ``task`` to the registry under ``name`` and return it.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
        ValueError: if ``name`` differs from ``task.name``, or is taken and ``overwrite`` is
            false.
    """
    if not isinstance(task, Task):
        raise TypeError(f"register expects a Task, got {type(task).__name__}")
    if name != task.name:
        raise ValueError(f"registry name {name!r} differs from the task's name {task.name!r}")
    if name in _REGISTRY and not overwrite and _REGISTRY[name] != task:
        raise ValueError(f"task {name!r} is already registered; pass overwrite=True to replace")
    _REGISTRY[name] = task
    return task


def unregister(name: str) -> None:
    """Remove a task from the registry (tests that register temporary tasks use it)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """Registered task names, in registration order."""
    return tuple(_REGISTRY)


def check(task: TaskKind) -> TaskKind:
    """Return ``task`` if it is a task of either kind (``TASK_KINDS``): the library's
    functions take tasks, not names.

    Raises:
        TypeError: naming what was passed instead (resolve a name with ``get``).
    """
    if not isinstance(task, TASK_KINDS):
        hint = ""
        if isinstance(task, str):
            hint = f" {task!r}; resolve a name with gridplan.core.tasks.get"
        raise TypeError(
            f"task must be a gridplan.core.tasks.Task, got {type(task).__name__}{hint}"
        )
    return task


def get(task: str | TaskKind, world=None) -> TaskKind:
    """Resolve a task name (or pass a task through), on ``world`` when given.

    A built-in task (``A``, ``B``) is placed on any world by its rule (module docstring); a
    registered one exists on the world it was defined on only. On a MiniGrid DoorKey world
    (``gridplan.core.doorkey_world``) the one task is MiniGrid's, named ``A`` (the same
    problem: fetch the key, open the door, reach the goal): ``doorkey_task.DoorKeyTask``.

    Raises:
        ValueError: if the name is not registered (the message lists the valid names), the
            world is unknown (``gridplan.core.world.get``), a registered task or a ``Task``
            passed in is played on another world than ``world``, or a task other than ``A``
            is asked of a DoorKey world.
        TypeError: if ``task`` is neither a string nor a task.
    """
    target = None if world is None else worlds.get(world)
    if isinstance(target, worlds.DoorKey):
        return task_on(task, target)
    if isinstance(task, TASK_KINDS):
        found = task
    elif not isinstance(task, str):
        raise TypeError(f"task must be a name or a Task, got {type(task).__name__}")
    elif target is not None and target != worlds.DEFAULT and task in _RULES:
        return _RULES[task](target)
    else:
        try:
            found = _REGISTRY[task]
        except KeyError:
            raise ValueError(
                f"unknown task {task!r}; valid tasks are {', '.join(_REGISTRY)}"
            ) from None
    if target is not None and found.world != target:
        raise ValueError(
            f"task {found.name!r} is played on world {found.world.name!r}, not "
            f"{target.name!r}; register a task for that world"
        )
    return found


register("A", TASK_A)
register("B", TASK_B)
