"""The members of a stack (``gridplan.training.engine.WorldModelModule``): one per run.

A *member* is one training run, trained alone (a stack of one, ``gridplan.training.runs``)
or beside others (``gridplan.training.vectorized``). ``prepare`` makes each member's
bookkeeping (``_Run``: data rows, epoch length, initial network, data stream) and the
training and validation buffers the stack indexes, every distinct dataset stored once.
Each member replays its run alone exactly:

- **initial weights**: built from the member's ``seed`` as a run alone builds them
  (``torch.manual_seed(seed)``, then ``MLPDynamics``; ``member_init``);
- **minibatch order**: the member's data stream continues the global generator's state after
  that initialisation and makes, per epoch, the draws ``torch.utils.data`` makes in a run
  alone: the training iterator's base seed, the ``RandomSampler`` seed of the epoch's
  permutation, the validation iterator's base seed (``epoch_order``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.models.learned import MLPDynamics
from gridplan.training.config import config_task, run_name, validate
from gridplan.training.module import TransitionDataModule, next_rows

#: Config keys that must agree across a group (the shape of the stacked network and where
#: and how it runs); every other key may differ per member.
GROUP_KEYS = (
    "world",
    "model.hidden",
    "model.activation",
    "model.predict_delta",
    "model.members",
    "trainer.accelerator",
    "trainer.deterministic",
    "threads",
)


def _draw_seed(stream: torch.Generator) -> int:
    """One int64 seed, drawn the way ``torch.utils.data`` draws from the global generator."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=stream).item())


def epoch_order(stream: torch.Generator, n: int) -> torch.Tensor:
    """The permutation of ``n`` training rows an epoch visits, ``(n,)`` long: the one a
    Lightning run with a shuffled ``DataLoader`` over its rows visits (how runs alone drew
    their batches before they were stacks of one; same seed, same batches).

    ``stream`` stands for that run's global torch generator and is advanced by exactly the
    draws it makes per epoch: the training ``DataLoader`` iterator's base seed, the
    ``RandomSampler`` seed (its permutation is ``randperm(n)`` under a generator seeded with
    it) and the validation iterator's base seed.
    """
    _draw_seed(stream)
    seed = _draw_seed(stream)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    _draw_seed(stream)
    return order


def member_init(config: dict) -> tuple[MLPDynamics, torch.Generator]:
    """A member's initial network and data stream, exactly as its run alone makes them.

    The process's global generator is left untouched.

    Args:
        config: a resolved run config (plain dict).

    Returns:
        ``(net, stream)``: the one-member ``MLPDynamics`` after ``torch.manual_seed(seed)``,
        and a CPU generator holding the global generator's state right after it.
    """
    m = config["model"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(config["seed"]))
        world = worlds.get(config["world"])
        net = MLPDynamics(
            m["hidden"], 1, m["activation"], m["predict_delta"], world.state_dim, world.n_actions
        )
        stream = torch.Generator()
        stream.set_state(torch.get_rng_state())
    return net, stream


def _get(config: dict, dotted: str):
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def group_key(config: dict) -> tuple:
    """Hashable key of ``GROUP_KEYS``: runs with equal keys can train in one group."""
    return tuple(json.dumps(_get(config, k), sort_keys=True) for k in GROUP_KEYS)


@dataclass(frozen=True)
class Member:
    """One run of a stack.

    Attributes:
        config: the run's composed config (``gridplan.training.config.compose``), as its run
            alone gets.
        run_dir: its run folder (created by the caller; ``config.yaml``, ``checkpoints/``,
            ``metrics.json`` and TensorBoard events are written into it); None for a run
            alone, whose folder its trainer writes (``alone``).
        resample_seed: if set, the run trains on a bootstrap resample of its training split
            (``n`` rows drawn with replacement by ``torch.Generator().manual_seed(seed)``)
            instead of the split itself; validation and windows stay the run's own.
    """

    config: DictConfig
    run_dir: Path | None
    resample_seed: int | None = None


@dataclass
class _Snapshot:
    """A member's weights and AdamW state at the end of one epoch."""

    epoch: int
    global_step: int
    score: float
    weights: list[torch.Tensor]
    moments: list[dict[str, torch.Tensor]]


@dataclass
class _Run:
    """Bookkeeping of one member: data, stopping state, snapshots, logger, result."""

    index: int
    member: Member
    config: dict
    label: str
    data: TransitionDataModule
    summary: dict
    rows: torch.Tensor
    val_rows: torch.Tensor
    stream: torch.Generator
    steps: int
    batch: int
    windows_key: str
    init: MLPDynamics
    #: ``trainer.max_steps`` (None: no cap).
    max_steps: int | None = None
    #: Optimizer steps the member takes in the current epoch (``steps`` or fewer at its cap).
    epoch_steps: int = 0
    logger: Logger | None = None
    #: ``SummaryWriter``-shaped writer of ``logger`` (``gridplan.training.loggers.metric_writer``).
    writer: Any = None
    wait: int = 0
    stop_best: float = math.inf
    stop_signaled: bool = False
    reason: str = ""
    epochs: int = 0
    global_step: int = 0
    best: _Snapshot | None = None
    last: _Snapshot | None = None
    finished_seconds: float | None = None
    result: tuple[dict, dict] | None = None
    train_steps: list[tuple[int, float]] = field(default_factory=list)

    @property
    def task(self) -> tasks.Task:
        return config_task(self.config)

    @property
    def trainer_cfg(self) -> dict:
        return self.config["trainer"]

    @property
    def horizon(self) -> int:
        """``H`` of the member's loss (``variant.rollout_horizon``)."""
        return int(self.config["variant"].get("rollout_horizon", 1))

    def steps_now(self) -> int:
        """Optimizer steps of the member's next epoch: ``steps``, or fewer where its
        ``max_steps`` falls inside it."""
        if self.max_steps is None:
            return self.steps
        return max(0, min(self.steps, self.max_steps - self.global_step))

    @property
    def cohort_key(self) -> tuple:
        m, t = self.config["model"], self.config["trainer"]
        cap = -math.inf if self.max_steps is None else -self.max_steps
        return (-self.steps, float(m["lr"]), float(m["weight_decay"]), int(t["max_epochs"]), cap)


def _data_key(data_cfg: dict) -> str:
    return json.dumps(data_cfg, sort_keys=True)


def _windows_key(data_cfg: dict) -> str:
    keys = ("windows", "window_horizon", "window_seed", "window_policy", "task")
    return json.dumps({k: data_cfg[k] for k in keys}, sort_keys=True)


def _bootstrap(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, n, (n,), generator=torch.Generator().manual_seed(int(seed)))


def prepare(members: Sequence[Member]) -> tuple[list[_Run], dict[str, torch.Tensor]]:
    """Per-member runs and the shared train/validation buffers (each dataset stored once).

    Raises:
        ValueError: if a config fails validation, the members disagree on ``GROUP_KEYS`` or
            one is an ensemble (``model.members > 1``), or ``members`` is empty.
    """
    modules: dict[str, TransitionDataModule] = {}
    offsets: dict[str, tuple[int, int]] = {}
    fields: dict[str, dict[str, list[torch.Tensor]]] = {"train": {}, "val": {}}
    sizes = {"train": 0, "val": 0}
    runs = []
    keys = None
    for i, member in enumerate(members):
        validate(member.config)
        cfg = OmegaConf.to_container(member.config, resolve=True)
        key = group_key(cfg)
        if keys is not None and key != keys:
            diff = [k for k, a, b in zip(GROUP_KEYS, key, keys, strict=True) if a != b]
            raise ValueError(
                f"member {i} ({run_name(member.config)}) cannot join this group: "
                f"{', '.join(diff)} differ from member 0's (these keys must agree)"
            )
        keys = key
        if int(cfg["model"]["members"]) != 1:
            raise ValueError(
                f"member {i} has model.members={cfg['model']['members']}; a group's members are "
                "single networks (an ensemble is itself trained as a group, "
                "gridplan.models.ensemble)"
            )
        dkey = _data_key(cfg["data"])
        if dkey not in modules:
            dm = TransitionDataModule(cfg["data"], world=cfg["world"])
            dm.setup()
            modules[dkey] = dm
            for part, ds in (("train", dm.train_set), ("val", dm.val_set)):
                for name in ("states", "actions", "next_states"):
                    fields[part].setdefault(name, []).append(getattr(ds, name))
                fields[part].setdefault("event", []).append(ds.pickup | ds.door_opened)
                links = next_rows(ds.episode, ds.t)
                links = torch.where(links >= 0, links + sizes[part], -1)
                fields[part].setdefault("next", []).append(links)
            offsets[dkey] = (sizes["train"], sizes["val"])
            sizes["train"] += len(dm.train_set)
            sizes["val"] += len(dm.val_set)
        dm = modules[dkey]
        start, val_start = offsets[dkey]
        n = len(dm.train_set)
        summary = dm.summary()
        if member.resample_seed is None:
            rows = torch.arange(start, start + n)
        else:
            picks = _bootstrap(n, member.resample_seed)
            rows = start + picks
            summary["bootstrap"] = {
                "seed": int(member.resample_seed),
                "rows": n,
                "distinct_rows": int(torch.unique(picks).numel()),
            }
        batch = int(cfg["data"]["batch_size"])
        steps = -(-n // batch)
        limit = cfg["trainer"]["limit_train_batches"]
        if limit is not None:
            steps = min(steps, int(limit))
        net, stream = member_init(cfg)
        max_steps = cfg["trainer"].get("max_steps")
        runs.append(
            _Run(
                index=i,
                member=member,
                config=cfg,
                label=run_name(member.config),
                data=dm,
                summary=summary,
                rows=rows,
                val_rows=torch.arange(val_start, val_start + len(dm.val_set)),
                stream=stream,
                steps=steps,
                batch=batch,
                windows_key=_windows_key(cfg["data"]),
                init=net,
                max_steps=None if max_steps is None else int(max_steps),
            )
        )
    if not runs:
        raise ValueError("a group needs at least one member")
    buffers = {}
    for part in ("train", "val"):
        for name, chunks in fields[part].items():
            buffers[f"{part}_{name}"] = torch.cat(chunks)
    return runs, buffers



def alone(config: DictConfig) -> tuple[_Run, dict[str, torch.Tensor]]:
    """A run alone as a stack of one (``prepare``), its data stream the process's global
    generator, as the ``DataLoader`` of a Lightning run draws from it: the generator is set
    to the member's stream, so ``gridplan.training.runs.RNGState`` keeps it in every
    checkpoint and a resumed run draws on. Its step cap is Lightning's
    (``trainer.max_steps``, ``gridplan.training.runs.StopAtMaxSteps``).

    Raises:
        ValueError: as ``prepare``.
    """
    (run,), buffers = prepare([Member(config, None)])
    torch.set_rng_state(run.stream.get_state())
    run.stream = torch.default_generator
    run.max_steps = None
    return run, buffers
