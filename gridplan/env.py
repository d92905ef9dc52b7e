"""The factored gridworld as batched pure functions over ``(B, 12)`` state tensors.

Paper §3 and appendix D. ``reset`` and ``step`` never loop over episodes in Python and draw
every random number from an explicit ``torch.Generator``, so the same seed gives the same
episodes on the same device. The task (``gridplan.tasks.Task``) supplies the goal and hazard
cells. ``step`` returns ``terminated`` only; truncation at ``task.horizon`` is the caller's
business (``gridplan.closed_loop``, ``gridplan.data``).

Letter legend used in shapes: ``B`` batch rows, ``S`` = 12 state dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gridplan.constants import (
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
    STATE_DIM,
    WALL_X,
)
from gridplan.tasks import GOAL_REWARD, HAZARD_REWARD, TASK_A, Task, check

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
    if not torch.isfinite(state).all():
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
    if action.numel() and (action.min() < 0 or action.max() >= N_ACTIONS):
        raise ValueError(
            f"action values must lie in 0..{N_ACTIONS - 1}, got range "
            f"[{int(action.min())}, {int(action.max())}]"
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


def walk_distractor(cell: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One step of the d1 random walk: one of the 4 moves or stay, clipped to the grid.

    Args:
        cell: ``(B, 2)`` long cells.
        generator: source of the move draws.

    Returns:
        ``(B, 2)`` long cells.
    """
    move = torch.randint(
        0, DISTRACTOR_MOVES.shape[0], (cell.shape[0],), generator=generator, device=cell.device
    )
    return (cell + DISTRACTOR_MOVES.to(cell.device).index_select(0, move)).clamp_(0, GRID_SIZE - 1)


def transition(
    state: torch.Tensor, action: torch.Tensor, generator: torch.Generator, task: Task = TASK_A
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """The true transition applied to any (possibly noisy) state, without validation.

    Reads positions through rounded, clamped cells and flags thresholded at 0.5, so a noisy
    belief state is stepped exactly like the true state it rounds to. Used by ``step`` and by
    the controlled world models (paper §4.2).

    Args:
        state: ``(B, 12)`` float, normalized ``[0, 1]``.
        action: ``(B,)`` long in ``0..3``.
        generator: draws the distractor moves.
        task: the reward and termination cells (the next state does not depend on it).

    Returns:
        ``(next_state, reward, terminated, info)`` as in ``step``.
    """
    agent = to_cell(state[:, AGENT_X : AGENT_Y + 1])
    key = to_cell(state[:, KEY_X : KEY_Y + 1])
    flags = to_flag(state[:, CARRYING : C2 + 1])
    rel = relevant_step(agent, key, flags[:, 0], flags[:, 1], action)
    d1 = walk_distractor(to_cell(state[:, D1_X : D1_Y + 1]), generator)
    d2 = random_cells(state.shape[0], generator)
    c1 = flags[:, C1 - CARRYING]
    reward, goal, hazard = outcome(rel.agent, c1, task)
    dtype = state.dtype
    nxt = torch.empty_like(state)
    nxt[:, AGENT_X : AGENT_Y + 1] = rel.agent.to(dtype) / CELL_SCALE
    nxt[:, KEY_X : KEY_Y + 1] = rel.key.to(dtype) / CELL_SCALE
    nxt[:, CARRYING] = rel.carrying.to(dtype)
    nxt[:, DOOR_OPEN] = rel.door_open.to(dtype)
    nxt[:, C1] = c1.to(dtype)
    nxt[:, C2] = (~flags[:, C2 - CARRYING]).to(dtype)
    nxt[:, D1_X : D1_Y + 1] = d1.to(dtype) / CELL_SCALE
    nxt[:, D2_X : D2_Y + 1] = d2.to(dtype) / CELL_SCALE
    info = {"pickup": rel.pickup, "door_opened": rel.door_opened, "goal": goal, "hazard": hazard}
    return nxt, reward, goal | hazard, info


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
