"""MiniGrid itself beside ``gridplan.core.doorkey_*``: loading its layouts, and the differential
check that both worlds agree transition for transition.

``load_state(env)`` reads a ``minigrid.envs.DoorKeyEnv`` (its grid, ``agent_pos``,
``agent_dir``, ``carrying``, ``step_count``) into a ``(10,)`` row of our state, refusing a grid
that is not a DoorKey layout (a door off the wall column, a gap in the wall, a key in the east
room at reset, ...). ``differential(world, transitions, seed)`` runs ``envs`` MiniGrid
environments in lockstep with one batched ``gridplan.core.doorkey_env.step``: every episode
starts from a layout MiniGrid drew from its own seed (``env.reset(seed=s)``), both sides take
the same actions, and after every step it compares the states, rewards, terminations,
truncations, the egocentric ``7x7x3`` images and directions, and the fully observed grids
(``FullyObsWrapper``'s encoding), and with ``rgb_every`` the RGB frames of
``gridplan.core.doorkey_render`` against ``get_frame`` and ``get_pov_render``. Actions are
uniform over the seven, or, in ``guided`` episodes, greedy in our Q* with probability
``1 - epsilon`` so that goals, unlocks and drops are visited often (grids up to
``GUIDED_MAX_SIZE``; values are per layout and take seconds).

``state_vector(env, tracked)`` reads the same state into the float layout models predict
(``gridplan.core.doorkey_task``), and ``collect(env, transitions, policy)`` records
transitions of MiniGrid's own env in it: the training data of a model trained outside
gridplan (``docs/how-to/minigrid-model.md``).

The semantics were written against MiniGrid ``PINNED_VERSION``; ``require_pinned`` refuses any
other installed version, naming both. Needs ``pip install gridplan[minigrid]``.
"""

from __future__ import annotations

import importlib.metadata
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from gridplan.core import doorkey_env as dk
from gridplan.core import doorkey_render as render
from gridplan.core.doorkey_constants import DIM_NAMES, N_ACTIONS
from gridplan.core.doorkey_observe import egocentric, full_grid
from gridplan.core.doorkey_task import encode
from gridplan.core.doorkey_values import DoorKeyValues
from gridplan.core.doorkey_world import DoorKey
from gridplan.util.extras import require

#: The MiniGrid release whose semantics ``gridplan.core.doorkey_*`` reproduces.
PINNED_VERSION = "3.2.0"
#: Largest grid whose episodes may be guided by Q* (one value table per layout met).
GUIDED_MAX_SIZE = 8
#: Tile side (pixels) of the RGB frames ``differential`` compares.
RGB_TILE_SIZE = 8


def require_pinned():
    """Import ``minigrid`` and check it is ``PINNED_VERSION``.

    Raises:
        ImportError: if ``minigrid`` is not installed (naming the extra).
        RuntimeError: if another version is installed, naming both versions.
    """
    require("minigrid", "the DoorKey check against MiniGrid")
    import minigrid as module

    installed = importlib.metadata.version("minigrid")
    if installed != PINNED_VERSION:
        raise RuntimeError(
            f"the DoorKey check is pinned to minigrid=={PINNED_VERSION}, but minigrid=="
            f"{installed} is installed: pip install minigrid=={PINNED_VERSION}"
        )
    return module


def make_env(world: DoorKey):
    """MiniGrid's ``DoorKeyEnv`` with ``world``'s size, step limit and view size."""
    require_pinned()
    from minigrid.envs import DoorKeyEnv

    return DoorKeyEnv(size=world.size, max_steps=world.max_steps, agent_view_size=world.view_size)


def _layout(env) -> tuple[int, int]:
    """Wall column and door row of ``env``'s grid. Raises ValueError unless the grid is a
    DoorKey grid: outer walls, one door, in a wall column that has no other gap."""
    grid, n = env.unwrapped.grid, env.unwrapped.width
    cells = {(x, y): grid.get(x, y) for x in range(n) for y in range(n)}
    doors = [pos for pos, obj in cells.items() if obj is not None and obj.type == "door"]
    if len(doors) != 1:
        raise ValueError(f"a DoorKey grid has one door, found {len(doors)} at {doors}")
    wall_x, door_y = doors[0]
    for y in range(n):
        obj = cells[(wall_x, y)]
        if y != door_y and (obj is None or obj.type != "wall"):
            raise ValueError(
                f"door at ({wall_x}, {door_y}) is off the wall column: cell ({wall_x}, {y}) "
                f"holds {getattr(obj, 'type', 'nothing')}, not a wall"
            )
    return wall_x, door_y


@dataclass
class _Tracked:
    """What ``load_state`` reads each step: the door and key objects of one episode."""

    wall_x: int
    door_y: int
    door: object
    key: object


def track(env) -> _Tracked:
    """Locate the layout, door and key of a freshly reset ``env`` (validated)."""
    wall_x, door_y = _layout(env)
    grid, n = env.unwrapped.grid, env.unwrapped.width
    keys = [grid.get(x, y) for x in range(n) for y in range(n)]
    keys = [obj for obj in keys if obj is not None and obj.type == "key"]
    if len(keys) != 1:
        raise ValueError(f"a DoorKey grid has one key, found {len(keys)}")
    return _Tracked(wall_x, door_y, grid.get(wall_x, door_y), keys[0])


def load_state(env, tracked: _Tracked) -> list[int]:
    """``env``'s state as a row of ours: ``[agent_x, agent_y, heading, key_x, key_y,
    carrying, door, wall_x, door_y, step]`` (a carried key on the agent's cell)."""
    e = env.unwrapped
    ax, ay = (int(v) for v in e.agent_pos)
    carrying = e.carrying is not None
    kx, ky = (ax, ay) if carrying else (int(v) for v in tracked.key.cur_pos)
    door = tracked.door.encode()[2]
    return [ax, ay, int(e.agent_dir), kx, ky, int(carrying), door, tracked.wall_x,
            tracked.door_y, int(e.step_count)]


def state_vector(env, tracked: _Tracked) -> torch.Tensor:
    """``env``'s state in gridplan's float layout (``gridplan.core.doorkey_task``): ``(9,)``
    float32 ``[agent_x, agent_y, heading, key_x, key_y, carrying, door, wall_x, door_y]``,
    cells ``/ (N - 1)``, heading ``/ 3``, door state ``/ 2`` (0 open, 0.5 closed, 1 locked),
    the key on the agent's cell while carried. ``tracked`` is ``track(env)`` taken right after
    the episode's reset (it follows the key object once picked up).

    Raises:
        ValueError: if ``env``'s grid is not square or smaller than a DoorKey grid.
    """
    e = env.unwrapped
    if e.width != e.height:
        raise ValueError(f"a DoorKey grid is square, got {e.width}x{e.height}")
    row = torch.tensor([load_state(env, tracked)], dtype=torch.long)
    return encode(row, None, DoorKey(size=e.width))[0]


#: What ``load_state`` reads of a MiniGrid env's ``unwrapped`` that exists before its first
#: reset (``MiniGridEnv.__init__``; ``step_count`` comes with the reset).
_MINIGRID_ATTRIBUTES = ("grid", "agent_pos", "agent_dir", "carrying")


def _check_minigrid(env) -> None:
    """Raises TypeError unless ``env``'s ``unwrapped`` has what ``load_state`` reads."""
    base = getattr(env, "unwrapped", env)
    if not all(hasattr(base, name) for name in _MINIGRID_ATTRIBUTES):
        raise TypeError(
            "collect reads MiniGrid's own DoorKey env (gymnasium.make(\"MiniGrid-DoorKey-8x8-v0\") "
            f"or minigrid.envs.DoorKeyEnv, wrappers allowed), got a {type(base).__name__}, "
            f"whose unwrapped env lacks MiniGrid's {', '.join(_MINIGRID_ATTRIBUTES)}"
        )


def collect(env, transitions: int, policy, seed: int = 0):
    """Play MiniGrid's own ``env`` (e.g. ``gymnasium.make("MiniGrid-DoorKey-8x8-v0")``) for
    ``transitions`` steps and record gridplan's float states around each action.

    An episode ends on termination or truncation and the next one starts from
    ``env.reset(seed=seed * 1000003 + k)`` (episode ``k``).

    Args:
        env: a DoorKey environment (wrappers allowed; its ``unwrapped`` is read).
        transitions: steps to record.
        policy: ``policy(env, rng) -> action`` in ``0..6``; ``rng`` is a NumPy
            ``Generator`` seeded with ``seed``, its only randomness.
        seed: seeds the resets and ``rng``.

    Returns:
        ``(states (T, 9) float32, actions (T,) int64, next_states (T, 9) float32)``
        (``state_vector``); ``next_states`` of a last step is the state it reached.

    Raises:
        TypeError: if ``env`` is not a MiniGrid env (gridplan's own ``GridPlanEnv`` included),
            naming its class.
        ValueError: on ``transitions`` below 1, an action outside ``0..6``, or a grid that is
            not a DoorKey layout (``track``).
    """
    _check_minigrid(env)
    if transitions < 1:
        raise ValueError(f"transitions must be >= 1, got {transitions}")
    rng, episodes = np.random.default_rng(seed), 0
    states, actions, nexts = [], [], []
    done = True
    for _ in range(transitions):
        if done:
            env.reset(seed=seed * 1_000_003 + episodes)
            episodes += 1
            tracked = track(env)
            state = state_vector(env, tracked)
        action = int(policy(env, rng))
        if not 0 <= action < N_ACTIONS:
            raise ValueError(f"policy returned action {action}, outside 0..{N_ACTIONS - 1}")
        _, _, terminated, truncated, _ = env.step(action)
        nxt = state_vector(env, tracked)
        states.append(state)
        actions.append(action)
        nexts.append(nxt)
        state, done = nxt, terminated or truncated
    return torch.stack(states), torch.tensor(actions, dtype=torch.long), torch.stack(nexts)


def fully_observed(env):
    """``env`` wrapped in MiniGrid's ``FullyObsWrapper`` (its ``observation({})["image"]`` is
    the ``(N, N, 3)`` uint8 grid encoding with the agent drawn in)."""
    require_pinned()
    from minigrid.wrappers import FullyObsWrapper

    return FullyObsWrapper(env)


@dataclass
class Tally:
    """Counts of a differential run.

    Attributes:
        transitions: steps compared.
        episodes: episodes started (layouts loaded from MiniGrid's seeds).
        mismatches: per compared field (``state:<dim>``, ``reward``, ``terminated``,
            ``truncated``, ``image``, ``direction``, ``full_grid``, ``rgb``, ``pov_rgb``,
            ``reset:<...>``), the
            transitions on which the two sides differ.
        events: per event (``pickup``, ``drop``, ``unlocked``, ``toggled``, ``goal``,
            ``truncated``), how often it occurred.
        examples: the first few mismatches, described.
    """

    transitions: int = 0
    episodes: int = 0
    mismatches: Counter = field(default_factory=Counter)
    events: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def total_mismatches(self) -> int:
        return sum(self.mismatches.values())

    def note(self, what: str, detail: str) -> None:
        self.mismatches[what] += 1
        if len(self.examples) < 10:
            self.examples.append(f"{what}: {detail}")


class _Lockstep:
    """``envs`` MiniGrid environments and their batched twin (``differential``)."""

    def __init__(
        self, world: DoorKey, envs: int, seed: int, guided: float, full_every: int,
        rgb_every: int,
    ):
        self.world, self.seed, self.full_every, self.rgb_every = world, seed, full_every, rgb_every
        self.envs = [make_env(world) for _ in range(envs)]
        self.full = [fully_observed(env) for env in self.envs]
        self.tracked: list[_Tracked | None] = [None] * envs
        self.rng = np.random.default_rng(seed)
        self.guided_share = guided if world.size <= GUIDED_MAX_SIZE else 0.0
        self.guided = np.zeros(envs, dtype=bool)
        self.values = DoorKeyValues(world) if self.guided_share > 0 else None
        self.state = torch.zeros(envs, len(DIM_NAMES), dtype=torch.long)
        self.tally = Tally()

    def start(self, i: int) -> None:
        """Reset env ``i`` from MiniGrid's next seed and load its layout into our row."""
        env = self.envs[i]
        obs, _ = env.reset(seed=self.seed * 1_000_003 + self.tally.episodes)
        self.tally.episodes += 1
        tracked = self.tracked[i] = track(env)
        row = load_state(env, tracked)
        ours = dk.from_layout(
            self.world, row[7], row[8], (row[0], row[1]), row[2], (row[3], row[4])
        )[0]
        self.state[i] = ours
        if ours.tolist() != row:
            detail = f"episode {self.tally.episodes}: {row} vs {ours.tolist()}"
            self.tally.note("reset:state", detail)
        if not np.array_equal(egocentric(ours.unsqueeze(0), self.world)[0].numpy(), obs["image"]):
            self.tally.note("reset:image", f"episode {self.tally.episodes}, state {row}")
        self.guided[i] = self.rng.random() < self.guided_share

    def actions(self, epsilon: float) -> torch.Tensor:
        act = torch.from_numpy(self.rng.integers(0, N_ACTIONS, len(self.envs)))
        if self.values is not None and self.guided.any():
            rows = torch.from_numpy(self.guided & (self.rng.random(len(self.envs)) >= epsilon))
            if rows.any():
                act[rows] = self.values.greedy(self.state[rows])
        return act

    def compare(self, i: int, ours: dict, theirs: tuple, tick: int) -> None:
        obs, reward, terminated, truncated, _ = theirs
        env, tally = self.envs[i], self.tally
        row = load_state(env, self.tracked[i])
        mine = ours["state"][i].tolist()
        for name, a, b in zip(DIM_NAMES, row, mine, strict=True):
            if a != b:
                tally.note(f"state:{name}", f"tick {tick} env {i}: minigrid {row}, ours {mine}")
        pairs = (
            ("reward", float(reward), float(ours["reward"][i])),
            ("terminated", bool(terminated), bool(ours["terminated"][i])),
            ("truncated", bool(truncated), bool(ours["truncated"][i])),
            ("direction", int(obs["direction"]), int(ours["state"][i, 2])),
        )
        for name, a, b in pairs:
            if a != b:
                tally.note(name, f"tick {tick} env {i}: minigrid {a!r}, ours {b!r}, state {row}")
        if not np.array_equal(obs["image"], ours["image"][i]):
            tally.note("image", f"tick {tick} env {i}: state {row}")
        if tick % self.full_every == 0 and not np.array_equal(
            self.full[i].observation({})["image"], ours["full"][i]
        ):
            tally.note("full_grid", f"tick {tick} env {i}: state {row}")
        if ours["rgb"] is not None:
            frames = (("rgb", env.unwrapped.get_frame(tile_size=RGB_TILE_SIZE)),
                      ("pov_rgb", env.unwrapped.get_pov_render(RGB_TILE_SIZE)))
            for name, frame in frames:
                if not np.array_equal(frame, ours[name][i]):
                    tally.note(name, f"tick {tick} env {i}: state {row}")

    def tick(self, tick: int, epsilon: float) -> None:
        action = self.actions(epsilon)
        nxt, reward, terminated, truncated, info = dk.step(self.state, action, self.world)
        ours = {
            "state": nxt, "reward": reward, "terminated": terminated, "truncated": truncated,
            "image": egocentric(nxt, self.world).numpy(),
            "full": full_grid(nxt, self.world).numpy() if tick % self.full_every == 0 else None,
            "rgb": None,
        }
        if self.rgb_every and tick % self.rgb_every == 0:
            ours["rgb"] = render.rgb(nxt, self.world, RGB_TILE_SIZE).numpy()
            ours["pov_rgb"] = render.pov_rgb(nxt, self.world, RGB_TILE_SIZE).numpy()
        for name, flags in (*info.items(), ("truncated", truncated)):
            self.tally.events[name] += int(flags.sum())
        self.state = nxt
        for i, env in enumerate(self.envs):
            theirs = env.step(int(action[i]))
            self.compare(i, ours, theirs, tick)
            self.tally.transitions += 1
            if theirs[2] or theirs[3]:
                self.start(i)


def differential(
    world: DoorKey,
    transitions: int,
    seed: int = 0,
    envs: int = 32,
    guided: float = 0.5,
    epsilon: float = 0.25,
    full_every: int = 1,
    rgb_every: int = 0,
) -> Tally:
    """Step MiniGrid and ``gridplan.core.doorkey_*`` side by side and count disagreements.

    Args:
        world: the DoorKey world (MiniGrid's ``DoorKeyEnv`` is built with its settings).
        transitions: steps to compare (rounded up to a multiple of ``envs``).
        seed: seeds MiniGrid's resets (episode ``k`` uses ``seed * 1000003 + k``) and the
            action draws.
        envs: environments stepped in lockstep (our batch size).
        guided: share of episodes whose actions are greedy in Q* (sizes up to
            ``GUIDED_MAX_SIZE``; uniform otherwise).
        epsilon: chance of a uniform action in a guided episode.
        full_every: compare the fully observed grid every this many ticks.
        rgb_every: compare the RGB frames (``get_frame`` with its highlighting and
            ``get_pov_render``, tile side ``RGB_TILE_SIZE``) every this many ticks; 0 never.

    Returns:
        The ``Tally``: transitions, episodes, mismatches per field, events, examples.

    Raises:
        ImportError, RuntimeError: if ``minigrid`` is missing or not ``PINNED_VERSION``.
        ValueError: on ``transitions``, ``envs`` or ``full_every`` below 1, ``rgb_every``
            below 0, or a MiniGrid grid that is not a DoorKey layout.
    """
    for name, value in (("transitions", transitions), ("envs", envs), ("full_every", full_every)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if rgb_every < 0:
        raise ValueError(f"rgb_every must be >= 0, got {rgb_every}")
    run = _Lockstep(world, envs, seed, guided, full_every, rgb_every)
    for i in range(envs):
        run.start(i)
    for tick in range(-(-transitions // envs)):
        run.tick(tick, epsilon)
    return run.tally
