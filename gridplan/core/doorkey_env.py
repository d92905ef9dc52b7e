"""MiniGrid DoorKey as pure batched functions over ``(B, 10)`` int64 states.

``reset(batch, generator, world)`` draws layouts from MiniGrid's distribution;
``step(state, action, world)`` is ``MiniGridEnv.step`` on every row at once (DoorKey has no
randomness after reset, so ``step`` takes no generator). Both never loop over episodes in
Python. The semantics are MiniGrid 3.2.0's (``minigrid/minigrid_env.py``,
``minigrid/core/world_object.py``), checked transition by transition against it
(``tests/core/test_minigrid_doorkey.py``):

* ``left``/``right`` turn; ``forward`` enters an empty cell, the goal or an open door (walls,
  the key and a closed or locked door block); reaching the goal terminates with reward
  ``1 - 0.9 * steps / max_steps``, ``steps`` counted after this step;
* ``pickup`` takes the key from the cell in front when the hands are empty; ``drop`` puts the
  carried key on the cell in front if it is empty (not a wall, the door or the goal);
* ``toggle`` on the door: a locked door opens if the key is carried; an unlocked door flips
  between open and closed (so an open door can be closed again, and reopened without the key);
* every step counts; ``truncated`` once ``steps >= max_steps`` (both flags can be set at once).

A carried key's cell is the agent's (MiniGrid removes it from the grid). Letter legend: ``B``
batch rows; the state dims are named in ``gridplan.core.doorkey_constants``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from gridplan.core import checks
from gridplan.core.doorkey_constants import (
    AGENT_X,
    AGENT_Y,
    CARRYING,
    CLOSED,
    DIR_VECTORS,
    DOOR,
    DOOR_OBJECT,
    DOOR_Y,
    DROP,
    EMPTY,
    FORWARD,
    GOAL,
    HEADING,
    KEY_OBJECT,
    KEY_X,
    KEY_Y,
    LEFT,
    LOCKED,
    N_ACTIONS,
    N_DOOR_STATES,
    N_HEADINGS,
    OPEN,
    PICKUP,
    RIGHT,
    STATE_DIM,
    STEP,
    SUCCESS_PENALTY,
    TOGGLE,
    WALL,
    WALL_X,
)
from gridplan.core.doorkey_world import DoorKey

#: Random integers are drawn below this bound and reduced modulo the count of choices, so
#: every draw is uniform up to a relative bias of ``count / 2^62``.
_DRAW_BOUND = 2**62


def columns(state: torch.Tensor) -> torch.Tensor:
    """``(10, B)``: the dims of ``(B, 10)`` states as contiguous rows (``cols[AGENT_X]``);
    elementwise work on a strided column of the state costs several times more."""
    return state.t().contiguous()


def objects_at(
    x: torch.Tensor, y: torch.Tensor, cols: torch.Tensor, world: DoorKey
) -> torch.Tensor:
    """MiniGrid object code of the grid cells ``(x, y)`` of each row's world.

    Cells off the grid are walls (MiniGrid's ``Grid.slice`` fills them so). The agent is not
    an object of the grid; a carried key is not on it.

    Args:
        x, y: ``(B, ...)`` int64 cells, any trailing shape.
        cols: ``(10, B)`` int64 state columns (``columns``; the layout, the key and carrying
            are read).
        world: the grid size.

    Returns:
        ``(B, ...)`` int64 codes: ``EMPTY``, ``WALL``, ``DOOR_OBJECT``, ``KEY_OBJECT``, ``GOAL``.
    """
    n, shape = world.size, (-1, *([1] * (x.dim() - 1)))
    in_column = x == cols[WALL_X].view(shape)
    door = in_column & (y == cols[DOOR_Y].view(shape))
    wall = (x <= 0) | (x >= n - 1) | (y <= 0) | (y >= n - 1) | (in_column & ~door)
    key = (x == cols[KEY_X].view(shape)) & (y == cols[KEY_Y].view(shape))
    key &= cols[CARRYING].view(shape) == 0
    goal = (x == n - 2) & (y == n - 2)
    kind = torch.full_like(x, EMPTY)
    kind.masked_fill_(goal, GOAL).masked_fill_(key, KEY_OBJECT)
    return kind.masked_fill_(door, DOOR_OBJECT).masked_fill_(wall, WALL)


def check_action(action: torch.Tensor, batch: int) -> torch.Tensor:
    """Validate ``(B,)`` integer actions in ``0..6``; returns them as int64.

    Raises:
        ValueError: on a wrong shape, a non-integer dtype or a value outside ``0..6``.
    """
    return checks.check_action(action, batch, N_ACTIONS).long()


def _fail(state: torch.Tensor, bad: torch.Tensor, field: str, rule: str) -> None:
    if bad.any():
        rows = bad.nonzero().flatten()[:5].tolist()
        got = state[rows].tolist()
        raise ValueError(
            f"DoorKey state field {field} breaks its rule ({rule}) in rows {rows}: {got}"
        )


def _bounds(world: DoorKey) -> tuple[tuple[str, int, int], ...]:
    """``(field, low, high)`` of every state dim, in layout order."""
    n = world.size
    cell = (1, n - 2)
    return (
        ("agent_x", *cell), ("agent_y", *cell), ("heading", 0, N_HEADINGS - 1),
        ("key_x", *cell), ("key_y", *cell), ("carrying", 0, 1),
        ("door", 0, N_DOOR_STATES - 1), ("wall_x", 2, n - 3), ("door_y", 1, n - 2),
        ("step", 0, 2**62),
    )


def _range_violations(cols: torch.Tensor, world: DoorKey):
    """``(field, rule, bad rows)`` of every value outside its range (one comparison) of
    ``(10, B)`` state columns."""
    bounds = _bounds(world)
    low = torch.tensor([[b[1]] for b in bounds], device=cols.device)
    high = torch.tensor([[b[2]] for b in bounds], device=cols.device)
    out = (cols < low) | (cols > high)
    for dim, (field, lo, hi) in enumerate(bounds):
        yield field, f"in {lo}..{hi}", out[dim]


def _violations(cols: torch.Tensor, world: DoorKey):
    """``(field, rule, bad rows)`` of every rule of a reachable state (``check_state``), from
    ``(10, B)`` state columns. Past the ranges, a cell is a wall only in the wall column."""
    yield from _range_violations(cols, world)
    agent_column = cols[AGENT_X] == cols[WALL_X]
    door_row = cols[AGENT_Y] == cols[DOOR_Y]
    carrying = cols[CARRYING] == 1
    yield "agent_x/agent_y", "not in a wall", agent_column & ~door_row
    yield (
        "agent_x/agent_y",
        "on the door only while it is open",
        agent_column & door_row & (cols[DOOR] != OPEN),
    )
    on_agent = (cols[KEY_X] == cols[AGENT_X]) & (cols[KEY_Y] == cols[AGENT_Y])
    yield "key_x/key_y", "a carried key is on the agent's cell", carrying & ~on_agent
    goal = world.size - 2
    taken = (cols[KEY_X] == cols[WALL_X]) | ((cols[KEY_X] == goal) & (cols[KEY_Y] == goal))
    yield (
        "key_x/key_y",
        "a key on the ground lies on an empty cell, not under the agent",
        ~carrying & (taken | on_agent),
    )


def _broken(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """``(B,)`` bool: rows of ``(B, 10)`` states that break a rule of ``_violations`` past the
    ranges (read on rows inside them only: cells are ``x N + y``). Strided columns of the
    state cost less here than a transposed copy."""
    n = world.size
    ax, ay, _, kx, ky, carrying, door, wall_x, door_y = state[:, :STEP].unbind(1)
    in_wall = (ax == wall_x) & ((ay != door_y) | (door != OPEN))
    key = ky.add(kx, alpha=n)
    goal = (n - 2) * (n + 1)
    carried = carrying == 1
    # A key is carried exactly when it is on the agent's cell.
    misplaced = (key == ay.add(ax, alpha=n)) != carried
    taken = ((kx == wall_x) | (key == goal)) & ~carried
    return in_wall.logical_or_(misplaced).logical_or_(taken)


def valid(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """``(B,)`` bool: which rows of ``(B, 10)`` int64 states keep every rule of
    ``check_state`` (value iteration enumerates all index combinations and keeps these)."""
    tables = _tables(world, state.device)
    inside = ((state >= tables.low) & (state <= tables.high)).all(dim=1)
    return inside & ~_broken(state, world)


def check_state(state: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """Validate states any sequence of MiniGrid steps can reach, at a public boundary.

    Args:
        state: ``(B, 10)`` int64 states of ``world``.
        world: the grid.

    Returns:
        ``state`` unchanged.

    Raises:
        ValueError: naming the field, on a wrong shape or dtype, a value out of range
            (heading ``0..3``, door ``0..2``, wall column ``2..N-3``, door row ``1..N-2``, cells
            inside the outer walls), an agent in the wall or on a closed door, a carried key
            off the agent's cell, or a key on the ground in the wall, on the door, on the goal
            or under the agent.
    """
    if not isinstance(state, torch.Tensor):
        raise ValueError(f"DoorKey state must be a torch.Tensor, got {type(state).__name__}")
    if state.dim() != 2 or state.shape[1] != STATE_DIM:
        raise ValueError(
            f"DoorKey state must have shape (B, {STATE_DIM}), got {tuple(state.shape)}"
        )
    if state.dtype != torch.long:
        raise ValueError(f"DoorKey state must be int64, got dtype {state.dtype}")
    if state.shape[0] == 0:
        return state
    tables = _tables(world, state.device)
    least, most = state.aminmax(dim=0)
    # One test of all rules (one device sync); the rule that fails is looked up after, in the
    # order of _violations.
    if ((least < tables.low) | (most > tables.high)).any() | _broken(state, world).any():
        for field, rule, bad in _violations(columns(state), world):
            _fail(state, bad, field, rule)
    return state


def _as_rows(value, name: str, batch: int, device: torch.device) -> torch.Tensor:
    col = torch.as_tensor(value, dtype=torch.long, device=device).reshape(-1)
    if col.shape[0] not in (1, batch):
        raise ValueError(f"layout field {name} has {col.shape[0]} values for {batch} rows")
    return col.expand(batch)


def from_layout(
    world: DoorKey,
    wall_x,
    door_y,
    agent,
    heading,
    key,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Reset states from given layouts (what MiniGrid's ``_gen_grid`` draws), validated.

    Args:
        world: the grid.
        wall_x, door_y, heading: ints or ``(B,)`` integer tensors.
        agent, key: cells ``(x, y)`` or ``(B, 2)`` integer tensors.
        device: where the states live.

    Returns:
        ``(B, 10)`` int64 states: door locked, key on the ground, step 0.

    Raises:
        ValueError: naming the field, if the wall column is outside ``2..N-3``, the door row
            outside ``1..N-2`` (MiniGrid draws ``1..N-3``), the heading outside ``0..3``, the
            agent or the key outside the room west of the wall, or both on one cell.
    """
    agent = torch.as_tensor(agent, dtype=torch.long, device=device).reshape(-1, 2)
    key = torch.as_tensor(key, dtype=torch.long, device=device).reshape(-1, 2)
    batch = max(agent.shape[0], key.shape[0], *(
        torch.as_tensor(v).numel() for v in (wall_x, door_y, heading)
    ))
    state = torch.zeros(batch, STATE_DIM, dtype=torch.long, device=device)
    state[:, WALL_X] = _as_rows(wall_x, "wall_x", batch, state.device)
    state[:, DOOR_Y] = _as_rows(door_y, "door_y", batch, state.device)
    state[:, HEADING] = _as_rows(heading, "heading", batch, state.device)
    for dx, dy, cells, name in ((AGENT_X, AGENT_Y, agent, "agent"), (KEY_X, KEY_Y, key, "key")):
        state[:, dx] = _as_rows(cells[:, 0], f"{name} x", batch, state.device)
        state[:, dy] = _as_rows(cells[:, 1], f"{name} y", batch, state.device)
    state[:, DOOR] = LOCKED
    for field, rule, bad in _range_violations(columns(state), world):
        _fail(state, bad, field, rule)
    for name, x in (("agent_x", AGENT_X), ("key_x", KEY_X)):
        _fail(state, state[:, x] >= state[:, WALL_X], name, "west of the wall column")
    same = (state[:, AGENT_X] == state[:, KEY_X]) & (state[:, AGENT_Y] == state[:, KEY_Y])
    _fail(state, same, "key_x/key_y", "not on the agent's cell")
    return state


def _uniform(count: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``(B,)`` int64 uniform on ``0..count-1`` per row (``count`` ``(B,)`` int64 >= 1)."""
    draw = torch.randint(0, _DRAW_BOUND, count.shape, generator=generator, device=count.device)
    return draw % count


def reset(batch: int, generator: torch.Generator, world: DoorKey) -> torch.Tensor:
    """Initial states drawn from MiniGrid's DoorKey distribution (``DoorKeyEnv._gen_grid``).

    Wall column uniform on ``2..N-3``; agent uniform on the ``(wall_x - 1)(N - 2)`` cells of
    the west room (``place_agent`` rejects the outer walls); heading uniform on ``0..3``;
    door row uniform on ``1..N-3``; key uniform on the west room's other cells
    (``place_obj`` rejects the agent's cell). Door locked, nothing carried, step 0. The draws
    are ours (a torch generator, not MiniGrid's numpy one); the distribution is MiniGrid's.

    Args:
        batch: episodes ``B >= 1``.
        generator: explicit randomness; the states live on ``generator.device``.
        world: the grid.

    Returns:
        ``(B, 10)`` int64 states.

    Raises:
        ValueError: if ``batch < 1``.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    n, device = world.size, generator.device
    wall = torch.randint(2, n - 2, (batch,), generator=generator, device=device)
    rows = n - 2
    room = (wall - 1) * rows
    agent = _uniform(room, generator)
    heading = torch.randint(0, N_HEADINGS, (batch,), generator=generator, device=device)
    door = torch.randint(1, n - 2, (batch,), generator=generator, device=device)
    key = _uniform(room - 1, generator)
    key += key >= agent
    state = torch.zeros(batch, STATE_DIM, dtype=torch.long, device=device)
    state[:, AGENT_X], state[:, AGENT_Y] = 1 + agent // rows, 1 + agent % rows
    state[:, KEY_X], state[:, KEY_Y] = 1 + key // rows, 1 + key % rows
    state[:, HEADING], state[:, WALL_X], state[:, DOOR_Y] = heading, wall, door
    state[:, DOOR] = LOCKED
    return state


def minigrid_reward(steps: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """MiniGrid's success reward ``1 - 0.9 * (steps / max_steps)`` as float64, rounded as
    MiniGrid's Python floats round it (``MiniGridEnv._reward``)."""
    return 1.0 - SUCCESS_PENALTY * (steps.double() / world.max_steps)


#: The objects the cell in front can hold, in the order ``_Tables`` codes them.
_AHEAD = (EMPTY, WALL, DOOR_OBJECT, KEY_OBJECT, GOAL)
#: A row's code ``(((ahead * 7 + action) * 3 + door) * 2 + carrying) * 4 + heading``, ``ahead``
#: the index in ``_AHEAD``: the weight of each part.
_HEADING_UNIT, _CARRYING_UNIT, _DOOR_UNIT = 1, N_HEADINGS, 2 * N_HEADINGS
_ACTION_UNIT = N_DOOR_STATES * _DOOR_UNIT
_AHEAD_UNIT = N_ACTIONS * _ACTION_UNIT
_CODES = len(_AHEAD) * _AHEAD_UNIT
#: The events of ``step``'s info, in the columns of ``_Tables.events``.
_EVENTS = ("pickup", "drop", "unlocked", "toggled", "goal")


def _effect(ahead: int, action: int, door: int, carrying: bool) -> dict[str, int]:
    """MiniGrid's step of one agent from the object in front (``MiniGridEnv.step``): whether
    it moves, the events, the door state and whether the key is held after."""
    forward = action == FORWARD
    moved = forward and (ahead in (EMPTY, GOAL) or (ahead == DOOR_OBJECT and door == OPEN))
    pickup = action == PICKUP and ahead == KEY_OBJECT and not carrying
    drop = action == DROP and ahead == EMPTY and carrying
    toggle = action == TOGGLE and ahead == DOOR_OBJECT
    unlocked = toggle and door == LOCKED and carrying
    toggled = toggle and door != LOCKED
    door_after = OPEN if unlocked else OPEN + CLOSED - door if toggled else door
    return {
        "moved": moved, "pickup": pickup, "drop": drop, "unlocked": unlocked,
        "toggled": toggled, "goal": forward and ahead == GOAL, "door": door_after,
        "holds": (carrying or pickup) and not drop,
    }


def _change(code: int) -> tuple[list[int], list[bool]]:
    """The state change (a ``(10,)`` difference) and the events of a row's code. Cells move
    along the heading: the agent by one if it moves; a held key with the agent, a picked-up
    key from the cell in front to the agent, a dropped key from the agent to the cell in
    front (a carried key lies on the agent's cell)."""
    rest, heading = divmod(code, N_HEADINGS)
    rest, carrying = divmod(rest, 2)
    rest, door = divmod(rest, N_DOOR_STATES)
    ahead, action = divmod(rest, N_ACTIONS)
    e = _effect(_AHEAD[ahead], action, door, bool(carrying))
    key_from = 0 if carrying else 1
    key_to = int(e["moved"]) if e["holds"] else 1 if e["drop"] else key_from
    along = key_to - key_from if carrying or e["pickup"] else 0
    turn = (action == RIGHT) - (action == LEFT)
    dx, dy = DIR_VECTORS[heading].tolist()
    change = [0] * STATE_DIM
    change[AGENT_X], change[AGENT_Y] = e["moved"] * dx, e["moved"] * dy
    change[HEADING] = (heading + turn) % N_HEADINGS - heading
    change[KEY_X], change[KEY_Y] = along * dx, along * dy
    change[CARRYING] = int(e["holds"]) - carrying
    change[DOOR] = e["door"] - door
    change[STEP] = 1
    return change, [bool(e[name]) for name in _EVENTS]


@dataclass(frozen=True)
class _Tables:
    """What ``transition`` and ``check_state`` look up, on one device.

    Attributes:
        low, high: ``(10,)`` int64 range of each state dim (``_bounds``).
        dx, dy: ``(4,)`` int64 step of each heading.
        border: ``(2 * (N + 2)^2,)`` int64 ``_AHEAD`` index times ``_AHEAD_UNIT`` of cell
            ``(x + 1) (N + 2) + y + 1`` (the grid in a frame of walls) without the wall
            column, the key elsewhere (first) or on it (second): walls, the goal, else empty,
            or the key where it is not in a wall.
        change: ``(codes, 10)`` int64 state change of each code (``_change``).
        events: ``(codes, 8)`` bool events of each code in ``_EVENTS`` order (padded to 8,
            one int64 per code).
    """

    low: torch.Tensor
    high: torch.Tensor
    dx: torch.Tensor
    dy: torch.Tensor
    border: torch.Tensor
    change: torch.Tensor
    events: torch.Tensor


@functools.lru_cache(maxsize=16)
def _tables(world: DoorKey, device: torch.device) -> _Tables:
    bounds = _bounds(world)
    n = world.size
    edge = torch.ones(n + 2, n + 2, dtype=torch.bool)
    edge[2:-2, 2:-2] = False
    border = torch.where(edge, _AHEAD.index(WALL), _AHEAD.index(EMPTY))
    border[world.goal[0] + 1, world.goal[1] + 1] = _AHEAD.index(GOAL)
    # The key on a cell: walls hide it, it hides the goal.
    border = torch.stack([border, border.masked_fill(~edge, _AHEAD.index(KEY_OBJECT))])
    changes, events = zip(*(_change(code) for code in range(_CODES)), strict=True)
    padded = [e + [False] * (8 - len(e)) for e in events]
    return _Tables(
        low=torch.tensor([b[1] for b in bounds], device=device),
        high=torch.tensor([b[2] for b in bounds], device=device),
        dx=DIR_VECTORS[:, 0].to(device), dy=DIR_VECTORS[:, 1].to(device),
        border=(border * _AHEAD_UNIT).flatten().to(device),
        change=torch.tensor(changes, device=device),
        events=torch.tensor(padded, device=device),
    )


def _codes(state: torch.Tensor, action: torch.Tensor, tables: _Tables, n: int) -> torch.Tensor:
    """``(B,)`` int64 code of each row of ``(B, 10)`` states (``transition``'s) and ``(B,)``
    actions: what the cell in front holds (``objects_at`` of it), the action, door, carrying,
    heading."""
    ax, ay, heading, kx, ky, carrying, door, wall_x, door_y = state[:, :STEP].unbind(1)
    # index_select by a strided index costs ten times one by a contiguous copy of it.
    heading = heading.contiguous()
    fx = ax + tables.dx.index_select(0, heading)
    fy = ay + tables.dy.index_select(0, heading)
    # Cells x (N + 2) + y, the grid framed by a ring of walls (the cell in front of an agent
    # on the edge is off the grid). A carried key lies on the agent's cell, never in front.
    ahead = fy.add(fx, alpha=n + 2)
    keyed = ky.add(kx, alpha=n + 2) == ahead
    kind = tables.border.index_select(0, ahead.add_(keyed, alpha=(n + 2) ** 2).add_(n + 3))
    # The wall column hides a key in it (objects_at's order).
    door_or_wall = torch.where(
        fy == door_y, _AHEAD.index(DOOR_OBJECT) * _AHEAD_UNIT, _AHEAD.index(WALL) * _AHEAD_UNIT
    )
    kind = torch.where(fx == wall_x, door_or_wall, kind)
    code = heading.add(carrying, alpha=_CARRYING_UNIT).add_(door, alpha=_DOOR_UNIT)
    return code.add_(action, alpha=_ACTION_UNIT).add_(kind)


def transition(
    state: torch.Tensor, action: torch.Tensor, world: DoorKey
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """``step`` without validation (value iteration enumerates states through it), of
    states whose agent and key lie on the grid (``0..N-1``), the other dims in
    ``check_state``'s ranges, a carried key on the agent's cell; they may break its other
    rules (``gridplan.core.doorkey_task`` steps decoded noisy states).
    A row's change and events are looked up by its code (``_codes``): seven actions times
    what can lie in front, the door, carrying, heading."""
    tables = _tables(world, state.device)
    code = _codes(state, action, tables, world.size)
    nxt = tables.change.index_select(0, code).add_(state)
    # The eight event flags of a code are read as one int64 (a quarter of the time).
    flags = tables.events.view(torch.int64).view(-1).index_select(0, code)
    flags = flags.view(torch.bool).view(-1, 8)
    events = {name: flags[:, i] for i, name in enumerate(_EVENTS)}
    goal = events["goal"]
    reward = torch.zeros(state.shape[0], dtype=torch.float64, device=state.device)
    if goal.any():
        reward[goal] = minigrid_reward(nxt[goal, STEP], world)
    truncated = state[:, STEP] >= world.max_steps - 1
    return nxt, reward, goal, truncated, events


def step(
    state: torch.Tensor, action: torch.Tensor, world: DoorKey
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """One MiniGrid step of every row (``MiniGridEnv.step``, DoorKey's objects).

    Args:
        state: ``(B, 10)`` int64 states (``check_state``).
        action: ``(B,)`` integer MiniGrid actions ``0..6``.
        world: the grid and the step limit.

    Returns:
        ``(next_state, reward, terminated, truncated, info)``: ``(B, 10)`` int64; ``(B,)``
        float64 reward (MiniGrid's, on reaching the goal, else 0); ``(B,)`` bool goal reached;
        ``(B,)`` bool step limit reached; ``info`` of ``(B,)`` bool events ``pickup``,
        ``drop``, ``unlocked`` (a locked door opened with the key), ``toggled`` (an unlocked
        door opened or closed) and ``goal``.

    Raises:
        ValueError: on a malformed state (naming the field) or bad actions.
    """
    check_state(state, world)
    return transition(state, check_action(action, state.shape[0]), world)
