"""Observations of a state: the state itself, a symbolic top-down grid, RGB pixels, or on
MiniGrid DoorKey MiniGrid's own egocentric view and full grid.

Batched, deterministic and pure: ``observe(state, world, kind)`` reads every row of a
``(B, S)`` state tensor as the planner reads it (``gridplan.core.env.to_cell``: positions
rounded and clamped to the grid; ``to_flag``: flags thresholded at 0.5) and draws it. The
task-irrelevant parts of the state (paper §3: the ``c1``/``c2`` colour bits, the ``d1``/``d2``
distractors) are drawn like the relevant ones, so irrelevant detail is visible detail, as it
is in the pixel observations of the world models researchers build (Dreamer-style latent
dynamics, JEPA predictors). The goal and hazard cells are not drawn: they belong to a task,
not to the world; Task B's goal is read off the ``c1`` bit, which every kind shows.

Image orientation (both ``grid`` and ``pixels``): row ``r`` shows ``y = N - 1 - r`` (``up``
is ``y + 1``, at the top), column ``x`` shows ``x``, as ``gridplan.adapters.rendering`` draws
text.

Kinds (``OBS_KINDS``; ``obs_shape`` gives each one's per-row shape):

* ``state``: the ``(B, S)`` float32 state itself (a copy).
* ``grid``: ``(B, C, N, N)`` float32, ``C = 7 + c1 + c2`` channels (``grid_channels``):
  ``agent`` (1 on its cell), ``key`` (1 on its cell, also while carried), ``carrying`` (a
  constant plane, 1 while the key is carried), ``wall`` (the wall column except the door
  cell), ``door_closed`` (1 on the door cell while it is closed), ``d1`` and ``d2`` (how many
  distractors of that kind stand on the cell), then one constant plane per colour bit
  (``c1`` bits, then ``c2`` bits).
* ``pixels``: ``(B, 3, N P, N P)`` uint8 RGB, ``P = pixels_per_cell`` (even, default 4: 32x32
  for the default world). Each cell is a ``P x P`` tile of four ``P/2 x P/2`` quadrants. The
  tile shows the floor (black), the wall (grey) or the door (brown closed, tan open); the
  agent paints the top-left quadrant of its cell (red, orange while carrying), the key the
  top-right quadrant of its cell, ``d1`` distractors the bottom-left quadrant and ``d2``
  distractors the bottom-right quadrant of theirs. Colour bit ``k`` (``c1`` bits, then
  ``c2``) paints the top-left quadrant of the ``k``-th wall cell from the top, the door
  skipped (``c1``: white on, dark blue off; ``c2``: cyan on, dark green off); no agent ever
  stands there. A world with more colour bits than wall cells (``N - 1``) has no pixel
  observation (ValueError).

Later drawings cover earlier ones in the order floor/wall/door, bits, ``d1``, ``d2``, key,
agent; within one quadrant only one kind is ever drawn, except the agent over a bit, which
cannot happen (the agent never stands in the wall).

A MiniGrid DoorKey world (``gridplan.core.doorkey_world.DoorKey``) draws ``DOORKEY_OBS_KINDS``
of the rounded, clamped MiniGrid state (``gridplan.core.doorkey_task.decode``):

* ``state``: as above.
* ``egocentric``: ``(B, 3, V, V)`` float32, ``V = world.view_size``: MiniGrid's
  ``gen_obs()["image"]`` (``gridplan.core.doorkey_observe.egocentric``), the ``(object,
  colour, state)`` codes as channels, indexed ``[channel, vx, vy]`` as MiniGrid indexes its
  image ``[vx, vy, channel]`` (the agent at ``(V // 2, V - 1)``, looking towards ``vy = 0``).
* ``full``: ``(B, 3, N, N)`` float32, ``FullyObsWrapper``'s image
  (``doorkey_observe.full_grid``), indexed ``[channel, x, y]``.

A world with floor tiles draws them in both, as MiniGrid draws a ``Floor`` on an empty cell
(``gridplan.core.doorkey_tiles``).
"""

from __future__ import annotations

import torch

from gridplan.core import doorkey_observe, doorkey_task
from gridplan.core.constants import AGENT_X, AGENT_Y, C1, CARRYING, DOOR_OPEN, KEY_X, KEY_Y
from gridplan.core.doorkey_world import DoorKey
from gridplan.core.env import check_state, to_cell, to_flag
from gridplan.core.world import World

#: Observation kinds ``observe`` draws of the paper's world.
OBS_KINDS = ("state", "grid", "pixels")
#: Observation kinds ``observe`` draws of a MiniGrid DoorKey world.
DOORKEY_OBS_KINDS = ("state", "egocentric", "full")
#: Observation kinds that do not determine the state (MiniGrid's egocentric view shows neither
#: the cells behind the agent nor those behind walls): a recurrent latent model plans from its
#: belief filtered over the episode (``gridplan.models.episode_memory``).
PARTIAL_OBS_KINDS = ("egocentric",)
#: Every observation kind of some world.
ALL_OBS_KINDS = (*OBS_KINDS, *DOORKEY_OBS_KINDS[1:])
#: Default pixel tile side ``P`` (the default 8x8 world is 32x32 pixels).
PIXELS_PER_CELL = 4
#: RGB colours of the pixel observation (uint8 triples).
COLOURS = {
    "floor": (0, 0, 0),
    "wall": (96, 96, 96),
    "door_closed": (139, 69, 19),
    "door_open": (210, 180, 140),
    "agent": (255, 0, 0),
    "agent_carrying": (255, 128, 0),
    "key": (255, 255, 0),
    "d1": (0, 96, 255),
    "d2": (0, 200, 0),
    "c1_on": (255, 255, 255),
    "c1_off": (0, 0, 96),
    "c2_on": (0, 255, 255),
    "c2_off": (0, 64, 0),
}


def grid_channels(world: World) -> tuple[str, ...]:
    """Names of the ``grid`` channels, in order (module docstring)."""
    bits = [f"c1_{i}" for i in range(world.c1)] + [f"c2_{i}" for i in range(world.c2)]
    return ("agent", "key", "carrying", "wall", "door_closed", "d1", "d2", *bits)


def check_kind(kind: str) -> str:
    """``kind`` if it is one of ``ALL_OBS_KINDS``. Raises ValueError naming the valid kinds."""
    if kind not in ALL_OBS_KINDS:
        raise ValueError(
            f"unknown observation kind {kind!r}; valid kinds: {', '.join(ALL_OBS_KINDS)}"
        )
    return kind


def world_kinds(world: World | DoorKey) -> tuple[str, ...]:
    """The observation kinds ``world`` draws: ``DOORKEY_OBS_KINDS`` or ``OBS_KINDS``."""
    return DOORKEY_OBS_KINDS if isinstance(world, DoorKey) else OBS_KINDS


def check_world_kind(world: World | DoorKey, kind: str) -> str:
    """``kind`` if ``world`` draws it.

    Raises:
        ValueError: on an unknown kind, a kind of the other world's kinds (naming those that
            work), or ``egocentric``/``full`` of a DoorKey world with floor tiles.
    """
    check_kind(kind)
    kinds = world_kinds(world)
    if kind not in kinds:
        raise ValueError(
            f"world {world.name!r} has no {kind!r} observation; its kinds: {', '.join(kinds)}"
        )
    return kind


def _check_pixels_per_cell(pixels_per_cell: int) -> int:
    p = pixels_per_cell
    if isinstance(p, bool) or not isinstance(p, int) or p < 2 or p % 2:
        raise ValueError(f"pixels_per_cell must be an even int >= 2, got {p!r}")
    return p


def _wall_cells(world: World) -> list[int]:
    """Rows ``y`` of the wall cells from the top (``y = N - 1``) down, the door skipped."""
    return [y for y in reversed(range(world.size)) if y != world.door_y]


def obs_shape(
    world: World | DoorKey, kind: str, pixels_per_cell: int = PIXELS_PER_CELL
) -> tuple[int, ...]:
    """Shape of one row's observation: ``(S,)``, ``(C, N, N)`` or ``(3, N P, N P)``; on
    DoorKey ``(S,)``, ``(3, V, V)`` (``egocentric``) or ``(3, N, N)`` (``full``).

    Raises:
        ValueError: on an unknown kind, a kind the world does not draw (``check_world_kind``),
            a bad ``pixels_per_cell``, or ``pixels`` of a world with more colour bits than
            wall cells.
    """
    check_world_kind(world, kind)
    n = world.size
    if kind == "state":
        return (world.state_dim,)
    if isinstance(world, DoorKey):
        side = world.view_size if kind == "egocentric" else n
        return (3, side, side)
    if kind == "grid":
        return (len(grid_channels(world)), n, n)
    p = _check_pixels_per_cell(pixels_per_cell)
    bits, cells = world.c1 + world.c2, len(_wall_cells(world))
    if bits > cells:
        raise ValueError(
            f"world {world.name!r} has {bits} colour bits but {cells} wall cells to show them "
            "in its pixel observation; use the grid observation"
        )
    return (3, n * p, n * p)


def _cells(state: torch.Tensor, world: World) -> dict[str, torch.Tensor]:
    """Integer cells and flags of every row (as the planner reads them)."""
    d1, d2 = list(world.d1_dims), list(world.d2_dims)
    b = state.shape[0]
    return {
        "agent": to_cell(state[:, [AGENT_X, AGENT_Y]], world),
        "key": to_cell(state[:, [KEY_X, KEY_Y]], world),
        "d1": to_cell(state[:, d1], world).view(b, world.d1, 2),
        "d2": to_cell(state[:, d2], world).view(b, world.d2, 2),
        "carrying": to_flag(state[:, CARRYING]),
        "door_open": to_flag(state[:, DOOR_OPEN]),
        "bits": to_flag(state[:, C1 : C1 + world.c1 + world.c2]),
    }


def _grid(state: torch.Tensor, world: World) -> torch.Tensor:
    cells, b, n = _cells(state, world), state.shape[0], world.size
    out = torch.zeros(b, len(grid_channels(world)), n * n, device=state.device)
    rows = torch.arange(b, device=state.device)

    def flat(cell: torch.Tensor) -> torch.Tensor:  # (..., 2) cells -> row-major image index
        return (n - 1 - cell[..., 1]) * n + cell[..., 0]

    out[rows, 0, flat(cells["agent"])] = 1.0
    out[rows, 1, flat(cells["key"])] = 1.0
    out[:, 2] = cells["carrying"].float().unsqueeze(1)
    wall = torch.tensor([(n - 1 - y) * n + world.wall_x for y in _wall_cells(world)])
    out[:, 3, wall.to(state.device)] = 1.0
    door = (n - 1 - world.door_y) * n + world.wall_x
    out[:, 4, door] = (~cells["door_open"]).float()
    for channel, name in ((5, "d1"), (6, "d2")):
        if cells[name].shape[1]:
            ones = torch.ones(cells[name].shape[:2], device=state.device)
            out[:, channel].scatter_add_(1, flat(cells[name]), ones)
    out[:, 7:] = cells["bits"].float().unsqueeze(2)
    return out.view(b, -1, n, n)


def _colour(name: str, device) -> torch.Tensor:
    return torch.tensor(COLOURS[name], dtype=torch.uint8, device=device)


def _pixels(state: torch.Tensor, world: World, pixels_per_cell: int) -> torch.Tensor:
    """At quadrant resolution ``(B, 2N, 2N, 3)``, then each quadrant widened to ``P/2``."""
    cells, b, n, device = _cells(state, world), state.shape[0], world.size, state.device
    m = 2 * n
    img = torch.zeros(b, m, m, 3, dtype=torch.uint8, device=device)
    wall_rows = [2 * (n - 1 - y) for y in _wall_cells(world)]
    wx = 2 * world.wall_x
    for r in wall_rows:
        img[:, r : r + 2, wx : wx + 2] = _colour("wall", device)
    dr = 2 * (n - 1 - world.door_y)
    door = torch.where(
        cells["door_open"].view(b, 1, 1, 1),
        _colour("door_open", device),
        _colour("door_closed", device),
    )
    img[:, dr : dr + 2, wx : wx + 2] = door
    kinds = ["c1"] * world.c1 + ["c2"] * world.c2
    for k, kind in enumerate(kinds):
        on = cells["bits"][:, k].view(b, 1)
        img[:, wall_rows[k], wx] = torch.where(
            on, _colour(f"{kind}_on", device), _colour(f"{kind}_off", device)
        )
    rows = torch.arange(b, device=device)

    def paint(cell: torch.Tensor, dy: int, dx: int, colour: torch.Tensor) -> None:
        """Paint quadrant ``(dy, dx)`` of each row's ``(..., 2)`` cells."""
        r = 2 * (n - 1 - cell[..., 1]) + dy
        c = 2 * cell[..., 0] + dx
        who = rows.view(-1, *([1] * (cell.dim() - 2))).expand(r.shape)
        img[who.reshape(-1), r.reshape(-1), c.reshape(-1)] = colour.reshape(-1, 3)

    if world.d1:
        paint(cells["d1"], 1, 0, _colour("d1", device).expand(b * world.d1, 3))
    if world.d2:
        paint(cells["d2"], 1, 1, _colour("d2", device).expand(b * world.d2, 3))
    paint(cells["key"], 0, 1, _colour("key", device).expand(b, 3))
    agent = torch.where(
        cells["carrying"].view(b, 1),
        _colour("agent_carrying", device),
        _colour("agent", device),
    )
    paint(cells["agent"], 0, 0, agent)
    half = pixels_per_cell // 2
    img = img.permute(0, 3, 1, 2)
    return img.repeat_interleave(half, dim=2).repeat_interleave(half, dim=3).contiguous()


def _doorkey(state: torch.Tensor, world: DoorKey, kind: str) -> torch.Tensor:
    """``egocentric`` or ``full`` codes, channels first, of the decoded MiniGrid states."""
    cells, tiles = doorkey_task.decode(state, world)
    draw = doorkey_observe.egocentric if kind == "egocentric" else doorkey_observe.full_grid
    codes = draw(cells, world, tiles if world.tiles else None)
    return codes.permute(0, 3, 1, 2).to(torch.float32).contiguous()


def observe(
    state: torch.Tensor,
    world: World | DoorKey,
    kind: str,
    pixels_per_cell: int = PIXELS_PER_CELL,
) -> torch.Tensor:
    """The observation of every row of ``state`` (module docstring for the drawings).

    Args:
        state: ``(B, S)`` float, normalized (``S = world.state_dim``), finite.
        world: the layout of the states and the geometry drawn.
        kind: one of ``world_kinds(world)``.
        pixels_per_cell: tile side ``P`` of ``pixels`` (even, >= 2).

    Returns:
        ``(B, *obs_shape(world, kind, pixels_per_cell))``: float32 for ``state``, ``grid``,
        ``egocentric`` and ``full``, uint8 for ``pixels``; on ``state``'s device; the same
        state always gives the same observation.

    Raises:
        ValueError: on a malformed, non-floating or non-finite state (naming the problem),
            an unknown kind, a kind the world does not draw or a bad ``pixels_per_cell``
            (``obs_shape``).
    """
    obs_shape(world, kind, pixels_per_cell)
    check_state(state, "state", world)
    if kind == "state":
        return state.to(torch.float32, copy=True)
    if isinstance(world, DoorKey):
        return _doorkey(state, world, kind)
    if kind == "grid":
        return _grid(state, world)
    return _pixels(state, world, pixels_per_cell)
