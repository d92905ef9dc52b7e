"""Observations of the DoorKey world: MiniGrid's egocentric view and its fully observed grid.

``egocentric(state, world)`` is ``MiniGridEnv.gen_obs()["image"]`` for every row: the
``V x V`` cells ahead of the agent (``V = world.view_size``, 7 by default), rotated so the
agent looks up from the middle of the bottom row, cells off the grid drawn as walls, cells
hidden behind walls and closed doors unseen (``Grid.process_vis``), and the agent's own cell
showing what it carries. ``full_grid(state, world)`` is ``FullyObsWrapper``'s image. Both are
``(x, y, channel)`` uint8 codes ``(object, colour, state)`` as MiniGrid writes them
(``gridplan.core.doorkey.constants``); the third channel of a door is its state.

Occlusion is MiniGrid's sweep, row by row from the agent's row away from it. Within a row the
sweep only depends on which cells of the row the previous rows made visible and which cells of
the row are transparent, so it is tabulated once (``_row_tables``: ``2^(2V)`` entries, from a
plain-Python copy of ``process_vis``'s row loop) and applied as ``V`` gathers.
"""

from __future__ import annotations

import functools

import torch

from gridplan.core.doorkey.constants import (
    AGENT,
    AGENT_X,
    AGENT_Y,
    CARRYING,
    DIR_VECTORS,
    DOOR,
    DOOR_OBJECT,
    EMPTY,
    HEADING,
    KEY_OBJECT,
    OBJECT_COLOURS,
    OPEN,
    RED,
    WALL,
)
from gridplan.core.doorkey.env import objects_at
from gridplan.core.doorkey.world import DoorKey


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


def egocentric(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """MiniGrid's partial observation ``gen_obs()["image"]`` of every row.

    Args:
        state: ``(B, 10)`` int64 states (not validated: ``env.check_state``).
        world: the grid and the view size ``V``.

    Returns:
        ``(B, V, V, 3)`` uint8, indexed ``(vx, vy, channel)``; unseen cells are all 0; the
        agent's cell ``(V // 2, V - 1)`` holds the carried key or is empty.
    """
    v = world.view_size
    offsets = _view_offsets(v).to(state.device)[state[:, HEADING]]
    x = state[:, AGENT_X].view(-1, 1, 1) + offsets[..., 0]
    y = state[:, AGENT_Y].view(-1, 1, 1) + offsets[..., 1]
    kind = objects_at(x, y, state, world)
    door = state[:, DOOR]
    seen = visible(kind, door)
    kind[:, v // 2, v - 1] = torch.where(state[:, CARRYING] == 1, KEY_OBJECT, EMPTY)
    return _encode(kind, door.view(-1, 1, 1)) * seen.unsqueeze(-1)


def full_grid(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """MiniGrid's fully observed encoding (``minigrid.wrappers.FullyObsWrapper``).

    Args:
        state: ``(B, 10)`` int64 states (not validated).
        world: the grid.

    Returns:
        ``(B, N, N, 3)`` uint8 indexed ``(x, y, channel)``: every cell's code, the agent's
        cell ``(AGENT, RED, heading)``; a carried key is not on the grid.
    """
    b, n = state.shape[0], world.size
    g = torch.arange(n, device=state.device)
    x = g.view(1, n, 1).expand(b, n, n)
    y = g.view(1, 1, n).expand(b, n, n)
    image = _encode(objects_at(x, y, state, world), state[:, DOOR].view(-1, 1, 1))
    rows = torch.arange(b, device=state.device)
    agent = torch.stack(
        [torch.full_like(state[:, HEADING], AGENT), torch.full_like(state[:, HEADING], RED),
         state[:, HEADING]], dim=1,
    )
    image[rows, state[:, AGENT_X], state[:, AGENT_Y]] = agent.to(torch.uint8)
    return image
