"""The one training engine of the MLP world models: ``WorldModelModule`` (paper §5.4).

A ``WorldModelModule`` holds ``K >= 1`` members' ``MLPDynamics`` side by side in one network
(``net``: one ``(K, ...)`` tensor per layer's weight and bias): every layer is one batched
matmul (``torch.baddbmm``, ``gridplan.models.learned.EnsembleLinear``) over the members' own
minibatches, and one fused AdamW step updates the members' rows (a parameter group per
*cohort*, members of the same epoch length and learning-rate schedule, who take the same
steps: the cohort's rows of each stacked tensor, with their moments and step count). A run alone
is a stack of one (``gridplan.training.runs``), with Lightning's own ``ModelCheckpoint``,
``EarlyStopping``, logger and resume around it; a group of runs is a stack of ``K``
(``gridplan.training.vectorized``), whose per-member logging, stopping and checkpoints
(``MemberRuns``) do per member what those callbacks do for a run alone. Member ``k`` of a group
ends as its run alone does (docs/PERFORMANCE.md §12; ``gridplan.training.members`` says what
each member replays).

**The loss** is the weighted squared error of paper Table 3's variants
(``gridplan.training.module.squared_error_sums``: ``dimension_weights`` per dim, the event
weight per transition), averaged per member over its real rows and the ``S`` dims; a member
with ``variant.rollout_horizon = H > 1`` also scores ``H - 1`` open-loop steps from its own
predictions clamped to ``[0, 1]`` under the logged actions (steps past the episode's last
logged step weigh 0), and averages over the ``H`` steps.

**Members of different epoch lengths** (datasets of other sizes, ``trainer.max_steps``): an
epoch of the stack is one pass of every member over its own data; a member whose epoch is
shorter sits out the remaining steps (no gradient: AdamW leaves its weights, moments and step
count untouched). At each epoch's start the cohorts are ranked by the steps they take in it,
most first, so the members training at a step are a prefix of the stack.

Letter legend: ``K`` members still training, ``B`` batch rows, ``S`` state dims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch

from gridplan.core import tasks
from gridplan.metrics.prediction import prediction_metrics
from gridplan.models.contract import WorldModel
from gridplan.models.learned import CHECKPOINT_KEY, LearnedWorldModel, MLPDynamics
from gridplan.training.config import config_task
from gridplan.training.loggers import metric_writer
from gridplan.training.members import _Run, _Snapshot, epoch_order
from gridplan.training.module import (
    adamw,
    dimension_weights,
    figures_due,
    log_figures,
    lr_factor,
    metric_scalars,
    metrics_due,
    run_metadata,
    squared_error_sums,
    write_dashboards,
)

#: Validation rows per member evaluated in one batched forward pass.
VAL_CHUNK = 1024
#: The validation rows are padded to a multiple of this, not of ``VAL_CHUNK``, so the last
#: chunk is short: from 64 rows on MKL runs a chunk's rows with the kernels of a full one
#: (``gridplan.models.learned.TRANSPOSED_MIN_ROWS``), so every row's prediction, and every
#: member's sum of errors over the chunk's rows, is the one of a padded ``VAL_CHUNK``.
VAL_ALIGN = 64
#: The checkpoint's name of the loss's dimension weights (a buffer of the module before it
#: held a stack; kept in every checkpoint for its readers).
DIM_WEIGHTS_KEY = "dim_weights"
#: The prefix of the training epoch loop's entries in a checkpoint's ``loops/fit_loop``.
_EPOCH_LOOP = "epoch_loop"


class _Steps:
    """The prepared batches of one validation pass as a sized iterable (a list would read to
    Lightning as several dataloaders)."""

    def __init__(self, batches: list[dict]) -> None:
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class _Epoch:
    """The training steps of an epoch, a sized iterable that draws its batches
    (``WorldModelModule.draw_epoch``) when first iterated in an epoch, as a ``DataLoader``
    draws its sampler's order when iterated: Lightning iterates it at each epoch's start
    (twice where it reloads the loaders), and once when it resumes a run."""

    def __init__(self, module: WorldModelModule, steps: int) -> None:
        self.module = module
        self.steps = steps
        self.epoch: int | None = None
        self.batches: list[dict] = []

    def __iter__(self):
        if self.module.current_epoch != self.epoch:
            self.epoch = self.module.current_epoch
            self.batches = self.module.draw_epoch(self.steps)
        return iter(self.batches)

    def __len__(self) -> int:
        return self.steps


class WorldModelModule(pl.LightningModule):
    """MLP world models trained with the weighted MSE on ``(s, a) -> s'`` (paper §5.4): a
    stack of ``K >= 1`` members trained in lockstep.

    Args:
        config: the run's resolved config as a plain dict
            (``gridplan.training.config.Config``; a group's: its first member's); its
            ``model`` section builds the network.
        dataset: ``TransitionDataModule.summary()`` of the training data, stored in every
            checkpoint.
        runs: the members to train (``gridplan.training.members.prepare``), in any order; the
            stack keeps them cohort by cohort, longest epochs first. Empty: the module only
            holds ``config``'s network (``model.members`` of them), to score or to write as a
            checkpoint.
        buffers: the members' concatenated training and validation tensors
            (``train_states``, ``train_actions``, ``train_next_states``, ``train_event``,
            ``train_next`` and the same for ``val_``), moved with the module.

    With a logger on its trainer and one member, the module is a run alone: it logs
    ``train/loss``, ``val/loss`` and the validation metrics through Lightning (``self.log``)
    for its checkpoint and early-stopping callbacks, and draws the dashboards. Otherwise
    ``epoch_metrics[member index]`` holds, after each validation epoch, each member's
    ``val/loss`` and, in the epochs its ``trainer.metrics_every_n_epochs`` scores, its
    validation metrics (``metric_scalars``), for ``gridplan.training.vectorized.MemberRuns``.
    The network of a stack of one is ``net``, as in every checkpoint of a run.

    Raises:
        ValueError: on an invalid architecture.
    """

    def __init__(
        self,
        config: dict,
        dataset: dict | None = None,
        runs: Sequence[_Run] = (),
        buffers: dict[str, torch.Tensor] | None = None,
    ) -> None:
        super().__init__()
        # The run logs its flattened config itself (gridplan.training.loggers.start_run_log).
        self.save_hyperparameters("config", "dataset", logger=False)
        self.task = config_task(config)
        self.state_dim = self.task.world.state_dim
        self.runs = {r.index: r for r in runs}
        for name, value in (buffers or {}).items():
            self.register_buffer(name, value, persistent=False)
        self.cohort_members: list[list[int]] = []
        self.cohort_hparams: list[tuple[float, float, int]] = []
        self._stack(config, list(runs))
        #: Cohort indices in stack order (``rank_cohorts``); the key order at first.
        self.rank: list[int] = list(range(len(self.cohort_members)))
        #: Member indices in the order of the stacked parameters' rows (``order``, kept by
        #: ``_restack``).
        self._rows: list[int] = self.order
        #: Each cohort's rows of the stacked parameters, AdamW's parameters
        #: (``configure_optimizers`` makes them, on the module's device), and the members
        #: they hold.
        self._views: list[list[torch.Tensor]] | None = None
        self._held: list[list[int]] = []
        self._adamw: torch.optim.Optimizer | None = None
        self._refresh_weights()
        # The step drives AdamW itself (the same updates): Lightning's automatic-optimization
        # closure wraps every step in work that a stack of small matmuls notices.
        self.automatic_optimization = False
        self.epoch_metrics: dict[int, dict[str, float]] = {}
        self.epoch_scores: dict[int, Any] = {}
        self._windows: dict[str, Any] = {}
        self._epoch_steps = 0

    def _stack(self, config: dict, runs: list[_Run]) -> None:
        """``net``: every member's initial weights stacked, cohort by cohort in key order
        (one cohort per ``_Run.cohort_key``); without runs, ``config``'s network drawn from
        the global generator."""
        if not runs:
            self.net = MLPDynamics(*_shape(config, int(config["model"]["members"])))
            return
        cohorts: dict[tuple, list[_Run]] = {}
        for run in sorted(runs, key=lambda r: (r.cohort_key, r.index)):
            cohorts.setdefault(run.cohort_key, []).append(run)
        stacked = [run for group in cohorts.values() for run in group]
        # Its own initialisation draws nothing from the global generator: that is a run
        # alone's data stream (``gridplan.training.members.alone``).
        with torch.random.fork_rng(devices=[]):
            self.net = MLPDynamics(*_shape(stacked[0].config, len(stacked)))
        with torch.no_grad():
            inits = zip(*(r.init.parameters() for r in stacked), strict=True)
            for p, init in zip(self.net.parameters(), inits, strict=True):
                p.copy_(torch.cat(init))
        self.cohort_members = [[r.index for r in group] for group in cohorts.values()]
        self.cohort_hparams = [key[1:4] for key in cohorts]

    # ----------------------------------------------------------------------- stack layout

    @property
    def order(self) -> list[int]:
        """Member indices in stack order (cohort by cohort, in ``rank``)."""
        return [i for c in self.rank for i in self.cohort_members[c]]

    @property
    def alone(self) -> bool:
        """Whether this is a run alone: one member, and a logger on the trainer."""
        return len(self.runs) == 1 and self.logger is not None

    def cohort_steps_now(self, c: int) -> int:
        """Optimizer steps cohort ``c``'s members take in the next epoch (they share epoch
        length, cap and steps so far); 0 for an empty cohort."""
        members = self.cohort_members[c]
        return self.runs[members[0]].steps_now() if members else 0

    def rank_cohorts(self) -> None:
        """Order the cohorts by the steps they take in the next epoch, most first (ties keep
        the key order), so the members training at each step are a prefix of the stack."""
        self.rank = sorted(range(len(self.cohort_members)), key=lambda c: -self.cohort_steps_now(c))
        self._restack(self._adamw)
        self._refresh_weights()

    def _refresh_weights(self) -> None:
        """Per-position loss weights of the members in stack order."""
        order = [self.runs[i] for i in self.order]
        device = self.net.layers[0].weight.device
        self.horizons = [r.horizon for r in order]
        self.horizon = torch.tensor(self.horizons, dtype=torch.float32, device=device)
        self.dim_weight = torch.zeros(len(order), 1, self.state_dim, device=device)
        self.event_weight = torch.zeros(len(order), 1, device=device)
        for j, r in enumerate(order):
            self.dim_weight[j, 0] = dimension_weights(r.config["variant"], r.task)
            self.event_weight[j, 0] = float(r.config["variant"]["event_weight"])

    def _cohort_views(self) -> list[list[torch.Tensor]]:
        """Each cohort's rows of every stacked parameter (contiguous in stack order) as
        leaf views sharing its storage, in key order (none for an empty cohort): AdamW's
        parameters, so a cohort's members, which take the same steps, share a step count,
        and a cohort whose rows get no gradient is left as it is (for a run alone: its whole
        parameters, as its checkpoints hold them)."""
        params = [p.detach() for p in self.net.parameters()]
        views: list[list[torch.Tensor]] = [[] for _ in self.cohort_members]
        start = 0
        for c in self.rank:
            n = len(self.cohort_members[c])
            if n:
                views[c] = [p[start : start + n] for p in params]
            start += n
        return views

    @torch.no_grad()
    def _restack(self, optimizer: torch.optim.Optimizer | None) -> None:
        """Bring the stacked parameters' rows into stack order (``order``): the rows of
        members that left are cut out, with their rows of their cohort's AdamW state."""
        order = self.order
        if order == self._rows:
            return
        where = {i: j for j, i in enumerate(self._rows)}
        device = self.net.layers[0].weight.device
        rows = torch.tensor([where[i] for i in order], dtype=torch.long, device=device)
        for p in self.net.parameters():
            p.data = p.data.index_select(0, rows)
            p.grad = None
        self._rows = order
        if self._views is None:
            return
        old, self._views = self._views, self._cohort_views()
        for c, (before, after) in enumerate(zip(old, self._views, strict=True)):
            members = set(self.cohort_members[c])
            keep = [j for j, i in enumerate(self._held[c]) if i in members]
            index = torch.tensor(keep, dtype=torch.long, device=device)
            for v, w in zip(before, after or [None] * len(before), strict=True):
                state = optimizer.state.pop(v, None) if optimizer is not None else None
                if state is not None and w is not None:
                    optimizer.state[w] = {
                        k: x.index_select(0, index) if torch.is_tensor(x) and x.dim() else x
                        for k, x in state.items()
                    }
            if optimizer is not None:
                optimizer.param_groups[c]["params"] = list(after)
        self._held = [list(m) for m in self.cohort_members]

    def _params(self, members: int | None = None) -> dict[str, torch.Tensor]:
        """The stacked parameters' first ``members`` rows (all with None), by name."""
        return {name: p[:members] for name, p in self.net.named_parameters()}

    def forward(
        self, state: torch.Tensor, action: torch.Tensor, members: int | None = None
    ) -> torch.Tensor:
        """Per-member predictions ``(K', N, S)`` of the stack's first ``K' = members``
        members (all with None) on their own inputs ``state (K', N, S)``, ``action (K', N)``
        (raw, unclamped)."""
        if members is None or members == len(self._rows):  # no parameters swapped in
            return self.net(state, action)
        return torch.func.functional_call(self.net, self._params(members), (state, action))

    @torch.no_grad()
    def drop(self, indices: Sequence[int], optimizer: torch.optim.Optimizer | None) -> None:
        """Cut members ``indices`` out of the stacked parameters and AdamW state."""
        gone = set(indices)
        self.cohort_members = [[i for i in m if i not in gone] for m in self.cohort_members]
        self._restack(optimizer)
        self._refresh_weights()

    @torch.no_grad()
    def snapshot(self, index: int, optimizer: torch.optim.Optimizer, score: float) -> _Snapshot:
        """Member ``index``'s weights and AdamW state now (copies, on CPU)."""
        c = next(c for c, held in enumerate(self._held) if index in held)
        j, row = self._held[c].index(index), self._rows.index(index)
        run = self.runs[index]
        weights = [p[row : row + 1].detach().cpu().clone() for p in self.net.parameters()]
        moments = [
            {
                k: (v[j : j + 1] if v.dim() > 0 else v).detach().cpu().clone()
                for k, v in optimizer.state.get(view, {}).items()
                if torch.is_tensor(v)
            }
            for view in self._views[c]
        ]
        return _Snapshot(run.epochs - 1, run.global_step, score, weights, moments)

    # ----------------------------------------------------------------- model and checkpoint

    def world_model(self) -> LearnedWorldModel:
        """The network of a stack of one behind the ``WorldModel`` interface (shares
        parameters)."""
        return LearnedWorldModel(self.net, self.metadata(), self.task.world)

    def metadata(self) -> dict[str, Any]:
        """The checkpoint's ``"gridplan"`` entry: layout version, architecture, config, data."""
        return run_metadata(self, self.net.architecture())

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Make the checkpoint self-describing (``metadata``) and keep the loss's dimension
        weights in it, as every run's checkpoint holds them."""
        checkpoint[CHECKPOINT_KEY] = self.metadata()
        weights = dimension_weights(self.hparams["config"]["variant"], self.task)
        checkpoint["state_dict"][DIM_WEIGHTS_KEY] = weights.to(self.net.layers[0].weight.device)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resume from a run's checkpoint: the dimension weights come from the config, and
        the optimizer steps of a run that Lightning's automatic optimization trained (runs
        before this engine) count as the steps of this module's own (``global_step``)."""
        checkpoint["state_dict"].pop(DIM_WEIGHTS_KEY, None)
        loop = checkpoint.get("loops", {}).get("fit_loop", {})
        auto = loop.get(f"{_EPOCH_LOOP}.automatic_optimization.optim_progress", {})
        manual = loop.get(f"{_EPOCH_LOOP}.manual_optimization.optim_step_progress")
        steps = auto.get("optimizer", {}).get("step")
        if manual is not None and steps and not manual["total"]["completed"]:
            loop[f"{_EPOCH_LOOP}.manual_optimization.optim_step_progress"] = steps

    # ------------------------------------------------------------------------ Lightning

    def on_fit_start(self) -> None:
        self._refresh_weights()
        if self.alone:
            write_dashboards(metric_writer(self.logger), "val", self.task)

    def configure_optimizers(self):
        """One fused AdamW over the stacked parameters: a parameter group of each cohort's
        rows (``_cohort_views``) and a cosine schedule per cohort."""
        self._views = self._cohort_views()
        self._held = [list(m) for m in self.cohort_members]
        groups = [
            {"params": views, "lr": lr, "weight_decay": wd}
            for views, (lr, wd, _) in zip(self._views, self.cohort_hparams, strict=True)
        ]
        opt = self._adamw = adamw(groups, groups[0]["lr"], groups[0]["weight_decay"], self.device)
        lambdas = [(lambda e, n=epochs: lr_factor(e, n)) for (_, _, epochs) in self.cohort_hparams]
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambdas)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

    def train_dataloader(self):
        """The epoch's ``_Epoch``: its members in stack order and the steps each takes (a
        group reloads it every epoch, as members stop; a run alone's stays)."""
        self.rank_cohorts()
        order = [self.runs[i] for i in self.order]
        for run in order:
            run.epoch_steps = run.steps_now()
        self._epoch_steps = max((r.epoch_steps for r in order), default=0)
        return _Epoch(self, self._epoch_steps)

    def draw_epoch(self, s: int) -> list[dict]:
        """The ``s`` steps of an epoch, each member's rows drawn from its stream: ``rows
        (K_t, B)`` into the training buffer, ``weight (K_t, B)`` (0 on padding), ``denom
        (K_t,)`` (S x real rows) and the first member's real rows (a plain int: a run alone
        logs its loss with it, reading nothing off the device)."""
        order = [self.runs[i] for i in self.order]
        rows, weight = _epoch_rows(order, s)
        steps = torch.tensor([r.epoch_steps for r in order])
        batches = []
        for t in range(s):
            k = int((steps > t).sum())
            w = weight[t, :k]
            batches.append(
                {
                    "rows": rows[t, :k],
                    "weight": w,
                    "denom": self.state_dim * w.sum(1),
                    "first_rows": int(w[0].sum()) if k else 0,
                }
            )
        return batches

    def errors(self, prefix: str, rows: torch.Tensor, weight: torch.Tensor):
        """Per-member weighted squared error sums ``(K',)`` of one step (the loss before
        its normalization), summed over the ``H`` open-loop steps of members with a rollout
        loss.

        Args:
            prefix: ``"train"`` or ``"val"``, the buffers read.
            rows: ``(K', B)`` long rows of those buffers of the stack's first ``K'`` members,
                in stack order.
            weight: ``(K', B)`` float, 0 on padding rows.
        """
        k = rows.shape[0]
        state = _gather(getattr(self, f"{prefix}_states"), rows)
        action = _gather(getattr(self, f"{prefix}_actions"), rows)
        pred = self(state, action, k)
        total = self._step_error(prefix, rows, weight, pred, slice(0, k))
        rollout = [j for j in range(k) if self.horizons[j] > 1]
        if not rollout:
            return total
        # Only the members with a rollout loss roll on: the others' steps would be wasted.
        index = torch.tensor(rollout, device=rows.device)
        params = {n: p.index_select(0, index) for n, p in self._params(k).items()}
        links = getattr(self, f"{prefix}_next")
        cur, ok = rows[index], weight[index] > 0
        pred = pred[index]
        extra = torch.zeros_like(total[index])
        for step in range(1, max(self.horizons[j] for j in rollout)):
            nxt = links[cur]
            ok = ok & (nxt >= 0) & (self.horizon[index] > step).unsqueeze(1)
            cur = torch.where(ok, nxt, cur)
            step_action = _gather(getattr(self, f"{prefix}_actions"), cur)
            pred = torch.func.functional_call(
                self.net, params, (pred.clamp(0.0, 1.0), step_action)
            )
            extra = extra + self._step_error(prefix, cur, ok.float(), pred, index)
        return total.index_add(0, index, extra)

    def _step_error(self, prefix, rows, weight, pred, members) -> torch.Tensor:
        """Per-member weighted squared error sums of predictions ``pred`` of ``rows``;
        ``members`` picks the members' loss weights (a slice or an index tensor)."""
        target = _gather(getattr(self, f"{prefix}_next_states"), rows)
        event = _gather(getattr(self, f"{prefix}_event"), rows)
        sample = torch.where(event, self.event_weight[members], 1.0) * weight
        return squared_error_sums(pred, target, self.dim_weight[members], sample)

    def on_train_epoch_start(self) -> None:
        self._train_sum = torch.zeros(len(self.order), device=self.train_states.device)
        self._train_rows = torch.zeros_like(self._train_sum)
        self._step_losses: list[tuple[int, torch.Tensor]] = []

    def training_step(self, batch, batch_idx):
        """One AdamW step of every member training at ``batch_idx`` (members that sit the
        step out get no gradient, so AdamW leaves them untouched). The epoch's last step
        also steps the cosine schedule, where Lightning steps an epoch-interval scheduler
        (before validation; a checkpoint of the epoch holds the stepped schedule)."""
        optimizer = self.optimizers()
        per_member = self.errors("train", batch["rows"], batch["weight"])
        k = per_member.shape[0]
        loss = per_member / (batch["denom"] * self.horizon[:k])
        self.net.zero_grad(set_to_none=True)
        self.manual_backward(loss.sum())
        self._share_grads(k)
        optimizer.step()
        self._share_grads(0)  # the step's gradients are freed for the next backward to reuse
        with torch.no_grad():
            rows = batch["denom"] / self.state_dim
            self._train_sum[:k] += loss.detach() * rows
            self._train_rows[:k] += rows
            self._step_losses.append((batch_idx, loss.detach()))
        if self.alone:
            size = batch["first_rows"]
            self.log("train/loss", loss[0], on_step=True, on_epoch=True, batch_size=size)
        if batch_idx + 1 == self._epoch_steps:
            self.lr_schedulers().step()

    def _share_grads(self, k: int) -> None:
        """Give the cohorts among the first ``k`` members (a prefix of whole cohorts) their
        rows of the stacked gradients as their AdamW parameters' gradients, and the others
        none (AdamW skips them)."""
        grads = [p.grad for p in self.net.parameters()]
        start = 0
        for c in self.rank:
            end = start + len(self.cohort_members[c])
            if end > start:  # an empty cohort has no views
                for view, grad in zip(self._views[c], grads, strict=True):
                    view.grad = grad[start:end] if end <= k else None
            start = end

    def val_dataloader(self):
        """Validation chunks: ``rows (K, C)`` into the validation buffer, ``weight (K, C)``."""
        order = [self.runs[i] for i in self.order]
        if not order:
            return _Steps([])
        n = max(len(r.val_rows) for r in order)
        n = -(-n // VAL_ALIGN) * VAL_ALIGN
        rows = torch.zeros(len(order), n, dtype=torch.long)
        weight = torch.zeros(len(order), n)
        for j, run in enumerate(order):
            rows[j, : len(run.val_rows)] = run.val_rows
            weight[j, : len(run.val_rows)] = 1.0
        return _Steps(
            [
                {"rows": rows[:, c : c + VAL_CHUNK], "weight": weight[:, c : c + VAL_CHUNK]}
                for c in range(0, n, VAL_CHUNK)
            ]
        )

    def on_validation_epoch_start(self) -> None:
        self._val_sum = torch.zeros(len(self.order), device=self.train_states.device)

    def validation_step(self, batch, batch_idx):
        self._val_sum += self.errors("val", batch["rows"], batch["weight"])

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
            if metrics_due(run.trainer_cfg, self.current_epoch):
                by_windows.setdefault((run.windows_key, run.task), []).append(pos)
        for (wkey, task), positions in by_windows.items():
            windows = self._windows_on_device(wkey)
            model = StackWorldModel(self.net, self._params(), positions)
            for pos, scored in zip(positions, _score(model, windows, task), strict=True):
                i = order[pos]
                self.epoch_scores[i] = scored
                self.epoch_metrics[i].update(metric_scalars(scored, "val"))
        if self.alone:
            self._log_alone()

    def _log_alone(self) -> None:
        """A run alone's validation: its metrics through Lightning (the checkpoint and
        early-stopping callbacks read them) and the dashboard images when due."""
        (index,) = self.runs
        metrics = dict(self.epoch_metrics[index])
        self.log("val/loss", metrics.pop("val/loss"), prog_bar=True)
        self.log_dict(metrics)
        scored = self.epoch_scores.get(index)
        due = figures_due(self.hparams["config"]["trainer"], self.current_epoch)
        if scored is not None and due:
            log_figures(metric_writer(self.logger), scored, self.global_step, "val", self.task)

    def _windows_on_device(self, key: str):
        if key not in self._windows:
            run = next(r for r in self.runs.values() if r.windows_key == key)
            self._windows[key] = run.data.windows.to(self.train_states.device)
        return self._windows[key]


def _shape(config: dict, members: int) -> tuple:
    """``MLPDynamics`` arguments of ``config``'s architecture with ``members`` members."""
    m = config["model"]
    world = config_task(config).world
    width, actions = world.state_dim, world.n_actions
    return m["hidden"], members, m["activation"], m["predict_delta"], width, actions


def _gather(buffer: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``buffer[rows]``: rows ``(K, B)`` of ``buffer (N, ...)`` as ``(K, B, ...)``, by one
    ``index_select`` (a copy, as advanced indexing makes, in a third of its time on CPU)."""
    return buffer.index_select(0, rows.reshape(-1)).view(*rows.shape, *buffer.shape[1:])


def _epoch_rows(order: list[_Run], s: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each member's rows of its next ``s`` steps in its run alone's order (``epoch_order``
    of its stream): ``rows (s, K, B)`` into the training buffer, ``weight (s, K, B)`` (0 on
    padding and on steps it sits out)."""
    b = max((r.batch for r in order), default=0)
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
    return rows, weight


def _score(model, windows, task: tasks.Task):
    """``prediction_metrics`` of every setting of ``model``, drawn as
    ``gridplan.training.module.score_windows`` draws."""
    gen = torch.Generator(device=windows.start.device).manual_seed(0)
    return prediction_metrics(model, windows, task=task, generator=gen)


def score_best_snapshots(runs: Sequence[_Run]) -> dict[int, Any]:
    """Prediction metrics of each run's best snapshot (``_Run.best``, on CPU) on its held-out
    windows, by run index: one batched pass per set of windows (``StackWorldModel``) instead
    of one per run. They are the numbers ``gridplan.training.module.score_best`` reads off
    each run's best checkpoint: the same weights, each member's rows through the same
    kernels, the same draws."""
    by_windows: dict[tuple, list[_Run]] = {}
    for run in runs:
        by_windows.setdefault((run.windows_key, run.task), []).append(run)
    scored = {}
    for (_, task), same in by_windows.items():
        with torch.random.fork_rng(devices=[]):  # its own weights are never read
            template = MLPDynamics(*_shape(same[0].config, 1))
        names = [name for name, _ in template.named_parameters()]
        params = {n: torch.cat([r.best.weights[j] for r in same]) for j, n in enumerate(names)}
        model = StackWorldModel(template, params, range(len(same)))
        for run, result in zip(same, _score(model, same[0].data.windows, task), strict=True):
            scored[run.index] = result
    return scored


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
