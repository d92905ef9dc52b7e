"""gridplan.core.render: exact channels and pixels of hand-built states, determinism, errors."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import env, render, tasks, world
from gridplan.core.tasks import TASK_A
from gridplan.data.datasets import collect

W = world.DEFAULT  # 8x8, wall column 5, door at row 4; P = 4 pixels per cell
RED = torch.tensor(render.COLOURS["agent"], dtype=torch.uint8)


def state(
    agent=(1, 2), key=(3, 0), carrying=False, door=False, c1=1, c2=0, d1=(6, 6), d2=(7, 1), w=W
):
    """One ``(1, S)`` state from cells and flags (``gridplan.core.env.encode``)."""
    b = torch.tensor

    def cells(c):
        return b([c]).view(1, -1, 2)

    return env.encode(
        b([agent]),
        b([key]),
        b([carrying]),
        b([door]),
        b([[c1]]).bool(),
        b([[c2]]).bool(),
        cells(d1),
        cells(d2),
        w,
    )


def quadrant(x: int, y: int, dy: int, dx: int) -> tuple[slice, slice]:
    """Pixel rows and columns of quadrant (dy, dx) of cell (x, y) in the default world."""
    r, c = 4 * (7 - y) + 2 * dy, 4 * x + 2 * dx
    return slice(r, r + 2), slice(c, c + 2)


def changed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(H, W)`` bool: pixels that differ between two ``(1, 3, H, W)`` images."""
    return (a[0] != b[0]).any(dim=0)


def mask(*quadrants) -> torch.Tensor:
    out = torch.zeros(32, 32, dtype=torch.bool)
    for rows, cols in quadrants:
        out[rows, cols] = True
    return out


def test_the_default_world_draws_32x32_pixels_and_nine_grid_channels():
    assert render.obs_shape(W, "pixels") == (3, 32, 32)
    assert render.obs_shape(W, "grid") == (9, 8, 8)
    assert render.obs_shape(W, "state") == (12,)
    assert render.grid_channels(W) == (
        "agent",
        "key",
        "carrying",
        "wall",
        "door_closed",
        "d1",
        "d2",
        "c1_0",
        "c2_0",
    )


def test_the_agent_lights_exactly_the_top_left_quadrant_of_its_cell():
    img = render.observe(state(), W, "pixels")
    assert img.dtype == torch.uint8
    red = (img[0].permute(1, 2, 0) == RED).all(dim=2)
    assert torch.equal(red, mask(quadrant(1, 2, 0, 0)))
    moved = render.observe(state(agent=(2, 2)), W, "pixels")
    assert torch.equal(changed(img, moved), mask(quadrant(1, 2, 0, 0), quadrant(2, 2, 0, 0)))


def test_a_distractor_move_changes_only_its_own_pixels():
    before = render.observe(state(), W, "pixels")
    d1 = render.observe(state(d1=(6, 5)), W, "pixels")
    assert torch.equal(changed(before, d1), mask(quadrant(6, 6, 1, 0), quadrant(6, 5, 1, 0)))
    d2 = render.observe(state(d2=(0, 0)), W, "pixels")
    assert torch.equal(changed(before, d2), mask(quadrant(7, 1, 1, 1), quadrant(0, 0, 1, 1)))
    rows, cols = quadrant(0, 0, 1, 1)
    assert d2[0, :, rows, cols].flatten(1).T.tolist() == [list(render.COLOURS["d2"])] * 4


def test_colour_bits_paint_the_top_wall_cells_and_flags_their_colours():
    on = render.observe(state(c1=1, c2=1), W, "pixels")
    off = render.observe(state(c1=0, c2=0), W, "pixels")
    c1_at, c2_at = quadrant(5, 7, 0, 0), quadrant(5, 6, 0, 0)
    assert torch.equal(changed(on, off), mask(c1_at, c2_at))
    assert on[0, :, 0, 20].tolist() == list(render.COLOURS["c1_on"])
    assert off[0, :, 0, 20].tolist() == list(render.COLOURS["c1_off"])
    assert on[0, :, 4, 20].tolist() == list(render.COLOURS["c2_on"])
    assert off[0, :, 4, 20].tolist() == list(render.COLOURS["c2_off"])
    door = render.observe(state(door=True), W, "pixels")
    assert door[0, :, 12, 20].tolist() == list(render.COLOURS["door_open"])
    carried = render.observe(state(agent=(3, 0), key=(3, 0), carrying=True), W, "pixels")
    assert carried[0, :, 28, 12].tolist() == list(render.COLOURS["agent_carrying"])


def test_grid_channels_hold_each_object_on_its_cell_and_count_distractors():
    two = world.grid(8, 4)  # d1 = 2, d2 = 2
    b = torch.tensor
    s = env.encode(
        b([[1, 2]]),
        b([[3, 0]]),
        b([True]),
        b([False]),
        b([[True]]),
        b([[False]]),
        b([[[6, 6], [6, 6]]]),
        b([[[0, 7], [7, 1]]]),
        two,
    )
    g = render.observe(s, two, "grid")
    assert g.shape == (1, 9, 8, 8) and g.dtype == torch.float32
    names = render.grid_channels(two)
    ch = {name: g[0, i] for i, name in enumerate(names)}

    def only(channel, cells):
        want = torch.zeros(8, 8)
        for (x, y), v in cells.items():
            want[7 - y, x] = v
        return torch.equal(channel, want)

    assert only(ch["agent"], {(1, 2): 1}) and only(ch["key"], {(3, 0): 1})
    assert only(ch["d1"], {(6, 6): 2}) and only(ch["d2"], {(0, 7): 1, (7, 1): 1})
    assert only(ch["door_closed"], {(5, 4): 1})
    assert only(ch["wall"], {(5, y): 1 for y in range(8) if y != 4})
    assert torch.equal(ch["carrying"], torch.ones(8, 8))
    assert torch.equal(ch["c1_0"], torch.ones(8, 8)) and torch.equal(ch["c2_0"], torch.zeros(8, 8))


def test_observations_are_deterministic_and_the_state_kind_is_a_copy():
    s = env.reset(64, torch.Generator().manual_seed(3))
    for kind in ("grid", "pixels"):
        assert torch.equal(render.observe(s, W, kind), render.observe(s.clone(), W, kind))
    copy = render.observe(s, W, "state")
    assert torch.equal(copy, s) and copy.data_ptr() != s.data_ptr()
    batch = render.observe(s, W, "pixels")
    assert torch.equal(batch[5:6], render.observe(s[5:6], W, "pixels"))


def test_a_dataset_draws_observations_of_its_logged_states():
    data = collect("random", 200, 0, TASK_A)
    obs = data.observations("pixels", "next_states", rows=slice(0, 7))
    assert torch.equal(obs, render.observe(data.next_states[:7], W, "pixels"))
    assert data.observations("grid").shape == (200, 9, 8, 8)
    with pytest.raises(ValueError, match="which must be one of states, next_states"):
        data.observations("grid", "actions")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (torch.zeros(2, 11), r"shape \(B, 12\), got \(2, 11\)"),
        (torch.zeros(2, 12, dtype=torch.long), "floating-point tensor, got dtype torch.int64"),
        (torch.full((2, 12), float("nan")), r"non-finite values \(NaN or inf\) in rows \[0, 1\]"),
    ],
)
def test_bad_states_are_refused_naming_the_problem(bad, message):
    for kind in render.OBS_KINDS:
        with pytest.raises(ValueError, match=message):
            render.observe(bad, W, kind)


def test_bad_kinds_tiles_and_worlds_with_too_many_bits_are_refused():
    s = env.reset(1, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="unknown observation kind 'rgb'"):
        render.observe(s, W, "rgb")
    with pytest.raises(ValueError, match="pixels_per_cell must be an even int >= 2, got 3"):
        render.observe(s, W, "pixels", pixels_per_cell=3)
    crowded = world.World(name="bits", size=5, c1=3, c2=2)
    with pytest.raises(ValueError, match="5 colour bits but 4 wall cells"):
        render.obs_shape(crowded, "pixels")
    assert render.obs_shape(crowded, "grid") == (12, 5, 5)


def test_a_larger_world_scales_the_image_and_keeps_the_quadrant_rule():
    big = world.get("g16-k8")  # wall column 10, door row 8, 5 d1 + 4 d2 distractors
    s = env.reset(3, torch.Generator().manual_seed(0), tasks.get("A", world=big))
    s[0, :2] = torch.tensor([2.0, 13.0]) / 15  # the agent on cell (2, 13)
    img = render.observe(s, big, "pixels")
    assert img.shape == (3, 3, 64, 64)
    r, c = 4 * (15 - 13), 4 * 2
    assert (img[0, :, r : r + 2, c : c + 2] == RED.view(3, 1, 1)).all()
    assert render.observe(s, big, "grid")[0, 0].nonzero().tolist() == [[15 - 13, 2]]
