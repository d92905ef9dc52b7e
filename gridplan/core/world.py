"""The world as data: grid size, wall and door, start region, distractors and colour bits.

A ``World`` fixes everything about the gridworld that is not a task: its geometry and the
layout of the ``(B, S)`` state vector. Paper §3 and appendix D describe one world, ``default``
(an 8x8 grid, one distractor of each kind, one colour bit of each kind: ``S = 12``); the
paper's first limitation is that it is the only one. Here the world is a frozen value, the
state layout is computed from it, and every layer (environment, V*, planner, models, metrics,
training, adapters) reads it from ``Task.world`` (``gridplan.core.tasks``)::

    from gridplan.core import world
    big = world.get("g32-k64")      # grid 32, 64 distractors: S = 8 + 2 * 64 = 136
    big.state_dim, big.dim_names[:3]

Layout of the state vector, in this order (``docs/DESIGN.md``, "The world as data"):

* ``agent_x, agent_y, key_x, key_y, carrying, door_open``: dims 0-5 in every world (the
  task-relevant set of the paper's Task A);
* ``c1`` static colour bits (at least one; the first, dim 6, is the bit Task B swaps its goal
  on), then ``c2`` bits that toggle every step;
* ``d1`` distractors that random-walk (x, y each), then ``d2`` distractors redrawn uniformly
  every step.

Positions are normalized ``cell / (N - 1)``; flags and bits are 0/1.

Rules that scale with the grid size ``N`` (chosen so that ``N = 8`` gives the paper's world):
the wall column is ``5N // 8`` with the door at row ``N // 2``; agent and key start on distinct
cells west of the wall; an episode lasts ``60 N / 8`` steps (``horizon``). Registered names:
``default`` and ``g{N}-k{K}`` for any grid ``N`` and ``K`` distractors, split ``K - K // 2``
random-walk and ``K // 2`` redrawn (``g8-k2`` is ``default``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from gridplan.core.doorkey_world import DoorKey
from gridplan.core.doorkey_world import get as get_doorkey
from gridplan.core.doorkey_world import is_name as is_doorkey_name

#: Smallest grid: a start region of two columns, the wall, and a column east of it.
MIN_SIZE = 5
#: Largest grid the planner's integer cells and the V* index are checked for.
MAX_SIZE = 256
#: Dims of agent, key, carrying and door: the same indices in every world.
BASE_DIMS = 6
_NAME_RULE = re.compile(r"g(\d+)-k(\d+)")
#: A Gymnasium id of MiniGrid's DoorKey, to point at its name here.
_GYM_ID = re.compile(r"minigrid-doorkey-(\d+x\d+)-v\d+", re.IGNORECASE)


def _positive_int(name: str, value, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"world {name} must be an int >= {low}, got {value!r}")


def _indexed(prefix: str, count: int, suffixes: tuple[str, ...]) -> list[str]:
    """Dim names of ``count`` objects: ``prefix_x`` for one, ``prefix_0_x`` ... for several."""
    if count == 1:
        return [f"{prefix}{s}" for s in suffixes]
    return [f"{prefix}_{i}{s}" for i in range(count) for s in suffixes]


@dataclass(frozen=True)
class World:
    """One gridworld (frozen, hashable; equal geometry compares equal whatever the name).

    Attributes:
        name: readable name (``"default"``, ``"g16-k8"``); not part of equality.
        size: grid side ``N`` in cells, ``MIN_SIZE..MAX_SIZE``.
        d1: distractors that random-walk (paper §3: ``d1``), ``>= 0``.
        d2: distractors redrawn uniformly every step (``d2``), ``>= 0``.
        c1: static colour bits, ``>= 1`` (dim 6 is the first).
        c2: colour bits that toggle every step, ``>= 0``.
        wall_x: the wall column; ``None`` fills in ``5N // 8``.
        door_y: the door's row in the wall column; ``None`` fills in ``N // 2``.
        start_columns: agent and key start on cells with ``x < start_columns``; ``None``
            fills in ``wall_x`` (the western chamber).

    Raises:
        ValueError: on a size, count or cell outside its range, a wall with no column east of
            it, or a start region with fewer than two cells.
    """

    name: str = field(default="default", compare=False)
    size: int = 8
    d1: int = 1
    d2: int = 1
    c1: int = 1
    c2: int = 1
    wall_x: int | None = None
    door_y: int | None = None
    start_columns: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"world name must be a non-empty string, got {self.name!r}")
        _positive_int("size", self.size, MIN_SIZE)
        if self.size > MAX_SIZE:
            raise ValueError(f"world size must be <= {MAX_SIZE}, got {self.size}")
        for name, low in (("d1", 0), ("d2", 0), ("c1", 1), ("c2", 0)):
            _positive_int(name, getattr(self, name), low)
        n = self.size
        wall = (5 * n) // 8 if self.wall_x is None else self.wall_x
        door = n // 2 if self.door_y is None else self.door_y
        start = wall if self.start_columns is None else self.start_columns
        _positive_int("wall_x", wall, 2)
        if wall > n - 2:
            raise ValueError(f"world wall_x must leave a column east of it: <= {n - 2}, got {wall}")
        _positive_int("door_y", door, 0)
        if door >= n:
            raise ValueError(f"world door_y must lie in 0..{n - 1}, got {door}")
        _positive_int("start_columns", start, 1)
        if start > wall or start * n < 2:
            raise ValueError(
                f"world start_columns must lie in 1..{wall} (west of the wall) and hold two "
                f"cells, got {start}"
            )
        object.__setattr__(self, "wall_x", wall)
        object.__setattr__(self, "door_y", door)
        object.__setattr__(self, "start_columns", start)

    @property
    def cell_scale(self) -> float:
        """Normalized position = cell / ``cell_scale`` (``N - 1``)."""
        return float(self.size - 1)

    @property
    def door_cell(self) -> tuple[int, int]:
        """The door cell ``(wall_x, door_y)``."""
        return (self.wall_x, self.door_y)

    @property
    def horizon(self) -> int:
        """Default episode length: 60 steps on the 8-grid, in proportion to ``N`` (paper §3)."""
        return (60 * self.size) // 8

    @property
    def n_distractors(self) -> int:
        """``d1 + d2``."""
        return self.d1 + self.d2

    @property
    def c1_dims(self) -> tuple[int, ...]:
        """Indices of the static colour bits (dim 6 first)."""
        return tuple(range(BASE_DIMS, BASE_DIMS + self.c1))

    @property
    def c2_dims(self) -> tuple[int, ...]:
        """Indices of the toggling colour bits."""
        lo = BASE_DIMS + self.c1
        return tuple(range(lo, lo + self.c2))

    @property
    def d1_dims(self) -> tuple[int, ...]:
        """Indices of the random-walk distractors' coordinates, ``x, y`` per distractor."""
        lo = BASE_DIMS + self.c1 + self.c2
        return tuple(range(lo, lo + 2 * self.d1))

    @property
    def d2_dims(self) -> tuple[int, ...]:
        """Indices of the redrawn distractors' coordinates, ``x, y`` per distractor."""
        lo = BASE_DIMS + self.c1 + self.c2 + 2 * self.d1
        return tuple(range(lo, lo + 2 * self.d2))

    @property
    def state_dim(self) -> int:
        """``S = 6 + c1 + c2 + 2 (d1 + d2)``."""
        return BASE_DIMS + self.c1 + self.c2 + 2 * self.n_distractors

    @property
    def position_dims(self) -> tuple[int, ...]:
        """Dims that hold a grid coordinate (normalized by ``cell_scale``)."""
        return (0, 1, 2, 3, *self.d1_dims, *self.d2_dims)

    @property
    def flag_dims(self) -> tuple[int, ...]:
        """Dims that hold a 0/1 flag or bit: carrying, door, then the colour bits."""
        return (4, 5, *self.c1_dims, *self.c2_dims)

    @property
    def dim_scales(self) -> tuple[float, ...]:
        """Per dim, the steps of its lattice: ``N - 1`` for a coordinate, 1 for a flag."""
        positions = set(self.position_dims)
        return tuple(self.cell_scale if d in positions else 1.0 for d in range(self.state_dim))

    @property
    def n_actions(self) -> int:
        """The four moves (``gridplan.core.constants``)."""
        return 4

    @property
    def carrying_dim(self) -> int:
        """The carrying flag's dim (4)."""
        return 4

    @property
    def door_dim(self) -> int:
        """The door flag's dim (5)."""
        return 5

    def door_openness(self, state: torch.Tensor) -> torch.Tensor:
        """How open ``(B, S)`` states say the door is, 1 open: the ``door_open`` flag."""
        return state[:, self.door_dim]

    @property
    def dim_names(self) -> tuple[str, ...]:
        """Name of every state dim, in layout order (``default``: the paper's twelve)."""
        names = ["agent_x", "agent_y", "key_x", "key_y", "carrying", "door_open"]
        names += _indexed("c1", self.c1, ("",)) + _indexed("c2", self.c2, ("",))
        names += _indexed("d1", self.d1, ("_x", "_y")) + _indexed("d2", self.d2, ("_x", "_y"))
        return tuple(names)

    @property
    def file_prefix(self) -> str:
        """``<name>-`` in front of the names of run folders and cached or exported files, empty
        in the default world (whose files keep the names they had before worlds)."""
        return "" if self == DEFAULT else f"{self.name}-"

    def spec(self) -> dict:
        """The world as a JSON-ready dict (stored in checkpoints, datasets and reports)."""
        return {
            "name": self.name,
            "size": self.size,
            "d1": self.d1,
            "d2": self.d2,
            "c1": self.c1,
            "c2": self.c2,
            "wall_x": self.wall_x,
            "door_y": self.door_y,
            "start_columns": self.start_columns,
            "state_dim": self.state_dim,
        }

    @classmethod
    def from_spec(cls, spec: dict) -> World:
        """Inverse of ``spec``. Raises ValueError on a missing key or a malformed value."""
        if not isinstance(spec, dict):
            raise ValueError(f"a world spec must be a dict, got {type(spec).__name__}")
        keys = ("name", "size", "d1", "d2", "c1", "c2", "wall_x", "door_y", "start_columns")
        missing = [k for k in keys if k not in spec]
        if missing:
            raise ValueError(f"world spec lacks {', '.join(missing)}")
        world = cls(**{k: spec[k] for k in keys})
        if "state_dim" in spec and spec["state_dim"] != world.state_dim:
            raise ValueError(
                f"world spec {spec['name']!r} states state_dim {spec['state_dim']}, its "
                f"layout has {world.state_dim}"
            )
        return world

    def describe(self) -> str:
        """One line for reports: ``g32-k64 (32x32, S=136: 32 d1 + 32 d2 distractors, ...)``."""
        return (
            f"{self.name} ({self.size}x{self.size}, S={self.state_dim}: {self.d1} d1 + {self.d2} "
            f"d2 distractors, {self.c1} c1 + {self.c2} c2 bits)"
        )


DEFAULT = World()

_REGISTRY: dict[str, World] = {}


def register(world: World, *, overwrite: bool = False) -> World:
    """Add ``world`` under ``world.name`` and return it.

    Raises:
        TypeError: if ``world`` is not a ``World``.
        ValueError: if the name is taken by another world and ``overwrite`` is false.
    """
    if not isinstance(world, World):
        raise TypeError(f"register expects a World, got {type(world).__name__}")
    old = _REGISTRY.get(world.name)
    if old is not None and old != world and not overwrite:
        raise ValueError(f"world {world.name!r} is already registered; pass overwrite=True")
    _REGISTRY[world.name] = world
    return world


def names() -> tuple[str, ...]:
    """Registered world names, in registration order (``g{N}-k{K}`` resolves beyond them)."""
    return tuple(_REGISTRY)


def grid(size: int, distractors: int) -> World:
    """The world ``g{size}-k{distractors}``: one colour bit of each kind, ``K - K // 2``
    random-walk and ``K // 2`` redrawn distractors, geometry by the module's rules."""
    d2 = distractors // 2
    spec = World(size=size, d1=distractors - d2, d2=d2)
    if spec == DEFAULT:
        return DEFAULT
    return World(name=f"g{size}-k{distractors}", size=size, d1=distractors - d2, d2=d2)


#: The kinds of world every layer accepts: the paper's gridworld and MiniGrid DoorKey
#: (``gridplan.core.doorkey_world``). Both give ``name``, ``state_dim``, ``dim_names``,
#: ``cell_scale``, ``flag_dims``, ``horizon``, ``n_actions``, ``file_prefix``, ``describe()``
#: and ``spec()``; a task of either kind is a ``gridplan.core.tasks.TaskKind``.
WORLD_KINDS = (World, DoorKey)


def get(world: str | World | DoorKey) -> World | DoorKey:
    """Resolve a world name (or pass a ``World`` or ``DoorKey`` through).

    Raises:
        ValueError: if the name is neither registered, nor of the form ``g{N}-k{K}``, nor a
            DoorKey name ``minigrid-doorkey-{N}x{N}[-t{T}]`` (the message lists the names).
        TypeError: if ``world`` is neither a string nor a world.
    """
    if isinstance(world, WORLD_KINDS):
        return world
    if not isinstance(world, str):
        raise TypeError(f"world must be a name or a World, got {type(world).__name__}")
    if is_doorkey_name(world):
        return get_doorkey(world)
    if world in _REGISTRY:
        return _REGISTRY[world]
    match = _NAME_RULE.fullmatch(world)
    if match is None:
        gym_id = _GYM_ID.fullmatch(world)
        hint = f" (for MiniGrid's {world}: minigrid-doorkey-{gym_id[1]})" if gym_id else ""
        raise ValueError(
            f"unknown world {world!r}{hint}; registered worlds are {', '.join(_REGISTRY)}, "
            "g{N}-k{K} names a grid of N cells with K distractors, and "
            "minigrid-doorkey-{N}x{N} MiniGrid's DoorKey"
        )
    return grid(int(match[1]), int(match[2]))


def check(world: World | DoorKey) -> World | DoorKey:
    """Return ``world`` if it is a world of either kind (``WORLD_KINDS``). Raises TypeError
    naming what was passed."""
    if not isinstance(world, WORLD_KINDS):
        raise TypeError(f"world must be a gridplan.core.world.World, got {type(world).__name__}")
    return world


register(DEFAULT)
register(grid(16, 8))
register(grid(32, 64))


def recorded(record: dict, what: str = "record") -> World | DoorKey:
    """The world a checkpoint, dataset or report ``record`` states under ``"world"``; a
    record without one predates worlds and holds the default world.

    Raises:
        ValueError: if the stated world is malformed (naming ``what``).
    """
    spec = record.get("world") if isinstance(record, dict) else None
    if spec is None:
        return DEFAULT
    kind = DoorKey if isinstance(spec, dict) and spec.get("kind") == "minigrid-doorkey" else World
    try:
        return kind.from_spec(spec)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} states a malformed world {spec!r}: {err}") from err
