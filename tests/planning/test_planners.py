"""Planners by name (``gridplan.planning.planners``): known answers with the oracle and exact
V*, invariance under irrelevant noise, the learned-value search, and errors on bad input."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import world as worlds
from gridplan.core.tasks import TASK_A, TASK_B, task_a
from gridplan.core.values import value_table
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import run_closed_loop, start_states
from gridplan.planning.learned_value import LearnedValue, ZeroValue
from gridplan.planning.planner import Planner
from gridplan.planning.planners import PLANNERS, make_planner, planner_settings
from gridplan.planning.sequences import sequence_returns
from gridplan.planning.value_search import ValueSearchPlanner, full_width_plan

#: Small settings for the tests: MCTS at 16 simulations per decision.
SMALL = {"mcts": {"budget": 16}}


def exact_as_learned(task=TASK_A) -> LearnedValue:
    """The exact V* handed to the planners as if it were a learned value."""
    return LearnedValue(value_table(task).lookup, task)


def success(planner, seeds=(0, 1), episodes=20) -> float:
    start = start_states(seeds, episodes, planner.task)
    out = run_closed_loop(planner, start, torch.Generator().manual_seed(0))
    return float(out.success.float().mean())


@pytest.mark.parametrize("name", ["search", "search-learned-v", "cem", "mppi", "mcts"])
def test_oracle_with_exact_value_succeeds_on_task_a(name):
    # 40 episodes (2 seeds x 20) of Task A with the oracle model and V* at the end of every
    # imagined rollout (the learned-value search gets V* itself as its "learned" value):
    # measured 1.00 for each planner (MCTS at 16 simulations); the bar is 0.95.
    planner = make_planner(name, OracleModel(), TASK_A, 4, SMALL.get(name), exact_as_learned())
    assert success(planner) >= 0.95


def test_no_heuristic_search_is_the_depth_limited_return():
    # Without V* the depth-4 search sees the goal only within 4 steps: measured 0.175 success
    # on the same 40 episodes, far below the exact-V* search's 1.00.
    planner = make_planner("search-no-heuristic", OracleModel(), TASK_A, 4)
    assert success(planner) < 0.5


@pytest.mark.parametrize(
    "name", ["search", "search-learned-v", "search-no-heuristic", "cem", "mppi", "mcts"]
)
def test_irrelevant_noise_leaves_decisions_unchanged(name):
    # M(0, sigma_I) predicts the relevant dims exactly as the oracle does; every planner here
    # reads only them (reward, termination, V*), and draws its own randomness (tie-breaks,
    # candidates) before or apart from the model's noise, so under the same generator stream
    # the actions are identical, root by root.
    roots = start_states((3,), 48, TASK_A)
    noisy = NoiseModel.controlled(0.0, 0.5)
    actions = []
    for model in (OracleModel(), noisy):
        planner = make_planner(name, model, TASK_A, 3, SMALL.get(name), exact_as_learned())
        actions.append(planner.act(roots, torch.Generator().manual_seed(11)))
    assert torch.equal(actions[0], actions[1])


def test_irrelevant_noise_changes_a_value_that_reads_irrelevant_dims():
    # The invariance above is the planner's value's: a "learned" value that reads a distractor
    # dim (V* plus 0.5 * dim 6) makes the same planner's decisions depend on sigma_I.
    table = value_table(TASK_A)
    learned = LearnedValue(lambda s: table.lookup(s) + 0.5 * s[:, 6], TASK_A)
    roots = start_states((3,), 48, TASK_A)
    actions = []
    for model in (OracleModel(), NoiseModel.controlled(0.0, 0.5)):
        planner = make_planner("cem", model, TASK_A, 3, {"value": "learned"}, learned)
        actions.append(planner.act(roots, torch.Generator().manual_seed(11)))
    assert not torch.equal(actions[0], actions[1])


def test_exact_value_search_equals_the_plain_planner():
    roots = start_states((5,), 40, TASK_A)
    plain = Planner(OracleModel(), 3, TASK_A).act(roots, torch.Generator().manual_seed(2))
    valued = ValueSearchPlanner(OracleModel(), 3, TASK_A, exact_as_learned())
    assert torch.equal(plain, valued.act(roots, torch.Generator().manual_seed(2)))
    plan = full_width_plan(valued, roots, torch.Generator().manual_seed(2))
    assert torch.equal(plan.action, plain)
    assert torch.equal(plan.sequence[:, 0], plan.action)
    # The plan's predicted return is the model's return of its sequence.
    again = sequence_returns(
        OracleModel(),
        TASK_A,
        roots,
        plan.sequence[:, None],
        value_table(TASK_A),
        torch.Generator().manual_seed(0),
    )[:, 0]
    torch.testing.assert_close(plan.predicted, again)


def test_sequence_returns_known_answer():
    # Bellman: the best 2-step return with V* at the end, over all 16 sequences, is V*(root);
    # with no terminal value it is 0 from start states (no goal within 2 steps of them).
    table = value_table(TASK_A)
    roots = start_states((0,), 8, TASK_A)
    every = torch.cartesian_prod(torch.arange(4), torch.arange(4)).expand(8, 16, 2)
    gen = torch.Generator().manual_seed(0)
    with_v = sequence_returns(OracleModel(), TASK_A, roots, every, table, gen)
    torch.testing.assert_close(with_v.amax(dim=1), table.lookup(roots))
    bare = sequence_returns(OracleModel(), TASK_A, roots, every, ZeroValue(TASK_A), gen)
    assert torch.equal(bare, torch.zeros(8, 16))
    with pytest.raises(ValueError, match="actions must lie in 0..3"):
        sequence_returns(OracleModel(), TASK_A, roots, every + 4, table, gen)


def test_sampling_planner_is_reproducible_and_batched():
    roots = start_states((1,), 16, TASK_A)
    planner = make_planner("mppi", OracleModel(), TASK_A, 3)
    a = planner.act(roots, torch.Generator().manual_seed(4))
    b = planner.act(roots, torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    # Batched over roots: the planner's decisions do not hinge on one root; each root's
    # action is optimal under Q* for almost all roots.
    q = value_table(TASK_A).q_values(roots)
    chosen = q.gather(1, a[:, None])[:, 0]
    assert float((chosen >= q.amax(1) - 1e-6).float().mean()) >= 0.9


def test_unknown_planner_and_bad_settings():
    with pytest.raises(ValueError, match="unknown planner 'alphazero'; choose one of search"):
        make_planner("alphazero", OracleModel(), TASK_A, 4)
    with pytest.raises(ValueError, match="budget must be >= 1"):
        planner_settings("mcts", 4, {"budget": 0})
    with pytest.raises(ValueError, match="exploration must be finite and > 0"):
        planner_settings("mcts", 4, {"exploration": "inf"})
    with pytest.raises(ValueError, match="has no setting depth"):
        planner_settings("cem", 4, {"depth": 3})
    with pytest.raises(ValueError, match="elites .9. must not exceed candidates .8."):
        planner_settings("cem", 4, {"candidates": 8, "elites": 9})
    with pytest.raises(ValueError, match="horizon must be >= 1"):
        planner_settings("mppi", 4, {"horizon": 0})
    with pytest.raises(ValueError, match="temperature must be finite and > 0"):
        planner_settings("mppi", 4, {"temperature": "-1"})
    with pytest.raises(ValueError, match="candidates must be an integer"):
        planner_settings("cem", 4, {"candidates": "many"})
    with pytest.raises(ValueError, match="value must be one of exact, learned, none"):
        planner_settings("cem", 4, {"value": "V*"})
    with pytest.raises(ValueError, match="has no setting horizon .settings: none"):
        planner_settings("search", 4, {"horizon": 3})
    assert planner_settings("cem", 3, {"elites": "4"}) == {
        "horizon": 3,
        "candidates": 64,
        "elites": 4,
        "iterations": 4,
        "value": "exact",
    }
    assert set(PLANNERS) == {
        "search",
        "search-learned-v",
        "search-no-heuristic",
        "cem",
        "mppi",
        "mcts",
    }


def test_learned_value_for_another_task_or_world_is_refused():
    with pytest.raises(ValueError, match="needs a fitted value function"):
        make_planner("search-learned-v", OracleModel(), TASK_A, 3)
    with pytest.raises(ValueError, match="fitted for task 'B'; this planner plans task 'A'"):
        make_planner("search-learned-v", OracleModel(), TASK_A, 3, learned=exact_as_learned(TASK_B))
    big = task_a(worlds.grid(10, 2))
    other = LearnedValue(value_table(big).lookup, big)
    with pytest.raises(ValueError, match="fitted for world 'g10-k2'; this planner plans in world"):
        make_planner("cem", OracleModel(), TASK_A, 3, {"value": "learned"}, other)


def test_tree_search_one_simulation_is_the_one_step_lookahead():
    # One simulation expands the root's 4 children, each valued r + gamma V*: exactly Q*.
    from gridplan.planning.mcts import TreeSearchPlanner

    roots = start_states((4,), 16, TASK_A)
    planner = TreeSearchPlanner(OracleModel(), TASK_A, value_table(TASK_A), budget=1)
    visits, q = planner.search(roots, torch.Generator().manual_seed(0))
    torch.testing.assert_close(q, value_table(TASK_A).q_values(roots))
    assert torch.equal(visits, torch.ones(16, 4))
    with pytest.raises(ValueError, match="budget must be an integer >= 1"):
        TreeSearchPlanner(OracleModel(), TASK_A, value_table(TASK_A), budget=0)
