"""The DoorKey world as data: grid size, step limit and view size, and its names.

Farama MiniGrid's ``MiniGrid-DoorKey-{N}x{N}-v0`` is the paper's problem (fetch a key, open a
door, reach a goal) as the field plays it: a heading with turn and forward actions, pickup and
toggle on the cell in front, a locked door, a layout drawn per episode, an egocentric occluded
view. ``doorkey_constants`` names the state dims and codes, this module the settings,
``doorkey_env`` the batched ``reset``/``step``, ``doorkey_observe`` the observations,
``doorkey_render`` the RGB frames, ``doorkey_tiles`` the floor tiles' drawing,
``doorkey_values`` the exact values and ``doorkey_task`` the float state every layer reads;
``docs/DESIGN.md`` ("MiniGrid DoorKey") the choices.

A ``DoorKey`` fixes what MiniGrid's ``DoorKeyEnv(size, max_steps, agent_view_size)`` fixes;
everything drawn per episode (wall column, door row, agent, heading, key) lives in the state
(``gridplan.core.doorkey_constants``). MiniGrid registers ``MiniGrid-DoorKey-{5,6,8,16}x..-v0``;
any ``N >= 5`` is a world here, named ``minigrid-doorkey-{N}x{N}``, and
``minigrid-doorkey-{N}x{N}-t{T}`` with ``T`` moving floor tiles, irrelevant distractors::

    from gridplan.core import doorkey_world as world
    w = world.get("minigrid-doorkey-8x8")      # DoorKey(size=8): max_steps 640, 7x7 view
    w.goal, w.wall_columns, w.door_rows          # (6, 6), (2, 3, 4, 5), (1, 2, 3, 4, 5)

Rules (``minigrid/envs/doorkey.py``): outer walls, the goal at ``(N - 2, N - 2)``, a wall
column ``splitIdx`` drawn from ``2..N-3``, a locked door in it at a row drawn from ``1..N-3``
(MiniGrid's ``_rand_int(1, height - 2)`` excludes the row ``N - 2``), agent and key on distinct
cells of the room west of the wall, ``max_steps = 10 N^2``.

The world also fixes the ``(B, S)`` float state that models, the planner and the metrics read
(``gridplan.core.doorkey_task``): ``S = 9 + 2 T`` dims named by ``dim_names``, positions
``cell / (N - 1)``, heading ``h / 3``, door state ``d / 2``, then the tiles' cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

#: Smallest grid: outer walls, one column west of the wall column, one east of it.
MIN_SIZE = 5
#: Largest grid: observation codes are uint8 and cells index int64 tables.
MAX_SIZE = 255
#: The sizes MiniGrid registers as ``MiniGrid-DoorKey-{N}x{N}-v0``.
MINIGRID_SIZES = (5, 6, 8, 16)
#: Most floor tiles a world may have.
MAX_TILES = 64
#: Dims of the float state before the tiles: agent cell, heading, key cell, carrying, door
#: state, wall column, door row (``gridplan.core.doorkey_task``).
BASE_DIM_NAMES = (
    "agent_x", "agent_y", "heading", "key_x", "key_y", "carrying", "door", "wall_x", "door_y",
)
#: MiniGrid's action count (``gridplan.core.doorkey_constants``).
N_ACTIONS = 7
_NAME = re.compile(r"minigrid-doorkey-(\d+)x(\d+)(?:-t(\d+))?")


@dataclass(frozen=True)
class DoorKey:
    """Settings of one DoorKey world (frozen, hashable).

    Attributes:
        size: grid side ``N`` in cells, ``MIN_SIZE..MAX_SIZE``, walls included.
        max_steps: episode step limit; ``None`` fills in MiniGrid's ``10 N^2``.
        view_size: side of the egocentric view, odd, ``3..9`` (MiniGrid's
            ``agent_view_size``, 7 by default).
        tiles: moving floor tiles ``0..MAX_TILES``: distractors the observation shows and
            neither the dynamics nor the reward read (``doorkey_task``).

    Raises:
        ValueError: on a size, step limit, view size or tile count outside its range.
    """

    size: int = 8
    max_steps: int | None = None
    view_size: int = 7
    tiles: int = 0

    def __post_init__(self) -> None:
        bounds = (("size", MIN_SIZE, MAX_SIZE), ("view_size", 3, 9), ("tiles", 0, MAX_TILES))
        for name, low, high in bounds:
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
        """``minigrid-doorkey-{N}x{N}``, with ``-t{T}`` for ``T`` tiles (the step limit and
        view size are not in the name)."""
        tiles = f"-t{self.tiles}" if self.tiles else ""
        return f"minigrid-doorkey-{self.size}x{self.size}{tiles}"

    @property
    def state_dim(self) -> int:
        """Width ``S = 9 + 2 T`` of the float state (module docstring)."""
        return len(BASE_DIM_NAMES) + 2 * self.tiles

    @property
    def dim_names(self) -> tuple[str, ...]:
        """Name of every float state dim: ``BASE_DIM_NAMES``, then ``tile_{i}_x/y``."""
        tiles = [f"tile_{i}_{c}" for i in range(self.tiles) for c in ("x", "y")]
        return (*BASE_DIM_NAMES, *tiles)

    @property
    def n_distractors(self) -> int:
        """The floor tiles, DoorKey's distractors."""
        return self.tiles

    @property
    def tile_dims(self) -> tuple[int, ...]:
        """Indices of the tiles' coordinates, ``x, y`` per tile."""
        return tuple(range(len(BASE_DIM_NAMES), self.state_dim))

    @property
    def cell_scale(self) -> float:
        """Normalized position = cell / ``cell_scale`` (``N - 1``)."""
        return float(self.size - 1)

    @property
    def flag_dims(self) -> tuple[int, ...]:
        """Dims that hold a 0/1 flag: carrying."""
        return (BASE_DIM_NAMES.index("carrying"),)

    @property
    def dim_scales(self) -> tuple[float, ...]:
        """Per dim, the steps of its lattice: ``N - 1`` for a cell, 3 for the heading, 2 for
        the door state, 1 for carrying (``gridplan.core.doorkey_task``)."""
        n1 = self.cell_scale
        base = (n1, n1, 3.0, n1, n1, 1.0, 2.0, n1, n1)
        return base + (n1,) * (2 * self.tiles)

    @property
    def carrying_dim(self) -> int:
        """The carrying flag's dim (5)."""
        return BASE_DIM_NAMES.index("carrying")

    @property
    def door_dim(self) -> int:
        """The door state's dim (6: 0 open, 0.5 closed, 1 locked)."""
        return BASE_DIM_NAMES.index("door")

    def door_openness(self, state: torch.Tensor) -> torch.Tensor:
        """How open ``(B, S)`` states say the door is, 1 open: ``1 - door``."""
        return 1.0 - state[:, self.door_dim]

    @property
    def horizon(self) -> int:
        """Episode length: MiniGrid's step limit ``max_steps``."""
        return self.max_steps

    @property
    def n_actions(self) -> int:
        """MiniGrid's seven actions."""
        return N_ACTIONS

    @property
    def file_prefix(self) -> str:
        """``<name>-`` in front of the names of run folders and written files."""
        return f"{self.name}-"

    def describe(self) -> str:
        """One line for reports: ``minigrid-doorkey-8x8 (MiniGrid DoorKey 8x8, S=9, ...)``."""
        return (
            f"{self.name} (MiniGrid DoorKey {self.size}x{self.size}, S={self.state_dim}: "
            f"{self.tiles} floor tiles, max_steps {self.max_steps})"
        )

    def spec(self) -> dict:
        """The world as a JSON-ready dict (stored in checkpoints, datasets and reports)."""
        return {
            "name": self.name,
            "kind": "minigrid-doorkey",
            "size": self.size,
            "max_steps": self.max_steps,
            "view_size": self.view_size,
            "tiles": self.tiles,
            "state_dim": self.state_dim,
        }

    @classmethod
    def from_spec(cls, spec: dict) -> DoorKey:
        """Inverse of ``spec``. Raises ValueError on a missing key or a malformed value."""
        keys = ("size", "max_steps", "view_size", "tiles")
        missing = [k for k in keys if not isinstance(spec, dict) or k not in spec]
        if missing:
            raise ValueError(f"DoorKey world spec lacks {', '.join(missing)}")
        world = cls(**{k: spec[k] for k in keys})
        if spec.get("state_dim", world.state_dim) != world.state_dim:
            raise ValueError(
                f"DoorKey world spec states state_dim {spec['state_dim']}, its layout has "
                f"{world.state_dim}"
            )
        return world

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
            f"N in {MIN_SIZE}..{MAX_SIZE} (MiniGrid registers {MINIGRID_SIZES}), and "
            f"minigrid-doorkey-{{N}}x{{N}}-t{{T}} with T floor tiles in 1..{MAX_TILES}"
        )
    if match[3] is not None and int(match[3]) == 0:
        raise ValueError(
            f"DoorKey world {world!r} names 0 tiles; the world without tiles is "
            f"minigrid-doorkey-{match[1]}x{match[1]}"
        )
    return DoorKey(size=int(match[1]), tiles=int(match[3] or 0))


def is_name(name) -> bool:
    """Whether ``name`` has the form of a DoorKey world's name (valid or not)."""
    return isinstance(name, str) and name.startswith("minigrid-doorkey-")


def names() -> tuple[str, ...]:
    """The names of the sizes MiniGrid registers."""
    return tuple(DoorKey(size=n).name for n in MINIGRID_SIZES)
