"""``gridplan.core.doorkey_render`` draws MiniGrid's RGB frames exactly, and floor tiles show in
every observation as MiniGrid shows ``Floor`` objects on those cells.

Layouts come from MiniGrid's own seeds, loaded into our state (``gridplan.adapters.minigrid``
``track``/``load_state``); MiniGrid plays episodes half greedy in Q* so that the door is seen
locked, closed and open, the key carried and not, the agent in every heading. Needs the
``minigrid`` extra at the pinned version (skipped without it)."""

from __future__ import annotations

import importlib.metadata
from collections import Counter

import numpy as np
import pytest
import torch

pytest.importorskip("minigrid", reason="the RGB check compares against MiniGrid itself")

from minigrid.core.constants import IDX_TO_COLOR  # noqa: E402
from minigrid.core.grid import Grid  # noqa: E402
from minigrid.core.world_object import Floor  # noqa: E402

from gridplan.adapters import minigrid as mg  # noqa: E402
from gridplan.core import doorkey_render as render  # noqa: E402
from gridplan.core import doorkey_task as task  # noqa: E402
from gridplan.core import doorkey_tiles as dt  # noqa: E402
from gridplan.core.doorkey_constants import CARRYING, DOOR, FLOOR, HEADING, OPEN, TOGGLE  # noqa: E402
from gridplan.core.doorkey_observe import egocentric, full_grid  # noqa: E402
from gridplan.core.doorkey_values import DoorKeyValues  # noqa: E402
from gridplan.core.doorkey_world import DoorKey  # noqa: E402


@pytest.fixture(autouse=True)
def _pinned():
    if importlib.metadata.version("minigrid") != mg.PINNED_VERSION:
        pytest.skip(f"the check is pinned to minigrid=={mg.PINNED_VERSION}")


def _played(world: DoorKey, episodes: int, steps: int, seed: int):
    """MiniGrid environments after each step of ``episodes`` episodes from its seeds, with our
    state of each: yields ``(env, state (1, 10))``. Half the episodes are greedy in Q* (grids up to
    ``GUIDED_MAX_SIZE``), with toggles thrown in so that an open door gets closed."""
    env, rng = mg.make_env(world), np.random.default_rng(seed)
    values = DoorKeyValues(world) if world.size <= mg.GUIDED_MAX_SIZE else None
    for episode in range(episodes):
        env.reset(seed=seed * 1000 + episode)
        tracked = mg.track(env)
        greedy = values is not None and episode % 2 == 0
        for _ in range(steps):
            state = torch.tensor([mg.load_state(env, tracked)])
            yield env, state
            draw = rng.random()
            if state[0, DOOR] == OPEN and draw < 0.3:
                act = TOGGLE  # closes the door if it is in front
            elif greedy and draw < 0.8:
                act = int(values.greedy(state)[0])
            else:
                act = int(rng.integers(0, 7))
            _, _, terminated, truncated, _ = env.step(act)
            if terminated or truncated:
                break


def _mismatch(theirs: np.ndarray, ours: torch.Tensor) -> str:
    ours = ours.numpy()
    if theirs.shape != ours.shape:
        return f"shape {theirs.shape} vs {ours.shape}"
    diff = np.abs(theirs.astype(int) - ours.astype(int))
    return f"{int((diff > 0).any(-1).sum())} pixels differ, max {int(diff.max())}"


def _lay(env, tiles: torch.Tensor) -> list[tuple[int, int]]:
    """Put ``Floor`` objects of the tiles' colours on the empty cells of ``env``'s grid, the
    higher tile index last; returns the cells to clear again."""
    grid, placed = env.unwrapped.grid, []
    colours = dt.tile_colours(tiles.shape[0]).tolist()
    for (x, y), colour in zip(tiles.tolist(), colours, strict=True):
        if grid.get(x, y) is None or (x, y) in placed:
            grid.set(x, y, Floor(IDX_TO_COLOR[colour]))
            placed.append((x, y))
    return placed


@pytest.mark.parametrize(
    ("world", "episodes"),
    [(DoorKey(size=5), 6), (DoorKey(size=6), 6), (DoorKey(size=8, view_size=5), 4)],
    ids=lambda v: getattr(v, "name", None),
)
def test_frames_equal_minigrids_pixel_for_pixel(world, episodes):
    seen, frames = Counter(), 0
    for env, state in _played(world, episodes, 60, seed=world.size):
        e = env.unwrapped
        for highlight in (True, False):
            theirs = e.get_frame(highlight=highlight, tile_size=8)
            ours = render.rgb(state, world, 8, highlight)[0]
            assert np.array_equal(theirs, ours), (state.tolist(), _mismatch(theirs, ours))
        theirs = e.get_pov_render(8)
        ours = render.pov_rgb(state, world, 8)[0]
        assert np.array_equal(theirs, ours), (state.tolist(), _mismatch(theirs, ours))
        frames += 1
        seen[f"door{int(state[0, DOOR])}"] += 1
        seen[f"heading{int(state[0, HEADING])}"] += 1
        seen[f"carrying{int(state[0, CARRYING])}"] += 1
    assert frames > 100
    for what in ("door0", "door1", "door2", "carrying0", "carrying1", *(
            f"heading{h}" for h in range(4))):
        assert seen[what] > 0, (what, seen)


def test_frames_at_minigrids_default_tile_size_equal_its_own():
    world = DoorKey(size=6)
    for k, (env, state) in enumerate(_played(world, 2, 40, seed=7)):
        if k % 13 == 0:
            e = env.unwrapped
            assert np.array_equal(e.get_frame(tile_size=32), render.rgb(state, world)[0])
            assert np.array_equal(e.get_pov_render(32), render.pov_rgb(state, world)[0])


def test_every_tile_is_minigrids_render_tile():
    """The table against ``Grid.render_tile`` itself, at odd and even sizes."""
    from minigrid.core.world_object import Door, Goal, Key, Wall

    objects = [None, Wall(), Door("yellow", is_open=True), Door("yellow"),
               Door("yellow", is_locked=True), Key("yellow"), Goal()]
    objects += [Floor(IDX_TO_COLOR[c]) for c in range(6)]
    assert len(objects) == len(render.KINDS)
    for size in (3, 8, 11):
        table = render.tile_table(size, torch.device("cpu"))
        for k, obj in enumerate(objects):
            for agent in range(5):
                for highlight in (0, 1):
                    theirs = Grid.render_tile(
                        obj, agent_dir=agent - 1 if agent else None, highlight=bool(highlight),
                        tile_size=size,
                    ).astype(np.uint8)
                    ours = table[(k * 5 + agent) * 2 + highlight]
                    assert np.array_equal(theirs, ours), (size, k, agent, highlight)


@pytest.mark.parametrize("world", [DoorKey(size=6), DoorKey(size=16)], ids=lambda w: w.name)
def test_floor_tiles_show_as_minigrids_floor_objects(world):
    """Tiles laid as ``Floor`` objects on MiniGrid's empty cells give MiniGrid's encodings and
    frames; 16x16 views are computed cell by cell (``views``), 6x6 from the table."""
    gen, walk = torch.Generator().manual_seed(0), DoorKey(size=world.size, tiles=6)
    tiles, shown, under = task.reset_tiles(1, gen, walk), 0, 0
    for k, (env, state) in enumerate(_played(world, 3, 50, seed=11)):
        tiles = task.step_tiles(tiles, gen, walk)
        if k % 2:
            tiles[0, 0] = state[0, :2]  # under the agent
        placed = _lay(env, tiles[0])
        e = env.unwrapped
        obs = e.gen_obs()["image"]
        ours = egocentric(state, world, tiles)
        assert np.array_equal(obs, ours[0]), (state.tolist(), tiles.tolist())
        full = mg.fully_observed(env).observation({})["image"]
        assert np.array_equal(full, full_grid(state, world, tiles)[0]), tiles.tolist()
        theirs = e.get_frame(tile_size=8)
        assert np.array_equal(theirs, render.rgb(state, world, 8, tiles=tiles)[0])
        assert np.array_equal(e.get_pov_render(8), render.pov_rgb(state, world, 8, tiles)[0])
        shown += int((ours[0, ..., 0] == FLOOR).sum())
        under += int((tiles[0] == state[0, :2]).all(dim=1).any())
        for x, y in placed:
            e.grid.set(x, y, None)
    assert shown > 0 and under > 0


def test_the_differential_check_compares_frames_and_catches_a_broken_one(monkeypatch):
    tally = mg.differential(DoorKey(size=5), 96, seed=3, envs=8, rgb_every=2)
    assert tally.transitions == 96 and tally.total_mismatches == 0, tally.examples
    real = render.rgb
    monkeypatch.setattr(mg.render, "rgb", lambda *a, **k: real(*a, **k).flip(1))
    tally = mg.differential(DoorKey(size=5), 32, seed=3, envs=8, rgb_every=1)
    assert tally.mismatches["rgb"] == 32 and tally.mismatches["pov_rgb"] == 0
    with pytest.raises(ValueError, match="rgb_every must be >= 0"):
        mg.differential(DoorKey(size=5), 8, rgb_every=-1)
