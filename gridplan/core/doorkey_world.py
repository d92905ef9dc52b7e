"""The DoorKey world as data: grid size, step limit and view size, and its names.

Farama MiniGrid's ``MiniGrid-DoorKey-{N}x{N}-v0`` is the paper's problem (fetch a key, open a
door, reach a goal) as the field plays it: a heading with turn and forward actions, pickup and
toggle on the cell in front, a locked door, a layout drawn per episode, an egocentric occluded
view. ``doorkey_constants`` names the state dims and codes, this module the settings,
``doorkey_env`` the batched ``reset``/``step``, ``doorkey_observe`` the observations and
``doorkey_values`` the exact values; ``docs/DESIGN.md`` ("MiniGrid DoorKey") the choices.

A ``DoorKey`` fixes what MiniGrid's ``DoorKeyEnv(size, max_steps, agent_view_size)`` fixes;
everything drawn per episode (wall column, door row, agent, heading, key) lives in the state
(``gridplan.core.doorkey_constants``). MiniGrid registers ``MiniGrid-DoorKey-{5,6,8,16}x..-v0``;
any ``N >= 5`` is a world here, named ``minigrid-doorkey-{N}x{N}``::

    from gridplan.core import doorkey_world as world
    w = world.get("minigrid-doorkey-8x8")      # DoorKey(size=8): max_steps 640, 7x7 view
    w.goal, w.wall_columns, w.door_rows          # (6, 6), (2, 3, 4, 5), (1, 2, 3, 4, 5)

Rules (``minigrid/envs/doorkey.py``): outer walls, the goal at ``(N - 2, N - 2)``, a wall
column ``splitIdx`` drawn from ``2..N-3``, a locked door in it at a row drawn from ``1..N-3``
(MiniGrid's ``_rand_int(1, height - 2)`` excludes the row ``N - 2``), agent and key on distinct
cells of the room west of the wall, ``max_steps = 10 N^2``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Smallest grid: outer walls, one column west of the wall column, one east of it.
MIN_SIZE = 5
#: Largest grid: observation codes are uint8 and cells index int64 tables.
MAX_SIZE = 255
#: The sizes MiniGrid registers as ``MiniGrid-DoorKey-{N}x{N}-v0``.
MINIGRID_SIZES = (5, 6, 8, 16)
_NAME = re.compile(r"minigrid-doorkey-(\d+)x(\d+)")


@dataclass(frozen=True)
class DoorKey:
    """Settings of one DoorKey world (frozen, hashable).

    Attributes:
        size: grid side ``N`` in cells, ``MIN_SIZE..MAX_SIZE``, walls included.
        max_steps: episode step limit; ``None`` fills in MiniGrid's ``10 N^2``.
        view_size: side of the egocentric view, odd, ``3..9`` (MiniGrid's
            ``agent_view_size``, 7 by default).

    Raises:
        ValueError: on a size, step limit or view size outside its range.
    """

    size: int = 8
    max_steps: int | None = None
    view_size: int = 7

    def __post_init__(self) -> None:
        for name, low, high in (("size", MIN_SIZE, MAX_SIZE), ("view_size", 3, 9)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"DoorKey {name} must be an int in {low}..{high}, got {value!r}")
        if self.view_size % 2 == 0:
            raise ValueError(f"DoorKey view_size must be odd, got {self.view_size}")
        if self.max_steps is None:
            object.__setattr__(self, "max_steps", 10 * self.size**2)
        steps = self.max_steps
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"DoorKey max_steps must be a positive int, got {steps!r}")

    @property
    def name(self) -> str:
        """``minigrid-doorkey-{N}x{N}`` (the step limit and view size are not in the name)."""
        return f"minigrid-doorkey-{self.size}x{self.size}"

    @property
    def gym_id(self) -> str:
        """MiniGrid's environment id, ``MiniGrid-DoorKey-{N}x{N}-v0``."""
        return f"MiniGrid-DoorKey-{self.size}x{self.size}-v0"

    @property
    def goal(self) -> tuple[int, int]:
        """The goal cell ``(N - 2, N - 2)``."""
        return (self.size - 2, self.size - 2)

    @property
    def wall_columns(self) -> tuple[int, ...]:
        """Columns the wall is drawn from: ``2..N-3``."""
        return tuple(range(2, self.size - 2))

    @property
    def door_rows(self) -> tuple[int, ...]:
        """Rows the door is drawn from: ``1..N-3``."""
        return tuple(range(1, self.size - 2))

    @property
    def layouts(self) -> tuple[tuple[int, int], ...]:
        """Every ``(wall_x, door_y)`` reset can draw, wall-major."""
        return tuple((w, d) for w in self.wall_columns for d in self.door_rows)


def get(world: str | DoorKey) -> DoorKey:
    """Resolve ``minigrid-doorkey-{N}x{N}`` (or pass a ``DoorKey`` through).

    Raises:
        ValueError: on another name, a non-square grid, or a size out of range.
        TypeError: if ``world`` is neither a string nor a ``DoorKey``.
    """
    if isinstance(world, DoorKey):
        return world
    if not isinstance(world, str):
        raise TypeError(f"world must be a name or a DoorKey, got {type(world).__name__}")
    match = _NAME.fullmatch(world)
    if match is None or match[1] != match[2]:
        raise ValueError(
            f"unknown DoorKey world {world!r}; names are minigrid-doorkey-{{N}}x{{N}} with "
            f"N in {MIN_SIZE}..{MAX_SIZE} (MiniGrid registers {MINIGRID_SIZES})"
        )
    return DoorKey(size=int(match[1]))


def names() -> tuple[str, ...]:
    """The names of the sizes MiniGrid registers."""
    return tuple(DoorKey(size=n).name for n in MINIGRID_SIZES)
