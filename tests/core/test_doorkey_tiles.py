"""Floor tiles: their random walk (``gridplan.core.doorkey_task``), and where the observations
draw them (``gridplan.core.doorkey_tiles``: empty cells only, never when occluded, never
under the agent in its own view)."""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from gridplan.core import doorkey_env as env
from gridplan.core import doorkey_render as render
from gridplan.core import doorkey_task as task
from gridplan.core import doorkey_tiles as dt
from gridplan.core.doorkey_constants import (
    AGENT,
    BLUE,
    DOOR,
    EMPTY,
    FLOOR,
    OPEN,
    PURPLE,
    RED,
    TILE_COLOURS,
)
from gridplan.core.doorkey_observe import egocentric, full_grid, grid_codes
from gridplan.core.doorkey_world import DoorKey

W8 = DoorKey(size=8)


def _state(world=W8, agent=(2, 3), heading=0, key=(1, 1), wall_x=4, door_y=2):
    return env.from_layout(world, wall_x, door_y, agent, heading, key)


def test_a_tile_steps_by_its_drawn_move_clipped_to_the_interior():
    # Corners and the middle of the 8x8 interior 1..6, each under every move.
    world = DoorKey(size=8, tiles=4)
    starts = torch.tensor([[1, 1], [6, 6], [1, 6], [3, 4]])
    expected = {  # move: stay, east, west, south, north (doorkey_task.TILE_MOVES)
        (1, 1): [(1, 1), (2, 1), (1, 1), (1, 2), (1, 1)],
        (6, 6): [(6, 6), (6, 6), (5, 6), (6, 6), (6, 5)],
        (1, 6): [(1, 6), (2, 6), (1, 6), (1, 6), (1, 5)],
        (3, 4): [(3, 4), (4, 4), (2, 4), (3, 5), (3, 3)],
    }
    tiles = starts.unsqueeze(0).expand(500, 4, 2).contiguous()
    moved = task.step_tiles(tiles, torch.Generator().manual_seed(5), world)
    move = torch.randint(0, 5, (500, 4), generator=torch.Generator().manual_seed(5))
    for t, start in enumerate(starts.tolist()):
        want = torch.tensor(expected[tuple(start)])[move[:, t]]
        assert torch.equal(moved[:, t], want)
    assert set(move.flatten().tolist()) == {0, 1, 2, 3, 4}
    assert torch.equal(tiles[0], starts)  # the input is left alone


def test_tile_moves_are_uniform_and_reset_covers_the_interior():
    gen = torch.Generator().manual_seed(0)
    step = task.step_tiles(torch.full((4000, 1, 2), 3), gen, DoorKey(size=8, tiles=1))[:, 0] - 3
    counts = [int((step == torch.tensor(m)).all(dim=1).sum()) for m in task.TILE_MOVES.tolist()]
    assert sum(counts) == 4000 and stats.chisquare(counts).pvalue > 1e-3
    cells = task.reset_tiles(3000, gen, DoorKey(size=8, tiles=2))
    assert cells.shape == (3000, 2, 2) and cells.dtype == torch.long
    assert int(cells.min()) == 1 and int(cells.max()) == 6
    flat = (cells[..., 0] * 8 + cells[..., 1]).flatten()
    counts = torch.bincount(flat, minlength=64).view(8, 8)[1:7, 1:7].flatten().tolist()
    assert stats.chisquare(counts).pvalue > 1e-3


def test_tile_colours_cycle_the_two_colours_doorkey_leaves_free():
    assert TILE_COLOURS == (BLUE, PURPLE)
    assert dt.tile_colours(5).tolist() == [BLUE, PURPLE, BLUE, PURPLE, BLUE]


def test_a_tile_shows_only_on_an_empty_cell_and_the_highest_index_wins():
    state = _state()  # wall column 4, door (4, 2), key (1, 1), goal (6, 6), agent (2, 3)
    on_things = torch.tensor([[[4, 5], [4, 2], [1, 1], [6, 6]]])
    assert torch.equal(grid_codes(state, W8, on_things), grid_codes(state, W8))
    shared = torch.tensor([[[2, 5], [2, 5], [5, 5]]])
    codes = grid_codes(state, W8, shared)
    assert codes[0, 2, 5].tolist() == [FLOOR, PURPLE, 0]
    assert codes[0, 5, 5].tolist() == [FLOOR, BLUE, 0]
    changed = (codes != grid_codes(state, W8)).any(-1)
    assert changed.sum() == 2


def test_under_the_agent_the_full_grid_shows_the_agent_and_its_view_what_it_carries():
    state = _state()
    under = torch.tensor([[[2, 3]]])
    assert grid_codes(state, W8, under)[0, 2, 3].tolist() == [FLOOR, BLUE, 0]
    assert full_grid(state, W8, under)[0, 2, 3].tolist() == [AGENT, RED, 0]
    assert torch.equal(egocentric(state, W8, under), egocentric(state, W8))
    assert not torch.equal(render.rgb(state, W8, 8, tiles=under), render.rgb(state, W8, 8))


def test_an_occluded_tile_is_invisible_in_the_egocentric_view():
    # Facing east at the wall column: the room behind the locked door is unseen.
    state = _state(agent=(3, 2), heading=0)
    behind = torch.tensor([[[5, 2], [6, 1], [5, 3]]])
    assert torch.equal(egocentric(state, W8, behind), egocentric(state, W8))
    assert torch.equal(render.pov_rgb(state, W8, 8, behind), render.pov_rgb(state, W8, 8))
    assert not torch.equal(full_grid(state, W8, behind), full_grid(state, W8))
    # The same cell seen through the open door shows the tile.
    opened = state.clone()
    opened[:, DOOR] = OPEN
    view = egocentric(opened, W8, behind)
    assert (view[..., 0] == FLOOR).sum() >= 1
    assert ((view != egocentric(opened, W8)).any(-1) <= (view[..., 0] == FLOOR)).all()


def test_the_view_table_and_the_cell_by_cell_views_draw_tiles_alike():
    world = DoorKey(size=8)
    gen = torch.Generator().manual_seed(3)
    state = env.reset(256, gen, world)
    tiles = task.reset_tiles(256, gen, DoorKey(size=8, tiles=5))
    big = DoorKey(size=16)  # beyond the table: views cell by cell
    state16 = env.reset(256, gen, big)
    tiles16 = task.reset_tiles(256, gen, DoorKey(size=16, tiles=5))
    for w, s, t in ((world, state, tiles), (big, state16, tiles16)):
        ours = egocentric(s, w, t)
        rows = torch.cat([egocentric(s[i : i + 1], w, t[i : i + 1]) for i in range(16)])
        assert torch.equal(ours[:16], rows)
        assert (ours[..., 0] == FLOOR).any()
        floors = ours[..., 0] == FLOOR
        assert torch.equal(ours[~floors], egocentric(s, w)[~floors])
        assert (egocentric(s, w)[floors][:, 0] == EMPTY).all()


def test_no_tiles_and_zero_tiles_give_the_plain_observations():
    state = env.reset(64, torch.Generator().manual_seed(1), W8)
    none = torch.zeros(64, 0, 2, dtype=torch.long)
    assert torch.equal(egocentric(state, W8, none), egocentric(state, W8))
    assert torch.equal(full_grid(state, W8, none), full_grid(state, W8))
    assert torch.equal(render.rgb(state, W8, 4, tiles=none), render.rgb(state, W8, 4))


@pytest.mark.parametrize(
    ("tiles", "match"),
    [
        (torch.ones(2, 3), r"\(B=2, T, 2\)"),
        (torch.ones(3, 1, 2, dtype=torch.long), r"\(B=2, T, 2\)"),
        (torch.ones(2, 1, 2), "integer"),
        (torch.full((2, 1, 2), 7), r"interior 1\.\.6"),
        (torch.zeros(2, 1, 2, dtype=torch.int32), r"interior 1\.\.6"),
    ],
)
def test_bad_tiles_are_refused_naming_the_problem(tiles, match):
    state = env.reset(2, torch.Generator().manual_seed(0), W8)
    for observe in (egocentric, full_grid):
        with pytest.raises(ValueError, match=match):
            observe(state, W8, tiles)
    with pytest.raises(ValueError, match=match):
        render.rgb(state, W8, 4, tiles=tiles)
