"""Reference latent models with known answers (``gridplan.models.latent_contract``).

* ``StateLatentModel``: the encoder is the true state (``obs_kind = "state"``, ``z = s``), the
  dynamics a state world model (default the oracle, ``gridplan.models.noise.OracleModel``),
  ``decode`` the identity. Planning through it is planning with its dynamics, and its decoded
  relevant dims are exact under the oracle: its relevant-projection excess error is 0 and its
  decisions are the oracle's.
* ``PersistenceLatentModel``: ``z' = z`` (nothing moves), over the true state or over the
  encoder and decoder of another latent model. Over the true state its decoded prediction is
  the current state, so its numbers are those of the physical persistence baseline
  (seed 004 §3: current-state persistence) by construction.
"""

from __future__ import annotations

import torch

from gridplan.core.env import check_state
from gridplan.core.world import DEFAULT, World
from gridplan.models.capabilities import Declared, capabilities_of
from gridplan.models.latent_contract import LatentContractError, check_latent, is_latent_model
from gridplan.models.noise import OracleModel


def _check_state_obs(obs, world: World) -> torch.Tensor:
    if not isinstance(obs, torch.Tensor):
        raise LatentContractError(f"obs must be a torch.Tensor, got {type(obs).__name__}")
    if obs.dtype != torch.float32:
        raise LatentContractError(
            f"obs (kind 'state') must be float32 of shape (B, {world.state_dim}), got {obs.dtype}"
        )
    if obs.dim() != 2 or obs.shape[1] != world.state_dim:
        raise LatentContractError(
            f"obs (kind 'state') must have shape (B, {world.state_dim}) (world "
            f"{world.name!r}), got {tuple(obs.shape)}"
        )
    check_state(obs, "obs", world)
    return obs


def _check_action(action, rows: int, n_actions: int) -> None:
    """``action`` must be ``(rows,)`` integers in ``0..n_actions - 1`` (the world's actions)."""
    if (
        not isinstance(action, torch.Tensor)
        or tuple(action.shape) != (rows,)
        or action.is_floating_point()
        or (action.numel() and (int(action.min()) < 0 or int(action.max()) >= n_actions))
    ):
        got = tuple(action.shape) if isinstance(action, torch.Tensor) else type(action).__name__
        raise LatentContractError(
            f"action must be a ({rows},) integer tensor in 0..{n_actions - 1}, got {got}"
        )


class StateLatentModel(Declared):
    """``z = s``, ``z' = dynamics.predict(z, a)``, ``decode(z) = z`` (module docstring).

    Args:
        world: the world of the states.
        dynamics: a state ``WorldModel`` of that world; default the oracle.
    """

    obs_kind = "state"

    def __init__(self, world: World = DEFAULT, dynamics=None) -> None:
        self.world = world
        self.dynamics = OracleModel(world=world) if dynamics is None else dynamics
        self.latent_dim = world.state_dim
        self.deterministic = capabilities_of(self.dynamics).is_deterministic
        self.metadata = {"name": "state-latent", "dynamics": type(self.dynamics).__name__}

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` float32 states -> ``(B, S)`` latents (a copy).

        Raises:
            LatentContractError: on a wrong shape, dtype or non-finite values.
        """
        return _check_state_obs(obs, self.world).clone()

    def predict_latent(self, z, action, generator):
        """The dynamics' step on the latent-as-state: ``(B, S), (B,) -> (B, S)``.

        Raises:
            LatentContractError: on a malformed latent or actions.
        """
        check_latent(z, z.shape[0] if isinstance(z, torch.Tensor) else -1, self.latent_dim, "z")
        _check_action(action, z.shape[0], self.world.n_actions)
        return self.dynamics.predict(z, action, generator).float()

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The identity, ``(B, S) -> (B, S)`` (a copy)."""
        check_latent(z, z.shape[0] if isinstance(z, torch.Tensor) else -1, self.latent_dim, "z")
        return z.clone()


class PersistenceLatentModel(Declared):
    """``z' = z`` over the true state (``base=None``) or over ``base``'s encoder and decoder.

    Args:
        world: the world (ignored with a ``base``: its world is taken).
        base: optional latent model whose ``encode``, ``observe`` and ``decode`` are reused.

    Raises:
        LatentContractError: if ``base`` is not a latent model.
    """

    deterministic = True

    def __init__(self, world: World = DEFAULT, base=None) -> None:
        if base is not None and not is_latent_model(base):
            raise LatentContractError(
                f"base must be a latent model (encode, predict_latent), got {type(base).__name__}"
            )
        self.base = base
        self.world = world if base is None else base.world
        self.obs_kind = "state" if base is None else base.obs_kind
        self.latent_dim = self.world.state_dim if base is None else base.latent_dim
        source = "state" if base is None else base.metadata.get("name", type(base).__name__)
        self.metadata = {"name": f"persistence({source})"}
        offers = None if base is None else capabilities_of(base)
        if offers is not None and offers.observer:
            self.observe = base.observe
        if offers is None or offers.decoder:
            self.decode = self._decode

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """The base's encoding, or the ``(B, S)`` state itself (a copy).

        Raises:
            LatentContractError: on a wrong shape, dtype or non-finite observation.
        """
        if self.base is not None:
            return self.base.encode(obs)
        return _check_state_obs(obs, self.world).clone()

    def predict_latent(self, z, action, generator):
        """``z`` itself (a copy): ``(B, Z), (B,) -> (B, Z)``; the generator is unused.

        Raises:
            LatentContractError: on a malformed latent or actions.
        """
        check_latent(z, z.shape[0] if isinstance(z, torch.Tensor) else -1, self.latent_dim, "z")
        _check_action(action, z.shape[0], self.world.n_actions)
        return z.clone()

    def _decode(self, z: torch.Tensor) -> torch.Tensor:
        if self.base is not None:
            return self.base.decode(z)
        check_latent(z, z.shape[0] if isinstance(z, torch.Tensor) else -1, self.latent_dim, "z")
        return z.clone()
