"""Learned MLP world models and their self-describing checkpoints (paper §5.4, Table 3).

The network maps ``(state (N, S), one-hot action (N, 4))`` to the change of the state and
adds it back (delta prediction), so an MLP only has to learn what moves. It holds ``K``
ensemble members side by side as one batched stack of linear layers: every tensor inside
carries a leading members dimension ``(K, N, ...)``. ``K = 1`` is the plain MLP; ``K > 1``
is the seam for uncertainty estimates (disagreement between members), which planning ignores
by reading the members' mean.

``LearnedWorldModel`` wraps a trained network as a ``gridplan.models.noise.WorldModel``: a
deterministic one-step ``predict`` with outputs clamped to ``[0, 1]``, usable by the planner
and every metric unchanged. ``load_world_model`` rebuilds one from a Lightning checkpoint
written by ``gridplan.training.module``; everything it needs (architecture, resolved training
config, state layout version, world, dataset fingerprint and event counts) is stored inside the
file under the ``"gridplan"`` key.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from gridplan.core.constants import N_ACTIONS, STATE_LAYOUT_VERSION
from gridplan.core.world import DEFAULT, World, recorded
from gridplan.models.capabilities import Declared
from gridplan.models.contract import WorldModel

#: Planning modes of an ensemble (``EnsembleWorldModel``).
SAMPLING = ("mean", "ts")
#: Key of the gridplan metadata inside a Lightning checkpoint.
CHECKPOINT_KEY = "gridplan"
#: Prefix of the network's parameters in the LightningModule's state dict.
STATE_DICT_PREFIX = "net."
ACTIVATIONS = {"relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh, "gelu": nn.GELU}
#: Largest working memory of one gradient-free forward pass kept for reuse by the network
#: (larger calls allocate afresh and keep nothing): 64 MiB, ~14,000 rows of the
#: 16-256-256-12 MLP, well above the planner's cache-sized calls (``gridplan.planning.scorers``).
WORKSPACE_BYTES = 64 * 2**20
#: Fewest rows for which the output layer runs transposed (``MLPDynamics._infer``): below it
#: MKL picks small-matrix kernels that sum in another order (2-11 rows differ in the last bit).
TRANSPOSED_MIN_ROWS = 64


class EnsembleLinear(nn.Module):
    """``K`` independent linear layers applied as one batched matmul.

    Args:
        members: ``K >= 1``.
        in_features: input width.
        out_features: output width.

    Each member is initialised like ``nn.Linear`` (uniform in ``±1/sqrt(in_features)``).
    """

    def __init__(self, members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(members, 1, out_features))
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(K, N, in) -> (K, N, out)``."""
        return torch.baddbmm(self.bias, x, self.weight)


class MLPDynamics(nn.Module):
    """Ensemble of MLPs ``(state, one-hot action) -> next state`` (unclamped).

    Args:
        hidden: widths of the hidden layers, e.g. ``(256, 256)``.
        members: ensemble size ``K >= 1``.
        activation: one of ``ACTIVATIONS``.
        predict_delta: output ``state + f(state, action)`` instead of ``f(state, action)``.
        state_dim: the world's state width ``S`` (input ``S + A``, output ``S``).
        n_actions: the world's action count ``A`` (4; MiniGrid DoorKey's 7), one-hot coded.

    Raises:
        ValueError: on an empty or non-positive ``hidden``, ``members < 1``, ``state_dim < 1``
            or an unknown activation.
    """

    def __init__(
        self,
        hidden: Sequence[int] = (256, 256),
        members: int = 1,
        activation: str = "silu",
        predict_delta: bool = True,
        state_dim: int = DEFAULT.state_dim,
        n_actions: int = N_ACTIONS,
    ) -> None:
        super().__init__()
        if int(state_dim) < 1:
            raise ValueError(f"state_dim must be >= 1, got {state_dim}")
        if int(n_actions) < 1:
            raise ValueError(f"n_actions must be >= 1, got {n_actions}")
        self.state_dim = int(state_dim)
        self.n_actions = a = int(n_actions)
        hidden = [int(h) for h in hidden]
        if not hidden or min(hidden) < 1:
            raise ValueError(f"hidden must be a non-empty list of positive widths, got {hidden}")
        if int(members) < 1:
            raise ValueError(f"members must be >= 1, got {members}")
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; valid: {', '.join(sorted(ACTIVATIONS))}"
            )
        self.hidden = hidden
        self.members = int(members)
        self.activation = activation
        self.predict_delta = bool(predict_delta)
        widths = [self.state_dim + a, *hidden]
        layers: list[nn.Module] = []
        for w_in, w_out in zip(widths[:-1], widths[1:], strict=True):
            layers += [EnsembleLinear(self.members, w_in, w_out), ACTIVATIONS[activation]()]
        layers.append(EnsembleLinear(self.members, widths[-1], self.state_dim))
        self.layers = nn.Sequential(*layers)
        self._flat: list[torch.Tensor] = []
        # Row a: the input encoding of action a before the state is added (-1 in the state's
        # columns, a's one-hot); `_infer` gathers it. Not persistent: checkpoints are unchanged.
        codes = torch.cat([torch.full((a, self.state_dim), -1.0), torch.eye(a)], 1)
        self.register_buffer("_codes", codes, persistent=False)

    def architecture(self) -> dict[str, Any]:
        """Constructor arguments, as stored in checkpoints."""
        return {
            "hidden": list(self.hidden),
            "members": self.members,
            "activation": self.activation,
            "predict_delta": self.predict_delta,
            "state_dim": self.state_dim,
            "n_actions": self.n_actions,
        }

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Raw per-member predictions.

        With gradients disabled (planning, evaluation) the same operations run into buffers
        the network owns and reuses across calls (``_infer``): bit-identical results without
        fresh activations per call.

        Args:
            state: ``(N, 12)`` float, normalized ``[0, 1]``, shared by every member; or
                ``(K', N, 12)``, one batch per member (the vectorized trainer of
                ``gridplan.training.vectorized``, where ``K'`` is the number of stacked weights the
                layers hold at call time).
            action: ``(N,)`` or ``(K', N)`` long in ``0..3``, matching ``state``.

        Returns:
            ``(K, N, 12)`` (or ``(K', N, 12)``) predicted next states, not clamped (the training
            loss needs the gradient outside ``[0, 1]`` too).
        """
        if not torch.is_grad_enabled():
            return self._infer(state, action)
        if state.dim() == 2:
            state = state.unsqueeze(0).expand(self.members, -1, -1)
            action = action.unsqueeze(0).expand(self.members, -1)
        one_hot = nn.functional.one_hot(action.long(), self.n_actions).to(state.dtype)
        # Centred inputs: the MLP sees coordinates and flags in [-1, 1].
        x = torch.cat([2.0 * state - 1.0, one_hot], dim=-1)
        out = self.layers(x)
        return state + out if self.predict_delta else out

    def _workspace(self, shapes: list[tuple[int, ...]], like: torch.Tensor) -> list[torch.Tensor]:
        """Contiguous buffers of ``shapes`` on ``like``'s device and dtype, carved from flat
        storage the network keeps while one call needs at most ``WORKSPACE_BYTES`` (one
        forward pass at a time: the buffers are shared by every call). Buffers made under
        ``torch.inference_mode`` (Lightning's validation) are replaced outside it, where
        in-place writes to them are not allowed."""
        sizes = [math.prod(shape) for shape in shapes]
        if sum(sizes) * like.element_size() > WORKSPACE_BYTES:
            return [like.new_empty(shape) for shape in shapes]
        flat = self._flat
        if (
            len(flat) != len(sizes)
            or flat[0].device != like.device
            or flat[0].dtype != like.dtype
            or (flat[0].is_inference() and not torch.is_inference_mode_enabled())
            or any(f.numel() < n for f, n in zip(flat, sizes, strict=True))
        ):
            flat = [like.new_empty(n) for n in sizes]
            self._flat = flat
        return [f[:n].view(shape) for f, n, shape in zip(flat, sizes, shapes, strict=True)]

    def _infer(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``forward`` without autograd, bit-identical: the input encoding written in place,
        each hidden layer's ``baddbmm`` into an owned buffer and its activation applied in
        place. The output layer runs transposed, ``out^T = W^T h^T + b^T``: the same sums in
        the same order, and MKL's sgemm runs a 12-row output faster than a 12-column one
        (docs/PERFORMANCE.md §7)."""
        batch = state.shape[:-1]
        *hidden, last = [layer for layer in self.layers if isinstance(layer, EnsembleLinear)]
        stacks, n = last.weight.shape[0], batch[-1]
        rows = (1, *batch) if state.dim() == 2 else batch
        s, a = self.state_dim, self.n_actions
        shapes = [(*rows, s + a)]
        shapes += [(stacks, n, layer.weight.shape[2]) for layer in hidden]
        transposed = n >= TRANSPOSED_MIN_ROWS
        width = last.weight.shape[2]
        shapes.append((stacks, width, n) if transposed else (stacks, n, width))
        x, *outs = self._workspace(shapes, state)
        # One gather of each row's constant part, then 2 s added to its -1: 2 s is exact, so
        # -1 + 2 s rounds once like 2 s - 1 (2.7x faster than writing the centred state and the
        # one-hot column by column).
        codes = self._codes
        if codes.device != state.device or codes.dtype != state.dtype:
            codes = self._codes = codes.to(state)
        torch.index_select(codes, 0, action.reshape(-1).long(), out=x.view(-1, s + a))
        x[..., :s].view(*batch, s).add_(state, alpha=2.0)
        h = x.expand(stacks, -1, -1)
        buffers = iter(outs)
        for layer in self.layers:
            if layer is last and transposed:
                h = torch.baddbmm(
                    layer.bias.transpose(1, 2),
                    layer.weight.transpose(1, 2),
                    h.transpose(1, 2),
                    out=next(buffers),
                ).transpose(1, 2)
            elif isinstance(layer, EnsembleLinear):
                h = torch.baddbmm(layer.bias, h, layer.weight, out=next(buffers))
            else:
                h = _activate_(layer, h)
        if not self.predict_delta:
            return h.contiguous()
        out = state.new_empty(stacks, n, s)
        return torch.add(state, h, out=out)


def _activate_(layer: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """``layer(h)`` written into ``h`` where the activation has an in-place form."""
    if isinstance(layer, nn.SiLU):
        return nn.functional.silu(h, inplace=True)
    if isinstance(layer, nn.ReLU):
        return h.relu_()
    if isinstance(layer, nn.Tanh):
        return h.tanh_()
    return layer(h)


class LearnedWorldModel(Declared, WorldModel):
    """A trained ``MLPDynamics`` behind the ``WorldModel`` interface (paper §5.4).

    ``predict`` is deterministic: the mean of the members' predictions, clamped to ``[0, 1]``.
    It runs the network on the network's device and returns the result on the input's
    device, so the planner and metrics can stay on CPU while the network sits on a GPU.

    Args:
        net: the network (moved to eval mode; gradients are never taken here).
        metadata: the checkpoint's ``"gridplan"`` entry (config, dataset fingerprint, ...),
            or an empty dict for an untrained network.
        world: the world the network predicts.

    Raises:
        ValueError: if the network's width is not the world's.
    """

    n_settings = 1
    #: ``predict`` is a pure function of its input (``gridplan.planning.scorers``): the planner
    #: shares tree prefixes and splits calls freely, with bit-identical leaf scores.
    deterministic = True

    def __init__(
        self, net: MLPDynamics, metadata: dict | None = None, world: World = DEFAULT
    ) -> None:
        if (net.state_dim, net.n_actions) != (world.state_dim, world.n_actions):
            raise ValueError(
                f"the network predicts {net.state_dim} dims from {net.n_actions} actions, world "
                f"{world.name!r} has {world.state_dim} dims and {world.n_actions} actions"
            )
        self.net = net.eval()
        self.metadata = dict(metadata or {})
        self.world = world

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    @property
    def members(self) -> int:
        return self.net.members

    @property
    def bytes_per_row(self) -> int:
        """Working memory of one ``predict`` row, in bytes (``gridplan.planning.scorers``): the
        network's reused buffers (``MLPDynamics._infer``: the float32 input encoding, each
        member's float32 activations of every layer) and each member's delta-added output;
        several members add the mean over them."""
        s = self.net.state_dim
        per_member = 4 * (sum(self.net.hidden) + 2 * s)
        mean = 4 * s if self.members > 1 else 0
        return self.members * per_member + 4 * (s + self.net.n_actions) + mean

    def to(self, device: torch.device | str) -> LearnedWorldModel:
        """Move the network to ``device``; returns ``self``."""
        self.net.to(device)
        return self

    def _check(self, state: torch.Tensor, action: torch.Tensor) -> None:
        s = self.net.state_dim
        if state.dim() != 2 or state.shape[1] != s:
            raise ValueError(
                f"state must have shape (N, {s}) (world {self.world.name!r}), got "
                f"{tuple(state.shape)}"
            )
        if action.shape != (state.shape[0],):
            raise ValueError(
                f"action must have shape ({state.shape[0]},), got {tuple(action.shape)}"
            )

    @torch.no_grad()
    def predict_members(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Every member's prediction: ``(K, N, S)`` clamped to ``[0, 1]``, on ``state``'s
        device. The spread across ``K`` is the (future) uncertainty signal.

        Raises:
            ValueError: if ``state`` is not ``(N, S)`` or ``action`` not ``(N,)``.
        """
        self._check(state, action)
        device = self.device
        out = self.net(state.to(device, torch.float32), action.to(device))
        return out.clamp_(0.0, 1.0).to(state.device, state.dtype)

    @torch.no_grad()
    def predict(
        self,
        state: torch.Tensor,
        action: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """One deterministic imagined step: the members' mean, clamped to ``[0, 1]``.

        Args:
            state: ``(N, 12)`` float, normalized ``[0, 1]`` (possibly a previous prediction).
            action: ``(N,)`` long in ``0..3``.
            generator: unused (the model is deterministic); accepted for the interface.

        Returns:
            ``(N, 12)`` on ``state``'s device.

        Raises:
            ValueError: if ``state`` is not ``(N, 12)`` or ``action`` not ``(N,)``.
        """
        self._check(state, action)
        device = self.device
        out = self.net(state.to(device, torch.float32), action.to(device))
        # The mean of one member is that member, exactly: no reduction pass for K = 1.
        out = out[0] if out.shape[0] == 1 else out.mean(dim=0)
        return out.clamp_(0.0, 1.0).to(state.device, state.dtype)


class EnsembleWorldModel(LearnedWorldModel):
    """A ``K``-member ``MLPDynamics`` as a world model that plans with the members' mean or
    with trajectory sampling (``gridplan.models.ensemble``'s module docstring).

    Args:
        net: the stacked network (``net.members = K``).
        metadata: the checkpoint's ``"gridplan"`` entry, or None.
        sampling: ``"mean"`` or ``"ts"``.
        world: the world the network predicts.

    Raises:
        ValueError: on an unknown ``sampling`` or a network of another width than the world.
    """

    #: Not declared deterministic, unlike a single network: trajectory sampling draws a member
    #: per rollout in ``start_rollout``, which the shared-prefix tree cannot honour, so both
    #: modes take the independent-leaf search.
    deterministic = False

    def __init__(
        self,
        net: MLPDynamics,
        metadata: dict | None = None,
        sampling: str = "mean",
        world: World = DEFAULT,
    ):
        if sampling not in SAMPLING:
            raise ValueError(f"unknown sampling {sampling!r}; valid: {', '.join(SAMPLING)}")
        super().__init__(net, metadata, world)
        self.sampling = sampling
        self._assignment: torch.Tensor | None = None

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        """With ``"ts"``, draw the member of each of the ``batch`` imagined rollouts
        (uniform over ``K``, from ``generator``); ``"mean"`` draws nothing."""
        if self.sampling == "ts":
            self._assignment = torch.randint(
                0, self.members, (batch,), generator=generator, device=generator.device
            )

    def member_predictions(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Every member's prediction, ``(K, N, 12)`` clamped to ``[0, 1]`` on ``state``'s
        device (``predict_members``).

        Raises:
            ValueError: if ``state`` is not ``(N, 12)`` or ``action`` not ``(N,)``.
        """
        return self.predict_members(state, action)

    def uncertainty(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Disagreement of the members about the next state, ``(N,)``: the across-member
        variance of ``member_predictions`` (population variance, over ``K``), averaged over
        the 12 dimensions; 0 where all members agree.

        Raises:
            ValueError: if ``state`` is not ``(N, 12)`` or ``action`` not ``(N,)``.
        """
        return self.member_predictions(state, action).var(dim=0, unbiased=False).mean(dim=-1)

    @torch.no_grad()
    def predict(
        self,
        state: torch.Tensor,
        action: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """One imagined step: the members' mean, or each rollout's drawn member (``"ts"``).

        Raises:
            ValueError: on misshapen inputs, or with ``"ts"`` if ``start_rollout`` was not
                called for a batch of ``N`` rollouts.
        """
        if self.sampling == "mean":
            return super().predict(state, action, generator)
        n = state.shape[0]
        if self._assignment is None or self._assignment.shape[0] != n:
            got = None if self._assignment is None else self._assignment.shape[0]
            raise ValueError(
                f"trajectory sampling needs start_rollout({n}, generator) before predicting "
                f"{n} rows (members drawn for {got})"
            )
        members = self.member_predictions(state, action)
        index = self._assignment.to(members.device).view(1, n, 1).expand(1, n, state.shape[1])
        return members.gather(0, index)[0]


def _torch_error(err: Exception) -> str:
    """The useful part of a ``torch.load`` failure. A weights-only refusal comes with torch's
    advice to retry with ``weights_only=False``, which would run the file's pickled code:
    that advice is dropped and only the unpickler's own reason is kept."""
    text = str(err)
    if isinstance(err, pickle.UnpicklingError) and "weights_only" in text:
        found = re.search(
            r"WeightsUnpickler error:\s*(.*?)\s*(Check the documentation|$)", text, re.S
        )
        detail = " ".join(found.group(1).split()) if found and found.group(1).strip() else ""
        return "the weights-only loader refused it" + (f" ({detail})" if detail else "")
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def _read_checkpoint(path: str) -> dict:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint {path!r} does not exist")
    try:
        # weights_only: a checkpoint is data; never execute pickled code from a file.
        with warnings.catch_warnings():
            # A plain pickle of another protocol: the refusal below says enough.
            warnings.filterwarnings(
                "ignore", message="Detected pickle protocol", category=UserWarning
            )
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types (UnpicklingError, RuntimeError, EOF)
        raise ValueError(
            f"{path!r} is not a readable checkpoint (corrupt or not a torch file): "
            f"{_torch_error(err)}"
        ) from err
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise ValueError(f"{path!r} is a torch file but not a Lightning checkpoint")
    return ckpt


def load_weights(net: nn.Module, ckpt: dict, path: str, architecture: dict) -> None:
    """Load the ``net.``-prefixed weights of Lightning checkpoint ``ckpt`` into ``net``.

    Raises:
        ValueError: naming ``path``, the stored ``architecture`` and every missing, unexpected
            or mis-shaped parameter, if the weights do not fit ``net``.
    """
    weights = {
        k[len(STATE_DICT_PREFIX) :]: v
        for k, v in ckpt["state_dict"].items()
        if k.startswith(STATE_DICT_PREFIX)
    }
    problems = _weight_mismatches(net, weights)
    if problems:
        raise ValueError(
            f"{path!r}: weights do not fit the stored architecture {architecture}: "
            + "; ".join(problems)
        )
    net.load_state_dict(weights)


def _weight_mismatches(net: nn.Module, weights: dict[str, torch.Tensor]) -> list[str]:
    """Every way ``weights`` fails to fit ``net``: missing or unexpected parameters and each
    shape mismatch with both shapes."""
    expected = net.state_dict()
    problems = [
        f"{name}: checkpoint {tuple(weights[name].shape)}, architecture {tuple(t.shape)}"
        for name, t in expected.items()
        if name in weights and weights[name].shape != t.shape
    ]
    missing = [name for name in expected if name not in weights]
    unexpected = [name for name in weights if name not in expected]
    if missing:
        problems.append(f"missing from the checkpoint: {', '.join(missing)}")
    if unexpected:
        problems.append(f"not in the architecture: {', '.join(unexpected)}")
    return problems


def load_world_model(path: str | os.PathLike, device: torch.device | str = "cpu"):
    """Rebuild a ``LearnedWorldModel`` from a checkpoint written by ``python -m train``.

    Nothing besides the file is needed: it stores the architecture, the resolved training
    config, the state layout version, the world and the training data's fingerprint and event
    counts (available afterwards as ``model.metadata``; the world as ``model.world``). A
    checkpoint without a world entry predates worlds and holds the default world.

    Args:
        path: a ``.ckpt`` file (best or last) of a training run.
        device: where the network lives.

    Returns:
        LearnedWorldModel in eval mode; for a checkpoint of ``K > 1`` members an
        ``EnsembleWorldModel`` (sampling as the run's ``model.sampling``).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is corrupt or not a torch file, is not a gridplan world-model
            checkpoint, was written for another state layout version, stores a malformed world,
            or its weights do not fit the stored architecture.
    """
    path = os.fspath(path)
    ckpt = _read_checkpoint(path)
    meta = ckpt.get(CHECKPOINT_KEY)
    if not isinstance(meta, dict) or "model" not in meta:
        raise ValueError(
            f"{path!r} is a Lightning checkpoint but not a gridplan world model "
            f"(no {CHECKPOINT_KEY!r} entry with the architecture)"
        )
    if meta.get("kind") == "latent":
        raise ValueError(
            f"{path!r} is a latent world model ({meta.get('family')}, observing "
            f"{meta.get('obs', {}).get('kind')}), not a state model: load it with "
            "gridplan.models.latent.load_latent_model"
        )
    version = meta.get("state_layout_version")
    if version != STATE_LAYOUT_VERSION:
        raise ValueError(
            f"{path!r} was written for state layout version {version!r}; this gridplan uses "
            f"version {STATE_LAYOUT_VERSION} (retrain the model)"
        )
    try:
        world = recorded(meta, "checkpoint")
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path!r} stores an invalid world {meta['world']!r}: {err}") from err
    try:
        net = MLPDynamics(**meta["model"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path!r} stores an invalid architecture {meta['model']}: {err}") from err
    if net.state_dim != world.state_dim:
        raise ValueError(
            f"{path!r}: the network predicts {net.state_dim} dims, its world "
            f"{world.name!r} has {world.state_dim}"
        )
    load_weights(net, ckpt, path, meta["model"])
    meta = {**meta, "path": path}
    if net.members > 1:
        # An ensemble plans as its run was configured (members' mean or trajectory sampling)
        # and exposes member predictions and its disagreement (gridplan.models.ensemble).
        sampling = meta.get("config", {}).get("model", {}).get("sampling", "mean")
        return EnsembleWorldModel(net, meta, sampling, world).to(device)
    return LearnedWorldModel(net, meta, world).to(device)
