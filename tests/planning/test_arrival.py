"""The tabulated arrival of the tree search (``gridplan.planning.arrival``) against the reward
and value it tabulates, on states off the grid, and the tree search through it against the
tree search reading reward and value one by one."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import dynamics
from gridplan.core.tasks import TASK_A, TASK_B, task_a
from gridplan.core.values import value_table
from gridplan.core.world import World
from gridplan.models.noise import NoiseModel
from gridplan.planning.arrival import ArrivalTable
from gridplan.planning.closed_loop import start_states
from gridplan.planning.mcts import TreeSearchPlanner


def _odd_states(task, n: int, seed: int) -> torch.Tensor:
    """States far off the grid and on the rounding edges: half cells, flags at 0.5, values
    below 0 and above 1."""
    g = torch.Generator().manual_seed(seed)
    s = task.world.state_dim
    noisy = torch.rand(n, s, generator=g) * 1.6 - 0.3
    cells = torch.randint(0, task.world.size, (n, s), generator=g).float()
    edges = (cells + 0.5) / task.world.cell_scale  # exactly between two cells
    flags = torch.full((n, s), 0.5)
    out = torch.cat([noisy, edges, flags, torch.nextafter(flags, torch.ones(1))])
    return out[torch.randperm(out.shape[0], generator=g)]


@pytest.mark.parametrize("task", [TASK_A, TASK_B])
def test_a_row_holds_the_reward_terminal_flag_and_value_of_its_state(task):
    values = value_table(task)
    table = ArrivalTable(task, values)
    state = torch.cat([_odd_states(task, 2000, 0), start_states((0,), 64, task)])
    row = table.index(state)
    r, goal, hazard = dynamics.outcome(task, state)
    done = goal | hazard
    v = (values.lookup(state) * ~done).double()
    assert torch.equal(table.rows[row], torch.stack([torch.ones_like(v), v, r.double()], 1))
    assert torch.equal(table.terminal[row], done)
    assert torch.equal(table.estimate[row], r.double() + task.gamma * v)
    assert bool(done.any()) and bool((~done).any())


@pytest.mark.parametrize(("task", "parallel"), [(TASK_A, 256), (TASK_B, 16)])
def test_the_tabulated_tree_equals_the_tree_reading_reward_and_value_apart(task, parallel):
    # A noisy model's children lie off the grid; the tree is the same bit for bit.
    roots = start_states((3,), 24, task)
    model = NoiseModel.controlled(0.3, 0.3, task=task)
    tabulated = TreeSearchPlanner(model, task, value_table(task), 96, 1.0, parallel)
    apart = TreeSearchPlanner(model, task, value_table(task), 96, 1.0, parallel)
    apart.arrival = None
    assert tabulated.arrival is not None
    a = tabulated.tree(roots, torch.Generator().manual_seed(5))
    b = apart.tree(roots, torch.Generator().manual_seed(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_a_large_world_is_not_tabulated():
    big = task_a(World(size=32))
    assert ArrivalTable.fits(TASK_A) and not ArrivalTable.fits(big)
    with pytest.raises(ValueError, match="more than"):
        ArrivalTable(big, value_table(TASK_A))
