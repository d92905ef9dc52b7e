"""Tasks as data and the registry (gridplan/core/tasks.py; paper §3, §5.3)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gridplan.core import tasks
from gridplan.core.constants import C1
from gridplan.core.tasks import PAPER_RELEVANT_DIMS, TASK_A, TASK_B, Task


def test_the_paper_tasks_are_registered_with_their_geometry_and_relevant_sets():
    assert tasks.names()[:2] == ("A", "B")
    assert tasks.get("A") is TASK_A and tasks.get(TASK_B) is TASK_B
    assert (TASK_A.goal, TASK_A.hazard, TASK_A.reads_c1) == ((7, 4), None, False)
    assert TASK_A.relevant_dims == PAPER_RELEVANT_DIMS
    assert TASK_B.relevant_dims == (*PAPER_RELEVANT_DIMS, C1) and TASK_B.reads_c1
    assert TASK_B.noise_relevant_dims == PAPER_RELEVANT_DIMS
    assert (TASK_A.horizon, TASK_A.gamma) == (60, 0.95)


def test_goal_cells_swap_on_c1_only_in_a_swapping_task():
    c1 = torch.tensor([False, True])
    goal, hazard = TASK_B.goal_cells(c1)
    assert goal.tolist() == [[7, 2], [7, 5]] and hazard.tolist() == [[7, 5], [7, 2]]
    goal, hazard = TASK_A.goal_cells(c1)
    assert goal.tolist() == [[7, 4], [7, 4]] and hazard is None
    fixed = Task(name="fixed", goal=(7, 0), hazard=(6, 0))
    assert fixed.goal_cells(c1)[1].tolist() == [[6, 0], [6, 0]]


def test_the_relevant_set_is_filled_in_from_the_rules_and_a_declared_one_is_checked():
    swap = Task(name="swap", goal=(7, 0), hazard=(7, 7), swap_on_c1=True)
    assert swap.relevant_dims == (*PAPER_RELEVANT_DIMS, C1)
    shuffled = Task(name="s", goal=(7, 0), hazard=(7, 7), swap_on_c1=True,
                    relevant_dims=(C1, *reversed(PAPER_RELEVANT_DIMS)))
    assert shuffled.relevant_dims == swap.relevant_dims, "stored in the V* index order"
    with pytest.raises(ValueError, match="relevant_dims must be the dims V\\* reads"):
        dataclasses.replace(TASK_A, name="bad", hazard=(7, 7), swap_on_c1=True)
    derived = dataclasses.replace(
        TASK_A, name="ok", hazard=(7, 7), swap_on_c1=True, relevant_dims=None
    )
    assert derived.reads_c1 and C1 in derived.relevant_dims


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"goal": (8, 0)}, "goal must be a cell"),
        ({"goal": (7, 4), "hazard": (7, 4)}, "sits on the goal"),
        ({"goal": (7, 4), "swap_on_c1": True}, "needs a hazard"),
        ({"goal": (7, 4), "horizon": 0}, "horizon must be a positive int"),
        ({"goal": (7, 4), "gamma": 1.0}, "gamma must lie in"),
        ({"goal": (7, 4), "noise_relevant_dims": ()}, "noise_relevant_dims must be"),
    ],
)
def test_malformed_tasks_are_rejected_naming_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Task(name="bad", **kwargs)


def test_the_registry_rejects_clashes_and_unknown_names():
    with pytest.raises(ValueError, match="valid tasks are A, B"):
        tasks.get("C")
    with pytest.raises(TypeError, match="name or a Task"):
        tasks.get(3)
    with pytest.raises(ValueError, match="already registered"):
        tasks.register("A", dataclasses.replace(TASK_A, goal=(7, 0)))
    with pytest.raises(ValueError, match="differs from the task's name"):
        tasks.register("Z", TASK_A)
    with pytest.raises(TypeError, match="got str 'A'; resolve a name"):
        tasks.check("A")
    assert tasks.check(TASK_A) is TASK_A
