"""What a world model can do, declared once: the protocols of its methods and the frozen
``Capabilities`` record the library reads instead of probing the model (``docs/DESIGN.md``,
"The interfaces a user implements").

Letter legend: ``N`` rows of a call, ``S`` state dims (``world.state_dim``), ``Z`` a latent
model's ``latent_dim``, ``K`` ensemble members, ``A`` actions (``world.n_actions``).

Each protocol is one thing a model may offer (``gridplan.models.signatures.METHODS`` holds the
same signatures as data, for error messages):

- ``Transition``: ``predict`` on the physical state (``gridplan.models.contract``);
- ``RolloutStart``: ``start_rollout`` before each imagined rollout;
- ``Encoder``, ``LatentTransition``, ``Decoder``, ``HistoryFilter``, ``Observer``: the latent
  contract's methods (``gridplan.models.latent_contract``);
- ``RewardHead`` (a state model's ``predict_reward``), ``LatentRewardHead`` and ``ValueHead``
  (a latent model's ``reward`` and ``value``);
- ``Ensemble`` (``predict_members``) and ``Uncertainty`` (``uncertainty``): where the ladder
  reads uncertainty (``gridplan.evaluation.uncertainty``).

- ``OpaqueStateInit`` and ``OpaqueStateStep``: a model whose state is its own and filtered
  from a history (``gridplan.models.opaque``).

``capabilities_of(model)`` is the one way library code asks what a model offers: a model that
carries a ``Capabilities`` (``capabilities``: the built-in models compute theirs on first use,
``Declared``; ``gridplan.models.plugins.admit`` records it on the model it returns) answers
from it, any other object is read once per call by ``declare``, the only place that looks at a
model's attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Transition(Protocol):
    """One imagined step on the physical state."""

    def predict(
        self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """``state`` ``(N, S)`` float in ``[0, 1]``, ``action`` ``(N,)`` int64 in ``0..A-1``,
        ``generator`` the only randomness -> ``(N, S)`` of the input's dtype and device."""


@runtime_checkable
class RolloutStart(Protocol):
    """A model with memory across imagined steps resets it here."""

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        """Called before each imagined rollout of ``batch`` rows."""


@runtime_checkable
class Encoder(Protocol):
    """The latent of an observation."""

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` ``(N, *obs_shape)`` (``gridplan.core.render.observe``) -> ``(N, Z)``
        float32."""


@runtime_checkable
class LatentTransition(Protocol):
    """One imagined step in latent space."""

    def predict_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """``z`` ``(N, Z)`` float32, ``action`` ``(N,)`` int64, ``generator`` the only
        randomness -> ``(N, Z)`` float32."""


@runtime_checkable
class Decoder(Protocol):
    """The state a latent stands for."""

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``(N, Z)`` float32 -> ``(N, S)`` floating normalized states."""


@runtime_checkable
class HistoryFilter(Protocol):
    """A recurrent model's latent of the actual next observation."""

    def filter_latent(
        self, z: torch.Tensor, action: torch.Tensor, obs: torch.Tensor
    ) -> torch.Tensor:
        """``z`` ``(N, Z)`` before the step, ``action`` ``(N,)`` int64, ``obs``
        ``(N, *obs_shape)`` of the states reached -> ``(N, Z)`` float32."""


@runtime_checkable
class OpaqueStateInit(Protocol):
    """A history model's state filtered from a history of observations and actions."""

    def init(self, observations: torch.Tensor, actions: torch.Tensor):
        """``observations`` ``(N, T + 1, *obs_shape)``, ``actions`` ``(N, T)`` int64 -> a
        state: a tensor ``(N, ...)``, a tuple of them or a TensorDict of batch size ``[N]``."""


@runtime_checkable
class OpaqueStateStep(Protocol):
    """One imagined step of a history model's state."""

    def step(self, state, action: torch.Tensor, generator: torch.Generator):
        """A state as ``init`` returns it (never modified), ``action`` ``(N,)`` int64,
        ``generator`` the only randomness -> the next state, laid out as ``init``'s."""


@runtime_checkable
class Observer(Protocol):
    """The observation a latent model reads, when it differs from ``render.observe``'s."""

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """``(N, S)`` float32 true states -> ``(N, *obs_shape)``."""


@runtime_checkable
class RewardHead(Protocol):
    """A state model's own reward of its imagined step."""

    def predict_reward(
        self, state: torch.Tensor, action: torch.Tensor, next_state: torch.Tensor
    ) -> torch.Tensor:
        """``(N, S)``, ``(N,)``, ``(N, S)`` (its own prediction) -> ``(N,)`` of the input's
        dtype and device."""


@runtime_checkable
class LatentRewardHead(Protocol):
    """A latent model's own reward of a latent step."""

    def reward(self, z: torch.Tensor, action: torch.Tensor, z_next: torch.Tensor) -> torch.Tensor:
        """``(N, Z)``, ``(N,)`` int64, ``(N, Z)`` (its own prediction) -> ``(N,)`` finite."""


@runtime_checkable
class ValueHead(Protocol):
    """A latent model's own value of a latent."""

    def value(self, z: torch.Tensor) -> torch.Tensor:
        """``(N, Z)`` float32 -> ``(N,)`` finite."""


@runtime_checkable
class Ensemble(Protocol):
    """The next states of every member."""

    def predict_members(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``(N, S)``, ``(N,)`` -> ``(K, N, S)``."""


@runtime_checkable
class Uncertainty(Protocol):
    """How unsure the model is of an imagined step."""

    def uncertainty(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``(N, S)``, ``(N,)`` -> ``(N,)`` scores ``>= 0`` (larger: less sure)."""


#: Each flag of ``Capabilities`` and the method that grants it.
METHOD_OF = {
    "transition": "predict",
    "rollout_start": "start_rollout",
    "encoder": "encode",
    "latent_transition": "predict_latent",
    "decoder": "decode",
    "history_filter": "filter_latent",
    "history_init": "init",
    "history_step": "step",
    "observer": "observe",
    "reward": "predict_reward",
    "latent_reward": "reward",
    "value": "value",
    "ensemble": "predict_members",
    "uncertainty": "uncertainty",
}
#: The declarations a model may make and their values when undeclared, read as they are: their
#: checks stay with the code that needs them (``gridplan.models.latent_contract``,
#: ``gridplan.planning.scorers``, ``gridplan.metrics.prediction``).
DECLARATIONS = {
    "world": None,
    "n_settings": 1,
    "deterministic": None,
    "bytes_per_row": None,
    "obs_kind": None,
    "latent_dim": None,
    "metadata": None,
    "members": None,
    "reading": None,
    "sampling": None,
    "history": None,
}


@dataclass(frozen=True)
class Capabilities:
    """What one model offers (module docstring).

    Attributes:
        transition ... uncertainty: whether the model has a callable of ``METHOD_OF``'s name.
        world: the declared ``World`` (or ``DoorKey``), None where it declares none.
        n_settings: setting blocks per batch as declared (1 when undeclared).
        deterministic: as declared (None when undeclared; only ``True`` means deterministic).
        bytes_per_row: working memory per row of one call, as declared, or None.
        obs_kind, latent_dim, metadata: a latent model's declarations, or None.
        members: the ensemble size ``K`` as declared, or None.
        reading: the ``gridplan.core.readings.Reading`` of a built-in noise model, or None.
        sampling: an ensemble's ``"mean"`` or ``"ts"``, or None.
        history: a history model's declared history length ``H``, or None.
        checked_on: ``(world, device)`` the model passed its contract checks on
            (``gridplan.models.plugins.admit``), or None.
    """

    transition: bool = False
    rollout_start: bool = False
    encoder: bool = False
    latent_transition: bool = False
    decoder: bool = False
    history_filter: bool = False
    history_init: bool = False
    history_step: bool = False
    observer: bool = False
    reward: bool = False
    latent_reward: bool = False
    value: bool = False
    ensemble: bool = False
    uncertainty: bool = False
    world: object = None
    n_settings: object = 1
    deterministic: object = None
    bytes_per_row: object = None
    obs_kind: object = None
    latent_dim: object = None
    metadata: object = None
    members: object = None
    reading: object = None
    sampling: object = None
    history: object = None
    checked_on: tuple | None = None

    @property
    def latent(self) -> bool:
        """Whether the model offers the latent contract (``encode`` and ``predict_latent``)."""
        return self.encoder and self.latent_transition

    @property
    def history_state(self) -> bool:
        """Whether the model offers the history contract (``init`` and ``step``)."""
        return self.history_init and self.history_step

    @property
    def history_only(self) -> bool:
        """A history model without a state ``predict`` or the latent contract: evaluated as
        the latent model of its flattened state (``gridplan.models.opaque``)."""
        return self.history_state and not self.transition and not self.latent

    @property
    def latent_only(self) -> bool:
        """A latent model without a state ``predict``: evaluated through a decoder."""
        return self.latent and not self.transition

    @property
    def is_deterministic(self) -> bool:
        """Whether the model declares ``deterministic = True``."""
        return self.deterministic is True

    @property
    def uncertainty_source(self) -> str | None:
        """``"uncertainty"``, ``"predict_members"`` or None: where the ladder reads uncertainty
        (an ensemble declaring fewer than 2 members has no disagreement to read)."""
        if self.uncertainty:
            return "uncertainty"
        if self.ensemble and not (isinstance(self.members, int) and self.members < 2):
            return "predict_members"
        return None


def declare(model) -> Capabilities:
    """``model``'s ``Capabilities`` read off its methods and declarations (module docstring)."""
    flags = {flag: callable(getattr(model, name, None)) for flag, name in METHOD_OF.items()}
    values = {name: getattr(model, name, default) for name, default in DECLARATIONS.items()}
    return Capabilities(**flags, **values)


def capabilities_of(model) -> Capabilities:
    """What ``model`` offers: the ``Capabilities`` it carries, else ``declare(model)``."""
    own = getattr(model, "capabilities", None)
    return own if isinstance(own, Capabilities) else declare(model)


class Declared:
    """A built-in model's ``capabilities``: ``declare`` of itself, computed on first use (its
    methods and declarations are fixed once it is built)."""

    @cached_property
    def capabilities(self) -> Capabilities:
        return declare(self)


def checked_on(model, world, device: torch.device | str) -> bool:
    """Whether ``model`` passed its contract checks on ``world`` and ``device``
    (``gridplan.models.plugins.admit``)."""
    return capabilities_of(model).checked_on == (world, torch.device(device))


def record_checked(model, world, device: torch.device | str):
    """``model``, its ``capabilities`` recording that it passed its contract checks on
    ``world`` and ``device``; only a model of this package's classes (``Declared``) is written
    to, any other object is returned as it is."""
    if isinstance(model, Declared):
        caps = replace(capabilities_of(model), checked_on=(world, torch.device(device)))
        model.capabilities = caps
    return model
