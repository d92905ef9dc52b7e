"""The factored gridworld as batched pure functions over ``(B, 12)`` state tensors.

Paper §3 and appendix D. ``reset`` and ``step`` never loop over episodes in Python and draw
every random number from an explicit ``torch.Generator``, so the same seed gives the same
episodes on the same device. The task (``gridplan.core.tasks.Task``) supplies the goal and hazard
cells. ``step`` returns ``terminated`` only; truncation at ``task.horizon`` is the caller's
business (``gridplan.planning.closed_loop``, ``gridplan.data.datasets``).

Letter legend used in shapes: ``B`` batch rows, ``S`` = 12 state dimensions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    C1,
    C2,
    CARRYING,
    CELL_SCALE,
    D1_X,
    D1_Y,
    D2_X,
    D2_Y,
    DISTRACTOR_MOVES,
    DOOR_CELL,
    DOOR_OPEN,
    GRID_SIZE,
    KEY_X,
    KEY_Y,
    MOVES,
    N_ACTIONS,
    POSITION_DIMS,
    STATE_DIM,
    WALL_X,
)
from gridplan.core.tasks import GOAL_REWARD, HAZARD_REWARD, TASK_A, Task, check

#: Cells of the western chamber (x <= 4) in which agent and key start: (40, 2) long.
WEST_CELLS = torch.tensor(
    [(x, y) for x in range(WALL_X) for y in range(GRID_SIZE)], dtype=torch.long
)


def check_state(state: torch.Tensor, name: str = "state") -> torch.Tensor:
    """Validate a batch of states at a public boundary.

    Args:
        state: ``(B, 12)`` floating tensor.
        name: what to call the tensor in error messages.

    Returns:
        ``state`` unchanged.

    Raises:
        ValueError: if ``state`` is not a tensor, not 2-D with 12 columns, not floating point,
            or holds NaN/inf values.
    """
    if not isinstance(state, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(state).__name__}")
    if state.dim() != 2 or state.shape[1] != STATE_DIM:
        raise ValueError(f"{name} must have shape (B, {STATE_DIM}), got {tuple(state.shape)}")
    if not state.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {state.dtype}")
    # aminmax propagates NaN and costs far less than isfinite(state).all() on CPU.
    if state.numel() and not torch.isfinite(torch.stack(torch.aminmax(state))).all():
        bad = (~torch.isfinite(state)).any(dim=1).nonzero().flatten()[:5].tolist()
        raise ValueError(f"{name} holds non-finite values (NaN or inf) in rows {bad}")
    return state


def check_action(action: torch.Tensor, batch: int) -> torch.Tensor:
    """Validate a batch of actions.

    Args:
        action: ``(B,)`` integer tensor with values in ``0..3``.
        batch: expected ``B``.

    Raises:
        ValueError: on a wrong shape, a non-integer dtype or a value outside ``0..3``.
    """
    if not isinstance(action, torch.Tensor):
        raise ValueError(f"action must be a torch.Tensor, got {type(action).__name__}")
    if action.shape != (batch,):
        raise ValueError(f"action must have shape ({batch},), got {tuple(action.shape)}")
    if action.is_floating_point() or action.dtype == torch.bool:
        raise ValueError(f"action must be an integer tensor, got dtype {action.dtype}")
    if action.numel():
        low, high = (int(v) for v in torch.aminmax(action))
        if low < 0 or high >= N_ACTIONS:
            raise ValueError(
                f"action values must lie in 0..{N_ACTIONS - 1}, got range [{low}, {high}]"
            )
    return action


def to_cell(coord: torch.Tensor) -> torch.Tensor:
    """Normalized coordinates -> integer cells: round to the nearest cell, clamp to the grid."""
    return torch.round(coord * CELL_SCALE).clamp_(0, GRID_SIZE - 1).long()


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

    Returns:
        The next relevant state and the ``pickup`` / ``door_opened`` events, as RelevantStep.
    """
    target = agent + MOVES.to(agent.device).index_select(0, action)
    tx, ty = target[:, 0], target[:, 1]
    on_grid = (tx >= 0) & (tx < GRID_SIZE) & (ty >= 0) & (ty < GRID_SIZE)
    at_door = (tx == DOOR_CELL[0]) & (ty == DOOR_CELL[1])
    in_wall = (tx == WALL_X) & ~at_door
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


def random_cells(batch: int, generator: torch.Generator) -> torch.Tensor:
    """``(batch, 2)`` long cells drawn uniformly over the whole grid."""
    return torch.randint(0, GRID_SIZE, (batch, 2), generator=generator, device=generator.device)


#: Rounding scale of the state dims as the transition reads them: positions
#: ``clamp(round(7 v), 0, 7)`` (``to_cell``), flags ``clamp(round(v), 0, 1)``, which equals
#: ``to_flag``'s ``v > 0.5`` for every finite ``v`` (``round`` halves to even: 0.5 -> 0).
_READ_SCALE = tuple(CELL_SCALE if d in POSITION_DIMS else 1.0 for d in range(STATE_DIM))
#: Weights of the read dims in the relevant index
#: ``((((((ax*8 + ay)*8 + kx)*8 + ky)*2 + carrying)*2 + door)*2 + c1)*4`` (+ action) and in the
#: distractor index ``((c2*8 + d1x)*8 + d1y)*5`` (+ move); d2 is read but indexes nothing.
_RELEVANT_WEIGHTS = {
    AGENT_X: 16384, AGENT_Y: 2048, KEY_X: 256, KEY_Y: 32, CARRYING: 16, DOOR_OPEN: 8, C1: 4
}
_DISTRACTOR_WEIGHTS = {
    C2: GRID_SIZE**2 * len(DISTRACTOR_MOVES),
    D1_X: GRID_SIZE * len(DISTRACTOR_MOVES),
    D1_Y: len(DISTRACTOR_MOVES),
}
#: Columns of a relevant-table row past the relevant dims 0..6 (``C1`` is the last): the
#: reward, then the events of ``step``'s info as 0/1.
_REWARD_COL = C1 + 1
_EVENTS = ("pickup", "door_opened", "goal", "hazard")


@dataclass(frozen=True)
class _Tables:
    """The true transition tabulated on every discrete input (``transition_tables``)."""

    scale: torch.Tensor
    relevant_weights: torch.Tensor
    distractor_weights: torch.Tensor
    cell_scale: torch.Tensor
    relevant: torch.Tensor
    distractor: torch.Tensor


@functools.lru_cache(maxsize=32)
def transition_tables(task: Task, device: torch.device, dtype: torch.dtype) -> _Tables:
    """``relevant_step``, ``outcome``, the c2 toggle and the d1 walk on every discrete input.

    ``relevant``: ``(8^4 * 2^3 * 4, 12)`` ``dtype`` rows indexed by agent, key, carrying,
    door, c1 and action (``_RELEVANT_WEIGHTS``): the next agent and key (``cell / 7``),
    carrying, door and c1 in dims 0..6, then the reward and the pickup, door_opened, goal and
    hazard events as 0/1. ``distractor``: ``(2 * 64 * 5, 3)`` the next c2 and d1 position
    (``cell / 7``) per c2, d1 cell and move. Computed by this module's own functions, so a
    row holds exactly what they return; cached per task, device and dtype (6 MB per float32
    table).
    """
    g, two, acts = torch.arange(GRID_SIZE), torch.arange(2), torch.arange(N_ACTIONS)
    ax, ay, kx, ky, carry, door, c1, act = torch.cartesian_prod(g, g, g, g, two, two, two, acts).T
    rel = relevant_step(
        torch.stack([ax, ay], 1), torch.stack([kx, ky], 1), carry.bool(), door.bool(), act
    )
    reward, goal, hazard = outcome(rel.agent, c1.bool(), task)
    columns = [rel.agent.to(dtype) / CELL_SCALE, rel.key.to(dtype) / CELL_SCALE]
    flags = (rel.carrying, rel.door_open, c1, reward, rel.pickup, rel.door_opened, goal, hazard)
    columns += [f.to(dtype).unsqueeze(1) for f in flags]
    c2, dx, dy, move = torch.cartesian_prod(two, g, g, torch.arange(len(DISTRACTOR_MOVES))).T
    walked = (torch.stack([dx, dy], 1) + DISTRACTOR_MOVES[move]).clamp_(0, GRID_SIZE - 1)
    distractor = torch.cat([(c2 == 0).to(dtype).unsqueeze(1), walked.to(dtype) / CELL_SCALE], 1)

    def tensor(values) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    return _Tables(
        scale=tensor(_READ_SCALE),
        relevant_weights=tensor([_RELEVANT_WEIGHTS.get(d, 0) for d in range(STATE_DIM)]),
        distractor_weights=tensor([_DISTRACTOR_WEIGHTS.get(d, 0) for d in range(STATE_DIM)]),
        cell_scale=tensor(CELL_SCALE),
        relevant=torch.cat(columns, dim=1).to(device),
        distractor=distractor.to(device),
    )


def transition(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: Task = TASK_A
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The true transition applied to any (possibly noisy) state, without validation.

    Reads positions through rounded, clamped cells and flags thresholded at 0.5, so a noisy
    belief state is stepped exactly like the true state it rounds to. Used by ``step`` and by
    the controlled world models (paper §4.2).

    One pass reads dims 0..9 into cells and flags and folds them into two table indices; the
    next agent, key, flags, reward and events are one row of ``transition_tables``
    (``relevant_step`` and ``outcome`` tabulated), c2 and the d1 walk another: 17 tensor ops,
    the values of computing them and the same draws (first the d1 moves, then the d2 cells).

    Args:
        state: ``(B, 12)`` float, normalized ``[0, 1]``, finite.
        action: ``(B,)`` long in ``0..3``.
        generator: draws the distractor moves.
        task: the reward and termination cells (the next state does not depend on it).

    Returns:
        ``(next_state, reward, terminated, info)`` as in ``step``.
    """
    tables = transition_tables(task, state.device, state.dtype)
    b = state.shape[0]
    read = torch.mul(state, tables.scale, out=state.new_empty(b, STATE_DIM))
    # Scalar clamps: a clamp with per-dim bounds costs more than both together.
    read.round_().clamp_(0, GRID_SIZE - 1)
    read[:, CARRYING : C2 + 1].clamp_(max=1)
    relevant = torch.mv(read, tables.relevant_weights).long().add_(action)
    distractor = torch.mv(read, tables.distractor_weights).long()
    move = torch.randint(
        0, DISTRACTOR_MOVES.shape[0], (b,), generator=generator, device=state.device
    )
    d2 = random_cells(b, generator)
    # embedding is torch's fast row gather (index_select allocates its result slowly on CPU).
    nxt = torch.nn.functional.embedding(relevant, tables.relevant)
    reward = nxt[:, _REWARD_COL].to(torch.float32, copy=True)
    events = torch.empty(len(_EVENTS), b, dtype=torch.bool, device=state.device)
    torch.gt(nxt[:, _REWARD_COL + 1 :].T, 0.5, out=events)
    nxt[:, C2 : D1_Y + 1] = torch.nn.functional.embedding(distractor.add_(move), tables.distractor)
    # A 0-dim divisor of the state's dtype divides in that dtype, as d2.to(dtype) / 7 does.
    torch.div(d2, tables.cell_scale, out=nxt[:, D2_X : D2_Y + 1])
    info = dict(zip(_EVENTS, events, strict=True))
    return nxt, reward, info["goal"] | info["hazard"], info


def step(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: Task = TASK_A
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """One true environment step for a batch (paper §3, appendix D).

    Args:
        state: ``(B, 12)`` float, normalized ``[0, 1]``.
        action: ``(B,)`` integer in ``0..3`` (up, down, left, right).
        generator: explicit source of the distractor randomness (d1 walk, d2 redraw).
        task: the reward and termination cells.

    Returns:
        ``next_state`` ``(B, 12)``; ``reward`` ``(B,)`` float; ``terminated`` ``(B,)`` bool
        (goal or hazard reached); ``info``: dict of ``(B,)`` bool event tensors ``pickup``,
        ``door_opened``, ``goal``, ``hazard``.

    Raises:
        ValueError: on a malformed or non-finite state or bad actions.
        TypeError: if ``task`` is not a ``Task``.
    """
    check(task)
    check_state(state)
    check_action(action, state.shape[0])
    return transition(state, action.long(), generator, task)


def encode(
    agent: torch.Tensor,
    key: torch.Tensor,
    carrying: torch.Tensor,
    door_open: torch.Tensor,
    c1: torch.Tensor,
    c2: torch.Tensor,
    d1: torch.Tensor,
    d2: torch.Tensor,
) -> torch.Tensor:
    """Build ``(B, 12)`` float states from integer cells ``(B, 2)`` and flags ``(B,)``."""
    cols = [agent / CELL_SCALE, key / CELL_SCALE]
    cols += [f.float().unsqueeze(1) for f in (carrying, door_open, c1, c2)]
    cols += [d1 / CELL_SCALE, d2 / CELL_SCALE]
    return torch.cat(cols, dim=1).float()


def reset(batch: int, generator: torch.Generator, task: Task = TASK_A) -> torch.Tensor:
    """Initial states (paper §3): agent and key on distinct uniform western cells (x <= 4),
    ``c1``, ``c2`` ~ Bernoulli(0.5), distractors on uniform cells, door closed, key not carried.

    Args:
        batch: number of episodes ``B`` >= 1.
        generator: explicit randomness; the states live on ``generator.device``.
        task: the task played; every task starts from this distribution (checked for an
            early error).

    Returns:
        ``(B, 12)`` float32 states.

    Raises:
        ValueError: if ``batch < 1``.
        TypeError: if ``task`` is not a ``Task``.
    """
    check(task)
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    device = generator.device
    n_west = WEST_CELLS.shape[0]
    agent_idx = torch.randint(0, n_west, (batch,), generator=generator, device=device)
    offset = torch.randint(1, n_west, (batch,), generator=generator, device=device)
    cells = WEST_CELLS.to(device)
    agent = cells[agent_idx]
    key = cells[(agent_idx + offset) % n_west]
    bits = torch.randint(0, 2, (batch, 2), generator=generator, device=device).bool()
    d1 = random_cells(batch, generator)
    d2 = random_cells(batch, generator)
    no = torch.zeros(batch, dtype=torch.bool, device=device)
    return encode(agent, key, no, no, bits[:, 0], bits[:, 1], d1, d2)
