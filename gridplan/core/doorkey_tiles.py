"""Floor tiles in the DoorKey observations: coloured distractors nothing else reads.

A batch of ``T`` tiles is one ``(B, T, 2)`` int64 tensor of cells ``(x, y)`` on the interior
``1..N-2`` of the grid: the world's tiles (``DoorKey.tiles``), drawn and walked by
``gridplan.core.doorkey_task`` (``reset_tiles``, ``step_tiles``: stay or one of the four moves,
uniform, clipped to the interior), or any others. Tile ``t`` is MiniGrid's ``Floor`` of colour
``TILE_COLOURS[t % 2]`` (blue, purple: the colours DoorKey never draws). The observations
(``gridplan.core.doorkey_observe``, ``gridplan.core.doorkey_render``) draw a tile only on a
cell that holds nothing else (not a wall, the door, the key or the goal); where tiles share a
cell the highest index is drawn. ``doorkey_env.step`` never sees them: they block nothing and
change nothing, so every factor they add to an observation is irrelevant by construction.
"""

from __future__ import annotations

import torch

from gridplan.core.doorkey_constants import EMPTY, FLOOR, TILE_COLOURS
from gridplan.core.doorkey_world import DoorKey


def check_tiles(tiles: torch.Tensor, batch: int, world: DoorKey) -> torch.Tensor:
    """Validate ``(B, T, 2)`` integer tile cells on the interior ``1..N-2``; returns int64.

    Raises:
        ValueError: on another shape or batch, a non-integer dtype, or a cell off the interior.
    """
    if tiles.dim() != 3 or tiles.shape[0] != batch or tiles.shape[2] != 2:
        raise ValueError(f"tiles must be (B={batch}, T, 2) cells, got {tuple(tiles.shape)}")
    if tiles.dtype.is_floating_point or tiles.dtype.is_complex or tiles.dtype == torch.bool:
        raise ValueError(f"tiles must be integer cells, got dtype {tiles.dtype}")
    if tiles.numel() and not (1 <= int(tiles.min()) and int(tiles.max()) <= world.size - 2):
        raise ValueError(
            f"tile cells must lie on the interior 1..{world.size - 2}, got values in "
            f"{int(tiles.min())}..{int(tiles.max())}"
        )
    return tiles.long()


def tile_colours(count: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """``(T,)`` int64 colour codes of tiles ``0..T-1`` (``TILE_COLOURS`` cycled)."""
    palette = torch.tensor(TILE_COLOURS, device=device)
    return palette[torch.arange(count, device=device) % len(TILE_COLOURS)]


def lay_floors(cells: torch.Tensor, at: torch.Tensor, shown: torch.Tensor) -> torch.Tensor:
    """Draw tiles into observation codes, in place: each empty cell (``EMPTY``) that a shown
    tile covers becomes ``(FLOOR, colour, 0)`` of the highest-indexed such tile.

    Args:
        cells: ``(B, C, 3)`` uint8 codes of ``C`` cells (modified in place).
        at: ``(B, T)`` int64 cell index of each tile in ``0..C-1`` (any value where not shown).
        shown: ``(B, T)`` bool, the tiles that may be drawn.

    Returns:
        ``cells``.
    """
    b, c, t = cells.shape[0], cells.shape[1], at.shape[1]
    if t == 0:
        return cells
    order = torch.arange(t, device=cells.device).expand(b, t)
    top = torch.full((b, c + 1), -1, dtype=torch.long, device=cells.device)
    top.scatter_reduce_(1, torch.where(shown, at, c), order, "amax")
    top = top[:, :c]
    floor = (top >= 0) & (cells[..., 0] == EMPTY)
    colour = tile_colours(t, cells.device)[top.clamp(min=0)]
    cells[..., 0].masked_fill_(floor, FLOOR)
    cells[..., 1] = torch.where(floor, colour.to(torch.uint8), cells[..., 1])
    return cells


def lay_grid_floors(codes: torch.Tensor, tiles: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """``lay_floors`` on a grid's codes (``Grid.encode()``), in place: every tile is shown
    where its cell is empty.

    Args:
        codes: ``(B, N, N, 3)`` uint8 codes indexed ``(x, y)``, contiguous.
        tiles: ``(B, T, 2)`` integer cells.
        world: the grid.

    Returns:
        ``codes``.

    Raises:
        ValueError: if ``tiles`` is not ``(B, T, 2)`` integer cells on the interior.
    """
    b, n = codes.shape[0], world.size
    tiles = check_tiles(tiles, b, world)
    at = tiles[..., 0] * n + tiles[..., 1]
    lay_floors(codes.view(b, n * n, 3), at, torch.ones_like(at, dtype=torch.bool))
    return codes
