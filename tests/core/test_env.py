"""The batched environment on hand-built states: every move, wall, door, key, goal and hazard
rule, the distractors, seeding, reset and bad input (paper §3, appendix D)."""

from __future__ import annotations

import pytest
import torch
from paper_layout import C2, CELL_SCALE, D1_X, D1_Y, D2_X, D2_Y

from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    CARRYING,
    DOOR_OPEN,
    DOWN,
    KEY_X,
    KEY_Y,
    LEFT,
    RIGHT,
    UP,
)
from gridplan.core.env import reset, step
from gridplan.core.tasks import TASK_A, TASK_B, Task
from gridplan.planning.reference import ref_decode, ref_encode, ref_step


def cells(state: torch.Tensor, x_dim: int, y_dim: int) -> list[tuple[int, int]]:
    """Integer cells of every row for the coordinate pair ``(x_dim, y_dim)``."""
    xy = torch.round(state[:, [x_dim, y_dim]] * CELL_SCALE).long()
    return [tuple(c) for c in xy.tolist()]


def agent_after(state: torch.Tensor, action: int, task: Task = TASK_A) -> tuple[int, int]:
    nxt = step(state, torch.tensor([action]), torch.Generator().manual_seed(0), task)[0]
    return cells(nxt, AGENT_X, AGENT_Y)[0]


@pytest.mark.parametrize(
    ("action", "expected"), [(UP, (2, 4)), (DOWN, (2, 2)), (LEFT, (1, 3)), (RIGHT, (3, 3))]
)
def test_each_action_moves_the_agent_one_cell_in_open_space(make_state, action, expected):
    assert agent_after(make_state(agent=(2, 3), key=(0, 7)), action) == expected


@pytest.mark.parametrize(
    ("agent", "action"),
    [((x, 7), UP) for x in (0, 3, 7)]
    + [((x, 0), DOWN) for x in (0, 3, 7)]
    + [((0, y), LEFT) for y in (0, 4, 7)]
    + [((7, y), RIGHT) for y in (0, 3, 7)],
)
def test_moving_against_a_border_leaves_the_agent_in_place_without_wrapping(
    make_state, agent, action
):
    state = make_state(agent=agent, key=(4, 2), door_open=True)
    assert agent_after(state, action) == agent


@pytest.mark.parametrize("y", [0, 1, 2, 3, 5, 6, 7])
@pytest.mark.parametrize(("x", "action"), [(4, RIGHT), (6, LEFT)])
def test_the_wall_column_blocks_from_both_sides_even_with_key_and_open_door(
    make_state, x, y, action
):
    state = make_state(agent=(x, y), carrying=True, door_open=True)
    nxt = step(state, torch.tensor([action]), torch.Generator().manual_seed(0))[0]
    assert cells(nxt, AGENT_X, AGENT_Y) == [(x, y)]
    assert nxt[0, DOOR_OPEN] == 1.0


@pytest.mark.parametrize(("action", "expected"), [(UP, (5, 4)), (DOWN, (5, 4)), (LEFT, (4, 4))])
def test_from_the_door_cell_the_wall_blocks_vertical_moves(make_state, action, expected):
    state = make_state(agent=(5, 4), carrying=True, door_open=True)
    assert agent_after(state, action) == expected


def test_bumping_the_closed_door_without_the_key_changes_nothing(make_state, gen):
    state = make_state(agent=(4, 4), key=(0, 0))
    nxt, reward, done, info = step(state, torch.tensor([RIGHT]), gen)
    assert cells(nxt, AGENT_X, AGENT_Y) == [(4, 4)]
    assert nxt[0, DOOR_OPEN] == 0.0
    assert not info["door_opened"].item() and not done.item() and reward.item() == 0.0


def test_bumping_the_closed_door_with_the_key_opens_it_and_keeps_the_agent_in_place(
    make_state, gen
):
    state = make_state(agent=(4, 4), carrying=True)
    opened, _, _, info = step(state, torch.tensor([RIGHT]), gen)
    assert cells(opened, AGENT_X, AGENT_Y) == [(4, 4)]
    assert opened[0, DOOR_OPEN] == 1.0 and info["door_opened"].item()
    entered, _, _, info = step(opened, torch.tensor([RIGHT]), gen)
    assert cells(entered, AGENT_X, AGENT_Y) == [(5, 4)]
    assert cells(entered, KEY_X, KEY_Y) == [(5, 4)]
    assert entered[0, DOOR_OPEN] == 1.0 and not info["door_opened"].item()


def test_the_closed_door_also_blocks_and_opens_from_the_east(make_state, gen):
    blocked = step(make_state(agent=(6, 4), key=(0, 0)), torch.tensor([LEFT]), gen)[0]
    assert cells(blocked, AGENT_X, AGENT_Y) == [(6, 4)] and blocked[0, DOOR_OPEN] == 0.0
    opened = step(make_state(agent=(6, 4), carrying=True), torch.tensor([LEFT]), gen)[0]
    assert cells(opened, AGENT_X, AGENT_Y) == [(6, 4)] and opened[0, DOOR_OPEN] == 1.0


def test_stepping_onto_the_key_picks_it_up_and_the_key_then_follows_the_agent(make_state, gen):
    state = make_state(agent=(2, 3), key=(3, 3))
    picked, _, _, info = step(state, torch.tensor([RIGHT]), gen)
    assert info["pickup"].item() and picked[0, CARRYING] == 1.0
    assert cells(picked, KEY_X, KEY_Y) == [(3, 3)]
    moved, _, _, info = step(picked, torch.tensor([UP]), gen)
    assert not info["pickup"].item() and moved[0, CARRYING] == 1.0
    assert cells(moved, KEY_X, KEY_Y) == [(3, 4)] == cells(moved, AGENT_X, AGENT_Y)


def test_a_key_not_walked_onto_stays_where_it_lies(make_state, gen):
    nxt, _, _, info = step(make_state(agent=(2, 3), key=(3, 3)), torch.tensor([UP]), gen)
    assert cells(nxt, KEY_X, KEY_Y) == [(3, 3)]
    assert nxt[0, CARRYING] == 0.0 and not info["pickup"].item()


@pytest.mark.parametrize(("agent", "action"), [((6, 4), RIGHT), ((7, 3), UP), ((7, 5), DOWN)])
def test_task_a_reaching_the_goal_from_any_side_pays_one_and_terminates(
    make_state, gen, agent, action
):
    state = make_state(agent=agent, carrying=True, door_open=True)
    nxt, reward, done, info = step(state, torch.tensor([action]), gen, TASK_A)
    assert cells(nxt, AGENT_X, AGENT_Y) == [(7, 4)]
    assert reward.item() == 1.0 and done.item() and info["goal"].item()
    assert not info["hazard"].item()


@pytest.mark.parametrize(("agent", "action"), [((6, 2), RIGHT), ((6, 5), RIGHT), ((6, 3), UP)])
def test_task_a_other_eastern_cells_pay_nothing(make_state, gen, agent, action):
    state = make_state(agent=agent, carrying=True, door_open=True)
    _, reward, done, info = step(state, torch.tensor([action]), gen, TASK_A)
    assert reward.item() == 0.0 and not done.item()
    assert not info["goal"].item() and not info["hazard"].item()


@pytest.mark.parametrize(
    ("c1", "agent", "action", "reward", "event"),
    [
        (False, (6, 2), RIGHT, 1.0, "goal"),
        (False, (6, 5), RIGHT, -1.0, "hazard"),
        (True, (6, 5), RIGHT, 1.0, "goal"),
        (True, (6, 2), RIGHT, -1.0, "hazard"),
    ],
)
def test_task_b_c1_selects_which_corner_is_goal_and_which_is_hazard(
    make_state, gen, c1, agent, action, reward, event
):
    state = make_state(agent=agent, carrying=True, door_open=True, c1=c1)
    _, got_reward, done, info = step(state, torch.tensor([action]), gen, TASK_B)
    assert got_reward.item() == reward and done.item() and info[event].item()
    other = "hazard" if event == "goal" else "goal"
    assert not info[other].item()


@pytest.mark.parametrize("c1", [False, True])
def test_task_b_has_no_goal_at_the_task_a_goal_cell(make_state, gen, c1):
    state = make_state(agent=(6, 4), carrying=True, door_open=True, c1=c1)
    _, reward, done, _ = step(state, torch.tensor([RIGHT]), gen, TASK_B)
    assert reward.item() == 0.0 and not done.item()


def test_c2_toggles_every_step_and_c1_never_changes(make_state, gen):
    state = make_state(agent=(2, 3), c1=True, c2=False, rows=2)
    seen_c2 = []
    for action in (UP, DOWN, LEFT, RIGHT):
        state = step(state, torch.tensor([action, action]), gen)[0]
        seen_c2.append(state[0, C2].item())
        assert (state[:, C1] == 1.0).all()
    assert seen_c2 == [1.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("d1", "reachable"),
    [
        ((0, 0), {(0, 0), (1, 0), (0, 1)}),
        ((7, 7), {(7, 7), (6, 7), (7, 6)}),
        ((3, 3), {(3, 3), (3, 4), (3, 2), (2, 3), (4, 3)}),
    ],
)
def test_d1_walks_at_most_one_cell_and_stays_on_the_grid(make_state, gen, d1, reachable):
    state = make_state(agent=(2, 3), d1=d1, rows=400)
    nxt = step(state, torch.zeros(400, dtype=torch.long), gen)[0]
    landed = cells(nxt, D1_X, D1_Y)
    assert set(landed) == reachable
    assert ((nxt[:, [D1_X, D1_Y]] >= 0) & (nxt[:, [D1_X, D1_Y]] <= 1)).all()


def test_d1_at_a_corner_stays_put_three_times_in_five(make_state, gen):
    state = make_state(d1=(0, 0), rows=5000)
    landed = cells(step(state, torch.zeros(5000, dtype=torch.long), gen)[0], D1_X, D1_Y)
    stay = sum(c == (0, 0) for c in landed) / len(landed)
    assert abs(stay - 0.6) < 0.03


def test_d2_is_redrawn_uniformly_each_step_and_differs_across_rows(make_state, gen):
    state = make_state(d2=(3, 3), rows=1000)
    first = step(state, torch.zeros(1000, dtype=torch.long), gen)[0]
    second = step(first, torch.zeros(1000, dtype=torch.long), gen)[0]
    drawn = cells(first, D2_X, D2_Y)
    assert len(set(drawn)) == 64
    assert max(drawn.count(c) for c in set(drawn)) < 40
    moved = sum(a != b for a, b in zip(drawn, cells(second, D2_X, D2_Y), strict=True))
    assert moved > 950


def test_distractors_never_block_the_agent_nor_change_the_reward(make_state, gen):
    state = make_state(agent=(6, 4), carrying=True, door_open=True, d1=(7, 4), d2=(7, 4))
    nxt, reward, done, _ = step(state, torch.tensor([RIGHT]), gen)
    assert cells(nxt, AGENT_X, AGENT_Y) == [(7, 4)] and reward.item() == 1.0 and done.item()


def test_the_same_seed_gives_the_same_episodes_and_another_seed_different_ones():
    def episode(seed):
        g = torch.Generator().manual_seed(seed)
        states = [reset(16, g)]
        for t in range(5):
            action = torch.full((16,), t % 4)
            states.append(step(states[-1], action, g)[0])
        return torch.stack(states)

    assert torch.equal(episode(3), episode(3))
    assert not torch.equal(episode(3)[0], episode(4)[0])
    assert not torch.equal(episode(3)[1:, :, D2_X:], episode(4)[1:, :, D2_X:])


def test_a_thousand_resets_from_one_seed_are_distinct_valid_start_states():
    state = reset(1000, torch.Generator().manual_seed(7))
    assert state.shape == (1000, 12) and state.dtype == torch.float32
    assert len({tuple(r) for r in state.tolist()}) == 1000
    agent, key = cells(state, AGENT_X, AGENT_Y), cells(state, KEY_X, KEY_Y)
    assert all(a != k for a, k in zip(agent, key, strict=True))
    assert all(x <= 4 for x, _ in agent + key)
    assert len(set(agent)) == 40 and len(set(key)) == 40
    assert (state[:, CARRYING] == 0).all() and (state[:, DOOR_OPEN] == 0).all()
    for flag in (C1, C2):
        assert 400 < state[:, flag].sum().item() < 600
    assert len(set(cells(state, D1_X, D1_Y))) == 64
    assert len(set(cells(state, D2_X, D2_Y))) == 64


@pytest.mark.parametrize(
    ("state", "match"),
    [
        (torch.zeros(2, 11), r"shape \(B, 12\), got \(2, 11\)"),
        (torch.zeros(12), r"shape \(B, 12\), got \(12,\)"),
        (torch.zeros(2, 12, dtype=torch.long), "floating-point"),
        (torch.tensor([[float("nan")] + [0.0] * 11, [0.0] * 12]), r"non-finite.*rows \[0\]"),
        (torch.tensor([[0.0] * 11 + [float("inf")]] * 2), "non-finite"),
        ([[0.0] * 12] * 2, "must be a torch.Tensor"),
    ],
)
def test_step_rejects_a_malformed_state_naming_the_problem(state, match, gen):
    with pytest.raises(ValueError, match=match):
        step(state, torch.zeros(2, dtype=torch.long), gen)


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (torch.tensor([0, 4]), r"0\.\.3, got range \[0, 4\]"),
        (torch.tensor([-1, 0]), r"0\.\.3, got range \[-1, 0\]"),
        (torch.tensor([0.0, 1.0]), "integer tensor"),
        (torch.tensor([True, False]), "integer tensor"),
        (torch.tensor([0, 1, 2]), r"shape \(2,\), got \(3,\)"),
        ([0, 1], "must be a torch.Tensor"),
    ],
)
def test_step_rejects_bad_actions_naming_the_problem(make_state, gen, action, match):
    with pytest.raises(ValueError, match=match):
        step(make_state(rows=2), action, gen)


def test_a_task_name_instead_of_a_task_is_rejected_by_reset_and_step(make_state, gen):
    with pytest.raises(TypeError, match="got str 'B'; resolve a name with gridplan.core.tasks.get"):
        reset(2, gen, "B")
    with pytest.raises(TypeError, match="must be a gridplan.core.tasks.Task, got NoneType"):
        step(make_state(), torch.tensor([0]), gen, None)


def test_reset_rejects_an_empty_batch(gen):
    with pytest.raises(ValueError, match="batch must be >= 1"):
        reset(0, gen)


@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
def test_every_discrete_input_steps_exactly_as_the_reference(task, replay_draws):
    # All 8^4 * 2^3 agent/key/carrying/door/c1 inputs under all 4 actions: every row of the
    # transition tables, against the per-episode reference step with the same draws.
    g, two = torch.arange(8), torch.arange(2)
    grid = torch.cartesian_prod(g, g, g, g, two, two, two, torch.arange(4))
    n = grid.shape[0]
    gen = torch.Generator().manual_seed(21)
    extra = torch.randint(0, 8, (n, 5), generator=gen)
    extra[:, 0] %= 2
    cols = [grid[:, :4] / CELL_SCALE, grid[:, 4:7].float(), extra[:, :1].float()]
    state = torch.cat([*cols, extra[:, 1:] / CELL_SCALE], dim=1).float()
    action = grid[:, 7]
    moves, d2_cells = replay_draws(gen, n)
    nxt, reward, done, info = step(state, action, gen, task)
    rows = state.tolist()
    refs = [
        ref_step(ref_decode(rows[i]), int(action[i]), moves[i], d2_cells[i], task)
        for i in range(n)
    ]
    assert torch.equal(nxt, torch.tensor([ref_encode(r[0]) for r in refs]))
    assert reward.tolist() == [r[1] for r in refs]
    assert done.tolist() == [r[2] for r in refs]
    for key, flags in info.items():
        assert flags.tolist() == [r[3][key] for r in refs], key


def test_a_float64_state_is_stepped_in_float64(make_state, gen):
    state = make_state(agent=(2, 3), key=(2, 4), d1=(3, 3), rows=50)
    nxt64, reward, done, info = step(state.double(), torch.full((50,), UP), gen)
    assert nxt64.dtype == torch.float64 and reward.dtype == torch.float32
    assert cells(nxt64, AGENT_X, AGENT_Y)[0] == (2, 4) and info["pickup"].all()
    assert nxt64[0, AGENT_Y].item() == 4 / 7 and nxt64[0, KEY_Y].item() == 4 / 7
    assert set(nxt64[:, D2_X].tolist()) <= {c / 7 for c in range(8)}


def test_strided_and_empty_batches_step_like_contiguous_ones(gen):
    state = reset(40, torch.Generator().manual_seed(4))
    action = torch.randint(0, 4, (40,), generator=torch.Generator().manual_seed(5))
    strided = state.T.contiguous().T
    assert not strided.is_contiguous()
    want = step(state, action, torch.Generator().manual_seed(6))
    got = step(strided, action, torch.Generator().manual_seed(6))
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    empty = step(state[:0], action[:0], gen)
    assert empty[0].shape == (0, 12) and empty[2].shape == (0,)
