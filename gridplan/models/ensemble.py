"""Ensembles of learned world models: members, planning, disagreement (paper §5.4 models).

An ensemble of ``K`` MLP world models (``model.members=K``) is trained as one vectorized
group (``gridplan.training.vectorized``): member ``k`` is a single run with its own seed
``member_seed(seed, k)`` (initialisation and minibatch order) and, with ``model.bootstrap``
(the default), its own bootstrap resample of the run's training split (``n`` rows drawn with
replacement, seeded by the same member seed), as in deep-ensemble and PETS practice. All
members share the run's logged dataset, validation split and windows, and each stops early
on its own validation loss. The members' best checkpoints are stacked into one checkpoint
(``assemble``) that ``gridplan.models.learned.load_world_model`` reads as a ``K``-member
``MLPDynamics``.

``EnsembleWorldModel`` plans with either

- ``"mean"`` (the default): every imagined step is the members' mean prediction. The planner
  takes the maximum over ``4^D`` leaves, one imagined rollout each; the mean keeps that
  maximum from chasing the one member that happens to be optimistic about a leaf;
- ``"ts"``: trajectory sampling (PETS, "TS-inf"): ``start_rollout`` draws one member per
  imagined rollout from the planner's generator, and that member predicts every step of it.

It exposes ``member_predictions(state, action) -> (K, N, 12)`` and the disagreement score
``uncertainty(state, action) -> (N,)``: the across-member variance of the predicted next
state, averaged over the 12 dimensions. ``gridplan.metrics.calibration.uncertainty_vs_error``
relates it to the ensemble's open-loop rollout error on held-out windows (Spearman with a
seeded bootstrap CI, the risk–coverage curve and its area, AURC).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from gridplan.core.constants import STATE_DIM
from gridplan.models.learned import (
    CHECKPOINT_KEY,
    STATE_DICT_PREFIX,
    LearnedWorldModel,
    MLPDynamics,
    load_world_model,
)

#: Planning modes of an ensemble.
SAMPLING = ("mean", "ts")


def member_seed(seed: int, k: int) -> int:
    """Seed of member ``k`` of the ensemble of run ``seed``: ``numpy.random.SeedSequence``
    of ``(seed, k)``, so members of different ensembles never share a seed stream."""
    return int(np.random.SeedSequence((int(seed), int(k))).generate_state(1)[0])


def member_configs(cfg: DictConfig, bootstrap: bool = True) -> list[tuple[DictConfig, int | None]]:
    """The single-run configs of an ensemble's members and their resample seeds.

    Member ``k`` keeps everything of ``cfg`` except ``model.members`` (1), ``seed``
    (``member_seed(cfg.seed, k)``) and its name (``<run name>-member<k>``); ``data.seed`` is
    pinned to the run's, so every member reads the same logged dataset.

    Args:
        cfg: the ensemble run's composed config (``model.members = K >= 2``).
        bootstrap: resample the training split per member (resample seed = member seed)
            instead of training every member on the split itself.

    Returns:
        ``K`` pairs ``(config, resample_seed or None)``.

    Raises:
        ValueError: if ``model.members < 2``.
    """
    from gridplan.training.config import run_name

    k_members = int(cfg.model.members)
    if k_members < 2:
        raise ValueError(f"an ensemble needs model.members >= 2, got {k_members}")
    base = run_name(cfg)
    data_seed = int(cfg.data.seed)
    out = []
    for k in range(k_members):
        seed = member_seed(int(cfg.seed), k)
        member = OmegaConf.merge(
            cfg,
            {
                "seed": seed,
                "name": f"{base}-member{k}",
                "model": {"members": 1},
                "data": {"seed": data_seed},
            },
        )
        out.append((member, seed if bootstrap else None))
    return out


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


class EnsembleWorldModel(LearnedWorldModel):
    """A ``K``-member ``MLPDynamics`` as a world model that plans with the members' mean or
    with trajectory sampling (module docstring).

    Args:
        net: the stacked network (``net.members = K``).
        metadata: the checkpoint's ``"gridplan"`` entry, or None.
        sampling: ``"mean"`` or ``"ts"``.

    Raises:
        ValueError: on an unknown ``sampling``.
    """

    #: Not declared deterministic, unlike a single network: trajectory sampling draws a member
    #: per rollout in ``start_rollout``, which the shared-prefix tree cannot honour, so both
    #: modes take the independent-leaf search.
    deterministic = False

    def __init__(self, net: MLPDynamics, metadata: dict | None = None, sampling: str = "mean"):
        if sampling not in SAMPLING:
            raise ValueError(f"unknown sampling {sampling!r}; valid: {', '.join(SAMPLING)}")
        super().__init__(net, metadata)
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
        index = self._assignment.to(members.device).view(1, n, 1).expand(1, n, STATE_DIM)
        return members.gather(0, index)[0]


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
        sampling = getattr(model, "sampling", "mean")
    return EnsembleWorldModel(model.net, model.metadata, sampling)
