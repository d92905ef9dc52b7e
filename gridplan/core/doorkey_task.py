"""MiniGrid DoorKey as a task of every layer: its float state, true step, reward and exact V*.

The models, the planner and the metrics read ``(B, S)`` float states through the task
protocol (``gridplan.core.dynamics``); ``gridplan.core.doorkey_env`` steps ``(B, 10)`` int64
MiniGrid states. This
module is the bridge, a ``DoorKeyTask`` whose state is the MiniGrid state, normalized, plus
the world's floor tiles (``DoorKey.tiles``), irrelevant distractors:

* dims ``0..8``: ``agent_x, agent_y`` (``cell / (N - 1)``), ``heading`` (``h / 3``),
  ``key_x, key_y``, ``carrying`` (0/1), ``door`` (MiniGrid's state ``/ 2``: 0 open, 0.5
  closed, 1 locked), ``wall_x, door_y`` (the layout, static within an episode);
* dims ``9..``: each tile's ``x, y``. A tile walks at random every step (stay or one of the
  four moves, uniform, kept inside the outer walls); nothing else reads it.

The step count MiniGrid keeps is not in the state: the closed loop counts steps, so the
state is what the dynamics and V* read. A state is read through rounded, clamped cells
(``decode``), so a noisy belief is stepped like the true state it rounds to, as in the
paper's world (paper §4.2). The reward the planner and the metrics apply is the paper's
arriving reward, 1 on reaching the goal (``outcome``); MiniGrid's own time-dependent return
is ``1 - 0.9 steps / max_steps`` of the same episodes (``minigrid_return``).

V* (``DoorKeyValueTable``) is ``doorkey_values.layout_values`` of every layout met, looked up
through ``decode``: one gather into the tables of the layouts built so far, the tiles never
read. The relevant dims are ``0..8``, the tiles irrelevant by construction. ``docs/DESIGN.md``
("MiniGrid DoorKey") gives the choices.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import torch

from gridplan.core import checks
from gridplan.core import doorkey_env as dk_env
from gridplan.core.constants import DEFAULT_GAMMA, GOAL_REWARD
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
    SUCCESS_PENALTY,
    WALL_X,
)
from gridplan.core.doorkey_values import horizon_values, layout_values, state_index
from gridplan.core.doorkey_world import BASE_DIM_NAMES, DoorKey

#: The MiniGrid dims of the float state, in its order (dims 0..8).
_MINIGRID_DIMS = (AGENT_X, AGENT_Y, HEADING, KEY_X, KEY_Y, CARRYING, DOOR, WALL_X, DOOR_Y)
#: Float dims of the agent's cell, the heading and the carrying flag.
F_AGENT_X, F_AGENT_Y, F_HEADING, F_CARRYING = 0, 1, 2, 5
#: The dims V* reads: every dim but the tiles.
RELEVANT_DIMS = tuple(range(len(BASE_DIM_NAMES)))
#: A tile's moves: stay, east, west, south, north.
TILE_MOVES = torch.tensor([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], dtype=torch.long)
#: How far a true state's coordinate may lie from its lattice point (float32 rounding).
LATTICE_TOLERANCE = 1e-4


def _scales(world: DoorKey) -> torch.Tensor:
    """``(9,)`` float64: what each MiniGrid dim is divided by in the float state
    (``DoorKey.dim_scales``)."""
    return torch.tensor(world.dim_scales[: len(_MINIGRID_DIMS)], dtype=torch.float64)


def _bounds(world: DoorKey, inside: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(9,)`` long low and high of each MiniGrid dim: the range ``decode`` clamps a belief
    to (cells anywhere on the grid), or with ``inside`` the range of a true state (cells
    inside the outer walls)."""
    n, edge = world.size, int(inside)
    lo, hi = edge, n - 1 - edge
    low = [lo, lo, 0, lo, lo, 0, 0, 2, 1]
    high = [hi, hi, N_HEADINGS - 1, hi, hi, 1, N_DOOR_STATES - 1, n - 3, n - 2]
    return torch.tensor(low), torch.tensor(high)


def encode(cells: torch.Tensor, tiles: torch.Tensor | None, world: DoorKey) -> torch.Tensor:
    """Float states from MiniGrid states and tile cells.

    Args:
        cells: ``(B, 10)`` int64 MiniGrid states (``doorkey_env``; the step count is dropped).
        tiles: ``(B, T, 2)`` int64 tile cells, ``T = world.tiles`` (None when ``T = 0``).
        world: the grid.

    Returns:
        ``(B, S)`` float32 states (module docstring).
    """
    scale = _scales(world).to(cells.device)
    base = cells[:, list(_MINIGRID_DIMS)].double() / scale
    if not world.tiles:
        return base.float()
    flat = tiles.reshape(cells.shape[0], -1).double() / world.cell_scale
    return torch.cat([base, flat], dim=1).float()


def lattice(state: torch.Tensor, world: DoorKey) -> tuple[torch.Tensor, torch.Tensor]:
    """The unclamped nearest lattice point of float states: ``(B, 9)`` long MiniGrid values
    (``_MINIGRID_DIMS`` order) and ``(B, T, 2)`` long tile cells."""
    scale = _scales(world).to(state.device, state.dtype)
    base = torch.round(state[:, : len(_MINIGRID_DIMS)] * scale).long()
    tiles = torch.round(state[:, len(_MINIGRID_DIMS) :] * world.cell_scale).long()
    return base, tiles.view(state.shape[0], world.tiles, 2)


def decode(state: torch.Tensor, world: DoorKey) -> tuple[torch.Tensor, torch.Tensor]:
    """MiniGrid states of (possibly noisy) float states, read through rounded, clamped
    values; a carried key sits on the agent's cell. No validation.

    Returns:
        ``(cells (B, 10) int64 with step 0, tiles (B, T, 2) int64)``.
    """
    base, tiles = lattice(state, world)
    low, high = (t.to(state.device) for t in _bounds(world))
    base = torch.maximum(torch.minimum(base, high), low)
    cells = base.new_zeros(state.shape[0], STATE_DIM)
    cells[:, list(_MINIGRID_DIMS)] = base
    carried = cells[:, CARRYING] == 1
    cells[:, KEY_X] = torch.where(carried, cells[:, AGENT_X], cells[:, KEY_X])
    cells[:, KEY_Y] = torch.where(carried, cells[:, AGENT_Y], cells[:, KEY_Y])
    return cells, tiles.clamp(1, world.size - 2)


def reset_tiles(batch: int, generator: torch.Generator, world: DoorKey) -> torch.Tensor:
    """``(B, T, 2)`` tile cells, each uniform on the cells inside the outer walls."""
    inner = world.size - 2
    draw = torch.randint(
        0, inner, (batch, world.tiles, 2), generator=generator, device=generator.device
    )
    return draw + 1


def step_tiles(tiles: torch.Tensor, generator: torch.Generator, world: DoorKey) -> torch.Tensor:
    """One random-walk step of every tile (stay or a move, uniform), clamped to the cells
    inside the outer walls: ``(B, T, 2)`` long. Draws nothing when ``T = 0``."""
    if not world.tiles:
        return tiles
    pick = torch.randint(
        0, len(TILE_MOVES), tiles.shape[:2], generator=generator, device=generator.device
    )
    moved = tiles + TILE_MOVES.to(tiles.device)[pick.to(tiles.device)]
    return moved.clamp_(1, world.size - 2)


def check_state(state: torch.Tensor, world: DoorKey, what: str = "state") -> torch.Tensor:
    """Validate true DoorKey states at a public boundary (the environment's, not a model's).

    Raises:
        ValueError: on a shape, dtype or non-finite value (``gridplan.core.checks.check_state``),
            a value off its lattice (not ``k / scale``) or out of range (naming the dim), or
            a MiniGrid state no step can reach (``doorkey_env.check_state``: a key in the
            wall, an agent on a closed door, ...).
    """
    checks.check_state(state, what, world)
    base, tiles = lattice(state, world)
    scale = _scales(world).to(state.device)
    off = (state[:, : len(_MINIGRID_DIMS)].double() * scale - base).abs() > LATTICE_TOLERANCE
    if off.any():
        row, dim = (int(v) for v in off.nonzero()[0])
        raise ValueError(
            f"{what} dim {BASE_DIM_NAMES[dim]} = {float(state[row, dim])} in row {row} is not "
            f"a multiple of 1/{float(scale[dim]):g} (world {world.name})"
        )
    low, high = _bounds(world, inside=True)
    bad = (base < low.to(base.device)) | (base > high.to(base.device))
    if bad.any():
        row, dim = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"{what} dim {BASE_DIM_NAMES[dim]} reads {int(base[row, dim])} in row {row}, "
            f"outside {int(low[dim])}..{int(high[dim])} (world {world.name})"
        )
    if world.tiles and ((tiles < 1) | (tiles > world.size - 2)).any():
        raise ValueError(f"{what} holds a floor tile outside the cells 1..{world.size - 2}")
    cells = decode(state, world)[0]
    dk_env.check_state(cells, world)
    return state


def minigrid_return(success: torch.Tensor, steps: torch.Tensor, world: DoorKey) -> torch.Tensor:
    """MiniGrid's episode return ``1 - 0.9 steps / max_steps`` where the goal was reached,
    else 0: ``(B,)`` float64 from ``(B,)`` bool ``success`` and ``(B,)`` long ``steps``."""
    reward = 1.0 - SUCCESS_PENALTY * (steps.double() / world.max_steps)
    return torch.where(success, reward, 0.0)


class DoorKeyValueTable:
    """Exact V* and Q* of float DoorKey states that mix layouts (module docstring), or with
    ``steps`` the optimal ``steps``-step values without a terminal heuristic and their Q
    (``doorkey_values.horizon_values``: the lookahead anchors of
    ``gridplan.evaluation.anchors``).

    Each layout's table (``doorkey_values.layout_values``, float64 cast to float32) is built
    the first time a state of it is looked up and appended to one flat table, so a lookup is
    one gather. Thread-safe.

    Args:
        task: the ``DoorKeyTask`` (world and ``gamma``).
        device: where the tables live.
        steps: ``None`` for V*, else the horizon ``>= 0`` of the finite-horizon values.

    Raises:
        ValueError: if ``steps < 0``.
    """

    def __init__(
        self, task: DoorKeyTask, device: torch.device | str = "cpu", steps: int | None = None
    ) -> None:
        if steps is not None and steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        self.task, self.gamma, self.steps = task, task.gamma, steps
        self.device = torch.device(device)
        n = task.world.size
        self._offset = torch.full((n * n,), -1, dtype=torch.long, device=self.device)
        self._values = torch.empty(0, device=self.device)
        self._lock = threading.Lock()

    def _build(self, codes: list[int]) -> None:
        """Append the tables of the layouts ``codes`` (``wall_x * N + door_y``) not built yet.
        The values grow before the offsets point into them, so a lookup never reads past."""
        with self._lock:
            n, parts, placed = self.task.world.size, [self._values], {}
            size = self._values.shape[0]
            for code in codes:
                if int(self._offset[code]) >= 0:
                    continue
                table = self._layout_table(*divmod(code, n))
                placed[code] = size
                parts.append(table.to(self.device, torch.float32))
                size += table.shape[0]
            self._values = torch.cat(parts)
            for code, offset in placed.items():
                self._offset[code] = offset

    def _layout_table(self, wall_x: int, door_y: int) -> torch.Tensor:
        """``(layout_size,)`` float64 values of one layout (V* or ``V_steps``)."""
        world = self.task.world
        if self.steps is None:
            return layout_values(world, wall_x, door_y, self.gamma).values
        return horizon_values(world, wall_x, door_y, self.gamma, self.steps)

    def _at(self, cells: torch.Tensor) -> torch.Tensor:
        """V* of ``(B, 10)`` MiniGrid states, clamped in range (``decode``): ``(B,)``."""
        codes = cells[:, WALL_X] * self.task.world.size + cells[:, DOOR_Y]
        offset = self._offset[codes]
        unbuilt = offset < 0
        if unbuilt.any():
            self._build(codes[unbuilt].unique().tolist())
            offset = self._offset[codes]
        return self._values[offset + state_index(cells, self.task.world)]

    def lookup(self, state: torch.Tensor) -> torch.Tensor:
        """V* of ``(B, S)`` float states (any values, read through ``decode``): ``(B,)``
        float32, 0 on states no step reaches and on the goal. No validation."""
        return self._at(decode(state, self.task.world)[0])

    def q_values(self, state: torch.Tensor) -> torch.Tensor:
        """``Q*(s, a) = r(s') + gamma V*(s') (1 - terminal(s'))`` of ``(B, S)`` float states
        (with ``steps``, ``V_steps`` in place of V*: the depth-``steps + 1`` search value):
        ``(B, 7)`` float32; 0 in terminal states (the agent on the goal)."""
        nxt, goal = successors(state, self.task.world)
        return self.q_of(nxt, goal, self.task.outcome(state)[1])

    def q_of(self, nxt: torch.Tensor, goal: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """``q_values`` of states whose ``successors`` are known, so that tables of several
        horizons share one step: ``nxt`` ``(7, B, 10)`` int64, ``goal`` ``(7, B)`` bool,
        ``done`` ``(B,)`` bool (the state is terminal). Returns ``(B, 7)`` float32."""
        v = self._at(nxt.reshape(-1, nxt.shape[-1])).view(goal.shape)
        q = torch.where(goal, GOAL_REWARD, self.gamma * v)
        return q.T.contiguous().masked_fill_(done.unsqueeze(1), 0.0)


def successors(state: torch.Tensor, world: DoorKey) -> tuple[torch.Tensor, torch.Tensor]:
    """Every action's next MiniGrid state of ``(B, S)`` float states read through ``decode``,
    in one step of ``7 B`` rows: ``(7, B, 10)`` int64, action-major, and ``(7, B)`` bool, the
    step reaches the goal."""
    cells = decode(state, world)[0]
    b = cells.shape[0]
    action = torch.arange(N_ACTIONS, device=state.device).repeat_interleave(b)
    nxt, _, goal, _, _ = dk_env.transition(cells.repeat(N_ACTIONS, 1), action, world)
    return nxt.view(N_ACTIONS, b, STATE_DIM), goal.view(N_ACTIONS, b)


@functools.lru_cache(maxsize=16)
def _table(task: DoorKeyTask, device: str, steps: int | None) -> DoorKeyValueTable:
    return DoorKeyValueTable(task, device, steps)


@dataclass(frozen=True)
class DoorKeyTask:
    """MiniGrid's DoorKey task on one DoorKey world (frozen, hashable).

    Attributes:
        world: the grid, step limit, view size and tile count (``doorkey_world.DoorKey``).
        gamma: discount of V* and of the planner's leaves in ``(0, 1)``.
        horizon: episode steps; ``None`` fills in MiniGrid's ``max_steps``.
        name: ``"A"``: the paper's Task A problem (key, door, goal) as MiniGrid plays it.

    Raises:
        ValueError: on a discount outside ``(0, 1)`` or a horizon below 1.
        TypeError: if ``world`` is not a ``DoorKey``.
    """

    world: DoorKey = DoorKey()
    gamma: float = DEFAULT_GAMMA
    horizon: int | None = None
    name: str = "A"

    def __post_init__(self) -> None:
        if not isinstance(self.world, DoorKey):
            raise TypeError(f"DoorKeyTask needs a DoorKey world, got {type(self.world).__name__}")
        if self.horizon is None:
            object.__setattr__(self, "horizon", self.world.max_steps)
        if not isinstance(self.horizon, int) or self.horizon < 1:
            raise ValueError(f"horizon must be a positive int, got {self.horizon!r}")
        if not 0.0 < float(self.gamma) < 1.0:
            raise ValueError(f"gamma must lie in (0, 1), got {self.gamma!r}")

    @property
    def n_actions(self) -> int:
        """MiniGrid's seven actions (``doorkey_constants``)."""
        return N_ACTIONS

    @property
    def relevant_dims(self) -> tuple[int, ...]:
        """The dims V* reads: all but the tiles."""
        return RELEVANT_DIMS

    @property
    def noise_relevant_dims(self) -> tuple[int, ...]:
        """The dims ``M(sigma_r, sigma_i)`` noises with ``sigma_r``: the relevant ones."""
        return RELEVANT_DIMS

    @property
    def goal(self) -> tuple[int, int]:
        """The goal cell ``(N - 2, N - 2)``."""
        return self.world.goal

    @property
    def hazard(self) -> None:
        """DoorKey has no hazard cell."""
        return None

    @property
    def swap_on_c1(self) -> bool:
        """DoorKey's goal never swaps (it has no colour bit)."""
        return False

    def reset(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        """``(B, S)`` float32 start states: MiniGrid's layout distribution
        (``doorkey_env.reset``), then the tiles (``reset_tiles``), from ``generator``."""
        cells = dk_env.reset(batch, generator, self.world)
        return encode(cells, reset_tiles(batch, generator, self.world), self.world)

    def transition(self, state, action, generator):
        """The true step of any float state read through ``decode``, without validation:
        ``(next (B, S), reward (B,) float32, goal (B,) bool, info)``; ``info``: ``(B,)`` bool
        ``pickup``, ``drop``, ``unlocked``, ``toggled``, ``goal``, ``door_opened`` (the
        paper's event: ``unlocked``) and ``hazard`` (never).
        ``generator`` draws the tiles' walk."""
        cells, tiles = decode(state, self.world)
        nxt, _, goal, _, info = dk_env.transition(cells, action.long(), self.world)
        out = encode(nxt, step_tiles(tiles, generator, self.world), self.world)
        info = {**info, "door_opened": info["unlocked"], "hazard": torch.zeros_like(goal)}
        return out.to(state.dtype), goal.to(state.dtype) * GOAL_REWARD, goal, info

    def step(self, state, action, generator):
        """``transition`` of validated true states and actions.

        Raises:
            ValueError: on a malformed state (``check_state``) or actions outside ``0..6``.
        """
        check_state(state, self.world)
        dk_env.check_action(action, state.shape[0])
        return self.transition(state, action, generator)

    def outcome(self, state):
        """Reward 1 and terminal where the agent's rounded cell is the goal: ``(reward (B,)
        float, goal (B,) bool, hazard (B,) bool, all False)``. No validation."""
        scale = self.world.cell_scale
        agent = torch.round(state[:, F_AGENT_X : F_AGENT_Y + 1] * scale)
        goal = (agent == torch.tensor(self.goal, dtype=agent.dtype, device=agent.device)).all(1)
        return goal.to(state.dtype) * GOAL_REWARD, goal, torch.zeros_like(goal)

    def value_table(
        self, device: torch.device | str = "cpu", steps: int | None = None
    ) -> DoorKeyValueTable:
        """The cached ``DoorKeyValueTable`` of this task on ``device``: V*, or with ``steps``
        the ``steps``-step values without a terminal heuristic.

        Raises:
            ValueError: if ``steps < 0``.
        """
        return _table(self, str(torch.device(device)), steps)


def task_on(task, world: DoorKey) -> DoorKeyTask:
    """The DoorKey task named ``task`` (``"A"`` or a ``DoorKeyTask``) on ``world``.

    Raises:
        ValueError: on another name (DoorKey has one task), or a ``DoorKeyTask`` of another
            world.
    """
    if isinstance(task, DoorKeyTask):
        if task.world != world:
            raise ValueError(f"task is played on {task.world.name}, not {world.name}")
        return task
    if task != "A":
        raise ValueError(
            f"MiniGrid DoorKey has one task, A (fetch the key, open the door, reach the goal); "
            f"got {task!r}"
        )
    return DoorKeyTask(world=world)
