"""Exact optimal values V* and relevance weights (paper §3 Eq. 1, appendix C).

V* is computed by value iteration over the discrete relevant state: agent cell (64) x key
cell (64) x carrying (2) x door open (2), times c1 (2) in a task whose goal swaps on it
(``task.reads_c1``). The transitions come from ``gridplan.core.env.relevant_step`` itself and the
rewards from ``gridplan.core.env.outcome``, so the table can never disagree with the environment.
The discount is ``task.gamma`` (0.95 in the paper's tasks: our choice, the paper does not
state one). Values are those of arriving rewards: a state one step from the goal has V* = 1,
two steps gamma, and so on; terminal states have V* = 0.

Eq. 1 is implemented once, as ``perturbation_saliency`` of any value function; the graded
weights ``relevance_weights`` are the saliency of the exact V* on the optimal policy's states.
Use ``value_table(task, device)`` for the cached table rather than building ``ValueTable``.
"""

from __future__ import annotations

import functools
import threading

import torch

from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    CARRYING,
    DOOR_OPEN,
    GRID_SIZE,
    KEY_X,
    KEY_Y,
    N_ACTIONS,
    POSITION_DIMS,
    STATE_DIM,
)
from gridplan.core.env import check_state, outcome, relevant_step, reset, step, to_cell, to_flag
from gridplan.core.tasks import TASK_A, Task, check

_CELLS = GRID_SIZE * GRID_SIZE
#: Convergence threshold of value iteration (max change of any value in one sweep).
_TOLERANCE = 1e-12


def discrete_index(
    agent: torch.Tensor,
    key: torch.Tensor,
    carrying: torch.Tensor,
    door_open: torch.Tensor,
    c1: torch.Tensor,
    task: Task,
) -> torch.Tensor:
    """Flat index into the V* table from cells ``(N, 2)`` long and flags ``(N,)`` bool.

    Order: agent x, agent y, key x, key y, carrying, door open, then ``c1`` when
    ``task.reads_c1``; the last index varies fastest.
    """
    idx = (agent[:, 0] * GRID_SIZE + agent[:, 1]) * _CELLS + key[:, 0] * GRID_SIZE + key[:, 1]
    idx = (idx * 2 + carrying.long()) * 2 + door_open.long()
    if task.reads_c1:
        idx = idx * 2 + c1.long()
    return idx


def _all_discrete_states(task: Task):
    """Every discrete relevant state, in ``discrete_index`` order."""
    grid = torch.cartesian_prod(
        torch.arange(GRID_SIZE),
        torch.arange(GRID_SIZE),
        torch.arange(GRID_SIZE),
        torch.arange(GRID_SIZE),
        torch.arange(2),
        torch.arange(2),
        torch.arange(2 if task.reads_c1 else 1),
    )
    return grid[:, 0:2], grid[:, 2:4], grid[:, 4].bool(), grid[:, 5].bool(), grid[:, 6].bool()


@functools.lru_cache(maxsize=8)
def _value_iteration(task: Task) -> torch.Tensor:
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
        q = reward + task.gamma * values[next_idx]
        new = torch.where(terminal, torch.zeros_like(values), q.max(dim=0).values)
        delta = (new - values).abs().max()
        values = new
        if delta < _TOLERANCE:
            break
    return values.float()


class ValueTable:
    """Exact V* of one task with batched lookup from continuous (predicted) states.

    Prefer ``value_table(task, device)``, which builds the table once per task and device
    and shares it. The values themselves stay private: ``table`` hands out a copy, so no caller can
    change what every other caller reads.

    Args:
        task: the task (goal geometry and ``gamma``).
        device: where the table lives.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """

    def __init__(self, task: Task = TASK_A, device: torch.device | str = "cpu") -> None:
        self.task = check(task)
        self._values = _value_iteration(task).to(device, copy=True)

    @property
    def gamma(self) -> float:
        """The discount of the table, ``task.gamma``."""
        return self.task.gamma

    @property
    def device(self) -> torch.device:
        return self._values.device

    @property
    def table(self) -> torch.Tensor:
        """A copy of the flat ``(N,)`` float32 table, in ``discrete_index`` order."""
        return self._values.clone()

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

    def values_at(self, index: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """V* at flat indices ``(N,)`` long (``discrete_index`` order), written into ``out``
        when given (the planner's fused scorer reuses its buffers). No validation."""
        return torch.index_select(self._values, 0, index, out=out)

    def lookup(self, state: torch.Tensor) -> torch.Tensor:
        """V* of ``(N, 12)`` float states (any values; read through their relevant projection).

        Returns:
            ``(N,)`` float values, one gather, no validation (hot path of the planner).
        """
        return self._values[self.index(state)]

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
            q.append(r + self.gamma * self._values[nxt] * ~(goal | hazard))
        return torch.stack(q, dim=1)


_TABLES: dict[tuple[Task, str], ValueTable] = {}
_TABLES_LOCK = threading.Lock()


def value_table(task: Task = TASK_A, device: torch.device | str = "cpu") -> ValueTable:
    """The exact V* table of ``task`` on ``device``, built once per task and device and shared.

    Tasks are frozen and compared by value, so equal tasks share one table. The shared table
    hands out copies of its values, never the cached tensor (``ValueTable.table``). Safe to
    call from several threads: a table is built at most once.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    key = (check(task), str(torch.device(device)))
    with _TABLES_LOCK:
        table = _TABLES.get(key)
        if table is None:
            table = _TABLES[key] = ValueTable(task, device)
    return table


def optimal_state_distribution(
    task: Task = TASK_A, episodes: int = 2048, seed: int = 0
) -> torch.Tensor:
    """States visited by the optimal (greedy-in-Q*) policy from reset states: ``(N, 12)``.

    This is the distribution ``rho`` of Eq. 1 (our choice: the paper leaves it open). Episodes
    run for at most ``task.horizon`` steps; ties between optimal actions are broken at random
    with ``seed``.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    table = value_table(task)
    gen = torch.Generator().manual_seed(seed)
    state = reset(episodes, gen, task)
    visited = []
    alive = torch.ones(episodes, dtype=torch.bool)
    for _ in range(task.horizon):
        visited.append(state[alive])
        q = table.q_values(state)
        best = q >= q.max(dim=1, keepdim=True).values - 1e-9
        action = (torch.rand(q.shape, generator=gen) * best).argmax(dim=1)
        state, _, done, _ = step(state, action, gen, task)
        alive &= ~done
        if not alive.any():
            break
    return torch.cat(visited)


def perturbation_saliency(value_fn, states: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Per-dimension value sensitivity ``w_j = E_s |V(s ⊕ j) - V(s)|`` (paper Eq. 1).

    ``s ⊕ j`` moves a coordinate by one cell in each direction that stays on the grid (the
    changes averaged per state) or flips a flag (thresholded at 0.5). All perturbed copies
    are scored in one batch; differences and means are taken in float64.

    Args:
        value_fn: callable ``(N, 12) -> (N,)`` (``ValueTable.lookup``, a fitted value, ...).
        states: ``(N, 12)`` float in ``[0, 1]``, the distribution the expectation is over.
        normalize: divide by the sum, so the weights sum to 1.

    Returns:
        ``(12,)`` float32 on CPU, non-negative; exactly 0 on a dimension ``value_fn`` ignores.

    Raises:
        ValueError: on malformed or empty states, a value function returning the wrong shape
            or non-finite values, or (with ``normalize``) a value function that no
            perturbation changes.
    """
    check_state(states, "states")
    n = states.shape[0]
    if n == 0:
        raise ValueError("states must not be empty")
    copies, owners, valid = [], [], []
    for dim in range(STATE_DIM):
        if dim in POSITION_DIMS:
            cell = to_cell(states[:, dim])
            for delta in (-1, 1):
                moved = cell + delta
                pert = states.clone()
                pert[:, dim] = moved.clamp(0, GRID_SIZE - 1).to(states.dtype) / (GRID_SIZE - 1)
                copies.append(pert)
                owners.append(dim)
                valid.append((moved >= 0) & (moved < GRID_SIZE))
        else:
            pert = states.clone()
            pert[:, dim] = 1.0 - to_flag(states[:, dim]).to(states.dtype)
            copies.append(pert)
            owners.append(dim)
            valid.append(torch.ones(n, dtype=torch.bool, device=states.device))
    values = value_fn(torch.cat([states, *copies]))
    if not isinstance(values, torch.Tensor) or tuple(values.shape) != ((len(copies) + 1) * n,):
        raise ValueError("value_fn must map (N, 12) states to (N,) values")
    values = values.detach().double().cpu()
    if not torch.isfinite(values).all():
        raise ValueError("value_fn returned non-finite values")
    base = values[:n]
    diffs = (values[n:].view(len(copies), n) - base).abs()
    ok = torch.stack(valid).cpu().double()
    owner = torch.tensor(owners)
    sens = torch.zeros(STATE_DIM, dtype=torch.float64)
    for dim in range(STATE_DIM):
        rows = owner == dim
        # Average over the directions that stay on the grid, per state, as in Eq. 1.
        change = (diffs[rows] * ok[rows]).sum(0) / ok[rows].sum(0)
        sens[dim] = change.mean()
    if not normalize:
        return sens.float()
    if sens.sum() <= 0:
        raise ValueError("the value function is constant under every perturbation")
    return (sens / sens.sum()).float()


@functools.lru_cache(maxsize=8)
def _graded_weights(task: Task) -> torch.Tensor:
    states = optimal_state_distribution(task)
    return perturbation_saliency(value_table(task).lookup, states)


def relevance_weights(task: Task = TASK_A) -> torch.Tensor:
    """Graded relevance weights (paper Eq. 1): the ``perturbation_saliency`` of the exact V*
    over the optimal policy's states (``optimal_state_distribution``); computed once per task.

    Returns:
        ``(12,)`` float32 weights, non-negative, summing to 1, exactly 0 on the dimensions
        V* does not read (a fresh copy: callers may modify it).

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    return _graded_weights(check(task)).clone()


def binary_weights(task: Task = TASK_A) -> torch.Tensor:
    """Binary relevance weights ``(12,)``: ``1/d_R`` on ``task.relevant_dims``, else 0.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    dims = check(task).relevant_dims
    w = torch.zeros(STATE_DIM)
    w[list(dims)] = 1.0 / len(dims)
    return w
