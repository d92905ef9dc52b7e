"""The factored gridworld as batched pure functions over ``(B, S)`` state tensors.

Paper §3 and appendix D. ``reset`` and ``step`` never loop over episodes in Python and draw
every random number from an explicit ``torch.Generator``, so the same seed gives the same
episodes on the same device. The task (``gridplan.core.tasks.Task``) supplies the goal and hazard
cells and its world (``gridplan.core.world.World``) the grid, the wall and the state layout.
``step`` returns ``terminated`` only; truncation at ``task.horizon`` is the caller's
business (``gridplan.planning.closed_loop``, ``gridplan.data.datasets``).

Letter legend used in shapes: ``B`` batch rows, ``S`` state dimensions (``world.state_dim``,
12 in the default world).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from gridplan.core.checks import check_action, check_state
from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    CARRYING,
    DISTRACTOR_MOVES,
    DOOR_OPEN,
    GOAL_REWARD,
    HAZARD_REWARD,
    KEY_X,
    KEY_Y,
    MOVES,
    N_ACTIONS,
)
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.core.world import World

#: Largest relevant transition table ``transition`` gathers from (bytes); a larger world
#: (grid > 9) computes ``relevant_step`` on each batch instead, with the same values.
TABLE_BYTES = 16 * 2**20


@functools.lru_cache(maxsize=16)
def start_cells(world: World) -> torch.Tensor:
    """Cells in which agent and key start: ``(start_columns * N, 2)`` long, x-major (the
    default world's 40 western cells ``x <= 4``)."""
    return torch.tensor(
        [(x, y) for x in range(world.start_columns) for y in range(world.size)],
        dtype=torch.long,
    )


def to_cell(coord: torch.Tensor, world: World) -> torch.Tensor:
    """Normalized coordinates -> integer cells of ``world``: round to the nearest cell, clamp
    to the grid."""
    return torch.round(coord * world.cell_scale).clamp_(0, world.size - 1).long()


def to_flag(value: torch.Tensor) -> torch.Tensor:
    """Flag values -> bool, thresholded at 0.5."""
    return value > 0.5


def outcome(
    agent: torch.Tensor, c1: torch.Tensor, task: Task
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sparse reward of arriving in a state (paper §3, §5.3).

    Args:
        agent: ``(B, 2)`` long agent cells.
        c1: ``(B,)`` bool colour bit (read only by a task that swaps its goal on it).
        task: the goal and hazard cells (``task.goal_cells``).

    Returns:
        ``(reward, goal, hazard)``: ``(B,)`` float reward (+1 goal, -1 hazard, else 0) and
        ``(B,)`` bool flags; the state is terminal where ``goal | hazard``.
    """
    goal_cell, hazard_cell = task.goal_cells(c1)
    goal = (agent == goal_cell).all(dim=1)
    if hazard_cell is None:
        hazard = torch.zeros_like(goal)
    else:
        hazard = (agent == hazard_cell).all(dim=1)
    reward = goal.float() * GOAL_REWARD + hazard.float() * HAZARD_REWARD
    return reward, goal, hazard


def state_outcome(
    state: torch.Tensor, task: Task
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``outcome`` of arriving in ``(B, S)`` (possibly predicted) states, read through the
    agent's rounded cell and the thresholded ``c1``. No validation."""
    agent = to_cell(state[:, AGENT_X : AGENT_Y + 1], task.world)
    return outcome(agent, to_flag(state[:, C1]), task)


@dataclass(frozen=True)
class RelevantStep:
    """Result of the deterministic relevant dynamics for a batch (all ``(B,)`` or ``(B, 2)``)."""

    agent: torch.Tensor
    key: torch.Tensor
    carrying: torch.Tensor
    door_open: torch.Tensor
    pickup: torch.Tensor
    door_opened: torch.Tensor


def relevant_step(
    agent: torch.Tensor,
    key: torch.Tensor,
    carrying: torch.Tensor,
    door_open: torch.Tensor,
    action: torch.Tensor,
    world: World,
) -> RelevantStep:
    """Deterministic dynamics of agent, key and door on integer cells (paper §3, appendix D).

    A move off the grid, into the wall column or into the closed door leaves the agent in
    place. Moving into the closed door while carrying opens it (the agent stays this step).
    Ending a step on the key cell while not carrying picks the key up; a carried key moves
    with the agent.

    Args:
        agent: ``(B, 2)`` long cells.
        key: ``(B, 2)`` long cells.
        carrying: ``(B,)`` bool.
        door_open: ``(B,)`` bool.
        action: ``(B,)`` long in ``0..3``.
        world: grid size, wall column and door cell.

    Returns:
        The next relevant state and the ``pickup`` / ``door_opened`` events, as RelevantStep.
    """
    n = world.size
    target = agent + MOVES.to(agent.device).index_select(0, action)
    tx, ty = target[:, 0], target[:, 1]
    on_grid = (tx >= 0) & (tx < n) & (ty >= 0) & (ty < n)
    at_door = (tx == world.wall_x) & (ty == world.door_y)
    in_wall = (tx == world.wall_x) & ~at_door
    door_opened = at_door & ~door_open & carrying
    blocked = ~on_grid | in_wall | (at_door & ~door_open)
    new_agent = torch.where(blocked.unsqueeze(1), agent, target)
    pickup = ~carrying & (new_agent == key).all(dim=1)
    new_carrying = carrying | pickup
    new_key = torch.where(new_carrying.unsqueeze(1), new_agent, key)
    return RelevantStep(
        agent=new_agent,
        key=new_key,
        carrying=new_carrying,
        door_open=door_open | door_opened,
        pickup=pickup,
        door_opened=door_opened,
    )


def random_cells(shape: tuple[int, ...], generator: torch.Generator, world: World) -> torch.Tensor:
    """``(*shape, 2)`` long cells drawn uniformly over the whole grid of ``world``."""
    return torch.randint(
        0, world.size, (*shape, 2), generator=generator, device=generator.device
    )


def _flag_span(world: World) -> slice:
    """The contiguous flag dims: carrying, door, the ``c1`` and ``c2`` bits."""
    return slice(CARRYING, C1 + world.c1 + world.c2)


def _span(dims: tuple[int, ...]) -> slice:
    """``dims`` (consecutive) as a slice; empty dims give an empty slice."""
    return slice(dims[0], dims[-1] + 1) if dims else slice(0, 0)


#: Columns of a relevant row: the next agent and key (``cell / (N - 1)``), carrying, door and
#: ``c1`` (dims 0..6), then the reward and the events of ``step``'s info as 0/1.
_REWARD_COL = C1 + 1
_EVENTS = ("pickup", "door_opened", "goal", "hazard")


def _relevant_rows(
    agent: torch.Tensor,
    key: torch.Tensor,
    carrying: torch.Tensor,
    door: torch.Tensor,
    c1: torch.Tensor,
    action: torch.Tensor,
    task: Task,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``relevant_step`` and ``outcome`` as ``(B, 12)`` ``dtype`` rows (``_REWARD_COL``)."""
    world = task.world
    rel = relevant_step(agent, key, carrying, door, action, world)
    reward, goal, hazard = outcome(rel.agent, c1, task)
    columns = [rel.agent.to(dtype) / world.cell_scale, rel.key.to(dtype) / world.cell_scale]
    flags = (rel.carrying, rel.door_open, c1, reward, rel.pickup, rel.door_opened, goal, hazard)
    columns += [f.to(dtype).unsqueeze(1) for f in flags]
    return torch.cat(columns, dim=1)


@dataclass(frozen=True)
class _Tables:
    """What ``transition`` reads besides the state (``transition_tables``)."""

    scale: torch.Tensor
    cell_scale: torch.Tensor
    moves: torch.Tensor
    relevant_weights: torch.Tensor | None
    relevant: torch.Tensor | None


def relevant_table_rows(world: World) -> int:
    """Rows of the tabulated relevant transition: agent and key cells, three flags, actions."""
    return world.size**4 * 2**3 * N_ACTIONS


@functools.lru_cache(maxsize=32)
def transition_tables(task: Task, device: torch.device, dtype: torch.dtype) -> _Tables:
    """The read scales of the state dims and, for a small world, the true relevant transition
    tabulated on every discrete input.

    ``relevant``: ``(N^4 * 2^3 * 4, 12)`` ``dtype`` rows indexed by agent, key, carrying,
    door, c1 and action (``relevant_weights``), as ``_relevant_rows`` computes them; ``None``
    when the table would exceed ``TABLE_BYTES`` (6 MB in float32 for the 8-grid). Cached per
    task, device and dtype.
    """
    world = task.world
    n, s = world.size, world.state_dim
    positions = set(world.position_dims)
    scale = [world.cell_scale if d in positions else 1.0 for d in range(s)]

    def tensor(values) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    weights = table = None
    if relevant_table_rows(world) * 12 * torch.finfo(dtype).bits // 8 <= TABLE_BYTES:
        # Index ((((((ax*N + ay)*N + kx)*N + ky)*2 + carrying)*2 + door)*2 + c1)*4 + action.
        radix = {AGENT_X: n, AGENT_Y: n, KEY_X: n, KEY_Y: n, CARRYING: 2, DOOR_OPEN: 2, C1: 2}
        place, w = N_ACTIONS, {}
        for d in reversed(range(C1 + 1)):
            w[d] = place
            place *= radix[d]
        weights = tensor([w.get(d, 0) for d in range(s)])
        g, two, acts = torch.arange(n), torch.arange(2), torch.arange(N_ACTIONS)
        ax, ay, kx, ky, carry, door, c1, act = torch.cartesian_prod(
            g, g, g, g, two, two, two, acts
        ).T
        table = _relevant_rows(
            torch.stack([ax, ay], 1), torch.stack([kx, ky], 1), carry.bool(), door.bool(),
            c1.bool(), act, task, dtype,
        ).to(device)
    return _Tables(
        scale=tensor(scale),
        cell_scale=tensor(world.cell_scale),
        moves=DISTRACTOR_MOVES.to(device, dtype),
        relevant_weights=weights,
        relevant=table,
    )


def transition(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: Task = TASK_A
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The true transition applied to any (possibly noisy) state, without validation.

    Reads positions through rounded, clamped cells and flags thresholded at 0.5, so a noisy
    belief state is stepped exactly like the true state it rounds to. Used by ``step`` and by
    the controlled world models (paper §4.2).

    One pass reads every dim into cells and flags. In a small world the next agent, key,
    flags, reward and events are one row of ``transition_tables`` (``relevant_step`` and
    ``outcome`` tabulated); in a large one ``_relevant_rows`` computes that row. ``c1`` bits
    stay, ``c2`` bits toggle, ``d1`` distractors take one of five clipped moves and ``d2``
    distractors are redrawn: first all the ``d1`` moves, then all the ``d2`` cells.

    Args:
        state: ``(B, S)`` float, normalized ``[0, 1]``, finite (``S = task.world.state_dim``).
        action: ``(B,)`` long in ``0..3``.
        generator: draws the distractor moves.
        task: the world, and the reward and termination cells (the next state does not
            depend on them).

    Returns:
        ``(next_state, reward, terminated, info)`` as in ``step``.
    """
    world = task.world
    tables = transition_tables(task, state.device, state.dtype)
    b, s = state.shape[0], world.state_dim
    read = torch.mul(state, tables.scale, out=state.new_empty(b, s))
    # Scalar clamps: a clamp with per-dim bounds costs more than both together.
    read.round_().clamp_(0, world.size - 1)
    read[:, _flag_span(world)].clamp_(max=1)
    relevant = None
    if tables.relevant is not None:
        relevant = torch.mv(read, tables.relevant_weights).long().add_(action)
    d1, d2 = _span(world.d1_dims), _span(world.d2_dims)
    device = state.device
    move = torch.randint(
        0, DISTRACTOR_MOVES.shape[0], (b, world.d1), generator=generator, device=device
    )
    cells = random_cells((b, world.d2), generator, world)
    if relevant is not None:
        # embedding is torch's fast row gather (index_select allocates its result slowly on CPU).
        rows = torch.nn.functional.embedding(relevant, tables.relevant)
    else:
        flags = read[:, CARRYING : C1 + 1] > 0.5
        rows = _relevant_rows(
            read[:, AGENT_X : AGENT_Y + 1].long(), read[:, KEY_X : KEY_Y + 1].long(),
            flags[:, 0], flags[:, 1], flags[:, 2], action, task, state.dtype,
        )
    reward = rows[:, _REWARD_COL].to(torch.float32, copy=True)
    events = torch.empty(len(_EVENTS), b, dtype=torch.bool, device=device)
    torch.gt(rows[:, _REWARD_COL + 1 :].T, 0.5, out=events)
    # A row is as wide as the default world's state: there the row becomes the next state.
    nxt = rows if s == rows.shape[1] else state.new_empty(b, s)
    if nxt is not rows:
        nxt[:, : C1 + 1] = rows[:, : C1 + 1]
    # Empty parts are skipped: on a small batch every op's dispatch shows.
    if world.c1 > 1:
        extra_c1 = slice(C1 + 1, C1 + world.c1)
        nxt[:, extra_c1] = read[:, extra_c1]
    if world.c2:
        c2 = _span(world.c2_dims)
        torch.sub(1.0, read[:, c2], out=nxt[:, c2])
    if world.d1:
        walked = torch.nn.functional.embedding(move, tables.moves)
        walked.add_(read[:, d1].view(b, world.d1, 2)).clamp_(0, world.size - 1)
        torch.div(walked.view(b, 2 * world.d1), tables.cell_scale, out=nxt[:, d1])
    if world.d2:
        # A 0-dim divisor of the state's dtype divides in that dtype, as cells.to(dtype) / 7.
        torch.div(cells.view(b, 2 * world.d2), tables.cell_scale, out=nxt[:, d2])
    info = dict(zip(_EVENTS, events, strict=True))
    return nxt, reward, info["goal"] | info["hazard"], info


def step(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: Task = TASK_A
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """One true environment step for a batch (paper §3, appendix D).

    Args:
        state: ``(B, S)`` float, normalized ``[0, 1]`` (``S = task.world.state_dim``, 12 in
            the default world).
        action: ``(B,)`` integer in ``0..3`` (up, down, left, right).
        generator: explicit source of the distractor randomness (d1 walk, d2 redraw).
        task: the world and the reward and termination cells.

    Returns:
        ``next_state`` ``(B, S)``; ``reward`` ``(B,)`` float; ``terminated`` ``(B,)`` bool
        (goal or hazard reached); ``info``: dict of ``(B,)`` bool event tensors ``pickup``,
        ``door_opened``, ``goal``, ``hazard``.

    Raises:
        ValueError: on a malformed or non-finite state (or one of another world's width) or
            bad actions.
        TypeError: if ``task`` is not a ``Task``.
    """
    check(task)
    check_state(state, world=task.world)
    check_action(action, state.shape[0])
    return transition(state, action.long(), generator, task)


def _columns(value: torch.Tensor, batch: int, width: int) -> torch.Tensor:
    return value.reshape(batch, width)


def encode(
    agent: torch.Tensor,
    key: torch.Tensor,
    carrying: torch.Tensor,
    door_open: torch.Tensor,
    c1: torch.Tensor,
    c2: torch.Tensor,
    d1: torch.Tensor,
    d2: torch.Tensor,
    world: World,
) -> torch.Tensor:
    """Build ``(B, S)`` float32 states of ``world`` from integer cells and flags.

    Args:
        agent, key: ``(B, 2)`` long cells.
        carrying, door_open: ``(B,)`` bool.
        c1, c2: ``(B, world.c1)`` and ``(B, world.c2)`` bool bits (``(B,)`` for one bit).
        d1, d2: ``(B, world.d1, 2)`` and ``(B, world.d2, 2)`` cells (``(B, 2)`` for one).

    Raises:
        RuntimeError: if a part does not have the world's number of bits or distractors.
    """
    b, scale = agent.shape[0], world.cell_scale
    cols = [agent / scale, key / scale]
    cols += [f.float().unsqueeze(1) for f in (carrying, door_open)]
    cols += [_columns(c1, b, world.c1).float(), _columns(c2, b, world.c2).float()]
    cols += [_columns(d1, b, 2 * world.d1) / scale, _columns(d2, b, 2 * world.d2) / scale]
    return torch.cat(cols, dim=1).float()


def reset(batch: int, generator: torch.Generator, task: Task = TASK_A) -> torch.Tensor:
    """Initial states (paper §3): agent and key on distinct uniform cells west of the wall
    (``start_cells``: ``x <= 4`` in the default world), the colour bits ~ Bernoulli(0.5),
    distractors on uniform cells, door closed, key not carried.

    Args:
        batch: number of episodes ``B`` >= 1.
        generator: explicit randomness; the states live on ``generator.device``.
        task: the task played, and its world; every task of a world starts from this
            distribution.

    Returns:
        ``(B, S)`` float32 states (``S = task.world.state_dim``).

    Raises:
        ValueError: if ``batch < 1``.
        TypeError: if ``task`` is not a ``Task``.
    """
    check(task)
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    world = task.world
    device = generator.device
    cells = start_cells(world).to(device)
    n_west = cells.shape[0]
    agent_idx = torch.randint(0, n_west, (batch,), generator=generator, device=device)
    offset = torch.randint(1, n_west, (batch,), generator=generator, device=device)
    agent = cells[agent_idx]
    key = cells[(agent_idx + offset) % n_west]
    bits = torch.randint(
        0, 2, (batch, world.c1 + world.c2), generator=generator, device=device
    ).bool()
    d1 = random_cells((batch, world.d1), generator, world)
    d2 = random_cells((batch, world.d2), generator, world)
    no = torch.zeros(batch, dtype=torch.bool, device=device)
    c1, c2 = bits[:, : world.c1], bits[:, world.c1 :]
    return encode(agent, key, no, no, c1, c2, d1, d2, world)
