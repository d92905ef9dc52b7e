"""A DoorKey model trained outside gridplan (``docs/how-to/minigrid-model.md``): the transitions
``gridplan.adapters.minigrid.collect`` records from MiniGrid's own env equal our port's step,
and the plug-in of ``docs/how-to/minigrid_model.py`` evaluates through the command line's path.

Needs the ``minigrid`` extra at the pinned version (skipped without it)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
from pathlib import Path

import pytest
import torch

pytest.importorskip("minigrid", reason="the outside-model path reads MiniGrid's own env")

import gymnasium  # noqa: E402

import gridplan  # noqa: E402
from eval.specs import plugin  # noqa: E402
from gridplan.adapters import minigrid as mg  # noqa: E402
from gridplan.adapters.gymnasium import GridPlanEnv  # noqa: E402
from gridplan.core import tasks  # noqa: E402
from gridplan.core import world as worlds  # noqa: E402
from gridplan.core.doorkey_task import DoorKeyTask  # noqa: E402
from gridplan.models.plugins import PluginError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "minigrid_outside_model.py"
PLUGIN = ROOT / "docs" / "how-to" / "minigrid_model.py"
WORLD = "minigrid-doorkey-8x8"


@pytest.fixture(autouse=True)
def _pinned():
    if importlib.metadata.version("minigrid") != mg.PINNED_VERSION:
        pytest.skip(f"the check is pinned to minigrid=={mg.PINNED_VERSION}")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("minigrid_outside_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env():
    return gymnasium.make("MiniGrid-DoorKey-8x8-v0")


def test_collected_transitions_equal_our_ports_step(script):
    states, actions, nexts = mg.collect(_env(), 400, script.scripted(0.5), seed=3)
    assert states.shape == nexts.shape == (400, 9) and actions.shape == (400,)
    task = DoorKeyTask(world=worlds.get(WORLD))
    ours = task.step(states, actions, torch.Generator().manual_seed(0))[0]
    assert torch.equal(ours, nexts)
    # The scripted policy reaches every event MiniGrid's step has: pickup, unlock, goal.
    assert ((states[:, 5] == 0) & (nexts[:, 5] == 1)).sum() > 5
    assert ((states[:, 6] == 1) & (nexts[:, 6] == 0)).sum() > 5
    assert (nexts[:, :2] == 6 / 7).all(dim=1).sum() > 5
    # One step of the states already recorded is the next row within an episode.
    same_episode = (nexts[:-1] == states[1:]).all(dim=1)
    assert same_episode.float().mean() > 0.9


def test_state_vector_reads_a_reset_env_into_the_float_layout():
    env = _env()
    env.reset(seed=5)
    tracked = mg.track(env)
    row = mg.load_state(env, tracked)
    vec = mg.state_vector(env, tracked)
    scale = torch.tensor([7, 7, 3, 7, 7, 1, 2, 7, 7], dtype=torch.float32)
    assert vec.dtype == torch.float32
    assert torch.round(vec * scale).long().tolist() == row[:9]
    assert row[5:7] == [0, 2]  # not carrying, the door locked


def test_collect_refuses_an_action_outside_minigrids_seven():
    with pytest.raises(ValueError, match="action 7, outside 0..6"):
        mg.collect(_env(), 3, lambda env, rng: 7)
    with pytest.raises(ValueError, match="transitions must be >= 1"):
        mg.collect(_env(), 0, lambda env, rng: 0)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: gymnasium.make("CartPole-v1"), "CartPoleEnv"),
        (lambda: GridPlanEnv("A", world=WORLD), "GridPlanEnv"),
        (object, "object"),
    ],
)
def test_collect_refuses_an_env_that_is_not_minigrids_naming_it(make, name):
    with pytest.raises(TypeError) as caught:
        mg.collect(make(), 3, lambda env, rng: 0)
    assert str(caught.value) == (
        f"collect reads MiniGrid's own DoorKey env (gymnasium.make(\"MiniGrid-DoorKey-8x8-v0\") "
        f"or minigrid.envs.DoorKeyEnv, wrappers allowed), got a {name}, whose unwrapped env "
        "lacks MiniGrid's grid, agent_pos, agent_dir, carrying"
    )


@pytest.mark.slow
def test_a_model_trained_outside_gridplan_evaluates_through_the_plugin(script, tmp_path):
    torch.manual_seed(0)
    data = mg.collect(_env(), 1500, script.scripted(0.6), seed=0)
    net = script.plugin_module().DoorKeyMLP(hidden=32, layers=2)
    script.train(net, *data, epochs=2, seed=0)
    path = tmp_path / "mlp.pt"
    script.plugin_module().save(net, str(path), WORLD)
    task = tasks.get("A", world=worlds.get(WORLD))
    # As python -m eval builds it: loaded from its file and wrapped in the contract checks.
    model, info = plugin(f"{PLUGIN}:make", {"path": str(path)}, task, "cpu")
    assert model.world == worlds.get(WORLD)
    with pytest.raises(PluginError, match=f"not default: pass --world {WORLD}"):
        plugin(f"{PLUGIN}:make", {"path": str(path)}, tasks.get("A"), "cpu")
    report = gridplan.evaluate(
        model,
        "quick-a",
        world=WORLD,
        levels=["L1", "success"],
        seeds=(0,),
        episodes=2,
        n_windows=16,
    ).to_dict()
    assert report["world"]["name"] == WORLD and report["depth"] == 2
    assert 0.0 <= report["success"]["mean"] <= 1.0 and report["success"]["n"] == 2
    assert math.isfinite(report["E_tot"]) and report["E_tot"] > 0.0
