"""Gymnasium adapters over the batched gridworld: one episode, or ``B`` episodes as one batch.

``GridPlanEnv`` is a ``gymnasium.Env``; ``GridPlanVectorEnv`` is a ``gymnasium.vector.VectorEnv``
that steps all ``B`` sub-environments with one call of ``gridplan.core.env.step`` on a ``(B, 12)``
tensor (no Python loop over sub-environments). Both observe the full state (paper §3; layout
in ``gridplan.core.constants``): ``Box(0, 1, (12,), float32)``; actions ``Discrete(4)`` (up, down,
left, right), batched as ``MultiDiscrete([4] * B)``.

Episodes end with ``terminated`` on the goal or hazard and with ``truncated`` after the task's
``horizon`` steps (60 in the paper) without either. ``info`` carries the step's events as
bools: ``goal``, ``hazard``, ``pickup``, ``door_opened`` (arrays of ``(B,)`` with Gymnasium's
``_key`` masks in the vector env).

Importing this module registers ``gridplan/KeyDoor-A-v0`` and ``gridplan/KeyDoor-B-v0``::

    import gymnasium as gym
    env = gym.make("gridplan.adapters.gymnasium:gridplan/KeyDoor-A-v0")
    envs = gym.make_vec("gridplan/KeyDoor-B-v0", num_envs=64)   # GridPlanVectorEnv

Needs ``pip install gridplan[gymnasium]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gridplan.adapters import backend, require
from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import check_state
from gridplan.core.tasks import Task
from gridplan.core.world import DEFAULT, World

gym = require("gymnasium", "gymnasium")

from gymnasium import spaces  # noqa: E402
from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

#: Event flags of a step, as returned in ``info``.
EVENTS = ("goal", "hazard", "pickup", "door_opened")
#: Registered ids per task name.
ENV_IDS = {"A": "gridplan/KeyDoor-A-v0", "B": "gridplan/KeyDoor-B-v0"}
_SEED_BOUND = 2**63 - 1


def observation_space(world: World = DEFAULT) -> spaces.Box:
    """``Box(0, 1, (S,), float32)``: the normalized state of ``world`` (``S = 12`` in the
    default world; layout in ``gridplan.core.world``)."""
    return spaces.Box(0.0, 1.0, (world.state_dim,), np.float32)


def _generator(seed: int | None, np_random: np.random.Generator, device) -> torch.Generator:
    """A torch generator seeded with ``seed``, or with a draw of the env's ``np_random``."""
    if seed is None:
        seed = int(np_random.integers(_SEED_BOUND))
    return torch.Generator(device=device).manual_seed(seed)


def _given_states(value: Any, rows: int, device, world: World) -> torch.Tensor:
    """``options["state"]`` as a validated ``(rows, S)`` float32 tensor in ``[0, 1]``."""
    array = np.asarray(value, dtype=np.float32)
    s = world.state_dim
    if array.shape != (rows, s) and not (rows == 1 and array.shape == (s,)):
        raise ValueError(
            f'options["state"] must have shape ({rows}, {s})'
            + (f" or ({s},)" if rows == 1 else "") + f", got {array.shape}"
        )
    state = check_state(torch.tensor(array.reshape(rows, s), device=device),
                        'options["state"]', world)
    if (state < 0).any() or (state > 1).any():
        raise ValueError(
            'options["state"] must lie in [0, 1] (normalized, see gridplan.core.constants)'
        )
    return state


def _check_options(options: dict | None, allowed: tuple[str, ...]) -> dict:
    options = {} if options is None else dict(options)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown reset options {unknown}; valid options are {list(allowed)}")
    return options


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """A fresh numpy copy, so returned data never aliases the environment's state."""
    return tensor.detach().cpu().numpy().copy()


def _event_info(events: dict[str, torch.Tensor], present: torch.Tensor) -> dict[str, np.ndarray]:
    """Vector ``info`` of the events: ``(B,)`` bools (False where absent) and ``_key`` masks."""
    out = {}
    for name in EVENTS:
        out[name] = _numpy(events[name] & present)
        out[f"_{name}"] = _numpy(present)
    return out


class GridPlanEnv(gym.Env):
    """One episode of the gridworld as a ``gymnasium.Env``.

    Args:
        task: task name or ``gridplan.core.tasks.Task`` (its geometry and ``horizon``).
        device: where the state tensor lives; observations are numpy arrays either way.
        world: the world a task name is placed on (``gridplan.core.world``; default: the
            task's own).

    ``reset(seed=s)`` seeds the torch generator that draws the start state and the
    distractors with ``s``; an unseeded first reset seeds it from ``self.np_random``; later
    unseeded resets continue its stream. ``reset(options={"state": x})`` starts from the
    ``(S,)`` state ``x`` instead of a random one.

    Raises:
        ValueError: on an unknown task (constructor), an invalid action, or bad options.
        gymnasium.error.ResetNeeded: on ``step`` before ``reset`` or after the episode ended.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        task: str | Task = "A",
        device: torch.device | str = "cpu",
        world: str | World | None = None,
    ) -> None:
        self.task = backend.resolve(task, world)
        self.device = torch.device(device)
        self.observation_space = observation_space(self.task.world)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self._generator: torch.Generator | None = None
        self._state: torch.Tensor | None = None
        self._steps = 0
        self._ended = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: ``(observation (S,) float32, info {})``."""
        options = _check_options(options, ("state",))
        given = None
        if "state" in options:
            given = _given_states(options["state"], 1, self.device, self.task.world)
        super().reset(seed=seed)
        if seed is not None or self._generator is None:
            self._generator = _generator(seed, self.np_random, self.device)
        if given is not None:
            self._state = given
        else:
            self._state = backend.reset(1, self._generator, self.task)
        self._steps = 0
        self._ended = False
        return _numpy(self._state[0]), {}

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict[str, bool]]:
        """One step: ``(observation, reward, terminated, truncated, info)``.

        ``reward`` is +1 on arriving at the goal, -1 on the hazard, else 0; ``info`` holds the
        event bools ``goal``, ``hazard``, ``pickup``, ``door_opened``.
        """
        if self._ended:
            raise gym.error.ResetNeeded("the episode has ended (or never started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an integer in 0..{N_ACTIONS - 1}, got {action!r}")
        act = torch.tensor([int(action)], device=self.device)
        state, reward, terminated, events = backend.step(
            self._state, act, self._generator, self.task
        )
        self._state = state
        self._steps += 1
        terminated = bool(terminated[0])
        truncated = not terminated and self._steps >= self.task.horizon
        self._ended = terminated or truncated
        info = {name: bool(events[name][0]) for name in EVENTS}
        return _numpy(state[0]), float(reward[0]), terminated, truncated, info


class GridPlanVectorEnv(VectorEnv):
    """``B`` episodes of the gridworld stepped as one ``(B, 12)`` batch.

    Args:
        num_envs: number of sub-environments ``B >= 1``.
        task: task name or ``gridplan.core.tasks.Task``.
        device: where the ``(B, 12)`` state lives; observations are numpy arrays either way.
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (Gymnasium's default: the step after an
            episode ends resets that sub-environment, ignores its action and returns reward
            0), ``SAME_STEP`` (the ending step returns the new episode's first observation and
            puts the last one in ``info["final_obs"]``, its events in ``info["final_info"]``)
            or ``DISABLED`` (reset ended sub-environments with ``options={"reset_mask": m}``).

    Seeding: the batch shares one torch generator, so one call of ``gridplan.core.env.step``
    serves every sub-environment. ``reset(seed=s)`` seeds it with ``s`` and gives the same
    ``B`` start states as ``gridplan.core.env.reset(B, torch.Generator().manual_seed(s), task)``
    (not those of ``gridplan.planning.closed_loop.start_states``, which draws in blocks).
    Gymnasium's ``SyncVectorEnv`` would seed sub-environment ``i`` with ``s + i``;
    per-sub-environment seeds would need ``B`` generators and ``B`` draws per step, so a list of
    seeds is refused.

    ``reset`` options: ``reset_mask`` (``(B,)`` bool numpy array: reset only those rows,
    drawing fresh start states for them alone) and ``state`` (``(B, 12)`` start states; with a
    mask only the masked rows are taken).

    Raises:
        ValueError: on ``num_envs < 1``, an unknown task or autoreset mode, a list of seeds,
            bad options or actions, and, with ``DISABLED``, a step of an ended sub-environment.
    """

    def __init__(
        self,
        num_envs: int,
        task: str | Task = "A",
        device: torch.device | str = "cpu",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        world: str | World | None = None,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        self.task = backend.resolve(task, world)
        self.device = torch.device(device)
        self.num_envs = num_envs
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.single_observation_space = observation_space(self.task.world)
        self.single_action_space = spaces.Discrete(N_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._generator: torch.Generator | None = None
        self._state: torch.Tensor | None = None
        self._steps = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        # Sub-environments whose episode ended on the last step (reset next, or refused).
        self._ended = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start episodes: ``(observations (B, 12) float32, info {})``."""
        if seed is not None and not isinstance(seed, int | np.integer):
            raise ValueError(
                "GridPlanVectorEnv takes one integer seed for the whole batch (its sub-"
                f"environments share one generator), got {type(seed).__name__}"
            )
        options = _check_options(options, ("reset_mask", "state"))
        rows = self._reset_rows(options.get("reset_mask"))
        if self._state is None and not bool(rows.all()):
            raise ValueError('options["reset_mask"] needs a full reset() first')
        given = None
        if "state" in options:
            given = _given_states(options["state"], self.num_envs, self.device, self.task.world)
        super().reset(seed=None if seed is None else int(seed))
        if seed is not None or self._generator is None:
            self._generator = _generator(seed, self.np_random, self.device)
        if given is not None:
            fresh = given[rows]
        else:
            fresh = backend.reset(int(rows.sum()), self._generator, self.task)
        if self._state is None:
            self._state = fresh
        else:
            self._state[rows] = fresh
        self._steps[rows] = 0
        self._ended[rows] = False
        return _numpy(self._state), {}

    def _reset_rows(self, mask) -> torch.Tensor:
        if mask is None:
            return torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise ValueError('options["reset_mask"] must be a numpy bool array')
        if mask.shape != (self.num_envs,) or not mask.any():
            raise ValueError(
                f'options["reset_mask"] must have shape ({self.num_envs},) and one True value '
                f"at least, got shape {mask.shape}"
            )
        return torch.as_tensor(mask, device=self.device)

    def _actions(self, actions) -> torch.Tensor:
        array = np.asarray(actions)
        if array.shape != (self.num_envs,) or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"actions must be {self.num_envs} integers in 0..{N_ACTIONS - 1}, got "
                f"shape {array.shape} dtype {array.dtype}"
            )
        if not self.action_space.contains(array.astype(self.action_space.dtype)):
            raise ValueError(f"actions must lie in 0..{N_ACTIONS - 1}, got {array.tolist()}")
        return torch.as_tensor(array, dtype=torch.long, device=self.device)

    def step(self, actions):
        """Step every sub-environment: ``(obs (B, 12), reward (B,) float64, terminated (B,),
        truncated (B,), info)``; ``info[event]`` is ``(B,)`` bool with mask ``info["_" + event]``
        (False where a ``NEXT_STEP`` reset replaced the step)."""
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        action = self._actions(actions)
        live = ~self._ended
        if self.autoreset_mode == AutoresetMode.DISABLED and not live.all():
            ended = (~live).nonzero().flatten().tolist()
            raise ValueError(
                f"sub-environments {ended} have ended; with autoreset DISABLED reset them "
                'with reset(options={"reset_mask": mask})'
            )
        n = self.num_envs
        reward = torch.zeros(n, device=self.device)
        terminated = torch.zeros(n, dtype=torch.bool, device=self.device)
        events = {name: torch.zeros(n, dtype=torch.bool, device=self.device) for name in EVENTS}
        if live.any():
            nxt, r, term, info = backend.step(
                self._state[live], action[live], self._generator, self.task
            )
            self._state[live] = nxt
            reward[live] = r
            terminated[live] = term
            for name in EVENTS:
                events[name][live] = info[name]
            self._steps[live] += 1
        truncated = live & ~terminated & (self._steps >= self.task.horizon)
        ended = live & (terminated | truncated)
        info = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended.any():
            # As Gymnasium's SyncVectorEnv: the ended step's data moves to final_obs/final_info.
            final = np.full(n, None, dtype=object)
            rows = ended.nonzero().flatten().tolist()
            for i, row in zip(rows, _numpy(self._state[ended]), strict=True):
                final[i] = row
            info["final_obs"], info["_final_obs"] = final, _numpy(ended)
            info["final_info"] = _event_info(events, ended)
            info["_final_info"] = _numpy(ended)
            self._restart(ended)
            live = live & ~ended
        else:
            # NEXT_STEP resets the rows that ended last step now, and those next step.
            if not live.all():
                self._restart(~live)
            self._ended = ended
        info.update(_event_info(events, live))
        return (
            _numpy(self._state),
            _numpy(reward).astype(np.float64),
            _numpy(terminated),
            _numpy(truncated),
            info,
        )

    def _restart(self, rows: torch.Tensor) -> None:
        """Fresh start states for ``rows`` (drawn for those rows only)."""
        self._state[rows] = backend.reset(int(rows.sum()), self._generator, self.task)
        self._steps[rows] = 0
        self._ended[rows] = False


def register_envs() -> None:
    """Register ``ENV_IDS`` with Gymnasium (done on import; idempotent)."""
    for name, env_id in ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=f"{__name__}:GridPlanEnv",
            vector_entry_point=f"{__name__}:GridPlanVectorEnv",
            kwargs={"task": name},
            nondeterministic=False,
        )


register_envs()
