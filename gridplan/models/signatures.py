"""The methods of the three world-model contracts as data: their signatures, the shapes and dtypes
each argument arrives with and each output must have, so an error can quote them.

The prose of the contracts is the module docstring of ``gridplan.models.plugins`` and the page
``docs/how-to/plug-ins.md``; ``tests/evaluation/test_plugin_signatures.py`` holds the three
together (every method here is named with its signature in both).

Letter legend: ``N`` rows of a call, ``S`` state dims (``world.state_dim``, 12 in the default
world), ``Z`` the latent model's ``latent_dim``, ``K`` ensemble members.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Method:
    """One method of a contract.

    Attributes:
        contract: ``"state"`` (``gridplan.models.contract``), ``"latent"``
            (``gridplan.models.latent_contract``) or ``"history"``
            (``gridplan.models.opaque``).
        name: the method's name.
        params: its parameters after ``self``, in the order they are passed.
        args: what each argument is (shape, dtype, range).
        returns: what it must return.
        required: whether every model of the contract needs it.
    """

    contract: str
    name: str
    params: tuple[str, ...]
    args: str
    returns: str
    required: bool = False

    @property
    def signature(self) -> str:
        """``"reward(z, action, z_next) -> (N,) float"``."""
        return f"{self.name}({', '.join(self.params)}) -> {self.returns}"


_STATE = "state (N, S) float32 in [0, 1]"
_ACTION = "action (N,) int64 in 0..3"
_GENERATOR = "generator torch.Generator (the only randomness allowed)"
_LATENT = "(N, Z) float32"

#: Every method of both contracts, by ``(contract, name)``.
METHODS: dict[tuple[str, str], Method] = {
    (m.contract, m.name): m
    for m in (
        Method(
            "state",
            "predict",
            ("state", "action", "generator"),
            f"{_STATE}, {_ACTION}, {_GENERATOR}",
            "(N, S) next states, the input's dtype and device",
            required=True,
        ),
        Method(
            "state",
            "start_rollout",
            ("batch", "generator"),
            "batch int (rows of the rollout), generator torch.Generator",
            "None",
        ),
        Method(
            "state",
            "predict_reward",
            ("state", "action", "next_state"),
            f"{_STATE}, {_ACTION}, next_state (N, S) float32 (the model's own prediction)",
            "(N,) rewards, the input's dtype and device",
        ),
        Method(
            "state",
            "uncertainty",
            ("state", "action"),
            f"{_STATE}, {_ACTION}",
            "(N,) scores >= 0, the input's dtype and device",
        ),
        Method(
            "state",
            "predict_members",
            ("state", "action"),
            f"{_STATE}, {_ACTION}",
            "(K, N, S) next states of K members, the input's dtype and device",
        ),
        Method(
            "latent",
            "encode",
            ("obs",),
            "obs (N, *obs_shape): the normalized (N, S) float32 state, (N, C, G, G) float32 "
            "grid or (N, 3, P, P) uint8 pixels, as gridplan.core.render.observe draws them",
            f"{_LATENT} latents",
            required=True,
        ),
        Method(
            "latent",
            "predict_latent",
            ("z", "action", "generator"),
            f"z {_LATENT}, {_ACTION}, {_GENERATOR}",
            f"{_LATENT} next latents",
            required=True,
        ),
        Method(
            "latent",
            "decode",
            ("z",),
            f"z {_LATENT}",
            "(N, S) floating normalized states of the model's world",
        ),
        Method(
            "latent",
            "reward",
            ("z", "action", "z_next"),
            f"z {_LATENT}, {_ACTION}, z_next {_LATENT} (the model's own prediction)",
            "(N,) finite rewards",
        ),
        Method("latent", "value", ("z",), f"z {_LATENT}", "(N,) finite values"),
        Method(
            "latent",
            "filter_latent",
            ("z", "action", "obs"),
            f"z {_LATENT} (the latent before the step), {_ACTION}, obs (N, *obs_shape) of "
            "the state the step reached, as encode reads them",
            f"{_LATENT} latents of the actual next observation given the step (a recurrent "
            "model's posterior)",
        ),
        Method(
            "history",
            "init",
            ("observations", "actions"),
            "observations (N, T + 1, *obs_shape) oldest first, as encode reads them; actions "
            "(N, T) int64, the actions between them; T + 1 <= history",
            "a state: a tensor (N, ...), a tuple of tensors (N, ...) or a TensorDict of batch "
            "size [N]; float leaves float32 and finite",
            required=True,
        ),
        Method(
            "history",
            "step",
            ("state", "action", "generator"),
            f"state as init returns it (do not modify it), {_ACTION}, {_GENERATOR}",
            "the next state, laid out as init's",
            required=True,
        ),
        Method(
            "history",
            "decode",
            ("state",),
            "state as init returns it",
            "(N, S) floating normalized states of the model's world",
        ),
        Method(
            "history",
            "reward",
            ("state", "action"),
            f"state as init returns it, {_ACTION}",
            "(N,) finite rewards of the step action takes from state",
        ),
        Method("history", "value", ("state",), "state as init returns it", "(N,) finite values"),
        Method(
            "latent",
            "observe",
            ("state",),
            f"{_STATE} true states of the model's world",
            "(N, *obs_shape): the observations encode reads",
        ),
    )
}


def describe_value(value) -> str:
    """``"(8, 12) float32"`` for a tensor (``on cuda:0`` off the CPU), else the value's type (an
    int shows itself)."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        where = "" if value.device.type == "cpu" else f" on {value.device}"
        return f"{tuple(value.shape)} {dtype}{where}"
    if isinstance(value, torch.Generator):
        return "torch.Generator"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return type(value).__name__


def describe_call(method: Method, args: tuple) -> str:
    """``"z (8, 32) float32, action (8,) int64, z_next (8, 32) float32"``: the arguments a call
    passed, named by the contract's parameters."""
    names = method.params + tuple(f"arg{i}" for i in range(len(method.params), len(args)))
    return ", ".join(f"{n} {describe_value(a)}" for n, a in zip(names, args, strict=False))


def binding_error(fn, args: tuple) -> str | None:
    """Why ``fn(*args)`` cannot bind its arguments (too many, too few, a required keyword), or
    None when it can or ``fn`` has no signature to check."""
    try:
        inspect.signature(fn).bind(*args)
    except TypeError as err:
        return str(err)
    except ValueError:
        return None
    return None


def own_signature(fn) -> str:
    """``"(self, z, action)"``-style text of ``fn``'s parameters as defined (bound methods
    without ``self``), or ``"(?)"`` when it has none."""
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(?)"


def mismatch_message(who: str, method: Method, fn, args: tuple, why: str) -> str:
    """The error of a method whose signature does not take the contract's arguments: who, the
    signature it has, the one expected with its shapes, what the call passed, and the fix."""
    params = ", ".join(method.params)
    return (
        f"{who} has the wrong signature: it is {method.name}{own_signature(fn)}, the "
        f"{method.contract} contract calls {method.signature} with {method.args}; this call "
        f"passed {describe_call(method, args)} ({why}). Define it as "
        f"def {method.name}(self, {params}): ..."
    )


def label(model, method: str | None = None) -> str:
    """How errors name ``model`` (or its ``method``): a plug-in wrapper's ``who(method)`` (its
    factory and file, ``gridplan.models.plugins``), else ``TypeName`` / ``TypeName.method``."""
    who = getattr(model, "who", None)
    if callable(who):
        return who(method)
    name = type(model).__name__
    return f"{name}.{method}" if method else name
