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
  needs more than ``gridplan.core.render.observe(state, world, obs_kind)`` (a tile size);
* optionally ``filter_latent(z, action, obs) -> z_next``: the latent of an actual next
  observation given the latent before the step and its action, a recurrent model's filtering
  posterior (Dreamer's RSSM: the belief advanced by the action, the state inferred from the
  observation). Without it the actual next latent is ``encode(obs)``; with it, the
  frozen-decoder protocol compares predictions with the filtered latents
  (``next_latents``), whose belief is the one a recurrent model's prediction carries.

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

from gridplan.core import dynamics, tasks
from gridplan.core.env import check_state
from gridplan.core.render import ALL_OBS_KINDS, observe, world_kinds
from gridplan.core.world import WORLD_KINDS, World
from gridplan.models.capabilities import Declared, capabilities_of
from gridplan.models.contract import WorldModel
from gridplan.models.signatures import (
    METHODS,
    binding_error,
    describe_call,
    describe_value,
    label,
    mismatch_message,
)

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
    return capabilities_of(model).latent


def invoke(model, method: str, *args):
    """``model.method(*args)``; a call the method's signature cannot take (a missing or extra
    parameter) raises ``LatentContractError`` naming the model, the signature the contract
    expects with its shapes, and the shapes passed (``gridplan.models.signatures``)."""
    fn = getattr(model, method)
    try:
        return fn(*args)
    except TypeError as err:
        why = binding_error(fn, args)
        if why is None:
            raise
        spec = METHODS[("latent", method)]
        raise LatentContractError(
            mismatch_message(label(model, method), spec, fn, args, why)
        ) from err


def _called(method: str, *args) -> str:
    """``" (called with z (8, 32) float32, ...)"``: the arguments of a call, for messages."""
    return f" (called with {describe_call(METHODS[('latent', method)], args)})"


def observations(model, state: torch.Tensor) -> torch.Tensor:
    """The observations ``model`` reads of ``(B, S)`` true states: its own ``observe`` if it has
    one, else ``gridplan.core.render.observe(state, model.world, model.obs_kind)``.

    Raises:
        ValueError: on a malformed state (``gridplan.core.env.check_state``).
    """
    check_state(state, "state", model.world)
    if capabilities_of(model).observer:
        return invoke(model, "observe", state)
    return observe(state, model.world, model.obs_kind)


#: The fix of an output holding NaN or inf, as errors state it.
NON_FINITE_FIX = (
    "look for a division by zero, a log or sqrt of 0 or of a negative number, an untrained or "
    "diverged network, or a uint8 observation fed to the network without .float()"
)


def _check_finite_rows(x: torch.Tensor, rows: int, what: str, called: str = "") -> None:
    """Raise ``LatentContractError`` naming ``what`` and the rows of ``(rows, ...)`` ``x`` that
    hold NaN or inf (``called``: the call's arguments, appended)."""
    if x.numel() and not torch.isfinite(x).all():
        bad = (~torch.isfinite(x.reshape(rows, -1))).any(dim=1).nonzero().flatten()
        raise LatentContractError(
            f"{what} holds non-finite values (NaN or inf) in {bad.numel()} of {rows} rows "
            f"(first rows {bad[:5].tolist()}){called}; {NON_FINITE_FIX}"
        )


def check_latent(z, rows: int, latent_dim: int, what: str, called: str = "") -> torch.Tensor:
    """``z`` if it is a finite float32 ``(rows, latent_dim)`` tensor.

    Args:
        z: the output checked.
        rows, latent_dim: the shape it must have.
        what: who returned it (``"mine.make.encode (from mine.py)"``).
        called: the call's arguments (``_called``), appended to the message.

    Raises:
        LatentContractError: naming ``what``, the shape or dtype found and the one expected,
            or the rows holding NaN or inf, with the fix.
    """
    if not isinstance(z, torch.Tensor):
        raise LatentContractError(
            f"{what} must be a torch.Tensor, got {type(z).__name__}{called}"
        )
    if tuple(z.shape) != (rows, latent_dim):
        got = tuple(z.shape)
        fix = "return one latent of latent_dim numbers per row"
        if z.dim() == 2 and z.shape[0] == rows:
            fix += f", or declare latent_dim = {z.shape[1]} if the latent has {z.shape[1]}"
        elif z.dim() > 2 and z.shape[0] == rows:
            fix += " (flatten it: z.flatten(1))"
        raise LatentContractError(
            f"{what} must have shape ({rows}, {latent_dim}) (rows, latent_dim), got "
            f"{got}{called}; {fix}"
        )
    if z.dtype != torch.float32:
        raise LatentContractError(
            f"{what} must be float32, got {z.dtype}{called}; convert it with .float()"
        )
    _check_finite_rows(z, rows, what, called)
    return z


def encode_states(model, state: torch.Tensor) -> torch.Tensor:
    """``(B, S)`` true states -> ``(B, Z)`` checked latents of their observations.

    Raises:
        ValueError: on a malformed state; ``LatentContractError`` on a bad latent.
    """
    obs = observations(model, state)
    z = invoke(model, "encode", obs)
    return check_latent(
        z, state.shape[0], model.latent_dim, label(model, "encode"), _called("encode", obs)
    )


def next_latents(
    model, z: torch.Tensor, action: torch.Tensor, next_state: torch.Tensor
) -> torch.Tensor:
    """The checked latents of actual next states ``(B, S)`` reached from latents ``z`` by
    ``action``: ``filter_latent(z, action, obs)`` where the model has it, else
    ``encode_states(model, next_state)``.

    Raises:
        ValueError: on a malformed state; ``LatentContractError`` on a bad latent.
    """
    if not capabilities_of(model).history_filter:
        return encode_states(model, next_state)
    obs = observations(model, next_state)
    out = invoke(model, "filter_latent", z, action, obs)
    called = _called("filter_latent", z, action, obs)
    return check_latent(out, z.shape[0], model.latent_dim, label(model, "filter_latent"), called)


def step_latent(
    model, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """One checked ``predict_latent``: ``(B, Z), (B,) -> (B, Z)``.

    Raises:
        LatentContractError: on a misshapen or non-finite prediction.
    """
    out = invoke(model, "predict_latent", z, action, generator)
    called = _called("predict_latent", z, action, generator)
    return check_latent(out, z.shape[0], model.latent_dim, label(model, "predict_latent"), called)


def check_decoded(state, rows: int, world: World, what: str, called: str = "") -> torch.Tensor:
    """``state`` if it is a finite floating ``(rows, S)`` tensor of ``world``.

    Args:
        state: the decoded states checked.
        rows, world: the shape they must have (``world.state_dim`` columns).
        what: who decoded (``"mine.make.decode (from mine.py)"``).
        called: the call's arguments, appended to the message.

    Raises:
        LatentContractError: naming ``what``, the problem and the fix.
    """
    if not isinstance(state, torch.Tensor):
        raise LatentContractError(
            f"{what} must be a torch.Tensor, got {type(state).__name__}{called}"
        )
    if tuple(state.shape) != (rows, world.state_dim) or not state.is_floating_point():
        raise LatentContractError(
            f"{what} must be a floating ({rows}, {world.state_dim}) tensor (world "
            f"{world.describe()}), got {state.dtype} {tuple(state.shape)}{called}; decode each "
            f"latent into the {world.state_dim} normalized state numbers of its world, in the "
            "order of World.dim_names"
        )
    _check_finite_rows(state, rows, what, called)
    return state


def _check_attributes(model, world: World) -> None:
    """The latent contract's attributes (module docstring), and ``model.world == world``."""
    who, offers = label(model), capabilities_of(model)
    kind, kinds = offers.obs_kind, world_kinds(world)
    if kind not in ALL_OBS_KINDS:
        raise LatentContractError(f"{who}.obs_kind must be one of {', '.join(kinds)}, got {kind!r}")
    z_dim = offers.latent_dim
    if isinstance(z_dim, bool) or not isinstance(z_dim, int) or z_dim < 1:
        raise LatentContractError(f"{who}.latent_dim must be an integer >= 1, got {z_dim!r}")
    own = offers.world
    if not isinstance(own, WORLD_KINDS):
        raise LatentContractError(
            f"{who}.world must be a gridplan World (e.g. gridplan.core.world.get('default')), "
            f"got {own!r}"
        )
    if own != world:
        raise LatentContractError(
            f"{who} reads observations of world {own.describe()}, but the task is played on "
            f"{world.describe()}; evaluate it on its own world (--world {own.name}), or set "
            "its world attribute to the world it was trained on"
        )
    if kind not in kinds:
        raise LatentContractError(
            f"{who}.obs_kind must be one of {', '.join(kinds)} on world {world.name!r}, "
            f"got {kind!r}"
        )
    if not isinstance(offers.deterministic, bool):
        raise LatentContractError(f"{who}.deterministic must be a bool")
    if not isinstance(offers.metadata, dict):
        raise LatentContractError(f"{who}.metadata must be a dict")


def check_latent_model(model, world: World, device: torch.device | str = "cpu") -> None:
    """Hold ``model`` to the latent contract on ``LATENT_CHECK_ROWS`` reset states of
    ``world``: its attributes, ``encode`` of their observations, ``predict_latent`` (twice with
    differently seeded generators for a model declared deterministic, which must agree),
    ``filter_latent``, ``decode``, ``reward`` and ``value`` where it has them.

    Raises:
        LatentContractError: naming the model (a plug-in's factory and file,
            ``gridplan.models.signatures.label``), the attribute or method, what is wrong
            with it, the shapes passed and the fix; a method whose signature cannot take the
            contract's arguments names the signature expected.
    """
    if not is_latent_model(model):
        raise LatentContractError(
            f"{label(model)} is not a latent model: it needs callable encode(obs) and "
            "predict_latent(z, action, generator)"
        )
    _check_attributes(model, world)
    dev = torch.device(device)
    rows = LATENT_CHECK_ROWS
    gen = torch.Generator(device=dev).manual_seed(0)
    state = dynamics.reset(tasks.get("A", world=world), rows, gen)
    offers = capabilities_of(model)
    with torch.no_grad():
        z = encode_states(model, state)
        action = torch.arange(rows, device=dev) % world.n_actions
        nxt = step_latent(model, z, action, torch.Generator(device=dev).manual_seed(1))
        if model.deterministic:
            again = step_latent(model, z, action, torch.Generator(device=dev).manual_seed(2))
            if not torch.equal(again, nxt):
                raise LatentContractError(
                    f"{label(model, 'predict_latent')} declares deterministic = True but "
                    "returned different latents for differently seeded generators; set "
                    "deterministic = False, or draw no random numbers"
                )
        next_latents(model, z, action, state)
        if offers.decoder:
            decoded = invoke(model, "decode", nxt)
            check_decoded(decoded, rows, world, label(model, "decode"), _called("decode", nxt))
        if offers.latent_reward:
            out = invoke(model, "reward", z, action, nxt)
            check_head(out, rows, label(model, "reward"), _called("reward", z, action, nxt))
        if offers.value:
            out = invoke(model, "value", nxt)
            check_head(out, rows, label(model, "value"), _called("value", nxt))


def check_head(out, rows: int, what: str, called: str = "") -> torch.Tensor:
    """``out`` if it is a finite ``(rows,)`` tensor: a reward or value head's output.

    Raises:
        LatentContractError: naming ``what``, the shape found or the non-finite values, the
            call's arguments (``called``) and the fix.
    """
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows,):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        fix = "; squeeze the last dim: out.squeeze(-1)" if got == (rows, 1) else ""
        raise LatentContractError(
            f"{what} must return a ({rows},) tensor, one number per row, got {got}{called}{fix}"
        )
    _check_finite_rows(out, rows, what, called)
    return out


class LatentThroughDecoder(Declared, WorldModel):
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
        offers = capabilities_of(latent)
        if decode is None and not offers.decoder:
            raise LatentContractError(
                f"{label(latent)} has no decode(z); plan and measure it through the frozen "
                "protocol decoder (gridplan.metrics.frozen_decoder.fit_frozen_decoder)"
            )
        if heads and not offers.latent_reward:
            raise LatentContractError(
                f"planning through the model's heads (--leaf-score heads) needs a reward "
                f"head, but {label(latent)} has no reward(z, action, z_next); drop "
                "--leaf-score heads, or give the model a reward head"
            )
        self.latent = latent
        self.decode_fn = decode if decode is not None else latent.decode
        # Errors name who decoded: the plug-in's own method, or the decoder it was given.
        self._decode_name = (
            label(latent, "decode")
            if decode is None
            else f"the {type(decode).__name__} of {label(latent)}"
        )
        self.decoder = dict(decoder or {"kind": "model"})
        self.heads = heads
        self.world = latent.world
        self.latent_dim = latent.latent_dim
        self.obs_kind = latent.obs_kind
        self.metadata = latent.metadata
        declared = offers.bytes_per_row
        self.bytes_per_row = int(DEFAULT_LATENT_ROW_BYTES if declared is None else declared)
        self.reencoded = 0
        self._last: torch.Tensor | None = None
        self._z: torch.Tensor | None = None
        self._roots: tuple[torch.Tensor, torch.Tensor] | None = None
        self._cursor = 0

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        self._last, self._z = None, None

    def plan_from(self, root: torch.Tensor | None, z: torch.Tensor | None = None) -> None:
        """Hand over the latents ``z`` ``(B, Z)`` of the next decision's roots ``root``
        ``(B, S)``, a history model's beliefs (``gridplan.models.opaque.EpisodeHistory``):
        ``encode_states`` returns them for those roots, whole or chunk by chunk in order,
        instead of encoding the roots' observations afresh. ``plan_from(None)`` forgets them.
        """
        self._roots = None if root is None else (root, z)
        self._cursor = 0

    def encode_states(self, state: torch.Tensor) -> torch.Tensor:
        """The handed-over latents of ``state`` (``plan_from``), else
        ``encode_states(self.latent, state)``."""
        if self._roots is not None:
            root, z = self._roots
            n = state.shape[0]
            for lo in (self._cursor, 0):
                if lo + n <= root.shape[0] and torch.equal(root[lo : lo + n], state):
                    self._cursor = (lo + n) % root.shape[0]
                    return z[lo : lo + n]
        return encode_states(self.latent, state)

    def step_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """``step_latent(self.latent, z, action, generator)``."""
        return step_latent(self.latent, z, action, generator)

    def decode_latent(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, Z)`` -> ``(B, S)`` checked decoded states, clamped into ``[0, 1]``."""
        called = f" (called with z {describe_value(z)})"
        out = check_decoded(self.decode_fn(z), z.shape[0], self.world, self._decode_name, called)
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
