"""Exact optimal values V* and relevance weights (paper §3 Eq. 1, appendix C).

V* is computed by value iteration over the discrete relevant state: agent cell (``N^2``) x key
cell (``N^2``) x carrying (2) x door open (2), times c1 (2) in a task whose goal swaps on it
(``task.reads_c1``): 64 x 64 x 2 x 2 in the default world, whatever the number of distractors
(they are irrelevant, so the table does not grow with them). The transitions come from
``gridplan.core.env.relevant_step`` itself and the rewards from ``gridplan.core.env.outcome``,
so the table can never disagree with the environment.

The iteration runs in two phases with the same Bellman backups (hence the same fixed point,
bit for bit, as one iteration over the whole table): first the states that carry the key,
whose value does not depend on the key cell (a carried key moves with the agent), then the
states that do not, whose pickups lead into the first phase's values. A world whose table
would not fit ``MAX_VALUE_BYTES`` is refused before anything is allocated.
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
    KEY_X,
    KEY_Y,
    N_ACTIONS,
)
from gridplan.core.env import (
    check_state,
    outcome,
    relevant_step,
    to_cell,
    to_flag,
)
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.core.world import DEFAULT, World

#: Convergence threshold of value iteration (max change of any value in one sweep).
_TOLERANCE = 1e-12
#: Most working memory value iteration may take (bytes); a larger world is refused up front.
MAX_VALUE_BYTES = 8 * 2**30
#: Bytes per table entry while iterating: four float64 sweep buffers of the states that do
#: not carry the key (half of the table; the rest is a table of its own N^2 size), and the
#: float32 table handed out.
_BYTES_PER_ENTRY = 4 * 8 // 2 + 4


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
    n = task.world.size
    idx = (agent[:, 0] * n + agent[:, 1]) * n * n + key[:, 0] * n + key[:, 1]
    idx = (idx * 2 + carrying.long()) * 2 + door_open.long()
    if task.reads_c1:
        idx = idx * 2 + c1.long()
    return idx


def table_size(task: Task) -> int:
    """Entries of the V* table of ``task``: ``N^4 * 4``, times 2 when it reads ``c1``."""
    return task.world.size**4 * 4 * (2 if task.reads_c1 else 1)


def check_table_memory(task: Task, limit: int | None = None) -> int:
    """Working memory of ``task``'s value iteration in bytes, checked before allocating.

    Raises:
        ValueError: if it exceeds ``limit`` (default ``MAX_VALUE_BYTES``), naming the world,
            the table size and the limit.
    """
    limit = MAX_VALUE_BYTES if limit is None else limit
    need = table_size(task) * _BYTES_PER_ENTRY
    if need > limit:
        world = task.world
        raise ValueError(
            f"world {world.name!r} ({world.size}x{world.size}) is too large for exact V*: "
            f"task {task.name!r} has {table_size(task):,} relevant states, value iteration "
            f"needs {need / 2**30:.1f} GiB, the limit is {limit / 2**30:.1f} GiB "
            "(gridplan.core.values.MAX_VALUE_BYTES)"
        )
    return need


def _cells(world: World) -> torch.Tensor:
    """``(N^2, 2)`` long cells, x-major: cell ``i`` is ``(i // N, i % N)``."""
    g = torch.arange(world.size)
    return torch.cartesian_prod(g, g)


def _iterate(backup, values: torch.Tensor, terminal: torch.Tensor) -> torch.Tensor:
    """Synchronous value iteration ``V <- max_a backup(V, a)``, 0 on terminal states, until
    no value moves by ``_TOLERANCE``. ``backup(v, a, out)`` writes action ``a``'s backup into
    ``out``; the sweeps reuse three buffers (fresh large tensors cost page faults)."""
    best, q, spare = (torch.empty_like(values) for _ in range(3))
    for _ in range(10_000):
        backup(values, 0, best)
        for a in range(1, N_ACTIONS):
            torch.maximum(best, backup(values, a, q), out=best)
        best.masked_fill_(terminal, 0.0)
        delta = torch.sub(best, values, out=spare).abs_().max()
        values, best = best, values
        if delta < _TOLERANCE:
            break
    return values


@functools.lru_cache(maxsize=8)
def _value_iteration(task: Task) -> torch.Tensor:
    check_table_memory(task)
    world = task.world
    cells = _cells(world)
    a_cells, k_cells, nb = cells.shape[0], cells.shape[0], 2 if task.reads_c1 else 1
    bits = torch.arange(nb).bool()
    # Phase 1: carrying. States (door, c1, agent), agent fastest; a carried key sits on the
    # agent. Both phases keep the agent and key cells innermost, so every broadcast runs
    # along a long contiguous dim.
    agent = cells.repeat(2 * nb, 1)
    door = torch.arange(2).bool().repeat_interleave(nb * a_cells)
    c1 = bits.repeat_interleave(a_cells).repeat(2)
    carrying = torch.ones_like(door)
    _, goal_now, hazard_now = outcome(agent, c1, task)
    terminal_c = goal_now | hazard_now
    next_c, reward_c, next_agent_u, reward_u = [], [], [], []
    for a in range(N_ACTIONS):
        act = torch.full((agent.shape[0],), a)
        rel = relevant_step(agent, agent, carrying, door, act, world)
        cell = rel.agent[:, 0] * world.size + rel.agent[:, 1]
        next_c.append((rel.door_open.long() * nb + c1.long()) * a_cells + cell)
        reward_c.append(outcome(rel.agent, c1, task)[0].double())
        free = relevant_step(agent, agent, ~carrying, door, act, world)
        next_agent_u.append(free.agent[:, 0] * world.size + free.agent[:, 1])
        reward_u.append(outcome(free.agent, c1, task)[0].double())
    gamma = task.gamma
    def backup_c(v: torch.Tensor, a: int, out: torch.Tensor) -> torch.Tensor:
        # reward + gamma * V(next), as two roundings: the same floats in every phase.
        return torch.index_select(v, 0, next_c[a], out=out).mul_(gamma).add_(reward_c[a])

    v_c = _iterate(
        backup_c,
        torch.zeros(agent.shape[0], dtype=torch.float64),
        terminal_c,
    )
    # Phase 2: not carrying, states (door, c1, agent, key). The door cannot open and a step
    # that ends on the key cell picks it up: its value is the carrying state it enters.
    small = (2, nb, a_cells, 1)
    moves = []
    for a in range(N_ACTIONS):
        target = next_agent_u[a].view(small)
        # (door, c1) are those of the state: the row of the states entered at target.
        into = torch.arange(2 * nb).view(2, nb, 1, 1) * a_cells + target
        moves.append((target, into, into.view(-1), reward_u[a].view(small)))

    def backup_u(v: torch.Tensor, a: int, out: torch.Tensor) -> torch.Tensor:
        target, into, rows, reward = moves[a]
        torch.index_select(v.view(-1, k_cells), 0, rows, out=out.view(-1, k_cells))
        # A step onto the key cell picks it up: that entry is the carrying state's value.
        out.scatter_(3, target, v_c[into])
        return out.mul_(gamma).add_(reward)

    v_u = _iterate(
        backup_u, torch.zeros((2, nb, a_cells, k_cells), dtype=torch.float64),
        terminal_c.view(small),
    )
    # The table in discrete_index order: (agent, key, carrying, door, c1).
    table = torch.empty(a_cells, k_cells, 2, 2, nb, dtype=torch.float32)
    table[:, :, 0] = v_u.permute(2, 3, 0, 1).float()
    table[:, :, 1] = v_c.view(2, nb, a_cells).permute(2, 0, 1).unsqueeze(1).float()
    return table.reshape(-1)


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
        """Flat table index of ``(N, S)`` states: rounded cells, flags at 0.5."""
        world = self.task.world
        return discrete_index(
            to_cell(state[:, AGENT_X : AGENT_Y + 1], world),
            to_cell(state[:, KEY_X : KEY_Y + 1], world),
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
        """V* of ``(N, S)`` float states (any values; read through their relevant projection).

        Returns:
            ``(N,)`` float values, one gather, no validation (hot path of the planner).
        """
        return self._values[self.index(state)]

    def __call__(self, state: torch.Tensor) -> torch.Tensor:
        """Validated ``lookup``. Raises ValueError on a malformed or non-finite state."""
        return self.lookup(check_state(state, world=self.task.world))

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        """Exact ``Q*(s, a) = r(s') + gamma V*(s')`` under the true dynamics: ``(N, 4)``."""
        world = self.task.world
        agent = to_cell(state[:, AGENT_X : AGENT_Y + 1], world)
        key = to_cell(state[:, KEY_X : KEY_Y + 1], world)
        carrying, door, c1 = (to_flag(state[:, d]) for d in (CARRYING, DOOR_OPEN, C1))
        q = []
        for a in range(N_ACTIONS):
            act = torch.full((state.shape[0],), a, device=state.device)
            rel = relevant_step(agent, key, carrying, door, act, world)
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


#: Rows of states, perturbed copies included, scored by one ``value_fn`` call of
#: ``perturbation_saliency`` (bytes of float32 rows); the default world fits one call.
SALIENCY_BYTES = 256 * 2**20


def _perturbed(states: torch.Tensor, world: World, dims: tuple[int, ...]):
    """The perturbed copies ``s ⊕ j`` of Eq. 1 for ``j`` in ``dims``, their dims and whether
    each stays on the grid. A dim of ``world.dim_scales`` ``k > 1`` (a coordinate; in
    MiniGrid DoorKey also the heading and the door state) moves one step ``1 / k``."""
    n = states.shape[0]
    flags = set(world.flag_dims)
    copies, owners, valid = [], [], []
    for dim in dims:
        if dim not in flags:
            scale = world.dim_scales[dim]
            cell = torch.round(states[:, dim] * scale).long()
            for delta in (-1, 1):
                moved = cell + delta
                pert = states.clone()
                pert[:, dim] = moved.clamp(0, int(scale)).to(states.dtype) / scale
                copies.append(pert)
                owners.append(dim)
                valid.append((moved >= 0) & (moved <= scale))
        else:
            pert = states.clone()
            pert[:, dim] = 1.0 - to_flag(states[:, dim]).to(states.dtype)
            copies.append(pert)
            owners.append(dim)
            valid.append(torch.ones(n, dtype=torch.bool, device=states.device))
    return copies, owners, valid


def _value_changes(value_fn, states: torch.Tensor, world: World, dims: tuple[int, ...]):
    """``|V(s ⊕ j) - V(s)|`` of every copy ``(copies, n)`` float64, its owner dims and the
    ``(copies, n)`` float64 mask of copies that stay on the grid, on CPU."""
    n, s = states.shape
    flags = set(world.flag_dims)
    n_copies = sum(1 if d in flags else 2 for d in dims)
    # The copies and their concatenation are alive together: twice the rows per state.
    per_state = 2 * (n_copies + 1) * s * 4
    chunk = max(1, SALIENCY_BYTES // per_state)
    diffs, oks = [], []
    for lo in range(0, n, chunk):
        part = states[lo : lo + chunk]
        rows = part.shape[0]
        copies, owners, valid = _perturbed(part, world, dims)
        values = value_fn(torch.cat([part, *copies]))
        if not isinstance(values, torch.Tensor) or tuple(values.shape) != (
            (len(copies) + 1) * rows,
        ):
            raise ValueError(f"value_fn must map (N, {s}) states to (N,) values")
        values = values.detach().double().cpu()
        if not torch.isfinite(values).all():
            raise ValueError("value_fn returned non-finite values")
        diffs.append((values[rows:].view(len(copies), rows) - values[:rows]).abs())
        oks.append(torch.stack(valid).cpu().double())
    return torch.cat(diffs, 1), torch.tensor(owners), torch.cat(oks, 1)


def perturbation_saliency(
    value_fn,
    states: torch.Tensor,
    normalize: bool = True,
    world: World = DEFAULT,
    dims: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """Per-dimension value sensitivity ``w_j = E_s |V(s ⊕ j) - V(s)|`` (paper Eq. 1).

    ``s ⊕ j`` moves a coordinate by one cell in each direction that stays on the grid (the
    changes averaged per state) or flips a flag (thresholded at 0.5). The perturbed copies
    are scored in as few batches as ``SALIENCY_BYTES`` allows (one in the default world);
    differences and means are taken in float64.

    Args:
        value_fn: callable ``(N, S) -> (N,)`` (``ValueTable.lookup``, a fitted value, ...).
        states: ``(N, S)`` float in ``[0, 1]``, the distribution the expectation is over.
        normalize: divide by the sum, so the weights sum to 1.
        world: the layout and grid of the states (a world of another width fails the
            states' check; pass the world whenever it is not the default one).
        dims: the dims to perturb, when ``value_fn`` is known to read no others (the exact
            V* reads ``task.relevant_dims``); the rest get exactly 0 without being scored.
            ``None``: every dim.

    Returns:
        ``(S,)`` float32 on CPU, non-negative; exactly 0 on a dimension ``value_fn`` ignores.

    Raises:
        ValueError: on malformed or empty states, a value function returning the wrong shape
            or non-finite values, or (with ``normalize``) a value function that no
            perturbation changes.
    """
    check_state(states, "states", world)
    if states.shape[0] == 0:
        raise ValueError("states must not be empty")
    dims = tuple(range(world.state_dim)) if dims is None else tuple(sorted(dims))
    diffs, owner, ok = _value_changes(value_fn, states, world, dims)
    sens = torch.zeros(world.state_dim, dtype=torch.float64)
    for dim in dims:
        rows = owner == dim
        # Average over the directions that stay on the grid, per state, as in Eq. 1.
        change = (diffs[rows] * ok[rows]).sum(0) / ok[rows].sum(0)
        sens[dim] = change.mean()
    if not normalize:
        return sens.float()
    if sens.sum() <= 0:
        raise ValueError("the value function is constant under every perturbation")
    return (sens / sens.sum()).float()
