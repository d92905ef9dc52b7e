"""The batched MiniGrid DoorKey world: rules on hand-built states, the batched step against a
plain-Python one, the reset distribution, observations, exact values and bad input.

Equality with MiniGrid itself: ``tests/core/test_minigrid_doorkey.py``."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from helpers_doorkey import cell, reset_distribution, shortest
from helpers_doorkey import step as scalar_step
from scipy import stats

from gridplan.core import doorkey_env as env
from gridplan.core import doorkey_observe as observe
from gridplan.core import doorkey_task as dk_task
from gridplan.core import doorkey_values as values
from gridplan.core import doorkey_world as world
from gridplan.core.doorkey_constants import (
    CLOSED,
    DROP,
    FORWARD,
    LEFT,
    LOCKED,
    OPEN,
    PICKUP,
    RIGHT,
    TOGGLE,
)
from gridplan.core.doorkey_task import DoorKeyTask

W5, W6, W8 = (world.DoorKey(size=n) for n in (5, 6, 8))


def state(w, agent, heading, key, carrying=0, door=LOCKED, wall_x=3, door_y=2, step=0):
    """One ``(1, 10)`` state; a carried key sits on the agent."""
    key = agent if carrying else key
    return torch.tensor([[*agent, heading, *key, carrying, door, wall_x, door_y, step]])


def act(w, s, *actions):
    """Apply ``actions`` in turn; returns the last ``(state, reward, terminated, truncated)``."""
    for a in actions:
        s, r, term, trunc, _ = env.step(s, torch.tensor([a]), w)
    return s, r, term, trunc


def test_forward_is_blocked_by_walls_the_key_and_a_locked_door():
    s = state(W8, (1, 1), 3, (2, 2))
    assert act(W8, s, FORWARD)[0][0, :2].tolist() == [1, 1]  # north wall
    s = state(W8, (1, 2), 0, (2, 2))
    assert act(W8, s, FORWARD)[0][0, :2].tolist() == [1, 2]  # key ahead
    s = state(W8, (2, 2), 0, (1, 1))
    assert act(W8, s, FORWARD)[0][0, :2].tolist() == [2, 2]  # locked door at (3, 2)


def test_turns_wrap_around_the_four_headings():
    s = state(W8, (1, 1), 0, (2, 2))
    assert act(W8, s, LEFT)[0][0, 2] == 3
    assert act(W8, s, RIGHT, RIGHT, RIGHT, RIGHT)[0][0, 2] == 0


def test_the_key_opens_the_locked_door_and_an_open_door_closes_and_reopens_without_it():
    s = state(W8, (1, 2), 0, (2, 2))
    s, *_ = act(W8, s, TOGGLE)
    assert s[0, 6] == LOCKED  # toggling the key does nothing
    s, *_ = act(W8, s, PICKUP)
    assert s[0, 5] == 1 and s[0, 3:5].tolist() == [1, 2]
    s, *_ = act(W8, s, FORWARD, TOGGLE)
    assert s[0, 6] == OPEN and s[0, :2].tolist() == [2, 2]
    s, *_ = act(W8, s, DROP)
    assert s[0, 6] == OPEN and s[0, 5] == 1  # the door is not an empty cell: no drop
    s, *_ = act(W8, s, TOGGLE)
    assert s[0, 6] == CLOSED
    s, *_ = act(W8, s, LEFT, DROP, RIGHT, TOGGLE)
    # the key dropped on (2, 1); the closed door reopens without it
    assert s[0, 3:7].tolist() == [2, 1, 0, OPEN]


def test_drop_puts_the_key_on_the_empty_cell_in_front_and_pickup_takes_it_back():
    s = state(W8, (1, 2), 1, (1, 1), carrying=1)
    s, *_ = act(W8, s, DROP)
    assert s[0, 3:6].tolist() == [1, 3, 0]
    s, *_ = act(W8, s, FORWARD)
    assert s[0, :2].tolist() == [1, 2]  # the dropped key blocks
    s, *_ = act(W8, s, PICKUP)
    assert s[0, 3:6].tolist() == [1, 2, 1]


def test_reaching_the_goal_pays_minigrids_time_discounted_reward_and_terminates():
    s = state(W8, (6, 5), 1, (1, 1), carrying=1, door=OPEN, step=99)
    s, r, term, trunc = act(W8, s, FORWARD)
    assert term.item() and not trunc.item()
    assert r.item() == 1 - 0.9 * (100 / 640)
    assert r.dtype == torch.float64


def test_the_step_limit_truncates_even_on_the_goal():
    s = state(W8, (6, 5), 1, (1, 1), carrying=1, door=OPEN, step=639)
    s, r, term, trunc = act(W8, s, FORWARD)
    assert term.item() and trunc.item() and r.item() == 1 - 0.9 * (640 / 640)
    s = state(W8, (1, 1), 0, (2, 2), step=638)
    assert not act(W8, s, LEFT)[3].item()


def _random_reachable(w, count, seed):
    """States reached by uniform random actions from reset, with their actions."""
    gen = torch.Generator().manual_seed(seed)
    s = env.reset(count, gen, w)
    rows, acts = [], []
    for _ in range(40):
        a = torch.randint(0, 7, (count,), generator=gen)
        rows.append(s)
        acts.append(a)
        s = env.step(s, a, w)[0]
    return torch.cat(rows), torch.cat(acts)


@pytest.mark.parametrize("w", [W5, W6, W8], ids=lambda w: w.name)
def test_batched_step_equals_the_plain_python_step(w):
    s, a = _random_reachable(w, 64, seed=w.size)
    nxt, r, term, trunc, _ = env.step(s, a, w)
    for i in range(s.shape[0]):
        want = scalar_step(w.size, w.max_steps, tuple(s[i].tolist()), int(a[i]))
        got = (tuple(nxt[i].tolist()), r[i].item(), term[i].item(), trunc[i].item())
        assert got == want, (s[i].tolist(), int(a[i]))


@pytest.mark.parametrize("w", [W5, W8], ids=lambda w: w.name)
def test_transition_of_states_that_break_the_rules_equals_the_plain_python_step(w):
    # Decoded noisy states (gridplan.core.doorkey_task): the agent and the key anywhere on
    # the grid, in the wall, on the door or the goal, a carried key on the agent's cell.
    gen, n = torch.Generator().manual_seed(w.size), w.size
    low = torch.tensor([0, 0, 0, 0, 0, 0, 0, 2, 1, 0])
    high = torch.tensor([n - 1, n - 1, 3, n - 1, n - 1, 1, 2, n - 3, n - 2, w.max_steps])
    s = low + (torch.rand(600, 10, generator=gen) * (high - low + 1)).long()
    carried = s[:, 5] == 1
    s[carried, 3:5] = s[carried, 0:2]
    a = torch.randint(0, 7, (s.shape[0],), generator=gen)
    nxt, r, term, trunc, _ = env.transition(s, a, w)
    assert not env.valid(s, w).all()
    for i in range(s.shape[0]):
        want = scalar_step(w.size, w.max_steps, tuple(s[i].tolist()), int(a[i]))
        got = (tuple(nxt[i].tolist()), r[i].item(), term[i].item(), trunc[i].item())
        assert got == want, (s[i].tolist(), int(a[i]))


def test_reset_states_are_valid_layouts_on_the_generators_device_and_reproducible():
    a = env.reset(256, torch.Generator().manual_seed(3), W8)
    b = env.reset(256, torch.Generator().manual_seed(3), W8)
    assert torch.equal(a, b) and a.dtype == torch.long
    again = env.from_layout(W8, a[:, 7], a[:, 8], a[:, 0:2], a[:, 2], a[:, 3:5])
    assert torch.equal(again, a)


@pytest.mark.parametrize("w", [W6, W8], ids=lambda w: w.name)
def test_reset_draws_minigrids_layout_distribution(w):
    exact = reset_distribution(w.size)
    s = env.reset(40_000, torch.Generator().manual_seed(11), w)
    marginals = {
        "wall_x": lambda k: k[0], "door_y": lambda k: k[1], "agent": lambda k: k[2],
        "heading": lambda k: k[3], "key": lambda k: k[4],
    }
    drawn = {
        "wall_x": s[:, 7].tolist(), "door_y": s[:, 8].tolist(), "heading": s[:, 2].tolist(),
        "agent": list(zip(s[:, 0].tolist(), s[:, 1].tolist(), strict=True)),
        "key": list(zip(s[:, 3].tolist(), s[:, 4].tolist(), strict=True)),
    }
    for name, of in marginals.items():
        probs = {}
        for k, p in exact.items():
            probs[of(k)] = probs.get(of(k), 0.0) + p
        support = sorted(probs)
        assert set(drawn[name]) <= set(support), name
        observed = [drawn[name].count(v) for v in support]
        expected = [probs[v] * len(drawn[name]) for v in support]
        assert stats.chisquare(observed, expected).pvalue > 1e-3, name


def test_egocentric_view_of_a_hand_built_state():
    # 5x5, wall column 2, locked door at (2, 1); agent at (1, 3) facing north, key at (1, 1).
    s = state(W5, (1, 3), 3, (1, 1), wall_x=2, door_y=1)
    img = observe.egocentric(s, W5)[0]
    assert img.shape == (7, 7, 3) and img.dtype == torch.uint8
    assert img[3, 6].tolist() == [1, 0, 0]  # the agent's own cell, nothing carried
    assert img[3, 5].tolist() == [1, 0, 0]  # (1, 2) ahead is empty
    assert img[3, 4].tolist() == [5, 4, 0]  # the yellow key at (1, 1)
    assert img[3, 3].tolist() == [2, 5, 0]  # the outer wall at (1, 0)
    assert img[4, 4].tolist() == [4, 4, 2]  # the locked door at (2, 1), right of the key
    assert img[3, 2].tolist() == [0, 0, 0]  # off the grid, behind the wall: unseen
    assert img[2, 6].tolist() == [2, 5, 0]  # the wall west of the agent
    carried = state(W5, (1, 3), 3, (1, 3), carrying=1, wall_x=2, door_y=1)
    assert observe.egocentric(carried, W5)[0, 3, 6].tolist() == [5, 4, 0]


def test_full_grid_draws_every_object_once_and_the_agent_with_its_heading():
    s = state(W8, (1, 2), 3, (4, 4), carrying=0, wall_x=3, door_y=2)
    s[0, 3:5] = torch.tensor([1, 4])
    img = observe.full_grid(s, W8)[0]
    objects = img[..., 0].flatten().tolist()
    assert img[1, 2].tolist() == [10, 0, 3]
    assert img[3, 2].tolist() == [4, 4, 2] and img[1, 4].tolist() == [5, 4, 0]
    assert img[6, 6].tolist() == [8, 1, 0]
    assert objects.count(4) == objects.count(5) == objects.count(8) == objects.count(10) == 1
    assert objects.count(2) == 4 * 7 + 6 - 1  # the border, the wall column but its door


def _all_starts(w):
    rows = []
    for wall, door in w.layouts:
        room = [(x, y) for x in range(1, wall) for y in range(1, w.size - 1)]
        for agent, key in itertools.permutations(room, 2):
            rows += [[*agent, h, *key, 0, LOCKED, wall, door, 0] for h in range(4)]
    return torch.tensor(rows)


@pytest.mark.parametrize(
    "w", [W5, W6, pytest.param(W8, marks=pytest.mark.slow)], ids=lambda w: w.name
)
def test_the_greedy_policy_on_v_star_solves_every_reset_state_with_the_optimal_return(w):
    table = values.DoorKeyValues(w)
    s = _all_starts(w)
    want = table.minigrid_return(s)
    d0 = table.distance(s)
    assert (d0 > 0).all()
    total = torch.zeros(s.shape[0], dtype=torch.float64)
    alive = torch.ones(s.shape[0], dtype=torch.bool)
    for _ in range(int(d0.max())):
        s, r, term, _, _ = env.step(s, table.greedy(s), w)
        total += r * alive
        alive &= ~term
    assert not alive.any()
    assert torch.equal(total, want)
    assert torch.equal(want, 1 - 0.9 * (d0.double() / w.max_steps))


@pytest.mark.parametrize("w", [W5, W6], ids=lambda w: w.name)
def test_v_star_and_steps_to_go_equal_a_breadth_first_search(w):
    table = values.DoorKeyValues(w)
    s, _ = _random_reachable(w, 32, seed=5)
    pick = random.Random(0).sample(range(s.shape[0]), 60)
    s = s[pick]
    d = table.distance(s)
    v = table.values(s)
    for i in range(s.shape[0]):
        bfs = shortest(w.size, tuple(s[i].tolist()))
        assert d[i].item() == (values.UNREACHABLE if bfs is None else bfs)
        want = 0.0 if not bfs else table.gamma ** (bfs - 1)
        assert v[i].item() == pytest.approx(want, rel=1e-12, abs=0)


def test_q_star_is_one_step_of_v_star_and_its_maximum():
    table = values.DoorKeyValues(W6)
    s, _ = _random_reachable(W6, 16, seed=2)
    q = table.q_values(s)
    v = table.values(s)
    goal = (s[:, 0] == 4) & (s[:, 1] == 4)
    assert torch.equal(q.amax(dim=1)[~goal], v[~goal])
    assert (q[goal] == 0).all()


def _successors(w, wall_x, door_y):
    """One layout's valid states (their indices ``full``) with their ``(S, 7)`` compact
    successors and goal flags, and the terminal states ``stop``."""
    s = values.layout_states(w, wall_x, door_y)
    ok = env.valid(s, w)
    full = ok.nonzero().flatten()
    compact = torch.full((ok.shape[0],), -1, dtype=torch.long)
    compact[full] = torch.arange(full.shape[0])
    s = s[full]
    steps = [env.transition(s, torch.full((s.shape[0],), a), w) for a in range(7)]
    nxt = compact[torch.stack([values.state_index(r[0], w) for r in steps], dim=1)]
    goal = torch.stack([r[2] for r in steps], dim=1)
    stop = (s[:, 0] == w.size - 2) & (s[:, 1] == w.size - 2)
    return full, nxt, goal, stop


def _sweep_both(w, wall_x, door_y, gamma):
    """Plain value iteration of V* and d together on one layout, (S, 7) successors."""
    full, nxt, goal, stop = _successors(w, wall_x, door_y)
    v, d, sweeps = torch.zeros(full.shape[0], dtype=torch.float64), torch.where(stop, 0, 2**40), 0
    while True:
        sweeps += 1
        v_next = torch.where(goal, 1.0, gamma * v[nxt]).amax(dim=1).masked_fill_(stop, 0.0)
        d_next = torch.where(goal, 1, d[nxt] + 1).amin(dim=1).clamp_(max=2**40)
        d_next = torch.where(stop, d, d_next)
        if torch.equal(v_next, v) and torch.equal(d_next, d):
            break
        v, d = v_next, d_next
    return full, v, d.masked_fill_(d >= 2**40, values.UNREACHABLE), sweeps


@pytest.mark.parametrize("w", [W5, W6], ids=lambda w: w.name)
def test_v_star_read_off_the_distances_equals_sweeping_both_backups_bit_for_bit(w):
    for (wall_x, door_y), gamma in zip(w.layouts, [0.95, 0.5, 1e-30] * 4, strict=False):
        full, v, d, sweeps = _sweep_both(w, wall_x, door_y, gamma)
        table = values.layout_values(w, wall_x, door_y, gamma)
        assert torch.equal(table.values[full], v) and torch.equal(table.distance[full], d)
        assert table.sweeps == sweeps and (table.distance[full] > 0).any()


@pytest.mark.parametrize("steps", [0, 1, 3, 7, 11])
def test_horizon_values_equal_that_many_plain_value_sweeps_bit_for_bit(steps):
    gamma = 0.95
    for wall_x, door_y in [(2, 1), (3, 3)]:
        full, nxt, goal, stop = _successors(W6, wall_x, door_y)
        v = torch.zeros(full.shape[0], dtype=torch.float64)
        for _ in range(steps):
            v = torch.where(goal, 1.0, gamma * v[nxt]).amax(dim=1).masked_fill_(stop, 0.0)
        table = values.horizon_values(W6, wall_x, door_y, gamma, steps)
        assert torch.equal(table[full], v)
        assert (table[full] > 0).any() == (steps > 0)


def test_horizon_values_and_their_q_of_hand_built_states():
    # 6x6, wall column 3, door open at row 2, key carried: the east room is the column x = 4
    # and the goal (4, 4). Facing south from (4, 2) the goal is 2 steps away (V* = gamma),
    # facing north 4 (two turns first, V* = gamma^3); facing south from (4, 3), 1 (V* = 1).
    task = DoorKeyTask(world=W6)
    gamma = task.gamma
    rows = [((4, 2), 1), ((4, 2), 3), ((4, 3), 1), ((4, 4), 1)]
    s = torch.cat(
        [state(W6, a, h, a, carrying=1, door=OPEN, wall_x=3, door_y=2) for a, h in rows]
    )
    index = values.state_index(s, W6)
    want = {
        0: [0, 0, 0, 0],
        1: [0, 0, 1, 0],
        2: [gamma, 0, 1, 0],
        3: [gamma, 0, 1, 0],
        4: [gamma, gamma**3, 1, 0],
    }
    for steps, v in want.items():
        got = values.horizon_values(W6, 3, 2, gamma, steps)[index]
        assert got.tolist() == pytest.approx(v, rel=1e-12, abs=0), steps
    # The depth-2 search (one step, then V_1) sees the goal only straight ahead; depth 1 sees
    # nothing from (4, 2): every action ties at 0.
    floats = dk_task.encode(s, None, W6)
    q2 = task.value_table(steps=1).q_values(floats[:1])
    assert q2[0].tolist() == pytest.approx([0, 0, gamma, 0, 0, 0, 0])
    assert (task.value_table(steps=0).q_values(floats[:1]) == 0).all()
    with pytest.raises(ValueError, match="steps must be >= 0"):
        values.horizon_values(W6, 3, 2, gamma, -1)


def test_valid_keeps_exactly_the_states_minigrid_can_hold():
    gen = torch.Generator().manual_seed(4)
    highs = (8, 8, 4, 8, 8, 2, 3, 8, 8, 5)
    s = torch.stack([torch.randint(0, h, (3000,), generator=gen) for h in highs], dim=1)

    def plain(row):
        ax, ay, _, kx, ky, carrying, door, wall_x, door_y, _ = row
        if not (2 <= wall_x <= 5 and 1 <= door_y <= 6 and min(ax, ay, kx, ky) >= 1
                and max(ax, ay, kx, ky) <= 6):
            return False
        under_agent = cell(8, row, ax, ay)
        bare = (*row[:5], 1, *row[6:])  # the grid without the key
        if under_agent == "wall" or (under_agent == "door" and door != OPEN):
            return False
        if carrying:
            return (kx, ky) == (ax, ay)
        return cell(8, bare, kx, ky) == "empty" and (kx, ky) != (ax, ay)

    want = [plain(tuple(r)) for r in s.tolist()]
    assert env.valid(s, W8).tolist() == want and 0 < sum(want) < len(want)


def test_valid_states_step_to_valid_states():
    s = values.layout_states(W5, 2, 1)
    s = s[env.valid(s, W5)]
    for a in range(7):
        nxt = env.transition(s, torch.full((s.shape[0],), a), W5)[0]
        assert env.valid(nxt, W5).all()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"key": (4, 2)}, "key_x"),  # the key in the east room
        ({"agent": (3, 2)}, "agent_x"),  # the agent in the wall column
        ({"heading": 4}, "heading"),
        ({"door_y": 7}, "door_y"),  # the door in the outer wall
        ({"wall_x": 6}, "wall_x"),
        ({"key": (1, 1)}, "key_x/key_y"),  # the key under the agent
    ],
)
def test_a_malformed_layout_is_refused_naming_the_field(kwargs, field):
    layout = {"wall_x": 3, "door_y": 2, "agent": (1, 1), "heading": 0, "key": (2, 2)} | kwargs
    with pytest.raises(ValueError, match=f"field {field} "):
        env.from_layout(W8, **layout)


def test_malformed_states_actions_and_worlds_are_refused():
    good = state(W8, (1, 2), 0, (2, 2))
    bad_heading = good.clone()
    bad_heading[0, 2] = 4
    with pytest.raises(ValueError, match="field heading"):
        env.step(bad_heading, torch.tensor([0]), W8)
    on_door = state(W8, (3, 2), 0, (2, 2))
    with pytest.raises(ValueError, match="on the door only while it is open"):
        env.check_state(on_door, W8)
    with pytest.raises(ValueError, match="int64"):
        env.check_state(good.float(), W8)
    with pytest.raises(ValueError, match=r"0\.\.6"):
        env.step(good, torch.tensor([7]), W8)
    with pytest.raises(ValueError, match="unknown DoorKey world"):
        world.get("minigrid-doorkey-8x9")
    with pytest.raises(ValueError, match="size"):
        world.DoorKey(size=4)
    with pytest.raises(ValueError, match="odd"):
        world.DoorKey(view_size=6)


def test_names_resolve_to_minigrids_sizes_and_step_limits():
    assert world.names() == tuple(f"minigrid-doorkey-{n}x{n}" for n in (5, 6, 8, 16))
    w = world.get("minigrid-doorkey-16x16")
    assert (w.size, w.max_steps, w.view_size, w.goal) == (16, 2560, 7, (14, 14))
    assert w.gym_id == "MiniGrid-DoorKey-16x16-v0"
    assert W8.wall_columns == (2, 3, 4, 5) and W8.door_rows == (1, 2, 3, 4, 5)


@pytest.mark.parametrize("w", [W5, W8, world.DoorKey(size=7, view_size=5)], ids=str)
def test_tabulated_views_equal_views_computed_cell_by_cell(w):
    s, _ = _random_reachable(w, 128, seed=9)
    assert observe._view_table(w, s.device) is not None
    assert torch.equal(observe.egocentric(s, w), observe.views(s, w))
