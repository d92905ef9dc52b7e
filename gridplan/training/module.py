"""Training of MLP world models: data module, loss, dashboards, schedule (paper §5.4).

- ``TransitionDataModule``: logged transitions of one behaviour policy and budget (collected
  once, cached under ``data_cache/``), split into train and validation by episode, plus the
  held-out open-loop ``EvalWindows`` that validation scores.
- The loss: ``squared_error_sums`` with per-dimension (``dimension_weights``) and
  per-transition (the event weight) weights. The five loss variants of paper Table 3 are one
  loss with different weights (``VariantConfig``), never copies of the module; the
  ``LightningModule`` that trains with it is ``gridplan.training.engine.WorldModelModule``.
- Dashboards: each validation epoch logs ``val/loss`` and, on the held-out windows,
  ``val/E_tot``, ``val/DRPE_binary``, ``val/DRPE_graded``, ``val/err_dim/<dim>`` (12 scalars,
  also one multi-line chart in TensorBoard's custom-scalars tab), ``val/event/<name>`` and
  two images: the per-dimension profile ordered by relevance and the ``(H, 12)`` per-step
  heatmap (``metric_scalars``, ``log_figures``).

Letter legend: ``N`` transitions in a batch, ``K`` ensemble members, ``H`` window length.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler
from torch.utils.data import TensorDataset as _Tensors

from gridplan.core import tasks
from gridplan.core.constants import STATE_LAYOUT_VERSION
from gridplan.core.relevance import relevance_weights
from gridplan.core.tasks import TASK_A, Task
from gridplan.data.datasets import (
    EvalWindows,
    TransitionDataset,
    collect,
    eval_windows,
    parse_budget,
)
from gridplan.models.learned import load_world_model
from gridplan.training.loggers import finish_logger, log_final_metrics
from gridplan.util.files import write_text_atomic
from gridplan.util.jsonio import dumps

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------
# Loss


def dimension_weights(variant: dict, task: Task = TASK_A) -> torch.Tensor:
    """Per-dimension loss weights of a variant: ``(S,)`` float (the task's world).

    ``variant["relevant_weight"]`` on the task's relevant dims (``task.relevant_dims``),
    ``variant["irrelevant_weight"]`` on the others. Paper Table 3: ``anti_weighted`` and
    ``rel_heavy`` scale the relevant dims down or up, ``rel_only`` zeroes the irrelevant ones.
    """
    w = torch.full((tasks.check(task).world.state_dim,), float(variant["irrelevant_weight"]))
    w[list(tasks.check(task).relevant_dims)] = float(variant["relevant_weight"])
    return w


def sample_weights(
    pickup: torch.Tensor, door_opened: torch.Tensor, event_weight: float
) -> torch.Tensor:
    """Per-transition loss weights: ``event_weight`` where the key was picked up or the door
    opened, else 1. ``(N,)`` bool inputs -> ``(N,)`` float."""
    event = pickup | door_opened
    return torch.where(event, float(event_weight), 1.0).to(torch.float32)


def squared_error_sums(
    pred: torch.Tensor,
    target: torch.Tensor,
    dim_weights: torch.Tensor,
    sample_weight: torch.Tensor,
) -> torch.Tensor:
    """Per-member weighted squared error sums, the loss of every MLP world model
    (``gridplan.training.engine``): ``sum_{n,d} sample_weight_kn * dim_weights_kd *
    (pred_knd - target_knd)^2``, ``(K,)``.

    Args:
        pred: ``(K, N, S)`` raw predicted next states.
        target: ``(K, N, S)`` or ``(N, S)`` true next states.
        dim_weights: ``(K, 1, S)`` or ``(S,)``, non-negative.
        sample_weight: ``(K, N)`` or ``(N,)``, non-negative (0 on padding rows).
    """
    sq = (pred - target).square() * dim_weights
    return (sq.sum(-1) * sample_weight).sum(-1)


def weighted_mse(
    pred: torch.Tensor,
    target: torch.Tensor,
    dim_weights: torch.Tensor,
    sample_weight: torch.Tensor,
) -> torch.Tensor:
    """Weighted squared error averaged over members, transitions and the ``S`` dims.

    ``mean_{k,n,d} sample_weight_n * dim_weights_d * (pred_knd - target_nd)^2``
    (``squared_error_sums`` over the ``K N S`` entries). The weights are not renormalized,
    so a batch made only of event transitions scores exactly ``event_weight`` times its
    uniform loss.

    Args:
        pred: ``(K, N, S)`` raw predicted next states.
        target: ``(N, S)`` true next states.
        dim_weights: ``(S,)`` non-negative.
        sample_weight: ``(N,)`` non-negative.

    Returns:
        Scalar tensor.

    Raises:
        ValueError: if the shapes do not line up.
    """
    if pred.dim() != 3 or target.dim() != 2 or pred.shape[1:] != target.shape:
        raise ValueError(
            f"pred must be (K, N, S) matching target (N, S); got "
            f"{tuple(pred.shape)} and {tuple(target.shape)}"
        )
    s = target.shape[1]
    if dim_weights.shape != (s,) or sample_weight.shape != target.shape[:1]:
        raise ValueError(
            f"dim_weights must be ({s},) and sample_weight ({target.shape[0]},); got "
            f"{tuple(dim_weights.shape)} and {tuple(sample_weight.shape)}"
        )
    return squared_error_sums(pred, target, dim_weights, sample_weight).sum() / pred.numel()


def next_rows(episode: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Row of the logged step that follows each row in its episode: ``(N,)`` long, -1 where
    the episode's logged steps end.

    Args:
        episode: ``(N,)`` long episode ids, rows ordered by episode then step (as
            ``gridplan.data.datasets.collect`` and ``TransitionDataset.subset`` keep them).
        t: ``(N,)`` long step index within the episode.
    """
    n = episode.shape[0]
    follows = (episode[1:] == episode[:-1]) & (t[1:] == t[:-1] + 1)
    out = torch.full((n,), -1, dtype=torch.long, device=episode.device)
    out[:-1] = torch.where(follows, torch.arange(1, n, device=episode.device), -1)
    return out


def rollout_rows(links: torch.Tensor, rows: torch.Tensor, horizon: int):
    """The rows of ``horizon`` consecutive logged steps from each of ``rows``.

    Args:
        links: ``(N,)`` long, ``next_rows`` of the buffer ``rows`` index.
        rows: any shape ``(...)`` long, the first step of each rollout.
        horizon: ``H >= 1``.

    Returns:
        ``(steps, valid)``, each ``(..., H)``: step ``k``'s row (after the episode's last
        logged step, the last row again) and whether the episode still runs at step ``k``.
    """
    cur, ok = rows, torch.ones_like(rows, dtype=torch.bool)
    steps, valid = [cur], [ok]
    for _ in range(horizon - 1):
        nxt = links[cur]
        ok = ok & (nxt >= 0)
        cur = torch.where(ok, nxt, cur)
        steps.append(cur)
        valid.append(ok)
    return torch.stack(steps, dim=-1), torch.stack(valid, dim=-1)


# ---------------------------------------------------------------------------------------
# Data


def cache_path(cache_dir: str | Path, policy: str, transitions: int, seed: int, task: Task) -> Path:
    """Cached dataset file: ``<cache_dir>/<task.name>-<policy>-<transitions>-seed<seed>.pt``
    (prefixed ``<world>-`` outside the default world)."""
    name = f"{task.world.file_prefix}{task.name}-{policy}-{transitions}-seed{seed}.pt"
    return Path(cache_dir) / name


def cached_dataset(
    policy: str,
    transitions: int,
    seed: int,
    task: Task = TASK_A,
    cache_dir: str | Path = "data_cache",
) -> TransitionDataset:
    """``gridplan.data.datasets.collect`` with an on-disk cache keyed by (task, policy, budget,
    seed).

    A cached file that is unreadable or whose meta disagrees with the key is reported and
    collected again (it is derived data: the same key always regenerates the same dataset).

    Raises:
        ValueError: on an unknown policy or a bad budget (from ``collect``).
        TypeError: if ``task`` is not a ``gridplan.core.tasks.Task``.
    """
    path = cache_path(cache_dir, policy, transitions, seed, task)
    want = {"policy": policy, "transitions": transitions, "seed": seed, "task": task.name}
    if path.exists():
        try:
            data = TransitionDataset.load(path)
            if data.world == task.world and all(data.meta.get(k) == v for k, v in want.items()):
                return data
            log.warning("cached dataset %s does not match %s; collecting again", path, want)
        except ValueError as err:
            log.warning("cached dataset %s is unusable (%s); collecting again", path, err)
    data = collect(policy, transitions, seed, task)
    data.save(path, overwrite=True)
    return data


_WINDOWS: dict[tuple, Any] = {}


def held_out_windows(
    n: int,
    horizon: int,
    seed: int,
    policy: str,
    task: Task,
    cache_dir: str | Path | None = None,
):
    """``gridplan.data.datasets.eval_windows(n, horizon, seed, policy, task)``, made once per
    process (on CPU) and shared: the many runs of a sweep or a vectorized group validate on the same
    windows. Callers must not modify them.

    With ``cache_dir`` they are also kept on disk beside the cached datasets
    (``<cache_dir>/<task>-windows-<policy>-<n>x<horizon>-seed<seed>.pt``), so a new process
    reads them instead of playing the behaviour episodes again (a third of a second, as
    long as a 20k run's first epoch). A cached file that is unusable or made for other
    settings is reported and made again (derived data: the same key remakes the same
    windows).
    """
    key = (n, horizon, seed, policy, task)
    if key in _WINDOWS:
        return _WINDOWS[key]
    path = None
    if cache_dir is not None:
        name = f"{task.world.file_prefix}{task.name}-windows-{policy}-{n}x{horizon}-seed{seed}.pt"
        path = Path(cache_dir) / name
    windows = None
    if path is not None and path.exists():
        want = {"n_windows": n, "horizon": horizon, "seed": seed, "policy": policy}
        want["task"] = task.name
        try:
            windows = EvalWindows.load(path)
            if windows.world != task.world or any(
                windows.meta.get(k) != v for k, v in want.items()
            ):
                log.warning("cached windows %s do not match %s; making them again", path, want)
                windows = None
        except ValueError as err:
            log.warning("cached windows %s are unusable (%s); making them again", path, err)
    if windows is None:
        windows = eval_windows(n, horizon=horizon, seed=seed, policy=policy, task=task)
        if path is not None:
            try:
                windows.save(path)
            except OSError as err:  # a cache only: training goes on without it
                log.warning("could not cache the windows in %s (%s)", path, err)
    _WINDOWS[key] = windows
    return windows


class TransitionDataModule(pl.LightningDataModule):
    """Logged transitions split by episode, and held-out evaluation windows.

    Args:
        data: the ``data`` section of a resolved config (``gridplan.training.config.DataConfig``
            fields: budget, policy, task, seed, val_fraction, batch_size, cache_dir,
            windows, window_horizon, window_seed, window_policy).
        rollout_horizon: ``H`` of the loss (``variant.rollout_horizon``); above 1 every
            batch also carries the next ``H - 1`` logged steps of each transition
            (``actions, targets, events, valid``, as the latent families' loss reads them,
            ``gridplan.training.latent_module``).
        world: the run's world name (``Config.world``).

    After ``setup()``: ``dataset`` (all transitions), ``train_set`` / ``val_set``
    (``TransitionDataset``) and ``windows`` (``EvalWindows``).
    """

    def __init__(self, data: dict, rollout_horizon: int = 1, world: str = "default") -> None:
        super().__init__()
        self.cfg = dict(data)
        self.world = world
        self.rollout_horizon = int(rollout_horizon)
        self.dataset: TransitionDataset | None = None
        self.train_set: TransitionDataset | None = None
        self.val_set: TransitionDataset | None = None
        self.windows = None

    def setup(self, stage: str | None = None) -> None:
        if self.dataset is not None:
            return
        c = self.cfg
        task = tasks.get(c["task"], world=self.world)
        self.dataset = cached_dataset(
            c["policy"], parse_budget(c["budget"]), int(c["seed"]), task, c["cache_dir"]
        )
        self.train_set, self.val_set = self.dataset.split_by_episode(
            c["val_fraction"], int(c["seed"])
        )
        self.windows = held_out_windows(
            int(c["windows"]),
            int(c["window_horizon"]),
            int(c["window_seed"]),
            c["window_policy"],
            task,
            c["cache_dir"],
        )

    def summary(self) -> dict[str, Any]:
        """What the checkpoint records about the data: fingerprint, event counts, meta and
        split sizes (plain Python values)."""
        if self.dataset is None:
            self.setup()
        return {
            "fingerprint": self.dataset.fingerprint(),
            "event_counts": self.dataset.event_counts(),
            "meta": dict(self.dataset.meta),
            "train_transitions": len(self.train_set),
            "val_transitions": len(self.val_set),
            "windows": dict(self.windows.meta),
        }

    def _tensors(self, part: TransitionDataset) -> _Tensors:
        one_step = (part.states, part.actions, part.next_states, part.pickup, part.door_opened)
        if self.rollout_horizon == 1:
            return _Tensors(*one_step)
        links = next_rows(part.episode, part.t)
        steps, valid = rollout_rows(links, torch.arange(len(part)), self.rollout_horizon)
        later, valid = steps[:, 1:], valid[:, 1:]
        events = part.pickup[later] | part.door_opened[later]
        return _Tensors(*one_step, part.actions[later], part.next_states[later], events, valid)

    def _loader(self, part: TransitionDataset, shuffle: bool) -> DataLoader:
        tensors = self._tensors(part)
        order = RandomSampler(tensors) if shuffle else SequentialSampler(tensors)
        # Whole batches are sliced out of the tensors at once (batch_size=None + a batch
        # sampler): no per-row __getitem__ and collate, which would dominate a tiny MLP.
        sampler = BatchSampler(order, int(self.cfg["batch_size"]), drop_last=False)
        return DataLoader(tensors, sampler=sampler, batch_size=None)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, shuffle=False)


# ---------------------------------------------------------------------------------------
# Dashboards


def relevance_order(task: Task = TASK_A) -> list[int]:
    """Dims ordered by graded relevance (paper Eq. 1), most relevant first; ties (the
    irrelevant dims, weight 0) keep the state layout order."""
    w = relevance_weights(task)
    return sorted(range(task.world.state_dim), key=lambda d: (-float(w[d]), d))


def profile_figure(profile, task: Task = TASK_A, title: str = ""):
    """Bar chart of the ``(S,)`` per-dimension open-loop MSE, ordered by relevance.

    Relevant dims are drawn in one colour, irrelevant in another (paper §5.5: "report
    error profiles ordered by task relevance"). Returns a Matplotlib figure.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    profile = torch.as_tensor(profile, dtype=torch.float32).cpu()
    order = relevance_order(task)
    relevant = set(task.relevant_dims)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    colors = ["tab:red" if d in relevant else "tab:gray" for d in order]
    names = task.world.dim_names
    ax.bar(range(len(order)), [float(profile[d]) for d in order], color=colors)
    ax.set_xticks(range(len(order)), [names[d] for d in order], rotation=45, ha="right")
    ax.set_ylabel("open-loop MSE")
    ax.set_title(title or f"error profile (task {task.name}; red: relevant)")
    fig.tight_layout()
    return fig


def step_profile_figure(step_profile, task: Task = TASK_A, title: str = ""):
    """Heatmap of the ``(H, S)`` per-step, per-dimension MSE, columns ordered by relevance.
    Returns a Matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    sp = torch.as_tensor(step_profile, dtype=torch.float32).cpu()
    order = relevance_order(task)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    image = ax.imshow(sp[:, order].numpy(), aspect="auto", origin="lower", cmap="viridis")
    names = task.world.dim_names
    ax.set_xticks(range(len(order)), [names[d] for d in order], rotation=45, ha="right")
    ax.set_yticks(range(sp.shape[0]), [str(t + 1) for t in range(sp.shape[0])])
    ax.set_ylabel("imagined step")
    ax.set_title(title or "per-step error (MSE)")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def _as_dict(metrics) -> dict:
    return metrics if isinstance(metrics, dict) else metrics.to_dict()


def metric_scalars(metrics, prefix: str = "val") -> dict[str, float]:
    """Flat TensorBoard scalars of one model's metrics.

    Args:
        metrics: a ``gridplan.metrics.prediction.PredictionMetrics`` or its ``to_dict()`` form
            (also a ``gridplan.evaluation.ladder.paper_report`` dict, whose ``success`` is
            included).
        prefix: tag group, e.g. ``val``, ``best`` or ``eval``.

    Returns:
        ``<prefix>/E_tot``, ``<prefix>/DRPE_<kind>``, ``<prefix>/VPE``,
        ``<prefix>/err_dim/<dim>`` (one per state dim), ``<prefix>/event/<name>`` (the
        audit's errors; counts, and NaN/None values where the windows hold no such event, are
        left out) and
        ``<prefix>/success`` when present.
    """
    m = _as_dict(metrics)
    out = {f"{prefix}/E_tot": float(m["E_tot"])}
    if isinstance(m.get("success"), dict):
        out[f"{prefix}/success"] = float(m["success"]["mean"])
    for kind, value in m["DRPE"].items():
        out[f"{prefix}/DRPE_{kind}"] = float(value)
    if m.get("VPE") is not None:
        out[f"{prefix}/VPE"] = float(m["VPE"])
    for name, value in m["profile"].items():
        out[f"{prefix}/err_dim/{name}"] = float(value)
    for name, value in m["event_audit"].items():
        # Event counts (n_pickup, n_door) are fixed by the windows, not model errors.
        if name.startswith("n_") or value is None or math.isnan(value):
            continue
        out[f"{prefix}/event/{name}"] = float(value)
    return out


#: Event-audit values that are predicted flags (truth 1 at the event), not squared errors:
#: their chart is apart from the errors' (another scale).
EVENT_FLAGS = ("carrying_at_pickup", "door_open_at_opening")
#: Event-audit squared errors (``gridplan.metrics.prediction.event_audit``).
EVENT_ERRORS = ("pickup_mse", "door_mse", "pickup_state_mse", "door_state_mse", "event_mse")


def _weights_text(dims: Sequence[int], weights: torch.Tensor, names: Sequence[str]) -> str:
    return ", ".join(f"{names[d]} {float(weights[d]):.3f}" for d in dims)


def dashboard_layout(prefix: str = "val", task: Task = TASK_A) -> dict:
    """TensorBoard custom-scalars layout of one tag group (``<prefix>/``).

    The per-dimension open-loop errors are split by the task's relevance: charts of the
    relevant dims (``task.relevant_dims``), titled with their graded relevance weights
    (paper Eq. 1, ``gridplan.core.relevance.relevance_weights``), most relevant first, and charts
    of the irrelevant dims (weight 0); positions and flags (the world's ``flag_dims``: 0/1
    values, errors of another scale) are in charts of their own, so four charts (fewer where
    a task leaves one empty). The event audit's squared errors and its predicted flags
    (``EVENT_FLAGS``, near 1 where the model is right) are separate charts, and E_tot is
    beside the DRPEs. Each chart lists its tags exactly (anchored regexes).
    """
    weights = relevance_weights(task)
    order = relevance_order(task)
    names, flag_dims = task.world.dim_names, set(task.world.flag_dims)
    relevant = [d for d in order if d in task.relevant_dims]
    irrelevant = [d for d in order if d not in task.relevant_dims]

    def tags(names: Sequence[str], group: str) -> list[str]:
        return [rf"^{prefix}/{group}/{n}$" for n in names]

    def dims(chosen: list[int], flags: bool) -> list[int]:
        return [d for d in chosen if (d in flag_dims) == flags]

    charts = {}
    for kind, flags in (("positions", False), ("flags", True)):
        on = dims(relevant, flags)
        charts[f"relevant {kind}, graded weights: {_weights_text(on, weights, names)}"] = [
            "Multiline", tags([names[d] for d in on], "err_dim")
        ]
    for kind, flags in (("positions", False), ("flags", True)):
        off = [names[d] for d in dims(irrelevant, flags)]
        charts[f"irrelevant {kind} (weight 0): {', '.join(off)}"] = [
            "Multiline", tags(off, "err_dim")
        ]
    charts.update({
        "event audit: squared errors at pickups and door openings": [
            "Multiline", tags(EVENT_ERRORS, "event")
        ],
        "event audit: predicted flag at the event (truth 1)": [
            "Multiline", tags(EVENT_FLAGS, "event")
        ],
        "E_tot and DRPE": ["Multiline", [rf"^{prefix}/E_tot$", rf"^{prefix}/DRPE_.*"]],
    })
    return {prefix: {title: chart for title, chart in charts.items() if chart[1]}}


def relevance_text(task: Task = TASK_A) -> str:
    """A Markdown table of the task's dims, most relevant first: graded relevance weight
    (paper Eq. 1), relevant or not (``task.relevant_dims``), position or flag."""
    weights = relevance_weights(task)
    names, flag_dims = task.world.dim_names, set(task.world.flag_dims)
    rows = ["| dim | graded weight | relevant | kind |", "| --- | --- | --- | --- |"]
    for d in relevance_order(task):
        kind = "flag" if d in flag_dims else "position"
        relevant = "yes" if d in task.relevant_dims else "no"
        rows.append(f"| {names[d]} | {float(weights[d]):.4f} | {relevant} | {kind} |")
    return "\n".join(rows)


def write_dashboards(writer, prefix: str = "val", task: Task = TASK_A) -> None:
    """Add ``dashboard_layout`` and the relevance table (``relevance_text``, text summary
    ``<prefix>/relevance``) through a ``SummaryWriter``-shaped ``writer``."""
    writer.add_custom_scalars(dashboard_layout(prefix, task))
    writer.add_text(f"{prefix}/relevance", relevance_text(task), 0)


def log_figures(writer, metrics, step: int, prefix: str = "val", task: Task = TASK_A) -> None:
    """Add the profile bar chart (``<prefix>/profile``) and the per-step heatmap
    (``<prefix>/step_profile``) of one model's metrics (as in ``metric_scalars``) to a
    TensorBoard ``SummaryWriter``."""
    m = _as_dict(metrics)
    title = f"E_tot {m['E_tot']:.4f}  " + "  ".join(
        f"DRPE_{k} {v:.4f}" for k, v in m["DRPE"].items()
    )
    profile = [m["profile"][name] for name in task.world.dim_names]
    writer.add_figure(f"{prefix}/profile", profile_figure(profile, task, title), step)
    writer.add_figure(f"{prefix}/step_profile", step_profile_figure(m["step_profile"], task), step)


def log_report(
    log_dir: str | Path, report, step: int = 0, prefix: str = "eval", task: Task = TASK_A
) -> None:
    """Write one model's metrics (as in ``metric_scalars``) into TensorBoard under
    ``<prefix>/``: scalars, the charts of ``dashboard_layout`` and both figures, in a new
    event file of ``log_dir`` (a training run's folder keeps its earlier event files)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(log_dir))
    try:
        write_dashboards(writer, prefix, task)
        for tag, value in metric_scalars(report, prefix).items():
            writer.add_scalar(tag, value, step)
        log_figures(writer, report, step, prefix, task)
    finally:
        writer.close()


def score_windows(model, windows, task: Task = TASK_A):
    """``gridplan.metrics.prediction.prediction_metrics`` of a one-setting model on ``windows``."""
    from gridplan.metrics.prediction import prediction_metrics

    gen = torch.Generator().manual_seed(0)
    return prediction_metrics(model, windows, task=task, generator=gen)[0]


# ---------------------------------------------------------------------------------------
# Optimizer and schedule (shared with the latent families, gridplan.training.latent_module)


def run_metadata(module: pl.LightningModule, architecture: dict) -> dict[str, Any]:
    """The part of a checkpoint's ``"gridplan"`` entry every family writes: the state layout
    version, the network's ``architecture``, the run's config and data (``module.hparams``),
    its task and world (``module.task``), and the epoch and step it was saved at."""
    return {
        "state_layout_version": STATE_LAYOUT_VERSION,
        "model": architecture,
        "config": module.hparams["config"],
        "dataset": module.hparams["dataset"],
        "task": module.task.name,
        "world": module.task.world.spec(),
        "epoch": int(module.current_epoch),
        "global_step": int(module.global_step),
    }


def lr_factor(epoch: int, epochs: int) -> float:
    """Learning-rate multiplier of ``epoch`` (0-based): cosine decay to 5% of the peak over
    ``epochs``, flat after. Late epochs refine positions below the one-cell decision
    resolution instead of bouncing around it."""
    epochs = max(1, int(epochs))
    return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(epoch, epochs) / epochs))


def adamw(params, lr: float, weight_decay: float, device: torch.device | str):
    """``torch.optim.AdamW`` over ``params`` (tensors or parameter groups), with torch's
    fused kernel on CPU and CUDA: one pass per tensor instead of a loop over the tensors, the
    same update within float rounding."""
    fused = True if torch.device(device).type in ("cpu", "cuda") else None
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused)


def figures_due(trainer: dict, epoch: int) -> bool:
    """Whether epoch ``epoch`` (0-based) draws the two dashboard images: every
    ``figures_every_n_epochs`` epochs from the first and at ``max_epochs``; never when it is
    0 (the images are Matplotlib renders, drawn on CPU)."""
    every = int(trainer["figures_every_n_epochs"])
    return every > 0 and (epoch % every == 0 or epoch + 1 >= int(trainer["max_epochs"]))


def metrics_due(trainer: dict, epoch: int) -> bool:
    """Whether epoch ``epoch`` (0-based) scores the held-out windows: every
    ``metrics_every_n_epochs`` epochs from the first and at ``max_epochs``; never when it is
    0 (only the best checkpoint is scored, by ``score_best``)."""
    every = int(trainer.get("metrics_every_n_epochs", 1))
    return every > 0 and (epoch % every == 0 or epoch + 1 >= int(trainer["max_epochs"]))


def score_best(path, windows, task: Task, writer, step: int, figures: bool) -> dict[str, Any]:
    """Prediction metrics of a run's best checkpoint on its held-out ``windows``
    (``metric_scalars`` under ``best/``), also written to TensorBoard through ``writer`` with
    both images when ``figures``."""
    scored = score_windows(load_world_model(path), windows, task)
    return log_best(scored, task, writer, step, figures)


def log_best(scored, task: Task, writer, step: int, figures: bool) -> dict[str, Any]:
    """``score_best``'s scalars of the prediction metrics ``scored`` of a run's best network
    (``metric_scalars`` under ``best/``), written through ``writer`` with both images when
    ``figures``."""
    metrics: dict[str, Any] = metric_scalars(scored, "best")
    for name, value in metrics.items():
        writer.add_scalar(name, value, step)
    if figures:
        log_figures(writer, scored, step, "best", task)
    writer.flush()
    return metrics


def record_run(
    run_dir: Path,
    metrics: dict[str, Any],
    dataset: dict[str, Any],
    logger,
    writer,
    step: int,
    checkpoints: tuple[Path | str, Path | str],
) -> tuple[dict[str, Any], dict[str, str]]:
    """Close a finished run, trained alone or in a group (``gridplan.training.runs``,
    ``gridplan.training.vectorized``): its HParams metrics (``log_final_metrics``), its logger,
    and ``metrics.json`` (``{"metrics": ..., "dataset": ...}``, written atomically).

    Args:
        run_dir: the run folder.
        metrics: the best checkpoint's scores plus ``epochs``, ``best_score``, ``monitor``
            and ``train_seconds``.
        dataset: ``TransitionDataModule.summary()`` of its training data.
        logger, writer: the run's logger and its ``metric_writer``.
        step: the run's last optimizer step.
        checkpoints: its ``(best, last)`` checkpoint paths.

    Returns:
        ``(metrics, artifacts)`` as ``gridplan.training.runs.train`` returns them, less
        ``status``.
    """
    log_final_metrics(writer, metrics, step)
    finish_logger(logger)
    run_dir = Path(run_dir)
    metrics_path = run_dir / "metrics.json"
    summary = {"metrics": metrics, "dataset": dataset}
    write_text_atomic(metrics_path, dumps(summary, indent=2) + "\n")
    return metrics, {
        "run_dir": str(run_dir),
        "config": str(run_dir / "config.yaml"),
        "best_checkpoint": str(checkpoints[0]),
        "last_checkpoint": str(checkpoints[1]),
        "metrics": str(metrics_path),
        "tensorboard": str(run_dir),
    }
