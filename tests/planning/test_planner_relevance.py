"""Planner-aware relevance (``gridplan.evaluation.planner_relevance``): Eq. 1 with the value
each planner judges states by."""

from __future__ import annotations

import torch

from gridplan.core.relevance import relevance_weights
from gridplan.core.tasks import TASK_A
from gridplan.core.values import value_table
from gridplan.evaluation.planner_choice import PlannerChoice
from gridplan.evaluation.planner_relevance import (
    planner_drpe,
    planner_value,
    planner_weights,
    saliency_states,
)
from gridplan.evaluation.spec import PlannerSpec
from gridplan.metrics.prediction import drpe
from gridplan.planning.learned_value import LearnedValue


def test_exact_value_planners_get_the_graded_weights():
    graded = relevance_weights(TASK_A)
    for name in ("search", "mppi"):
        choice = PlannerChoice.of(PlannerSpec(name), 4)
        assert torch.equal(planner_weights(choice, TASK_A, 4), graded)


def test_the_depth_limited_value_is_vstar_near_the_goal_and_zero_far_from_it():
    # V_2(s) = V*(s) where the goal is within 2 steps of s (the discounted goal reward), and 0
    # where it is not: the no-heuristic search's value.
    states = saliency_states(TASK_A, 256)
    v2 = planner_value(PlannerChoice.of(PlannerSpec("search-no-heuristic"), 2), TASK_A, 2)(states)
    vstar = value_table(TASK_A).lookup(states)
    near = vstar >= TASK_A.gamma
    torch.testing.assert_close(v2[near], vstar[near])
    assert torch.equal(v2[~near], torch.zeros(int((~near).sum())))
    assert near.any() and (~near).any()


def test_no_heuristic_weights_move_to_the_agent_position():
    # Within 2 steps of the goal only the agent's cell changes the depth-2 return: the key and
    # the flags get exactly 0 (measured: agent_x 0.615, agent_y 0.385).
    w = planner_weights(PlannerChoice.of(PlannerSpec("search-no-heuristic"), 2), TASK_A, 2)
    assert torch.equal(w[2:], torch.zeros(10))
    torch.testing.assert_close(w[:2].sum(), torch.tensor(1.0))
    assert float(w[0]) > float(w[1]) > 0


def test_a_learned_value_that_reads_a_distractor_weights_it():
    table = value_table(TASK_A)
    learned = LearnedValue(lambda s: table.lookup(s) + 0.5 * s[:, 8], TASK_A)
    choice = PlannerChoice.of(PlannerSpec("search-learned-v"), 4, learned=learned)
    w = planner_weights(choice, TASK_A, 4, saliency_states(TASK_A, 256))
    assert float(w[8]) > 0.02 and float(w[9]) == 0.0
    sq = torch.rand(5, 3, 12, generator=torch.Generator().manual_seed(0))
    assert planner_drpe(sq, w) == drpe(sq, w)
