"""``gridplan.core.doorkey_*`` equals MiniGrid's DoorKey: states, rewards, terminations,
truncations and observations transition by transition, and the same reset distribution.

Needs the ``minigrid`` extra at the pinned version (skipped without it); the large run is
``scripts/check_minigrid.py``."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch
from scipy import stats

pytest.importorskip("minigrid")

from gridplan.adapters import minigrid as mg  # noqa: E402
from gridplan.core import doorkey_env as env  # noqa: E402
from gridplan.core.doorkey_world import DoorKey  # noqa: E402

#: (world, transitions): every size MiniGrid registers, and a short step limit that makes
#: truncations frequent. Views come from the table up to 11x11, cell by cell on 16x16.
CI_WORLDS = [
    (DoorKey(size=5), 700),
    (DoorKey(size=6), 700),
    (DoorKey(size=8), 500),
    (DoorKey(size=16), 400),
    (DoorKey(size=5, max_steps=30), 500),
]


@pytest.fixture(autouse=True)
def _pinned():
    if importlib.metadata.version("minigrid") != mg.PINNED_VERSION:
        pytest.skip(f"the check is pinned to minigrid=={mg.PINNED_VERSION}")


@pytest.mark.parametrize(("world", "transitions"), CI_WORLDS, ids=lambda v: getattr(v, "name", v))
def test_every_transition_and_observation_equals_minigrids(world, transitions):
    tally = mg.differential(world, transitions, seed=world.max_steps, envs=16)
    assert tally.transitions >= transitions
    assert tally.total_mismatches == 0, tally.examples
    # Episodes guided by Q* (grids up to 8) visit every event; 16x16 is played uniformly.
    if world.size <= mg.GUIDED_MAX_SIZE:
        for event in ("pickup", "drop", "unlocked", "goal"):
            assert tally.events[event] > 0, event
    if world.max_steps == 30:
        assert tally.events["truncated"] > 0


def test_a_broken_step_is_caught(monkeypatch):
    real = env.step

    def swapped_turns(state, action, world):
        return real(state, torch.where(action < 2, 1 - action, action), world)

    monkeypatch.setattr(mg.dk, "step", swapped_turns)
    tally = mg.differential(DoorKey(size=5), 64, seed=0, envs=8, guided=0.0)
    assert tally.mismatches["state:heading"] > 0 and tally.mismatches["image"] > 0


def test_our_reset_draws_the_layouts_minigrid_draws():
    world, draws = DoorKey(size=6), 1500
    gym_env = mg.make_env(world)
    theirs = []
    for seed in range(draws):
        gym_env.reset(seed=seed)
        theirs.append(mg.load_state(gym_env, mg.track(gym_env)))
    theirs = torch.tensor(theirs)
    ours = env.reset(draws, torch.Generator().manual_seed(0), world)
    marginals = {"wall_x": [7], "door_y": [8], "heading": [2], "agent": [0, 1], "key": [3, 4]}
    for name, dims in marginals.items():
        values = sorted({tuple(r) for r in torch.cat([ours, theirs])[:, dims].tolist()})
        table = [[sum(tuple(r) == v for r in side[:, dims].tolist()) for v in values]
                 for side in (ours, theirs)]
        assert stats.chi2_contingency(table).pvalue > 1e-3, name


def test_a_grid_with_the_door_off_the_wall_column_is_refused():
    from minigrid.core.world_object import Door

    gym_env = mg.make_env(DoorKey(size=8))
    gym_env.reset(seed=0)
    wall_x, door_y = mg.track(gym_env).wall_x, mg.track(gym_env).door_y
    gym_env.unwrapped.grid.set(wall_x, door_y, None)
    gym_env.unwrapped.grid.set(wall_x + 1, 3, Door("yellow", is_locked=True))
    with pytest.raises(ValueError, match="off the wall column"):
        mg.track(gym_env)


def test_another_minigrid_version_is_refused_naming_both(monkeypatch):
    monkeypatch.setattr(mg.importlib.metadata, "version", lambda name: "9.9.9")
    with pytest.raises(RuntimeError, match=r"minigrid==3\.2\.0.*minigrid==9\.9\.9"):
        mg.require_pinned()


def _check_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "check_minigrid.py"
    spec = importlib.util.spec_from_file_location("check_minigrid", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_check_script_counts_and_refuses_another_version(monkeypatch, capsys, tmp_path):
    script = _check_script()
    out = tmp_path / "check.json"
    assert script.main(["--transitions", "64", "--worlds", "5:20", "--envs", "8",
                        "--json", str(out)]) == 0
    assert "64 transitions" in capsys.readouterr().out and out.exists()
    with pytest.raises(SystemExit):
        script.main(["--transitions", "64", "--json", str(out)])  # never overwrites
    monkeypatch.setattr(mg.importlib.metadata, "version", lambda name: "3.1.0")
    assert script.main(["--transitions", "64"]) == 2
    assert "minigrid==3.1.0" in capsys.readouterr().err
