"""Latent world models: encode an observation, predict the next latent, decode a state.

The world models researchers build today (Dreamer-style latent dynamics, TD-MPC2, JEPA
predictors) do not predict the state vector: they encode an observation
(``gridplan.core.render.observe``: the state, a symbolic grid or RGB pixels) into a latent
``z`` and predict the next latent. Two families are built here (networks only; their
Lightning training is ``gridplan.training.latent_module``):

* ``latent_recon``: an encoder, a latent dynamics network (deterministic, or a Gaussian whose
  sample is drawn from the caller's generator) and a decoder from the latent to the
  normalized state, trained by reconstruction (Dreamer-style world models, without the
  recurrent state: the gridworld is fully observed).
* ``jepa``: an encoder and a latent predictor trained without reconstruction, against a target
  encoder that follows the online one by an exponential moving average (``ema_update``), with
  a VICReg variance/covariance regulariser against collapse (``variance_loss``,
  ``covariance_loss``; Bardes et al. 2022).
* ``rssm``: Dreamer's recurrent state-space model (Hafner et al. 2019), built from TorchRL's
  ``RSSMPrior`` and ``RSSMPosterior``: the latent is ``z = [h, s]``, a deterministic belief
  ``h`` (a GRU) and a stochastic state ``s`` (a Gaussian whose sample is drawn from the
  caller's generator, ``RSSMDynamics``), trained on sequences by reconstruction and the KL
  of the posterior from the prior; a decoder reads ``[h, s]``. The world is fully observed,
  so one observation is a complete history: ``encode`` is the posterior's mean from the
  initial belief ``h = 0``.
* ``tdmpc``: decoder-free, TD-MPC-style (Hansen et al. 2022): the JEPA's encoder, latent
  dynamics and EMA target encoder (latent consistency), plus a reward head ``r(z, a)``, a
  termination head and a value head ``V(z)`` trained by temporal differences through the
  model itself (``TDHeads``); the planner may score leaves with these heads
  (``--leaf-score heads``) or, like every latent model, with the true reward and V* of states
  decoded by the frozen protocol decoder.

``LatentNetwork`` holds every part; ``LearnedLatentModel`` (``load_latent_model``) wraps a
trained one behind the latent contract read by the planner and the latent metrics::

    model.obs_kind, model.latent_dim, model.world, model.deterministic, model.metadata
    z = model.encode(obs)                          # (B, *obs_shape) -> (B, Z) float32
    z_next = model.predict_latent(z, action, gen)  # (B, Z), (B,) long, Generator -> (B, Z)
    state = model.decode(z)                        # latent_recon only: (B, Z) -> (B, S)
    r = model.reward(z, action, z_next)            # tdmpc only: -> (B,) float32
    v = model.value(z)                             # tdmpc only: -> (B,) float32

Letter legend: ``B`` rows, ``Z`` latent dims, ``S`` state dims, ``C`` grid channels.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from gridplan.core.constants import N_ACTIONS, STATE_LAYOUT_VERSION
from gridplan.core.render import ALL_OBS_KINDS, PIXELS_PER_CELL, check_kind, obs_shape, observe
from gridplan.core.world import World, recorded
from gridplan.models.capabilities import Declared
from gridplan.models.learned import CHECKPOINT_KEY, _read_checkpoint, load_weights

#: Latent model families (``model.family`` of a training config).
LATENT_FAMILIES = ("latent_recon", "jepa", "tdmpc", "rssm")
#: Families read through an EMA target encoder, trained without reconstruction.
TARGET_FAMILIES = ("jepa", "tdmpc")
#: ``"kind"`` of a latent checkpoint's ``"gridplan"`` entry.
LATENT_KIND = "latent"
#: Smallest standard deviation of the stochastic latent (keeps the Gaussian proper).
MIN_STD = 1e-3


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Linear layers of ``sizes`` with SiLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class ObservationEncoder(nn.Module):
    """Observation -> latent: an MLP for ``state``; for ``grid`` and ``pixels`` a first
    convolution that reads one cell per output position (``grid``: 3x3, stride 1;
    ``pixels``: a ``P x P`` patch per cell, stride ``P``, pixels scaled from uint8 to
    ``[0, 1]``), then 3x3 stride-2 convolutions and a linear layer. On the default world
    with ``channels [16, 32]`` both see ``8x8x16`` then ``4x4x32`` features.

    Args:
        shape: one observation's shape (``gridplan.core.render.obs_shape``).
        kind: the observation kind.
        latent_dim: ``Z``.
        channels: conv channels per layer (``grid``/``pixels``).
        hidden: MLP widths (``state``).
        patch: pixels per cell ``P`` (``pixels``).
    """

    def __init__(
        self,
        shape: Sequence[int],
        kind: str,
        latent_dim: int,
        channels: Sequence[int],
        hidden: Sequence[int],
        patch: int = PIXELS_PER_CELL,
    ) -> None:
        super().__init__()
        self.kind = check_kind(kind)
        self.shape = tuple(shape)
        if kind == "state":
            self.net = _mlp([self.shape[0], *hidden, latent_dim])
            return
        c_in, side = self.shape[0], self.shape[1]
        if kind == "pixels":
            first = nn.Conv2d(c_in, channels[0], patch, stride=patch)
            side //= patch
        else:
            first = nn.Conv2d(c_in, channels[0], 3, stride=1, padding=1)
        layers: list[nn.Module] = [first, nn.SiLU()]
        c_in = channels[0]
        for c in channels[1:]:
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.SiLU()]
            c_in, side = c, (side + 1) // 2
        layers += [nn.Flatten(), nn.Linear(c_in * side * side, latent_dim)]
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, *shape)`` observations -> ``(B, Z)``."""
        x = obs.float()
        if self.kind == "pixels":
            x = x / 255.0
        return self.net(x)


class LatentDynamics(nn.Module):
    """``(z, one-hot action) -> z'`` as ``z + MLP(z, a)``; ``stochastic``: the MLP gives a
    Gaussian's mean change and log standard deviation, ``z'`` is its reparameterised sample.

    Args:
        latent_dim: ``Z``.
        hidden: MLP widths.
        stochastic: Gaussian latent transition instead of a deterministic one.
        n_actions: the world's action count ``A`` (4; MiniGrid DoorKey's 7), one-hot coded.
    """

    def __init__(
        self, latent_dim: int, hidden: Sequence[int], stochastic: bool, n_actions: int = N_ACTIONS
    ) -> None:
        super().__init__()
        self.stochastic, self.n_actions = bool(stochastic), int(n_actions)
        out = 2 * latent_dim if stochastic else latent_dim
        self.net = _mlp([latent_dim + self.n_actions, *hidden, out])

    def distribution(self, z: torch.Tensor, action: torch.Tensor):
        """``(mean (B, Z), std (B, Z) or None)`` of the next latent."""
        one_hot = nn.functional.one_hot(action.long(), self.n_actions).to(z.dtype)
        out = self.net(torch.cat([z, one_hot], dim=1))
        if not self.stochastic:
            return z + out, None
        delta, log_std = out.chunk(2, dim=1)
        return z + delta, nn.functional.softplus(log_std) + MIN_STD

    def forward(
        self, z: torch.Tensor, action: torch.Tensor, noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The next latent: the mean, or for a stochastic transition ``mean + std * noise``
        (``noise (B, Z)`` standard normal, drawn by the caller from its generator).

        Raises:
            ValueError: if a stochastic transition gets no noise.
        """
        mean, std = self.distribution(z, action)
        if std is None:
            return mean
        if noise is None:
            raise ValueError("a stochastic latent transition needs its standard-normal noise")
        return mean + std * noise


class RSSMDynamics(nn.Module):
    """One imagined step of an RSSM on latents ``z = [h, s]`` (``H`` belief dims, then ``Zs``
    state dims): TorchRL's ``RSSMPrior`` advances the belief by its GRU from ``(s, a)`` and
    gives the prior Gaussian of the next state, ``s' = mean + std * noise``.

    Args:
        belief_dim: ``H``, also the width of the prior's projections (TorchRL's prior reads
            the belief with a layer of its projection width).
        state_dim: ``Zs``.
        n_actions: the world's action count ``A``, one-hot coded.

    Raises:
        ImportError: without TorchRL (``pip install 'gridplan[torchrl]'``).
    """

    def __init__(self, belief_dim: int, state_dim: int, n_actions: int = N_ACTIONS) -> None:
        super().__init__()
        try:
            from torchrl.data import OneHot
            from torchrl.modules.models.model_based import RSSMPrior
        except ImportError as err:
            raise ImportError(
                "model=rssm is built from TorchRL's RSSMPrior and RSSMPosterior: install the "
                "torchrl extra (pip install 'gridplan[torchrl]')"
            ) from err
        self.belief_dim, self.state_dim = int(belief_dim), int(state_dim)
        self.n_actions = int(n_actions)
        self.prior = RSSMPrior(
            OneHot(self.n_actions),
            hidden_dim=self.belief_dim,
            rnn_hidden_dim=self.belief_dim,
            state_dim=self.state_dim,
            action_dim=self.n_actions,
        )

    def step(
        self, z: torch.Tensor, action: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(z' (B, H + Zs), prior mean (B, Zs), prior std (B, Zs))`` from ``(B, H + Zs)``
        latents, ``(B,)`` actions and ``(B, Zs)`` standard-normal ``noise``."""
        belief, state = z.split([self.belief_dim, self.state_dim], dim=1)
        one_hot = nn.functional.one_hot(action.long(), self.n_actions).to(z.dtype)
        mean, std, state, belief = self.prior(state, belief, one_hot, noise=noise)
        return torch.cat([belief, state], dim=1), mean, std

    def forward(
        self, z: torch.Tensor, action: torch.Tensor, noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The next latent ``[h', s']`` (``noise (B, Zs)`` drawn by the caller).

        Raises:
            ValueError: without noise (the prior's state is always a sample).
        """
        if noise is None:
            raise ValueError("an RSSM step needs its standard-normal noise")
        return self.step(z, action, noise)[0]


class TDHeads(nn.Module):
    """The heads of a ``tdmpc`` model: ``reward(z, a)`` (the reward of the step, as
    ``gridplan.core.dynamics.outcome`` gives it), ``done(z, a)`` (the logit that the step ends
    the episode at a goal or a hazard), ``value(z)`` and its EMA copy ``target_value`` (the
    bootstrap of the temporal-difference target, never trained by gradient).

    Args:
        latent_dim: ``Z``.
        hidden: MLP widths of each head.
        n_actions: the world's action count ``A``, one-hot coded.
    """

    def __init__(self, latent_dim: int, hidden: Sequence[int], n_actions: int = N_ACTIONS) -> None:
        super().__init__()
        self.n_actions = a = int(n_actions)
        self.reward = _mlp([latent_dim + a, *hidden, 1])
        self.done = _mlp([latent_dim + a, *hidden, 1])
        self.value = _mlp([latent_dim, *hidden, 1])
        self.target_value = _mlp([latent_dim, *hidden, 1])
        self.target_value.load_state_dict(self.value.state_dict())
        self.target_value.requires_grad_(False)

    def _with_action(self, z: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        one_hot = nn.functional.one_hot(action.long(), self.n_actions).to(z.dtype)
        return torch.cat([z, one_hot], dim=1)

    def step(self, z: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reward (B,), done logit (B,))`` of taking ``(B,)`` actions from ``(B, Z)``."""
        x = self._with_action(z, action)
        return self.reward(x).squeeze(1), self.done(x).squeeze(1)

    @torch.no_grad()
    def td_target(self, z: torch.Tensor, dynamics: nn.Module, gamma: float) -> torch.Tensor:
        """The temporal-difference target of ``V(z)``, a backup over every action through the
        model: ``max_a r(z, a) + gamma (1 - sigmoid(done(z, a))) V_target(f(z, a))`` for
        ``(B, Z)`` latents (``f`` the deterministic latent dynamics) -> ``(B,)``."""
        b, a = z.shape[0], self.n_actions
        rows = z.repeat_interleave(a, dim=0)
        actions = torch.arange(a, device=z.device).repeat(b)
        reward, done = self.step(rows, actions)
        later = self.target_value(dynamics(rows, actions)).squeeze(1)
        backup = reward + gamma * (1.0 - torch.sigmoid(done)) * later
        return backup.view(b, a).max(dim=1).values


class LatentNetwork(nn.Module):
    """Every part of one latent model: ``encoder``, ``dynamics``, and ``decoder`` (``latent_recon``)
    or ``target_encoder`` (``jepa``, ``tdmpc``: the EMA copy of the encoder, never trained by
    gradient), ``heads`` (``tdmpc``: ``TDHeads``); an ``rssm``'s ``dynamics`` is
    ``RSSMDynamics`` and it has a ``posterior`` (TorchRL's ``RSSMPosterior``) and a decoder.

    Args:
        family: one of ``LATENT_FAMILIES``.
        obs_kind: one of ``gridplan.core.render.ALL_OBS_KINDS``.
        obs_shape: one observation's shape.
        state_dim: ``S`` of the world (the decoder's output).
        latent_dim: ``Z >= 1``.
        channels: conv channels of the encoder (grid, pixels).
        hidden: MLP widths of the state encoder, the dynamics and the decoder.
        stochastic: Gaussian latent transition (an ``rssm``'s always is).
        pixels_per_cell: tile side ``P`` of a ``pixels`` observation.
        belief_dim: ``rssm``: the belief's share ``H`` of ``latent_dim`` (the stochastic
            state has the other ``latent_dim - H``); 0 for the other families.
        n_actions: the world's action count ``A`` (4; MiniGrid DoorKey's 7), one-hot coded by
            the dynamics and the heads.

    Raises:
        ValueError: on an unknown family or kind, a non-positive size, a stochastic
            ``jepa`` or ``tdmpc``, a deterministic ``rssm``, or a belief that leaves no
            state dims.
    """

    def __init__(
        self,
        family: str,
        obs_kind: str,
        obs_shape: Sequence[int],
        state_dim: int,
        latent_dim: int = 32,
        channels: Sequence[int] = (16, 32),
        hidden: Sequence[int] = (128, 128),
        stochastic: bool = False,
        pixels_per_cell: int = PIXELS_PER_CELL,
        belief_dim: int = 0,
        n_actions: int = N_ACTIONS,
    ) -> None:
        super().__init__()
        if family not in LATENT_FAMILIES:
            raise ValueError(
                f"unknown latent family {family!r}; valid: {', '.join(LATENT_FAMILIES)}"
            )
        check_kind(obs_kind)
        sizes = [latent_dim, state_dim, n_actions, *channels, *hidden]
        if min(sizes) < 1 or not hidden or (obs_kind != "state" and not channels):
            raise ValueError(
                f"latent sizes must be positive and the widths non-empty, got latent_dim "
                f"{latent_dim}, n_actions {n_actions}, channels {list(channels)}, hidden "
                f"{list(hidden)}"
            )
        if family in TARGET_FAMILIES and stochastic:
            raise ValueError(f"a {family} model predicts a deterministic latent: stochastic=False")
        if (family == "rssm") != (belief_dim > 0) or (family == "rssm" and not stochastic):
            raise ValueError(
                "an rssm has a belief (0 < belief_dim < latent_dim) and a stochastic state "
                f"(stochastic=True); the other families neither: got family {family!r}, "
                f"belief_dim {belief_dim}, stochastic {stochastic}"
            )
        if belief_dim >= latent_dim:
            raise ValueError(
                f"belief_dim {belief_dim} leaves no stochastic state in latent_dim {latent_dim}"
            )
        self.family, self.obs_kind = family, obs_kind
        self.obs_shape, self.state_dim = tuple(int(d) for d in obs_shape), int(state_dim)
        self.latent_dim, self.stochastic = int(latent_dim), bool(stochastic)
        self.channels, self.hidden = [int(c) for c in channels], [int(h) for h in hidden]
        self.pixels_per_cell = int(pixels_per_cell)
        self.belief_dim, self.n_actions = int(belief_dim), int(n_actions)
        #: Standard normals one imagined step draws: the stochastic state's dims.
        self.noise_dim = self.latent_dim - self.belief_dim
        if family == "rssm":
            self._build_rssm(obs_kind)
            return
        args = (
            self.obs_shape,
            obs_kind,
            self.latent_dim,
            self.channels,
            self.hidden,
            self.pixels_per_cell,
        )
        self.encoder = ObservationEncoder(*args)
        self.dynamics = LatentDynamics(
            self.latent_dim, self.hidden, self.stochastic, self.n_actions
        )
        if family == "latent_recon":
            self.decoder = nn.Sequential(
                _mlp([self.latent_dim, *self.hidden, self.state_dim]), nn.Sigmoid()
            )
        else:
            self.target_encoder = ObservationEncoder(*args)
            self.target_encoder.load_state_dict(self.encoder.state_dict())
            self.target_encoder.requires_grad_(False)
        if family == "tdmpc":
            self.heads = TDHeads(self.latent_dim, self.hidden, self.n_actions)

    def _build_rssm(self, obs_kind: str) -> None:
        """An ``rssm``'s parts: the encoder gives an embedding of ``hidden[0]`` dims."""
        from torchrl.modules.models.model_based import RSSMPosterior

        embed = self.hidden[0]
        self.encoder = ObservationEncoder(
            self.obs_shape, obs_kind, embed, self.channels, self.hidden, self.pixels_per_cell
        )
        self.dynamics = RSSMDynamics(self.belief_dim, self.noise_dim, self.n_actions)
        self.posterior = RSSMPosterior(
            hidden_dim=self.hidden[0],
            state_dim=self.noise_dim,
            rnn_hidden_dim=self.belief_dim,
            obs_embed_dim=embed,
        )
        self.decoder = nn.Sequential(
            _mlp([self.latent_dim, *self.hidden, self.state_dim]), nn.Sigmoid()
        )

    def filtered(
        self, belief: torch.Tensor, embedding: torch.Tensor, noise: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """An ``rssm``'s posterior: ``(z = [h, s] (B, H + Zs), mean, std)`` of the state given
        the belief and an observation's embedding; ``s`` is the mean without ``noise``."""
        if noise is None:
            noise = torch.zeros(belief.shape[0], self.noise_dim, device=belief.device)
        mean, std, state = self.posterior(belief, embedding, noise=noise)
        return torch.cat([belief, state], dim=1), mean, std

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """The latent a trained model reads: the encoder's, or for a ``jepa`` or ``tdmpc`` the
        target encoder's (the space its predictor is trained to predict into, so that imagined
        latents fed back stay in one space; I-JEPA evaluates its target encoder too)."""
        if self.family in TARGET_FAMILIES:
            return self.target_encoder(obs)
        if self.family == "rssm":
            embedding = self.encoder(obs)
            belief = embedding.new_zeros(embedding.shape[0], self.belief_dim)
            return self.filtered(belief, embedding, None)[0]
        return self.encoder(obs)

    def architecture(self) -> dict[str, Any]:
        """The constructor's arguments (stored in checkpoints)."""
        return {
            "family": self.family,
            "obs_kind": self.obs_kind,
            "obs_shape": list(self.obs_shape),
            "state_dim": self.state_dim,
            "latent_dim": self.latent_dim,
            "channels": list(self.channels),
            "hidden": list(self.hidden),
            "stochastic": self.stochastic,
            "pixels_per_cell": self.pixels_per_cell,
            "belief_dim": self.belief_dim,
            "n_actions": self.n_actions,
        }


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, decay: float) -> None:
    """``target <- decay * target + (1 - decay) * online``, parameter by parameter (the
    target encoder of a JEPA, BYOL-style).

    Raises:
        ValueError: if ``decay`` is outside ``[0, 1]``.
    """
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"EMA decay must lie in [0, 1], got {decay}")
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.mul_(decay).add_(o.detach(), alpha=1.0 - decay)


def variance_loss(z: torch.Tensor, gamma: float = 1.0, eps: float = 1e-4) -> torch.Tensor:
    """VICReg variance term: ``mean_j relu(gamma - sqrt(Var_j(z) + eps))`` over the ``Z``
    dims of a ``(B, Z)`` batch (unbiased variance); 0 once every dim's standard deviation
    reaches ``gamma``, ``gamma - sqrt(eps)`` for a collapsed batch.

    Raises:
        ValueError: if ``z`` is not ``(B, Z)`` with ``B >= 2``.
    """
    if z.dim() != 2 or z.shape[0] < 2:
        raise ValueError(f"z must be (B, Z) with B >= 2, got {tuple(z.shape)}")
    std = torch.sqrt(z.var(dim=0) + eps)
    return torch.relu(gamma - std).mean()


def covariance_loss(z: torch.Tensor) -> torch.Tensor:
    """VICReg covariance term: the squared off-diagonal entries of the ``(Z, Z)`` covariance
    of a ``(B, Z)`` batch, summed and divided by ``Z`` (0 for decorrelated dims).

    Raises:
        ValueError: if ``z`` is not ``(B, Z)`` with ``B >= 2``.
    """
    if z.dim() != 2 or z.shape[0] < 2:
        raise ValueError(f"z must be (B, Z) with B >= 2, got {tuple(z.shape)}")
    centred = z - z.mean(dim=0)
    cov = centred.T @ centred / (z.shape[0] - 1)
    off = cov - torch.diag(torch.diagonal(cov))
    return off.square().sum() / z.shape[1]


def _check_finite(x: torch.Tensor, name: str) -> None:
    if x.numel() and not torch.isfinite(x).all():
        bad = (~torch.isfinite(x.reshape(x.shape[0], -1))).any(dim=1).nonzero().flatten()
        raise ValueError(f"{name} holds non-finite values (NaN or inf) in rows {bad[:5].tolist()}")


class LearnedLatentModel(Declared):
    """A trained latent model behind the latent contract (module docstring); no decoder.

    Attributes:
        net: the ``LatentNetwork`` (eval mode).
        obs_kind: ``state``, ``grid``, ``pixels``, ``egocentric`` or ``full``.
        pixels_per_cell: tile side of the pixel observation it was trained on.
        obs_shape: one observation's shape.
        latent_dim: ``Z``.
        world: the world of its observations.
        family: one of ``LATENT_FAMILIES``.
        deterministic: ``predict_latent`` ignores the generator.
        metadata: the checkpoint's ``"gridplan"`` entry (config, dataset, epoch, path).
    """

    def __init__(
        self,
        net: LatentNetwork,
        metadata: dict,
        world: World,
        pixels_per_cell: int = PIXELS_PER_CELL,
    ) -> None:
        self.net = net.eval()
        self.metadata = metadata
        self.world = world
        self.family = net.family
        self.obs_kind = net.obs_kind
        self.pixels_per_cell = int(pixels_per_cell)
        self.obs_shape = tuple(obs_shape(world, net.obs_kind, self.pixels_per_cell))
        if self.obs_shape != net.obs_shape or net.n_actions != world.n_actions:
            raise ValueError(
                f"the network reads observations {net.obs_shape} and {net.n_actions} actions, "
                f"its world {world.name!r} draws {self.obs_shape} ({net.obs_kind}) and has "
                f"{world.n_actions} actions"
            )
        self.latent_dim = net.latent_dim
        self.deterministic = not net.stochastic

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    def to(self, device: torch.device | str):
        """Move the network; returns ``self``."""
        self.net.to(device)
        return self

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The observation this model reads of ``(B, S)`` states
        (``gridplan.core.render.observe`` with its kind and tile size)."""
        return observe(state, self.world, self.obs_kind, self.pixels_per_cell)

    def _check_obs(self, obs: torch.Tensor) -> None:
        if not isinstance(obs, torch.Tensor):
            raise ValueError(f"obs must be a torch.Tensor, got {type(obs).__name__}")
        if obs.dim() != 1 + len(self.obs_shape) or tuple(obs.shape[1:]) != self.obs_shape:
            raise ValueError(
                f"obs must have shape (B, {', '.join(map(str, self.obs_shape))}) "
                f"({self.obs_kind} of world {self.world.name!r}), got {tuple(obs.shape)}"
            )
        want = torch.uint8 if self.obs_kind == "pixels" else torch.float32
        if obs.dtype != want:
            raise ValueError(f"obs ({self.obs_kind}) must have dtype {want}, got {obs.dtype}")
        if want == torch.float32:
            _check_finite(obs, "obs")

    def _check_latent(self, z: torch.Tensor, name: str = "z") -> None:
        if not isinstance(z, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(z).__name__}")
        if z.dim() != 2 or z.shape[1] != self.latent_dim or not z.is_floating_point():
            raise ValueError(
                f"{name} must be a floating (B, {self.latent_dim}) tensor, got {z.dtype} "
                f"{tuple(z.shape)}"
            )
        _check_finite(z, name)

    def _check_action(self, action, rows: int) -> None:
        a = self.net.n_actions
        if (
            not isinstance(action, torch.Tensor)
            or action.shape != (rows,)
            or action.is_floating_point()
            or (action.numel() and (action.min() < 0 or action.max() >= a))
        ):
            got = tuple(action.shape) if isinstance(action, torch.Tensor) else action
            raise ValueError(f"action must be a ({rows},) integer tensor in 0..{a - 1}, got {got}")

    @torch.no_grad()
    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, *obs_shape)`` observations (``observe``; uint8 pixels, float32 otherwise)
        -> ``(B, Z)`` float32 latents (``LatentNetwork.encode``: a JEPA's target encoder).

        Raises:
            ValueError: on a wrong shape, dtype or a non-finite observation.
        """
        self._check_obs(obs)
        return self.net.encode(obs.to(self.device)).float()

    @torch.no_grad()
    def predict_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """One imagined latent step: ``(B, Z)`` float, ``(B,)`` long actions in ``0..3``, the
        only randomness (a stochastic model's Gaussian sample) from ``generator``
        -> ``(B, Z)`` float32.

        Raises:
            ValueError: on a malformed or non-finite latent, or bad actions.
        """
        self._check_latent(z)
        self._check_action(action, z.shape[0])
        z = z.to(self.device, torch.float32)
        noise = None
        if not self.deterministic:
            shape = (z.shape[0], self.net.noise_dim)
            noise = torch.randn(
                shape, generator=generator, device=generator.device, dtype=z.dtype
            ).to(self.device)
        return self.net.dynamics(z, action.to(self.device), noise).float()


class DecodingLatentModel(LearnedLatentModel):
    """A ``latent_recon`` or ``rssm`` model: ``LearnedLatentModel`` plus its trained
    ``decode``."""

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, Z)`` latents -> ``(B, S)`` float32 normalized states in ``[0, 1]``.

        Raises:
            ValueError: on a malformed or non-finite latent.
        """
        self._check_latent(z)
        return self.net.decoder(z.to(self.device, torch.float32)).float()


class RSSMLatentModel(DecodingLatentModel):
    """An ``rssm``: ``DecodingLatentModel`` plus the filter of an actual next observation."""

    @torch.no_grad()
    def filter_latent(
        self, z: torch.Tensor, action: torch.Tensor, obs: torch.Tensor
    ) -> torch.Tensor:
        """The posterior latent ``[h', s']`` of ``(B, *obs_shape)`` observations reached from
        ``(B, Z)`` latents by ``(B,)`` actions: the belief advanced by the prior's GRU (no
        draw: the belief is deterministic), the state the posterior's mean -> ``(B, Z)``.

        Raises:
            ValueError: on a malformed latent, actions or observations.
        """
        self._check_latent(z)
        self._check_action(action, z.shape[0])
        self._check_obs(obs)
        net = self.net
        z = z.to(self.device, torch.float32)
        still = torch.zeros(z.shape[0], net.noise_dim, device=self.device)
        belief = net.dynamics.step(z, action.to(self.device), still)[0][:, : net.belief_dim]
        return net.filtered(belief, net.encoder(obs.to(self.device)), None)[0].float()


class HeadsLatentModel(LearnedLatentModel):
    """A ``tdmpc`` model: ``LearnedLatentModel`` plus its reward and value heads (no decoder:
    the evaluation plans and measures it through the frozen protocol decoder)."""

    @torch.no_grad()
    def reward(self, z: torch.Tensor, action: torch.Tensor, z_next: torch.Tensor) -> torch.Tensor:
        """The predicted reward of the steps ``(B, Z)`` latents, ``(B,)`` long actions in
        ``0..3`` -> ``(B,)`` float32 (``z_next`` is not read: the head reads ``(z, a)``).

        Raises:
            ValueError: on a malformed or non-finite latent.
        """
        self._check_latent(z)
        self._check_latent(z_next, "z_next")
        self._check_action(action, z.shape[0])
        z = z.to(self.device, torch.float32)
        return self.net.heads.step(z, action.to(self.device))[0].float()

    @torch.no_grad()
    def value(self, z: torch.Tensor) -> torch.Tensor:
        """The value head: ``(B, Z)`` latents -> ``(B,)`` float32 estimates of ``V*``.

        Raises:
            ValueError: on a malformed or non-finite latent.
        """
        self._check_latent(z)
        return self.net.heads.value(z.to(self.device, torch.float32)).squeeze(1).float()


#: The class that wraps each family's trained network.
MODEL_CLASSES = {
    "latent_recon": DecodingLatentModel,
    "jepa": LearnedLatentModel,
    "tdmpc": HeadsLatentModel,
    "rssm": RSSMLatentModel,
}


def load_latent_model(path: str | os.PathLike, device: torch.device | str = "cpu"):
    """Rebuild a latent model from a checkpoint of ``python -m train
    model=latent_recon|jepa|tdmpc|rssm``.

    Args:
        path: a ``.ckpt`` file (best or last) of a latent training run.
        device: where the network lives.

    Returns:
        ``DecodingLatentModel`` (``latent_recon``), ``RSSMLatentModel`` (``rssm``),
        ``LearnedLatentModel`` (``jepa``) or ``HeadsLatentModel`` (``tdmpc``), in eval mode,
        its ``metadata`` the checkpoint's ``"gridplan"`` entry plus ``path``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is not a readable Lightning checkpoint, is not a gridplan
            latent model (a state world model is named as such), was written for another
            state layout version, or its world, observation kind, architecture or weights are
            missing or do not fit.
    """
    path = os.fspath(path)
    ckpt = _read_checkpoint(path)
    meta = ckpt.get(CHECKPOINT_KEY)
    if not isinstance(meta, dict):
        raise ValueError(
            f"{path!r} is a Lightning checkpoint but not a gridplan model "
            f"(no {CHECKPOINT_KEY!r} entry)"
        )
    if meta.get("kind") != LATENT_KIND:
        raise ValueError(
            f"{path!r} is not a latent world model (kind {meta.get('kind', 'state')!r}); "
            "load a state world model with gridplan.models.learned.load_world_model"
        )
    missing = [k for k in ("state_layout_version", "world", "obs", "model") if k not in meta]
    if missing:
        raise ValueError(f"{path!r}: the latent checkpoint lacks {', '.join(missing)}")
    if meta["state_layout_version"] != STATE_LAYOUT_VERSION:
        raise ValueError(
            f"{path!r} was written for state layout version {meta['state_layout_version']!r}; "
            f"this gridplan uses version {STATE_LAYOUT_VERSION} (retrain the model)"
        )
    world = recorded(meta, repr(path))
    obs = meta["obs"]
    if not isinstance(obs, dict) or obs.get("kind") not in ALL_OBS_KINDS:
        raise ValueError(
            f"{path!r} stores an invalid observation {obs!r}; kinds: {ALL_OBS_KINDS}"
        )
    try:
        net = LatentNetwork(**meta["model"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path!r} stores an invalid architecture {meta['model']}: {err}") from err
    if net.state_dim != world.state_dim or net.obs_kind != obs["kind"]:
        raise ValueError(
            f"{path!r}: the network ({net.obs_kind}, {net.state_dim} state dims) does not fit "
            f"its world {world.name!r} ({world.state_dim} dims) and observation {obs['kind']!r}"
        )
    load_weights(net, ckpt, path, meta["model"])
    model = MODEL_CLASSES[net.family](
        net, {**meta, "path": path}, world, int(obs.get("pixels_per_cell", PIXELS_PER_CELL))
    )
    return model.to(device)
