"""Every planner of ``gridplan.planning.planners`` on MiniGrid DoorKey's seven actions
(``gridplan.core.doorkey_task``): closed-loop success with the oracle and exact V*, actions in
range, MCTS's choice optimal under Q* at hand-built states and equal, bit for bit, to the
one-lane reference's, the no-heuristic search's known depth-limited return, and the ladder's
planners and refusal on DoorKey."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import doorkey_task, dynamics, tasks
from gridplan.core.doorkey_constants import FORWARD, PICKUP, RIGHT, STATE_DIM, TOGGLE
from gridplan.evaluation.ladder import evaluate
from gridplan.evaluation.planner_choice import fit_learned_value
from gridplan.metrics.relevance_estimation import FVIConfig, one_step_backup_inputs
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import run_episodes, start_states
from gridplan.planning.learned_value import LearnedValue, ZeroValue
from gridplan.planning.mcts import TreeSearchPlanner, lane_schedule
from gridplan.planning.planners import make_planner
from gridplan.planning.reference import ref_tree_search

TASK = tasks.get("A", world="minigrid-doorkey-6x6")
#: Small settings: MCTS at 64 simulations per decision, the sampling planners' defaults.
SMALL = {"mcts": {"budget": 64}}
DEPTH = 2


def _exact_as_learned() -> LearnedValue:
    """The exact V* handed to the learned-value search as if it were learned."""
    return LearnedValue(dynamics.value_table(TASK).lookup, TASK)


def _planner(name: str, model=None):
    model = OracleModel(world=TASK.world) if model is None else model
    return make_planner(name, model, TASK, DEPTH, SMALL.get(name), _exact_as_learned())


def _states(rows: list[list[int]]) -> torch.Tensor:
    """Float states of MiniGrid rows ``agent_x, agent_y, heading, key_x, key_y, carrying,
    door, wall_x, door_y`` (step 0) on the 6x6 grid."""
    cells = torch.zeros(len(rows), STATE_DIM, dtype=torch.long)
    cells[:, :9] = torch.tensor(rows)
    return doorkey_task.encode(cells, None, TASK.world)


#: Layout: wall column x = 2 with its door at y = 2; goal (4, 4). Headings: 0 east,
#: 1 south, 2 west, 3 north; door 0 open, 2 locked. Each state's one optimal action.
HAND_BUILT = {
    PICKUP: [1, 1, 1, 1, 2, 0, 2, 2, 2],  # facing the key
    TOGGLE: [1, 2, 0, 1, 2, 1, 2, 2, 2],  # carrying the key, facing the locked door
    RIGHT: [1, 2, 3, 1, 2, 1, 2, 2, 2],  # carrying the key, the door to the right
    FORWARD: [4, 3, 1, 4, 3, 1, 0, 2, 2],  # facing the goal, the door open
}


@pytest.mark.parametrize("name", ["search", "search-learned-v", "cem", "mppi", "mcts"])
def test_oracle_with_exact_value_succeeds_on_doorkey(name):
    # 4 episodes of DoorKey 6x6, the oracle model and V* at the end of every imagined rollout
    # (the learned-value search gets V* itself as its "learned" value): all succeed.
    out = run_episodes(
        OracleModel(world=TASK.world), TASK, DEPTH, seeds=(0,), episodes=4, record=True,
        planner_factory=lambda model: _planner(name, model),
    )
    assert out.success.all()
    # Executed actions, -1 after termination: every one in 0..6.
    chosen = out.actions[out.actions >= 0]
    assert int(out.actions.min()) >= -1 and int(chosen.max()) <= 6


@pytest.mark.parametrize("parallel", [1, 256])
def test_mcts_picks_a_q_optimal_action_at_hand_built_states(parallel):
    roots = _states(list(HAND_BUILT.values()))
    q = dynamics.value_table(TASK).q_values(roots)
    # The hand-built states have the one optimal action named, TOGGLE (5) among them.
    assert torch.equal(q.argmax(dim=1), torch.tensor(list(HAND_BUILT)))
    planner = make_planner(
        "mcts", OracleModel(world=TASK.world), TASK, DEPTH, {"budget": 64, "parallel": parallel}
    )
    action = planner.act(roots, torch.Generator().manual_seed(0))
    chosen = q.gather(1, action.unsqueeze(1)).squeeze(1)
    assert torch.equal(chosen, q.amax(dim=1))
    # The root's 7 children enter with one visit each; the other 63 simulations pass them.
    visits, _ = planner.search(roots, torch.Generator().manual_seed(0))
    assert visits.shape == (4, 7) and torch.equal(visits.sum(dim=1), torch.full((4,), 70.0))


def _one_row(fn):
    """``fn`` of one state vector through the batched task functions (one row)."""
    return lambda vector: fn(torch.tensor([vector]))


@pytest.mark.parametrize(
    ("value", "budget", "parallel", "exploration"),
    [("exact", 40, 1, 1.0), ("exact", 60, 8, 1.0), ("exact", 90, 40, 0.7), ("none", 50, 24, 1.5)],
)
def test_batched_tree_search_equals_the_reference_on_doorkey(value, budget, parallel, exploration):
    # The reference's tree bookkeeping over 7 actions (selection, virtual visits, backups) on
    # the same predictions, rewards and values; 40 and 24 lanes split by water-filling.
    oracle = OracleModel(world=TASK.world)
    values = dynamics.value_table(TASK) if value == "exact" else ZeroValue(TASK)
    roots = torch.cat([start_states((2,), 3, TASK), _states(list(HAND_BUILT.values()))])
    planner = TreeSearchPlanner(oracle, TASK, values, budget, exploration, parallel)
    visits, q = planner.tree(roots, torch.Generator().manual_seed(0))
    actions = planner.choose(visits, q)

    def predict(vector, action):
        one = oracle.predict(torch.tensor([vector]), torch.tensor([action]), torch.Generator())
        return one[0].tolist()

    def outcome(state):
        reward, goal, hazard = dynamics.outcome(TASK, state)
        return float(reward[0]), bool(goal[0] | hazard[0])

    for i in range(roots.shape[0]):
        want_n, want_q, want_a = ref_tree_search(
            roots[i].tolist(), TASK, predict, budget, exploration, parallel,
            _one_row(lambda s: float(values.lookup(s)[0])), _one_row(outcome),
        )
        assert visits[i].tolist() == want_n
        assert q[i].tolist() == want_q
        assert int(actions[i]) == want_a


@pytest.mark.parametrize("name", ["search-learned-v", "search-no-heuristic", "cem", "mppi", "mcts"])
def test_plans_hold_doorkey_actions(name):
    roots = torch.cat([start_states((1,), 4, TASK), _states(list(HAND_BUILT.values()))])
    plan = _planner(name).plan(roots, torch.Generator().manual_seed(3))
    assert torch.equal(plan.sequence[:, 0], plan.action)
    assert int(plan.sequence.min()) >= 0 and int(plan.sequence.max()) <= 6


def test_no_heuristic_search_is_the_depth_limited_return():
    # Facing the goal, the best depth-2 return is the goal's reward now (1); from the start
    # states no goal lies within 2 steps, so every return is 0.
    roots = torch.cat([_states([HAND_BUILT[FORWARD]]), start_states((0,), 3, TASK)])
    plan = _planner("search-no-heuristic").plan(roots, torch.Generator().manual_seed(0))
    assert plan.action[0] == FORWARD
    assert torch.equal(plan.predicted, torch.tensor([1.0, 0.0, 0.0, 0.0]))


def test_lane_schedule_grows_by_the_action_count():
    assert lane_schedule(256, 256, 7) == [1, 7, 49, 199]
    assert lane_schedule(256, 16, 7) == [1, 7] + [16] * 8 + [15] * 8


@pytest.mark.parametrize("name", ["cem", "mcts"])
def test_ladder_measures_success_with_the_planner(name):
    report = evaluate(
        OracleModel(world=TASK.world), world=TASK.world.name, depth=DEPTH, seeds=(0,),
        episodes=2, levels=["success"], planner={"name": name, "settings": SMALL.get(name, {})},
    )
    assert report.planner["name"] == name
    assert report.closed_loop["episodes"] == 2


def test_fitted_value_iteration_backs_up_over_all_seven_actions():
    # The only way to the goal passes a toggle (action 5) and a pickup (3): a fit over the
    # paper's four actions would never see the door open.
    model = OracleModel(world=TASK.world)
    config = FVIConfig(iterations=2, epochs=1, hidden=(16,))
    value = fit_learned_value(model, start_states((0,), 16, TASK), TASK, config)
    assert value.task == TASK
    nxt, _, terminal = one_step_backup_inputs(model, start_states((0,), 4, TASK), TASK)
    assert nxt.shape == (4, 7, TASK.world.state_dim) and terminal.shape == (4, 7)
