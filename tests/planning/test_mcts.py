"""The batched tree search (``gridplan.planning.mcts``) against the one-lane-at-a-time
reference (``gridplan.planning.reference.ref_tree_search``), its lane schedule, a
hand-worked tree, and its prediction count."""

from __future__ import annotations

import pytest
import torch

from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.core.values import value_table
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import start_states
from gridplan.planning.learned_value import ZeroValue
from gridplan.planning.mcts import TreeSearchPlanner, lane_schedule, splits
from gridplan.planning.planners import make_planner, planner_settings
from gridplan.planning.reference import RefState, ref_encode, ref_oracle_predict, ref_tree_search


def _roots(task, seed: int, n: int) -> torch.Tensor:
    """Start states and, for variety, states a few random steps into their episodes."""
    from gridplan.core.env import step

    roots = start_states((seed,), n, task)
    g = torch.Generator().manual_seed(seed)
    later = roots
    for _ in range(6):
        later = step(later, torch.randint(0, 4, (n,), generator=g), g, task)[0]
    return torch.cat([roots, later])


@pytest.mark.parametrize(
    ("task", "value", "budget", "parallel", "exploration", "seed"),
    [
        (TASK_A, "exact", 24, 1, 1.0, 0),
        (TASK_A, "exact", 40, 4, 1.0, 1),
        (TASK_A, "exact", 40, 16, 0.5, 2),
        (TASK_A, "none", 30, 3, 1.0, 3),
        (TASK_A, "none", 48, 8, 2.0, 4),
        (TASK_B, "exact", 40, 8, 1.0, 5),
        (TASK_B, "none", 33, 5, 1.5, 6),
    ],
)
def test_batched_tree_search_equals_the_reference_bit_for_bit(
    task, value, budget, parallel, exploration, seed
):
    roots = _roots(task, seed, 6)
    values = value_table(task) if value == "exact" else ZeroValue(task)
    planner = TreeSearchPlanner(OracleModel(), task, values, budget, exploration, parallel)
    visits, q = planner.tree(roots, torch.Generator().manual_seed(seed))
    actions = planner.choose(visits, q)
    value_fn = None if value == "exact" else (lambda vector: 0.0)
    for i in range(roots.shape[0]):
        want_n, want_q, want_a = ref_tree_search(
            roots[i].tolist(),
            task,
            lambda v, a: ref_oracle_predict(v, a, task),
            budget,
            exploration,
            parallel,
            value_fn,
        )
        assert visits[i].tolist() == want_n
        assert q[i].tolist() == want_q
        assert int(actions[i]) == want_a
    assert torch.equal(visits.sum(dim=1), torch.full((roots.shape[0],), budget + 3.0))


@pytest.mark.parametrize(("nodes", "most"), [(300, 9), (300, 40), (100, 200)])
def test_the_split_counts_the_selections_one_after_another_ties_included(nodes, most):
    # Small integers make many exact ties, within a node and across its children; the
    # nodes take from 1 to ``most`` lanes (9: in turn; 40, 200: water-filling).
    g = torch.Generator().manual_seed(most)
    q = torch.randint(0, 3, (nodes, 4), generator=g).double() / 4
    n = torch.randint(1, 5, (nodes, 4), generator=g).double()
    beta = torch.randint(1, 4, (nodes,), generator=g).double() / 2
    lanes = torch.randint(1, most + 1, (nodes,), generator=g)
    got = splits(q, n, beta, lanes, int(lanes.max())).tolist()
    for i in range(nodes):
        taken = [0] * 4
        for _ in range(int(lanes[i])):
            scores = [float(q[i, a] + beta[i] / (1 + n[i, a] + taken[a])) for a in range(4)]
            taken[scores.index(max(scores))] += 1
        assert got[i] == taken


def test_lane_schedule_grows_fourfold_then_shares_the_rest_evenly():
    assert lane_schedule(10, 4) == [1, 3, 3, 3]
    assert lane_schedule(3, 1) == [1, 1, 1]
    assert lane_schedule(256, 16) == [1, 4] + [16] * 11 + [15] * 5
    assert lane_schedule(256, 64) == [1, 4, 16, 59, 59, 59, 58]
    assert lane_schedule(256, 256) == [1, 4, 16, 64, 171]
    assert lane_schedule(7, 16) == [1, 4, 2]
    assert lane_schedule(5, 16) == [1, 4]
    assert sum(lane_schedule(1000, 7)) == 1000


def test_virtual_visits_spread_a_round_over_tied_children():
    # No reward within reach and no terminal value: every Q is 0, so only the visit counts
    # steer. The rounds take 1, 3 and 3 lanes. Round 1 expands the root; round 2 splits
    # over up, down and left (each earlier selection's virtual visit lowers its child's
    # bonus; ties go to the lowest action); round 3 selects right (1 + N + O = 2, the
    # others 3), then up and down: N = 3, 3, 2, 2.
    root = RefState(0, 0, 2, 5, False, False, False, False, 3, 3, 4, 4)
    vector = torch.tensor([ref_encode(root)])
    planner = TreeSearchPlanner(OracleModel(), TASK_A, ZeroValue(TASK_A), 7, 1.0, 4)
    visits, q = planner.tree(vector, torch.Generator().manual_seed(0))
    assert visits.tolist() == [[3.0, 3.0, 2.0, 2.0]]
    assert q.tolist() == [[0.0, 0.0, 0.0, 0.0]]
    assert planner.act(vector, torch.Generator()).tolist() == [0]


class _Counting(OracleModel):
    """The oracle, counting the rows it predicts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows = 0

    def predict(self, state, action, generator):
        self.rows += state.shape[0]
        return super().predict(state, action, generator)


@pytest.mark.parametrize("parallel", [1, 5, 16])
def test_a_decision_costs_four_predictions_per_simulation(parallel):
    model = _Counting()
    planner = TreeSearchPlanner(model, TASK_A, value_table(TASK_A), 37, 1.0, parallel)
    planner.act(start_states((0,), 3, TASK_A), torch.Generator().manual_seed(0))
    assert model.rows == 3 * planner.predictions_per_decision == 3 * 4 * 37


def test_parallel_is_a_setting_and_is_checked():
    planner = make_planner("mcts", OracleModel(), TASK_A, 4, {"parallel": "8"})
    assert (planner.parallel, planner.budget) == (8, 256)
    assert make_planner("mcts", OracleModel(), TASK_A, 4).parallel == 256
    # Narrow rounds by default where the terminal value is not exact.
    assert planner_settings("mcts", 4, {"value": "none"})["parallel"] == 16
    assert planner_settings("mcts", 4, {"value": "learned"})["parallel"] == 16
    assert planner_settings("mcts", 4, {"value": "none", "parallel": 64})["parallel"] == 64
    with pytest.raises(ValueError, match="parallel must be >= 1"):
        make_planner("mcts", OracleModel(), TASK_A, 4, {"parallel": 0})
    with pytest.raises(ValueError, match="parallel must be an integer >= 1"):
        TreeSearchPlanner(OracleModel(), TASK_A, value_table(TASK_A), parallel=0)


def test_seeded_noisy_trees_repeat_and_one_lane_is_sequential_puct():
    # A noisy model's tree is a function of the generator's seed; with one lane a round,
    # the search is sequential PUCT, which the reference checks above on the oracle.
    from gridplan.models.noise import NoiseModel

    roots = start_states((7,), 16, TASK_A)
    model = NoiseModel.controlled(0.2, 0.0)
    planner = TreeSearchPlanner(model, TASK_A, value_table(TASK_A), 32, 1.0, 4)
    a = planner.tree(roots, torch.Generator().manual_seed(3))
    b = planner.tree(roots, torch.Generator().manual_seed(3))
    c = planner.tree(roots, torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


class _ToTheGoal(OracleModel):
    """Predicts the goal state for every row: every child is terminal."""

    def __init__(self, goal: torch.Tensor) -> None:
        super().__init__()
        self.goal = goal

    def predict(self, state, action, generator):
        return self.goal.expand(state.shape[0], -1).clone()


def test_rounds_whose_every_leaf_is_terminal_equal_the_reference():
    # Rounds of 1, 4 and 4 lanes: the first expands the roots into four goals (estimate 1);
    # in the others every lane ends on a terminal child, one lane each, and backs up 0.
    root = RefState(0, 0, 2, 5, False, False, False, False, 3, 3, 4, 4)
    goal = ref_encode(root._replace(agent_x=TASK_A.goal[0], agent_y=TASK_A.goal[1]))
    roots = torch.tensor([ref_encode(root)] * 2)
    planner = TreeSearchPlanner(_ToTheGoal(torch.tensor(goal)), TASK_A, value_table(TASK_A), 9)
    visits, q = planner.tree(roots, torch.Generator().manual_seed(0))
    want_n, want_q, _ = ref_tree_search(
        ref_encode(root), TASK_A, lambda vector, action: list(goal), 9, 1.0, 256
    )
    assert visits.tolist() == [want_n] * 2 and q.tolist() == [want_q] * 2
    assert want_n == [3.0] * 4 and want_q == [1.0] * 4
