"""Worlds as data (``gridplan.core.world``): the registry, the geometry rules, and known answers
on large worlds (the oracle's success, Prop. 1, V* against a plain-Python value iteration, the
environment's step and reset on a world with many distractors and colour bits)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.core.constants import DOWN, LEFT, RIGHT, UP
from gridplan.core.env import encode, reset, start_cells, step
from gridplan.core.values import discrete_index, value_table
from gridplan.core.world import DEFAULT, World
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import run_episodes
from gridplan.planning.planner import Planner
from gridplan.planning.reference import REF_DISTRACTOR_MOVES, ref_outcome, ref_relevant_step
from gridplan.planning.registry import through_predict

BIG = worlds.get("g32-k64")


# --- the registry and the geometry rules ------------------------------------------------------


def test_the_default_world_is_the_papers_layout():
    assert DEFAULT.name == "default" and DEFAULT.size == 8 and DEFAULT.state_dim == 12
    assert DEFAULT.dim_names == (
        "agent_x", "agent_y", "key_x", "key_y", "carrying", "door_open",
        "c1", "c2", "d1_x", "d1_y", "d2_x", "d2_y",
    )
    assert (DEFAULT.wall_x, DEFAULT.door_cell, DEFAULT.horizon) == (5, (5, 4), 60)
    assert {x for x, _ in start_cells(DEFAULT).tolist()} == {0, 1, 2, 3, 4}
    assert start_cells(DEFAULT).shape == (40, 2)
    assert (DEFAULT.c1_dims, DEFAULT.c2_dims, DEFAULT.d1_dims, DEFAULT.d2_dims) == (
        (6,), (7,), (8, 9), (10, 11)
    )
    assert worlds.get("default") is DEFAULT
    assert worlds.get("g8-k2") is DEFAULT
    assert tasks.get("A", world="g8-k2") is tasks.TASK_A


def test_g32_k64_follows_the_rule():
    assert (BIG.name, BIG.size, BIG.d1, BIG.d2, BIG.c1, BIG.c2) == ("g32-k64", 32, 32, 32, 1, 1)
    assert BIG.state_dim == 136 == 6 + 1 + 1 + 2 * 64
    assert (BIG.wall_x, BIG.door_cell, BIG.horizon, BIG.start_columns) == (20, (20, 16), 240, 20)
    assert BIG.cell_scale == 31.0
    assert BIG.d1_dims == tuple(range(8, 72)) and BIG.d2_dims == tuple(range(72, 136))
    assert BIG.dim_names[6:10] == ("c1", "c2", "d1_0_x", "d1_0_y")
    assert BIG.dim_names[-2:] == ("d2_31_x", "d2_31_y")
    assert len(set(BIG.dim_names)) == 136
    odd = worlds.get("g16-k7")  # K - K // 2 random-walk, K // 2 redrawn
    assert (odd.d1, odd.d2, odd.state_dim, odd.wall_x, odd.door_y) == (4, 3, 22, 10, 8)
    assert worlds.names()[:3] == ("default", "g16-k8", "g32-k64")


def test_tasks_are_placed_on_a_world_by_their_rule():
    a, b = tasks.get("A", world=BIG), tasks.get("B", world="g32-k64")
    assert (a.world, a.goal, a.hazard, a.horizon) == (BIG, (31, 16), None, 240)
    assert (b.world, b.goal, b.hazard) == (BIG, (31, 8), (31, 20))
    assert b.relevant_dims == (0, 1, 2, 3, 4, 5, 6)
    assert tasks.get("A", world=worlds.get("g16-k8")).goal == (15, 8)


def test_world_equality_ignores_the_name_and_specs_round_trip():
    assert World(name="mine", size=32, d1=32, d2=32) == BIG
    assert hash(World(name="mine", size=32, d1=32, d2=32)) == hash(BIG)
    assert World(size=32, d1=32, d2=31) != BIG
    odd = World(name="odd", size=11, d1=3, d2=0, c1=2, c2=0, wall_x=6, door_y=2, start_columns=3)
    for w in (DEFAULT, BIG, odd):
        spec = w.spec()
        back = World.from_spec(spec)
        assert back == w and back.name == w.name and back.spec() == spec
    assert odd.spec()["state_dim"] == 6 + 2 + 0 + 6
    assert worlds.recorded({}) is DEFAULT
    assert worlds.recorded({"world": BIG.spec()}) == BIG


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("bogus", "unknown world 'bogus'; registered worlds are default, g16-k8, g32-k64"),
        ("g32", "unknown world 'g32'"),
        ("g4-k2", "world size must be an int >= 5, got 4"),
        ("g300-k2", "world size must be <= 256, got 300"),
    ],
)
def test_a_bad_world_name_is_refused_naming_the_registered_ones(name, match):
    with pytest.raises(ValueError, match=match):
        worlds.get(name)


def test_tasks_get_refuses_an_unknown_world_listing_the_registered_ones():
    with pytest.raises(ValueError, match="unknown world 'bogus'; registered worlds are default"):
        tasks.get("A", world="bogus")
    with pytest.raises(TypeError, match="world must be a name or a World, got int"):
        worlds.get(32)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d1": -1}, "world d1 must be an int >= 0, got -1"),
        ({"c1": 0}, "world c1 must be an int >= 1, got 0"),
        ({"size": 8.0}, "world size must be an int >= 5, got 8.0"),
        ({"wall_x": 7}, "world wall_x must leave a column east of it: <= 6, got 7"),
        ({"door_y": 8}, "world door_y must lie in 0..7, got 8"),
        ({"start_columns": 6}, "world start_columns must lie in 1..5"),
        ({"name": ""}, "world name must be a non-empty string"),
    ],
)
def test_a_malformed_world_is_refused_naming_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        World(**kwargs)


def test_a_malformed_spec_is_refused():
    spec = BIG.spec()
    with pytest.raises(ValueError, match="world spec lacks door_y"):
        World.from_spec({k: v for k, v in spec.items() if k != "door_y"})
    with pytest.raises(ValueError, match="states state_dim 12, its layout has 136"):
        World.from_spec({**spec, "state_dim": 12})
    with pytest.raises(ValueError, match="a world spec must be a dict, got str"):
        World.from_spec("g32-k64")
    with pytest.raises(ValueError, match="checkpoint states a malformed world"):
        worlds.recorded({"world": {**spec, "size": 2}}, "checkpoint")


def test_registering_another_world_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="world 'g16-k8' is already registered"):
        worlds.register(World(name="g16-k8", size=16, d1=1, d2=1))
    assert worlds.register(World(name="g16-k8", size=16, d1=4, d2=4)) == worlds.get("g16-k8")


# --- known answers on g32-k64 -----------------------------------------------------------------


def random_states(world: World, batch: int, seed: int, c1=None) -> torch.Tensor:
    """``(batch, S)`` states on exact cells anywhere the agent can stand; the key west of the
    wall or carried; door and colour bits random (``c1`` fixed when given)."""
    gen = torch.Generator().manual_seed(seed)
    n = world.size
    free = [(x, y) for x in range(n) for y in range(n) if x != world.wall_x]
    free = torch.tensor([*free, world.door_cell])
    agent = free[torch.randint(0, len(free), (batch,), generator=gen)]
    key = torch.randint(0, n, (batch, 2), generator=gen)
    key[:, 0] %= world.wall_x
    flags = torch.randint(0, 2, (batch, 2), generator=gen).bool()
    carrying, door = flags[:, 0], flags[:, 0] & flags[:, 1]
    key = torch.where(carrying.unsqueeze(1), agent, key)
    bits = torch.randint(0, 2, (batch, world.c1 + world.c2), generator=gen).bool()
    if c1 is not None:
        bits[:, 0] = c1
    d1 = torch.randint(0, n, (batch, world.d1, 2), generator=gen)
    d2 = torch.randint(0, n, (batch, world.d2, 2), generator=gen)
    c1s, c2s = bits[:, : world.c1], bits[:, world.c1 :]
    return encode(agent, key, carrying, door, c1s, c2s, d1, d2, world)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["A", "B"])
def test_the_oracle_succeeds_on_g32_k64(name):
    task = tasks.get(name, world=BIG)
    results = run_episodes(OracleModel(world=BIG), task=task, depth=2, seeds=[0], episodes=100)
    assert results.success.shape == (100,)
    assert results.success.float().mean().item() >= 0.95
    assert results.outcome_counts().get("hazard", 0) == 0
    # A 32-grid is far bigger than the paper's: the episodes are long, but within the horizon.
    assert results.steps.float().mean().item() > 20
    assert results.steps.max().item() <= task.horizon


def _irrelevant_noise(task, sigma_i: float) -> NoiseModel:
    """Noise ``sigma_i`` on every dim the task's V* does not read, none on those it reads
    (for Task A: ``M(0, sigma_i)``; Task B also reads ``c1``)."""
    sigma = torch.full((task.world.state_dim,), sigma_i)
    sigma[list(task.relevant_dims)] = 0.0
    return NoiseModel(sigma, task.noise_relevant_dims, world=task.world)


@pytest.mark.parametrize("factory", [None, through_predict], ids=["fused", "generic"])
@pytest.mark.parametrize(
    ("world", "name"),
    # Task B's V* on g32-k64 takes a few seconds to build: the slow tier, g16-k8 here.
    [("g32-k64", "A"), pytest.param("g32-k64", "B", marks=pytest.mark.slow), ("g16-k8", "B")],
)
def test_irrelevant_noise_decides_exactly_like_the_oracle_on_a_large_world(world, name, factory):
    # Paper Prop. 1: noise on the dims V* does not read never reaches a decision, however many.
    task = tasks.get(name, world=world)
    world = task.world
    starts = reset(16, torch.Generator().manual_seed(4), task)
    roots = torch.cat([random_states(world, 48, 3), starts])
    noisy = NoiseModel.controlled(0.0, 0.5, task) if name == "A" else _irrelevant_noise(task, 0.5)
    oracle = Planner(OracleModel(world=world), 2, task, factory=factory)
    planner = Planner(noisy, 2, task, factory=factory)
    assert type(planner.scorer) is type(oracle.scorer)
    q_oracle = oracle.action_values(roots, torch.Generator().manual_seed(5))
    q_noisy = planner.action_values(roots, torch.Generator().manual_seed(5))
    assert torch.equal(q_noisy, q_oracle)
    assert q_oracle.max().item() > 0.0  # some roots are near enough the goal to see it
    acts = [p.act(roots, torch.Generator().manual_seed(6)) for p in (oracle, planner)]
    assert torch.equal(acts[0], acts[1])


def test_relevant_noise_changes_decisions_on_g32_k64():
    # The check above can fail: noise on the relevant dims reaches the action values.
    task = tasks.get("A", world=BIG)
    roots = random_states(BIG, 64, 3)
    gen = torch.Generator().manual_seed(5)
    q_oracle = Planner(OracleModel(world=BIG), 2, task).action_values(roots, gen)
    noisy = Planner(NoiseModel.controlled(1.5, 0.0, task), 2, task)
    assert not torch.equal(noisy.action_values(roots, torch.Generator().manual_seed(5)), q_oracle)


# --- V* against a plain-Python value iteration -------------------------------------------------

Rel = tuple  # (agent, key, carrying, door_open): cells as (x, y) int tuples


def _python_values(task, starts: list[Rel], c1: bool) -> dict:
    """V* of every relevant state reachable from ``starts`` (colour bit ``c1``), by BFS over
    ``ref_relevant_step`` and synchronous value iteration in plain Python floats."""
    world = task.world

    def terminal(agent) -> bool:
        _, goal, hazard = ref_outcome(agent, c1, task)
        return goal or hazard

    moves: dict = {}
    frontier = list(starts)
    while frontier:
        state = frontier.pop()
        if state in moves:
            continue
        if terminal(state[0]):
            moves[state] = None
            continue
        moves[state] = []
        for action in range(4):
            agent, key, carrying, door, _, _ = ref_relevant_step(*state, action, world)
            nxt = (agent, key, carrying, door)
            moves[state].append((ref_outcome(agent, c1, task)[0], nxt))
            frontier.append(nxt)
    values = dict.fromkeys(moves, 0.0)
    for _ in range(10_000):
        new = {
            s: 0.0 if m is None else max(r + task.gamma * values[n] for r, n in m)
            for s, m in moves.items()
        }
        done = all(abs(new[s] - values[s]) < 1e-12 for s in moves)
        values = new
        if done:
            return values
    raise AssertionError("plain value iteration did not converge")


def _samples(world: World) -> list[Rel]:
    """Hand-picked relevant states: key on the floor near and far, carried with the door
    closed and open, east of the wall and in the door cell."""
    n, wall, door_y = world.size, world.wall_x, world.door_y
    return [
        ((1, 2), (wall - 1, n - 1), False, False),
        ((wall - 1, door_y), (0, 0), False, False),
        ((0, n - 1), (0, n - 1), True, False),
        ((3, 1), (3, 1), True, False),
        ((wall - 1, door_y), (wall - 1, door_y), True, True),
        (world.door_cell, world.door_cell, True, True),
        ((n - 2, 1), (n - 2, 1), True, True),
        ((n - 1, n - 1), (n - 1, n - 1), True, True),
    ]


def _check_against_python(task) -> None:
    table = value_table(task).table
    for c1 in ((False, True) if task.reads_c1 else (False,)):
        starts = _samples(task.world)
        reference = _python_values(task, starts, c1)
        assert len(reference) > 2 * task.world.size**2  # the BFS went through both chambers
        checked = starts + list(itertools.islice(reference, 0, None, 97))
        idx = discrete_index(
            torch.tensor([s[0] for s in checked]),
            torch.tensor([s[1] for s in checked]),
            torch.tensor([s[2] for s in checked]),
            torch.tensor([s[3] for s in checked]),
            torch.full((len(checked),), c1),
            task,
        )
        expected = torch.tensor([reference[s] for s in checked], dtype=torch.float64)
        got = table[idx].double()
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
        assert (expected > 0).sum() > len(checked) // 2  # real values, not all zeros


@pytest.mark.parametrize("name", ["A", "B"])
def test_value_table_matches_plain_value_iteration_on_g16_k8(name):
    _check_against_python(tasks.get(name, world="g16-k8"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["A", "B"])
def test_value_table_matches_plain_value_iteration_on_g32_k64(name):
    _check_against_python(tasks.get(name, world=BIG))


def test_values_on_g32_k64_count_the_steps_to_the_goal():
    task = tasks.get("A", world=BIG)
    table = value_table(task).table
    # Carrying, door open, in the door cell: 11 steps east to (31, 16).
    idx = discrete_index(
        torch.tensor([[20, 16], [30, 16], [31, 16]]), torch.tensor([[20, 16], [30, 16], [31, 16]]),
        torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool),
        torch.zeros(3, dtype=torch.bool), task,
    )
    assert table[idx].tolist() == pytest.approx([task.gamma**10, 1.0, 0.0], rel=1e-6)


# --- the environment on a world of many distractors --------------------------------------------

WIDE = World(name="wide", size=12, d1=3, d2=2, c1=2, c2=3)
#: Twelve dims, but not the paper's layout: no random walk, three toggling bits.
TWELVE = World(name="twelve", size=8, d1=0, d2=1, c1=1, c2=3)


@pytest.mark.parametrize("world", [WIDE, TWELVE, worlds.get("g16-k8"), BIG], ids=lambda w: w.name)
def test_a_hand_built_state_steps_exactly(world):
    task = tasks.task_a(world)
    n, wall, door_y = world.size, world.wall_x, world.door_y
    # Rows: open the closed door (carrying, stays); walk into the wall (stays); step onto the
    # key (pickup); walk through the open door; walk off the grid (stays).
    agent = torch.tensor([[wall - 1, door_y], [wall - 1, 0], [1, 1], [wall - 1, door_y], [0, 0]])
    key = torch.tensor([[wall - 1, door_y], [0, 3], [1, 2], [wall - 1, door_y], [2, 2]])
    carrying = torch.tensor([True, False, False, True, False])
    door = torch.tensor([False, False, False, True, False])
    action = torch.tensor([RIGHT, RIGHT, UP, RIGHT, LEFT])
    b = agent.shape[0]
    gen = torch.Generator().manual_seed(11)
    c1 = torch.randint(0, 2, (b, world.c1), generator=gen).bool()
    c2 = torch.randint(0, 2, (b, world.c2), generator=gen).bool()
    d1 = torch.randint(0, n, (b, world.d1, 2), generator=gen)
    if world.d1:
        d1[0, 0] = torch.tensor([0, 0])  # corners: the walk is clipped there
        d1[1, 0] = torch.tensor([n - 1, n - 1])
    d2 = torch.randint(0, n, (b, world.d2, 2), generator=gen)
    state = encode(agent, key, carrying, door, c1, c2, d1, d2, world)
    assert state.shape == (b, world.state_dim)

    draws = torch.Generator().manual_seed(12)
    copy = torch.Generator().set_state(draws.get_state())
    move = torch.randint(0, 5, (b, world.d1), generator=copy)  # the documented draw order
    cells = torch.randint(0, n, (b, world.d2, 2), generator=copy)
    nxt, reward, terminated, info = step(state, action, draws, task)

    scale = world.cell_scale
    cell = (nxt * scale).round().long()
    door_side, door_cell = [wall - 1, door_y], [wall, door_y]
    assert cell[:, 0:2].tolist() == [door_side, [wall - 1, 0], [1, 2], door_cell, [0, 0]]
    assert cell[:, 2:4].tolist() == [door_side, [0, 3], [1, 2], door_cell, [2, 2]]
    assert nxt[:, 4].tolist() == [1.0, 0.0, 1.0, 1.0, 0.0]  # carrying
    assert nxt[:, 5].tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]  # door open
    assert info["door_opened"].tolist() == [True, False, False, False, False]
    assert info["pickup"].tolist() == [False, False, True, False, False]
    assert reward.tolist() == [0.0] * b and not terminated.any()
    assert torch.equal(nxt[:, list(world.c1_dims)], c1.float())  # static
    assert torch.equal(nxt[:, list(world.c2_dims)], (~c2).float())  # toggled
    shift = torch.tensor(REF_DISTRACTOR_MOVES)[move]
    walked = (d1 + shift).clamp(0, n - 1)
    got_d1 = cell[:, list(world.d1_dims)].view(b, world.d1, 2)
    assert torch.equal(got_d1, walked)
    assert ((got_d1 - d1).abs().sum(dim=2) <= 1).all()  # one of five moves, clipped
    assert torch.equal(cell[:, list(world.d2_dims)].view(b, world.d2, 2), cells)
    # Positions are exact multiples of 1 / (N - 1) (the normalization of the layout).
    positions = list(world.position_dims)
    torch.testing.assert_close(nxt[:, positions], cell[:, positions] / scale)


def test_a_step_onto_the_goal_of_a_large_world_terminates_with_its_reward():
    task = tasks.get("B", world=BIG)
    agent = torch.tensor([[30, 8], [30, 20], [30, 8], [30, 20]])
    c1 = torch.tensor([[False], [False], [True], [True]])
    no, yes = torch.zeros(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool)
    d = torch.zeros(4, 32, 2, dtype=torch.long)
    state = encode(agent, agent, yes, yes, c1, no.unsqueeze(1), d, d, BIG)
    _, reward, terminated, info = step(state, torch.full((4,), RIGHT), torch.Generator(), task)
    assert reward.tolist() == [1.0, -1.0, -1.0, 1.0]
    assert terminated.all()
    assert info["goal"].tolist() == [True, False, False, True]
    assert info["hazard"].tolist() == [False, True, True, False]
    # DOWN from the same cells moves the agent and ends nothing.
    nxt, reward, terminated, _ = step(state, torch.full((4,), DOWN), torch.Generator(), task)
    assert not terminated.any() and (reward == 0).all()


@pytest.mark.parametrize("world", [WIDE, BIG], ids=lambda w: w.name)
def test_reset_draws_distinct_start_cells_west_of_the_wall(world):
    task = tasks.task_a(world)
    state = reset(512, torch.Generator().manual_seed(2), task)
    assert state.shape == (512, world.state_dim) and state.dtype == torch.float32
    cell = (state * world.cell_scale).round().long()
    agent, key = cell[:, 0:2], cell[:, 2:4]
    assert (agent != key).any(dim=1).all()
    assert (agent[:, 0] < world.wall_x).all() and (key[:, 0] < world.wall_x).all()
    assert agent[:, 0].max().item() == world.wall_x - 1  # the whole western chamber is used
    assert (state[:, 4:6] == 0).all()  # not carrying, door closed
    bits = state[:, list(world.c1_dims + world.c2_dims)]
    assert ((bits == 0) | (bits == 1)).all() and 0.3 < bits.mean().item() < 0.7
    dist = cell[:, list(world.d1_dims + world.d2_dims)]
    assert dist.min().item() == 0 and dist.max().item() == world.size - 1


def test_a_state_of_another_world_is_refused_by_step():
    task = tasks.get("A", world=BIG)
    with pytest.raises(ValueError, match=r"\(B, 136\)"):
        step(torch.zeros(2, 12), torch.zeros(2, dtype=torch.long), torch.Generator(), task)


def test_a_world_replaced_field_by_field_is_a_new_world():
    moved = dataclasses.replace(BIG, name="moved", door_y=3)
    assert moved != BIG and moved.door_cell == (20, 3)
    assert tasks.task_a(moved).goal == (31, 3)


# --- the plain reference on a larger grid of the paper's layout ---------------------------------

G16_PAPER = worlds.get("g16-k2")  # the paper's 12 dims on a 16-grid


@pytest.mark.parametrize("name", ["A", "B"])
def test_batched_step_matches_the_reference_on_a_16_grid(name):
    from gridplan.planning.reference import ref_decode, ref_encode, ref_step

    task = tasks.get(name, world=G16_PAPER)
    assert G16_PAPER.state_dim == 12 and G16_PAPER.wall_x == 10
    gen = torch.Generator().manual_seed(21)
    # Carrying beside the closed door: RIGHT opens it.
    door_side = torch.tensor([[9, 8]])
    yes, no = torch.ones(1, dtype=torch.bool), torch.zeros(1, dtype=torch.bool)
    d = torch.zeros(1, 2, dtype=torch.long)
    beside = encode(door_side, door_side, yes, no, no, no, d, d, G16_PAPER)
    state = torch.cat([random_states(G16_PAPER, 127, 22), beside, reset(64, gen, task)])
    state = state.repeat(4, 1)
    b = state.shape[0]
    action = torch.arange(4).repeat_interleave(b // 4)
    copy = torch.Generator().set_state(gen.get_state())
    moves = torch.randint(0, 5, (b, 1), generator=copy)[:, 0].tolist()
    cells = [tuple(c) for c in torch.randint(0, 16, (b, 1, 2), generator=copy)[:, 0].tolist()]
    nxt, reward, done, info = step(state, action, gen, task)
    for i in range(b):
        ref = ref_step(ref_decode(state[i].tolist(), G16_PAPER), int(action[i]), moves[i],
                       cells[i], task)
        assert torch.equal(nxt[i], torch.tensor(ref_encode(ref[0], G16_PAPER))), i
        assert (reward[i].item(), done[i].item()) == (ref[1], ref[2])
        assert {k: bool(v[i]) for k, v in info.items()} == ref[3]
    assert info["pickup"].any() and info["door_opened"].any()


@pytest.mark.parametrize("name", ["A", "B"])
def test_batched_oracle_planner_matches_the_reference_planner_on_a_16_grid(name):
    import functools

    from gridplan.planning.reference import ref_action_values, ref_oracle_predict

    task = tasks.get(name, world=G16_PAPER)
    state = torch.cat([random_states(G16_PAPER, 16, 23),
                       reset(8, torch.Generator().manual_seed(24), task)])
    values = Planner(OracleModel(world=G16_PAPER), 2, task).action_values(state, torch.Generator())
    predict = functools.partial(ref_oracle_predict, task=task)
    for i in range(state.shape[0]):
        want = ref_action_values(state[i].tolist(), 2, task, predict)
        assert values[i].tolist() == pytest.approx(want, abs=1e-5), i
    assert values.max().item() > 0.0
