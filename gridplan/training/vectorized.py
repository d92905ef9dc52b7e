"""Many training runs as members of one stack (paper §5.4 protocol, per member).

A *group* of runs that share an MLP architecture (``GROUP_KEYS``) trains as one Lightning run
of the one MLP training engine, ``gridplan.training.engine.WorldModelModule``, holding every
member's weights side by side (a run alone is that module with one member). Everything else
stays per member and equals what the member's run alone (``python -m train`` with
``train.vectorize=false``) does: initial weights and minibatch order
(``gridplan.training.members``); its own dataset (policy, budget, seed, or a bootstrap
resample for ensembles), loss weights, learning rate, weight decay, epochs and batch size;
and, through ``MemberRuns``, what Lightning's callbacks do for a run alone, per member:

- **early stopping and checkpoints**: its own monitor and patience (Lightning's
  ``EarlyStopping`` and ``ModelCheckpoint`` rules: strict improvement, sticky stop signal,
  ``min_epochs``), its own best and last checkpoint written as the self-describing
  checkpoint its run alone writes (``write_checkpoint``; ``gridplan.models.learned
  .load_world_model`` reads it), its ``config.yaml``, ``metrics.json`` and its log in its own
  run folder: the logger its ``logger`` config chooses (``gridplan.training.loggers``;
  TensorBoard by default, with the config as text and the run's HParams session).

**Members that stop** (early stopping, their ``max_epochs`` or their ``trainer.max_steps``)
are written out and cut from their cohort's tensors and AdamW state, so the stack shrinks and
later steps cost only the members still training. The group ends when none is left.

**A step cap** (``trainer.max_steps``) ends a member's last epoch at the step that reaches
it, as Lightning ends its run alone there (``gridplan.training.runs.StopAtMaxSteps``); the
member is validated at that epoch's end, which is that step, as its run alone is. Members of
a cohort also share their cap, so they take the same steps in every epoch.

Letter legend: ``K`` members still training.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from gridplan.core import world as worlds
from gridplan.models.learned import CHECKPOINT_KEY
from gridplan.training.config import to_yaml
from gridplan.training.engine import WorldModelModule, score_best_snapshots
from gridplan.training.hparams_summary import trial_name
from gridplan.training.loggers import (
    check_group_loggers,
    make_logger,
    metric_writer,
    start_run_log,
)
from gridplan.training.members import (
    Member,
    _Run,
    _Snapshot,
    prepare,
)
from gridplan.training.module import (
    adamw,
    figures_due,
    log_best,
    log_figures,
    lr_factor,
    record_run,
    write_dashboards,
)
from gridplan.util.allocator import retain_freed_memory
from gridplan.util.threads import available_cpus


class MemberRuns(pl.Callback):
    """Per-member early stopping, best/last snapshots, TensorBoard logging and run files.

    At the end of every epoch, for each member still training, in Lightning's order for a
    run alone: log ``train/loss_epoch``, ``val/loss`` and the validation metrics (and the two
    figures every ``trainer.figures_every_n_epochs``), update ``ModelCheckpoint``'s best
    (strict improvement of ``trainer.monitor``; the first epoch is always kept) and
    ``EarlyStopping``'s wait count (patience; a non-finite value stops at once). A member
    whose stop was signaled and has run ``min_epochs``, or that reached ``max_epochs`` or
    ``max_steps`` (which ends its last epoch early, ``WorldModelModule.train_dataloader``), is
    finished: its checkpoints, scores and ``metrics.json`` are written and it leaves the
    stack. When no member is left the trainer stops.
    """

    def __init__(self, start: float) -> None:
        self.start = start

    def on_fit_start(self, trainer, module: WorldModelModule) -> None:
        for run in module.runs.values():
            if run.writer is not None:
                write_dashboards(run.writer, "val", run.task)

    def on_train_epoch_end(self, trainer, module: WorldModelModule) -> None:
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
        scored = score_best_snapshots([module.runs[i] for i in done])
        for i in done:
            self.finish(module.runs[i], scored[i])
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

    def finish(self, run: _Run, scored) -> None:
        """Write ``run``'s checkpoints, log ``scored``, the prediction metrics of its best
        snapshot (``score_best_snapshots``), and write ``metrics.json``."""
        run.finished_seconds = time.perf_counter() - self.start
        ckpt_dir = Path(run.member.run_dir) / "checkpoints"
        best_path = write_checkpoint(run, run.best, ckpt_dir / "best.ckpt")
        last_path = write_checkpoint(run, run.last, ckpt_dir / "last.ckpt")
        t = run.trainer_cfg
        figures = int(t["figures_every_n_epochs"]) > 0
        step = run.global_step
        metrics = log_best(scored, run.task, run.writer, step, figures)
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

    def on_exception(self, trainer, module: WorldModelModule, exception: BaseException) -> None:
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
    """Write one member's snapshot as the checkpoint its run alone writes.

    The checkpoint holds Lightning's keys (``epoch``, ``global_step``, ``state_dict`` of a
    ``WorldModelModule`` of one member, ``optimizer_states`` of its AdamW, ``lr_schedulers``,
    ``hyper_parameters``) and what ``WorldModelModule.on_save_checkpoint`` adds (the
    ``"gridplan"`` metadata), so ``load_world_model`` and every reader of a run's
    checkpoint read it unchanged. Loop and callback states are not stored (a member
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
    ckpt = {
        "epoch": snap.epoch,
        "global_step": snap.global_step,
        "pytorch-lightning_version": pl.__version__,
        "state_dict": module.state_dict(),
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [sched.state_dict()],
        "hparams_name": "kwargs",
        "hyper_parameters": dict(module.hparams),
    }
    module.on_save_checkpoint(ckpt)
    ckpt[CHECKPOINT_KEY].update(epoch=snap.epoch, global_step=snap.global_step)
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

    def _status(self, trainer, module: WorldModelModule) -> str:
        best = [(r.best.score, r.label) for r in module.runs.values() if r.best is not None]
        alive = len(module.order)
        text = f"{alive}/{self.total} training"
        if best:
            score, label = min(best)
            monitor = next(iter(module.runs.values())).trainer_cfg["monitor"]
            text += f", best {monitor} {score:.5f} ({label})"
        return text

    def on_train_epoch_end(self, trainer, module: WorldModelModule) -> None:
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
        runs: per member, in the order given, ``(metrics, artifacts)`` as a run alone's
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
    """Train ``members`` as one vectorized stack; each ends as its run alone would.

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
    retain_freed_memory()
    runs, buffers = prepare(members)
    for run in runs:
        run_dir = Path(run.member.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        text = to_yaml(run.member.config)
        (run_dir / "config.yaml").write_text(text)
        run.logger = make_logger(run.config, run_dir)
        run.writer = metric_writer(run.logger, run_dir)
        start_run_log(run.logger, run.config, text, trial_name(run_dir))
    module = WorldModelModule(runs[0].config, runs[0].summary, runs, buffers)
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


def _group_record(name: str, runs: list[_Run], module: WorldModelModule, trainer) -> dict:
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
        "cohorts": len(module.cohort_members),
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

    d, t = config.data, config.trainer
    rows = parse_budget(d.budget) * (1.0 - float(d.val_fraction))
    steps = math.ceil(rows / int(d.batch_size))
    if t.limit_train_batches is not None:
        steps = min(steps, int(t.limit_train_batches))
    total = steps * int(t.max_epochs)
    if t.get("max_steps") is not None:
        total = min(total, int(t.max_steps))
    return float(total * config_step_flops(config))


def config_step_flops(config: DictConfig) -> int:
    """``step_flops`` of one member of ``config``: its ``data.batch_size`` rows through its
    world's MLP ``(S + 4, model.hidden..., S)``."""
    width = worlds.get(config.world).state_dim
    widths = (width + 4, *(int(h) for h in config.model.hidden), width)
    return step_flops(int(config.data.batch_size), widths)


#: Training work (FLOPs) a worker process must save to pay for its start. A worker is a
#: fresh interpreter launched by Hydra's joblib launcher that imports torch and Lightning and
#: reads its data again: on a quiet 2-core machine two workers trained 10 runs of 5 epochs
#: on 20k transitions (10 x 39 GFLOP) in 9.6 s, one process in about 4.4 s (2.6x faster than
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


#: Stacked work of one training step (FLOPs: ``K x step_flops``) each intra-op thread of a
#: group must get for a second thread to pay. One process on a quiet 2-core machine, passive
#: waiting, 5 epochs of 20k per member (docs/PERFORMANCE.md §17, "A lone group takes the idle
#: core"): 2 threads ran as fast as 1 times 0.94-0.98 at K = 2 (219 MFLOP a step), 1.08-1.12
#: at K = 3 (329 MFLOP), 1.20-1.21 at K = 5 and 1.23-1.36 at K = 10; beside a process
#: spinning on the other core, 0.96-1.05 at K = 10.
THREAD_STEP_FLOP = 150e6


def group_threads(config: DictConfig, members: int, cores: int) -> int:
    """Intra-op threads of a group of ``members`` runs of ``config`` that has ``cores`` usable
    cores to itself (those the launch's other jobs leave it): one per ``THREAD_STEP_FLOP`` of
    its stacked training step (``members x config_step_flops``), at least 1, at most
    ``cores``. A run alone (a step of 110 MFLOP) and a group of two keep one thread: they
    trained no faster on two (docs/PERFORMANCE.md §12, §17). Beyond two threads the rule is
    extrapolated, not measured."""
    work = int(members) * config_step_flops(config)
    return max(1, min(int(cores), int(work // THREAD_STEP_FLOP)))


def worker_slots(config: DictConfig) -> int:
    """Worker processes that may train ``config``'s groups at once: ``train.workers`` if
    set, else ``usable_cores``."""
    if config.train.workers is not None:
        return int(config.train.workers)
    return usable_cores(config)


def usable_cores(config: DictConfig) -> int:
    """Cores the jobs of ``config`` share on this machine: 1 on a GPU (or MPS), where one
    process drives the device; on CPU each core this process may use
    (``gridplan.util.threads.available_cpus``)."""
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
