"""RGB images of the DoorKey world, batched, pixel for pixel MiniGrid's.

``rgb(state, world)`` is ``MiniGridEnv.get_frame(highlight, tile_size)`` (``get_full_render``:
the whole grid, the cells the agent sees lightened) and ``pov_rgb(state, world)`` is
``get_pov_render(tile_size)``, the image ``RGBImgPartialObsWrapper`` observes (the egocentric
view, the agent at the middle of the bottom row facing up, unseen cells drawn empty and not
lightened). Both are ``(B, H, W, 3)`` uint8 with rows ``y`` and columns ``x``, as MiniGrid's.

MiniGrid draws each tile (``Grid.render_tile``) on a ``3 ts x 3 ts`` canvas from shapes tested
at pixel centres (``fill_coords``), lightens it, and averages ``3 x 3`` blocks (``downsample``);
every tile with the same object, agent heading and highlight is the same image. So the tiles
are drawn once per tile size into a table, with the same float64 arithmetic in the same order
(``_draw_tile``; no MiniGrid import), and a frame is one gather of table rows by each cell's
tile number (``_assemble``). The cells' codes are ``egocentric``'s for the egocentric image;
for the whole grid, a gathered row of key-free codes per layout and door state
(``_grid_table``) with the key and the tiles laid on. ``tests/core/test_doorkey_rgb.py``
checks both images equal MiniGrid's exactly, floor tiles included
(``gridplan.core.doorkey_tiles``); speed: ``scripts/bench_render.py``.
"""

from __future__ import annotations

import functools
import math

import torch

from gridplan.core.doorkey_constants import (
    AGENT,
    AGENT_X,
    AGENT_Y,
    BLUE,
    CARRYING,
    CLOSED,
    DOOR,
    DOOR_OBJECT,
    DOOR_Y,
    EMPTY,
    FLOOR,
    GOAL,
    GREEN,
    GREY,
    HEADING,
    KEY_OBJECT,
    KEY_X,
    KEY_Y,
    LOCKED,
    N_COLOURS,
    N_DOOR_STATES,
    N_HEADINGS,
    OPEN,
    PURPLE,
    RED,
    STATE_DIM,
    UNSEEN,
    WALL,
    WALL_X,
    YELLOW,
)
from gridplan.core.doorkey_env import columns
from gridplan.core.doorkey_observe import _view_offsets, egocentric, grid_codes
from gridplan.core.doorkey_tiles import lay_grid_floors
from gridplan.core.doorkey_world import DoorKey

#: MiniGrid's ``TILE_PIXELS``: the default tile side in pixels.
TILE_PIXELS = 32
#: MiniGrid's supersampling factor (``render_tile(subdivs=3)``).
SUBDIVS = 3
#: RGB of each colour code (``minigrid.core.constants.COLORS``).
RGB = {
    RED: (255, 0, 0), GREEN: (0, 255, 0), BLUE: (0, 0, 255), PURPLE: (112, 39, 195),
    YELLOW: (255, 255, 0), GREY: (100, 100, 100),
}
_BLACK = (0, 0, 0)
#: The tiles a DoorKey cell can show, as observation codes ``(object, colour, state)``: an
#: empty cell, a wall, the door open, closed and locked, the key, the goal, a floor tile of
#: each colour. A tile's number is ``(kind * 5 + agent) * 2 + highlight``, ``agent`` 0 for
#: none, else the agent's heading + 1.
KINDS = (
    (EMPTY, 0, 0), (WALL, GREY, 0),
    (DOOR_OBJECT, YELLOW, OPEN), (DOOR_OBJECT, YELLOW, CLOSED), (DOOR_OBJECT, YELLOW, LOCKED),
    (KEY_OBJECT, YELLOW, 0), (GOAL, GREEN, 0),
    *((FLOOR, c, 0) for c in range(N_COLOURS)),
)
_AGENTS = 1 + N_HEADINGS
#: MiniGrid draws the agent of the egocentric image facing up (``agent_dir=3``).
_POV_HEADING = 3
#: Largest table of key-free grids ``rgb`` gathers from (bytes): 14 KB for the 8x8 world,
#: 7.7 MB for the 32x32; larger worlds compute ``grid_codes`` on every call instead.
GRID_TABLE_BYTES = 16 * 2**20


def _rect(xmin: float, xmax: float, ymin: float, ymax: float):
    return lambda x, y: (x >= xmin) & (x <= xmax) & (y >= ymin) & (y <= ymax)


def _circle(cx: float, cy: float, r: float):
    return lambda x, y: (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r


def _triangle(heading: int):
    """MiniGrid's agent: ``point_in_triangle`` of float32 corners behind ``rotate_fn`` by
    ``heading`` quarter turns; the corners' dot products in float32, as ``np.dot`` of
    float32 vectors; the pixel's in float64."""
    corners = torch.tensor([[0.12, 0.19], [0.87, 0.50], [0.12, 0.81]], dtype=torch.float32)
    a, v1, v0 = corners[0], corners[1] - corners[0], corners[2] - corners[0]
    d00, d01, d11 = ((p * q).sum() for p, q in ((v0, v0), (v0, v1), (v1, v1)))
    inv = float(1 / (d00 * d11 - d01 * d01))
    d00, d01, d11 = float(d00), float(d01), float(d11)
    theta = 0.5 * math.pi * heading
    cos, sin = math.cos(-theta), math.sin(-theta)
    ax, ay, v0x, v0y, v1x, v1y = (float(t) for t in (*a, *v0, *v1))

    def inside(x, y):
        x, y = x - 0.5, y - 0.5
        x2, y2 = 0.5 + x * cos - y * sin, 0.5 + y * cos + x * sin
        px, py = x2 - ax, y2 - ay
        d02, d12 = v0x * px + v0y * py, v1x * px + v1y * py
        u = (d11 * d02 - d01 * d12) * inv
        v = (d00 * d12 - d01 * d02) * inv
        return (u >= 0) & (v >= 0) & ((u + v) < 1)

    return inside


def _shapes(kind: tuple[int, int, int]) -> list:
    """``(test, rgb)`` pairs ``WorldObj.render`` fills for a cell code, in order."""
    obj, colour, state = kind
    c = RGB[colour]
    if obj == WALL or obj == GOAL:
        return [(_rect(0, 1, 0, 1), c)]
    if obj == FLOOR:
        return [(_rect(0.031, 1, 0.031, 1), tuple(int(v / 2) for v in c))]
    if obj == KEY_OBJECT:
        return [(_rect(0.50, 0.63, 0.31, 0.88), c), (_rect(0.38, 0.50, 0.59, 0.66), c),
                (_rect(0.38, 0.50, 0.81, 0.88), c), (_circle(0.56, 0.28, 0.190), c),
                (_circle(0.56, 0.28, 0.064), _BLACK)]
    if obj != DOOR_OBJECT:
        return []
    if state == OPEN:
        return [(_rect(0.88, 1.00, 0.00, 1.00), c), (_rect(0.92, 0.96, 0.04, 0.96), _BLACK)]
    if state == LOCKED:
        return [(_rect(0.00, 1.00, 0.00, 1.00), c),
                (_rect(0.06, 0.94, 0.06, 0.94), tuple(int(0.45 * v) for v in c)),
                (_rect(0.52, 0.75, 0.50, 0.56), c)]
    return [(_rect(0.00, 1.00, 0.00, 1.00), c), (_rect(0.04, 0.96, 0.04, 0.96), _BLACK),
            (_rect(0.08, 0.92, 0.08, 0.92), c), (_rect(0.12, 0.88, 0.12, 0.88), _BLACK),
            (_circle(0.75, 0.50, 0.08), c)]


def _draw_tile(kind: tuple[int, int, int], agent: int, highlight: bool, size: int) -> torch.Tensor:
    """``Grid.render_tile`` of one cell: ``(size, size, 3)`` uint8 (rows ``y``).

    ``agent`` is 0 for no agent, else its heading + 1."""
    side = size * SUBDIVS
    centre = (torch.arange(side, dtype=torch.float64) + 0.5) / side
    y, x = centre.view(side, 1), centre.view(1, side)
    img = torch.zeros(side, side, 3, dtype=torch.uint8)
    shapes = [(_rect(0, 0.031, 0, 1), RGB[GREY]), (_rect(0, 1, 0, 0.031), RGB[GREY])]
    shapes += _shapes(kind)
    if agent:
        shapes.append((_triangle(agent - 1), RGB[RED]))
    for test, colour in shapes:
        img[test(x, y)] = torch.tensor(colour, dtype=torch.uint8)
    if highlight:
        # highlight_img: img + 0.3 (255 - img) in float64, truncated to uint8.
        img = (img.double() + 0.30 * (255 - img).double()).clamp(0, 255).to(torch.uint8)
    # downsample: the mean over each block's columns, then over its rows, truncated.
    blocks = img.view(size, SUBDIVS, size, SUBDIVS, 3).double().sum(dim=3) / SUBDIVS
    rows = (blocks[:, 0] + blocks[:, 1] + blocks[:, 2]) / SUBDIVS
    return rows.to(torch.uint8)


@functools.lru_cache(maxsize=16)
def tile_table(tile_size: int, device: torch.device) -> torch.Tensor:
    """Every tile MiniGrid can draw in a DoorKey frame: ``(len(KINDS) * 5 * 2, ts, ts, 3)``
    uint8, numbered ``(kind * 5 + agent) * 2 + highlight`` (``KINDS``)."""
    tiles = [
        _draw_tile(kind, agent, bool(hl), tile_size)
        for kind in KINDS for agent in range(_AGENTS) for hl in (0, 1)
    ]
    return torch.stack(tiles).to(device)


@functools.lru_cache(maxsize=8)
def _grid_table(world: DoorKey, device: torch.device) -> torch.Tensor | None:
    """Key-free ``grid_codes`` of every layout and door state: ``(rows, N * N * 3)`` uint8,
    row ``((wall_x - 2) (N - 2) + door_y - 1) * 3 + door``; ``None`` above
    ``GRID_TABLE_BYTES``."""
    n = world.size
    rows = (n - 4) * (n - 2) * N_DOOR_STATES
    if rows * n * n * 3 > GRID_TABLE_BYTES:
        return None
    idx = torch.arange(rows)
    # Every other dim 1: the agent (never drawn) and the carried key (off the grid) on (1, 1).
    state = torch.ones(rows, STATE_DIM, dtype=torch.long)
    state[:, DOOR], layout = idx % N_DOOR_STATES, idx // N_DOOR_STATES
    state[:, WALL_X], state[:, DOOR_Y] = 2 + layout // (n - 2), 1 + layout % (n - 2)
    return grid_codes(state, world).view(rows, n * n * 3).to(device)


def _codes(state: torch.Tensor, world: DoorKey, tiles: torch.Tensor | None) -> torch.Tensor:
    """``grid_codes(state, world, tiles)``: a gathered ``_grid_table`` row and the key on the
    ground where the table fits, else computed cell by cell. ``(B, N, N, 3)`` uint8."""
    table = _grid_table(world, state.device)
    if table is None:
        return grid_codes(state, world, tiles)
    b, n, cols = state.shape[0], world.size, columns(state)
    layout = (cols[WALL_X] - 2) * (n - 2) + cols[DOOR_Y] - 1
    codes = table.index_select(0, layout * N_DOOR_STATES + cols[DOOR]).view(b, n * n, 3)
    ground = (cols[CARRYING] == 0).nonzero().flatten()
    key = torch.tensor([KEY_OBJECT, YELLOW, 0], dtype=torch.uint8, device=state.device)
    codes[ground, (cols[KEY_X] * n + cols[KEY_Y])[ground]] = key
    codes = codes.view(b, n, n, 3)
    return codes if tiles is None else lay_grid_floors(codes, tiles, world)


@functools.lru_cache(maxsize=8)
def _kind_lookup(device: torch.device) -> torch.Tensor:
    """``((AGENT + 1) * N_COLOURS * 3,)`` int64: the ``KINDS`` index of code ``(object,
    colour, state)`` at ``(object * N_COLOURS + colour) * 3 + state``; every other code
    (unseen cells) draws empty, kind 0."""
    lut = torch.zeros((AGENT + 1) * N_COLOURS * N_DOOR_STATES, dtype=torch.long)
    for k, (obj, colour, state) in enumerate(KINDS):
        lut[(obj * N_COLOURS + colour) * N_DOOR_STATES + state] = k
    return lut.to(device)


def _kinds(codes: torch.Tensor) -> torch.Tensor:
    """``(B, X, Y)`` ``KINDS`` index of ``(B, X, Y, 3)`` uint8 codes."""
    c = codes.long()
    idx = (c[..., 0] * N_COLOURS + c[..., 1]) * N_DOOR_STATES + c[..., 2]
    return _kind_lookup(codes.device)[idx]


def _assemble(number: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``(B, Y ts, X ts, 3)`` frame of ``(B, X, Y)`` int64 tile numbers: one gather of tile
    pixel rows, laid out as the frame's rows (faster than gathering whole tiles and permuting,
    and than gathering the rows as wider integers)."""
    b, nx, ny = number.shape
    ts = table.shape[1]
    line = torch.arange(ts, device=number.device).view(1, 1, ts, 1)
    idx = number.transpose(1, 2).unsqueeze(2) * ts + line
    return table.view(-1, ts * 3).index_select(0, idx.reshape(-1)).view(b, ny * ts, nx * ts, 3)


def _check_size(tile_size: int) -> None:
    if not isinstance(tile_size, int) or isinstance(tile_size, bool) or tile_size < 1:
        raise ValueError(f"tile_size must be a positive int, got {tile_size!r}")


def rgb(
    state: torch.Tensor,
    world: DoorKey,
    tile_size: int = TILE_PIXELS,
    highlight: bool = True,
    tiles: torch.Tensor | None = None,
) -> torch.Tensor:
    """MiniGrid's whole-grid frame ``get_frame(highlight, tile_size)`` of every row.

    Args:
        state: ``(B, 10)`` int64 states (not validated: ``doorkey_env.check_state``).
        world: the grid and the view size.
        tile_size: pixels per cell side ``ts >= 1``.
        highlight: lighten the cells the agent sees (MiniGrid's default).
        tiles: optional ``(B, T, 2)`` floor tile cells (``gridplan.core.doorkey_tiles``),
            drawn on the empty cells they cover, under the agent too.

    Returns:
        ``(B, N ts, N ts, 3)`` uint8, rows ``y``, columns ``x``.

    Raises:
        ValueError: on a tile size below 1, or tiles that are not ``(B, T, 2)`` integer cells
            on the interior.
    """
    _check_size(tile_size)
    b, n, v, cols = state.shape[0], world.size, world.view_size, columns(state)
    rows = torch.arange(b, device=state.device)
    agent = torch.zeros(b, n, n, dtype=torch.long, device=state.device)
    agent[rows, cols[AGENT_X], cols[AGENT_Y]] = cols[HEADING] + 1
    lit = torch.zeros(b, n * n + 1, dtype=torch.long, device=state.device)
    if highlight:
        # The cells of the egocentric view that are seen, at their place in the grid.
        offsets = _view_offsets(v).to(state.device)[cols[HEADING]].view(b, v * v, 2)
        x = cols[AGENT_X].view(b, 1) + offsets[..., 0]
        y = cols[AGENT_Y].view(b, 1) + offsets[..., 1]
        seen = egocentric(state, world)[..., 0].view(b, v * v) != UNSEEN
        on_grid = (x >= 0) & (x < n) & (y >= 0) & (y < n)
        lit.scatter_(1, torch.where(on_grid & seen, x * n + y, n * n), 1)
    number = (_kinds(_codes(state, world, tiles)) * _AGENTS + agent) * 2
    number += lit[:, : n * n].view(b, n, n)
    return _assemble(number, tile_table(tile_size, state.device))


def pov_rgb(
    state: torch.Tensor,
    world: DoorKey,
    tile_size: int = TILE_PIXELS,
    tiles: torch.Tensor | None = None,
) -> torch.Tensor:
    """MiniGrid's egocentric image ``get_pov_render(tile_size)`` of every row
    (``RGBImgPartialObsWrapper``'s observation): ``egocentric``'s codes drawn, seen cells
    lightened, unseen ones drawn empty, the agent facing up over what it carries.

    Args:
        state: ``(B, 10)`` int64 states (not validated).
        world: the grid and the view size ``V``.
        tile_size: pixels per cell side ``ts >= 1``.
        tiles: optional ``(B, T, 2)`` floor tile cells, drawn where ``egocentric`` shows them.

    Returns:
        ``(B, V ts, V ts, 3)`` uint8, rows ``vy``, columns ``vx``.

    Raises:
        ValueError: on a tile size below 1, or tiles that are not ``(B, T, 2)`` integer cells
            on the interior.
    """
    _check_size(tile_size)
    v = world.view_size
    codes = egocentric(state, world, tiles)
    number = _kinds(codes) * _AGENTS
    number[:, v // 2, v - 1] += _POV_HEADING + 1
    number = number * 2 + (codes[..., 0] != UNSEEN).long()
    return _assemble(number, tile_table(tile_size, state.device))
