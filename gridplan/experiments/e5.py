"""E5: relevance is relational — same models, different task (paper §5.3, Fig. 3, 5, appendix H).

Two models inject noise of the same scale (σ = 0.8, normalized units) on one perfectly
predictable bit each: the static ``c1`` or the toggling ``c2`` (a custom per-dimension
``NoiseModel`` sigma, both settings in one batch). Both are planned with the depth-4 planner
over 10 seeds x 30 episodes under Task A (``c1`` irrelevant) and Task B (``c1`` selects the
goal; the other goal cell is a terminal hazard), and scored with E_tot and the task-weighted
DRPE (Task B binary weights, ``c1`` relevant) on held-out windows of each task.

Writes ``models.csv`` (per model and task: success, outcome counts, E_tot, DRPE weightings),
``results.json``, ``fig3_success.png`` (success by task) and ``fig5_trajectories.png`` (both
models from one Task B start state; the episode is the first where the c1-noise model walks
into the hazard while the c2-noise model reaches the goal, else the first where only the
c1-noise model fails, else the first episode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import norm

from gridplan import tasks
from gridplan.closed_loop import GOAL, HAZARD
from gridplan.constants import AGENT_X, AGENT_Y, C1, C2, CELL_SCALE, KEY_X, KEY_Y, STATE_DIM
from gridplan.experiments import paper
from gridplan.experiments.common import (
    GroupContext,
    Report,
    closed_loop,
    draw_gridworld,
    fmt,
    fmt_se,
    new_figure,
    plot_episode_path,
    standard_windows,
)
from gridplan.metrics import prediction_metrics
from gridplan.models import NoiseModel

MODELS = ("c1", "c2")
#: Two success rates differ when their gap exceeds this many standard errors of the gap.
Z = 2.0


@dataclass(frozen=True)
class E5Config:
    """E5 settings.

    Attributes:
        sigma: noise std on the one noisy bit, normalized units (paper 0.8).
        depth: planner depth.
        seeds: closed-loop seeds; ``episodes`` each.
        episodes: episodes per seed.
        n_windows: held-out windows per task.
        horizon: open-loop rollout length H.
    """

    sigma: float
    depth: int
    seeds: tuple[int, ...]
    episodes: int
    n_windows: int
    horizon: int = 10


CONFIGS = {
    "full": E5Config(0.8, 4, tuple(range(10)), 30, 1000),
    "quick": E5Config(0.8, 4, (0, 1), 15, 500),
    "tiny": E5Config(0.8, 1, (0, 1), 2, 32),
}


def bit_noise_model(sigma: float) -> NoiseModel:
    """Two settings: noise ``sigma`` on ``c1`` only (setting 0) and on ``c2`` only (setting 1)."""
    s = torch.zeros(2, STATE_DIM)
    s[0, C1] = sigma
    s[1, C2] = sigma
    return NoiseModel(s)


def _gap(a: dict, b: dict) -> tuple[float, float]:
    """``b - a`` success and the SE of that difference (independent samples)."""
    se = math.sqrt((a["success_se"] or 0.0) ** 2 + (b["success_se"] or 0.0) ** 2)
    return b["success"] - a["success"], se


def pick_episode(outcome: torch.Tensor, n: int) -> tuple[int, str]:
    """Episode index for the trajectory figure from setting-major ``(2 * n,)`` outcomes, and
    why it was chosen (see the module docstring)."""
    c1, c2 = outcome[:n], outcome[n:]
    for mask, why in [
        ((c1 == HAZARD) & (c2 == GOAL), "c1-noise model hits the hazard, c2-noise model the goal"),
        ((c1 != GOAL) & (c2 == GOAL), "c1-noise model fails, c2-noise model reaches the goal"),
    ]:
        hits = torch.nonzero(mask).flatten()
        if hits.numel():
            return int(hits[0]), why
    return 0, "no episode where only the c1-noise model fails; first episode shown"


def trajectory_figure(
    trajectory: torch.Tensor, steps: torch.Tensor, outcome, episode: int, n: int, why: str
):
    """Fig. 5: both models' true paths from the same Task B start state."""
    fig = new_figure(5.5, 5.5)
    ax = fig.add_subplot()
    start = trajectory[0, episode]
    draw_gridworld(ax, "B", bool(start[C1] > 0.5))
    kx, ky = (start[[KEY_X, KEY_Y]] * CELL_SCALE).round().tolist()
    ax.plot(kx, ky, marker="*", color="gold", markersize=14, markeredgecolor="k", label="key")
    names = {0: "c1-noise model", 1: "c2-noise model"}
    for k, (color, offset) in enumerate([("tab:red", -0.12), ("tab:blue", 0.12)]):
        plot_episode_path(ax, trajectory, steps, outcome, k * n + episode, names[k], color, offset)
    ax.plot(*(start[[AGENT_X, AGENT_Y]] * CELL_SCALE).tolist(), "ks", markersize=8, label="start")
    ax.legend(loc="upper left", fontsize=7, framealpha=0.9)
    ax.set_title(f"Task B, one start state ({why})", fontsize=8)
    return fig


def success_figure(rows: dict):
    """Fig. 3: success of both models under both tasks, with SE bars and the paper's values."""
    fig = new_figure(5.5, 3.8)
    ax = fig.add_subplot()
    x = np.arange(2)
    for k, (model, color) in enumerate(zip(MODELS, ("tab:red", "tab:blue"), strict=True)):
        means = [rows[(model, t)]["success"] for t in "AB"]
        ses = [rows[(model, t)]["success_se"] or 0.0 for t in "AB"]
        ax.bar(x + (k - 0.5) * 0.35, means, 0.35, yerr=ses, color=color, label=f"{model}-noise")
        ref = [paper.E5["success_A"][model].value, paper.E5["success_B"][model].value]
        ax.plot(x + (k - 0.5) * 0.35, ref, "k_", markersize=18, markeredgewidth=2)
    ax.set_xticks(x, ["Task A", "Task B"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.set_title("σ = 0.8 noise on c1 vs c2 (black ticks: paper)")
    ax.legend(loc="lower left")
    return fig


def _etot_note(rows: dict) -> str:
    ours = [rows[(m, "B")]["E_tot"] for m in MODELS]
    ref = [paper.E5["E_tot"][m].value for m in MODELS]
    if max(ours) >= min(ref):
        return "Both models' E_tot are comparable, as in the paper."
    return (
        "Our E_tot is far below the paper's 0.31-0.33: a flag's squared error is at most 1, so "
        "noise on one bit out of 12 dims adds at most 1/12 to E_tot over the oracle's floor "
        "(the paper's oracle reads 0.020), which the paper's values exceed; they must be on "
        "another scale. What matters here holds: c1 and c2 noise give similar E_tot."
    )


def _success_note(rows: dict, sigma: float) -> str:
    ours, se = rows[("c1", "B")]["success"], rows[("c1", "B")]["success_se"] or 0.0
    ref = paper.E5["success_B"]["c1"].value
    if abs(ours - ref) <= Z * max(se, 0.02):
        return ""
    flip = float(norm.sf(0.5 / sigma)) if sigma > 0 else 0.0
    return (
        f"Our c1-noise model's Task B success differs from the paper's ({fmt(ours, 2)} vs "
        f"{ref:.2f}). In our model each imagined step re-reads c1 thresholded at 0.5 and adds "
        f"fresh noise, so every step swaps the believed goal and hazard with probability "
        f"{flip:.2f} and a swap persists until undone; the paper does not say how its noisy "
        "flags are read, so whether this explains the gap is not established."
    )


def run(ctx: GroupContext) -> Report:
    """E5 (see the module docstring)."""
    cfg: E5Config = ctx.config
    model = bit_noise_model(cfg.sigma)
    n = len(cfg.seeds) * cfg.episodes
    rows, recorded = {}, None
    for task in ctx.bar("AB", "tasks"):
        windows = standard_windows(ctx, cfg.n_windows, cfg.horizon, task)
        metrics = prediction_metrics(model, windows, tasks.get(task))
        loop, res = closed_loop(
            ctx, model, task, cfg.depth, cfg.seeds, cfg.episodes, record=task == "B"
        )
        if task == "B":
            recorded = res
        for name, pm, cl in zip(MODELS, metrics, loop, strict=True):
            rows[(name, task)] = {
                "model": f"{name}-noise",
                "task": task,
                "sigma": cfg.sigma,
                "success": cl["success"],
                "success_se": cl["success_se"],
                "n_episodes": cl["n_episodes"],
                **cl["outcomes"],
                "E_tot": pm.E_tot,
                **{f"DRPE_{k}": v for k, v in pm.DRPE.items()},
                "per_seed": cl["per_seed"],
            }
    ctx.write_csv("models.csv", list(rows.values()))

    report = Report("E5 — relevance is relational: same models, different task (§5.3, Fig. 3, 5)")
    table = []
    for name in MODELS:
        a, b = rows[(name, "A")], rows[(name, "B")]
        table.append(
            [
                f"{name}-noise (σ = {cfg.sigma:g})",
                fmt_se(a["success"], a["success_se"]),
                paper.E5["success_A"][name].cell(),
                fmt_se(b["success"], b["success_se"]),
                paper.E5["success_B"][name].cell(),
                fmt(b["E_tot"]),
                paper.E5["E_tot"][name].cell(),
                fmt(b["DRPE_task"]),
                paper.E5["DRPE_task"][name].cell(),
            ]
        )
    report.table(
        "Success under Task A and Task B, total error and task-weighted DRPE",
        [
            "model",
            "success A",
            "A (paper)",
            "success B",
            "B (paper)",
            "E_tot",
            "E_tot (paper)",
            "task DRPE",
            "task DRPE (paper)",
        ],
        table,
        "E_tot and task DRPE on Task B windows (H = 10); task DRPE uses Task B's binary "
        "relevance (dims 0-6, c1 included). On Task A windows: E_tot "
        + ", ".join(f"{m} {fmt(rows[(m, 'A')]['E_tot'])}" for m in MODELS)
        + ". "
        + _etot_note(rows),
    )
    ref_b = paper.E5["outcomes_B_c1"]
    out_rows = []
    for name in MODELS:
        for task in "AB":
            r = rows[(name, task)]
            paper_cells = ["—"] * 3
            if name == "c1" and task == "B":
                paper_cells = [
                    f"{ref_b[k].text} of {ref_b['episodes'].text}"
                    for k in ("goal", "hazard", "timeout")
                ]
            out_rows.append(
                [
                    f"{name}-noise",
                    task,
                    f"{r['goal']} of {r['n_episodes']}",
                    paper_cells[0],
                    r["hazard"],
                    paper_cells[1],
                    r["timeout"],
                    paper_cells[2],
                ]
            )
    report.table(
        "Outcomes (appendix H)",
        [
            "model",
            "task",
            "goal",
            "goal (paper)",
            "hazard",
            "hazard (paper)",
            "timeout",
            "timeout (paper)",
        ],
        out_rows,
        "The paper's goal count is derived (240 − 35 − 8). " + _success_note(rows, cfg.sigma),
    )

    fig3 = success_figure(rows)
    ctx.save_figure(fig3, "fig3_success.png")
    report.figure("fig3_success.png", "Success by task and noisy bit (Fig. 3)")
    episode, why = pick_episode(recorded.outcome.cpu(), n)
    fig5 = trajectory_figure(
        recorded.trajectory.cpu(), recorded.steps.cpu(), recorded.outcome.cpu(), episode, n, why
    )
    ctx.save_figure(fig5, "fig5_trajectories.png")
    report.figure(
        "fig5_trajectories.png", f"Task B trajectories from one start state: {why} (Fig. 5)"
    )

    loss_b, se_b = _gap(rows[("c1", "B")], rows[("c2", "B")])
    loss_a, se_a = _gap(rows[("c1", "A")], rows[("c2", "A")])
    drop_c1, se_c1 = _gap(rows[("c1", "B")], rows[("c1", "A")])
    ok = loss_b > Z * se_b and abs(loss_a) <= Z * max(se_a, 1e-12) and drop_c1 > Z * se_c1
    report.verdict(
        "The c1-noise model loses success under Task B only (§5.3)",
        ok,
        f"Task B: c2 − c1 = {fmt(loss_b, 2)} (SE {fmt(se_b, 2)}); Task A: c2 − c1 = "
        f"{fmt(loss_a, 2)} (SE {fmt(se_a, 2)}); c1 model A − B = {fmt(drop_c1, 2)} (paper: "
        f"0.97 vs 0.82 under B, both 0.97 under A; criterion: gaps beyond {Z:g} SE only "
        "where the task makes c1 relevant)",
    )
    d1, d2 = rows[("c1", "B")]["DRPE_task"], rows[("c2", "B")]["DRPE_task"]
    report.verdict(
        "Task-weighted DRPE flags exactly the failing model (§5.3)",
        d1 > 0 and d2 == 0,
        f"task DRPE c1 {fmt(d1)} vs c2 {fmt(d2)} (paper 0.214 vs 0.000; criterion c1 > 0, c2 = 0)",
    )
    ctx.write_json(
        "results.json",
        {
            "config": cfg,
            "models": list(rows.values()),
            "trajectory_episode": {"index": episode, "why": why},
            "paper": paper.E5,
        },
    )
    return report
