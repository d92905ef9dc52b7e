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

``export_sequences`` writes the same dataset as episode sequences for multi-step training
(Dreamer, TD-MPC): one row per visited state, ``M = N + E`` rows for ``N`` transitions in ``E``
episodes, episode after episode, each episode's ``T`` transitions giving ``T + 1`` rows. Row
``k`` of an episode holds

- ``obs``: the observation of ``state[k]`` (``gridplan.core.render.observe`` of the chosen
  kind: ``state`` ``(M, S)`` float32, ``grid`` ``(M, C, N, N)`` float32, ``pixels``
  ``(M, 3, 4N, 4N)`` uint8), ``state``: the ``(M, S)`` float32 normalized state;
- ``action``: the action taken at ``state[k]`` (int64 in ``0..3``; ``-1`` on an episode's last
  row), ``reward``: the reward of that step (float32; 0 on the last row), and the step's
  events ``pickup``, ``door_opened``, ``goal`` (bool; False on the last row); so
  ``state[k + 1]`` is ``gridplan.core.env.step(state[k], action[k])``'s next state and
  ``obs[k + 1]`` its observation;
- ``is_first``, ``is_last`` (bool): the episode's first and last rows; ``is_terminal`` (bool):
  ``state[k]`` ended the episode at the goal or hazard (an episode cut by the horizon or the
  budget ends with ``is_last`` alone);
- ``episode``, ``step`` (int64): the episode id and ``k``; ``val`` (bool): the trainer's
  validation episodes;

and ``metadata`` as above with schema ``SEQUENCE_SCHEMA``, ``obs_kind``, ``obs_shape``,
``obs_dtype`` and ``fields`` (these descriptions). ``load_sequences`` reads one back, rebuilds
the transitions from the rows and checks them against the recorded fingerprint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from gridplan.core.constants import ACTION_NAMES
from gridplan.core.render import check_kind, observe
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
#: Schema tag of an exported sequence file's ``metadata`` (``export_sequences``).
SEQUENCE_SCHEMA = "gridplan.sequences/1"
#: The arrays of a sequence file, what each row holds (module docstring).
SEQUENCE_FIELDS = {
    "obs": "observation of state[k]",
    "state": "normalized physical state at row k, (M, S) float32",
    "action": "action taken at state[k], int64 0..3; -1 on an episode's last row",
    "reward": "reward of that step, float32; 0 on the last row",
    "pickup": "the step picked the key up; False on the last row",
    "door_opened": "the step opened the door; False on the last row",
    "goal": "the step reached the active goal; False on the last row",
    "is_first": "the episode's first row",
    "is_last": "the episode's last row",
    "is_terminal": "state[k] ended the episode at the goal or hazard",
    "episode": "episode id, int64",
    "step": "k, the row's step in its episode, int64",
    "val": "the row's episode is one of the trainer's validation episodes",
}
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


def _collect(
    path: Path, policy: str, transitions: int, seed: int, task: Task, val_fraction: float,
    force: bool,
) -> tuple[TransitionDataset, torch.Tensor]:
    """Check every argument and the target files, then collect the dataset and its ``(N,)``
    validation mask (``export_dataset``'s Raises)."""
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
    return data, validation_mask(data, val_fraction, seed)


def _write(path: Path, arrays: dict[str, np.ndarray], record: dict) -> None:
    """``arrays`` and the ``metadata`` record into ``path`` (compressed), the record beside it."""
    text = dumps(record, indent=2, sort_keys=True) + "\n"
    arrays = {**arrays, "metadata": np.array(text)}

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            np.savez_compressed(out, **arrays)

    write_atomic(path, write)
    write_text_atomic(sidecar(path), text)


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
    data, val = _collect(path, policy, transitions, seed, task, val_fraction, force)
    record = metadata(data, val, val_fraction, seed)
    arrays = {name: value.cpu().numpy() for name, value in data.tensors().items()}
    arrays["val"] = val.cpu().numpy()
    _write(path, arrays, record)
    return record


def sequence_name(policy: str, transitions: int, seed: int, task: Task, kind: str) -> str:
    """File name of a sequence export: ``export_name``'s with ``-seq-<kind>`` before ``.npz``."""
    return export_name(policy, transitions, seed, task).removesuffix(".npz") + f"-seq-{kind}.npz"


def _check_chained(data: TransitionDataset) -> torch.Tensor:
    """``(N,)`` bool, the last transition of each episode, after checking that every episode
    is whole: steps ``0, 1, ...`` in order, each starting where the one before ended.

    Raises:
        ValueError: naming the first row that breaks the chain.
    """
    last = torch.ones(len(data), dtype=torch.bool, device=data.device)
    last[:-1] = data.episode[1:] != data.episode[:-1]
    first = torch.ones_like(last)
    first[1:] = last[:-1]
    expected_t = torch.where(first, torch.zeros_like(data.t), torch.roll(data.t, 1) + 1)
    gap = data.t != expected_t
    gap[1:] |= ~last[:-1] & (data.next_states[:-1] != data.states[1:]).any(dim=1)
    if gap.any():
        row = int(gap.nonzero()[0])
        raise ValueError(
            f"transition {row} (episode {int(data.episode[row])}, step {int(data.t[row])}) does "
            "not follow the one before it: sequences need whole episodes ordered by step, each "
            "step starting from the previous step's next state"
        )
    return last


def sequence_rows(data: TransitionDataset, val: torch.Tensor | None = None) -> dict:
    """The rows of ``data``'s episodes (module docstring), without ``obs``: ``(M, ...)``
    tensors by ``SEQUENCE_FIELDS`` name, ``M = N + E``.

    Args:
        data: transitions ordered by episode then step (as ``collect`` logs them).
        val: ``(N,)`` bool validation mask (default all False).

    Raises:
        ValueError: if an episode is not whole (``_check_chained``).
    """
    last = _check_chained(data)
    n, dev = len(data), data.device
    # Row of transition i: i, plus one closing row for each episode that ended before it.
    pos = torch.arange(n, device=dev) + torch.cumsum(last.long(), 0) - last.long()
    close = pos[last] + 1
    m = n + int(last.sum())
    val = torch.zeros(n, dtype=torch.bool, device=dev) if val is None else val

    def rows(at_step: torch.Tensor, at_close: torch.Tensor, fill) -> torch.Tensor:
        out = torch.full((m, *at_step.shape[1:]), fill, dtype=at_step.dtype, device=dev)
        out[pos] = at_step
        out[close] = at_close
        return out

    no_event = torch.zeros(int(last.sum()), dtype=torch.bool, device=dev)
    return {
        "state": rows(data.states, data.next_states[last], 0.0),
        "action": rows(data.actions, torch.full_like(data.actions[last], -1), -1),
        "reward": rows(data.rewards, torch.zeros_like(data.rewards[last]), 0.0),
        "pickup": rows(data.pickup, no_event, False),
        "door_opened": rows(data.door_opened, no_event, False),
        "goal": rows(data.goal, no_event, False),
        "is_first": rows(data.t == 0, no_event, False),
        "is_last": rows(torch.zeros_like(data.pickup), ~no_event, False),
        "is_terminal": rows(torch.zeros_like(data.pickup), data.terminated[last], False),
        "episode": rows(data.episode, data.episode[last], -1),
        "step": rows(data.t, data.t[last] + 1, -1),
        "val": rows(val, val[last], False),
    }


def export_sequences(
    path: str | os.PathLike,
    policy: str,
    transitions: int,
    seed: int,
    task: Task,
    kind: str = "state",
    val_fraction: float = VAL_FRACTION,
    force: bool = False,
) -> dict:
    """Collect the dataset ``export_dataset`` writes and write it as episode sequences of
    ``kind`` observations (module docstring) to ``path``, its record to ``sidecar(path)``;
    returns the record.

    Args:
        path, policy, transitions, seed, task, val_fraction, force: as ``export_dataset``.
        kind: the observation drawn (``gridplan.core.render.OBS_KINDS``).

    Raises:
        FileExistsError, ValueError: as ``export_dataset``; ValueError on an unknown ``kind``.
    """
    path = Path(path)
    check_kind(kind)
    data, val = _collect(path, policy, transitions, seed, task, val_fraction, force)
    rows = sequence_rows(data, val)
    obs = observe(rows["state"], data.world, kind)
    record = {
        **metadata(data, val, val_fraction, seed),
        "schema": SEQUENCE_SCHEMA,
        "obs_kind": kind,
        "obs_shape": list(obs.shape[1:]),
        "obs_dtype": str(obs.dtype).removeprefix("torch."),
        "rows": int(obs.shape[0]),
        "fields": SEQUENCE_FIELDS,
    }
    arrays = {name: value.cpu().numpy() for name, value in rows.items()}
    arrays["obs"] = obs.cpu().numpy()
    _write(path, arrays, record)
    return record


def transitions_of(arrays: dict, meta: dict) -> TransitionDataset:
    """The transitions a sequence file's rows hold (every row but an episode's last, with the
    next row's state), as a ``TransitionDataset`` with ``meta``: the inverse of
    ``sequence_rows``."""
    t = {k: torch.as_tensor(np.asarray(arrays[k])) for k in SEQUENCE_FIELDS if k != "obs"}
    step = ~t["is_last"]
    nxt = torch.roll(step, 1)
    return TransitionDataset(
        states=t["state"][step],
        actions=t["action"][step],
        next_states=t["state"][nxt],
        rewards=t["reward"][step],
        terminated=t["is_terminal"][nxt],
        pickup=t["pickup"][step],
        door_opened=t["door_opened"][step],
        goal=t["goal"][step],
        episode=t["episode"][step],
        t=t["step"][step],
        meta=meta,
    )


def load_sequences(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """Read a sequence export: ``(arrays by SEQUENCE_FIELDS name, metadata)``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if the file is not a sequence export, or the transitions its rows hold
            do not give the recorded fingerprint (the file was altered).
    """
    path = Path(path)
    with np.load(path, allow_pickle=False) as npz:
        missing = [k for k in (*SEQUENCE_FIELDS, "metadata") if k not in npz.files]
        if missing:
            raise ValueError(f"{path} is not a gridplan sequence export: missing {missing}")
        record = json.loads(str(npz["metadata"]))
        arrays = {name: npz[name].copy() for name in SEQUENCE_FIELDS}
    if record.get("schema") != SEQUENCE_SCHEMA:
        raise ValueError(
            f"{path} has schema {record.get('schema')!r}, expected {SEQUENCE_SCHEMA!r}"
        )
    found = transitions_of(arrays, record["meta"]).fingerprint()
    if found != record["fingerprint"]:
        raise ValueError(
            f"{path}: the rows' fingerprint {found} is not the recorded "
            f"{record['fingerprint']} (the file was altered)"
        )
    return arrays, record


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
