"""Exact optimal values V* and graded relevance weights (paper §3 Eq. 1, appendix C; SPEC §2).

V* is computed by value iteration over the discrete relevant state: agent cell (64) x key
cell (64) x carrying (2) x door open (2), times c1 (2) in Task B. The transitions come from
``gridplan.env.relevant_step`` itself, so the table can never disagree with the environment.
Discount ``GAMMA = 0.95`` is our choice (the paper does not state one). Values are those of
arriving rewards: a state one step from the goal has V* = 1, two steps gamma, and so on;
terminal states have V* = 0.
"""

from __future__ import annotations

import functools

import torch

from gridplan.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    CARRYING,
    DOOR_OPEN,
    GAMMA,
    GRID_SIZE,
    HORIZON,
    KEY_X,
    KEY_Y,
    N_ACTIONS,
    POSITION_DIMS,
    RELEVANT_DIMS,
    STATE_DIM,
    check_task,
)
from gridplan.env import check_state, outcome, relevant_step, reset, step, to_cell, to_flag

_CELLS = GRID_SIZE * GRID_SIZE


def _c1_count(task: str) -> int:
    return 2 if task == "B" else 1


def discrete_index(
    agent: torch.Tensor,
    key: torch.Tensor,
    carrying: torch.Tensor,
    door_open: torch.Tensor,
    c1: torch.Tensor,
    task: str,
) -> torch.Tensor:
    """Flat index into the V* table from cells ``(N, 2)`` long and flags ``(N,)`` bool."""
    idx = (agent[:, 0] * GRID_SIZE + agent[:, 1]) * _CELLS + key[:, 0] * GRID_SIZE + key[:, 1]
    idx = (idx * 2 + carrying.long()) * 2 + door_open.long()
    if task == "B":
        idx = idx * 2 + c1.long()
    return idx


def _all_discrete_states(task: str):
    """Every discrete relevant state, in ``discrete_index`` order."""
    n_c1 = _c1_count(task)
    grid = torch.cartesian_prod(
        torch.arange(GRID_SIZE),
        torch.arange(GRID_SIZE),
        torch.arange(GRID_SIZE),
        torch.arange(GRID_SIZE),
        torch.arange(2),
        torch.arange(2),
        torch.arange(n_c1),
    )
    return grid[:, 0:2], grid[:, 2:4], grid[:, 4].bool(), grid[:, 5].bool(), grid[:, 6].bool()


@functools.lru_cache(maxsize=4)
def _value_iteration(task: str, gamma: float, tol: float) -> torch.Tensor:
    agent, key, carrying, door, c1 = _all_discrete_states(task)
    n = agent.shape[0]
    _, goal_now, hazard_now = outcome(agent, c1, task)
    terminal = goal_now | hazard_now
    next_idx = torch.empty(N_ACTIONS, n, dtype=torch.long)
    reward = torch.empty(N_ACTIONS, n, dtype=torch.float64)
    for a in range(N_ACTIONS):
        rel = relevant_step(agent, key, carrying, door, torch.full((n,), a))
        r, _, _ = outcome(rel.agent, c1, task)
        next_idx[a] = discrete_index(rel.agent, rel.key, rel.carrying, rel.door_open, c1, task)
        reward[a] = r.double()
    values = torch.zeros(n, dtype=torch.float64)
    for _ in range(10_000):
        q = reward + gamma * values[next_idx]
        new = torch.where(terminal, torch.zeros_like(values), q.max(dim=0).values)
        delta = (new - values).abs().max()
        values = new
        if delta < tol:
            break
    return values.float()


class ValueTable:
    """Exact V* of one task with batched lookup from continuous (predicted) states.

    Args:
        task: ``"A"`` or ``"B"``.
        gamma: discount in ``(0, 1)``; default ``GAMMA = 0.95``.
        device: where the table lives.

    Raises:
        ValueError: on an unknown task or a discount outside ``(0, 1)``.
    """

    def __init__(
        self, task: str = "A", gamma: float = GAMMA, device: torch.device | str = "cpu"
    ) -> None:
        check_task(task)
        if not 0.0 < gamma < 1.0:
            raise ValueError(f"gamma must lie in (0, 1), got {gamma}")
        self.task = task
        self.gamma = gamma
        self.table = _value_iteration(task, float(gamma), 1e-12).to(device)

    @property
    def device(self) -> torch.device:
        return self.table.device

    def index(self, state: torch.Tensor) -> torch.Tensor:
        """Flat table index of ``(N, 12)`` states: rounded cells, flags at 0.5."""
        return discrete_index(
            to_cell(state[:, AGENT_X : AGENT_Y + 1]),
            to_cell(state[:, KEY_X : KEY_Y + 1]),
            to_flag(state[:, CARRYING]),
            to_flag(state[:, DOOR_OPEN]),
            to_flag(state[:, C1]),
            self.task,
        )

    def lookup(self, state: torch.Tensor) -> torch.Tensor:
        """V* of ``(N, 12)`` float states (any values; read through their relevant projection).

        Returns:
            ``(N,)`` float values, one gather, no validation (hot path of the planner).
        """
        return self.table[self.index(state)]

    def __call__(self, state: torch.Tensor) -> torch.Tensor:
        """Validated ``lookup``. Raises ValueError on a malformed or non-finite state."""
        return self.lookup(check_state(state))

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        """Exact ``Q*(s, a) = r(s') + gamma V*(s')`` under the true dynamics: ``(N, 4)``."""
        agent = to_cell(state[:, AGENT_X : AGENT_Y + 1])
        key = to_cell(state[:, KEY_X : KEY_Y + 1])
        carrying, door, c1 = (to_flag(state[:, d]) for d in (CARRYING, DOOR_OPEN, C1))
        q = []
        for a in range(N_ACTIONS):
            act = torch.full((state.shape[0],), a, device=state.device)
            rel = relevant_step(agent, key, carrying, door, act)
            r, goal, hazard = outcome(rel.agent, c1, self.task)
            nxt = discrete_index(rel.agent, rel.key, rel.carrying, rel.door_open, c1, self.task)
            q.append(r + self.gamma * self.table[nxt] * ~(goal | hazard))
        return torch.stack(q, dim=1)


def optimal_state_distribution(
    task: str = "A", episodes: int = 2048, seed: int = 0, gamma: float = GAMMA
) -> torch.Tensor:
    """States visited by the optimal (greedy-in-Q*) policy from reset states: ``(N, 12)``.

    This is the distribution ``rho`` of Eq. 1 (our choice: the paper leaves it open).
    Ties between optimal actions are broken at random with ``seed``.
    """
    table = ValueTable(task, gamma)
    gen = torch.Generator().manual_seed(seed)
    state = reset(episodes, gen, task)
    visited = []
    alive = torch.ones(episodes, dtype=torch.bool)
    for _ in range(HORIZON):
        visited.append(state[alive])
        q = table.q_values(state)
        best = q >= q.max(dim=1, keepdim=True).values - 1e-9
        action = (torch.rand(q.shape, generator=gen) * best).argmax(dim=1)
        state, _, done, _ = step(state, action, gen, task)
        alive &= ~done
        if not alive.any():
            break
    return torch.cat(visited)


@functools.lru_cache(maxsize=4)
def relevance_weights(task: str = "A", gamma: float = GAMMA) -> torch.Tensor:
    """Graded relevance weights (paper Eq. 1): ``w_j = E_rho |V*(s + e_j) - V*(s)|``, sum 1.

    ``e_j`` moves a coordinate by one cell (both directions that stay on the grid, averaged)
    or flips a flag. Dimensions V* does not read get exactly 0.

    Returns:
        ``(12,)`` float32 weights, non-negative, summing to 1.
    """
    check_task(task)
    table = ValueTable(task, gamma)
    states = optimal_state_distribution(task, gamma=gamma)
    base = table.lookup(states)
    sens = torch.zeros(STATE_DIM, dtype=torch.float64)
    for dim in range(STATE_DIM):
        if dim in POSITION_DIMS:
            cell = to_cell(states[:, dim])
            diffs, counts = torch.zeros_like(base), torch.zeros_like(base)
            for delta in (-1, 1):
                moved = cell + delta
                ok = (moved >= 0) & (moved < GRID_SIZE)
                pert = states.clone()
                pert[:, dim] = moved.clamp(0, GRID_SIZE - 1) / (GRID_SIZE - 1)
                diffs += ok * (table.lookup(pert) - base).abs()
                counts += ok
            change = diffs / counts
        else:
            pert = states.clone()
            pert[:, dim] = 1.0 - to_flag(states[:, dim]).float()
            change = (table.lookup(pert) - base).abs()
        sens[dim] = change.double().mean()
    return (sens / sens.sum()).float()


def binary_weights(task: str = "A") -> torch.Tensor:
    """Binary relevance weights ``(12,)``: ``1/d_R`` on the task's relevant dims, else 0."""
    dims = RELEVANT_DIMS[check_task(task)]
    w = torch.zeros(STATE_DIM)
    w[list(dims)] = 1.0 / len(dims)
    return w
