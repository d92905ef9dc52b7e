"""World models with opaque, history-aware state (seed 004 §3; ``docs/DESIGN.md``, "Latent
world models").

Dreamer's RSSM carries a deterministic belief ``h`` and a stochastic state ``s`` filtered
from a history of observations and actions; a token model carries a sequence. Neither is one
``(N, Z)`` latent of the current observation. A ``HistoryWorldModel`` has

* the latent contract's attributes (``gridplan.models.latent_contract``): ``obs_kind``,
  ``world``, ``deterministic`` (``step`` ignores its generator) and ``metadata``, plus
  ``history`` (int ``H >= 1``): the most observations ``init`` reads;
* ``init(observations, actions) -> state``: ``observations`` ``(N, T + 1, *obs_shape)`` as
  ``gridplan.core.render.observe`` draws them, oldest first, the last the current one;
  ``actions`` ``(N, T)`` int64, the actions taken between them; ``0 <= T < H``. ``state`` is
  any batched structure: a tensor ``(N, ...)``, a tuple of tensors each ``(N, ...)``, or a
  ``tensordict.TensorDict`` of batch size ``[N]`` (a filtering posterior for an RSSM);
* ``step(state, action, generator) -> state``: the same structure one imagined step on,
  ``action`` ``(N,)`` int64, the generator its only randomness. It must not modify ``state``:
  the planner branches many actions from one frozen state;
* optionally ``decode(state) -> (N, S)`` normalized states, ``reward(state, action) -> (N,)``
  (the reward of the step ``action`` takes from ``state``) and ``value(state) -> (N,)``.

``OpaqueLatent`` shows such a model to everything that takes a latent model (the planners,
the frozen-decoder protocol, the ladder's levels, the card, ``--compare``): its state is
carried as one flat ``(N, Z)`` float32 latent laid out by ``StateLayout`` and rebuilt before
every call of the model. Episodes of the closed loop give it their history
(``EpisodeHistory``); a level that decides at sampled states (decision agreement, regret,
the anchor policies) gives it a history of one observation, as it gives a memoryless latent
model one observation to encode.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from gridplan.core import dynamics, tasks
from gridplan.core.render import observe, world_kinds
from gridplan.core.world import WORLD_KINDS, World
from gridplan.models.capabilities import Declared, capabilities_of
from gridplan.models.latent_contract import (
    LatentContractError,
    LatentThroughDecoder,
    check_latent_model,
    observations,
)
from gridplan.models.signatures import describe_value, label

#: Rows of the boundary check's probe batch.
HISTORY_CHECK_ROWS = 8
#: Integer state leaves are carried as float32, exact up to this magnitude.
EXACT_INTEGER = 2**24


@runtime_checkable
class HistoryWorldModel(Protocol):
    """A world model with opaque, history-aware state (module docstring); ``decode``,
    ``reward`` and ``value`` are optional and therefore not among the protocol's members."""

    obs_kind: str
    world: World
    deterministic: bool
    metadata: dict
    history: int

    def init(self, observations: torch.Tensor, actions: torch.Tensor): ...

    def step(self, state, action: torch.Tensor, generator: torch.Generator): ...


def is_history_model(model) -> bool:
    """Whether ``model`` offers the history contract's methods (``init`` and ``step``)."""
    return capabilities_of(model).history_state


def _tensordict():
    """``tensordict.TensorDict`` if ``tensordict`` is imported, else None: a state can only be
    a TensorDict once its package is imported, and gridplan does not import this optional
    dependency (the ``torchrl`` extra) itself."""
    module = sys.modules.get("tensordict")
    return None if module is None else module.TensorDict


def _is_tensordict(state) -> bool:
    cls = _tensordict()
    return cls is not None and isinstance(state, cls)


def _leaves(state) -> list[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every leaf of an opaque state, in a fixed order."""
    if isinstance(state, torch.Tensor):
        return [("state", state)]
    if _is_tensordict(state):
        return [(_dotted(k), state.get(k)) for k in _keys(state)]
    if isinstance(state, tuple):
        return [(f"state[{i}]", leaf) for i, leaf in enumerate(state)]
    return []


def _dotted(key) -> str:
    return ".".join(key) if isinstance(key, tuple) else key


def _keys(state) -> list:
    """A TensorDict's leaf keys, nested ones as tuples, ordered by their dotted names."""
    return sorted(state.keys(include_nested=True, leaves_only=True), key=_dotted)


def _kind(state) -> str | None:
    if isinstance(state, torch.Tensor):
        return "tensor"
    if _is_tensordict(state):
        return "tensordict"
    return "tuple" if isinstance(state, tuple) else None


@dataclass(frozen=True)
class StateLayout:
    """How an opaque state is laid out in a flat ``(N, Z)`` float32 latent.

    Attributes:
        kind: ``"tensor"``, ``"tuple"`` or ``"tensordict"``.
        names: the leaves' names (``"state"``, ``"state[1]"``, ``"h"``, ``"rnn.h"``).
        shapes: each leaf's shape after the batch dim.
        dtypes: each leaf's dtype (restored by ``unpack``).
        keys: a TensorDict's leaf keys (``()`` otherwise).
    """

    kind: str
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    keys: tuple = ()

    @property
    def widths(self) -> tuple[int, ...]:
        """Numbers per row of each leaf."""
        return tuple(math.prod(s) for s in self.shapes)

    @property
    def width(self) -> int:
        """``Z``: numbers per row of the whole state."""
        return sum(self.widths)

    def describe(self) -> str:
        """``"h (64,) float32, s (32,) float32"``."""
        return ", ".join(
            f"{n} {s} {str(d).removeprefix('torch.')}"
            for n, s, d in zip(self.names, self.shapes, self.dtypes, strict=True)
        )

    @classmethod
    def of(cls, state, rows: int, what: str) -> StateLayout:
        """The layout of ``state`` after ``check_state_out``."""
        leaves = check_state_out(state, rows, what)
        keys = ()
        if _is_tensordict(state):
            keys = tuple(_keys(state))
        return cls(
            _kind(state),
            tuple(n for n, _ in leaves),
            tuple(tuple(t.shape[1:]) for _, t in leaves),
            tuple(t.dtype for _, t in leaves),
            keys,
        )

    def pack(self, state, rows: int, what: str) -> torch.Tensor:
        """``state`` -> ``(rows, Z)`` float32 (leaves flattened and concatenated in order).

        Raises:
            LatentContractError: if ``state`` is not a checked state of this layout (another
                structure, leaf, shape or dtype, or an integer beyond float32's exact range),
                naming ``what``.
        """
        leaves = check_state_out(state, rows, what)
        found = StateLayout.of(state, rows, what)
        if found != self:
            raise LatentContractError(
                f"{what} returned a state laid out as {found.kind} [{found.describe()}], but "
                f"init's states are {self.kind} [{self.describe()}]; return the same "
                "structure, leaf shapes and dtypes every call"
            )
        parts = []
        for name, leaf in leaves:
            if not leaf.is_floating_point() and leaf.numel():
                big = leaf.abs().max() if leaf.dtype != torch.bool else 0
                if big > EXACT_INTEGER:
                    raise LatentContractError(
                        f"{what} returned integer leaf {name} with |value| {int(big)} > "
                        f"2**24, which the planner cannot carry exactly as float32"
                    )
            parts.append(leaf.reshape(rows, -1).float())
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0].contiguous()

    def unpack(self, z: torch.Tensor):
        """``(N, Z)`` -> the state it packs (views of ``z`` for float32 leaves)."""
        n = z.shape[0]
        parts = [
            p.reshape(n, *s).to(d)
            for p, s, d in zip(z.split(self.widths, dim=1), self.shapes, self.dtypes, strict=True)
        ]
        if self.kind == "tensor":
            return parts[0]
        if self.kind == "tuple":
            return tuple(parts)
        return _tensordict()(dict(zip(self.keys, parts, strict=True)), batch_size=[n])


def check_state_out(state, rows: int, what: str) -> list[tuple[str, torch.Tensor]]:
    """The leaves of ``state`` if it is a batched opaque state of ``rows`` rows whose float
    leaves are finite.

    Raises:
        LatentContractError: naming ``what``, the structure or the leaf at fault, its shape
            and the rows given, or the rows holding NaN or inf, with the fix.
    """
    leaves = _leaves(state)
    if not leaves:
        raise LatentContractError(
            f"{what} must return a tensor, a tuple of tensors or a TensorDict, got "
            f"{type(state).__name__}"
        )
    if _is_tensordict(state) and tuple(state.batch_size[:1]) != (rows,):
        raise LatentContractError(
            f"{what} returned a TensorDict of batch size {list(state.batch_size)}, but it was "
            f"given {rows} rows; build it with batch_size=[{rows}]"
        )
    for name, leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            raise LatentContractError(
                f"{what} returned leaf {name} of type {type(leaf).__name__}; every leaf "
                "must be a tensor"
            )
        if leaf.dim() == 0 or leaf.shape[0] != rows:
            raise LatentContractError(
                f"{what} returned a state whose leaf {name} is {describe_value(leaf)}, but it "
                f"was given {rows} rows; return one state row per row given (batch dim first)"
            )
        if leaf.dtype == torch.float64:
            raise LatentContractError(
                f"{what} returned float64 leaf {name}; keep the state in float32 (.float())"
            )
        if leaf.is_floating_point() and not torch.isfinite(leaf).all():
            bad = (~torch.isfinite(leaf.reshape(rows, -1))).any(dim=1).nonzero().flatten()
            raise LatentContractError(
                f"{what} returned non-finite values (NaN or inf) in leaf {name}, {bad.numel()} "
                f"of {rows} rows (first rows {bad[:5].tolist()}); look for a division by zero, "
                "a log of 0, or a diverged network"
            )
    return leaves


def check_history(observations: torch.Tensor, actions: torch.Tensor, history: int, what: str):
    """Check that ``observations`` ``(N, T + 1, ...)`` and ``actions`` ``(N, T)`` int64 form a
    history of at most ``history`` observations.

    Raises:
        LatentContractError: naming ``what``, both shapes and the fix.
    """
    shapes = f"observations {describe_value(observations)}, actions {describe_value(actions)}"
    if observations.dim() < 2 or actions.dim() != 2:
        raise LatentContractError(
            f"{what} takes observations (N, T + 1, *obs_shape) and actions (N, T); got {shapes}"
        )
    n, length = observations.shape[:2]
    if actions.shape != (n, length - 1) or actions.dtype != torch.long:
        raise LatentContractError(
            f"{what} takes T + 1 observations and the T int64 actions between them; got "
            f"{shapes}: pass actions of shape ({n}, {length - 1}) int64"
        )
    if not 1 <= length <= history:
        raise LatentContractError(
            f"{what} reads 1 to {history} observations (its history), got {length} ({shapes})"
        )


class OpaqueLatent(Declared):
    """A ``HistoryWorldModel`` shown as a latent model (module docstring).

    ``encode(obs)`` is ``init`` of a one-observation history; ``encode_history(observations,
    actions)`` of a longer one; ``predict_latent(z, a, g)`` packs ``step(unpack(z), a, g)``;
    ``decode``, ``reward(z, action, z_next)`` and ``value`` exist exactly when the model has
    them and read the unpacked state (``reward`` the state before the step).

    Args:
        model: the history model (a plug-in behind its guarded calls, or a built-in one).
        device: where the probe that finds the state's layout runs.

    Attributes:
        obs_kind, world, deterministic, metadata, history: the model's.
        layout: the ``StateLayout`` of its states; ``latent_dim`` is its width.

    Raises:
        LatentContractError: if the model lacks ``init``/``step``, declares a bad
            ``history``, or its first ``init`` is not a checked state.
    """

    def __init__(self, model, device: torch.device | str = "cpu") -> None:
        if not is_history_model(model):
            raise LatentContractError(
                f"{label(model)} is not a history model: it needs callable "
                "init(observations, actions) and step(state, action, generator)"
            )
        self.model = model
        offers = capabilities_of(model)
        self.obs_kind, self.world = offers.obs_kind, offers.world
        self.deterministic, self.metadata = offers.deterministic, offers.metadata
        history = offers.history
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise LatentContractError(
                f"{label(model)}.history must be an integer >= 1 (the most observations "
                f"init reads), got {history!r}"
            )
        self.history = history
        if not isinstance(self.world, WORLD_KINDS):
            raise LatentContractError(
                f"{label(model)}.world must be a gridplan World (e.g. "
                f"gridplan.core.world.get('default')), got {self.world!r}"
            )
        if self.obs_kind not in world_kinds(self.world):
            raise LatentContractError(
                f"{label(model)}.obs_kind must be one of {', '.join(world_kinds(self.world))} "
                f"on world {self.world.name!r}, got {self.obs_kind!r}"
            )
        task = tasks.get("A", world=self.world)
        start = dynamics.reset(task, 2, torch.Generator().manual_seed(0)).to(device)
        with torch.no_grad():
            # render's own observe: a history model reads no other, and this object's
            # capabilities are not complete until its layout is known.
            first = self._init(observe(start, self.world, self.obs_kind)[:, None], None)
        self.layout = StateLayout.of(first, 2, self.who("init"))
        self.latent_dim = self.layout.width
        heads = (("decoder", "decode"), ("latent_reward", "reward"), ("value", "value"))
        for flag, method in heads:
            if getattr(offers, flag):
                setattr(self, method, getattr(self, f"_{method}"))

    def who(self, method: str | None = None) -> str:
        """How errors name the model's ``method`` (a plug-in's factory and file)."""
        return label(self.model, method)

    def _init(self, obs: torch.Tensor, actions: torch.Tensor | None):
        if actions is None:
            actions = torch.zeros(obs.shape[0], 0, dtype=torch.long, device=obs.device)
        check_history(obs, actions, self.history, self.who("init"))
        return self.model.init(obs, actions)

    def encode_history(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``(N, T + 1, *obs_shape)`` observations, ``(N, T)`` actions -> ``(N, Z)``.

        Raises:
            LatentContractError: on a malformed history or state (``check_history``,
                ``StateLayout.pack``).
        """
        state = self._init(obs, actions)
        return self.layout.pack(state, obs.shape[0], self.who("init"))

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """``(N, *obs_shape)`` -> ``(N, Z)``: ``init`` of a one-observation history."""
        return self.encode_history(obs[:, None], None)

    def predict_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """``pack(step(unpack(z), action, generator))``: ``(N, Z)``, ``(N,)`` -> ``(N, Z)``."""
        state = self.model.step(self.layout.unpack(z), action, generator)
        return self.layout.pack(state, z.shape[0], self.who("step"))

    def _decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.model.decode(self.layout.unpack(z))

    def _reward(self, z: torch.Tensor, action: torch.Tensor, z_next: torch.Tensor) -> torch.Tensor:
        return self.model.reward(self.layout.unpack(z), action)

    def _value(self, z: torch.Tensor) -> torch.Tensor:
        return self.model.value(self.layout.unpack(z))


def admit_history(model, world: World, device: torch.device | str = "cpu") -> OpaqueLatent:
    """``model`` as a checked ``OpaqueLatent``: held to the latent contract through it
    (``check_latent_model``) and to ``check_history_model``.

    Raises:
        LatentContractError: naming the model, the method or attribute and what is wrong.
    """
    latent = OpaqueLatent(model, device)
    check_latent_model(latent, world, device)
    check_history_model(latent, world, device)
    return latent


def _snapshot(state) -> list[torch.Tensor]:
    return [leaf.clone() for _, leaf in _leaves(state)]


def check_history_model(latent: OpaqueLatent, world: World, device: torch.device | str) -> None:
    """What the planner needs of a history model beyond the latent contract
    (``check_latent_model`` checks the rest through ``latent``): ``init`` of the longest
    history it reads (independent reset states and random actions: a shape check, not an
    episode); ``step`` leaves the state it was given untouched; and, for a model
    declared deterministic, one state branched into every action steps each branch as it
    steps alone.

    Raises:
        LatentContractError: naming the method, the leaf and the fix.
    """
    dev = torch.device(device)
    rows = HISTORY_CHECK_ROWS
    gen = torch.Generator(device=dev).manual_seed(0)
    task = tasks.get("A", world=world)
    length = latent.history
    states = torch.stack([dynamics.reset(task, rows, gen) for _ in range(length)], dim=1)
    obs = observations(latent, states.reshape(rows * length, -1))
    obs = obs.reshape(rows, length, *obs.shape[1:])
    actions = torch.randint(world.n_actions, (rows, length - 1), generator=gen, device=dev)
    with torch.no_grad():
        state = latent.layout.unpack(latent.encode_history(obs, actions))
        before = _snapshot(state)
        action = torch.arange(rows, device=dev) % world.n_actions
        stepped = latent.model.step(state, action, torch.Generator(device=dev).manual_seed(1))
        latent.layout.pack(stepped, rows, latent.who("step"))
        changed = [
            name
            for (name, leaf), old in zip(_leaves(state), before, strict=True)
            if not torch.equal(leaf, old)
        ]
        if changed:
            raise LatentContractError(
                f"{latent.who('step')} modified the state it was given (leaf "
                f"{', '.join(changed)} changed in place); the planner branches many actions "
                "from one frozen state: return a new state (h = h + dh, not h += dh or "
                "h.copy_(...))"
            )
        if latent.deterministic:
            _check_branching(latent, state, world.n_actions, dev)


def _check_branching(latent: OpaqueLatent, state, n_actions: int, dev: torch.device) -> None:
    """Row 0 of ``state`` branched into every action equals each action stepped alone."""
    z = latent.layout.pack(state, HISTORY_CHECK_ROWS, latent.who("init"))[:1]
    actions = torch.arange(n_actions, device=dev)
    gen = torch.Generator(device=dev).manual_seed(2)
    together = latent.predict_latent(z.expand(n_actions, -1).contiguous(), actions, gen)
    for a in range(n_actions):
        alone = latent.predict_latent(z, actions[a : a + 1], gen)
        if not torch.allclose(alone, together[a : a + 1], atol=1e-5, rtol=1e-5):
            raise LatentContractError(
                f"{latent.who('step')} stepped one state branched into {n_actions} actions "
                f"differently from the same state stepped with action {a} alone; each row of "
                "a batch must depend only on its own state and action"
            )


class EpisodeHistory:
    """The observations of the last ``history`` true states and the actions between them of
    every episode of a closed loop, so a history model's planning root is ``init`` of its
    episode's history.

    Args:
        latent: the ``OpaqueLatent`` planned through.
        start: ``(B, S)`` start states.

    ``push(rows, action, state)`` records one environment step: the actions ``(n,)`` long
    taken in episodes ``rows`` and every episode's state after it ``(B, S)``; ``roots(rows)``
    is the ``(n, Z)`` latents of those episodes' histories.
    """

    def __init__(self, latent: OpaqueLatent, start: torch.Tensor) -> None:
        self.latent = latent
        # Observations are drawn once per step, not once per decision that reads them.
        self.observations = [observations(latent, start)]
        self.actions: list[torch.Tensor] = []

    @staticmethod
    def of(model, start: torch.Tensor) -> EpisodeHistory | None:
        """The history to keep for the planner's ``model``: one for a history model that
        reads more than one observation (seen through ``LatentThroughDecoder``), else None."""
        if not isinstance(model, LatentThroughDecoder):
            return None
        latent = model.latent
        if not isinstance(latent, OpaqueLatent) or latent.history == 1:
            return None
        return EpisodeHistory(latent, start)

    def push(self, rows: torch.Tensor, action: torch.Tensor, state: torch.Tensor) -> None:
        self.observations.append(observations(self.latent, state))
        # Episodes not planned this step are over: they repeat their state, and any valid
        # action stands in for the one they did not take.
        taken = torch.zeros(state.shape[0], dtype=torch.long, device=state.device)
        self.actions.append(taken.index_put_((rows,), action))
        if len(self.observations) > self.latent.history:
            del self.observations[0], self.actions[0]

    def roots(self, rows: torch.Tensor) -> torch.Tensor:
        obs = torch.stack([o[rows] for o in self.observations], dim=1)
        actions = (
            torch.stack([a[rows] for a in self.actions], dim=1)
            if self.actions
            else torch.zeros(rows.shape[0], 0, dtype=torch.long, device=obs.device)
        )
        return self.latent.encode_history(obs, actions)


__all__ = [
    "EpisodeHistory",
    "HistoryWorldModel",
    "OpaqueLatent",
    "StateLayout",
    "admit_history",
    "check_history",
    "check_history_model",
    "check_state_out",
    "is_history_model",
]
