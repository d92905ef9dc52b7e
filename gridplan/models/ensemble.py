"""Ensembles of learned world models: members, planning, disagreement (paper §5.4 models).

An ensemble of ``K`` MLP world models (``model.members=K``) is trained as one vectorized
group (``gridplan.training.vectorized``): member ``k`` is a single run with its own seed
(``gridplan.training.runs.member_seed``: initialisation and minibatch order) and, with
``model.bootstrap`` (the default), its own bootstrap resample of the run's training split
(``n`` rows drawn with replacement, seeded by the same member seed), as in deep-ensemble and
PETS practice. All members share the run's logged dataset, validation split and windows, and
each stops early on its own validation loss. The members' best checkpoints are stacked into
one checkpoint (``assemble``) that ``gridplan.models.learned.load_world_model`` reads as a
``K``-member ``MLPDynamics`` behind an ``EnsembleWorldModel`` (defined in
``gridplan.models.learned``, which builds it).

``EnsembleWorldModel`` plans with either

- ``"mean"`` (the default): every imagined step is the members' mean prediction. The planner
  takes the maximum over ``4^D`` leaves, one imagined rollout each; the mean keeps that
  maximum from chasing the one member that happens to be optimistic about a leaf;
- ``"ts"``: trajectory sampling (PETS, "TS-inf"): ``start_rollout`` draws one member per
  imagined rollout from the planner's generator, and that member predicts every step of it.

It exposes ``member_predictions(state, action) -> (K, N, S)`` and the disagreement score
``uncertainty(state, action) -> (N,)``: the across-member variance of the predicted next
state, averaged over the S dimensions. ``gridplan.metrics.calibration.uncertainty_vs_error``
relates it to the ensemble's open-loop rollout error on held-out windows (Spearman with a
seeded bootstrap CI, the risk–coverage curve and its area, AURC).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from gridplan.models.capabilities import capabilities_of
from gridplan.models.learned import (
    CHECKPOINT_KEY,
    STATE_DICT_PREFIX,
    EnsembleWorldModel,
    load_world_model,
)


def assemble(
    member_checkpoints: Sequence[str | os.PathLike],
    config: dict,
    path: str | os.PathLike,
    extra: dict | None = None,
) -> Path:
    """Stack the members' checkpoints into one ``K``-member world-model checkpoint.

    The file has the keys ``load_world_model`` reads: ``state_dict`` (``dim_weights`` of
    member 0 and the stacked ``net.*`` weights, ``(K, ...)``) and the ``"gridplan"``
    metadata, whose ``model`` is the ``K``-member architecture, ``config`` the ensemble
    run's, ``dataset`` member 0's data summary without its bootstrap entry, and
    ``ensemble`` each member's seed, checkpoint, epoch, global step and bootstrap entry.

    Args:
        member_checkpoints: one checkpoint per member (``K >= 2``), e.g. their best.
        config: the ensemble run's resolved config (plain dict).
        path: file to write (parent folders are created; written atomically).
        extra: more entries for ``metadata["ensemble"]``.

    Returns:
        ``path``.

    Raises:
        ValueError: if fewer than two checkpoints are given or their architectures differ.
    """
    if len(member_checkpoints) < 2:
        raise ValueError(
            f"an ensemble needs >= 2 member checkpoints, got {len(member_checkpoints)}"
        )
    ckpts = [torch.load(p, map_location="cpu", weights_only=True) for p in member_checkpoints]
    metas = [c[CHECKPOINT_KEY] for c in ckpts]
    arch = metas[0]["model"]
    for p, m in zip(member_checkpoints, metas, strict=True):
        if m["model"] != arch:
            raise ValueError(f"{p} has architecture {m['model']}, member 0 has {arch}")
    state = {"dim_weights": ckpts[0]["state_dict"]["dim_weights"]}
    for key in ckpts[0]["state_dict"]:
        if key.startswith(STATE_DICT_PREFIX):
            state[key] = torch.cat([c["state_dict"][key] for c in ckpts])
    dataset = {k: v for k, v in metas[0]["dataset"].items() if k != "bootstrap"}
    members = [
        {
            "seed": m["config"]["seed"],
            "checkpoint": str(p),
            "epoch": m["epoch"],
            "global_step": m["global_step"],
            "bootstrap": m["dataset"].get("bootstrap"),
        }
        for p, m in zip(member_checkpoints, metas, strict=True)
    ]
    meta = {
        **metas[0],
        "model": {**arch, "members": len(ckpts)},
        "config": config,
        "dataset": dataset,
        "epoch": max(m["epoch"] for m in metas),
        "global_step": sum(m["global_step"] for m in metas),
        "ensemble": {"members": members, **(extra or {})},
    }
    ckpt = {
        "epoch": meta["epoch"],
        "global_step": meta["global_step"],
        "pytorch-lightning_version": ckpts[0].get("pytorch-lightning_version"),
        "state_dict": state,
        "hyper_parameters": {"config": config, "dataset": dataset},
        CHECKPOINT_KEY: meta,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(ckpt, tmp)
    tmp.replace(path)
    return path


def load_ensemble(
    path: str | os.PathLike, device: torch.device | str = "cpu", sampling: str | None = None
) -> EnsembleWorldModel:
    """An ``EnsembleWorldModel`` from a checkpoint of ``K >= 1`` members.

    Args:
        path: a checkpoint (``assemble`` writes ensembles; a one-member run's works too).
        device: where the network lives.
        sampling: ``"mean"`` or ``"ts"``; default: the run config's ``model.sampling``, else
            ``"mean"``.

    Raises:
        FileNotFoundError, ValueError: as ``load_world_model``; ValueError on an unknown
            ``sampling``.
    """
    model = load_world_model(path, device)
    if sampling is None:
        sampling = capabilities_of(model).sampling or "mean"
    return EnsembleWorldModel(model.net, model.metadata, sampling, model.world)
