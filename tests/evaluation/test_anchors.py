"""Anchor policies: the lookup tables match the environment, the heuristic-free lookahead equals
a brute-force search, greedy earns V*, and the runs share their random choices."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import dynamics, tasks
from gridplan.core.constants import RIGHT
from gridplan.core.doorkey_task import F_CARRYING
from gridplan.core.env import step
from gridplan.core.values import value_table
from gridplan.evaluation.anchors import (
    ANCHOR_NAMES,
    ANCHORS,
    AnchorSet,
    discrete_dynamics,
    finite_horizon_values,
    get_anchors,
)
from gridplan.evaluation.outcome import run_anchor_policies
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import start_states
from gridplan.planning.planner import action_sequences

TASK_A = tasks.get("A")
TASK_B = tasks.get("B")


def _generators(seed: int = 0) -> tuple[torch.Generator, torch.Generator]:
    """The model's and the environment's generators of an anchor run."""
    return torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 1)


def test_the_anchor_set_spans_at_least_eight_distinct_policies():
    assert len(ANCHORS) >= 8
    assert len(set(ANCHOR_NAMES)) == len(ANCHOR_NAMES)
    with pytest.raises(ValueError, match="unknown anchor"):
        get_anchors(("greedy", "clairvoyant"))


@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
def test_tables_step_like_the_environment(task, random_states, gen):
    states = random_states(256, gen)
    if task.reads_c1:
        states[:, 6] = (torch.rand(256, generator=gen) > 0.5).float()
    dyn = discrete_dynamics(task)
    idx = dyn.index(states)
    for a in range(4):
        action = torch.full((256,), a)
        nxt, reward, done, _ = step(states, action, gen, task)
        assert torch.equal(dyn.next_index[a, idx], dyn.index(nxt))
        assert torch.equal(dyn.reward[a, idx], reward)
        assert torch.equal(dyn.terminal[dyn.index(nxt)], done)


def test_lookahead_values_equal_a_brute_force_search(random_states, gen):
    depth = 3
    states = random_states(64, gen)
    dyn = discrete_dynamics(TASK_A)
    v = finite_horizon_values(dyn, depth - 1)
    idx = dyn.index(states)
    q_table = dyn.reward[:, idx] + TASK_A.gamma * v[dyn.next_index[:, idx]]
    # Every 4^3 sequence through the true environment, sparse reward only, terminal at the goal.
    seqs = action_sequences(depth)
    rows = states.repeat_interleave(len(seqs), dim=0)
    ret = torch.zeros(rows.shape[0])
    alive = torch.ones(rows.shape[0], dtype=torch.bool)
    for t in range(depth):
        rows, reward, done, _ = step(rows, seqs[:, t].repeat(64), gen, TASK_A)
        ret += TASK_A.gamma**t * reward * alive
        alive &= ~done
    brute = ret.view(64, 4, -1).amax(dim=2)
    torch.testing.assert_close(q_table.T, brute)


def test_many_lookahead_steps_converge_to_v_star():
    dyn = discrete_dynamics(TASK_A)
    torch.testing.assert_close(
        finite_horizon_values(dyn, 200), value_table(TASK_A).table, atol=1e-5, rtol=0
    )


def test_greedy_earns_v_star_from_every_start():
    anchors = AnchorSet(get_anchors(("greedy",)), TASK_A)
    starts = start_states([3], 64, TASK_A)
    runs = run_anchor_policies(None, anchors, starts, 2, TASK_A, 0, *_generators())
    v = value_table(TASK_A).lookup(starts)
    torch.testing.assert_close(runs.true_return[0, :, 0], v)
    assert runs.true_success.all()


def test_key_ignoring_policy_is_stuck_at_the_closed_door_unless_the_key_is_on_its_way(make_state):
    anchors = AnchorSet(get_anchors(("key_ignoring",)), TASK_A)
    blocked = make_state(agent=(1, 4), key=(3, 1))
    on_path = make_state(agent=(1, 4), key=(3, 4))
    runs = run_anchor_policies(
        None, anchors, torch.cat([blocked, on_path]), 1, TASK_A, 0, *_generators()
    )
    assert runs.true_success[0, :, 0].tolist() == [False, True]
    # On the key's row it walks straight right: the key on move 2, the door opens on move 4
    # (the agent stays), the goal on move 7: return gamma^6.
    assert float(runs.true_return[0, 1, 0]) == pytest.approx(TASK_A.gamma**6)


def test_greedy_moves_right_next_to_the_goal(make_state):
    anchors = AnchorSet(get_anchors(("greedy", "eps_greedy_0.1")), TASK_A)
    state = make_state(agent=(6, 4), carrying=True, door_open=True, rows=2)
    action = anchors.act(state, torch.tensor([0, 0]), torch.Generator())
    assert action.tolist() == [RIGHT, RIGHT]


def test_true_and_imagined_runs_share_random_choices_under_the_oracle():
    anchors = AnchorSet(ANCHORS, TASK_A)
    starts = start_states([5], 16, TASK_A)
    runs = run_anchor_policies(OracleModel(), anchors, starts, 3, TASK_A, 7, *_generators(1))
    assert torch.equal(runs.true_return, runs.model_return)
    assert torch.equal(runs.true_success, runs.model_success)
    again = run_anchor_policies(None, anchors, starts, 3, TASK_A, 7, *_generators())
    assert torch.equal(again.true_return, runs.true_return)


def test_anchor_values_span_weak_to_strong():
    anchors = AnchorSet(ANCHORS, TASK_A)
    starts = start_states([0], 64, TASK_A)
    runs = run_anchor_policies(None, anchors, starts, 4, TASK_A, 0, *_generators())
    j = dict(zip(anchors.names, runs.true_return.mean(dim=(1, 2)).tolist(), strict=True))
    assert j["uniform_random"] < 0.05 and j["greedy"] > 0.5
    assert j["eps_greedy_0.75"] < j["eps_greedy_0.5"] < j["eps_greedy_0.25"] < j["greedy"]
    assert j["lookahead_4"] < j["lookahead_8"] < j["lookahead_12"] <= j["greedy"]


# --- MiniGrid DoorKey: the same anchors through its value tables and its seven actions

DK6 = tasks.get("A", world="minigrid-doorkey-6x6-t2")


def test_doorkey_greedy_earns_v_star_from_every_start():
    anchors = AnchorSet(get_anchors(("greedy",)), DK6)
    starts = start_states([3], 32, DK6)
    runs = run_anchor_policies(None, anchors, starts, 2, DK6, 0, *_generators())
    v = dynamics.value_table(DK6).lookup(starts)
    torch.testing.assert_close(runs.true_return[0, :, 0], v)
    torch.testing.assert_close(runs.true_return[0, :, 1], v)
    assert runs.true_success.all()


def test_doorkey_key_ignoring_policy_never_opens_the_locked_door():
    anchors = AnchorSet(get_anchors(("key_ignoring", "greedy")), DK6)
    starts = start_states([4], 16, DK6)
    runs = run_anchor_policies(None, anchors, starts, 1, DK6, 0, *_generators(), horizon=60)
    # It reads every state as carrying the key, so it never picks it up.
    assert not runs.true_success[0].any() and runs.true_success[1].all()
    # Carrying the key already, it is the greedy policy.
    carried = starts.clone()
    carried[:, F_CARRYING] = 1.0
    draws = anchors.draw(16, torch.Generator().manual_seed(2))
    for which in (0, 1):
        rows = torch.full((16,), which)
        greedy = AnchorSet(get_anchors(("greedy",)), DK6).act(carried, rows * 0, draws)
        assert torch.equal(anchors.act(carried, rows, draws), greedy)


def test_doorkey_lookahead_values_equal_a_brute_force_search():
    depth, gen = 3, torch.Generator().manual_seed(0)
    # States of greedy episodes, within reach of the depth-3 search and beyond it.
    states, trail = start_states([1], 4, DK6), []
    greedy = AnchorSet(get_anchors(("greedy",)), DK6)
    for _ in range(20):
        trail.append(states)
        action = greedy.act(states, torch.zeros(4, dtype=torch.long), gen)
        states = dynamics.transition(DK6, states, action, gen)[0]
    trail = torch.cat(trail)
    v, reach = dynamics.value_table(DK6).lookup(trail), DK6.gamma**depth
    states = torch.cat([trail[v >= reach][:6], trail[(v > 0) & (v < reach)][:4]])
    n = states.shape[0]
    q_table = DK6.value_table(steps=depth - 1).q_values(states)
    seqs = torch.cartesian_prod(*[torch.arange(7)] * depth)
    rows = states.repeat_interleave(len(seqs), dim=0)
    ret = torch.zeros(rows.shape[0])
    alive = torch.ones(rows.shape[0], dtype=torch.bool)
    for t in range(depth):
        rows, reward, done, _ = dynamics.transition(DK6, rows, seqs[:, t].repeat(n), gen)
        ret += DK6.gamma**t * reward * alive
        alive &= ~done
    brute = ret.view(n, 7, -1).amax(dim=2)
    torch.testing.assert_close(q_table, brute)
    assert (brute > 0).any()


def test_doorkey_true_and_imagined_runs_agree_under_the_oracle():
    anchors = AnchorSet(ANCHORS, DK6)
    starts = start_states([5], 4, DK6)
    oracle = OracleModel(world=DK6.world)
    runs = run_anchor_policies(oracle, anchors, starts, 2, DK6, 7, *_generators(1))
    assert torch.equal(runs.true_return, runs.model_return)
    assert torch.equal(runs.true_success, runs.model_success)
    j = dict(zip(anchors.names, runs.true_return.mean(dim=(1, 2)).tolist(), strict=True))
    assert j["key_ignoring"] == 0.0 and j["greedy"] > j["eps_greedy_0.5"] > 0


def test_doorkey_uniform_random_takes_its_drawn_actions_over_seven():
    anchors = AnchorSet(get_anchors(("uniform_random",)), DK6)
    starts = start_states([6], 64, DK6)
    draws = anchors.draw(64, torch.Generator().manual_seed(3))
    assert draws.tie.shape == (64, 7) and set(draws.random_action.tolist()) == set(range(7))
    action = anchors.act(starts, torch.zeros(64, dtype=torch.long), draws)
    assert torch.equal(action, draws.random_action)
    assert DK6.value_table().q_values(starts[:0]).shape == (0, 7)
