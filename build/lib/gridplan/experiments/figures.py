"""Every figure of the experiment groups (the only module that draws with Matplotlib).

Figures use the Agg canvas without pyplot's global state (``new_figure``); the group saves
them with ``GroupContext.save_figure``. Shared pieces first (the world, a recorded path), then
one section per group, each figure named after the paper's (Fig. 2-9, Tables 3, 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from gridplan.core.constants import AGENT_X, AGENT_Y, C1, KEY_X, KEY_Y
from gridplan.core.tasks import TASK_A, TASK_B, Task
from gridplan.core.world import DEFAULT as PAPER_WORLD
from gridplan.experiments import paper
from gridplan.experiments.records import model_name, noise_kind
from gridplan.planning.closed_loop import OUTCOMES

# --------------------------------------------------------------------------- shared


def new_figure(width: float = 6.0, height: float = 4.0) -> Figure:
    """A Matplotlib figure with the Agg canvas, independent of pyplot's global state."""
    return Figure(figsize=(width, height), layout="constrained")


def draw_gridworld(ax, task: Task = TASK_A, c1: bool = False) -> None:
    """Draw the 8x8 world on a Matplotlib axis in cell coordinates: the wall column, the door,
    and the task's active goal (green) and hazard (red, where it has one) under ``c1``."""
    goal, hazard = task.goal_cells(torch.tensor([bool(c1)]))
    ax.set_xlim(-0.5, PAPER_WORLD.size - 0.5)
    ax.set_ylim(-0.5, PAPER_WORLD.size - 0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(PAPER_WORLD.size))
    ax.set_yticks(range(PAPER_WORLD.size))
    ax.grid(color="0.85", linewidth=0.5)
    for y in range(PAPER_WORLD.size):
        if (PAPER_WORLD.wall_x, y) != PAPER_WORLD.door_cell:
            ax.add_patch(Rectangle((PAPER_WORLD.wall_x - 0.5, y - 0.5), 1, 1, color="0.35"))
    dx, dy = PAPER_WORLD.door_cell
    ax.add_patch(Rectangle((dx - 0.5, dy - 0.5), 1, 1, color="peru"))
    gx, gy = goal[0].tolist()
    ax.add_patch(Rectangle((gx - 0.5, gy - 0.5), 1, 1, color="limegreen", alpha=0.6))
    ax.text(gx, gy, "goal", ha="center", va="center", fontsize=7)
    if hazard is not None:
        hx, hy = hazard[0].tolist()
        ax.add_patch(Rectangle((hx - 0.5, hy - 0.5), 1, 1, color="red", alpha=0.5))
        ax.text(hx, hy, "hazard", ha="center", va="center", fontsize=6)


def plot_episode_path(
    ax, trajectory, steps, outcome, row: int, name: str, color: str, offset: float, **style
) -> np.ndarray:
    """Plot the true agent path of episode ``row`` of a recorded closed loop, shifted by
    ``offset`` cells so two paths stay apart; the label gives its outcome and length.

    Args:
        trajectory: ``(T + 1, B, 12)`` recorded states; ``steps``, ``outcome``: ``(B,)``.

    Returns:
        ``(t + 1, 2)`` agent cells of the path (unshifted).
    """
    t = int(steps[row])
    path = (trajectory[: t + 1, row][:, [AGENT_X, AGENT_Y]] * PAPER_WORLD.cell_scale).cpu().numpy()
    end = OUTCOMES[int(outcome[row])]
    ax.plot(
        path[:, 0] + offset,
        path[:, 1] + offset,
        "-o",
        color=color,
        markersize=3,
        label=f"{name} ({end}, {t} steps)",
        **style,
    )
    return path


def _mark_key(ax, start: torch.Tensor) -> None:
    """The key (gold star) of a start state."""
    kx, ky = (start[[KEY_X, KEY_Y]] * PAPER_WORLD.cell_scale).round().tolist()
    ax.plot(kx, ky, marker="*", color="gold", markersize=14, markeredgecolor="k", label="key")


def _mark_start(ax, start: torch.Tensor) -> None:
    """The agent's start cell (black square)."""
    cell = (start[[AGENT_X, AGENT_Y]] * PAPER_WORLD.cell_scale).tolist()
    ax.plot(*cell, "ks", markersize=8, label="start")


def _col(records: Sequence, key: str) -> np.ndarray:
    return np.array([float(getattr(r, key)) for r in records])


# --------------------------------------------------------------------------- E1


def heatmap_figure(records: Sequence, sigma_r: Sequence, sigma_i: Sequence, depth: int):
    """Fig. 2: success over (σR, σI) with iso-E_tot contours; axes are grid indices labelled
    with the sigmas (σI is not evenly spaced). ``records``: σR-major grid records."""
    nr, ni = len(sigma_r), len(sigma_i)
    success = _col(records, "success").reshape(nr, ni)
    etot = _col(records, "E_tot").reshape(nr, ni)
    fig = new_figure(6.5, 5.0)
    ax = fig.add_subplot()
    im = ax.imshow(success, origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto")
    for a in range(nr):
        for b in range(ni):
            color = "black" if success[a, b] > 0.6 else "white"
            ax.text(b, a, f"{success[a, b]:.2f}", ha="center", va="center", fontsize=7, color=color)
    if nr > 1 and ni > 1 and etot.max() > etot.min():
        levels = np.geomspace(max(etot.min(), 1e-6), etot.max(), 8)[1:-1]
        outline = [patheffects.withStroke(linewidth=2.5, foreground="black")]
        cs = ax.contour(np.arange(ni), np.arange(nr), etot, levels=levels, colors="white")
        cs.set(path_effects=outline)
        for label in ax.clabel(cs, fmt="%.3f", fontsize=7):
            label.set_path_effects(outline)
    ax.set_xticks(range(ni), [f"{s:g}" for s in sigma_i])
    ax.set_yticks(range(nr), [f"{s:g}" for s in sigma_r])
    ax.set_xlabel("σI (irrelevant noise, normalized units)")
    ax.set_ylabel("σR (relevant noise, grid cells)")
    ax.set_title(f"Success, depth-{depth} planner; white lines: iso-E_tot contours")
    fig.colorbar(im, ax=ax, label="success rate")
    return fig


# --------------------------------------------------------------------------- E2


def scatter_figures(grid: Sequence, learned: Sequence | None):
    """Fig. 4 (E_tot and DRPE against success, coloured by σR) and Fig. 9 (E_tot against
    success, coloured by σI); learned models, when given, as black crosses."""
    sr = _col(grid, "sigma_r")
    si = _col(grid, "sigma_i")
    fig4 = new_figure(10, 4)
    axes = fig4.subplots(1, 2, sharey=True)
    for ax, key, label in [(axes[0], "E_tot", "E_tot"), (axes[1], "DRPE_graded", "DRPE (graded)")]:
        sc = ax.scatter(_col(grid, key), _col(grid, "success"), c=sr, cmap="plasma", s=30)
        if learned:
            ax.scatter(
                _col(learned, key), _col(learned, "success"), marker="x", c="black", label="learned"
            )
            ax.legend(loc="lower left")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("success rate")
    fig4.colorbar(sc, ax=axes, label="σR (grid cells)")
    fig4.suptitle("Controlled grid: success against total error and against DRPE (Fig. 4)")
    fig9 = new_figure(6, 4)
    ax = fig9.add_subplot()
    sc = ax.scatter(_col(grid, "E_tot"), _col(grid, "success"), c=si, cmap="viridis", s=30)
    fig9.colorbar(sc, ax=ax, label="σI (normalized units)")
    ax.set_xlabel("E_tot")
    ax.set_ylabel("success rate")
    ax.grid(alpha=0.3)
    ax.set_title("At matched E_tot both the best and the worst planners appear (Fig. 9)")
    return fig4, fig9


# --------------------------------------------------------------------------- E3


def _path_with_visits(ax, results, row: int, name: str, color: str, offset: float) -> None:
    """A recorded path with a dot per visited cell sized by the steps spent there (a looping
    agent revisits cells), the busiest cell annotated when visited more than twice."""
    traj, steps, outcome = results
    path = plot_episode_path(ax, traj, steps, outcome, row, name, color, offset, alpha=0.8)
    cells, visits = np.unique(np.rint(path).astype(int), axis=0, return_counts=True)
    ax.scatter(cells[:, 0] + offset, cells[:, 1] + offset, s=12 * visits, color=color, alpha=0.25)
    top = int(np.argmax(visits))
    if visits[top] > 2:
        ax.annotate(
            f"{visits[top]} steps here",
            (cells[top, 0] + offset, cells[top, 1] + offset),
            textcoords="offset points",
            xytext=(8, -12 if offset < 0 else 8),
            fontsize=7,
            color=color,
        )


def _carrying_bars(bx, carrying: Mapping[str, float]) -> None:
    labels = list(carrying)
    values = [carrying[k] for k in labels]
    colors = ["tab:red" if "random" in k else "tab:blue" for k in labels]
    bx.barh(range(len(labels)), values, color=colors)
    bx.axvline(0.5, color="k", linestyle="--", linewidth=1, label="flag threshold 0.5")
    bx.axvline(
        paper.RANDOM_DATA_12K["carrying_at_pickup"].value,
        color="tab:red",
        linestyle=":",
        label="paper, random-data model (0.19)",
    )
    bx.set_yticks(range(len(labels)), labels, fontsize=8)
    bx.invert_yaxis()
    bx.set_xlim(0, 1.05)
    bx.set_xlabel("mean predicted carrying at a true key pickup (truth 1)")
    bx.legend(fontsize=7, loc="lower right")
    bx.set_title("Event audit: one step from the true pre-pickup state", fontsize=8)


def failure_figure(
    results, n: int, episode: int, why: str, paths: Sequence[tuple[int, str]], carrying
):
    """Fig. 8: closed-loop paths of the random-data and a balanced model from one start state,
    and the mean predicted ``carrying`` at pickup of every model (threshold 0.5).

    Args:
        results: recorded setting-major ``EpisodeResults`` of one seed (``n`` episodes each).
        episode: the episode shown; ``why`` it was chosen.
        paths: ``(setting index, name)`` of the random-data model, then the balanced one.
        carrying: model name -> mean predicted carrying at pickup.
    """
    recorded = (results.trajectory.cpu(), results.steps.cpu(), results.outcome.cpu())
    fig = new_figure(11, 4.8)
    ax, bx = fig.subplots(1, 2, width_ratios=[1, 1.2])
    start = recorded[0][0, episode]
    draw_gridworld(ax)
    _mark_key(ax, start)
    for (idx, name), color, offset in zip(
        paths, ("tab:red", "tab:blue"), (-0.12, 0.12), strict=True
    ):
        _path_with_visits(ax, recorded, idx * n + episode, name, color, offset)
    _mark_start(ax, start)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize=7)
    ax.set_title(f"Closed loop, depth-2 planner ({why})", fontsize=8)
    _carrying_bars(bx, carrying)
    return fig


def learned_success_figure(records: Sequence):
    """Success of every Table 3 row (mean ± SE over seeds) beside the paper's."""
    fig = new_figure(8, 3.8)
    ax = fig.add_subplot()
    x = np.arange(len(records))
    ours = [r.success for r in records]
    ses = [r.success_se or 0.0 for r in records]
    ref = [
        paper.TABLE_3[r.key]["success"].value if r.key in paper.TABLE_3 else np.nan for r in records
    ]
    ax.bar(x - 0.2, ours, 0.4, yerr=ses, capsize=3, label="ours", color="tab:blue")
    ax.bar(x + 0.2, ref, 0.4, label="paper", color="0.7")
    ax.set_xticks(x, [r.name for r in records], rotation=25, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.legend()
    ax.set_title("Learned world models, depth-2 planner (Table 3)")
    return fig


# --------------------------------------------------------------------------- E4


def weights_figure(weightings: Mapping, estimated: np.ndarray, rows: Sequence, relevant: int):
    """Left: graded and binary weights per dim, and the estimated ones (mean over the
    estimates, bars from min to max); dims from ``relevant`` on are shaded irrelevant.
    Right: ρ of every weighting on the grid (``rows``: ``weighting``, ``rho_grid``,
    ``paper_rho``) beside the paper's."""
    fig = new_figure(12, 5.2)
    ax, bx = fig.subplots(1, 2, width_ratios=[1.1, 1])
    x = np.arange(PAPER_WORLD.state_dim)
    ax.bar(x - 0.27, weightings["graded"].numpy(), 0.27, label="graded", color="tab:green")
    ax.bar(x, weightings["binary"].numpy(), 0.27, label="binary", color="tab:gray")
    mean = estimated.mean(axis=0)
    err = np.stack([mean - estimated.min(axis=0), estimated.max(axis=0) - mean])
    label = f"estimated (mean of {len(estimated)}, min–max)"
    ax.bar(x + 0.27, mean, 0.27, yerr=err, capsize=2, label=label, color="tab:red")
    ax.axvspan(relevant - 0.5, PAPER_WORLD.state_dim - 0.5, color="0.93", zorder=0)
    ax.text(8.5, ax.get_ylim()[1] * 0.92, "irrelevant (Task A)", ha="center", fontsize=8)
    ax.set_xticks(x, PAPER_WORLD.dim_names, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("weight (sums to 1)")
    ax.legend(fontsize=8)
    ax.set_title("Relevance weights per dimension", fontsize=9)
    y = np.arange(len(rows))
    ours = [r.rho_grid if r.rho_grid is not None else np.nan for r in rows]
    ref = [r.paper_rho if r.paper_rho is not None else np.nan for r in rows]
    bx.barh(y - 0.2, ours, 0.4, label="ours (grid)", color="tab:blue")
    bx.barh(y + 0.2, ref, 0.4, label="paper", color="0.7")
    bx.set_yticks(y, [r.weighting for r in rows], fontsize=7)
    bx.invert_yaxis()
    bx.set_xlim(-1.05, 0.3)
    bx.axvline(0, color="k", linewidth=0.8)
    bx.set_xlabel("Spearman ρ of DRPE with success")
    bx.legend(fontsize=8, loc="lower right")
    bx.set_title("Which weights track success (Table 4)", fontsize=9)
    return fig


# --------------------------------------------------------------------------- E5


def trajectory_figure(results, episode: int, n: int, names: Sequence[str], why: str):
    """Fig. 5: both models' true paths from the same Task B start state (``results``:
    recorded setting-major ``EpisodeResults``, ``n`` episodes per model)."""
    trajectory, steps = results.trajectory.cpu(), results.steps.cpu()
    outcome = results.outcome.cpu()
    fig = new_figure(5.5, 5.5)
    ax = fig.add_subplot()
    start = trajectory[0, episode]
    draw_gridworld(ax, TASK_B, bool(start[C1] > 0.5))
    _mark_key(ax, start)
    for k, (color, offset) in enumerate([("tab:red", -0.12), ("tab:blue", 0.12)]):
        plot_episode_path(ax, trajectory, steps, outcome, k * n + episode, names[k], color, offset)
    _mark_start(ax, start)
    ax.legend(loc="upper left", fontsize=7, framealpha=0.9)
    ax.set_title(f"Task B, one start state ({why})", fontsize=8)
    return fig


def bit_success_figure(rows: Mapping, models: Sequence[str]):
    """Fig. 3: success of both models under both tasks (``rows[(model, task)]``), with SE
    bars and the paper's values."""
    fig = new_figure(5.5, 3.8)
    ax = fig.add_subplot()
    x = np.arange(2)
    for k, (model, color) in enumerate(zip(models, ("tab:red", "tab:blue"), strict=True)):
        means = [rows[(model, t)].success for t in "AB"]
        ses = [rows[(model, t)].success_se or 0.0 for t in "AB"]
        ax.bar(x + (k - 0.5) * 0.35, means, 0.35, yerr=ses, color=color, label=f"{model}-noise")
        ref = [paper.E5["success_A"][model].value, paper.E5["success_B"][model].value]
        ax.plot(x + (k - 0.5) * 0.35, ref, "k_", markersize=18, markeredgewidth=2)
    ax.set_xticks(x, ["Task A", "Task B"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.set_title("σ = 0.8 noise on c1 vs c2 (black ticks: paper)")
    ax.legend(loc="lower left")
    return fig


# --------------------------------------------------------------------------- E6


def _rows_of(rows: Sequence, model: tuple[float, float]) -> list:
    return [r for r in rows if (r.sigma_r, r.sigma_i) == model]


def depth_figure(rows: Sequence, models: Sequence, depths: Sequence[int]):
    """Fig. 6a: success against depth per model."""
    fig = new_figure(6, 4)
    ax = fig.add_subplot()
    styles = {"oracle": ("k", "-"), "irrelevant": (None, "--"), "relevant": (None, "-")}
    for m in models:
        sub = _rows_of(rows, m)
        color, ls = styles[noise_kind(m)]
        ax.errorbar(
            [r.depth for r in sub],
            [r.success for r in sub],
            yerr=[r.success_se or 0.0 for r in sub],
            ls=ls,
            color=color,
            marker="o",
            capsize=3,
            label=f"{model_name(*m)} ({noise_kind(m)})",
        )
    ax.set_xticks(depths)
    ax.set_xlabel("planner depth D")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.05)
    ax.legend(fontsize=7)
    ax.set_title("Relevant noise hurts more with depth; irrelevant never (Fig. 6a)")
    return fig


def horizon_figure(rows: Sequence, models: Sequence, horizons: Sequence[int]):
    """Fig. 6b: E_tot and DRPE against the rollout horizon per model."""
    fig = new_figure(10, 4)
    axes = fig.subplots(1, 2)
    for ax, key in zip(axes, ("E_tot", "DRPE_graded"), strict=True):
        for m in models:
            sub = _rows_of(rows, m)
            ls = "--" if noise_kind(m) == "irrelevant" else "-"
            ax.plot(
                [r.horizon for r in sub],
                [getattr(r, key) for r in sub],
                ls=ls,
                marker="o",
                label=model_name(*m),
                color="k" if noise_kind(m) == "oracle" else None,
            )
        ax.set_xlabel("rollout horizon H")
        ax.set_ylabel(key)
        ax.set_xscale("log")
        ax.set_xticks(horizons, [str(h) for h in horizons])
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Prediction error by horizon: relevant (solid) vs irrelevant (dashed) (Fig. 6b)")
    return fig


def fans_figure(fans: Mapping, rows: Sequence, depth: int):
    """Fig. 7: imagined agent positions of both fan models over the world (``fans``: the
    true ``path`` and ``key`` in cells and, per model name, imagined positions)."""
    fig = new_figure(10, 5)
    axes = fig.subplots(1, 2)
    rng = np.random.default_rng(0)
    for ax, (name, pos), row in zip(axes, fans["models"].items(), rows, strict=True):
        draw_gridworld(ax)
        # Spread points that sit exactly on a cell so their density shows; leave the others.
        on_cell = (pos == np.round(pos)).all(axis=1, keepdims=True)
        jitter = rng.uniform(-0.2, 0.2, size=pos.shape) * on_cell
        ax.scatter(
            pos[:, 0] + jitter[:, 0],
            pos[:, 1] + jitter[:, 1],
            s=2,
            alpha=0.15,
            color="tab:purple",
            label="imagined agent positions",
        )
        ax.plot(
            fans["path"][:, 0],
            fans["path"][:, 1],
            "-o",
            color="k",
            markersize=3,
            label="true path (oracle)",
        )
        ax.plot(*fans["key"], marker="*", color="gold", markersize=12, markeredgecolor="k")
        ax.set_title(
            f"{name} ({row.kind} noise), D = {depth}: mean leaf "
            f"displacement {row.mean_leaf_displacement_cells:.2f} cells",
            fontsize=8,
        )
        ax.legend(loc="upper left", fontsize=7)
    fig.suptitle("Imagination fans (Fig. 7)")
    return fig


# --------------------------------------------------------------------------- E7


def _panels(n: int, cols: int = 6, width: float = 2.6, height: float = 2.2):
    cols = max(1, min(cols, n))
    rows = -(-n // cols)
    fig = new_figure(width * cols, height * rows)
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _log_if_positive(ax, values) -> None:
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if values.size and (values > 0).all() and values.max() > 20 * values.min():
        ax.set_xscale("log")


def zoo_scatter_figure(
    zoo: Sequence, replication: Sequence, metrics: Sequence[str], labels: Mapping, depth: int
):
    """E7: one panel per metric, its value against depth-``depth`` success, one point per
    model (filled: the zoo, open: the replication zoo; one colour per configuration)."""
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    keys = list(dict.fromkeys(r.key for r in [*zoo, *replication]))
    fig, axes = _panels(len(metrics))
    for ax, metric in zip(axes, metrics, strict=True):
        for records, filled in ((zoo, True), (replication, False)):
            pts = [
                (r.metrics[metric], r.success, cmap(keys.index(r.key) % 20))
                for r in records
                if r.metrics.get(metric) is not None
            ]
            if not pts:
                continue
            x, y, c = zip(*pts, strict=True)
            ax.scatter(
                x,
                y,
                s=12,
                facecolors=list(c) if filled else "none",
                edgecolors=list(c),
                linewidths=0.7,
            )
        _log_if_positive(ax, [r.metrics.get(metric) for r in [*zoo, *replication]])
        ax.set_title(labels.get(metric, metric), fontsize=7)
        ax.tick_params(labelsize=6)
        ax.set_ylim(-0.05, 1.05)
    fig.supylabel(f"closed-loop success (depth {depth})", fontsize=8)
    return fig


def pool_scatter_figure(
    grid: Sequence, zoo: Sequence, metrics: Sequence[str], labels: Mapping, depth: int
):
    """E7: E1's controlled grid (grey crosses) beside the zoo's models (dots), each metric
    against depth-``depth`` success."""
    fig, axes = _panels(len(metrics), cols=len(metrics), width=3.4, height=3.0)
    for ax, metric in zip(axes, metrics, strict=True):
        gx = [getattr(r, metric) for r in grid]
        ax.scatter(gx, [r.success for r in grid], marker="x", color="0.5", s=16, label="grid")
        zx = [
            (r.metrics.get(metric), r.success_deep)
            for r in zoo
            if r.metrics.get(metric) is not None
        ]
        if zx:
            x, y = zip(*zx, strict=True)
            ax.scatter(x, y, color="tab:blue", s=12, label="zoo")
        _log_if_positive(ax, [*gx, *(p[0] for p in zx)])
        ax.set_xlabel(labels.get(metric, metric))
        ax.set_ylim(-0.05, 1.05)
    axes[0].set_ylabel(f"closed-loop success (depth {depth})")
    axes[0].legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------- E8


def _rho_line(ax, rows: Sequence, x: np.ndarray, metric: str, label: str, color: str) -> None:
    def values(suffix: str) -> np.ndarray:
        got = [getattr(r, f"rho_{metric}{suffix}") for r in rows]
        return np.array([np.nan if v is None else v for v in got], dtype=float)

    rho, low, high = values(""), values("_low"), values("_high")
    yerr = np.nan_to_num(np.stack([rho - low, high - rho]), nan=0.0).clip(min=0.0)
    ax.errorbar(x, rho, yerr=yerr, marker="o", capsize=3, color=color, label=label)


def scale_figure(rows: Sequence, width_axis: Sequence[str], length_axis: Sequence[str], paper_grid):
    """E8: Spearman ρ of E_tot and of DRPE with success against state width (the worlds of
    ``width_axis``) and against grid size (``length_axis``), with bootstrap 95% CIs; the
    paper's 12-dim values (``paper_grid``: Table 1's grid row) as stars. ``rows``: E8's world
    rows (``WorldRow``)."""
    by_name = {r.world: r for r in rows}
    fig = new_figure(10.0, 4.0)
    panels = fig.subplots(1, 2, sharey=True)
    for ax, names, key, xlabel in (
        (panels[0], width_axis, "state_width", "state width S (grid 8, K distractors)"),
        (panels[1], length_axis, "size", "grid size N (two distractors)"),
    ):
        sub = [by_name[n] for n in names]
        x = np.array([getattr(r, key) for r in sub], dtype=float)
        _rho_line(ax, sub, x, "E_tot", "E_tot", "tab:orange")
        _rho_line(ax, sub, x, "DRPE", "DRPE (graded)", "tab:blue")
        x0 = getattr(by_name[names[0]], key)
        ax.plot([x0], [paper_grid["E_tot"].value], "*", color="tab:orange", ms=12, mec="black")
        ax.plot([x0], [paper_grid["DRPE"].value], "*", color="tab:blue", ms=12, mec="black")
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [f"{int(v)}" for v in x])
        ax.minorticks_off()
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_xlabel(xlabel)
        ax.set_ylim(-1.05, 1.05)
    panels[0].set_ylabel("Spearman ρ with success")
    panels[0].legend(loc="upper right", fontsize=8)
    fig.suptitle("Which error ranks the controlled grid as worlds grow (stars: paper, 12 dims)")
    return fig


def planners_figure(grid: Sequence[Mapping], learned: Sequence[Mapping], planners, metrics):
    """E10: Spearman ρ of each metric with each planner's success (bars, bootstrap 95% CIs),
    the controlled grid and the learned set side by side; dotted: the paper's DRPE ρ on the
    grid. ``grid`` and ``learned`` hold one row per planner and metric (``planner``,
    ``metric``, ``rho``, ``low``, ``high``; None for undefined)."""
    fig = new_figure(12, 4)
    axes = fig.subplots(1, 2, sharey=True)
    width = 0.8 / len(metrics)
    for ax, table, title in ((axes[0], grid, "controlled grid"), (axes[1], learned, "learned set")):
        rows = {(r["planner"], r["metric"]): r for r in table}
        for k, metric in enumerate(metrics):
            if not rows:
                continue
            xs = [i + (k - (len(metrics) - 1) / 2) * width for i in range(len(planners))]
            rho = np.array([rows[p, metric]["rho"] for p in planners], dtype=float)
            low = np.array([rows[p, metric]["low"] for p in planners], dtype=float)
            high = np.array([rows[p, metric]["high"] for p in planners], dtype=float)
            # A percentile interval need not hold the point estimate: clip at 0.
            err = np.nan_to_num(np.clip([rho - low, high - rho], 0, None))
            ax.bar(xs, rho, width, yerr=err, capsize=2, label=metric)
        ax.axhline(paper.TABLE_1["grid"]["DRPE"].value, ls=":", c="k", lw=1)
        ax.axhline(0, c="k", lw=0.5)
        ax.set_xticks(range(len(planners)), planners, rotation=20)
        ax.set_title(title)
    axes[0].set_ylabel("Spearman ρ with the planner's success")
    axes[0].legend(fontsize=8)
    return fig
