"""The latent world-model contract: what the planner and the latent metrics may ask of a model
that encodes an observation and predicts a latent (seed 004 §3; ``docs/DESIGN.md``, "Latent
world models").

Dreamer-style latent dynamics, TD-MPC2 and JEPA-style predictors do not predict the
``(B, S)`` state of ``gridplan.models.contract``: they read an observation of it and roll a
latent. A ``LatentWorldModel`` has

* attributes ``obs_kind`` (``"state"``, ``"grid"`` or ``"pixels"``: the observation it reads,
  ``gridplan.core.render``), ``latent_dim`` ``Z``, ``world`` (the ``World`` of its
  observations), ``deterministic`` (``predict_latent`` ignores the generator) and ``metadata``
  (a dict: where it came from);
* ``encode(obs) -> z``: ``(B, *obs_shape)`` observations, as ``observations(model, state)``
  draws them (``"state"``: the normalized ``(B, S)`` state itself) -> ``(B, Z)`` float32;
* ``predict_latent(z, action, generator) -> z_next``: ``(B, Z)`` float, ``(B,)`` long in
  ``0..3``, the generator its only randomness -> ``(B, Z)`` float32;
* optionally ``decode(z) -> state``: ``(B, Z)`` -> ``(B, S)`` normalized states;
* optionally ``reward(z, action, z_next) -> (B,)`` and ``value(z) -> (B,)``: the model's own
  reward and value heads (the planner may score leaves with them,
  ``gridplan.planning.latent_scorer``);
* optionally ``observe(state) -> obs``: the observation it reads of ``(B, S)`` states, when it
  needs more than ``gridplan.core.render.observe(state, world, obs_kind)`` (a tile size).

``check_latent_model`` exercises every method once on a few reset states and raises
``LatentContractError`` (a ValueError) naming the first broken method and what is wrong.

``LatentThroughDecoder`` shows a latent model to every state-level consumer (the ladder's
metrics, ``gridplan.evaluation``) as a ``WorldModel``: ``predict(state, a)`` decodes the
predicted latent. It keeps the latent of its last output, so a caller that feeds its own
prediction back (an open-loop rollout) rolls the latent, never a re-encoded decoded state; a
state it did not produce is encoded afresh (``reencoded`` counts those rows).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import check_state, reset
from gridplan.core.render import OBS_KINDS, observe
from gridplan.core.tasks import task_a
from gridplan.core.world import World
from gridplan.models.contract import WorldModel

#: Rows of the contract check's probe batch.
LATENT_CHECK_ROWS = 8
#: Working memory a latent model is assumed to use per row of one ``predict_latent`` call
#: when it declares no ``bytes_per_row`` (bytes): the activations of a few hundred units.
DEFAULT_LATENT_ROW_BYTES = 4096


class LatentContractError(ValueError):
    """A latent model breaks the ``LatentWorldModel`` contract (the message says how)."""


@runtime_checkable
class LatentWorldModel(Protocol):
    """A latent world model (module docstring); ``decode``, ``reward``, ``value`` and
    ``observe`` are optional and therefore not part of the protocol's required members."""

    obs_kind: str
    latent_dim: int
    world: World
    deterministic: bool
    metadata: dict

    def encode(self, obs: torch.Tensor) -> torch.Tensor: ...

    def predict_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor: ...


def is_latent_model(model) -> bool:
    """Whether ``model`` offers the latent contract's methods (``encode``, ``predict_latent``)."""
    return callable(getattr(model, "encode", None)) and callable(
        getattr(model, "predict_latent", None)
    )


def _name(model) -> str:
    return type(model).__name__


def observations(model, state: torch.Tensor) -> torch.Tensor:
    """The observations ``model`` reads of ``(B, S)`` true states: its own ``observe`` if it has
    one, else ``gridplan.core.render.observe(state, model.world, model.obs_kind)``.

    Raises:
        ValueError: on a malformed state (``gridplan.core.env.check_state``).
    """
    check_state(state, "state", model.world)
    own = getattr(model, "observe", None)
    if callable(own):
        return own(state)
    return observe(state, model.world, model.obs_kind)


def _check_finite_rows(x: torch.Tensor, rows: int, what: str) -> None:
    """Raise ``LatentContractError`` naming ``what`` and the rows of ``(rows, ...)`` ``x`` that
    hold NaN or inf."""
    if x.numel() and not torch.isfinite(x).all():
        bad = (~torch.isfinite(x.reshape(rows, -1))).any(dim=1).nonzero().flatten()
        raise LatentContractError(
            f"{what} holds non-finite values (NaN or inf) in {bad.numel()} of {rows} rows "
            f"(first rows {bad[:5].tolist()})"
        )


def check_latent(z, rows: int, latent_dim: int, what: str) -> torch.Tensor:
    """``z`` if it is a finite float32 ``(rows, latent_dim)`` tensor.

    Raises:
        LatentContractError: naming ``what``, the shape or dtype found, or the rows holding
            NaN or inf.
    """
    if not isinstance(z, torch.Tensor):
        raise LatentContractError(f"{what} must be a torch.Tensor, got {type(z).__name__}")
    if tuple(z.shape) != (rows, latent_dim):
        raise LatentContractError(
            f"{what} must have shape ({rows}, {latent_dim}), got {tuple(z.shape)}"
        )
    if z.dtype != torch.float32:
        raise LatentContractError(f"{what} must be float32, got {z.dtype}")
    _check_finite_rows(z, rows, what)
    return z


def encode_states(model, state: torch.Tensor) -> torch.Tensor:
    """``(B, S)`` true states -> ``(B, Z)`` checked latents of their observations.

    Raises:
        ValueError: on a malformed state; ``LatentContractError`` on a bad latent.
    """
    z = model.encode(observations(model, state))
    return check_latent(z, state.shape[0], model.latent_dim, f"{_name(model)}.encode")


def step_latent(
    model, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """One checked ``predict_latent``: ``(B, Z), (B,) -> (B, Z)``.

    Raises:
        LatentContractError: on a misshapen or non-finite prediction.
    """
    out = model.predict_latent(z, action, generator)
    return check_latent(out, z.shape[0], model.latent_dim, f"{_name(model)}.predict_latent")


def check_decoded(state, rows: int, world: World, what: str) -> torch.Tensor:
    """``state`` if it is a finite floating ``(rows, S)`` tensor of ``world``.

    Raises:
        LatentContractError: naming ``what`` and the problem.
    """
    if not isinstance(state, torch.Tensor):
        raise LatentContractError(f"{what} must be a torch.Tensor, got {type(state).__name__}")
    if tuple(state.shape) != (rows, world.state_dim) or not state.is_floating_point():
        raise LatentContractError(
            f"{what} must be a floating ({rows}, {world.state_dim}) tensor (world "
            f"{world.name!r}), got {state.dtype} {tuple(state.shape)}"
        )
    _check_finite_rows(state, rows, what)
    return state


def check_latent_model(model, world: World, device: torch.device | str = "cpu") -> None:
    """Hold ``model`` to the latent contract on ``LATENT_CHECK_ROWS`` reset states of
    ``world``: its attributes, ``encode`` of their observations, ``predict_latent`` (twice with
    differently seeded generators for a model declared deterministic, which must agree),
    ``decode``, ``reward`` and ``value`` where it has them.

    Raises:
        LatentContractError: naming the attribute or method and what is wrong with it.
    """
    who = _name(model)
    if not is_latent_model(model):
        raise LatentContractError(
            f"{who} is not a latent model: it needs callable encode(obs) and "
            "predict_latent(z, action, generator)"
        )
    kind = getattr(model, "obs_kind", None)
    if kind not in OBS_KINDS:
        raise LatentContractError(
            f"{who}.obs_kind must be one of {', '.join(OBS_KINDS)}, got {kind!r}"
        )
    z_dim = getattr(model, "latent_dim", None)
    if isinstance(z_dim, bool) or not isinstance(z_dim, int) or z_dim < 1:
        raise LatentContractError(f"{who}.latent_dim must be an integer >= 1, got {z_dim!r}")
    own = getattr(model, "world", None)
    if not isinstance(own, World):
        raise LatentContractError(f"{who}.world must be a gridplan World, got {own!r}")
    if own != world:
        raise LatentContractError(
            f"{who} reads observations of world {own.describe()}, but the task is played on "
            f"{world.describe()}"
        )
    if not isinstance(getattr(model, "deterministic", None), bool):
        raise LatentContractError(f"{who}.deterministic must be a bool")
    if not isinstance(getattr(model, "metadata", None), dict):
        raise LatentContractError(f"{who}.metadata must be a dict")
    dev = torch.device(device)
    rows = LATENT_CHECK_ROWS
    gen = torch.Generator(device=dev).manual_seed(0)
    state = reset(rows, gen, task_a(world))
    with torch.no_grad():
        z = check_latent(model.encode(observations(model, state)), rows, z_dim, f"{who}.encode")
        action = torch.arange(rows, device=dev) % N_ACTIONS
        first = model.predict_latent(z, action, torch.Generator(device=dev).manual_seed(1))
        nxt = check_latent(first, rows, z_dim, f"{who}.predict_latent")
        if model.deterministic:
            again = model.predict_latent(z, action, torch.Generator(device=dev).manual_seed(2))
            if not torch.equal(check_latent(again, rows, z_dim, f"{who}.predict_latent"), nxt):
                raise LatentContractError(
                    f"{who} declares deterministic = True but predict_latent returned different "
                    "latents for differently seeded generators"
                )
        if callable(getattr(model, "decode", None)):
            check_decoded(model.decode(nxt), rows, world, f"{who}.decode")
        if callable(getattr(model, "reward", None)):
            check_head(model.reward(z, action, nxt), rows, f"{who}.reward")
        if callable(getattr(model, "value", None)):
            check_head(model.value(nxt), rows, f"{who}.value")


def check_head(out, rows: int, what: str) -> torch.Tensor:
    """``out`` if it is a finite ``(rows,)`` tensor: a reward or value head's output.

    Raises:
        LatentContractError: naming ``what`` and the shape found or the non-finite values.
    """
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows,):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise LatentContractError(f"{what} must return a ({rows},) tensor, got {got}")
    if not torch.isfinite(out).all():
        raise LatentContractError(f"{what} returned non-finite values (NaN or inf)")
    return out


class LatentThroughDecoder(WorldModel):
    """A latent model seen as a state ``WorldModel`` through a decoder (module docstring).

    ``predict(state, action, generator)``: ``z`` = the latent kept from the last call when
    ``state`` is that call's output, else ``encode(observations(state))``; ``z' =
    predict_latent(z, action, generator)``; returns ``decode(z')`` clamped into ``[0, 1]`` (the
    planner reads states through rounded, clamped cells either way).

    Args:
        latent: a model that passed ``check_latent_model``.
        decode: ``(B, Z) -> (B, S)``; default the model's own ``decode``.
        decoder: how the decoder is described in reports (``"model"``: its own; a frozen
            protocol decoder's ``describe()``).
        heads: plan with the model's own ``reward`` (and ``value`` where it has one) instead
            of the true reward of decoded states and V* at the decoded leaf
            (``gridplan.planning.latent_scorer``).

    Attributes:
        world, latent_dim, obs_kind, metadata: the latent model's.
        reencoded: rows whose input state was not the wrapper's own last output and were
            encoded afresh.
        bytes_per_row: the latent model's declaration, else ``DEFAULT_LATENT_ROW_BYTES``.

    Raises:
        LatentContractError: if there is no decoder, or ``heads`` is asked of a model without
            a ``reward``.
    """

    n_settings = 1

    def __init__(self, latent, decode=None, decoder: dict | None = None, heads: bool = False):
        own = getattr(latent, "decode", None)
        if decode is None and not callable(own):
            raise LatentContractError(
                f"{_name(latent)} has no decode(z); plan and measure it through the frozen "
                "protocol decoder (gridplan.metrics.frozen_decoder.fit_frozen_decoder)"
            )
        if heads and not callable(getattr(latent, "reward", None)):
            raise LatentContractError(
                f"heads=True plans with the model's reward head, but {_name(latent)} has no "
                "reward(z, action, z_next)"
            )
        self.latent = latent
        self.decode_fn = decode if decode is not None else own
        # Errors name who decoded: the plug-in's own method, or the decoder it was given.
        self._decode_name = (
            f"{_name(latent)}.decode"
            if decode is None
            else f"the {type(decode).__name__} of {_name(latent)}"
        )
        self.decoder = dict(decoder or {"kind": "model"})
        self.heads = heads
        self.world = latent.world
        self.latent_dim = latent.latent_dim
        self.obs_kind = latent.obs_kind
        self.metadata = latent.metadata
        self.bytes_per_row = int(getattr(latent, "bytes_per_row", DEFAULT_LATENT_ROW_BYTES))
        self.reencoded = 0
        self._last: torch.Tensor | None = None
        self._z: torch.Tensor | None = None

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        self._last, self._z = None, None

    def encode_states(self, state: torch.Tensor) -> torch.Tensor:
        """``encode_states(self.latent, state)``."""
        return encode_states(self.latent, state)

    def step_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """``step_latent(self.latent, z, action, generator)``."""
        return step_latent(self.latent, z, action, generator)

    def decode_latent(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, Z)`` -> ``(B, S)`` checked decoded states, clamped into ``[0, 1]``."""
        out = check_decoded(self.decode_fn(z), z.shape[0], self.world, self._decode_name)
        return out.float().clamp(0.0, 1.0)

    @torch.no_grad()
    def predict(self, state, action, generator):
        if self._last is not None and state is self._last:
            z = self._z
        else:
            z = self.encode_states(state)
            self.reencoded += state.shape[0]
        self._z = self.step_latent(z, action, generator)
        self._last = self.decode_latent(self._z)
        return self._last
