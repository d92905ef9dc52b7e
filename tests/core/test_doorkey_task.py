"""MiniGrid DoorKey as a task of every layer (``gridplan.core.doorkey_task``): the float state
on hand-built states, V* and Q* against the int tables, the planner over seven actions, the
noise family, Eq. 1 with tiles, the command line and bad input."""

from __future__ import annotations

import json

import pytest
import torch

from eval.cli import main as eval_main
from gridplan.core import doorkey_env as env
from gridplan.core import doorkey_task as dt
from gridplan.core import doorkey_values as values
from gridplan.core import dynamics, tasks
from gridplan.core import world as worlds
from gridplan.core.doorkey_constants import FORWARD, LEFT, LOCKED, OPEN, PICKUP, TOGGLE
from gridplan.core.relevance import relevance_weights
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import run_episodes
from gridplan.planning.planner import Planner

T6 = tasks.get("A", world="minigrid-doorkey-6x6")
T6_TILES = tasks.get("A", world="minigrid-doorkey-6x6-t2")


def cells(agent, heading, key, carrying=0, door=LOCKED, wall_x=3, door_y=2):
    """One ``(1, 10)`` MiniGrid state; a carried key sits on the agent."""
    key = agent if carrying else key
    return torch.tensor([[*agent, heading, *key, carrying, door, wall_x, door_y, 0]])


def test_names_resolve_to_doorkey_tasks_and_only_task_a():
    assert isinstance(T6, dt.DoorKeyTask) and T6.world.n_actions == 7 and T6.horizon == 360
    assert T6_TILES.world.state_dim == 13 and T6_TILES.world.dim_names[9:11] == (
        "tile_0_x",
        "tile_0_y",
    )
    assert worlds.get("minigrid-doorkey-16x16-t4").name == "minigrid-doorkey-16x16-t4"
    with pytest.raises(ValueError, match="one task, A"):
        tasks.get("B", world="minigrid-doorkey-6x6")
    assert tasks.get(T6) is T6
    with pytest.raises(ValueError, match="played on world 'minigrid-doorkey-6x6', not 'default'"):
        tasks.get(T6, world="default")
    with pytest.raises(ValueError, match="unknown DoorKey world"):
        worlds.get("minigrid-doorkey-6x7")
    with pytest.raises(ValueError, match="for MiniGrid's MiniGrid-DoorKey-8x8-v0: minigrid-doo"):
        worlds.get("MiniGrid-DoorKey-8x8-v0")
    with pytest.raises(ValueError, match="the world without tiles is minigrid-doorkey-6x6"):
        worlds.get("minigrid-doorkey-6x6-t0")
    assert worlds.recorded({"world": T6_TILES.world.spec()}) == T6_TILES.world


def test_encode_decode_round_trip_and_exact_values():
    state = dt.encode(cells((1, 1), 3, (2, 4), door=OPEN), None, T6.world)
    assert state.tolist()[0] == pytest.approx([0.2, 0.2, 1.0, 0.4, 0.8, 0.0, 0.0, 0.6, 0.4])
    back, tiles = dt.decode(state, T6.world)
    assert back.tolist() == cells((1, 1), 3, (2, 4), door=OPEN).tolist()
    assert tiles.shape == (1, 0, 2)


def test_pickup_then_toggle_on_hand_built_float_states():
    task = T6
    g = torch.Generator().manual_seed(0)
    s = dt.encode(cells((1, 2), 0, (2, 2)), None, task.world)
    s, r, done, info = dynamics.step(task, s, torch.tensor([PICKUP]), g)
    assert info["pickup"].item() and not done.item() and r.item() == 0.0
    assert dt.decode(s, task.world)[0].tolist() == cells((1, 2), 0, None, carrying=1).tolist()
    # Forward onto (2, 2), facing the door.
    s, _, _, info = dynamics.step(task, s, torch.tensor([FORWARD]), g)
    s, _, _, info = dynamics.step(task, s, torch.tensor([TOGGLE]), g)
    assert info["door_opened"].item() and info["unlocked"].item()
    assert s[0, 6].item() == 0.0  # door open: 0 / 2


def test_tiles_walk_inside_the_walls_and_nothing_reads_them():
    g = torch.Generator().manual_seed(1)
    s = T6_TILES.reset(64, g)
    start_tiles = dt.decode(s, T6_TILES.world)[1]
    action = torch.full((64,), LEFT)
    nxt = T6_TILES.step(s, action, g)[0]
    moved = dt.decode(nxt, T6_TILES.world)[1] - start_tiles
    assert moved.abs().sum(-1).max() <= 1 and moved.abs().sum() > 0
    tiles = dt.decode(nxt, T6_TILES.world)[1]
    assert tiles.min() >= 1 and tiles.max() <= 4
    base = T6.transition(s[:, :9], action, g)[0]
    assert torch.equal(nxt[:, :9], base)


def test_value_lookup_and_q_values_equal_the_int_tables():
    g = torch.Generator().manual_seed(2)
    raw = env.reset(200, g, T6.world)
    exact = values.DoorKeyValues(T6.world, T6.gamma)
    state = dt.encode(raw, None, T6.world)
    table = T6.value_table()
    assert torch.allclose(table.lookup(state).double(), exact.values(raw), atol=1e-6)
    assert torch.allclose(table.q_values(state).double(), exact.q_values(raw), atol=1e-6)


def test_oracle_plans_shortest_paths_over_seven_actions():
    model = OracleModel(world=T6.world)
    assert Planner(model, 2, T6).n_leaves == 49
    res = run_episodes(model, T6, depth=1, seeds=[0, 1], episodes=10, record=True)
    assert res.success.all()
    start = dt.decode(res.trajectory[0], T6.world)[0]
    distance = values.DoorKeyValues(T6.world, T6.gamma).distance(start)
    assert torch.equal(res.steps, distance)
    assert int(res.actions.max()) <= 6


def test_irrelevant_noise_decides_exactly_like_the_oracle():
    oracle = run_episodes(
        OracleModel(world=T6_TILES.world), T6_TILES, depth=2, seeds=[0], episodes=12, record=True
    )
    noisy = run_episodes(
        NoiseModel.controlled(0.0, 0.5, T6_TILES),
        T6_TILES,
        depth=2,
        seeds=[0],
        episodes=12,
        record=True,
    )
    assert torch.equal(oracle.actions, noisy.actions) and noisy.success.all()


def test_relevance_weights_are_zero_on_tiles_and_positive_on_the_agent():
    w = relevance_weights(T6_TILES)
    assert w.sum().item() == pytest.approx(1.0)
    assert torch.all(w[9:] == 0)
    assert w[0] > 0 and w[1] > 0 and w[5] > 0


@pytest.mark.parametrize(
    ("dim", "value", "match"),
    [
        (2, 4 / 3, "heading reads 4"),
        (2, 0.5, "heading = 0.5 .* not a multiple"),
        (7, 0.2, "wall_x reads 1"),
        (0, 0.6, "agent_x/agent_y .*not in a wall"),
    ],
)
def test_bad_states_are_named(dim, value, match):
    state = dt.encode(cells((1, 1), 0, (2, 3)), None, T6.world)
    state[0, dim] = value
    with pytest.raises(ValueError, match=match):
        T6.step(state, torch.tensor([FORWARD]), torch.Generator())


def test_bad_actions_and_readings_are_refused():
    state = T6.reset(2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="0..6"):
        T6.step(state, torch.tensor([0, 7]), torch.Generator())
    from gridplan.core import readings

    with pytest.raises(ValueError, match="cannot apply"):
        OracleModel(readings.get("expected-distractors"), T6.world)


def test_command_line_reports_success(tmp_path):
    out = tmp_path / "dk.json"
    args = ["--world", "minigrid-doorkey-6x6", "--depth", "1", "--seeds", "1", "--episodes", "6"]
    args += ["--eval-windows", "40", "--no-progress", "--json", str(out)]
    assert eval_main(args) == 0
    report = json.loads(out.read_text())
    assert report["success"]["mean"] == 1.0
    assert report["world"]["name"] == "minigrid-doorkey-6x6"


def test_the_card_states_doorkeys_contract(tmp_path):
    out = tmp_path / "dk.json"
    args = ["--world", "minigrid-doorkey-6x6", "--depth", "1", "--seeds", "1", "--episodes", "4"]
    args += ["--eval-windows", "40", "--levels", "L1,success", "--card", "--no-progress"]
    assert eval_main([*args, "--json", str(out)]) == 0
    card = json.loads((tmp_path / "dk.card.json").read_text())
    task = card["contract"]["task"]
    assert task["goal"] == [4, 4] and task["hazard"] is None
    assert task["relevant_dims"][:3] == ["agent_x", "agent_y", "heading"]
    assert card["contract"]["action_interface"].startswith("controlled: 7 discrete actions")
    assert "all 7^1 action sequences" in card["contract"]["policy_class"]


def test_every_level_means_every_level_the_world_defines(tmp_path):
    from gridplan.evaluation.ladder import every_level

    model = OracleModel(world=T6.world)
    # The oracle exposes no uncertainty; every other level is defined on DoorKey.
    assert every_level(model) == ("L1", "L4", "L5", "L6", "L7", "probe")
    out = tmp_path / "all.json"
    args = ["--world", "minigrid-doorkey-6x6", "--depth", "1", "--seeds", "1", "--episodes", "2"]
    args += ["--eval-windows", "20", "--ladder-sizes", "tiny", "--levels", "all", "--no-progress"]
    assert eval_main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["levels"] == ["L1", "L4", "L5", "L6", "L7", "probe"]
