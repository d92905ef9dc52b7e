"""The behaviour datasets the baselines train on, as ``.npz`` files for models trained elsewhere.

``python -m train`` (``gridplan.training.module.TransitionDataModule``) trains on
``collect(policy, budget, seed, task)`` (cached under ``data_cache/``), split by episode with
``split_by_episode(val_fraction, seed)``. ``export_dataset`` writes that same dataset: one array
per ``TransitionDataset`` field (names, shapes and dtypes as ``gridplan.data.datasets``:
``states``/``next_states`` ``(N, 12)`` float32 in ``[0, 1]``, ``actions`` ``(N,)`` int64 in
``0..3``, ``rewards`` ``(N,)`` float32, the events ``terminated``, ``pickup``, ``door_opened``,
``goal`` ``(N,)`` bool, ``episode`` and ``t`` ``(N,)`` int64), plus ``val`` ``(N,)`` bool,
the trainer's validation episodes, and ``metadata``, a JSON string (also written beside the file as
``<name>.json``) holding:

- ``schema`` (``EXPORT_SCHEMA``) and ``fingerprint``: ``TransitionDataset.fingerprint()``, the
  fingerprint a checkpoint trained on these data records (``load_world_model(...).metadata``);
- ``meta``: the dataset's generating config (policy, transitions, seed, task, horizon,
  layout_version, the policy's mixture), ``event_counts``, ``val_fraction``, ``split_seed``;
- ``dims`` (the state layout of the task's world, ``gridplan.core.world.World.dim_names``)
  and ``actions``.

``load_export`` reads a file back as a ``TransitionDataset`` and checks its fingerprint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from gridplan.core.constants import ACTION_NAMES
from gridplan.core.tasks import Task
from gridplan.data.datasets import (
    TENSOR_FIELDS,
    TransitionDataset,
    check_policy,
    check_val_fraction,
    collect,
)
from gridplan.util.files import write_atomic, write_text_atomic
from gridplan.util.jsonio import dumps

#: Schema tag of an exported ``.npz`` file's ``metadata``.
EXPORT_SCHEMA = "gridplan.export/1"
#: Fraction of episodes the trainer holds out for validation
#: (``gridplan.training.config.DataConfig.val_fraction``'s default).
VAL_FRACTION = 0.1
#: The smallest budget an export takes: the trainer's validation split holds out whole
#: episodes and needs two, and ``collect`` logs ``min(N, COLLECT_ENVS)`` episodes in ``N``
#: transitions (``gridplan.data.datasets``).
MIN_TRANSITIONS = 2
#: Data seeds lie in ``0..SEED_LIMIT - 1``, the trainer's seed range
#: (``gridplan.training.config.TrainConfig.seed``).
SEED_LIMIT = 2**32


def check_transitions(transitions: int) -> int:
    """Return ``transitions`` if an export can hold it: an integer ``>= MIN_TRANSITIONS``.

    Raises:
        ValueError: naming the value and the valid budgets otherwise.
    """
    if isinstance(transitions, bool) or not isinstance(transitions, int):
        raise ValueError(f"a budget must be an integer count of transitions, got {transitions!r}")
    if transitions < MIN_TRANSITIONS:
        raise ValueError(
            f"an export needs at least {MIN_TRANSITIONS} transitions ({MIN_TRANSITIONS} "
            f"episodes for the trainer's validation split), got {transitions}; valid budgets "
            f"are counts >= {MIN_TRANSITIONS}, e.g. 4k 12k 20k or 5000"
        )
    return transitions


def check_seed(seed: int) -> int:
    """Return ``seed`` if it lies in the trainer's seed range ``0..SEED_LIMIT - 1``.

    Raises:
        ValueError: naming the value otherwise.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"a data seed must be an integer in 0..2**32-1, got {seed!r}")
    return seed


def export_name(policy: str, transitions: int, seed: int, task: Task) -> str:
    """File name of an export: ``<task>-<policy>-<transitions>-seed<seed>.npz`` (the data cache's
    key, ``gridplan.training.module.cache_path``)."""
    return f"{task.world.file_prefix}{task.name}-{policy}-{transitions}-seed{seed}.npz"


def sidecar(path: str | os.PathLike) -> Path:
    """The metadata record beside an export: ``<name>.json`` for ``<name>.npz``."""
    return Path(path).with_suffix(".json")


def metadata(data: TransitionDataset, val: torch.Tensor, val_fraction: float, seed: int) -> dict:
    """The ``metadata`` record of ``data`` (module docstring) with its ``(N,)`` ``val`` mask."""
    return {
        "schema": EXPORT_SCHEMA,
        "fingerprint": data.fingerprint(),
        "meta": dict(data.meta),
        "event_counts": data.event_counts(),
        "val_fraction": val_fraction,
        "split_seed": seed,
        "val_transitions": int(val.sum()),
        "dims": list(data.world.dim_names),
        "actions": list(ACTION_NAMES),
    }


def validation_mask(data: TransitionDataset, val_fraction: float, seed: int) -> torch.Tensor:
    """``(N,)`` bool: the rows of the episodes ``data.split_by_episode(val_fraction, seed)``
    holds out (the trainer's validation split)."""
    _, val = data.split_by_episode(val_fraction, seed)
    return torch.isin(data.episode, torch.unique(val.episode))


def export_dataset(
    path: str | os.PathLike,
    policy: str,
    transitions: int,
    seed: int,
    task: Task,
    val_fraction: float = VAL_FRACTION,
    force: bool = False,
) -> dict:
    """Collect the dataset ``python -m train`` trains on and write it to ``path`` (``.npz``) and
    its metadata record to ``sidecar(path)``; returns the record.

    Args:
        path: target file; must end in ``.npz``. Parent folders are created.
        policy, transitions, seed, task: as ``gridplan.data.datasets.collect`` (``seed`` is the
            run's ``data.seed``, which follows its ``seed``).
        val_fraction: the trainer's ``data.val_fraction`` (the split seed is ``seed``).
        force: replace existing files.

    Raises:
        FileExistsError: if ``path`` or its sidecar exists and ``force`` is False.
        ValueError: on a path not ending in ``.npz`` or a bad argument (``check_policy``,
            ``check_transitions``, ``check_seed``, ``check_val_fraction``), before any data
            are collected.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"export path must end in .npz, got {path}")
    check_policy(policy)
    check_transitions(transitions)
    check_seed(seed)
    check_val_fraction(val_fraction)
    existing = [str(p) for p in (path, sidecar(path)) if p.exists()]
    if existing and not force:
        raise FileExistsError(f"{', '.join(existing)} already exist(s); pass --force to replace")
    data = collect(policy, transitions, seed, task)
    val = validation_mask(data, val_fraction, seed)
    record = metadata(data, val, val_fraction, seed)
    text = dumps(record, indent=2, sort_keys=True) + "\n"
    arrays = {name: value.cpu().numpy() for name, value in data.tensors().items()}
    arrays["val"] = val.cpu().numpy()
    arrays["metadata"] = np.array(text)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            np.savez_compressed(out, **arrays)

    write_atomic(path, write)
    write_text_atomic(sidecar(path), text)
    return record


def load_export(path: str | os.PathLike) -> tuple[TransitionDataset, np.ndarray, dict]:
    """Read an export: ``(dataset, val (N,) bool, metadata)``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is not a gridplan export, or its arrays do not give the
            fingerprint its metadata records (the file was altered).
    """
    path = Path(path)
    with np.load(path, allow_pickle=False) as npz:
        missing = [k for k in (*TENSOR_FIELDS, "val", "metadata") if k not in npz.files]
        if missing:
            raise ValueError(f"{path} is not a gridplan export: missing arrays {missing}")
        record = json.loads(str(npz["metadata"]))
        tensors = {name: torch.from_numpy(npz[name].copy()) for name in TENSOR_FIELDS}
        val = npz["val"].copy()
    if record.get("schema") != EXPORT_SCHEMA:
        raise ValueError(f"{path} has schema {record.get('schema')!r}, expected {EXPORT_SCHEMA!r}")
    data = TransitionDataset(**tensors, meta=record["meta"])
    if data.fingerprint() != record["fingerprint"]:
        raise ValueError(
            f"{path}: the arrays' fingerprint {data.fingerprint()} is not the recorded "
            f"{record['fingerprint']} (the file was altered)"
        )
    return data, val, record
