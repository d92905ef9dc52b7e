"""Gymnasium adapters over the batched gridworld: one episode, ``B`` episodes as one batch, and
one imagined episode of a world model.

``GridPlanEnv`` is a ``gymnasium.Env``; ``GridPlanVectorEnv`` is a ``gymnasium.vector.VectorEnv``
that steps all ``B`` sub-environments with one call of ``gridplan.core.dynamics.step`` on a
``(B, S)`` tensor (no Python loop over sub-environments); ``ImaginedEnv`` is a
``gymnasium.Env`` whose dynamics are a world model's ``predict`` (``backend.Imagination``:
the plug-in checks and clamping of ``python -m eval``), its reward and termination the task's,
read from the predicted state as the planner reads leaves (the Gymnasium twin of
``gridplan.adapters.torchrl``'s ``WorldModelEnv``). All observe the full state (paper §3;
layout in ``gridplan.core.constants``), in the paper's world ``Box(0, 1, (12,), float32)``;
actions ``Discrete(A)``, ``A = task.world.n_actions``: the paper's ``Discrete(4)`` (up, down,
left, right), batched as ``MultiDiscrete([4] * B)``.

Every env also plays MiniGrid DoorKey (``world="minigrid-doorkey-8x8"``, task ``"A"``;
``gridplan.core.doorkey_task``): the state ``Box(0, 1, (9 + 2 T,), float32)``, MiniGrid's seven
actions ``Discrete(7)`` (``gridplan.core.doorkey_constants``), episodes of the world's
``max_steps``; ``info`` events as above, ``door_opened`` being the unlock. The drawings
(``observation="grid"``/``"pixels"``, ``render_mode``) are the paper world's and are refused
there with a ``ValueError``. The registered ids are the paper world's: through ``gym.make`` on
DoorKey pass ``max_episode_steps`` too (the spec's is the paper task's horizon).

Episodes end with ``terminated`` on the goal or hazard and with ``truncated`` after
``max_episode_steps`` steps without either (default the task's ``horizon``, 60 in the paper).
``info`` carries the step's events as bools: ``goal``, ``hazard``, ``pickup``, ``door_opened``
(arrays of ``(B,)`` with Gymnasium's ``_key`` masks in the vector env). With
``info_state=True`` (off by default, so ``info`` stays the events alone) ``info`` also carries
the physical state of the observation returned, on ``reset`` and every ``step``: ``state``,
the ``(S,)`` float32 normalized state (``S`` = 12 in the default world; ``(B, S)`` with mask
``_state`` in the vector env, and in ``final_info`` of a ``SAME_STEP`` autoreset) and, in the
single envs, ``state_dims``, the world's dim names (``World.dim_names``, a tuple of ``S``
strings). A model trained on pixels can so be scored against the state it saw.
``render_mode="ansi"``
makes ``render()`` return the state as an 8x8 text grid, ``render_mode="rgb_array"`` as a
``(32, 32, 3)`` uint8 image (``gridplan.adapters.rendering``).

``observation="grid"`` or ``"pixels"`` makes every env observe a drawing of the state instead
of the state itself (``gridplan.core.render``; ``observation_space``): ``(C, N, N)`` float32
channels or ``(3, N P, N P)`` uint8 RGB (channels first, as torch's convolutions read them),
distractors and colour bits drawn; ``options={"state": x}`` still takes a state.

Importing this module registers ``gridplan/KeyDoor-A-v0``, ``gridplan/KeyDoor-B-v0`` and their
imagined twins ``gridplan/Imagined-A-v0``, ``gridplan/Imagined-B-v0`` (which need ``model=``),
each with ``max_episode_steps`` the task's horizon::

    import gymnasium as gym
    env = gym.make("gridplan.adapters.gymnasium:gridplan/KeyDoor-A-v0", render_mode="ansi")
    env = gym.make("gridplan/KeyDoor-A-v0", max_episode_steps=100)   # 100-step episodes
    envs = gym.make_vec("gridplan/KeyDoor-B-v0", num_envs=64)   # GridPlanVectorEnv
    dream = gym.make("gridplan/Imagined-A-v0", model=my_model)   # episodes inside my_model

Through ``gym.make`` the episode length is Gymnasium's: the ``TimeLimit`` wrapper of the spec's
``max_episode_steps`` (the task's horizon unless ``gym.make(..., max_episode_steps=N)`` says
otherwise; ``-1``: none) truncates, and the env underneath never truncates on its own, so
``env.spec.max_episode_steps`` is always the true limit (``TimeAwareObservation`` reads it).
``gym.make_vec`` passes ``max_episode_steps`` to ``GridPlanVectorEnv``, which truncates itself.

Needs ``pip install "gridplan[gymnasium]"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gridplan.adapters import backend, rendering
from gridplan.core import render
from gridplan.core.doorkey_constants import AGENT as MAX_CODE
from gridplan.core.doorkey_world import DoorKey
from gridplan.core.env import check_state
from gridplan.core.tasks import TaskKind
from gridplan.core.world import DEFAULT, World
from gridplan.util.extras import require

require("gymnasium", "gridplan.adapters.gymnasium")

import gymnasium as gym  # noqa: E402
from gymnasium import spaces  # noqa: E402
from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

#: Event flags of a step, as returned in ``info``.
EVENTS = ("goal", "hazard", "pickup", "door_opened")
#: Registered ids per task name.
ENV_IDS = {"A": "gridplan/KeyDoor-A-v0", "B": "gridplan/KeyDoor-B-v0"}
#: Registered ids of the imagined envs (``ImaginedEnv``, ``gym.make(id, model=...)``).
IMAGINED_IDS = {"A": "gridplan/Imagined-A-v0", "B": "gridplan/Imagined-B-v0"}
_SEED_BOUND = 2**63 - 1
#: Render modes and frame rate of every env here.
METADATA = {"render_modes": list(rendering.RENDER_MODES), "render_fps": 4}


def observation_space(world: World | DoorKey = DEFAULT, observation: str = "state") -> spaces.Box:
    """The space of one observation of ``world`` (``gridplan.core.render``):

    * ``state``: ``Box(0, 1, (S,), float32)``, the normalized state (``S = 12`` in the
      default world, ``9 + 2 T`` on DoorKey; layout in ``gridplan.core.world``,
      ``gridplan.core.doorkey_task``);
    * ``grid``: ``Box(0, K, (C, N, N), float32)``, ``K`` the most distractors of one kind (a
      cell's count), at least 1;
    * ``pixels``: ``Box(0, 255, (3, N P, N P), uint8)``, ``P = render.PIXELS_PER_CELL``.

    ``grid`` and ``pixels`` draw the paper's gridworld only; a MiniGrid DoorKey world draws
    ``egocentric`` (``Box(0, 10, (3, V, V), float32)``: MiniGrid's ``(object, colour,
    state)`` codes of the agent's view) and ``full`` (``(3, N, N)``), ``gridplan.core.render``.

    Raises:
        ValueError: on an unknown observation kind, or one the world does not draw (naming
            the kinds it does).
    """
    render.check_world_kind(world, observation)
    shape = render.obs_shape(world, observation)
    if observation == "state":
        return spaces.Box(0.0, 1.0, shape, np.float32)
    if observation == "grid":
        return spaces.Box(0.0, float(max(1, world.d1, world.d2)), shape, np.float32)
    if observation in ("egocentric", "full"):
        return spaces.Box(0.0, float(MAX_CODE), shape, np.float32)
    return spaces.Box(0, 255, shape, np.uint8)


def _observations(state: torch.Tensor, world: World, observation: str) -> np.ndarray:
    """``(B, *shape)`` numpy observations of ``(B, S)`` states (a fresh copy)."""
    if observation == "state":
        return _numpy(state)
    return _numpy(render.observe(state, world, observation))


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
            + (f" or ({s},)" if rows == 1 else "")
            + f", got {array.shape}"
        )
    state = check_state(
        torch.tensor(array.reshape(rows, s), device=device), 'options["state"]', world
    )
    if (state < 0).any() or (state > 1).any():
        raise ValueError(
            'options["state"] must lie in [0, 1] (normalized, see gridplan.core.constants)'
        )
    return state


def episode_steps(max_episode_steps: int | None, task: TaskKind) -> int:
    """Steps after which an episode truncates: ``max_episode_steps``, or the task's horizon.

    Raises:
        ValueError: if ``max_episode_steps`` is not an integer >= 1 (or None).
    """
    if max_episode_steps is None:
        return task.horizon
    if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int | np.integer):
        raise ValueError(f"max_episode_steps must be an integer >= 1, got {max_episode_steps!r}")
    if max_episode_steps < 1:
        raise ValueError(f"max_episode_steps must be an integer >= 1, got {max_episode_steps}")
    return int(max_episode_steps)


def _check_render_mode(render_mode: str | None, world: World | DoorKey) -> str | None:
    """``render_mode`` if ``gridplan.adapters.rendering`` draws it on ``world``.

    Raises:
        ValueError: on an unknown mode, or any mode on a DoorKey world (the drawings are the
            paper's gridworld's).
    """
    rendering.check_render_mode(render_mode)
    if render_mode is not None and not isinstance(world, World):
        raise ValueError(
            f"render_mode={render_mode!r} draws the paper's gridworld "
            f"(gridplan.adapters.rendering); world {world.name} renders nothing: pass "
            'render_mode=None and observation="state"'
        )
    return render_mode


def _metadata(world: World | DoorKey) -> dict[str, Any]:
    """``METADATA`` with the render modes ``world`` has (none on DoorKey)."""
    modes = METADATA["render_modes"] if isinstance(world, World) else []
    return {**METADATA, "render_modes": modes}


def _check_info_state(info_state) -> bool:
    """``info_state`` if it is a bool; Raises ValueError otherwise."""
    if not isinstance(info_state, bool):
        raise ValueError(f"info_state must be True or False, got {info_state!r}")
    return info_state


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


def _state_info(state: torch.Tensor, world: World) -> dict[str, Any]:
    """A single env's ``info`` of its ``(1, S)`` state: ``state`` ``(S,)`` float32 and
    ``state_dims`` (module docstring)."""
    return {"state": _numpy(state[0]), "state_dims": world.dim_names}


class _EpisodeEnv(gym.Env):
    """One episode over ``(1, S)`` state tensors; subclasses define a step (``_advance``)."""

    metadata = METADATA

    def __init__(
        self,
        task: str | TaskKind,
        device: torch.device | str,
        render_mode: str | None,
        max_episode_steps: int | None,
        world: str | World | DoorKey | None,
        observation: str = "state",
        info_state: bool = False,
    ) -> None:
        self.task = backend.resolve(task, world)
        self.device = torch.device(device)
        self.metadata = _metadata(self.task.world)
        self.render_mode = _check_render_mode(render_mode, self.task.world)
        self.info_state = _check_info_state(info_state)
        #: Steps after which the env truncates; None: never (an outer ``TimeLimit`` does).
        self.max_episode_steps: int | None = episode_steps(max_episode_steps, self.task)
        self.observation = render.check_world_kind(self.task.world, observation)
        self.observation_space = observation_space(self.task.world, observation)
        self.action_space = spaces.Discrete(self.task.world.n_actions)
        self._generator: torch.Generator | None = None
        self._state: torch.Tensor | None = None
        self._steps = 0
        self._ended = True

    def _begin(self, generator: torch.Generator) -> None:
        """Called at every reset, after the start state is set."""

    def _advance(self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator):
        raise NotImplementedError

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: ``(observation, info)``; the observation ``(S,)`` float32 (or
        the ``observation`` kind's drawing), ``info`` empty, or the state with ``info_state``."""
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
        self._begin(self._generator)
        self._steps = 0
        self._ended = False
        info = _state_info(self._state, self.task.world) if self.info_state else {}
        return _observations(self._state, self.task.world, self.observation)[0], info

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict[str, bool]]:
        """One step: ``(observation, reward, terminated, truncated, info)``.

        ``reward`` is +1 on arriving at the goal, -1 on the hazard, else 0; ``info`` holds the
        event bools ``goal``, ``hazard``, ``pickup``, ``door_opened`` (and, with
        ``info_state``, the new ``state`` and ``state_dims``).
        """
        if self._ended:
            raise gym.error.ResetNeeded("the episode has ended (or never started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(
                f"action must be an integer in 0..{self.action_space.n - 1}, got {action!r}"
            )
        act = torch.tensor([int(action)], device=self.device)
        state, reward, terminated, events = self._advance(self._state, act, self._generator)
        self._state = state
        self._steps += 1
        terminated = bool(terminated[0])
        limit = self.max_episode_steps
        truncated = not terminated and limit is not None and self._steps >= limit
        self._ended = terminated or truncated
        info: dict[str, Any] = {name: bool(events[name][0]) for name in EVENTS}
        if self.info_state:
            info.update(_state_info(state, self.task.world))
        obs = _observations(state, self.task.world, self.observation)[0]
        return obs, float(reward[0]), terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        """``render_mode="ansi"``: the current state as text, ``"rgb_array"``: as an
        ``(N P, N P, 3)`` uint8 image (``gridplan.adapters.rendering``); None without a render
        mode.

        Raises:
            gymnasium.error.ResetNeeded: before the first ``reset``.
        """
        if self.render_mode is None:
            return None
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        if self.render_mode == "rgb_array":
            return rendering.rgb_array(self._state[0], self.task)
        return rendering.ansi(self._state[0], self.task)


class GridPlanEnv(_EpisodeEnv):
    """One episode of the gridworld as a ``gymnasium.Env``.

    Args:
        task: task name or task (``gridplan.core.tasks.Task`` or ``DoorKeyTask``: its
            geometry and ``horizon``).
        device: where the state tensor lives; observations are numpy arrays either way.
        render_mode: None, ``"ansi"`` (``render()`` returns the N x N text grid of
            ``gridplan.adapters.rendering``) or ``"rgb_array"`` (the ``(N P, N P, 3)`` uint8
            image of the same reading of the state).
        max_episode_steps: steps after which an episode truncates (default the task's
            ``horizon``). Through ``gym.make`` the spec's ``TimeLimit`` truncates instead (module
            docstring), so ``gym.make(id, max_episode_steps=N)`` gives ``N``-step episodes.
        world: the world a task name is placed on (``gridplan.core.world``: a name such as
            ``g16-k8`` or ``minigrid-doorkey-8x8``, a ``World`` or a ``DoorKey``; default the
            task's own).
        observation: ``"state"`` (default), ``"grid"`` or ``"pixels"``: what ``reset`` and
            ``step`` return (``observation_space``, ``gridplan.core.render``).
        info_state: put the physical state in ``info`` (module docstring).

    ``reset(seed=s)`` seeds the torch generator that draws the start state and the
    distractors with ``s``; an unseeded first reset seeds it from ``self.np_random``; later
    unseeded resets continue its stream. ``reset(options={"state": x})`` starts from the
    ``(S,)`` state ``x`` instead of a random one.

    Raises:
        ValueError: on an unknown task, render mode or a bad ``max_episode_steps``
            (constructor), a drawing (observation or render mode) of a DoorKey world, an
            invalid action, or bad options.
        gymnasium.error.ResetNeeded: on ``step`` before ``reset`` or after the episode ended.
    """

    def __init__(
        self,
        task: str | TaskKind = "A",
        device: torch.device | str = "cpu",
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        world: str | World | DoorKey | None = None,
        observation: str = "state",
        info_state: bool = False,
    ) -> None:
        super().__init__(
            task, device, render_mode, max_episode_steps, world, observation, info_state
        )

    def _advance(self, state, action, generator):
        return backend.step(state, action, generator, self.task)


class ImaginedEnv(_EpisodeEnv):
    """One episode inside a world model: the Gymnasium twin of
    ``gridplan.adapters.torchrl.WorldModelEnv``.

    Episodes start from the task's true start states (``gridplan.core.dynamics.reset``, or
    ``options={"state": x}``); every step is the model's ``predict`` of the current (predicted)
    state, clamped into ``[0, 1]``; reward and termination are the task's, read from the
    predicted state through rounded cells (``gridplan.core.dynamics.outcome``, as the planner
    scores leaves); ``info`` events are read from the predicted state (``pickup`` /
    ``door_opened``: the thresholded flag turned on, ``backend.Imagination.step``). The model
    is held to the contract ``python -m eval`` applies (``gridplan.models.plugins``: checked
    once on construction, every output checked, out-of-range values clamped with one
    ``OutOfRangeWarning``); its ``start_rollout(1, generator)`` is called at every reset.

    Args:
        model: anything with ``predict(state (N, S), action (N,), generator) -> (N, S)``.
        task, device, render_mode, max_episode_steps, observation, info_state: as
            ``GridPlanEnv`` (``info["state"]`` is the predicted state).
        world: as ``GridPlanEnv``; default the world the model declares (``model.world``).

    ``reset(seed=s)`` seeds the one torch generator of the start state and of the model's
    noise, so a seeded episode replays exactly for a model that draws only from it.

    Raises:
        gridplan.models.plugins.PluginError: (a ``ValueError``) if the model fails the
            contract, on construction or at a step.
        ValueError, gymnasium.error.ResetNeeded: as ``GridPlanEnv``.
    """

    def __init__(
        self,
        model,
        task: str | TaskKind = "A",
        device: torch.device | str = "cpu",
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        world: str | World | DoorKey | None = None,
        observation: str = "state",
        info_state: bool = False,
    ) -> None:
        world = backend.model_world(model, world)
        super().__init__(
            task, device, render_mode, max_episode_steps, world, observation, info_state
        )
        self.imagination = backend.Imagination(model, self.task, self.device)

    @property
    def model(self):
        """The world model as given."""
        return self.imagination.source

    @property
    def clamped(self) -> int:
        """Predicted values clamped into ``[0, 1]`` so far."""
        return self.imagination.clamped

    def _begin(self, generator: torch.Generator) -> None:
        self.imagination.start(1, generator)

    def _advance(self, state, action, generator):
        return self.imagination.step(state, action, generator)


class GridPlanVectorEnv(VectorEnv):
    """``B`` episodes of the gridworld stepped as one ``(B, S)`` batch.

    Args:
        num_envs: number of sub-environments ``B >= 1``.
        task: task name or ``gridplan.core.tasks.Task``.
        device: where the ``(B, S)`` state lives; observations are numpy arrays either way.
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (Gymnasium's default: the step after an
            episode ends resets that sub-environment, ignores its action and returns reward
            0), ``SAME_STEP`` (the ending step returns the new episode's first observation and
            puts the last one in ``info["final_obs"]``, its events in ``info["final_info"]``)
            or ``DISABLED`` (reset ended sub-environments with ``options={"reset_mask": m}``).
        render_mode: None, ``"ansi"`` (``render()`` returns a tuple of ``B`` text grids) or
            ``"rgb_array"`` (a tuple of ``B`` images).
        max_episode_steps: steps after which a sub-environment's episode truncates (default
            the task's ``horizon``; ``gym.make_vec`` passes the spec's or the caller's).
        world: as ``GridPlanEnv``.
        observation: as ``GridPlanEnv`` (observations batched ``(B, ...)``).
        info_state: put the ``(B, S)`` states in ``info["state"]`` (module docstring).

    Seeding follows Gymnasium's ``SyncVectorEnv`` of ``GridPlanEnv``: ``reset(seed=s)`` seeds
    sub-environment ``i`` with ``s + i``, ``reset(seed=[s_0, ..., s_{B-1}])`` with ``s_i``,
    and sub-environment ``i`` starts where ``GridPlanEnv().reset(seed=s_i)`` starts. The steps
    then share one torch generator, so one call of ``gridplan.core.dynamics.step`` serves every
    sub-environment: sub-environment 0's (seeded ``s_0``, continued after its start), which
    draws every step's distractors and every later start. With ``B = 1`` the episode is
    ``GridPlanEnv``'s; with more, the decided dims (agent, key, flags) of the first episodes
    follow ``SyncVectorEnv``'s under the same actions, while the distractors and the later
    starts come from the shared stream (independent per-sub-environment streams would need
    ``B`` draws per step). With ``reset_mask`` only the masked sub-environments take their
    seeds, and the first of them provides the shared generator.

    ``reset`` options: ``reset_mask`` (``(B,)`` bool numpy array: reset only those rows,
    drawing fresh start states for them alone) and ``state`` (``(B, S)`` start states; with a
    mask only the masked rows are taken).

    Raises:
        ValueError: on ``num_envs < 1``, an unknown task, autoreset mode or render mode, a bad
            ``max_episode_steps``, seeds that are not ``B`` integers >= 0, bad options or
            actions, and, with ``DISABLED``, a step of an ended sub-environment.
    """

    def __init__(
        self,
        num_envs: int,
        task: str | TaskKind = "A",
        device: torch.device | str = "cpu",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        world: str | World | DoorKey | None = None,
        observation: str = "state",
        info_state: bool = False,
    ) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        self.task = backend.resolve(task, world)
        self.device = torch.device(device)
        self.num_envs = num_envs
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.render_mode = _check_render_mode(render_mode, self.task.world)
        self.info_state = _check_info_state(info_state)
        self.max_episode_steps = episode_steps(max_episode_steps, self.task)
        self.metadata = {"autoreset_mode": self.autoreset_mode, **_metadata(self.task.world)}
        self.observation = render.check_world_kind(self.task.world, observation)
        self.single_observation_space = observation_space(self.task.world, observation)
        self.single_action_space = spaces.Discrete(self.task.world.n_actions)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._generator: torch.Generator | None = None
        self._state: torch.Tensor | None = None
        self._steps = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        # Sub-environments whose episode ended on the last step (reset next, or refused).
        self._ended = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    def reset(
        self,
        *,
        seed: int | list[int] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start episodes: ``(observations (B, S) float32, info {})``; ``seed`` as the class
        docstring (an int, a list of ``B`` ints, or None)."""
        seeds = self._seeds(seed)
        options = _check_options(options, ("reset_mask", "state"))
        rows = self._reset_rows(options.get("reset_mask"))
        if self._state is None and not bool(rows.all()):
            raise ValueError('options["reset_mask"] needs a full reset() first')
        given = None
        if "state" in options:
            given = _given_states(options["state"], self.num_envs, self.device, self.task.world)
        picked = None if seeds is None else [seeds[i] for i in rows.nonzero().flatten().tolist()]
        super().reset(seed=None if picked is None else picked[0])
        drawn = None
        if picked is not None:
            # Each reset row starts from its own seed, as GridPlanEnv.reset(seed=s_i) would;
            # the first one's generator, continued, serves every later draw.
            # Given states draw nothing, as in GridPlanEnv.
            generators = [_generator(s, self.np_random, self.device) for s in picked]
            if given is None:
                drawn = torch.cat([backend.reset(1, g, self.task) for g in generators])
            self._generator = generators[0]
        elif self._generator is None:
            self._generator = _generator(None, self.np_random, self.device)
        if given is not None:
            fresh = given[rows]
        elif drawn is not None:
            fresh = drawn
        else:
            fresh = backend.reset(int(rows.sum()), self._generator, self.task)
        if self._state is None:
            self._state = fresh
        else:
            self._state[rows] = fresh
        self._steps[rows] = 0
        self._ended[rows] = False
        info = self._states_info(torch.ones_like(rows)) if self.info_state else {}
        return _observations(self._state, self.task.world, self.observation), info

    def _states_info(self, present: torch.Tensor) -> dict[str, np.ndarray]:
        """Vector ``info`` of the current states: ``state`` ``(B, S)`` (zeros where absent)
        and its ``_state`` mask."""
        return {
            "state": _numpy(self._state * present.unsqueeze(1)),
            "_state": _numpy(present),
        }

    def _seeds(self, seed) -> list[int] | None:
        """``B`` per-sub-environment seeds of ``reset(seed=...)`` (``s + i`` for an int)."""
        if seed is None:
            return None
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        elif isinstance(seed, list | tuple | np.ndarray):
            seeds = list(seed)
            if len(seeds) != self.num_envs or not all(
                isinstance(s, int | np.integer) and not isinstance(s, bool) for s in seeds
            ):
                raise ValueError(
                    f"seed must be one integer or a list of {self.num_envs} integers (one per "
                    f"sub-environment), got {seed!r}"
                )
            seeds = [int(s) for s in seeds]
        else:
            raise ValueError(
                f"seed must be an integer, a list of {self.num_envs} integers or None, got "
                f"{type(seed).__name__}"
            )
        if min(seeds) < 0 or max(seeds) > _SEED_BOUND:
            raise ValueError(f"seeds must lie in 0..2**63-1, got {seeds}")
        return seeds

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
        last = self.single_action_space.n - 1
        if array.shape != (self.num_envs,) or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"actions must be {self.num_envs} integers in 0..{last}, got "
                f"shape {array.shape} dtype {array.dtype}"
            )
        if not self.action_space.contains(array.astype(self.action_space.dtype)):
            raise ValueError(f"actions must lie in 0..{last}, got {array.tolist()}")
        return torch.as_tensor(array, dtype=torch.long, device=self.device)

    def step(self, actions):
        """Step every sub-environment: ``(obs (B, S), reward (B,) float64, terminated (B,),
        truncated (B,), info)``; ``info[event]`` is ``(B,)`` bool with mask ``info["_" + event]``
        (False where a ``NEXT_STEP`` reset replaced the step); ``obs`` is ``(B, ...)`` of the
        ``observation`` kind."""
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
        truncated = live & ~terminated & (self._steps >= self.max_episode_steps)
        ended = live & (terminated | truncated)
        info = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended.any():
            # As Gymnasium's SyncVectorEnv: the ended step's data moves to final_obs/final_info.
            final = np.full(n, None, dtype=object)
            rows = ended.nonzero().flatten().tolist()
            last = _observations(self._state[ended], self.task.world, self.observation)
            for i, row in zip(rows, last, strict=True):
                final[i] = row
            info["final_obs"], info["_final_obs"] = final, _numpy(ended)
            info["final_info"] = _event_info(events, ended)
            if self.info_state:
                info["final_info"].update(self._states_info(ended))
            info["_final_info"] = _numpy(ended)
            self._restart(ended)
            live = live & ~ended
        else:
            # NEXT_STEP resets the rows that ended last step now, and those next step.
            if not live.all():
                self._restart(~live)
            self._ended = ended
        info.update(_event_info(events, live))
        if self.info_state:
            info.update(self._states_info(torch.ones_like(live)))
        return (
            _observations(self._state, self.task.world, self.observation),
            _numpy(reward).astype(np.float64),
            _numpy(terminated),
            _numpy(truncated),
            info,
        )

    def render(self) -> tuple[str, ...] | tuple[np.ndarray, ...] | None:
        """``render_mode="ansi"``: one text grid per sub-environment, ``"rgb_array"``: one
        image each (``gridplan.adapters.rendering``); None without a render mode.

        Raises:
            gymnasium.error.ResetNeeded: before the first ``reset``.
        """
        if self.render_mode is None:
            return None
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        if self.render_mode == "rgb_array":
            return tuple(rendering.rgb_array(row, self.task) for row in self._state)
        return tuple(rendering.ansi(row, self.task) for row in self._state)

    def _restart(self, rows: torch.Tensor) -> None:
        """Fresh start states for ``rows`` (drawn for those rows only)."""
        self._state[rows] = backend.reset(int(rows.sum()), self._generator, self.task)
        self._steps[rows] = 0
        self._ended[rows] = False


def _registered_env(**kwargs) -> GridPlanEnv:
    """``gym.make``'s ``GridPlanEnv``: truncation is left to the spec's ``TimeLimit``."""
    env = GridPlanEnv(**kwargs)
    env.max_episode_steps = None
    return env


def _registered_imagined_env(**kwargs) -> ImaginedEnv:
    """``gym.make``'s ``ImaginedEnv``: truncation is left to the spec's ``TimeLimit``."""
    env = ImaginedEnv(**kwargs)
    env.max_episode_steps = None
    return env


# gym.make reads the creator's render modes from its metadata.
_registered_env.metadata = _registered_imagined_env.metadata = METADATA


def register_envs() -> None:
    """Register ``ENV_IDS`` and ``IMAGINED_IDS`` with Gymnasium (done on import; idempotent),
    each with ``max_episode_steps`` its task's horizon."""
    for name, env_id in ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=f"{__name__}:_registered_env",
            vector_entry_point=f"{__name__}:GridPlanVectorEnv",
            max_episode_steps=backend.resolve(name).horizon,
            kwargs={"task": name},
            nondeterministic=False,
        )
    for name, env_id in IMAGINED_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=f"{__name__}:_registered_imagined_env",
            max_episode_steps=backend.resolve(name).horizon,
            kwargs={"task": name},
            nondeterministic=False,
        )


register_envs()
