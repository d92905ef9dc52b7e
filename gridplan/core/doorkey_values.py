"""Exact values of the DoorKey world: V*, Q* and shortest remaining steps, per layout.

A layout (wall column, door row) fixes the grid; within it a state is agent cell x heading x
key (a cell, or carried) x door state: ``N^2 * 4 * (N^2 + 1) * 3`` indices (49,920 in the
8x8 world, 789,504 in the 16x16), of which ``env.valid`` keeps the reachable kinds (a dropped
key may lie anywhere in either room, so they are all kept). The transitions are
``env.transition`` itself, applied to every index with every action once, so the table can
never disagree with the environment. Two Bellman backups are fixed (exactly: the dynamics
are deterministic, so after the longest shortest path both are):

* the discounted value the planner reads, reward 1 on arriving at the goal, discount
  ``gamma``: ``V*(s) = max_a [goal(s, a) + (1 - goal(s, a)) gamma V*(s')]``, so ``V* =
  gamma^(d - 1)`` with ``d`` the shortest number of steps to the goal (our reading, as in
  ``gridplan.core.values``; terminal states, the agent on the goal, have 0);
* ``d(s) = min_a [1 if goal(s, a) else 1 + d(s')]``, the shortest remaining steps.

Only ``d`` is swept until it stops changing; after ``k`` sweeps the value sweep would hold
``gamma`` multiplied in ``d - 1`` times where ``d <= k`` and 0 elsewhere (``x -> gamma x``
rounds monotonically, so the best successor is the nearest), so V* is read off ``d``,
bit for bit what sweeping both gives, in as many sweeps.

The finite-horizon values of the lookahead anchor policies (``gridplan.evaluation.anchors``)
fall out of ``d`` the same way: ``V_0 = 0``, ``V_k(s) = max_a [goal(s, a) + (1 - goal(s, a))
gamma V_{k-1}(s')]`` with 0 at terminal states is what the ``k``-th value sweep holds, V*
where ``d <= k`` and 0 elsewhere (``horizon_values``).

MiniGrid's own return depends on the step count ``t`` (``1 - 0.9 (t + d) / max_steps`` when
the goal is reached at ``t + d <= max_steps``, else 0); it is maximised by the shortest path,
so ``minigrid_return`` reads it off ``d`` exactly. Tables are built lazily, one per layout, and
cached (``layout_values``); ``DoorKeyValues`` looks up batches that mix layouts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from gridplan.core.constants import DEFAULT_GAMMA
from gridplan.core.doorkey_constants import (
    AGENT_X,
    AGENT_Y,
    CARRYING,
    DOOR,
    DOOR_Y,
    HEADING,
    KEY_X,
    KEY_Y,
    N_ACTIONS,
    N_DOOR_STATES,
    N_HEADINGS,
    STATE_DIM,
    STEP,
    SUCCESS_PENALTY,
    WALL_X,
)
from gridplan.core.doorkey_env import check_state, transition, valid
from gridplan.core.doorkey_world import DoorKey

#: ``d`` of a state from which the goal cannot be reached.
UNREACHABLE = -1
#: Most states one layout's value iteration may enumerate (``N = 30``: 3.2 M); its working
#: memory is about 250 bytes per state.
MAX_LAYOUT_STATES = 4 * 2**20
#: ``d`` of a state not (yet) known to reach the goal; int32, above any distance.
_FAR = 2**30


def layout_size(world: DoorKey) -> int:
    """States of one layout's table: ``N^2 * 4 * (N^2 + 1) * 3``."""
    cells = world.size**2
    return cells * N_HEADINGS * (cells + 1) * N_DOOR_STATES


def state_index(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """Index of ``(B, 10)`` states in their layout's table, ``(B,)`` int64: agent x, agent
    y, heading, key (``x N + y``, or ``N^2`` carried), door; the last varies fastest."""
    n = world.size
    key = state[:, KEY_Y].add(state[:, KEY_X], alpha=n).masked_fill_(state[:, CARRYING] == 1, n * n)
    heading = N_DOOR_STATES * (n * n + 1)
    index = state[:, DOOR].add(key, alpha=N_DOOR_STATES).add_(state[:, HEADING], alpha=heading)
    cell = heading * N_HEADINGS
    return index.add_(state[:, AGENT_Y], alpha=cell).add_(state[:, AGENT_X], alpha=cell * n)


def layout_states(world: DoorKey, wall_x: int, door_y: int) -> torch.Tensor:
    """Every index of one layout as ``(layout_size, 10)`` int64 states, in ``state_index``
    order (step 0; most are not ``valid``)."""
    n = world.size
    cells, keys = torch.arange(n), torch.arange(n * n + 1)
    # Dims agent x, agent y, heading, key, door (the last fastest), each dim broadcast.
    state = torch.zeros(n, n, N_HEADINGS, n * n + 1, N_DOOR_STATES, STATE_DIM, dtype=torch.long)
    state[..., AGENT_X] = cells.view(n, 1, 1, 1, 1)
    state[..., AGENT_Y] = cells.view(1, n, 1, 1, 1)
    state[..., HEADING] = torch.arange(N_HEADINGS).view(1, 1, N_HEADINGS, 1, 1)
    state[..., DOOR] = torch.arange(N_DOOR_STATES)
    state[..., KEY_X] = (keys // n).view(1, 1, 1, -1, 1)
    state[..., KEY_Y] = (keys % n).view(1, 1, 1, -1, 1)
    carried = state[:, :, :, n * n]
    carried[..., KEY_X], carried[..., KEY_Y] = state[:, :, :, 0, :, AGENT_X], cells.view(1, n, 1, 1)
    carried[..., CARRYING] = 1
    state[..., WALL_X], state[..., DOOR_Y] = wall_x, door_y
    return state.view(-1, STATE_DIM)


@dataclass(frozen=True)
class LayoutValues:
    """Exact values of one layout, indexed by ``state_index``.

    Attributes:
        values: ``(layout_size,)`` float64 V* (0 on terminal and invalid states).
        distance: ``(layout_size,)`` int64 shortest remaining steps, ``UNREACHABLE`` where the
            goal cannot be reached or the index is not a valid state.
        sweeps: Bellman sweeps until the fixed point.
    """

    values: torch.Tensor
    distance: torch.Tensor
    sweeps: int


def _transitions(states: torch.Tensor, world: DoorKey) -> tuple[torch.Tensor, torch.Tensor]:
    """``(7, S)`` next indices and goal flags of every state under every action (one action
    per row: the sweeps reduce over rows, which is several times faster than over a last dim
    of 7)."""
    nxt, goal = [], []
    for a in range(N_ACTIONS):
        action = torch.full((states.shape[0],), a, dtype=torch.long)
        after, _, reached, _, _ = transition(states, action, world)
        nxt.append(state_index(after, world))
        goal.append(reached)
    return torch.stack(nxt), torch.stack(goal)


def _distances(
    nxt: torch.Tensor, goal: torch.Tensor, stop: torch.Tensor
) -> tuple[torch.Tensor, int]:
    """Shortest remaining steps by Bellman sweeps ``d(s) = min_a [1 if goal(s, a) else 1 +
    d(s')]`` from ``d = 0`` on terminal states and ``_FAR`` elsewhere, until nothing changes.

    Args:
        nxt: ``(7, S)`` compact next indices; goal: ``(7, S)`` bool; stop: ``(S,)`` bool.

    Returns:
        ``(S,)`` int32 steps (``_FAR`` where the goal cannot be reached) and the sweeps.
    """
    size = stop.shape[0]
    # Two extra entries: the goal, reached in the step (d 0 there, 1 + 0 after the step), and
    # where every action of a terminal state leads (-1, so the terminal state keeps 0).
    at = nxt.masked_fill(goal, size).masked_fill_(stop, size + 1).int().flatten()
    d = torch.full((size + 2,), _FAR, dtype=torch.int32)
    d[:size].masked_fill_(stop, 0)
    d[size], d[size + 1] = 0, -1
    sweeps = 0
    while True:
        sweeps += 1
        after = d.index_select(0, at).view(N_ACTIONS, size)
        best = after[0]
        for row in after[1:]:
            torch.minimum(best, row, out=best)
        best.add_(1).clamp_(max=_FAR)
        if torch.equal(best, d[:size]):
            return best, sweeps
        d[:size] = best


def _discounted(distance: torch.Tensor, gamma: float) -> torch.Tensor:
    """``(S,)`` float64 V* of ``(S,)`` shortest steps: ``gamma`` multiplied in once per step
    beyond the first, in float64 (``gamma^(d - 1)`` as the Bellman sweeps
    ``V(s) = max_a [goal(s, a) + (1 - goal(s, a)) gamma V(s')]`` round it); 0 where ``d`` is 0
    (terminal) or ``_FAR``.

    The sweeps' value is this exactly: ``x -> gamma * x`` rounds monotonically, so the best
    successor's value is that of the nearest, one step closer.
    """
    reachable = distance < _FAR
    top = int(distance[reachable].max()) if reachable.any() else 0
    power = torch.zeros(top + 2, dtype=torch.float64)
    value = 1.0
    for steps in range(1, top + 1):
        power[steps] = value
        value = value * gamma
    return power[distance.long().clamp_(max=top + 1)]


@functools.lru_cache(maxsize=32)
def layout_values(world: DoorKey, wall_x: int, door_y: int, gamma: float) -> LayoutValues:
    """Value iteration on one layout (module docstring). Cached per world, layout and gamma.

    Raises:
        ValueError: if the layout is outside the grid's ranges, ``gamma`` is not in
            ``(0, 1)``, or the table exceeds ``MAX_LAYOUT_STATES``.
    """
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
    if not (2 <= wall_x <= world.size - 3 and 1 <= door_y <= world.size - 2):
        raise ValueError(
            f"layout (wall_x={wall_x}, door_y={door_y}) is outside {world.name}: wall_x in "
            f"2..{world.size - 3}, door_y in 1..{world.size - 2}"
        )
    if layout_size(world) > MAX_LAYOUT_STATES:
        raise ValueError(
            f"{world.name} has {layout_size(world):,} states per layout, more than exact "
            f"values enumerate ({MAX_LAYOUT_STATES:,}: gridplan.core.doorkey_values)"
        )
    states = layout_states(world, wall_x, door_y)
    ok = valid(states, world)
    # Iterate over the valid states only (a fifth of the indices at 8x8, a half at 16x16); the
    # valid states are closed under the dynamics, so every successor has a compact id.
    full = ok.nonzero().flatten()
    compact = torch.full((ok.shape[0],), -1, dtype=torch.long)
    compact[full] = torch.arange(full.shape[0])
    states = states[full]
    nxt, goal = _transitions(states, world)
    nxt = compact[nxt]
    if (nxt < 0).any():
        raise RuntimeError(f"{world.name}: a valid state stepped to an invalid one")
    goal_x, goal_y = world.goal
    stop = (states[:, AGENT_X] == goal_x) & (states[:, AGENT_Y] == goal_y)
    d, sweeps = _distances(nxt, goal, stop)
    values = torch.zeros(ok.shape[0], dtype=torch.float64)
    values[full] = _discounted(d, gamma)
    distance = torch.full((ok.shape[0],), UNREACHABLE, dtype=torch.long)
    distance[full] = d.long().masked_fill_(d >= _FAR, UNREACHABLE)
    return LayoutValues(values=values, distance=distance, sweeps=sweeps)


def horizon_values(
    world: DoorKey, wall_x: int, door_y: int, gamma: float, steps: int
) -> torch.Tensor:
    """Optimal ``steps``-step values of one layout without a terminal heuristic, indexed by
    ``state_index``: ``(layout_size,)`` float64, ``V_steps`` of the module docstring (V*
    where the goal is at most ``steps`` steps away, else 0). ``r + gamma V_{d-1}(s')`` is
    then the depth-``d`` full-width search value of first action ``a`` with a zero leaf
    value, as ``gridplan.evaluation.anchors.finite_horizon_values`` in the paper's world.

    Raises:
        ValueError: if ``steps < 0``, or as ``layout_values``.
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    exact = layout_values(world, wall_x, door_y, gamma)
    return exact.values.masked_fill(exact.distance > steps, 0.0)


class DoorKeyValues:
    """Exact V*, Q*, shortest remaining steps and MiniGrid's optimal return of batches of
    DoorKey states that may mix layouts (one lazily built table per layout met).

    Args:
        world: the grid.
        gamma: discount of ``V*`` and ``Q*`` (``gridplan.core.constants.DEFAULT_GAMMA``, 0.95).

    Raises:
        ValueError: if ``gamma`` is not in ``(0, 1)``.
    """

    def __init__(self, world: DoorKey, gamma: float = DEFAULT_GAMMA) -> None:
        if not 0.0 < float(gamma) < 1.0:
            raise ValueError(f"gamma must lie in (0, 1), got {gamma!r}")
        self.world, self.gamma = world, float(gamma)

    def _lookup(self, state: torch.Tensor, field: str) -> torch.Tensor:
        idx = state_index(state, self.world).cpu()
        layout = (state[:, WALL_X] * self.world.size + state[:, DOOR_Y]).cpu()
        out = None
        for code in layout.unique().tolist():
            rows = layout == code
            wall_x, door_y = divmod(code, self.world.size)
            table = getattr(layout_values(self.world, wall_x, door_y, self.gamma), field)
            if out is None:
                out = torch.empty(state.shape[0], dtype=table.dtype)
            out[rows] = table[idx[rows]]
        return out.to(state.device)

    def values(self, state: torch.Tensor) -> torch.Tensor:
        """V* of ``(B, 10)`` valid states: ``(B,)`` float64 (``check_state`` raises on others)."""
        return self._lookup(check_state(state, self.world), "values")

    def distance(self, state: torch.Tensor) -> torch.Tensor:
        """Shortest remaining steps to the goal: ``(B,)`` int64, ``UNREACHABLE`` if none."""
        return self._lookup(check_state(state, self.world), "distance")

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        """``Q*(s, a) = goal(s, a) + (1 - goal(s, a)) gamma V*(s')``: ``(B, 7)`` float64; 0 in
        terminal states (the agent on the goal)."""
        check_state(state, self.world)
        q = []
        for a in range(N_ACTIONS):
            action = torch.full((state.shape[0],), a, dtype=torch.long, device=state.device)
            after, _, goal, _, _ = transition(state, action, self.world)
            q.append(torch.where(goal, 1.0, self.gamma * self._lookup(after, "values")))
        goal_x, goal_y = self.world.goal
        done = (state[:, AGENT_X] == goal_x) & (state[:, AGENT_Y] == goal_y)
        return torch.stack(q, dim=1).masked_fill_(done.unsqueeze(1), 0.0)

    def greedy(self, state: torch.Tensor) -> torch.Tensor:
        """An optimal action per row, the first maximiser of ``Q*``: ``(B,)`` int64."""
        return self.q_values(state).argmax(dim=1)

    def minigrid_return(self, state: torch.Tensor) -> torch.Tensor:
        """MiniGrid's optimal return from ``state`` at its step count ``t``: ``(B,)`` float64
        ``1 - 0.9 (t + d) / max_steps`` if the goal is reachable by ``max_steps``, else 0."""
        d = self.distance(state)
        arrive = state[:, STEP] + d
        reach = (d != UNREACHABLE) & (d > 0) & (arrive <= self.world.max_steps)
        reward = 1.0 - SUCCESS_PENALTY * (arrive.double() / self.world.max_steps)
        return torch.where(reach, reward, 0.0)
