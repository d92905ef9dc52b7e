"""Many training runs as members of one vectorized stack (paper §5.4 protocol, per member).

A *group* of runs that share an MLP architecture trains as one Lightning run whose network
holds every member's weights side by side: one batched matmul (``torch.baddbmm``, as in
``gridplan.models.learned.EnsembleLinear``) evaluates all members on their own minibatches at once.
Everything else stays per member and equals what the member's run trained alone
(``python -m train`` with ``train.vectorize=false``) does:

- **initial weights**: built from the member's ``seed`` exactly as a single run builds them
  (``torch.manual_seed(seed)``, then ``MLPDynamics``);
- **minibatch order**: the member's data stream continues the global generator's state after
  that initialisation and makes, per epoch, the draws ``torch.utils.data`` makes in a single
  run: the training iterator's base seed, the ``RandomSampler`` seed of the epoch's
  permutation, the validation iterator's base seed (``epoch_order``);
- **data, loss, optimizer**: its own dataset (policy, budget, seed, or a bootstrap resample
  for ensembles), loss weights (``variant``), learning rate, weight decay, epochs and
  batch size; AdamW with the cosine schedule of ``gridplan.training.module`` over its own epochs;
- **early stopping and checkpoints**: its own monitor and patience (Lightning's
  ``EarlyStopping`` and ``ModelCheckpoint`` rules: strict improvement, sticky stop signal,
  ``min_epochs``), its own best and last checkpoint written as the self-describing
  checkpoint a single run writes (``gridplan.models.learned.load_world_model`` reads it), its
  ``config.yaml``, ``metrics.json`` and its log in its own run folder: the logger its
  ``logger`` config chooses (``gridplan.training.loggers``; TensorBoard by default, with the
  config as text and the run's HParams session), as its single run writes it.

**Datasets of different sizes** keep per-member epoch lengths: an epoch of the group is one
pass of every member over its own data, ``ceil(n / batch_size)`` steps (capped by
``trainer.limit_train_batches``); a member whose epoch is shorter sits out the remaining
steps of that epoch. Members with the same steps per epoch and learning-rate schedule form a
*cohort*: one stacked parameter tensor per layer and one AdamW parameter group, so a member
that sits out a step gets no gradient and AdamW leaves its weights, moments and step count
untouched (each member takes exactly its single run's optimizer steps).

**Members that stop** (early stopping, their ``max_epochs`` or their ``trainer.max_steps``)
are written out and cut from their cohort's tensors and AdamW state, so the stack shrinks and
later steps cost only the members still training. The group ends when none is left.

**A step cap** (``trainer.max_steps``) ends a member's last epoch at the step that reaches
it, as Lightning ends its run alone there (``gridplan.training.runs.StopAtMaxSteps``); the
member is validated at that epoch's end, which is that step, as its run alone is. Members of
a cohort also share their cap, so they take the same steps in every epoch; at each epoch's
start the cohorts are ranked by the steps they take in it, most first (``MemberStack.rank``),
so the members training at a step are still a prefix of the stack.

Letter legend: ``K`` members still training, ``B`` batch rows, ``S`` steps of an epoch.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf
from torch import nn

from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.metrics.prediction import prediction_metrics
from gridplan.models.contract import WorldModel
from gridplan.models.learned import MLPDynamics
from gridplan.training.config import config_task, run_name, to_yaml, validate
from gridplan.training.hparams_summary import trial_name
from gridplan.training.loggers import (
    check_group_loggers,
    make_logger,
    metric_writer,
    start_run_log,
)
from gridplan.training.module import (
    TransitionDataModule,
    WorldModelModule,
    adamw,
    dimension_weights,
    figures_due,
    keep_freed_memory,
    log_figures,
    lr_factor,
    metric_scalars,
    metrics_due,
    next_rows,
    record_run,
    score_best,
    write_dashboards,
)
from gridplan.util.threads import available_cpus

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
)
#: Validation rows per member evaluated in one batched forward pass.
VAL_CHUNK = 1024


def _draw_seed(stream: torch.Generator) -> int:
    """One int64 seed, drawn the way ``torch.utils.data`` draws from the global generator."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=stream).item())


def epoch_order(stream: torch.Generator, n: int) -> torch.Tensor:
    """The permutation of ``n`` training rows a single run's epoch visits, ``(n,)`` long.

    ``stream`` stands for the run's global torch generator and is advanced by exactly the
    draws a single run makes per epoch: the training ``DataLoader`` iterator's base seed,
    the ``RandomSampler`` seed (its permutation is ``randperm(n)`` under a generator seeded
    with it) and the validation iterator's base seed.
    """
    _draw_seed(stream)
    seed = _draw_seed(stream)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    _draw_seed(stream)
    return order


def member_init(config: dict) -> tuple[MLPDynamics, torch.Generator]:
    """A member's initial network and data stream, exactly as its single run makes them.

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
        width = worlds.get(config["world"]).state_dim
        net = MLPDynamics(m["hidden"], 1, m["activation"], m["predict_delta"], width)
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
    """One run of a group.

    Attributes:
        config: the run's composed config (``gridplan.training.config.compose``), as a single run
            gets.
        run_dir: its run folder (created by the caller; ``config.yaml``, ``checkpoints/``,
            ``metrics.json`` and TensorBoard events are written into it).
        resample_seed: if set, the run trains on a bootstrap resample of its training split
            (``n`` rows drawn with replacement by ``torch.Generator().manual_seed(seed)``)
            instead of the split itself; validation and windows stay the run's own.
    """

    config: DictConfig
    run_dir: Path
    resample_seed: int | None = None


@dataclass
class _Snapshot:
    """A member's weights and AdamW state at the end of one epoch."""

    epoch: int
    global_step: int
    score: float
    weights: list[torch.Tensor]
    moments: list[dict[str, torch.Tensor]]
    lr: float


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


def _prepare(members: Sequence[Member]) -> tuple[list[_Run], dict[str, torch.Tensor]]:
    """Per-member runs and the shared train/validation buffers (each dataset stored once)."""
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


class _Steps:
    """The prepared batches of one epoch as a sized iterable (a list would read to Lightning
    as several dataloaders)."""

    def __init__(self, batches: list[dict]) -> None:
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class MemberStack(pl.LightningModule):
    """The LightningModule of a group: every member's MLP stacked, trained in lockstep.

    Args:
        runs: the members (``_prepare``), in any order; the stack keeps them cohort by
            cohort, longest epochs first, so the members training at a step are a prefix.
        buffers: concatenated training and validation tensors of every distinct dataset
            (``train_states``, ``train_actions``, ``train_next_states``, ``train_event``,
            and the same for ``val_``), moved with the module.

    After each validation epoch ``epoch_metrics[member index]`` holds the member's
    ``val/loss`` and, in the epochs its ``trainer.metrics_every_n_epochs`` scores, the
    validation metrics of a single run (``metric_scalars``).
    """

    def __init__(self, runs: list[_Run], buffers: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.runs = {r.index: r for r in runs}
        for name, value in buffers.items():
            self.register_buffer(name, value, persistent=False)
        cohorts: dict[tuple, list[_Run]] = {}
        for run in sorted(runs, key=lambda r: (r.cohort_key, r.index)):
            cohorts.setdefault(run.cohort_key, []).append(run)
        m = runs[0].config["model"]
        #: The group's state width (``GROUP_KEYS``: one world per group).
        self.state_dim = runs[0].task.world.state_dim
        self.cohorts = nn.ModuleList()
        self.cohort_members: list[list[int]] = []
        self.cohort_hparams: list[tuple[float, float, int]] = []
        for key, group in cohorts.items():
            net = MLPDynamics(
                m["hidden"], len(group), m["activation"], m["predict_delta"], self.state_dim
            )
            with torch.no_grad():
                inits = zip(*(r.init.parameters() for r in group), strict=True)
                for p, init in zip(net.parameters(), inits, strict=True):
                    p.copy_(torch.cat(init))
            self.cohorts.append(net)
            self.cohort_members.append([r.index for r in group])
            self.cohort_hparams.append(key[1:4])
        #: Cohort indices in stack order (``rank_cohorts``); the key order at first.
        self.rank: list[int] = list(range(len(self.cohorts)))
        self._refresh_weights()
        # The step drives AdamW itself (the same updates): Lightning's automatic-optimization
        # closure wraps every step in work that a stack of small matmuls notices.
        self.automatic_optimization = False
        self.epoch_metrics: dict[int, dict[str, float]] = {}
        self.epoch_scores: dict[int, Any] = {}
        self._windows: dict[str, Any] = {}

    # ----------------------------------------------------------------------- stack layout

    @property
    def order(self) -> list[int]:
        """Member indices in stack order (cohort by cohort, in ``rank``)."""
        return [i for c in self.rank for i in self.cohort_members[c]]

    def cohort_steps_now(self, c: int) -> int:
        """Optimizer steps cohort ``c``'s members take in the next epoch (they share epoch
        length, cap and steps so far); 0 for an empty cohort."""
        members = self.cohort_members[c]
        return self.runs[members[0]].steps_now() if members else 0

    def rank_cohorts(self) -> None:
        """Order the cohorts by the steps they take in the next epoch, most first (ties keep
        the key order), so the members training at each step are a prefix of the stack."""
        self.rank = sorted(range(len(self.cohorts)), key=lambda c: -self.cohort_steps_now(c))
        self._refresh_weights()

    def _refresh_weights(self) -> None:
        """Per-position loss weights of the members in stack order."""
        order = [self.runs[i] for i in self.order]
        device = self.train_states.device
        self.horizons = [r.horizon for r in order]
        self.horizon = torch.tensor(self.horizons, dtype=torch.float32, device=device)
        if not order:
            self.dim_weight = torch.zeros(0, 1, self.state_dim, device=device)
            self.event_weight = torch.zeros(0, 1, device=device)
            return
        self.dim_weight = (
            torch.stack(
                [dimension_weights(r.config["variant"], r.task) for r in order]
            )
            .unsqueeze(1)
            .to(device)
        )
        self.event_weight = torch.tensor(
            [[float(r.config["variant"]["event_weight"])] for r in order], device=device
        )

    def _params(self, cohorts: int | None = None) -> dict[str, torch.Tensor]:
        """The stacked parameters of the first ``cohorts`` non-empty cohorts, by name."""
        nets = [self.cohorts[c] for c in self.rank if self.cohort_members[c]]
        nets = nets[:cohorts] if cohorts is not None else nets
        if len(nets) == 1:
            return dict(nets[0].named_parameters())
        named = [dict(n.named_parameters()) for n in nets]
        return {name: torch.cat([p[name] for p in named]) for name in named[0]}

    def _template(self) -> MLPDynamics:
        """A network of the members' architecture (its own weights unused)."""
        return next(
            c for c, members in zip(self.cohorts, self.cohort_members, strict=True) if members
        )

    def forward(
        self, state: torch.Tensor, action: torch.Tensor, cohorts: int | None = None
    ) -> torch.Tensor:
        """Per-member predictions ``(K', N, 12)`` of the first ``cohorts`` cohorts' members on
        their own inputs ``state (K', N, 12)``, ``action (K', N)`` (raw, unclamped)."""
        nets = [self.cohorts[c] for c in self.rank if self.cohort_members[c]]
        if len(nets[:cohorts]) == 1:  # the stack's own layers: no parameters swapped in
            return nets[0](state, action)
        return torch.func.functional_call(self._template(), self._params(cohorts), (state, action))

    def member_position(self, index: int) -> tuple[int, int]:
        """``(cohort, row)`` of member ``index`` in the stack."""
        for c, members in enumerate(self.cohort_members):
            if index in members:
                return c, members.index(index)
        raise KeyError(f"member {index} is not in the stack")

    @torch.no_grad()
    def drop(self, indices: Sequence[int], optimizer: torch.optim.Optimizer | None) -> None:
        """Cut members ``indices`` out of their cohorts' tensors and AdamW state."""
        gone = set(indices)
        for c, members in enumerate(self.cohort_members):
            keep = [j for j, i in enumerate(members) if i not in gone]
            if len(keep) == len(members):
                continue
            rows = torch.tensor(keep, dtype=torch.long, device=self.train_states.device)
            for p in self.cohorts[c].parameters():
                p.data = p.data.index_select(0, rows)
                p.grad = None
                state = optimizer.state.get(p) if optimizer is not None else None
                for name, value in (state or {}).items():
                    if torch.is_tensor(value) and value.dim() > 0:
                        state[name] = value.index_select(0, rows)
            self.cohort_members[c] = [members[j] for j in keep]
        self._refresh_weights()

    @torch.no_grad()
    def snapshot(self, index: int, optimizer: torch.optim.Optimizer, score: float) -> _Snapshot:
        """Member ``index``'s weights and AdamW state now (copies, on CPU)."""
        c, j = self.member_position(index)
        run = self.runs[index]
        weights, moments = [], []
        for p in self.cohorts[c].parameters():
            weights.append(p[j : j + 1].detach().cpu().clone())
            state = optimizer.state.get(p, {})
            moments.append(
                {
                    k: (v[j : j + 1] if v.dim() > 0 else v).detach().cpu().clone()
                    for k, v in state.items()
                    if torch.is_tensor(v)
                }
            )
        lr = optimizer.param_groups[c]["lr"]
        return _Snapshot(run.epochs - 1, run.global_step, score, weights, moments, lr)

    # ------------------------------------------------------------------------ Lightning

    def on_fit_start(self) -> None:
        self._refresh_weights()

    def configure_optimizers(self):
        groups = [
            {"params": list(net.parameters()), "lr": lr, "weight_decay": wd}
            for net, (lr, wd, _) in zip(self.cohorts, self.cohort_hparams, strict=True)
        ]
        opt = adamw(groups, groups[0]["lr"], groups[0]["weight_decay"], self.device)
        lambdas = [(lambda e, n=epochs: lr_factor(e, n)) for (_, _, epochs) in self.cohort_hparams]
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambdas)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

    def train_dataloader(self):
        """This epoch's steps: ``rows (K_t, B)`` into the training buffer, ``weight (K_t, B)``
        (0 on padding), ``denom (K_t,)`` (S x real rows) and the active cohort count."""
        self.rank_cohorts()
        order = [self.runs[i] for i in self.order]
        if not order:
            return _Steps([])
        for run in order:
            run.epoch_steps = run.steps_now()
        b = max(r.batch for r in order)
        s = max(r.epoch_steps for r in order)
        rows = torch.zeros(s, len(order), b, dtype=torch.long)
        weight = torch.zeros(s, len(order), b)
        for j, run in enumerate(order):
            picked = run.rows[epoch_order(run.stream, len(run.rows))][: run.steps * run.batch]
            flat = torch.zeros(run.steps * run.batch, dtype=torch.long)
            mask = torch.zeros(run.steps * run.batch)
            flat[: len(picked)] = picked
            mask[: len(picked)] = 1.0
            n = run.epoch_steps
            rows[:n, j, : run.batch] = flat.view(run.steps, run.batch)[:n]
            weight[:n, j, : run.batch] = mask.view(run.steps, run.batch)[:n]
        steps = torch.tensor([r.epoch_steps for r in order])
        live = [c for c in self.rank if self.cohort_members[c]]
        now = {c: self.cohort_steps_now(c) for c in live}
        batches = []
        for t in range(s):
            k = int((steps > t).sum())
            cohorts = sum(1 for c in live if now[c] > t)
            w = weight[t, :k]
            batches.append(
                {
                    "rows": rows[t, :k],
                    "weight": w,
                    "denom": self.state_dim * w.sum(1),
                    "cohorts": cohorts,
                }
            )
        return _Steps(batches)

    def _loss(self, prefix: str, rows: torch.Tensor, weight: torch.Tensor, cohorts=None):
        """Per-member weighted squared error sums ``(K',)`` of one step (not normalized),
        summed over the ``H`` open-loop steps of members with a rollout loss
        (``gridplan.training.module.rollout_mse``)."""
        k = rows.shape[0]
        state = getattr(self, f"{prefix}_states")[rows]
        action = getattr(self, f"{prefix}_actions")[rows]
        pred = self(state, action, cohorts)
        total = self._step_error(prefix, rows, weight, pred, slice(0, k))
        rollout = [j for j in range(k) if self.horizons[j] > 1]
        if not rollout:
            return total
        # Only the members with a rollout loss roll on: the others' steps would be wasted.
        index = torch.tensor(rollout, device=rows.device)
        params = {n: p.index_select(0, index) for n, p in self._params(cohorts).items()}
        links = getattr(self, f"{prefix}_next")
        cur, ok = rows[index], weight[index] > 0
        pred = pred[index]
        extra = torch.zeros_like(total[index])
        for step in range(1, max(self.horizons[j] for j in rollout)):
            nxt = links[cur]
            ok = ok & (nxt >= 0) & (self.horizon[index] > step).unsqueeze(1)
            cur = torch.where(ok, nxt, cur)
            step_action = getattr(self, f"{prefix}_actions")[cur]
            pred = torch.func.functional_call(
                self._template(), params, (pred.clamp(0.0, 1.0), step_action)
            )
            extra = extra + self._step_error(prefix, cur, ok.float(), pred, index)
        return total.index_add(0, index, extra)

    def _step_error(self, prefix, rows, weight, pred, members) -> torch.Tensor:
        """Per-member weighted squared error sums of predictions ``pred`` of ``rows``;
        ``members`` picks the members' loss weights (a slice or an index tensor)."""
        target = getattr(self, f"{prefix}_next_states")[rows]
        event = getattr(self, f"{prefix}_event")[rows]
        sample = torch.where(event, self.event_weight[members], 1.0) * weight
        sq = (pred - target).square() * self.dim_weight[members]
        return (sq.sum(-1) * sample).sum(-1)

    def on_train_epoch_start(self) -> None:
        self._train_sum = torch.zeros(len(self.order), device=self.train_states.device)
        self._train_rows = torch.zeros_like(self._train_sum)
        self._step_losses: list[tuple[int, torch.Tensor]] = []

    def training_step(self, batch, batch_idx):
        """One AdamW step of every member training at ``batch_idx`` (members that sit the
        step out get no gradient, so AdamW leaves them untouched)."""
        optimizer = self.optimizers()
        per_member = self._loss("train", batch["rows"], batch["weight"], batch["cohorts"])
        k = per_member.shape[0]
        loss = per_member / (batch["denom"] * self.horizon[:k])
        optimizer.zero_grad(set_to_none=True)
        self.manual_backward(loss.sum())
        optimizer.step()
        with torch.no_grad():
            rows = batch["denom"] / self.state_dim
            self._train_sum[:k] += loss.detach() * rows
            self._train_rows[:k] += rows
            self._step_losses.append((batch_idx, loss.detach()))

    def on_train_epoch_end(self) -> None:
        """The cosine schedule's epoch step, after ``MemberRuns`` has read this epoch's rates
        (where Lightning steps an epoch-interval scheduler for a single run)."""
        self.lr_schedulers().step()

    def val_dataloader(self):
        """Validation chunks: ``rows (K, C)`` into the validation buffer, ``weight (K, C)``."""
        order = [self.runs[i] for i in self.order]
        if not order:
            return _Steps([])
        n = max(len(r.val_rows) for r in order)
        chunks = -(-n // VAL_CHUNK)
        rows = torch.zeros(len(order), chunks * VAL_CHUNK, dtype=torch.long)
        weight = torch.zeros(len(order), chunks * VAL_CHUNK)
        for j, run in enumerate(order):
            rows[j, : len(run.val_rows)] = run.val_rows
            weight[j, : len(run.val_rows)] = 1.0
        return _Steps(
            [
                {
                    "rows": rows[:, c * VAL_CHUNK : (c + 1) * VAL_CHUNK],
                    "weight": weight[:, c * VAL_CHUNK : (c + 1) * VAL_CHUNK],
                }
                for c in range(chunks)
            ]
        )

    def on_validation_epoch_start(self) -> None:
        self._val_sum = torch.zeros(len(self.order), device=self.train_states.device)

    def validation_step(self, batch, batch_idx):
        self._val_sum += self._loss("val", batch["rows"], batch["weight"])

    def on_validation_epoch_end(self) -> None:
        order = self.order
        n_val = torch.tensor(
            [self.state_dim * len(self.runs[i].val_rows) * self.runs[i].horizon for i in order],
            device=self._val_sum.device,
        )
        val_loss = (self._val_sum / n_val).tolist()
        self.epoch_metrics = {i: {"val/loss": v} for i, v in zip(order, val_loss, strict=True)}
        self.epoch_scores = {}
        by_windows: dict[tuple, list[int]] = {}
        for pos, i in enumerate(order):
            run = self.runs[i]
            if metrics_due(run.trainer_cfg, run.epochs):
                by_windows.setdefault((run.windows_key, run.task), []).append(pos)
        for (wkey, task), positions in by_windows.items():
            windows = self._windows_on_device(wkey)
            model = StackWorldModel(self.cohorts[0], self._params(), positions)
            for pos, scored in zip(positions, _score(model, windows, task), strict=True):
                i = order[pos]
                self.epoch_scores[i] = scored
                self.epoch_metrics[i].update(metric_scalars(scored, "val"))

    def _windows_on_device(self, key: str):
        if key not in self._windows:
            run = next(r for r in self.runs.values() if r.windows_key == key)
            self._windows[key] = run.data.windows.to(self.train_states.device)
        return self._windows[key]


def _score(model, windows, task: tasks.Task):
    """``prediction_metrics`` of every setting of ``model``, drawn as ``score_windows`` draws."""
    gen = torch.Generator(device=windows.start.device).manual_seed(0)
    return prediction_metrics(model, windows, task=task, generator=gen)


class StackWorldModel(WorldModel):
    """Several members' networks behind one ``WorldModel`` (``n_settings`` of them).

    The batch splits into ``M`` equal contiguous blocks (the ``WorldModel`` convention);
    block ``m`` is predicted by member ``positions[m]`` of the stacked parameters, clamped
    to ``[0, 1]`` as ``LearnedWorldModel.predict`` does, all in one batched forward pass.

    Args:
        template: an ``MLPDynamics`` of the members' architecture (its own weights unused).
        params: stacked parameters by name, ``(K, ...)`` each.
        positions: the ``M`` rows of ``params`` to use, in block order.
    """

    def __init__(self, template: MLPDynamics, params: dict[str, torch.Tensor], positions):
        index = torch.tensor(list(positions), dtype=torch.long)
        self.template = template
        self.params = {k: v.detach().index_select(0, index.to(v.device)) for k, v in params.items()}
        self.n_settings = len(positions)

    @torch.no_grad()
    def predict(self, state, action, generator=None):
        n = state.shape[0]
        m = self.n_settings
        if n % m:
            raise ValueError(f"batch of {n} rows does not split into {m} member blocks")
        device = next(iter(self.params.values())).device
        width = self.template.state_dim
        s = state.to(device, torch.float32).view(m, n // m, width)
        a = action.to(device).view(m, n // m)
        out = torch.func.functional_call(self.template, self.params, (s, a))
        return out.clamp_(0.0, 1.0).reshape(n, width).to(state.device, state.dtype)


class MemberRuns(pl.Callback):
    """Per-member early stopping, best/last snapshots, TensorBoard logging and run files.

    At the end of every epoch, for each member still training, in Lightning's order for a
    single run: log ``train/loss_epoch``, ``val/loss`` and the validation metrics (and the two
    figures every ``trainer.figures_every_n_epochs``), update ``ModelCheckpoint``'s best
    (strict improvement of ``trainer.monitor``; the first epoch is always kept) and
    ``EarlyStopping``'s wait count (patience; a non-finite value stops at once). A member
    whose stop was signaled and has run ``min_epochs``, or that reached ``max_epochs`` or
    ``max_steps`` (which ends its last epoch early, ``MemberStack.train_dataloader``), is
    finished: its checkpoints, scores and ``metrics.json`` are written and it leaves the
    stack. When no member is left the trainer stops.
    """

    def __init__(self, start: float) -> None:
        self.start = start

    def on_fit_start(self, trainer, module: MemberStack) -> None:
        for run in module.runs.values():
            if run.writer is not None:
                write_dashboards(run.writer, "val", run.task)

    def on_train_epoch_end(self, trainer, module: MemberStack) -> None:
        optimizer = trainer.optimizers[0]
        order = module.order
        train_loss = (module._train_sum / module._train_rows.clamp(min=1)).tolist()
        step_losses = [(b, v.tolist()) for b, v in module._step_losses]
        done = []
        for pos, i in enumerate(order):
            run = module.runs[i]
            every = int(run.trainer_cfg["log_every_n_steps"])
            for b, values in step_losses:
                step = run.global_step + b + 1
                if pos < len(values) and step % every == 0:
                    run.train_steps.append((step, values[pos]))
            run.global_step += run.epoch_steps
            run.epochs += 1
            metrics = module.epoch_metrics[i]
            score = float(metrics[run.trainer_cfg["monitor"]])
            self._log_epoch(run, metrics, train_loss[pos], module.epoch_scores.get(i))
            if run.best is None or score < run.best.score:
                run.best = module.snapshot(i, optimizer, score)
            self._early_stopping(run, score)
            t = run.trainer_cfg
            if run.epochs >= int(t["max_epochs"]):
                run.reason = run.reason or f"max_epochs={t['max_epochs']} reached"
            elif run.max_steps is not None and run.global_step >= run.max_steps:
                run.reason = run.reason or f"max_steps={run.max_steps} reached"
            elif not (run.stop_signaled and run.epochs >= int(t["min_epochs"])):
                continue
            run.last = module.snapshot(i, optimizer, score)
            done.append(i)
        for i in done:
            self.finish(module.runs[i])
        if done:
            module.drop(done, optimizer)
        if not module.order:
            trainer.should_stop = True

    @staticmethod
    def _early_stopping(run: _Run, score: float) -> None:
        patience = int(run.trainer_cfg["patience"])
        if not math.isfinite(score):
            run.stop_signaled = True
            run.reason = run.reason or f"{run.trainer_cfg['monitor']} is not finite"
        elif score < run.stop_best:
            run.stop_best = score
            run.wait = 0
        else:
            run.wait += 1
            if run.wait >= patience and not run.stop_signaled:
                run.stop_signaled = True
                run.reason = f"no improvement in {run.wait} epochs (patience {patience})"

    @staticmethod
    def _log_epoch(run: _Run, metrics: dict, train_loss: float, scored) -> None:
        step = run.global_step
        for s, value in run.train_steps:
            run.logger.log_metrics({"train/loss_step": value}, s)
        run.train_steps.clear()
        run.logger.log_metrics(
            {**metrics, "train/loss_epoch": train_loss, "epoch": run.epochs - 1}, step
        )
        if scored is not None and figures_due(run.trainer_cfg, run.epochs - 1):
            log_figures(run.writer, scored, step, "val", run.task)

    def finish(self, run: _Run) -> None:
        """Write ``run``'s checkpoints, score its best one and write ``metrics.json``."""
        run.finished_seconds = time.perf_counter() - self.start
        ckpt_dir = Path(run.member.run_dir) / "checkpoints"
        best_path = write_checkpoint(run, run.best, ckpt_dir / "best.ckpt")
        last_path = write_checkpoint(run, run.last, ckpt_dir / "last.ckpt")
        t = run.trainer_cfg
        figures = int(t["figures_every_n_epochs"]) > 0
        step = run.global_step
        metrics = score_best(best_path, run.data.windows, run.task, run.writer, step, figures)
        metrics.update(
            epochs=run.epochs,
            best_score=float(run.best.score),
            monitor=t["monitor"],
            train_seconds=round(run.finished_seconds, 2),
        )
        run.result = record_run(
            run.member.run_dir, metrics, run.summary, run.logger, run.writer, step,
            (best_path, last_path),
        )

    def on_exception(self, trainer, module: MemberStack, exception: BaseException) -> None:
        """Keep what the members still training have reached: their best and last
        checkpoints so far (no scores), so an interrupted group loses no finished epoch."""
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        for i in module.order:
            run = module.runs[i]
            if run.best is None or optimizer is None:
                continue
            run.last = module.snapshot(i, optimizer, float("nan"))
            ckpt_dir = Path(run.member.run_dir) / "checkpoints"
            write_checkpoint(run, run.best, ckpt_dir / "best.ckpt")
            write_checkpoint(run, run.last, ckpt_dir / "last.ckpt")
            run.reason = f"interrupted ({type(exception).__name__})"


def write_checkpoint(run: _Run, snap: _Snapshot, path: Path) -> Path:
    """Write one member's snapshot as the checkpoint its single run writes.

    The checkpoint holds Lightning's keys (``epoch``, ``global_step``, ``state_dict`` of a
    ``WorldModelModule``, ``optimizer_states`` of its AdamW, ``lr_schedulers``,
    ``hyper_parameters``) and the ``"gridplan"`` metadata of
    ``WorldModelModule.metadata``, so ``load_world_model`` and every reader of a single
    run's checkpoint read it unchanged. Loop and callback states are not stored (a member
    checkpoint is not a point to resume a Lightning loop from).
    """
    with torch.random.fork_rng(devices=[]):
        module = WorldModelModule(run.config, run.summary)
    params = list(module.net.parameters())
    with torch.no_grad():
        for p, w in zip(params, snap.weights, strict=True):
            p.copy_(w)
    m, t = run.config["model"], run.config["trainer"]
    opt = adamw(params, m["lr"], m["weight_decay"], "cpu")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: lr_factor(e, t["max_epochs"]))
    for p, moments in zip(params, snap.moments, strict=True):
        if moments:
            opt.state[p] = {k: v.clone() for k, v in moments.items()}
    with warnings.catch_warnings():
        # The schedule is replayed to the snapshot's epoch without optimizer steps.
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(snap.epoch + 1):
            sched.step()
    meta = module.metadata()
    meta.update(epoch=snap.epoch, global_step=snap.global_step)
    ckpt = {
        "epoch": snap.epoch,
        "global_step": snap.global_step,
        "pytorch-lightning_version": pl.__version__,
        "state_dict": module.state_dict(),
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [sched.state_dict()],
        "hparams_name": "kwargs",
        "hyper_parameters": dict(module.hparams),
        "gridplan": meta,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(ckpt, tmp)
    tmp.replace(path)
    return path


class GroupProgress(pl.Callback):
    """One progress line (or bar, on a terminal) per group: epoch, members still training,
    the best monitored value so far and the time.

    On a terminal a tqdm bar over epochs is redrawn in place; otherwise (piped to a file) a
    plain line is printed at most every ``interval`` seconds, when members finish, and at
    the end.

    Args:
        name: the group's name in the line.
        total: members in the group.
        stream: where to write (default ``sys.stderr``).
        interval: seconds between plain lines.
        enabled: False prints nothing.
    """

    def __init__(
        self,
        name: str,
        total: int,
        stream: TextIO | None = None,
        interval: float = 10.0,
        enabled: bool = True,
    ) -> None:
        self.name = name
        self.total = total
        self.stream = stream or sys.stderr
        self.interval = interval
        self.enabled = enabled
        self.bar = None
        self._last = -math.inf
        self._alive = total
        self.start = time.perf_counter()

    def _status(self, trainer, module: MemberStack) -> str:
        best = [(r.best.score, r.label) for r in module.runs.values() if r.best is not None]
        alive = len(module.order)
        text = f"{alive}/{self.total} training"
        if best:
            score, label = min(best)
            monitor = next(iter(module.runs.values())).trainer_cfg["monitor"]
            text += f", best {monitor} {score:.5f} ({label})"
        return text

    def on_train_epoch_end(self, trainer, module: MemberStack) -> None:
        if not self.enabled:
            return
        epoch = trainer.current_epoch + 1
        status = self._status(trainer, module)
        if self.stream.isatty():
            if self.bar is None:
                from tqdm.auto import tqdm

                self.bar = tqdm(
                    total=trainer.max_epochs, desc=f"group {self.name}", file=self.stream
                )
            self.bar.update(1)
            self.bar.set_postfix_str(status)
            return
        alive = len(module.order)
        now = time.perf_counter()
        if now - self._last >= self.interval or alive != self._alive or alive == 0:
            print(
                f"group {self.name}: epoch {epoch}/{trainer.max_epochs}, {status}, "
                f"{now - self.start:.0f} s",
                file=self.stream,
                flush=True,
            )
            self._last = now
            self._alive = alive

    def on_fit_end(self, trainer, module) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class GroupResult:
    """What ``train_group`` returns.

    Attributes:
        runs: per member, in the order given, ``(metrics, artifacts)`` as a single run's
            ``train`` returns them.
        record: the group's record (also written as ``group.json`` when a folder is given):
            members with their run folders, epochs, best scores and why they stopped; wall
            time, this process's CPU time (the wall time of a machine with a free core per
            group), group epochs, optimizer steps and member steps.
    """

    runs: list[tuple[dict, dict]]
    record: dict


def train_group(
    members: Sequence[Member],
    name: str = "group",
    record_dir: str | Path | None = None,
    progress: bool = True,
    stream: TextIO | None = None,
) -> GroupResult:
    """Train ``members`` as one vectorized stack; each ends as its single run would.

    Args:
        members: the runs; their configs must agree on ``GROUP_KEYS``.
        name: the group's name in progress lines and the record.
        record_dir: folder for ``group.json`` (created), or None.
        progress: print one progress line per group (``GroupProgress``).
        stream: where progress goes (default ``sys.stderr``).

    Returns:
        GroupResult.

    Raises:
        ValueError: if a config fails validation, the members disagree on ``GROUP_KEYS`` or
            one is an ensemble (``model.members > 1``), or ``members`` is empty.
        SIGTERMException, KeyboardInterrupt: on SIGTERM or SIGINT, after every member
            still training has written its best and last checkpoints (``MemberRuns``).
    """
    start, cpu = time.perf_counter(), time.process_time()
    check_group_loggers([OmegaConf.to_container(m.config, resolve=True) for m in members])
    keep_freed_memory()
    runs, buffers = _prepare(members)
    for run in runs:
        run_dir = Path(run.member.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(to_yaml(run.member.config))
        run.logger = make_logger(run.config, run_dir)
        run.writer = metric_writer(run.logger, run_dir)
        start_run_log(run.logger, run.config, to_yaml(run.member.config), trial_name(run_dir))
    module = MemberStack(runs, buffers)
    first = runs[0].config["trainer"]
    setup_seconds = time.perf_counter() - start
    fit_start = time.perf_counter()
    member_runs = MemberRuns(fit_start)
    trainer = pl.Trainer(
        accelerator=first["accelerator"],
        devices=1,
        max_epochs=max(int(r.config["trainer"]["max_epochs"]) for r in runs),
        deterministic=first["deterministic"],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        logger=False,
        num_sanity_val_steps=0,
        reload_dataloaders_every_n_epochs=1,
        callbacks=[member_runs, GroupProgress(name, len(runs), stream, enabled=progress)],
        default_root_dir=str(record_dir) if record_dir is not None else None,
    )
    with warnings.catch_warnings():
        # The step lists are plain Python lists (the buffers live on the module): no workers.
        warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
        try:
            trainer.fit(module)
        except SystemExit as err:
            if isinstance(err, SIGTERMException):
                raise
            # Lightning turns Ctrl+C into sys.exit(1) after its graceful shutdown.
            raise KeyboardInterrupt from err
    wall = time.perf_counter() - start
    missing = [r.label for r in runs if r.result is None]
    if missing:
        raise RuntimeError(f"group {name}: members {missing} did not finish")
    record = _group_record(name, runs, module, trainer)
    record.update(
        setup_seconds=round(setup_seconds, 2),
        wall_seconds=round(wall, 2),
        cpu_seconds=round(time.process_time() - cpu, 2),
        device=str(module.device),
        threads=torch.get_num_threads(),
    )
    if record_dir is not None:
        folder = Path(record_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "group.json").write_text(json.dumps(record, indent=2))
    return GroupResult([r.result for r in runs], record)


def _group_record(name: str, runs: list[_Run], module: MemberStack, trainer) -> dict:
    """A finished group's record (``GroupResult.record``) less its times and device."""
    return {
        "name": name,
        "members": [
            {
                "label": r.label,
                "run_dir": str(r.member.run_dir),
                "seed": r.config["seed"],
                "resample_seed": r.member.resample_seed,
                "epochs": r.epochs,
                "global_step": r.global_step,
                "steps_per_epoch": r.steps,
                "best_epoch": r.best.epoch,
                "best_score": r.best.score,
                "monitor": r.trainer_cfg["monitor"],
                "stopped": r.reason,
                "finished_seconds": round(r.finished_seconds, 2),
            }
            for r in runs
        ],
        "cohorts": len(module.cohorts),
        "group_epochs": trainer.current_epoch,
        "optimizer_steps": trainer.global_step,
        "member_steps": sum(r.global_step for r in runs),
        "member_epochs": sum(r.epochs for r in runs),
    }


def step_flops(batch: int, widths: Sequence[int]) -> int:
    """FLOPs of one member's training step on ``batch`` rows of an MLP of ``widths``
    ``(S + 4, hidden..., S)``: forward ``2 B in out`` per layer, the weight gradients as much
    again, the input gradients of every layer but the first."""
    layers = list(zip(widths[:-1], widths[1:], strict=True))
    fwd = sum(2 * batch * i * o for i, o in layers)
    return fwd + fwd + sum(2 * batch * i * o for i, o in layers[1:])


def run_flops(config: DictConfig) -> float:
    """The most training FLOPs one run of ``config`` takes: its optimizer steps
    (``trainer.max_epochs`` epochs of ``ceil(train rows / batch_size)`` steps, capped by
    ``trainer.limit_train_batches`` and ``trainer.max_steps``) x ``step_flops``."""
    from gridplan.data.datasets import parse_budget

    d, t, m = config.data, config.trainer, config.model
    rows = parse_budget(d.budget) * (1.0 - float(d.val_fraction))
    steps = math.ceil(rows / int(d.batch_size))
    if t.limit_train_batches is not None:
        steps = min(steps, int(t.limit_train_batches))
    total = steps * int(t.max_epochs)
    if t.get("max_steps") is not None:
        total = min(total, int(t.max_steps))
    width = worlds.get(config.world).state_dim
    widths = (width + 4, *(int(h) for h in m.hidden), width)
    return float(total * step_flops(int(d.batch_size), widths))


#: Training work (FLOPs) a worker process must save to pay for its start. A worker is a
#: fresh interpreter launched by Hydra's joblib launcher that imports torch and Lightning and
#: reads its data again: on a quiet 2-core machine two workers trained 10 runs of 5 epochs
#: on 20k transitions (K x 390 GFLOP) in 9.6 s, one process in about 4.4 s (2.6x faster than
#: those runs one after another, where two workers were 1.2x), so a start costs about 6 s,
#: 500 GFLOP of this process's training (docs/PERFORMANCE.md §12).
WORKER_START_FLOP = 500e9


def auto_workers(config: DictConfig, runs: int) -> int:
    """Worker processes for ``runs`` runs that share ``config``'s ``GROUP_KEYS``.

    ``train.workers`` if set; on a GPU (or MPS), 1. Otherwise, on CPU, as many as pay for
    their start, up to one per core this process may use
    (``gridplan.util.threads.available_cpus``): ``w`` workers instead of ``w - 1`` save
    ``work / (w (w - 1))`` of a core's time and cost one worker's start, so ``w`` is the
    largest with ``work > w (w - 1) WORKER_START_FLOP`` (``work``: ``runs x run_flops``).
    A worker process with one intra-op thread per core trains a large group faster than
    one process with a thread per core, whose threads meet at a barrier after every op of
    a small step (docs/PERFORMANCE.md §12); a small group trains fastest in this process,
    whose imports are done. Never more than ``runs``.
    """
    workers = config.train.workers
    if workers is None:
        work, workers = runs * run_flops(config), 1
        while workers < worker_slots(config):
            if work <= (workers + 1) * workers * WORKER_START_FLOP:
                break
            workers += 1
    return max(1, min(int(workers), int(runs)))


def worker_slots(config: DictConfig) -> int:
    """Worker processes that may train ``config``'s groups at once: ``train.workers`` if
    set; else 1 on a GPU (or MPS), where one process drives the device, and one per core
    this process may use on CPU (``gridplan.util.threads.available_cpus``)."""
    if config.train.workers is not None:
        return int(config.train.workers)
    accelerator = str(config.trainer.accelerator)
    if accelerator == "auto":
        device = torch.cuda.is_available() or torch.backends.mps.is_available()
    else:
        device = accelerator != "cpu"
    return 1 if device else available_cpus()


def deal(items: Sequence, parts: int) -> list[list]:
    """Deal ``items`` round-robin into ``min(parts, len(items))`` lists (item ``i`` to list
    ``i % parts``): groups of a similar mix when ``items`` are ordered by configuration."""
    parts = max(1, min(int(parts), len(items)))
    return [list(items[p::parts]) for p in range(parts)]
