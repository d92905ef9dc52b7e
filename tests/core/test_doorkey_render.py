"""``gridplan.core.doorkey_render`` on known answers, without MiniGrid: tiles worked out by hand
from ``Grid.render_tile``'s rules, frames laid out cell by cell, rows alike alone and batched.
The pixel-for-pixel check against MiniGrid is ``tests/core/test_doorkey_rgb.py``."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import doorkey_env as env
from gridplan.core import doorkey_render as render
from gridplan.core.doorkey_constants import EMPTY, UNSEEN, WALL
from gridplan.core.doorkey_observe import egocentric
from gridplan.core.doorkey_world import DoorKey

W8 = DoorKey(size=8)
CPU = torch.device("cpu")


def _tile(kind, agent=0, highlight=0, size=8):
    return render.tile_table(size, CPU)[(render.KINDS.index(kind) * 5 + agent) * 2 + highlight]


def test_tiles_worked_out_by_hand():
    # A wall covers its grid lines: grey everywhere; lightened, 100 + 0.3 * 155 = 146.5 -> 146.
    assert (_tile((WALL, 5, 0)) == 100).all() and (_tile((WALL, 5, 0), highlight=1) == 146).all()
    # An empty 8-pixel tile: one 24th of its side is grid line (centre 1/48 <= 0.031 < 3/48),
    # a third of the first pixel row and column; the corner pixel averages 5 of 9 lit.
    empty = _tile((EMPTY, 0, 0))[..., 0]
    assert empty[0, 0] == 55 and (empty[0, 1:] == 33).all() and (empty[1:, 0] == 33).all()
    assert (empty[1:, 1:] == 0).all()
    # The goal covers its tile green.
    assert (_tile((8, 1, 0)) == torch.tensor([0, 255, 0], dtype=torch.uint8)).all()


def test_the_agent_triangle_points_along_its_heading():
    # A triangle's centroid lies a third of the way from its base to its tip: base at 0.12 of
    # the side behind, tip at 0.87 ahead, centroid at 0.37, 4 pixels of 32 behind the middle.
    for heading, (axis, sign) in enumerate([(1, 1), (0, 1), (1, -1), (0, -1)]):
        tile = _tile((EMPTY, 0, 0), agent=heading + 1, size=32).double()
        red = tile[..., 0] * (tile[..., 1] == 0)  # the grid lines are grey
        at = torch.arange(32, dtype=torch.float64) - 15.5
        along = (red.sum(1 - axis) * at).sum() / red.sum()
        across = (red.sum(axis) * at).sum() / red.sum()
        assert -4.5 < sign * along < -3.5 and abs(across) < 0.5, heading


def test_a_frame_lays_each_cells_tile_at_its_place():
    state = env.from_layout(W8, 4, 2, (2, 3), 1, (1, 1))
    frame = render.rgb(state, W8, 8, highlight=False)
    assert frame.shape == (1, 64, 64, 3) and frame.dtype == torch.uint8
    cell = lambda x, y: frame[0, y * 8 : y * 8 + 8, x * 8 : x * 8 + 8]  # noqa: E731
    assert torch.equal(cell(6, 6), _tile((8, 1, 0)))
    assert torch.equal(cell(4, 5), _tile((WALL, 5, 0)))
    assert torch.equal(cell(4, 2), _tile((4, 4, 2)))
    assert torch.equal(cell(1, 1), _tile((5, 4, 0)))
    assert torch.equal(cell(2, 3), _tile((EMPTY, 0, 0), agent=2))


def test_the_cells_the_agent_sees_are_lightened():
    """Against a plain loop over the view, as ``get_full_render`` maps it onto the grid:
    ``top_left = agent + f (V - 1) - r (V // 2)``, cell ``top_left - f vy + r vx``."""
    state = env.reset(32, torch.Generator().manual_seed(2), W8)
    lit = render.rgb(state, W8, 4) != render.rgb(state, W8, 4, highlight=False)
    lit_cells = lit.view(32, 8, 4, 8, 4 * 3).any(-1).any(2)  # (B, y, x)
    seen = egocentric(state, W8)[..., 0] != UNSEEN
    vectors = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    for b, (ax, ay, heading) in enumerate(state[:, :3].tolist()):
        (fx, fy), want = vectors[heading], torch.zeros(8, 8, dtype=torch.bool)
        rx, ry = -fy, fx
        top_x, top_y = ax + fx * 6 - rx * 3, ay + fy * 6 - ry * 3
        for vx in range(7):
            for vy in range(7):
                x, y = top_x - fx * vy + rx * vx, top_y - fy * vy + ry * vx
                if seen[b, vx, vy] and 0 <= x < 8 and 0 <= y < 8:
                    want[y, x] = True
        assert torch.equal(lit_cells[b], want), b


def test_batched_frames_equal_frames_drawn_alone():
    world = DoorKey(size=16)
    state = env.reset(12, torch.Generator().manual_seed(4), world)
    for draw in (lambda s: render.rgb(s, world, 5), lambda s: render.pov_rgb(s, world, 5)):
        batch = draw(state)
        assert torch.equal(batch, torch.cat([draw(state[i : i + 1]) for i in range(12)]))


def test_the_egocentric_image_draws_unseen_cells_empty_and_the_agent_facing_up():
    state = env.from_layout(W8, 4, 2, (3, 2), 0, (1, 1))  # facing the locked door
    image = render.pov_rgb(state, W8, 8)
    assert image.shape == (1, 56, 56, 3)
    codes = egocentric(state, W8)[0]
    for vx in range(7):
        for vy in range(7):
            tile = image[0, vy * 8 : vy * 8 + 8, vx * 8 : vx * 8 + 8]
            if codes[vx, vy, 0] == UNSEEN:
                assert torch.equal(tile, _tile((EMPTY, 0, 0)))
    assert torch.equal(image[0, 48:56, 24:32], _tile((EMPTY, 0, 0), agent=4, highlight=1))


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_a_bad_tile_size_is_refused(size):
    state = env.reset(1, torch.Generator().manual_seed(0), W8)
    for draw in (render.rgb, render.pov_rgb):
        with pytest.raises(ValueError, match="tile_size must be a positive int"):
            draw(state, W8, size)


def test_the_grid_table_and_the_grid_computed_cell_by_cell_agree(monkeypatch):
    from gridplan.core.doorkey_observe import grid_codes
    from gridplan.core.doorkey_task import reset_tiles

    gen = torch.Generator().manual_seed(6)
    worlds = (DoorKey(size=5), W8, DoorKey(size=16))
    cases = [
        (w, env.reset(64, gen, w), reset_tiles(64, gen, DoorKey(size=w.size, tiles=4)))
        for w in worlds
    ]
    for w, state, tiles in cases:
        state[::3, 5] = 1  # carrying (the key on the agent's cell)
        state[1::3, 6] = torch.arange(len(state[1::3, 6])) % 3  # every door state
        assert render._grid_table(w, CPU) is not None
        for t in (None, tiles):
            assert torch.equal(render._codes(state, w, t), grid_codes(state, w, t))
        frames = render.rgb(state, w, 3, tiles=tiles)
        monkeypatch.setattr(render, "GRID_TABLE_BYTES", 0)
        render._grid_table.cache_clear()
        assert render._grid_table(w, CPU) is None
        assert torch.equal(render.rgb(state, w, 3, tiles=tiles), frames)
        monkeypatch.undo()
        render._grid_table.cache_clear()
