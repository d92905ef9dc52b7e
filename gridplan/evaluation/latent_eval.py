"""Latent world models through the ladder and the card (seed 004; ``docs/DESIGN.md``,
"Latent world models").

``evaluate`` and ``paper_report`` (``gridplan.evaluation.ladder``) accept a latent model
(``gridplan.models.latent_contract``) as they accept a state model: ``prepare_latent`` first
measures it with the frozen-decoder protocol and the action-consistency probe, then hands the
ladder a ``LatentThroughDecoder``, so every level runs on the decoded states and the planner
rolls leaves in latent space (``gridplan.planning.latent_scorer``). The report carries ``E_repr``,
``E_pred`` and ``E_excess`` beside success, and ``latent`` with everything else.

The protocol's data (``LatentProtocol``): one dataset of the ``balanced`` behaviour policy,
collected with a seed of its own, split by episode into the decoder's fit, validation and
isolated test episodes. Every latent model evaluated on a world shares those data, so their
decoders share the normalization hash and their numbers are paired (seed 004 "Comparison
protocol"). The decoder is fitted on actual encodings of the fit episodes only.

Which decoder plans: the model's own ``decode`` where it has one (a reconstruction model),
else the frozen protocol decoder (a JEPA predictor); ``decoder_fidelity`` reports the frozen
decoder's numbers for every model and the own decoder's beside them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import torch

from gridplan.core.tasks import TaskKind
from gridplan.data.datasets import collect
from gridplan.evaluation.schema import memory_clause
from gridplan.metrics.action_consistency import action_consistency
from gridplan.metrics.frozen_decoder import (
    FLOORED,
    encode_transitions,
    fit_frozen_decoder,
    latent_fidelity,
    latent_floor,
    protocol_splits,
)
from gridplan.models.capabilities import capabilities_of, checked_on
from gridplan.models.episode_memory import memory_words
from gridplan.models.latent import LATENT_KIND, load_latent_model
from gridplan.models.latent_contract import LatentThroughDecoder, check_latent_model
from gridplan.models.learned import CHECKPOINT_KEY, _read_checkpoint, load_world_model
from gridplan.models.signatures import label
from gridplan.planning.latent_scorer import LatentScorer


@dataclass(frozen=True)
class LatentProtocol:
    """The data and seeds of the frozen-decoder protocol (module docstring).

    Attributes:
        policy, transitions, data_seed: the protocol dataset (``collect``).
        val_fraction, test_fraction, split_seed: its episode split (``protocol_splits``).
        decoder_seed: the decoder's and the probe's seed; ``predict_seed`` the generator of
            the predicted latents.
    """

    policy: str = "balanced"
    transitions: int = 6000
    data_seed: int = 9_000_001
    val_fraction: float = 0.15
    test_fraction: float = 0.3
    split_seed: int = 0
    decoder_seed: int = 0
    predict_seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


#: The protocol every latent evaluation uses unless told otherwise.
DEFAULT_LATENT_PROTOCOL = LatentProtocol()


@dataclass
class LatentMeasurement:
    """``prepare_latent``'s result.

    Attributes:
        model: the ``LatentThroughDecoder`` the ladder evaluates.
        report: the report's ``latent`` entry: ``frozen`` and ``own`` (``LatentFidelity``
            dicts; ``own`` None without a model decoder), ``floor`` (the perfect latent
            model's frozen-decoder numbers on the same test transitions,
            ``gridplan.metrics.frozen_decoder.latent_floor``) and ``above_floor`` (``frozen``
            minus ``floor``, signed), ``action_consistency``,
            ``planning`` (``LatentScorer.describe``), ``protocol``, ``obs_kind``,
            ``latent_dim``.
    """

    model: LatentThroughDecoder
    report: dict


@torch.no_grad()
def prepare_latent(
    latent,
    task: TaskKind,
    device: torch.device | str = "cpu",
    protocol: LatentProtocol = DEFAULT_LATENT_PROTOCOL,
    heads: bool = False,
) -> LatentMeasurement:
    """Measure a latent model with the frozen-decoder protocol and wrap it for the ladder.

    Args:
        latent: a latent model of ``task.world``.
        task: rewards and relevance weights (and the protocol data's task).
        device: where the data are collected and the model runs.
        protocol: the data and seeds.
        heads: plan with the model's own reward (and value) heads
            (``gridplan.planning.latent_scorer``).

    Raises:
        ValueError: if the model breaks the latent contract (``LatentContractError``; not
            checked again for a model ``gridplan.models.plugins.admit`` admitted on this world
            and device), a state dim of the protocol data has zero variance, or the latents are
            non-finite.
    """
    if not checked_on(latent, task.world, device):
        check_latent_model(latent, task.world, device)
    data = collect(protocol.policy, protocol.transitions, protocol.data_seed, task, device)
    parts = protocol_splits(
        data, protocol.split_seed, protocol.val_fraction, protocol.test_fraction
    )

    def draws() -> torch.Generator:
        return torch.Generator(device=torch.device(device)).manual_seed(protocol.predict_seed)

    gen = draws()
    # The model was checked above, once: its transitions are encoded unchecked.
    fit, val = (encode_transitions(latent, part, gen, check=False) for part in parts[:2])
    # The test draws, and the floor's, start from the protocol's seed: every model is measured
    # against one floor, and the perfect latent model reads exactly its own.
    test = encode_transitions(latent, parts[2], draws(), check=False)
    with torch.enable_grad():
        decoder = fit_frozen_decoder(fit, val, seed=protocol.decoder_seed)
    frozen = latent_fidelity(test, decoder, task)
    floor = latent_floor(parts[2], decoder.normalization, task, draws())
    own = None
    if capabilities_of(latent).decoder:
        own = latent_fidelity(
            test,
            latent.decode,
            task,
            decoder.fit_keys,
            {"kind": "model"},
            decoder.normalization,
            source=label(latent, "decode"),
        )
        model = LatentThroughDecoder(latent, heads=heads)
    else:
        model = LatentThroughDecoder(latent, decoder, decoder.describe(), heads=heads)
    with torch.enable_grad():
        probe = action_consistency(
            fit, test, seed=protocol.decoder_seed, n_actions=task.world.n_actions
        )
    planning = LatentScorer(model, task, 1, device).describe()
    report = {
        "obs_kind": latent.obs_kind,
        "latent_dim": latent.latent_dim,
        "memory": memory_words(latent),
        "frozen": frozen.to_dict(),
        "floor": floor,
        "above_floor": {k: getattr(frozen, k) - floor[k] for k in FLOORED},
        "own": own.to_dict() if own is not None else None,
        "action_consistency": probe.to_dict(),
        "planning": planning,
        "protocol": protocol.to_dict(),
    }
    return LatentMeasurement(model, report)


def planning_note(report: dict) -> str:
    """The plain-language statement of how a latent model was planned with."""
    p = report["planning"]
    decoder = (
        "its own decoder"
        if p["decoder"].get("kind") == "model"
        else (f"the frozen protocol decoder (sha256 {p['decoder']['digest'][:12]})")
    )
    if p["leaf_score"] == "decoder":
        how = "the true reward of the decoded states and exact V* at the decoded leaf"
    else:
        how = f"the model's reward head and {p['leaf_value']}"
    return (
        f"latent model ({report['obs_kind']} observations, Z = {report['latent_dim']}"
        f"{memory_clause(report)}): planned "
        f"in latent space through {decoder}, leaves scored with {how}; every level reads the "
        "decoded states"
    )


def load_run_model(path: str | os.PathLike, device: torch.device | str = "cpu"):
    """The model of any checkpoint of ``python -m train``: a latent model
    (``gridplan.models.latent.load_latent_model``) when its ``gridplan`` entry says
    ``kind: latent``, else a state world model (``gridplan.models.learned.load_world_model``).

    Raises:
        FileNotFoundError, ValueError: as the loaders.
    """
    meta = _read_checkpoint(os.fspath(path)).get(CHECKPOINT_KEY)
    if isinstance(meta, dict) and meta.get("kind") == LATENT_KIND:
        return load_latent_model(path, device)
    return load_world_model(path, device)
