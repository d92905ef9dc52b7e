"""What the tree search reads of a predicted state, tabulated: its reward, whether it is
terminal and its exact V*, over every discrete state of a small world (docs/PERFORMANCE.md,
"Batched MCTS").

``gridplan.core.dynamics.outcome`` and ``ValueTable.lookup`` read a state through the same
discrete state: agent and key cells (rounded, clamped to the grid) and the carrying, door and
``c1`` flags (above 0.5). ``ArrivalTable`` reads that discrete state once, as
``gridplan.core.env.transition`` does (scaled, rounded, clamped, one matrix-vector product for
the flat index; a flag rounded and clamped to 1 is ``> 0.5``), and gathers a row computed by
those two functions on it, so its values equal theirs bit for bit on any finite state.
"""

from __future__ import annotations

import torch

from gridplan.core.constants import AGENT_X, C1, CARRYING
from gridplan.core.env import outcome
from gridplan.core.tasks import Task
from gridplan.core.values import ValueTable, discrete_index

#: Most discrete states (``N^4 * 2^3``) tabulated: the flat index stays exact in float32, and
#: the table (33 bytes a state) within 35 MB; the 16-grid's 524,288 fit.
MAX_STATES = 2**20


class ArrivalTable:
    """Per discrete state, the search's row of a new node: ``(1, V, r)`` float64 (visits,
    value sum ``V = V*`` while alive and 0 once terminal, reward), the terminal flag and the
    one-step value ``r + gamma * V``, as ``gridplan.planning.mcts`` computes them from
    ``outcome`` and ``lookup``.

    Args:
        task: the reward and termination cells (a ``Task``; a DoorKey task is not tabulated).
        values: its exact V* (``ValueTable`` of ``task``).
        device: where the table lives.

    Raises:
        ValueError: if the world has more than ``MAX_STATES`` discrete states
            (``ArrivalTable.fits`` says beforehand).
    """

    def __init__(self, task: Task, values: ValueTable, device: torch.device | str = "cpu"):
        if not self.fits(task):
            raise ValueError(
                f"world {task.world.name!r} has more than {MAX_STATES} discrete states to tabulate"
            )
        n = task.world.size
        g, two = torch.arange(n), torch.arange(2)
        ax, ay, kx, ky, carry, door, c1 = torch.cartesian_prod(g, g, g, g, two, two, two).T
        agent, key = torch.stack([ax, ay], 1), torch.stack([kx, ky], 1)
        carry, door, c1 = carry.bool(), door.bool(), c1.bool()
        r, goal, hazard = outcome(agent, c1, task)
        done = (goal | hazard).to(device)
        index = discrete_index(agent, key, carry, door, c1, values.task)
        v = values.values_at(index.to(values.device)).to(device)
        v = (v * ~done).double()
        r = r.double().to(device)
        self.rows = torch.stack([torch.ones_like(v), v, r], dim=1)
        self.terminal = done
        self.estimate = r + task.gamma * v
        # Index (((((ax*N + ay)*N + kx)*N + ky)*2 + carrying)*2 + door)*2 + c1, in the
        # order of the cartesian product above.
        radix = [n, n, n, n, 2, 2, 2]
        place = [1] * 7
        for d in reversed(range(6)):
            place[d] = place[d + 1] * radix[d + 1]
        self.weights = torch.tensor(place, dtype=torch.float32, device=device)
        cell = task.world.cell_scale
        self.scale = torch.tensor([cell] * 4 + [1.0] * 3, dtype=torch.float32, device=device)
        self.top = n - 1

    @staticmethod
    def fits(task) -> bool:
        """Whether ``task``'s world is tabulated: a ``Task`` of at most ``MAX_STATES``
        discrete states."""
        return isinstance(task, Task) and task.world.size**4 * 8 <= MAX_STATES

    def index(self, state: torch.Tensor) -> torch.Tensor:
        """``(R,)`` long rows of ``(R, S)`` finite float states (module docstring)."""
        dtype = state.dtype
        read = torch.mul(state[:, AGENT_X : C1 + 1], self.scale.to(dtype))
        read.round_().clamp_(0, self.top)
        read[:, CARRYING:].clamp_(max=1)
        return torch.mv(read, self.weights.to(dtype)).long()
