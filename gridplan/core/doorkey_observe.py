"""Observations of the DoorKey world: MiniGrid's egocentric view and its fully observed grid.

``egocentric(state, world)`` is ``MiniGridEnv.gen_obs()["image"]`` for every row: the
``V x V`` cells ahead of the agent (``V = world.view_size``, 7 by default), rotated so the
agent looks up from the middle of the bottom row, cells off the grid drawn as walls, cells
hidden behind walls and closed doors unseen (``Grid.process_vis``), and the agent's own cell
showing what it carries. ``full_grid(state, world)`` is ``FullyObsWrapper``'s image. Both are
``(x, y, channel)`` uint8 codes ``(object, colour, state)`` as MiniGrid writes them
(``gridplan.core.doorkey_constants``); the third channel of a door is its state. Both take
optional floor tiles (``gridplan.core.doorkey_tiles``), drawn as MiniGrid draws a ``Floor`` on
each empty cell they cover; without them the codes are DoorKey's alone.

Occlusion is MiniGrid's sweep, row by row from the agent's row away from it. Within a row the
sweep only depends on which cells of the row the previous rows made visible and which cells of
the row are transparent, so it is tabulated once (``_row_tables``: ``2^(2V)`` entries, from a
plain-Python copy of ``process_vis``'s row loop) and applied as ``V`` gathers.
"""

from __future__ import annotations

import functools

import torch

from gridplan.core.doorkey_constants import (
    AGENT,
    AGENT_X,
    AGENT_Y,
    CARRYING,
    DIR_VECTORS,
    DOOR,
    DOOR_OBJECT,
    DOOR_Y,
    EMPTY,
    HEADING,
    KEY_OBJECT,
    KEY_X,
    KEY_Y,
    N_DOOR_STATES,
    N_HEADINGS,
    OBJECT_COLOURS,
    OPEN,
    RED,
    STATE_DIM,
    UNSEEN,
    WALL,
    WALL_X,
    YELLOW,
)
from gridplan.core.doorkey_env import columns, objects_at
from gridplan.core.doorkey_tiles import check_tiles, lay_floors, lay_grid_floors
from gridplan.core.doorkey_world import DoorKey


def _row_sweep(seen: int, clear: int, width: int) -> tuple[int, int]:
    """``process_vis`` on one row: the row's visible cells after both passes, and the cells
    of the next row they make visible, from the bits the previous rows set (``seen``) and the
    row's transparent cells (``clear``)."""
    mask = [bool(seen >> i & 1) for i in range(width)]
    clear_at = [bool(clear >> i & 1) for i in range(width)]
    ahead = [False] * width
    for i in range(width - 1):
        if mask[i] and clear_at[i]:
            mask[i + 1] = ahead[i + 1] = ahead[i] = True
    for i in reversed(range(1, width)):
        if mask[i] and clear_at[i]:
            mask[i - 1] = ahead[i - 1] = ahead[i] = True
    bits = [1 << i for i in range(width)]
    return sum(b for b, m in zip(bits, mask, strict=True) if m), sum(
        b for b, a in zip(bits, ahead, strict=True) if a
    )


@functools.lru_cache(maxsize=8)
def _row_tables(width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(2^(2 width),)`` int64 tables indexed ``seen * 2^width + clear``: the row's visible
    bits and the next row's bits (``_row_sweep``)."""
    size = 1 << width
    rows = [_row_sweep(seen, clear, width) for seen in range(size) for clear in range(size)]
    visible, ahead = zip(*rows, strict=True)
    return torch.tensor(visible), torch.tensor(ahead)


@functools.lru_cache(maxsize=8)
def _view_offsets(view: int) -> torch.Tensor:
    """``(4, V, V, 2)`` int64 grid offsets from the agent of view cell ``(vx, vy)`` per
    heading: ``d * (V - 1 - vy) + r * (vx - V // 2)``, ``d`` the heading, ``r`` its right
    (``MiniGridEnv.get_view_coords`` inverted)."""
    d = DIR_VECTORS.view(4, 1, 1, 2)
    r = torch.stack([-DIR_VECTORS[:, 1], DIR_VECTORS[:, 0]], dim=1).view(4, 1, 1, 2)
    v = torch.arange(view)
    vx, vy = torch.meshgrid(v, v, indexing="ij")
    return d * (view - 1 - vy).unsqueeze(-1) + r * (vx - view // 2).unsqueeze(-1)


def _encode(kind: torch.Tensor, door: torch.Tensor) -> torch.Tensor:
    """``(..., 3)`` uint8 codes of object codes ``kind`` with the door state ``door``
    (broadcast to ``kind``)."""
    colour = torch.zeros_like(kind)
    for obj, c in OBJECT_COLOURS.items():
        colour.masked_fill_(kind == obj, c)
    status = torch.where(kind == DOOR_OBJECT, door, 0)
    return torch.stack([kind, colour, status], dim=-1).to(torch.uint8)


def visible(kind: torch.Tensor, door: torch.Tensor) -> torch.Tensor:
    """MiniGrid's visibility mask of egocentric views (``Grid.process_vis``).

    Args:
        kind: ``(B, V, V)`` int64 object codes indexed ``(vx, vy)``, the agent at
            ``(V // 2, V - 1)``.
        door: ``(B,)`` int64 door states (walls and a door that is not open block the view).

    Returns:
        ``(B, V, V)`` bool.
    """
    b, v = kind.shape[0], kind.shape[1]
    rows_visible, rows_ahead = (t.to(kind.device) for t in _row_tables(v))
    opaque = (kind == WALL) | ((kind == DOOR_OBJECT) & (door.view(b, 1, 1) != OPEN))
    bits = 1 << torch.arange(v, device=kind.device)
    clear = ((~opaque).long() * bits.view(1, v, 1)).sum(dim=1)
    seen = torch.full((b,), 1 << (v // 2), dtype=torch.long, device=kind.device)
    mask = torch.empty(b, v, dtype=torch.long, device=kind.device)
    for vy in reversed(range(v)):
        idx = seen * (1 << v) + clear[:, vy]
        mask[:, vy] = rows_visible[idx]
        seen = rows_ahead[idx]
    return (mask.unsqueeze(1) & bits.view(1, v, 1)) != 0


def views(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """The egocentric view computed cell by cell (``egocentric`` without its table): the
    view's grid cells, their objects, ``visible``, the carried key. ``(B, V, V, 3)`` uint8."""
    v, cols = world.view_size, columns(state)
    offsets = _view_offsets(v).to(state.device)[cols[HEADING]]
    x = cols[AGENT_X].view(-1, 1, 1) + offsets[..., 0]
    y = cols[AGENT_Y].view(-1, 1, 1) + offsets[..., 1]
    kind = objects_at(x, y, cols, world)
    door = cols[DOOR]
    seen = visible(kind, door)
    kind[:, v // 2, v - 1] = torch.where(cols[CARRYING] == 1, KEY_OBJECT, EMPTY)
    return _encode(kind, door.view(-1, 1, 1)) * seen.unsqueeze(-1)


#: Largest table of key-free views (bytes) ``egocentric`` gathers from: 2.7 MB for the 8x8
#: world, 8.5 MB for the 10x10; a larger world (16x16: 76 MB, a build of seconds) computes
#: ``views`` on every call instead.
VIEW_TABLE_BYTES = 16 * 2**20
#: Rows of states ``_view_table`` draws at once while building.
_BUILD_CHUNK = 2**16


def _view_index(cols: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """Row of ``_view_table`` from ``(10, B)`` state columns: layout, agent cell, heading,
    door state (last fastest)."""
    n = world.size
    cell = N_HEADINGS * N_DOOR_STATES
    layout = cell * n * n
    index = cols[DOOR].add(cols[HEADING], alpha=N_DOOR_STATES)
    index.add_(cols[AGENT_Y], alpha=cell).add_(cols[AGENT_X], alpha=cell * n)
    index.add_(cols[DOOR_Y], alpha=layout).add_(cols[WALL_X], alpha=layout * (n - 2))
    return index.sub_(layout * (2 * (n - 2) + 1))


@functools.lru_cache(maxsize=8)
def _view_table(world: DoorKey, device: torch.device) -> torch.Tensor | None:
    """Key-free views of every layout, agent cell, heading and door state: ``(rows, V*V*3)``
    uint8 in ``_view_index`` order, the agent's cell empty; ``None`` above
    ``VIEW_TABLE_BYTES``. The key does not block sight (MiniGrid's ``Key.see_behind``), so
    a view is this row with the key drawn in where it is seen."""
    n, v = world.size, world.view_size
    layouts = (n - 4) * (n - 2)
    rows = layouts * n * n * N_HEADINGS * N_DOOR_STATES
    if rows * v * v * 3 > VIEW_TABLE_BYTES:
        return None
    idx = torch.arange(rows)
    door, rest = idx % N_DOOR_STATES, idx // N_DOOR_STATES
    heading, rest = rest % N_HEADINGS, rest // N_HEADINGS
    ay, rest = rest % n, rest // n
    ax, layout = rest % n, rest // n
    state = torch.zeros(rows, STATE_DIM, dtype=torch.long)
    state[:, AGENT_X], state[:, AGENT_Y], state[:, HEADING], state[:, DOOR] = ax, ay, heading, door
    state[:, KEY_X], state[:, KEY_Y] = ax, ay
    state[:, WALL_X], state[:, DOOR_Y] = 2 + layout // (n - 2), 1 + layout % (n - 2)
    table = torch.cat([views(chunk, world) for chunk in state.split(_BUILD_CHUNK)])
    return table.view(rows, v * v * 3).to(device)


def _floors_in_view(
    image: torch.Tensor, state: torch.Tensor, world: DoorKey, tiles: torch.Tensor | None
) -> torch.Tensor:
    """``(B, V, V, 3)`` egocentric codes with the tiles drawn on the visible empty cells; the
    agent's own cell shows what it carries, never a tile under it (``gen_obs_grid``)."""
    if tiles is None:
        return image
    tiles = check_tiles(tiles, state.shape[0], world)
    v, cols = world.view_size, columns(state)
    vec = DIR_VECTORS.to(state.device)[cols[HEADING]].unsqueeze(1)
    dx = tiles[..., 0] - cols[AGENT_X].unsqueeze(1)
    dy = tiles[..., 1] - cols[AGENT_Y].unsqueeze(1)
    vx = v // 2 - vec[..., 1] * dx + vec[..., 0] * dy
    vy = v - 1 - vec[..., 0] * dx - vec[..., 1] * dy
    shown = (vx >= 0) & (vx < v) & (vy >= 0) & (vy < v) & ((dx != 0) | (dy != 0))
    cells = image.reshape(image.shape[0], v * v, 3)
    return lay_floors(cells, vx * v + vy, shown).view(image.shape)


def egocentric(
    state: torch.Tensor, world: DoorKey, tiles: torch.Tensor | None = None
) -> torch.Tensor:
    """MiniGrid's partial observation ``gen_obs()["image"]`` of every row.

    In worlds whose ``_view_table`` fits ``VIEW_TABLE_BYTES`` (up to 11x11 with the 7x7 view)
    a view is one gathered row plus the key where it is seen; else ``views``. Both are
    checked against each other and against MiniGrid (``tests/core/test_doorkey.py``,
    ``tests/core/test_minigrid_doorkey.py``).

    Args:
        state: ``(B, 10)`` int64 states (not validated: ``env.check_state``).
        world: the grid and the view size ``V``.
        tiles: optional ``(B, T, 2)`` floor tile cells (``gridplan.core.doorkey_tiles``),
            drawn where seen on an empty cell other than the agent's.

    Returns:
        ``(B, V, V, 3)`` uint8, indexed ``(vx, vy, channel)``; unseen cells are all 0; the
        agent's cell ``(V // 2, V - 1)`` holds the carried key or is empty.

    Raises:
        ValueError: on tiles that are not ``(B, T, 2)`` integer cells on the interior.
    """
    table = _view_table(world, state.device)
    if table is None:
        return _floors_in_view(views(state, world), state, world, tiles)
    # Strided columns of the state: a transposed copy costs more than it saves here.
    v, b, cols, size = world.view_size, state.shape[0], state.t(), world.view_size**2 * 3
    # A spare last row takes the key's write in rows where it is not seen (no masked index).
    image = torch.empty(b + 1, size, dtype=torch.uint8, device=state.device)
    torch.index_select(table, 0, _view_index(cols, world), out=image[:b])
    # The key seen on the ground: its cell in view coordinates (get_view_coords), ``side``
    # columns right of the agent's and ``ahead`` rows in front of it.
    # index_select by a strided index costs ten times one by a contiguous copy of it.
    heading = cols[HEADING].contiguous()
    hx, hy = (DIR_VECTORS[:, i].to(state.device).index_select(0, heading) for i in (0, 1))
    dx, dy = cols[KEY_X] - cols[AGENT_X], cols[KEY_Y] - cols[AGENT_Y]
    side, ahead = hx * dy - hy * dx, hx * dx + hy * dy
    carried = cols[CARRYING] == 1
    inside = (side.abs() <= v // 2).logical_and_(ahead >= 0).logical_and_(ahead < v)
    at = side.mul_(v).sub_(ahead).add_((v // 2) * v + v - 1)
    at.masked_fill_(carried, (v // 2) * v + v - 1).clamp_(0, v * v - 1)
    at = at.mul_(3).add_(torch.arange(0, b * size, size, device=state.device))
    seen = (image.view(-1).index_select(0, at) != UNSEEN).logical_or_(carried)
    seen.logical_and_(inside.logical_or_(carried))
    key = torch.tensor([KEY_OBJECT, YELLOW, 0], dtype=torch.uint8, device=state.device)
    at = torch.where(seen, at, b * size).unsqueeze(1) + torch.arange(3, device=state.device)
    image.view(-1).scatter_(0, at.flatten(), key.expand(b, 3).flatten())
    cells = image[:b].view(b, v * v, 3)
    return _floors_in_view(cells.view(b, v, v, 3), state, world, tiles)


def grid_codes(
    state: torch.Tensor, world: DoorKey, tiles: torch.Tensor | None = None
) -> torch.Tensor:
    """MiniGrid's ``Grid.encode()``: the codes of every cell, the agent not drawn.

    Args:
        state: ``(B, 10)`` int64 states (not validated).
        world: the grid.
        tiles: optional ``(B, T, 2)`` floor tile cells, drawn on the empty cells they cover
            (the agent's cell included: the agent is not an object of the grid).

    Returns:
        ``(B, N, N, 3)`` uint8 indexed ``(x, y, channel)``; a carried key is not on the grid.

    Raises:
        ValueError: on tiles that are not ``(B, T, 2)`` integer cells on the interior.
    """
    b, n, cols = state.shape[0], world.size, columns(state)
    g = torch.arange(n, device=state.device)
    x = g.view(1, n, 1).expand(b, n, n)
    y = g.view(1, 1, n).expand(b, n, n)
    image = _encode(objects_at(x, y, cols, world), cols[DOOR].view(-1, 1, 1))
    return image if tiles is None else lay_grid_floors(image, tiles, world)


def full_grid(
    state: torch.Tensor, world: DoorKey, tiles: torch.Tensor | None = None
) -> torch.Tensor:
    """MiniGrid's fully observed encoding (``minigrid.wrappers.FullyObsWrapper``).

    Args:
        state: ``(B, 10)`` int64 states (not validated).
        world: the grid.
        tiles: optional ``(B, T, 2)`` floor tile cells (``grid_codes``); the agent's cell
            shows the agent, as in MiniGrid, over a tile too.

    Returns:
        ``(B, N, N, 3)`` uint8 indexed ``(x, y, channel)``: every cell's code, the agent's
        cell ``(AGENT, RED, heading)``; a carried key is not on the grid.

    Raises:
        ValueError: on tiles that are not ``(B, T, 2)`` integer cells on the interior.
    """
    b, cols = state.shape[0], columns(state)
    image = grid_codes(state, world, tiles)
    rows = torch.arange(b, device=state.device)
    heading = cols[HEADING]
    agent = torch.stack(
        [torch.full_like(heading, AGENT), torch.full_like(heading, RED), heading], dim=1
    )
    image[rows, cols[AGENT_X], cols[AGENT_Y]] = agent.to(torch.uint8)
    return image
