"""Exact V* on hand-counted cells and the relevance weights (paper §3 Eq. 1, appendix C).

With arriving rewards, a state ``n`` optimal steps from the goal has ``V* = gamma^(n-1)``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gridplan.core.constants import RIGHT, UP
from gridplan.core.relevance import binary_weights, relevance_weights
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.values import ValueTable, value_table

GAMMA = TASK_A.gamma


@pytest.fixture(scope="module")
def table_a() -> ValueTable:
    return value_table(TASK_A)


@pytest.fixture(scope="module")
def table_b() -> ValueTable:
    return value_table(TASK_B)


def value(table: ValueTable, state: torch.Tensor) -> float:
    return table(state).item()


@pytest.mark.parametrize(
    ("kwargs", "steps"),
    [
        # One step into the goal, from the west and from below.
        ({"agent": (6, 4), "carrying": True, "door_open": True}, 1),
        ({"agent": (7, 3), "carrying": True, "door_open": True}, 1),
        # Door cell -> (6, 4) -> goal.
        ({"agent": (5, 4), "carrying": True, "door_open": True}, 2),
        # Bump the door, enter it, (6, 4), goal.
        ({"agent": (4, 4), "carrying": True}, 4),
        # 4 + 4 steps to (4, 4), then door, (6, 4), goal.
        ({"agent": (0, 0), "carrying": True, "door_open": True}, 11),
        # Left onto the key, back to (4, 4) in 2, bump, door, (6, 4), goal.
        ({"agent": (3, 4), "key": (2, 4)}, 7),
        # Key in the far corner: 7 steps to it, 7 back to (4, 4), then 4.
        ({"agent": (4, 4), "key": (0, 7)}, 18),
    ],
)
def test_task_a_value_is_gamma_to_the_number_of_steps_minus_one(table_a, make_state, kwargs, steps):
    assert value(table_a, make_state(**kwargs)) == pytest.approx(GAMMA ** (steps - 1), rel=1e-6)


def test_values_fall_by_gamma_per_step_along_the_optimal_path(table_a, make_state):
    path = [make_state(agent=(3, 4), key=(2, 4))]
    for agent, carrying, door in [
        ((2, 4), True, False),
        ((3, 4), True, False),
        ((4, 4), True, False),
        ((4, 4), True, True),
        ((5, 4), True, True),
        ((6, 4), True, True),
    ]:
        path.append(make_state(agent=agent, carrying=carrying, door_open=door))
    values = table_a(torch.cat(path))
    assert values[-1].item() == pytest.approx(1.0)
    torch.testing.assert_close(values[1:] * GAMMA, values[:-1], rtol=1e-6, atol=0.0)


def test_terminal_states_are_worth_zero(table_a, table_b, make_state):
    assert value(table_a, make_state(agent=(7, 4), carrying=True, door_open=True)) == 0.0
    for c1, cell in [(False, (7, 2)), (False, (7, 5)), (True, (7, 5)), (True, (7, 2))]:
        state = make_state(agent=cell, carrying=True, door_open=True, c1=c1)
        assert value(table_b, state) == 0.0


def test_task_b_goal_depends_on_c1_and_the_hazard_is_walked_around(table_b, make_state):
    # c1 true: the goal (7, 5) is one step right.
    assert value(table_b, make_state(agent=(6, 5), carrying=True, door_open=True, c1=True)) == 1.0
    # c1 false: the hazard is to the right; (6,4), (6,3), (6,2), (7,2) is 4 steps.
    far = make_state(agent=(6, 5), carrying=True, door_open=True, c1=False)
    assert value(table_b, far) == pytest.approx(GAMMA**3, rel=1e-6)
    q = table_b.q_values(far)[0]
    assert q[RIGHT].item() == -1.0
    # (7, 4) is no goal in Task B: two steps down to (7, 2).
    mid = make_state(agent=(7, 4), carrying=True, door_open=True, c1=False)
    assert value(table_b, mid) == pytest.approx(GAMMA, rel=1e-6)


def test_q_values_are_reward_plus_discounted_value_of_each_successor(table_a, make_state):
    q = table_a.q_values(make_state(agent=(6, 4), carrying=True, door_open=True))[0]
    # right: goal (+1, terminal); up/down: (6,5)/(6,3) are 2 from goal; left: door, 2 from goal.
    expected = torch.tensor([GAMMA * GAMMA, GAMMA * GAMMA, GAMMA * GAMMA, 1.0])
    torch.testing.assert_close(q, expected)
    assert q.argmax().item() == RIGHT
    assert q[UP].item() < q[RIGHT].item()


def test_lookup_rounds_positions_clamps_to_the_grid_and_thresholds_flags(table_a, make_state):
    # From (4, 4) carrying with the door open: door, (6, 4), goal = 3 steps.
    noisy = make_state(agent=(4, 4), carrying=True, door_open=True)
    noisy[0, 0] += 0.06  # 4.42 cells -> 4
    noisy[0, 1] -= 0.06  # 3.58 cells -> 4
    noisy[0, 4] = 0.51
    noisy[0, 5] = 0.9
    assert value(table_a, noisy) == pytest.approx(GAMMA**2, rel=1e-6)
    noisy[0, 5] = 0.49  # the door reads closed: one more step to bump it open
    assert value(table_a, noisy) == pytest.approx(GAMMA**3, rel=1e-6)
    # (1.4, -0.3) clamps to (7, 0): four steps up to the goal.
    outside = make_state(agent=(7, 0), carrying=True, door_open=True)
    outside[0, 0], outside[0, 1] = 1.4, -0.3
    assert value(table_a, outside) == pytest.approx(GAMMA**3, rel=1e-6)


def test_value_ignores_irrelevant_dimensions(table_a, table_b, make_state):
    base = {"agent": (2, 2), "key": (1, 6)}
    ref_a = value(table_a, make_state(**base))
    ref_b = value(table_b, make_state(**base))
    for other in [{"c2": True, "d1": (7, 7), "d2": (5, 4)}, {"d1": (3, 3), "d2": (0, 7)}]:
        assert value(table_a, make_state(**base, **other)) == ref_a
        assert value(table_b, make_state(**base, **other)) == ref_b
    assert value(table_a, make_state(**base, c1=True)) == ref_a


@pytest.mark.parametrize(("task", "n_relevant"), [(TASK_A, 6), (TASK_B, 7)], ids=["A", "B"])
def test_graded_weights_are_zero_exactly_on_irrelevant_dims_and_sum_to_one(task, n_relevant):
    w = relevance_weights(task)
    assert w.shape == (12,)
    assert (w[:n_relevant] > 0).all()
    assert (w[n_relevant:] == 0).all()
    assert w.sum().item() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(("task", "n_relevant"), [(TASK_A, 6), (TASK_B, 7)], ids=["A", "B"])
def test_binary_weights_are_one_over_the_relevant_count(task, n_relevant):
    expected = torch.zeros(12)
    expected[:n_relevant] = 1.0 / n_relevant
    torch.testing.assert_close(binary_weights(task), expected)


def test_task_a_graded_weights_keep_their_known_values():
    # The saliency of the exact V* on the optimal policy's states (Eq. 1), dims 0-5.
    known = [0.273997038602829, 0.11945994943380356, 0.10967124998569489,
             0.04919234663248062, 0.2063969075679779, 0.24128249287605286]
    w = relevance_weights(TASK_A)
    assert w[:6].tolist() == known
    assert (w[6:] == 0).all()


def test_the_cached_table_is_built_once_per_device_and_cannot_be_changed_by_callers(make_state):
    table = value_table(TASK_A)
    assert value_table(TASK_A, "cpu") is table
    state = make_state(agent=(6, 4), carrying=True, door_open=True)
    copy = table.table
    copy.fill_(-5.0)
    relevance_weights(TASK_A).fill_(3.0)
    assert table(state).item() == 1.0
    assert table.table.max().item() == 1.0
    assert relevance_weights(TASK_A).sum().item() == pytest.approx(1.0, abs=1e-6)


def test_the_discount_comes_from_the_task(make_state):
    slow = dataclasses.replace(TASK_A, gamma=0.5)
    state = make_state(agent=(5, 4), carrying=True, door_open=True)
    assert value_table(slow)(state).item() == 0.5
    assert value_table(TASK_A)(state).item() == pytest.approx(GAMMA, rel=1e-6)


def test_value_table_rejects_bad_input(make_state):
    with pytest.raises(TypeError, match="got str 'C'"):
        ValueTable("C")
    bad = make_state()
    bad[0, 3] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        value_table(TASK_A)(bad)
    with pytest.raises(ValueError, match="shape"):
        value_table(TASK_A)(torch.zeros(3, 10))
    with pytest.raises(TypeError, match="must be a gridplan.core.tasks.Task"):
        relevance_weights("A")
