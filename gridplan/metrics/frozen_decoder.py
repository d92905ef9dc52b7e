"""The frozen-decoder protocol for latent world models (seed 004 §3-4; ``docs/DESIGN.md``,
"Latent world models").

A latent model predicts an opaque ``z``; to read its predictions in the state's units, fit
one decoder on encodings of actual observations only, freeze it, and decode both the actual
next latent ``z' = E(o')`` and the predicted one ``z_hat' = P(E(o), a)`` of the same test
transition:

    d(s_hat, s) = (1/S) sum_j (s_hat_j - s_j)^2 / sigma_j^2
    E_repr = d(D(z'), s'),  E_pred = d(D(z_hat'), s'),  E_excess = E_pred - E_repr

``sigma_j^2`` is the variance of state dim ``j`` over the decoder's fit states
(``StateNormalization``; a dim with zero variance is an error, not a silent 0/0). E_repr is how
readable the encoder is, E_excess what the predictor adds; E_excess is never clipped (it may be
negative) and is exactly 0 when ``z_hat' == z'``, whatever the decoder. Every mean is taken
within each episode first, then over episodes with equal weight (seed 004 "Aggregation").

Decoder (``fit_frozen_decoder``): a two-layer ReLU MLP ``Z -> hidden -> S`` fitted by Adam on
the normalized squared error of pairs ``(E(o), s)`` and ``(E(o'), s')`` of the fit episodes;
the epoch with the lowest loss on disjoint validation episodes is kept (patience stops the
fit), then its parameters are frozen and hashed (``FrozenDecoder.digest``). It is a plain,
explicitly seeded loop rather than a Lightning run: it is a measuring instrument inside a
metric (this layer sits below ``gridplan.training`` in the import layers), one small
full-data MLP whose fit takes a fraction of a second, fitted once per model in E9, where a
Trainer's start-up, logging and checkpoint folders would cost more than the fit; its
initialization and shuffles come from ``torch.Generator``s seeded by ``seed``, so the same
inputs give the same digest.

Also reported (``LatentFidelity``): the same errors per state dim; the relevant projection
in the project's units (``DRPE_*``: ``sum_j w_j mean (s_hat_j - s_j)^2`` with the graded
relevance weights of ``gridplan.metrics.prediction.standard_weights``, unnormalized like every
DRPE of the ladder) and the decoded ``E_tot_*``; the event version (transitions with a key
pickup or a door opening); the latent drift ``mean ||z_hat' - z'||^2 / Z``, also relative to
the mean per-dim variance of the actual latents (None when that variance is 0); the effective
rank of the actual latents; and the persistence baseline ``d(s, s')`` (the current state as the
prediction): an ``E_repr`` at or above it means the encoding tells the decoder less about the
next state than the current state does (a collapsed representation).

Errors (ValueError, naming the problem): an episode in both the decoder's fit or validation
set and the test set (leakage; episodes are keyed by their dataset's source and id), fit and
validation sets sharing an episode, non-finite latents or states, a state dim with zero
variance.

Letter legend: ``N`` transitions, ``Z`` latent dims, ``S`` state dims.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import torch
from torch import nn

from gridplan.core.tasks import TASK_A, TaskKind
from gridplan.data.datasets import TransitionDataset
from gridplan.metrics.prediction import standard_weights
from gridplan.models.latent_contract import (
    check_decoded,
    check_latent,
    check_latent_model,
    encode_states,
    is_latent_model,
    next_latents,
    step_latent,
)
from gridplan.models.latent_reference import StateLatentModel
from gridplan.models.signatures import label

#: Decoder width, epochs, patience, learning rate and batch size (seed 004 uses width 512,
#: 60 epochs, patience 10; width 256 and batches of 1024 keep a fit of the evaluation's 6k
#: transitions near a second of one CPU core, at the validation loss of batches of 256).
DECODER_HIDDEN = 256
DECODER_EPOCHS = 60
DECODER_PATIENCE = 10
DECODER_LR = 3e-3
DECODER_BATCH = 1024
#: Rows per ``encode``/``predict_latent`` call when encoding a dataset.
ENCODE_ROWS = 2048


def source_of(data: TransitionDataset) -> str:
    """The key of ``data``'s episodes: the generating policy, seed, budget, task and world of
    its meta, so two subsets of one collected dataset share it and two collections do not."""
    meta = data.meta
    keys = ("policy", "seed", "transitions", "task", "world")
    return json.dumps({k: meta.get(k) for k in keys}, sort_keys=True, default=str)


def protocol_splits(
    data: TransitionDataset, seed: int = 0, val_fraction: float = 0.15, test_fraction: float = 0.3
) -> tuple[TransitionDataset, TransitionDataset, TransitionDataset]:
    """Split ``data`` by episode into the decoder's fit, validation and isolated test sets
    (``TransitionDataset.split_by_episode`` twice; no episode in two of them).

    Raises:
        ValueError: on fractions outside ``(0, 1)`` summing to 1 or more, or too few episodes.
    """
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError(
            f"val_fraction {val_fraction} and test_fraction {test_fraction} must lie in (0, 1) "
            "and sum to less than 1"
        )
    rest, test = data.split_by_episode(test_fraction, seed)
    fit, val = rest.split_by_episode(val_fraction / (1 - test_fraction), seed + 1)
    return fit, val, test


@dataclass(frozen=True)
class LatentTransitions:
    """Encoded transitions of one dataset (``encode_transitions``).

    Attributes:
        z: ``(N, Z)`` encodings of the actual observations ``E(o_t)``.
        z_next: ``(N, Z)`` latents of the actual next observations: ``E(o_{t+1})``, or a
            recurrent model's filtered latent ``filter_latent(z, a, o_{t+1})``
            (``gridplan.models.latent_contract.next_latents``).
        z_pred: ``(N, Z)`` predicted next latents ``P(E(o_t), a_t)``, or None.
        states, next_states: ``(N, S)`` true states.
        actions: ``(N,)`` long.
        episode: ``(N,)`` long episode ids within ``source``.
        event: ``(N,)`` bool, a key pickup or door opening happened in the transition.
        source: the dataset key of the episodes (``source_of``).
    """

    z: torch.Tensor
    z_next: torch.Tensor
    z_pred: torch.Tensor | None
    states: torch.Tensor
    next_states: torch.Tensor
    actions: torch.Tensor
    episode: torch.Tensor
    event: torch.Tensor
    source: str

    def __post_init__(self) -> None:
        n, z_dim = self.z.shape if self.z.dim() == 2 else (-1, -1)
        latents = {"z": self.z, "z_next": self.z_next}
        if self.z_pred is not None:
            latents["z_pred"] = self.z_pred
        for name, value in latents.items():
            check_latent(value, n, z_dim, f"latents {name!r}")
        for name in ("states", "next_states"):
            value = getattr(self, name)
            if value.dim() != 2 or value.shape[0] != n:
                raise ValueError(f"{name} must have shape ({n}, S), got {tuple(value.shape)}")
            if not torch.isfinite(value).all():
                raise ValueError(f"{name} holds non-finite values (NaN or inf)")
        for name in ("actions", "episode", "event"):
            if tuple(getattr(self, name).shape) != (n,):
                raise ValueError(f"{name} must have shape ({n},)")

    @property
    def keys(self) -> set[tuple[str, int]]:
        """The ``(source, episode)`` keys of its episodes."""
        return {(self.source, int(e)) for e in torch.unique(self.episode).tolist()}


@torch.no_grad()
def encode_transitions(
    model,
    data: TransitionDataset,
    generator: torch.Generator | None = None,
    predict: bool = True,
    check: bool = True,
) -> LatentTransitions:
    """Encode every transition of ``data`` with a latent model (and predict its next latent).

    Args:
        model: a latent model (``gridplan.models.latent_contract``; checked first).
        data: logged transitions of the model's world.
        generator: the randomness of ``predict_latent``; default ``manual_seed(0)``.
        predict: also compute ``z_pred``.
        check: hold the model to ``check_latent_model`` first; False for a model its caller
            has checked on ``data``'s world (``gridplan.evaluation.latent_eval.prepare_latent``).

    Raises:
        ValueError: if the model breaks the latent contract or returns a misshapen or
            non-finite latent (``LatentContractError``, naming the method).
    """
    if not is_latent_model(model):
        raise ValueError(f"{label(model)} is not a latent model (encode, predict_latent)")
    device = data.device
    if check:
        check_latent_model(model, data.world, device)
    generator = generator or torch.Generator(device=device).manual_seed(0)
    parts: dict[str, list[torch.Tensor]] = {"z": [], "z_next": [], "z_pred": []}
    for lo in range(0, len(data), ENCODE_ROWS):
        s, s1 = data.states[lo : lo + ENCODE_ROWS], data.next_states[lo : lo + ENCODE_ROWS]
        z = encode_states(model, s)
        parts["z"].append(z)
        parts["z_next"].append(next_latents(model, z, data.actions[lo : lo + ENCODE_ROWS], s1))
        if predict:
            parts["z_pred"].append(
                step_latent(model, z, data.actions[lo : lo + ENCODE_ROWS], generator)
            )
    return LatentTransitions(
        z=torch.cat(parts["z"]),
        z_next=torch.cat(parts["z_next"]),
        z_pred=torch.cat(parts["z_pred"]) if predict else None,
        states=data.states,
        next_states=data.next_states,
        actions=data.actions,
        episode=data.episode,
        event=data.pickup | data.door_opened,
        source=source_of(data),
    )


@dataclass(frozen=True)
class StateNormalization:
    """Per-dim mean and variance of the fit states (the ``sigma_j^2`` of ``d``).

    Raises:
        ValueError: if some dim has zero variance (naming the dims).
    """

    mean: torch.Tensor
    var: torch.Tensor

    def __post_init__(self) -> None:
        zero = (self.var <= 0).nonzero().flatten().tolist()
        if zero:
            raise ValueError(
                f"state dims {zero} have zero variance over the decoder's fit states; the "
                "normalized error d is undefined there (use a behaviour policy whose data "
                "moves every dim)"
            )

    @classmethod
    def of(cls, states: torch.Tensor) -> StateNormalization:
        """From ``(N, S)`` states (population variance)."""
        return cls(states.mean(dim=0), states.var(dim=0, unbiased=False))

    def digest(self) -> str:
        return _digest([self.mean, self.var])


def _digest(tensors: list[torch.Tensor]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


class FrozenDecoder:
    """The fitted, frozen two-layer MLP decoder ``(B, Z) -> (B, S)`` (``fit_frozen_decoder``).

    Attributes:
        net: the MLP (eval mode, no parameter requires grad).
        normalization: the fit states' ``StateNormalization``.
        digest: sha256 of the normalization and every parameter, taken when frozen.
        best_epoch: the epoch kept (1-based), and ``val_loss`` its validation loss (``d``).
        fit_keys: the ``(source, episode)`` keys of the fit and validation episodes.
    """

    def __init__(self, net, normalization, best_epoch, val_loss, fit_keys, epochs_run) -> None:
        self.net = net.eval()
        for p in self.net.parameters():
            p.requires_grad_(False)
        self.normalization = normalization
        self.best_epoch = best_epoch
        self.val_loss = val_loss
        self.epochs_run = epochs_run
        self.fit_keys = frozenset(fit_keys)
        self.digest = self._hash()

    def _hash(self) -> str:
        return _digest(
            [self.normalization.mean, self.normalization.var, *self.net.state_dict().values()]
        )

    @torch.no_grad()
    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, Z)`` -> ``(B, S)`` decoded states (unclamped).

        Raises:
            ValueError: if the parameters changed since they were frozen.
        """
        if self._hash() != self.digest:
            raise ValueError("the frozen decoder's parameters changed after it was frozen")
        return self.net(z.float())

    def describe(self) -> dict:
        return {
            "kind": "frozen",
            "digest": self.digest,
            "normalization_digest": self.normalization.digest(),
            "best_epoch": self.best_epoch,
            "epochs_run": self.epochs_run,
            "val_loss": self.val_loss,
            "fit_episodes": len(self.fit_keys),
        }


def check_disjoint(a: set, b: set, what_a: str, what_b: str) -> None:
    """Raise ValueError naming the shared episodes if the key sets ``a`` and ``b`` overlap."""
    shared = sorted(a & b, key=lambda k: (k[0], k[1]))
    if shared:
        ids = [k[1] for k in shared[:5]]
        raise ValueError(
            f"episode leakage: {len(shared)} episodes are in both the {what_a} and the "
            f"{what_b} (first episode ids {ids}); they must be disjoint"
        )


def fit_frozen_decoder(
    fit: LatentTransitions,
    val: LatentTransitions,
    seed: int = 0,
    hidden: int = DECODER_HIDDEN,
    epochs: int = DECODER_EPOCHS,
    patience: int = DECODER_PATIENCE,
    lr: float = DECODER_LR,
    batch_size: int = DECODER_BATCH,
) -> FrozenDecoder:
    """Fit the protocol's decoder on actual encodings of ``fit`` episodes, keep the best epoch
    on ``val`` episodes, freeze and hash it (module docstring).

    Raises:
        ValueError: if fit and validation share an episode, or a state dim of the fit states
            has zero variance.
    """
    check_disjoint(fit.keys, val.keys, "decoder's fit set", "decoder's validation set")
    z_fit = torch.cat([fit.z, fit.z_next])
    s_fit = torch.cat([fit.states, fit.next_states])
    z_val = torch.cat([val.z, val.z_next])
    s_val = torch.cat([val.states, val.next_states])
    norm = StateNormalization.of(s_fit)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = nn.Sequential(
            nn.Linear(z_fit.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, s_fit.shape[1])
        ).to(z_fit.device)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)

    def loss_of(z, s):
        return ((net(z) - s) ** 2 / norm.var).mean()

    best = (float("inf"), 0, None)
    epoch = 0
    for epoch in range(1, epochs + 1):
        net.train()
        order = torch.randperm(z_fit.shape[0], generator=gen).to(z_fit.device)
        for lo in range(0, order.numel(), batch_size):
            idx = order[lo : lo + batch_size]
            opt.zero_grad(set_to_none=True)
            loss_of(z_fit[idx], s_fit[idx]).backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            val_loss = float(loss_of(z_val, s_val))
        if val_loss < best[0]:
            best = (val_loss, epoch, {k: v.clone() for k, v in net.state_dict().items()})
        elif epoch - best[1] >= patience:
            break
    net.load_state_dict(best[2])
    return FrozenDecoder(net, norm, best[1], best[0], fit.keys | val.keys, epoch)


def episode_mean(values: torch.Tensor, episode: torch.Tensor) -> torch.Tensor:
    """Mean over episodes of the within-episode means of ``(N, ...)`` values -> ``(...)``."""
    _, inverse, counts = torch.unique(episode, return_inverse=True, return_counts=True)
    flat = values.reshape(values.shape[0], -1).double()
    sums = torch.zeros(counts.numel(), flat.shape[1], dtype=flat.dtype, device=flat.device)
    sums.index_add_(0, inverse, flat)
    per_episode = sums / counts.unsqueeze(1).to(flat.dtype)
    return per_episode.mean(dim=0).reshape(values.shape[1:]).float()


@dataclass
class LatentFidelity:
    """The frozen-decoder protocol's numbers on test episodes (module docstring).

    ``E_*`` are in ``d`` units (variance-normalized); ``DRPE_*`` and ``E_tot_*`` in
    normalized state units like the ladder's L1. ``*_event`` are None without events;
    ``latent_drift_relative`` is None for a collapsed latent (zero variance in every dim);
    ``effective_rank`` is that of the actual next latents (``effective_rank``).
    """

    E_repr: float
    E_pred: float
    E_excess: float
    DRPE_repr: float
    DRPE_pred: float
    DRPE_excess: float
    E_tot_repr: float
    E_tot_pred: float
    E_persistence: float
    DRPE_persistence: float
    latent_drift: float
    latent_drift_relative: float | None
    effective_rank: float
    per_dim: dict[str, list[float]]
    E_repr_event: float | None
    E_pred_event: float | None
    E_excess_event: float | None
    n_events: int
    n_episodes: int
    n_transitions: int
    decoder: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(vars(self))


def effective_rank(z: torch.Tensor) -> float:
    """The effective rank of ``(N, Z)`` latents: ``exp`` of the entropy of the normalized
    singular values of the centred matrix (Roy & Vetterli, "The effective rank: a measure of
    effective dimensionality", EUSIPCO 2007). Between 1 and ``min(N, Z)``, ``Z`` for latents
    spread evenly over every dim; 0 for a constant latent (a fully collapsed encoder).
    """
    x = z.double()
    sv = torch.linalg.svdvals(x - x.mean(dim=0, keepdim=True))
    # Below float32 resolution of the latents' magnitude a singular value is round-off.
    tol = max(z.shape) * torch.finfo(torch.float32).eps * max(1.0, float(x.abs().max()))
    sv = sv[sv > tol]
    if sv.numel() == 0:
        return 0.0
    p = sv / sv.sum()
    return float(torch.exp(-(p * p.log()).sum()))


#: The frozen-decoder numbers that have a floor (``latent_floor``).
FLOORED = (
    "E_repr",
    "E_pred",
    "E_excess",
    "DRPE_repr",
    "DRPE_pred",
    "DRPE_excess",
    "E_tot_repr",
    "E_tot_pred",
)


def _identity(z: torch.Tensor) -> torch.Tensor:
    return z


def latent_floor(
    test: TransitionDataset,
    normalization: StateNormalization,
    task: TaskKind = TASK_A,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """The floor of every ``FLOORED`` number: the perfect latent model on the same test
    transitions (``z = s``, the oracle's step, decoded by the identity;
    ``gridplan.models.latent_reference.StateLatentModel``), under the same ``sigma_j^2``.

    Its ``E_repr`` is exactly 0 (the identity reads ``z' = s'``); its ``E_pred`` is the error
    of the oracle's *sampled* next state, which the world's stochastic dims (the distractors
    redrawn every step) make irreducible: about 0.36 in ``d`` units on the default world,
    exactly 0 in a world without stochastic dims. A model that predicts the distractors' mean
    instead of a sample reads below this floor (half its distractor error), so the excess
    above it is signed, like E_tot's excess over the oracle's.

    Args:
        test: the protocol's isolated test transitions (``protocol_splits``).
        normalization: the ``sigma_j^2`` of the evaluated model's frozen decoder.
        task: the graded DRPE weights; its world is the oracle's.
        generator: the oracle's draws (default ``manual_seed(0)``).

    Returns:
        ``{name: value}`` for every name of ``FLOORED``.
    """
    perfect = StateLatentModel(task.world)
    encoded = encode_transitions(perfect, test, generator)
    fidelity = latent_fidelity(
        encoded, _identity, task, None, {"kind": "identity"}, normalization, "identity"
    )
    return {name: getattr(fidelity, name) for name in FLOORED}


def _decoder_name(decode) -> str:
    """``Class.method`` of a bound method (a model's own ``decode``), else the callable's class
    (``FrozenDecoder``)."""
    owner = getattr(decode, "__self__", None)
    if owner is not None:
        return label(owner, decode.__name__)
    return type(decode).__name__


def latent_fidelity(
    test: LatentTransitions,
    decode,
    task: TaskKind = TASK_A,
    fit_keys: set | frozenset | None = None,
    decoder: dict | None = None,
    normalization: StateNormalization | None = None,
    source: str | None = None,
) -> LatentFidelity:
    """E_repr, E_pred, E_excess and their companions on ``test`` (module docstring).

    Args:
        test: encoded transitions of isolated test episodes, with ``z_pred``.
        decode: ``(B, Z) -> (B, S)``: a ``FrozenDecoder`` or a model's own ``decode``.
        task: the graded DRPE weights (``standard_weights(task)["graded"]``).
        fit_keys: the episodes the decoder saw (default ``decode.fit_keys`` when it has them).
        decoder: its description in the result (default ``decode.describe()`` or
            ``{"kind": "model"}``).
        normalization: the ``sigma_j^2`` (default the frozen decoder's; a model's own decoder
            has none, and the test states' own variance is used).
        source: who decodes, as errors name it (``"NaNDecode.decode"``); default
            ``_decoder_name(decode)``.

    Raises:
        ValueError: on episode leakage between the decoder's episodes and ``test``, a test set
            without predictions, or a zero-variance state dim; ``LatentContractError`` (a
            ValueError) naming ``source`` on misshapen or non-finite decoded states.
    """
    if test.z_pred is None:
        raise ValueError(
            "latent_fidelity needs predicted latents (encode_transitions predict=True)"
        )
    keys = fit_keys if fit_keys is not None else getattr(decode, "fit_keys", None)
    if keys is not None:
        check_disjoint(set(keys), test.keys, "decoder's fit/validation episodes", "test episodes")
    norm = normalization or getattr(decode, "normalization", None)
    norm = norm or StateNormalization.of(torch.cat([test.states, test.next_states]))
    decoded_next = decode(test.z_next)
    decoded_pred = decode(test.z_pred)
    source = source or _decoder_name(decode)
    # A model may be finite on the contract check's few rows and not on a full batch.
    for name, value in (("z_next", decoded_next), ("z_pred", decoded_pred)):
        check_decoded(value, test.next_states.shape[0], task.world, f"{source}(test {name})")
    target = test.next_states
    sq_repr = (decoded_next - target) ** 2
    sq_pred = (decoded_pred - target) ** 2
    sq_persist = (test.states - target) ** 2
    ep = test.episode
    repr_dim = episode_mean(sq_repr / norm.var, ep)
    pred_dim = episode_mean(sq_pred / norm.var, ep)
    persist_dim = episode_mean(sq_persist / norm.var, ep)
    weights = standard_weights(task)["graded"].to(target.device)
    raw_repr, raw_pred = episode_mean(sq_repr, ep), episode_mean(sq_pred, ep)
    raw_persist = episode_mean(sq_persist, ep)
    drift = ((test.z_pred - test.z_next) ** 2).mean(dim=1)
    # A fully collapsed encoder (zero variance in every dim) leaves the relative drift
    # undefined; it is reported as None and the card diagnoses the collapse.
    scale = float(test.z_next.var(dim=0, unbiased=False).mean())
    event = {"E_repr_event": None, "E_pred_event": None, "E_excess_event": None}
    n_events = int(test.event.sum())
    if n_events:
        er = float(episode_mean((sq_repr / norm.var)[test.event].mean(1), ep[test.event]))
        ex = float(episode_mean((sq_pred / norm.var)[test.event].mean(1), ep[test.event]))
        event = {"E_repr_event": er, "E_pred_event": ex, "E_excess_event": ex - er}
    e_repr, e_pred = float(repr_dim.mean()), float(pred_dim.mean())
    drpe_repr, drpe_pred = float((weights * raw_repr).sum()), float((weights * raw_pred).sum())
    if decoder is None:
        describe = getattr(decode, "describe", None)
        decoder = describe() if callable(describe) else {"kind": "model"}
    return LatentFidelity(
        E_repr=e_repr,
        E_pred=e_pred,
        E_excess=e_pred - e_repr,
        DRPE_repr=drpe_repr,
        DRPE_pred=drpe_pred,
        DRPE_excess=drpe_pred - drpe_repr,
        E_tot_repr=float(raw_repr.mean()),
        E_tot_pred=float(raw_pred.mean()),
        E_persistence=float(persist_dim.mean()),
        DRPE_persistence=float((weights * raw_persist).sum()),
        latent_drift=float(episode_mean(drift, ep)),
        latent_drift_relative=float(episode_mean(drift, ep)) / scale if scale > 0 else None,
        effective_rank=effective_rank(test.z_next),
        per_dim={
            "repr": repr_dim.tolist(),
            "pred": pred_dim.tolist(),
            "excess": (pred_dim - repr_dim).tolist(),
            "persistence": persist_dim.tolist(),
        },
        **event,
        n_events=n_events,
        n_episodes=int(torch.unique(ep).numel()),
        n_transitions=int(ep.numel()),
        decoder=decoder,
    )
