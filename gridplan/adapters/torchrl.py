"""TorchRL adapters: the true environment as an ``EnvBase`` and any gridplan world model as a
``ModelBasedEnvBase``, so TorchRL's ``CEMPlanner`` and ``MPPIPlanner`` plan on our models.

* ``GridEnv(batch_size=B)``: ``B`` episodes of the task (``gridplan.core.dynamics``) stepped as
  one ``(B, S)`` batch. Keys: ``observation`` ``(B, S)`` float32 in ``[0, 1]`` (the full state,
  ``S = 12`` in the paper's world, layout in ``gridplan.core.constants``), ``step_count``
  ``(B, 1)`` int64, the events ``goal``, ``hazard``, ``pickup``, ``door_opened`` ``(B, 1)``
  bool, ``action`` ``(B,)`` int64 in ``0..A-1`` (``A = task.world.n_actions``: 4 in the
  paper's world, MiniGrid DoorKey's 7 on ``world="minigrid-doorkey-8x8"``),
  ``reward`` ``(B, 1)`` (+1 goal, -1 hazard), ``terminated`` (goal or hazard), ``truncated``
  (the task's ``horizon`` reached) and ``done``.
* ``WorldModelEnv(model)``: one imagined step per ``step`` through ``model.predict``, reward
  and termination read from the predicted state through the task's goal and hazard cells (as
  the full-width planner of ``gridplan.planning.planner`` scores leaves). It is not batch-locked:
  the planners step it on ``(B, K)`` candidate batches.

The planners draw Gaussian action sequences, so ``WorldModelEnv``'s action is a continuous
``(A,)`` vector of action scores and the executed action is its argmax: with the planners'
zero-mean, unit-variance start every sequence of discrete actions is equally likely, and the
returned mean scores rank the first actions. ``planning_policy`` turns a planner into a
``GridEnv`` policy (argmax of those scores)::

    env, model_env = GridEnv(batch_size=8, seed=0), WorldModelEnv(OracleModel(), shaping=True)
    policy = planning_policy(CEMPlanner(model_env, planning_horizon=4, optim_steps=4,
                                        num_candidates=64, top_k=8))
    rollout = env.rollout(60, policy, break_when_any_done=False, break_when_all_done=True)

Needs ``pip install "gridplan[torchrl]"``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gridplan.adapters import backend
from gridplan.core.doorkey_world import DoorKey
from gridplan.core.env import check_state
from gridplan.core.tasks import TaskKind
from gridplan.core.world import World
from gridplan.models.contract import WorldModel
from gridplan.util.extras import require

require("torchrl", "gridplan.adapters.torchrl")

from tensordict import TensorDict, TensorDictBase  # noqa: E402
from tensordict.nn import TensorDictModule, TensorDictSequential  # noqa: E402
from torchrl.data import Bounded, Categorical, Composite, Unbounded  # noqa: E402
from torchrl.envs import EnvBase  # noqa: E402
from torchrl.envs.model_based import ModelBasedEnvBase  # noqa: E402
from torchrl.modules import ValueOperator  # noqa: E402

#: Event flags of a step, as ``GridEnv`` writes them.
EVENTS = ("goal", "hazard", "pickup", "door_opened")


def _random_seed() -> int:
    """A seed drawn from torch's global generator (seed it for reproducible defaults)."""
    return int(torch.empty((), dtype=torch.int64).random_())


def _flag_spec(shape) -> Categorical:
    return Categorical(2, shape=(*shape, 1), dtype=torch.bool)


def _state_spec(shape, width: int) -> Bounded:
    return Bounded(0.0, 1.0, shape=(*shape, width), dtype=torch.float32)


def _done_spec(shape, names: tuple[str, ...]) -> Composite:
    return Composite({name: _flag_spec(shape) for name in names}, shape=shape)


class GridEnv(EnvBase):
    """``B`` episodes of the true gridworld as a TorchRL ``EnvBase`` with ``batch_size=[B]``.

    Args:
        batch_size: number of episodes ``B >= 1``.
        task: task name or task (``gridplan.core.tasks.Task`` or ``DoorKeyTask``: geometry
            and ``horizon``).
        device: device of every tensor (and of the generator).
        seed: seeds the generator of start states and distractors (``set_seed`` reseeds it);
            default: a draw of torch's global generator.
        world: the world a task name is placed on (``gridplan.core.world``: a name such as
            ``minigrid-doorkey-8x8``, a ``World`` or a ``DoorKey``).

    ``reset()`` draws start states as ``gridplan.core.dynamics.reset``; with a partial ``"_reset"``
    mask only the reset rows are drawn. ``reset(td, set_state=True)`` starts from
    ``td["observation"]`` (``(B, S)``, validated). Partial steps (the ``"_step"`` mask of
    ``rollout(..., break_when_all_done=True)``) step only the rows still running.

    Raises:
        ValueError: on ``batch_size < 1``, an unknown task, or a malformed state/action.
    """

    _supports_set_state = True

    def __init__(
        self,
        batch_size: int,
        task: str | TaskKind = "A",
        device: torch.device | str = "cpu",
        seed: int | None = None,
        world: str | World | DoorKey | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        super().__init__(device=device, batch_size=torch.Size([batch_size]))
        self.task = backend.resolve(task, world)
        width = self.task.world.state_dim
        self._generator = torch.Generator(device=self.device)
        shape = self.batch_size
        self.observation_spec = Composite(
            observation=_state_spec(shape, width),
            step_count=Unbounded(shape=(*shape, 1), dtype=torch.int64),
            **{name: _flag_spec(shape) for name in EVENTS},
            shape=shape,
        )
        self.state_spec = Composite(
            observation=_state_spec(shape, width),
            step_count=Unbounded(shape=(*shape, 1), dtype=torch.int64),
            shape=shape,
        )
        self.action_spec = Categorical(self.task.world.n_actions, shape=shape, dtype=torch.int64)
        self.reward_spec = Bounded(-1.0, 1.0, shape=(*shape, 1), dtype=torch.float32)
        self.done_spec = _done_spec(shape, ("done", "terminated", "truncated"))
        self.set_seed(_random_seed() if seed is None else seed)

    def _set_seed(self, seed: int | None) -> None:
        self._generator.manual_seed(_random_seed() if seed is None else int(seed))

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        b = self.batch_size[0]
        rows = None if tensordict is None else tensordict.get("_reset", None)
        if kwargs.get("set_state") and tensordict is not None and "observation" in tensordict:
            world = self.task.world
            state = check_state(tensordict["observation"], "observation", world)
            if state.shape[0] != b or (state < 0).any() or (state > 1).any():
                raise ValueError(
                    f"observation must be ({b}, {world.state_dim}) states in [0, 1] (layout "
                    f"in gridplan.core.world), got shape {tuple(state.shape)}"
                )
            state = state.to(device=self.device, dtype=torch.float32, copy=True)
        elif rows is None or bool(rows.all()):
            state = backend.reset(b, self._generator, self.task)
        else:
            # Draw for the reset rows only; TorchRL keeps the other rows' entries.
            rows = rows.reshape(b)
            state = torch.zeros(b, self.task.world.state_dim, device=self.device)
            state[rows] = backend.reset(int(rows.sum()), self._generator, self.task)
        no = torch.zeros(b, 1, dtype=torch.bool, device=self.device)
        return TensorDict(
            {
                "observation": state,
                "step_count": torch.zeros(b, 1, dtype=torch.int64, device=self.device),
                **{name: no.clone() for name in EVENTS},
                **{name: no.clone() for name in ("done", "terminated", "truncated")},
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        state = tensordict["observation"]
        steps = tensordict["step_count"].clone()
        active = tensordict.get("_step", None)
        b = self.batch_size[0]
        reward = torch.zeros(b, device=self.device)
        terminated = torch.zeros(b, dtype=torch.bool, device=self.device)
        events = {name: torch.zeros(b, dtype=torch.bool, device=self.device) for name in EVENTS}
        if active is None:
            state, reward, terminated, info = backend.step(
                state, tensordict["action"], self._generator, self.task
            )
            events = info
            steps += 1
        else:
            # A partial step: rows that are not stepped keep their state and done flags.
            active = active.reshape(b)
            state = state.clone()
            terminated = tensordict["terminated"].reshape(b).clone()
            if active.any():
                nxt, r, term, info = backend.step(
                    state[active], tensordict["action"][active], self._generator, self.task
                )
                state[active], reward[active], terminated[active] = nxt, r, term
                for name in EVENTS:
                    events[name][active] = info[name]
                steps[active] += 1
        truncated = ~terminated & (steps.squeeze(1) >= self.task.horizon)
        if active is not None:
            truncated = torch.where(active, truncated, tensordict["truncated"].reshape(b))
        return TensorDict(
            {
                "observation": state,
                "step_count": steps,
                "reward": reward.unsqueeze(1),
                "terminated": terminated.unsqueeze(1),
                "truncated": truncated.unsqueeze(1),
                "done": (terminated | truncated).unsqueeze(1),
                **{name: events[name].unsqueeze(1) for name in EVENTS},
            },
            batch_size=self.batch_size,
            device=self.device,
        )


class _PredictStep(nn.Module):
    """One imagined step as an ``nn.Module`` (what ``ModelBasedEnvBase`` expects):
    ``(observation (..., S), action scores (..., A)) -> (next observation, reward (..., 1),
    terminated (..., 1), done (..., 1))``, through ``backend.Imagination`` (the plug-in checks
    and clamping of ``python -m eval``)."""

    def __init__(self, model: WorldModel, task: TaskKind, shaping: bool, device) -> None:
        super().__init__()
        self.imagination = backend.Imagination(model, task, device)
        # An nn.Module world model becomes a submodule, so .to(device) moves it too.
        self.model = model
        self.task = task
        self.generator = torch.Generator(device=device)
        self.values = backend.value_table(task, device) if shaping else None
        self.rollout_pending = True
        self.transitions = 0

    def forward(self, observation: torch.Tensor, action: torch.Tensor):
        batch = observation.shape[:-1]
        width = self.task.world.state_dim
        state = observation.reshape(-1, width)
        n = state.shape[0]
        if self.rollout_pending:
            self.imagination.start(n, self.generator)
            self.rollout_pending = False
        chosen = action.reshape(n, self.task.world.n_actions).argmax(dim=1)
        nxt, reward, terminated, _ = self.imagination.step(state, chosen, self.generator)
        self.transitions += n
        if self.values is not None:
            # r + gamma V*(s') - V*(s) = A*(s, a): 0 along an optimal path, negative off it
            # (V* is 0 in terminal states), so the planners' undiscounted sum ranks sequences.
            v_next = torch.where(terminated, 0.0, self.values.lookup(nxt))
            reward = reward + self.task.gamma * v_next - self.values.lookup(state)
        flag = terminated.view(*batch, 1)
        return nxt.view(*batch, width), reward.view(*batch, 1), flag, flag.clone()


class WorldModelEnv(ModelBasedEnvBase):
    """Any gridplan ``WorldModel`` as a TorchRL model-based environment.

    Args:
        model: a ``gridplan.models.noise.WorldModel`` (or anything with ``predict(state (N, S),
            action (N,), generator) -> (N, S)`` and optionally ``start_rollout``). A plug-in
            is held to the contract ``python -m eval`` applies (``backend.Imagination``):
            checked once on construction and at every step, its predictions clamped into
            ``[0, 1]`` (the observation spec's box) with one ``OutOfRangeWarning``.
        task: task name or task (``GridEnv``): the goal and hazard cells (and V*) that
            turn predicted states into rewards and termination.
        shaping: add ``gamma * V*(s') - V*(s)`` to the sparse reward (potential-based
            shaping with the exact V* of ``gridplan.core.dynamics.value_table``, the
            information the full-width planner uses at its leaves). The reward is then the
            optimal advantage ``A*(s, a)`` of the predicted step, so a planner's undiscounted
            sum over its horizon is 0 for an optimal path and negative otherwise. Without it
            the planners see only the sparse reward and find the goal only within their
            horizon.
        device: device of every tensor.
        seed: seeds the generator of the model's noise (``set_seed`` reseeds it). The
            planners draw their candidate actions from torch's global generator.
        world: the world a task name is placed on (``gridplan.core.world``); default the
            world the model declares (``model.world``).

    Keys: ``observation`` ``(..., S)`` (read and predicted), ``action`` ``(..., A)`` float
    action scores (the argmax is executed), ``reward`` ``(..., 1)``, ``terminated`` and
    ``done`` ``(..., 1)``: the predicted state is on the goal or hazard. ``start_rollout`` of
    the model is called before the first step after a ``reset`` and at the start of every
    ``rollout`` (each planner iteration is one imagined rollout). ``transitions`` counts the
    imagined transitions so far.

    Raises:
        ValueError: on an unknown task.
        gridplan.models.plugins.PluginError: (a ``ValueError``) if the model fails the
            contract check, on construction or at a step (a misshapen or non-finite state).
    """

    def __init__(
        self,
        model: WorldModel,
        task: str | TaskKind = "A",
        shaping: bool = False,
        device: torch.device | str = "cpu",
        seed: int | None = None,
        world: str | World | DoorKey | None = None,
    ) -> None:
        task = backend.resolve(task, backend.model_world(model, world))
        width = task.world.state_dim
        step = _PredictStep(model, task, shaping, device)
        module = TensorDictModule(
            step,
            in_keys=["observation", "action"],
            out_keys=["observation", "reward", "terminated", "done"],
        )
        super().__init__(module, device=device, batch_size=torch.Size([]))
        self.task = task
        self.shaping = shaping
        self._predict = step
        self.observation_spec = Composite(observation=_state_spec((), width), shape=())
        self.state_spec = Composite(observation=_state_spec((), width), shape=())
        self.action_spec = Unbounded(shape=(task.world.n_actions,), dtype=torch.float32)
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)
        self.done_spec = _done_spec((), ("done", "terminated"))
        self.set_seed(_random_seed() if seed is None else seed)

    @property
    def model(self) -> WorldModel:
        """The wrapped world model."""
        return self._predict.model

    @property
    def transitions(self) -> int:
        """Imagined transitions predicted so far."""
        return self._predict.transitions

    @property
    def clamped(self) -> int:
        """Predicted values clamped into ``[0, 1]`` so far."""
        return self._predict.imagination.clamped

    def _set_seed(self, seed: int | None) -> None:
        self._predict.generator.manual_seed(_random_seed() if seed is None else int(seed))

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        shape = self.batch_size if tensordict is None else tensordict.batch_size
        n = math.prod(shape)
        state = backend.reset(n, self._predict.generator, self.task)
        state = state.view(*shape, self.task.world.state_dim)
        self._predict.rollout_pending = True
        no = torch.zeros(*shape, 1, dtype=torch.bool, device=self.device)
        return TensorDict(
            {"observation": state, "done": no, "terminated": no.clone()},
            batch_size=shape,
            device=self.device,
        )

    def rollout(self, max_steps: int, *args, **kwargs) -> TensorDictBase:
        """``EnvBase.rollout``, with the model's ``start_rollout`` before its first step."""
        self._predict.rollout_pending = True
        return super().rollout(max_steps, *args, **kwargs)


class _VStar(nn.Module):
    def __init__(self, task: TaskKind, device) -> None:
        super().__init__()
        self.values = backend.value_table(task, device)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        v = self.values.lookup(observation.reshape(-1, observation.shape[-1]))
        return v.view(*observation.shape[:-1], 1)


def value_operator(
    task: str | TaskKind = "A",
    device: torch.device | str = "cpu",
    world: str | World | DoorKey | None = None,
) -> ValueOperator:
    """The task's exact V* (``gridplan.core.dynamics.value_table``; on ``world``, as
    ``GridEnv``'s) as a TorchRL ``ValueOperator``: ``observation (..., S) -> state_value
    (..., 1)``, read through the rounded relevant dims.

    For ``MPPIPlanner``'s advantage module, e.g. ``TDLambdaEstimator(gamma=0.95, lmbda=0.95,
    value_network=value_operator("A"), deactivate_vmap=True)`` (the lookup's in-place
    rounding has no vmap rule).
    """
    return ValueOperator(_VStar(backend.resolve(task, world), device), in_keys=["observation"])


def _argmax(scores: torch.Tensor) -> torch.Tensor:
    return scores.argmax(dim=-1)


def planning_policy(planner: TensorDictModule) -> TensorDictSequential:
    """A ``GridEnv`` policy from a planner over ``WorldModelEnv``: the planner's ``(B, A)``
    action scores, then their argmax as the ``(B,)`` categorical ``action``."""
    return TensorDictSequential(
        planner, TensorDictModule(_argmax, in_keys=["action"], out_keys=["action"])
    )
