"""Logged transition datasets and held-out evaluation windows (paper §5.4, §5.5, appendix).

Two behaviour policies log transitions ``(s, a, s', reward, terminated, events)`` from the true
environment, batched over ``COLLECT_ENVS`` parallel episodes and seeded by one explicit
``torch.Generator``:

- ``random``: uniform actions. Picking up the key needs a random walk onto one cell of the
  western chamber, and opening the door needs a carried key walked into the door cell, so
  these events are rare (the paper's random-data model "rarely sees a key pickup").
- ``balanced``: an epsilon-greedy mixture over the exact optimal policy. At every reset an
  episode draws its exploration rate uniformly from ``BALANCED_EPSILONS``; each step it acts
  uniformly at random with that probability and greedily on exact ``Q*``
  (``value_table(task).q_values``, ties broken at random) otherwise. The low-epsilon episodes
  pick up the key and open the door almost every time; the high-epsilon ones cover the state
  space around those paths.
- ``expert``: the exact optimal policy alone (greedy on ``Q*``, ties broken at random, no
  exploration): the transitions of the oracle planner. Every episode picks up the key, opens
  the door and reaches the goal along a shortest path, so the data hold no state off the
  optimal paths (the policy-shift case of a narrow behaviour policy).

Episodes end at a goal or hazard (``terminated``) or are truncated after ``task.horizon``
steps (60 in the paper's tasks), and the slot restarts from a fresh ``reset``. Files store
the task's name (``meta["task"]``) and its world (``meta["world"]``, ``gridplan.core.world``;
a file without one holds the default world). Budgets are transition counts
(``parse_budget("12k") == 12000``). ``TransitionDataset.observations`` draws the logged
states as grid or pixel observations on demand (``gridplan.core.render``), for the latent
models (``gridplan.training.latent_module``).

Letter legend: ``N`` transitions, ``W`` windows, ``H`` window length, ``S`` state dims
(``world.state_dim``, 12 in the default world).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gridplan.core import dynamics
from gridplan.core.constants import STATE_LAYOUT_VERSION
from gridplan.core.env import check_state
from gridplan.core.render import PIXELS_PER_CELL, observe
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.core.world import World, recorded
from gridplan.util.files import write_atomic

BEHAVIOUR_POLICIES = ("random", "balanced", "expert")
#: Per-episode exploration rates of the ``balanced`` mixture, drawn uniformly at each reset.
BALANCED_EPSILONS = (0.1, 0.3, 0.5, 1.0)
#: The ``expert`` policy's exploration rate: none.
EXPERT_EPSILONS = (0.0,)
#: Parallel episodes used by ``collect`` (fewer when the budget is smaller).
COLLECT_ENVS = 128
#: Schema tag written into every saved dataset file.
DATASET_SCHEMA = "gridplan.transitions/1"
#: Schema tag of a saved ``EvalWindows`` file.
WINDOWS_SCHEMA = "gridplan.windows/1"

_STATE_FIELDS = ("states", "next_states")
_FLOAT_FIELDS = ("rewards",)
_BOOL_FIELDS = ("terminated", "pickup", "door_opened", "goal")
_LONG_FIELDS = ("actions", "episode", "t")
TENSOR_FIELDS = _STATE_FIELDS + ("actions", "rewards") + _BOOL_FIELDS + ("episode", "t")


def parse_budget(x: str | int) -> int:
    """Transition budget from ``"12k"``, ``"20000"`` or an int.

    Raises:
        ValueError: if ``x`` is not a positive integer count (``"k"`` suffix = thousands).
    """
    if isinstance(x, bool):
        raise ValueError(f"budget must be a transition count like '12k' or 20000, got {x!r}")
    if isinstance(x, int):
        value = x
    elif isinstance(x, str):
        match = re.fullmatch(r"\s*(\d+)\s*([kK]?)\s*", x)
        if match is None:
            raise ValueError(f"budget must be a transition count like '12k' or 20000, got {x!r}")
        value = int(match.group(1)) * (1000 if match.group(2) else 1)
    else:
        raise ValueError(f"budget must be a str or int, got {type(x).__name__}")
    if value < 1:
        raise ValueError(f"budget must be >= 1 transition, got {x!r}")
    return value


def check_val_fraction(val_fraction: float) -> float:
    """Return ``val_fraction`` if it lies in ``(0, 1)``, the fraction of episodes held out.

    Raises:
        ValueError: naming the value otherwise.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    return val_fraction


def check_policy(policy: str) -> str:
    """Return ``policy`` if it is a known behaviour policy.

    Raises:
        ValueError: listing the valid policies otherwise.
    """
    if policy not in BEHAVIOUR_POLICIES:
        raise ValueError(
            f"unknown behaviour policy {policy!r}; valid policies are "
            f"{', '.join(BEHAVIOUR_POLICIES)}"
        )
    return policy


def _policy_meta(policy: str) -> dict:
    if policy == "random":
        return {"mixture": "uniform actions"}
    if policy == "expert":
        return {"mixture": "greedy on exact Q*, random tie-breaks, no exploration"}
    return {
        "mixture": "per-episode epsilon-greedy on exact Q*, random tie-breaks",
        "epsilons": list(BALANCED_EPSILONS),
    }


class _Behaviour:
    """Batched behaviour policy with per-row exploration rates (one per running episode)."""

    def __init__(self, policy: str, task: Task, device: torch.device) -> None:
        self.policy = check_policy(policy)
        self.table = dynamics.value_table(task, device) if policy != "random" else None
        self.n_actions = task.world.n_actions
        rates = EXPERT_EPSILONS if policy == "expert" else BALANCED_EPSILONS
        self.epsilons = torch.tensor(rates, device=device)

    def draw_eps(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        """``(batch,)`` exploration rates for fresh episodes (1 for ``random``)."""
        if self.table is None:
            return torch.ones(batch, device=generator.device)
        idx = torch.randint(
            0, len(self.epsilons), (batch,), generator=generator, device=generator.device
        )
        return self.epsilons[idx]

    def act(self, state: torch.Tensor, eps: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """``(B,)`` long actions for ``(B, 12)`` true states."""
        b, device = state.shape[0], state.device
        uniform = torch.randint(0, self.n_actions, (b,), generator=gen, device=device)
        if self.table is None:
            return uniform
        q = self.table.q_values(state)
        best = q >= q.max(dim=1, keepdim=True).values - 1e-6
        # Random scores in [0, 1) lifted by 1 on optimal actions: argmax is a uniform tie-break.
        greedy = (torch.rand(q.shape, generator=gen, device=device) + best.float()).argmax(dim=1)
        explore = torch.rand(b, generator=gen, device=device) < eps
        return torch.where(explore, uniform, greedy)


@dataclass
class TransitionDataset:
    """Logged transitions of a behaviour policy, ordered by episode then step.

    Attributes:
        states: ``(N, S)`` float32, normalized ``[0, 1]`` (``S = world.state_dim``).
        actions: ``(N,)`` long in ``0..3``.
        next_states: ``(N, S)`` float32.
        rewards: ``(N,)`` float32 true rewards.
        terminated: ``(N,)`` bool, goal or hazard reached (truncation at the horizon is not).
        pickup: ``(N,)`` bool, the key was picked up in this transition.
        door_opened: ``(N,)`` bool, the door was opened in this transition.
        goal: ``(N,)`` bool, the active goal was reached.
        episode: ``(N,)`` long episode id.
        t: ``(N,)`` long step index within the episode (0 for the first transition).
        meta: generating config: policy, transitions, seed, task, world, horizon,
            layout_version and the policy's mixture parameters.

    Raises:
        ValueError: if the dataset is empty or a field has the wrong shape or dtype.
    """

    states: torch.Tensor
    actions: torch.Tensor
    next_states: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    pickup: torch.Tensor
    door_opened: torch.Tensor
    goal: torch.Tensor
    episode: torch.Tensor
    t: torch.Tensor
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in TENSOR_FIELDS:
            if not isinstance(getattr(self, name), torch.Tensor):
                raise ValueError(f"dataset field {name!r} must be a torch.Tensor")
        n = self.states.shape[0] if self.states.dim() == 2 else -1
        if n == 0:
            raise ValueError("dataset is empty (0 transitions)")
        world = self.world
        for name in _STATE_FIELDS:
            value = getattr(self, name)
            if value.shape != (n, world.state_dim) or value.dtype != torch.float32:
                raise ValueError(
                    f"dataset field {name!r} must be float32 of shape (N, {world.state_dim}) "
                    f"(world {world.name!r}), got {value.dtype} {tuple(value.shape)}"
                )
            check_state(value, f"dataset field {name!r}", world)
        expected = dict.fromkeys(_FLOAT_FIELDS, torch.float32)
        expected.update(dict.fromkeys(_BOOL_FIELDS, torch.bool))
        expected.update(dict.fromkeys(_LONG_FIELDS, torch.long))
        for name, dtype in expected.items():
            value = getattr(self, name)
            if value.shape != (n,) or value.dtype != dtype:
                raise ValueError(
                    f"dataset field {name!r} must be {dtype} of shape ({n},), got "
                    f"{value.dtype} {tuple(value.shape)}"
                )
        if self.actions.min() < 0 or self.actions.max() >= world.n_actions:
            raise ValueError(f"dataset actions must lie in 0..{world.n_actions - 1}")

    def __len__(self) -> int:
        return self.states.shape[0]

    @property
    def world(self) -> World:
        """The world the transitions were logged in (``meta["world"]``)."""
        return recorded(self.meta, "dataset meta")

    @property
    def device(self) -> torch.device:
        return self.states.device

    def event_counts(self) -> dict[str, int]:
        """Counts of ``pickups``, ``door_openings``, ``goals``, distinct ``episodes`` and
        ``transitions``."""
        return {
            "pickups": int(self.pickup.sum()),
            "door_openings": int(self.door_opened.sum()),
            "goals": int(self.goal.sum()),
            "episodes": int(torch.unique(self.episode).numel()),
            "transitions": len(self),
        }

    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensor fields by name."""
        return {name: getattr(self, name) for name in TENSOR_FIELDS}

    def observations(
        self,
        kind: str,
        which: str = "states",
        rows: torch.Tensor | slice | None = None,
        pixels_per_cell: int = PIXELS_PER_CELL,
    ) -> torch.Tensor:
        """Observations of the logged states, drawn on demand
        (``gridplan.core.render.observe``), so a saved dataset holds states only.

        Args:
            kind: ``state``, ``grid`` or ``pixels`` (``gridplan.core.render.OBS_KINDS``).
            which: ``states`` (before each step) or ``next_states`` (after it).
            rows: index or slice of the rows drawn (default all ``N``).
            pixels_per_cell: tile side of ``pixels``.

        Returns:
            ``(n, *obs_shape)``: float32 (``state``, ``grid``) or uint8 (``pixels``).

        Raises:
            ValueError: on an unknown kind or ``which``.
        """
        if which not in _STATE_FIELDS:
            raise ValueError(f"which must be one of {', '.join(_STATE_FIELDS)}, got {which!r}")
        states = getattr(self, which)
        if rows is not None:
            states = states[rows]
        return observe(states, self.world, kind, pixels_per_cell)

    def fingerprint(self) -> str:
        """Short sha256 hex (16 chars) of every tensor's bytes and the meta; device-independent."""
        digest = hashlib.sha256()
        for name, value in self.tensors().items():
            digest.update(name.encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        digest.update(json.dumps(self.meta, sort_keys=True, default=str).encode())
        return digest.hexdigest()[:16]

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the dataset with ``torch.save``: a dict ``{"schema", "tensors", "meta_json"}``.

        The file is written to a unique temporary name and renamed (``gridplan.util.files``), so
        a failed write never leaves a half-written dataset behind and parallel jobs writing
        the same dataset never tear it. Parent folders are created.

        Args:
            path: target file (conventionally ``*.pt``).
            overwrite: replace an existing file.

        Returns:
            The path written.

        Raises:
            FileExistsError: if ``path`` exists and ``overwrite`` is False.
        """
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(f"dataset file {path} already exists; pass overwrite=True")
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "schema": DATASET_SCHEMA,
            "tensors": {k: v.detach().cpu() for k, v in self.tensors().items()},
            "meta_json": json.dumps(self.meta, sort_keys=True),
        }
        return write_atomic(path, lambda tmp: torch.save(payload, tmp))

    @classmethod
    def load(cls, path: str | os.PathLike, device: torch.device | str = "cpu") -> TransitionDataset:
        """Read a dataset written by ``save`` and check its schema.

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            ValueError: naming the problem if the file is not a gridplan dataset (unreadable,
                wrong schema tag, missing keys, wrong shapes or dtypes, another state layout).
        """
        path = Path(path)
        payload = _read_payload(path, "dataset")
        if not isinstance(payload, dict) or "schema" not in payload:
            raise ValueError(f"{path} is not a gridplan dataset file (no schema tag)")
        if payload["schema"] != DATASET_SCHEMA:
            raise ValueError(
                f"{path} has schema {payload['schema']!r}, expected {DATASET_SCHEMA!r}"
            )
        tensors = payload.get("tensors")
        if not isinstance(tensors, dict):
            raise ValueError(f"{path} has no 'tensors' dict")
        missing = [k for k in TENSOR_FIELDS if k not in tensors]
        extra = [k for k in tensors if k not in TENSOR_FIELDS]
        if missing or extra:
            raise ValueError(f"{path} has missing keys {missing} and unexpected keys {extra}")
        try:
            meta = json.loads(payload.get("meta_json", ""))
        except (TypeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path} has no readable 'meta_json': {err}") from err
        version = meta.get("layout_version")
        if version != STATE_LAYOUT_VERSION:
            raise ValueError(
                f"{path} was written with state layout version {version}, this code reads "
                f"version {STATE_LAYOUT_VERSION}"
            )
        try:
            data = cls(**tensors, meta=meta)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
        return data.to(device)

    def to(self, device: torch.device | str) -> TransitionDataset:
        """A copy with every tensor on ``device`` (meta shared)."""
        return dataclasses.replace(
            self, **{k: v.to(device) for k, v in self.tensors().items()}, meta=dict(self.meta)
        )

    def subset(self, mask: torch.Tensor) -> TransitionDataset:
        """The rows where ``mask`` (``(N,)`` bool) is True.

        Raises:
            ValueError: if the subset would be empty.
        """
        return dataclasses.replace(
            self, **{k: v[mask] for k, v in self.tensors().items()}, meta=dict(self.meta)
        )

    def split_by_episode(
        self, val_fraction: float, seed: int
    ) -> tuple[TransitionDataset, TransitionDataset]:
        """Split into train and validation sets with no episode in both.

        ``round(val_fraction * E)`` of the ``E`` episodes (at least 1, at most ``E - 1``),
        chosen by a seeded permutation, go to validation.

        Args:
            val_fraction: fraction of episodes for validation, in ``(0, 1)``.
            seed: seed of the permutation.

        Returns:
            ``(train, val)``; each meta gains ``split`` and ``val_fraction``.

        Raises:
            ValueError: if ``val_fraction`` is outside ``(0, 1)`` or there are < 2 episodes.
        """
        check_val_fraction(val_fraction)
        episodes = torch.unique(self.episode.cpu())
        n_ep = episodes.numel()
        if n_ep < 2:
            raise ValueError(f"cannot split {n_ep} episode(s) into train and validation")
        n_val = min(max(round(val_fraction * n_ep), 1), n_ep - 1)
        perm = torch.randperm(n_ep, generator=torch.Generator().manual_seed(seed))
        val_ids = episodes[perm[:n_val]].to(self.device)
        in_val = torch.isin(self.episode, val_ids)
        parts = []
        for name, mask in (("train", ~in_val), ("val", in_val)):
            part = self.subset(mask)
            part.meta.update(split=name, val_fraction=val_fraction, split_seed=seed)
            parts.append(part)
        return parts[0], parts[1]


def collect(
    policy: str,
    transitions: int,
    seed: int,
    task: Task = TASK_A,
    device: torch.device | str = "cpu",
) -> TransitionDataset:
    """Log exactly ``transitions`` true transitions of a behaviour policy.

    ``min(COLLECT_ENVS, transitions)`` episodes run in lockstep; a slot whose episode
    terminates or reaches ``task.horizon`` steps restarts from a fresh reset. Every random draw
    (resets, distractors, actions, epsilons) comes from one
    ``torch.Generator(device).manual_seed(seed)``, so the same arguments give the same
    dataset on the same device. Rows are ordered by episode id, then step; the last steps
    logged may cut episodes short.

    Args:
        policy: ``"random"``, ``"balanced"`` or ``"expert"`` (see the module docstring).
        transitions: budget ``N >= 1``.
        seed: generator seed.
        task: rewards, terminations, horizon and the ``balanced`` policy's Q*.
        device: where to simulate and store the tensors.

    Returns:
        A TransitionDataset of ``N`` rows.

    Raises:
        ValueError: on an unknown policy (listing the valid ones) or ``transitions < 1``.
        TypeError: if ``task`` is not a ``Task``.
    """
    check_policy(policy)
    check(task)
    if isinstance(transitions, bool) or not isinstance(transitions, int) or transitions < 1:
        raise ValueError(f"transitions must be an integer >= 1, got {transitions!r}")
    gen = torch.Generator(device=device).manual_seed(seed)
    device = gen.device
    behaviour = _Behaviour(policy, task, device)
    b = min(COLLECT_ENVS, transitions)
    state = dynamics.reset(task, b, gen)
    eps = behaviour.draw_eps(b, gen)
    episode = torch.arange(b, device=device)
    next_id = torch.tensor(b, device=device)
    t = torch.zeros(b, dtype=torch.long, device=device)
    rows: dict[str, list[torch.Tensor]] = {k: [] for k in TENSOR_FIELDS}
    for _ in range(-(-transitions // b)):
        action = behaviour.act(state, eps, gen)
        nxt, reward, terminated, info = dynamics.transition(task, state, action, gen)
        logged = {
            "states": state,
            "actions": action,
            "next_states": nxt,
            "rewards": reward.float(),
            "terminated": terminated,
            "pickup": info["pickup"],
            "door_opened": info["door_opened"],
            "goal": info["goal"],
            "episode": episode,
            "t": t,
        }
        for name, value in logged.items():
            rows[name].append(value)
        t = t + 1
        done = terminated | (t >= task.horizon)
        # Draw a full fresh batch every step (no host sync on how many episodes ended).
        state = torch.where(done.unsqueeze(1), dynamics.reset(task, b, gen), nxt)
        eps = torch.where(done, behaviour.draw_eps(b, gen), eps)
        new_ids = next_id + torch.cumsum(done.long(), 0) - 1
        episode = torch.where(done, new_ids, episode)
        next_id = next_id + done.sum()
        t = torch.where(done, torch.zeros_like(t), t)
    flat = {k: torch.cat(v)[:transitions] for k, v in rows.items()}
    order = torch.argsort(flat["episode"] * (task.horizon + 1) + flat["t"])
    meta = {
        "policy": policy,
        "transitions": transitions,
        "seed": seed,
        "task": task.name,
        "world": task.world.spec(),
        "horizon": task.horizon,
        "layout_version": STATE_LAYOUT_VERSION,
        "n_envs": b,
        **_policy_meta(policy),
    }
    return TransitionDataset(**{k: v[order] for k, v in flat.items()}, meta=meta)


@dataclass
class EvalWindows:
    """Held-out windows of ``H`` consecutive logged behaviour-policy steps (paper §5.5).

    Attributes:
        start: ``(W, S)`` true state before the first step (= ``prev[:, 0]``).
        actions: ``(W, H)`` long logged actions.
        targets: ``(W, H, S)`` true next states ``s_1 .. s_H``.
        pickup: ``(W, H)`` bool, the true step ``t`` picked up the key.
        door_opened: ``(W, H)`` bool, the true step ``t`` opened the door.
        prev: ``(W, H, S)`` true state before each step, ``s_0 .. s_{H-1}``.
        meta: generating config (policy, seed, task, world, horizon, n_windows,
            layout_version, ...).
    """

    start: torch.Tensor
    actions: torch.Tensor
    targets: torch.Tensor
    pickup: torch.Tensor
    door_opened: torch.Tensor
    prev: torch.Tensor
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.start.shape[0]

    @property
    def horizon(self) -> int:
        return self.actions.shape[1]

    @property
    def world(self) -> World:
        """The world the windows were logged in (``meta["world"]``)."""
        return recorded(self.meta, "windows meta")

    def check(self) -> EvalWindows:
        """Validate shapes, dtypes and finiteness; returns ``self``.

        Raises:
            ValueError: naming the offending field and its shape.
        """
        s = self.world.state_dim
        if not isinstance(self.start, torch.Tensor) or self.start.dim() != 2:
            raise ValueError(f"windows.start must be a (W, {s}) tensor")
        w = self.start.shape[0]
        if w < 1:
            raise ValueError("windows are empty (W = 0)")
        if not isinstance(self.actions, torch.Tensor) or self.actions.dim() != 2:
            raise ValueError("windows.actions must be a (W, H) tensor")
        h = self.actions.shape[1]
        if h < 1:
            raise ValueError(f"window horizon H must be >= 1, got {h}")
        shapes = {
            "start": (w, s),
            "actions": (w, h),
            "targets": (w, h, s),
            "pickup": (w, h),
            "door_opened": (w, h),
            "prev": (w, h, s),
        }
        for name, shape in shapes.items():
            value = getattr(self, name)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value)
                raise ValueError(f"windows.{name} must have shape {shape}, got {got}")
        for name in ("start", "targets", "prev"):
            value = getattr(self, name)
            if not value.is_floating_point() or not torch.isfinite(value).all():
                raise ValueError(f"windows.{name} must be finite floating point")
        if self.actions.is_floating_point() or self.actions.dtype == torch.bool:
            raise ValueError(f"windows.actions must be integer, got {self.actions.dtype}")
        a = self.world.n_actions
        if self.actions.min() < 0 or self.actions.max() >= a:
            raise ValueError(f"windows.actions must lie in 0..{a - 1}")
        for name in ("pickup", "door_opened"):
            if getattr(self, name).dtype != torch.bool:
                raise ValueError(f"windows.{name} must be bool")
        return self

    def save(self, path: str | os.PathLike) -> Path:
        """Write the windows with ``torch.save`` (``{"schema", "tensors", "meta_json"}``),
        atomically (``gridplan.util.files``); returns ``path``."""
        payload = {
            "schema": WINDOWS_SCHEMA,
            "tensors": {
                f.name: getattr(self, f.name).detach().cpu()
                for f in dataclasses.fields(self)
                if f.name != "meta"
            },
            "meta_json": json.dumps(self.meta, sort_keys=True),
        }
        return write_atomic(path, lambda tmp: torch.save(payload, tmp))

    @classmethod
    def load(cls, path: str | os.PathLike) -> EvalWindows:
        """Read windows written by ``save``, checked (``check``), on CPU.

        Raises:
            FileNotFoundError: if ``path`` does not exist.
            ValueError: naming the problem if the file is not a gridplan windows file
                (unreadable, wrong schema tag, bad fields, another state layout).
        """
        path = Path(path)
        payload = _read_payload(path, "windows")
        if not isinstance(payload, dict) or payload.get("schema") != WINDOWS_SCHEMA:
            raise ValueError(f"{path} is not a gridplan windows file ({WINDOWS_SCHEMA})")
        try:
            windows = cls(**payload["tensors"], meta=json.loads(payload["meta_json"]))
        except (KeyError, TypeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path} has malformed windows: {err}") from err
        layout = windows.meta.get("layout_version")
        if layout != STATE_LAYOUT_VERSION:
            raise ValueError(
                f"{path} holds state layout {layout}, this gridplan uses {STATE_LAYOUT_VERSION}"
            )
        return windows.check()

    def to(self, device: torch.device | str) -> EvalWindows:
        """A copy with every tensor on ``device``."""
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if f.name != "meta"
        }
        return dataclasses.replace(self, **moved, meta=dict(self.meta))


def _read_payload(path: Path, what: str):
    """``torch.load`` of a gridplan ``what`` file (tensors and plain values only).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: if it cannot be read, with the first line of torch's reason.
    """
    if not path.exists():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several unrelated types for a corrupt file
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path} is not a readable gridplan {what} file: {reason}") from err


def eval_windows(
    n_windows: int,
    horizon: int = 10,
    seed: int = 10_000,
    policy: str = "balanced",
    task: Task = TASK_A,
    device: torch.device | str = "cpu",
) -> EvalWindows:
    """Held-out evaluation windows of ``H`` consecutive behaviour-policy steps.

    Windows are cut from whole logged episodes that run at least ``H`` steps without
    terminating before step ``H`` of the window: rounds of ``max(n_windows, 256)`` behaviour
    episodes are played from fresh resets (up to ``task.horizon`` steps); every episode of
    length ``>= H`` contributes one window whose start step is uniform over the
    ``len - H + 1`` possible starts; rounds repeat until ``n_windows`` windows exist, and the first
    ``n_windows`` are kept. No window crosses an episode end (a terminating step may be the
    last of a window). Conditioning on length ``>= H`` slightly favours the longer, more
    exploratory episodes of the mixture. The default seed 10 000 is kept apart from the small
    seeds used for training data, so the windows are held out.

    Args:
        n_windows: ``W >= 1``.
        horizon: ``H`` in ``1..task.horizon`` (paper: 10).
        seed: generator seed (separate from the seeds that draw the training data).
        policy: behaviour policy, ``"balanced"`` by default.
        task: rewards, terminations, episode length and the behaviour policy's Q*.
        device: where to simulate and store.

    Returns:
        EvalWindows with ``W`` windows.

    Raises:
        ValueError: if ``n_windows < 1``, ``horizon`` is outside ``1..task.horizon``, or the
            policy is unknown.
        TypeError: if ``task`` is not a ``Task``.
    """
    check_policy(policy)
    check(task)
    if isinstance(n_windows, bool) or not isinstance(n_windows, int) or n_windows < 1:
        raise ValueError(f"n_windows must be an integer >= 1, got {n_windows!r}")
    longest = task.horizon
    if isinstance(horizon, bool) or not isinstance(horizon, int) or not 1 <= horizon <= longest:
        raise ValueError(f"horizon H must be an integer in 1..{longest}, got {horizon!r}")
    gen = torch.Generator(device=device).manual_seed(seed)
    device = gen.device
    behaviour = _Behaviour(policy, task, device)
    b = max(n_windows, 256)
    parts: list[dict[str, torch.Tensor]] = []
    have = 0
    while have < n_windows:
        part = _window_round(behaviour, b, horizon, task, gen)
        parts.append(part)
        have += part["start"].shape[0]
    cat = {k: torch.cat([p[k] for p in parts])[:n_windows] for k in parts[0]}
    meta = {
        "policy": policy,
        "seed": seed,
        "task": task.name,
        "world": task.world.spec(),
        "horizon": horizon,
        "n_windows": n_windows,
        "layout_version": STATE_LAYOUT_VERSION,
        "windows": "one per behaviour episode of length >= H, uniform start step",
        **_policy_meta(policy),
    }
    return EvalWindows(**cat, meta=meta)


def _window_round(
    behaviour: _Behaviour, b: int, horizon: int, task: Task, gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """Play ``b`` episodes and cut one window from each that runs ``>= horizon`` steps."""
    device = gen.device
    state = dynamics.reset(task, b, gen)
    eps = behaviour.draw_eps(b, gen)
    alive = torch.ones(b, dtype=torch.bool, device=device)
    length = torch.zeros(b, dtype=torch.long, device=device)
    states, actions, pickups, doors = [state], [], [], []
    for _ in range(task.horizon):
        action = behaviour.act(state, eps, gen)
        state, _, terminated, info = dynamics.transition(task, state, action, gen)
        states.append(state)
        actions.append(action)
        pickups.append(info["pickup"])
        doors.append(info["door_opened"])
        length += alive.long()
        alive = alive & ~terminated
    traj = torch.stack(states, dim=1)  # (b, task.horizon + 1, S)
    act = torch.stack(actions, dim=1)
    pick = torch.stack(pickups, dim=1)
    door = torch.stack(doors, dim=1)
    keep = length >= horizon
    n_starts = (length - horizon + 1).clamp(min=1)
    first = (torch.rand(b, generator=gen, device=device) * n_starts).long()
    rows = torch.arange(b, device=device)[keep]
    steps = first[keep].unsqueeze(1) + torch.arange(horizon, device=device)
    r = rows.unsqueeze(1)
    return {
        "start": traj[rows, first[keep]],
        "actions": act[r, steps],
        "targets": traj[r, steps + 1],
        "pickup": pick[r, steps],
        "door_opened": door[r, steps],
        "prev": traj[r, steps],
    }
