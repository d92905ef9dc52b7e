"""E5: relevance is relational — same models, different task (paper §5.3, Fig. 3, 5, appendix H).

Two models inject noise of the same scale (σ = 0.8, normalized units) on one perfectly
predictable bit each: the static ``c1`` or the toggling ``c2`` (a custom per-dimension
``NoiseModel`` sigma, both settings in one batch). Both are planned under the controlled
protocol (depth 4, 10 seeds x 30 episodes) under Task A (``c1`` irrelevant) and Task B (``c1``
selects the goal; the other goal cell is a terminal hazard), and scored with E_tot and the
task-weighted DRPE (Task B binary weights, ``c1`` relevant) on held-out windows of each task.

Writes ``models.csv`` (per model and task: success, outcome counts, E_tot, DRPE weightings),
``results.json``, ``fig3_success.png`` (success by task) and ``fig5_trajectories.png`` (both
models from one Task B start state; the episode is the first where the c1-noise model walks
into the hazard while the c2-noise model reaches the goal, else the first where only the
c1-noise model fails, else the first episode).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from scipy.stats import norm

from gridplan.closed_loop import GOAL, HAZARD, EpisodeResults
from gridplan.constants import C1, C2, STATE_DIM
from gridplan.experiments import paper
from gridplan.experiments.figures import bit_success_figure, trajectory_figure
from gridplan.experiments.measure import closed_loop, standard_windows
from gridplan.experiments.records import Record, columns, outcomes_field
from gridplan.experiments.report import Report, fmt, fmt_se
from gridplan.experiments.runner import GroupContext
from gridplan.experiments.settings import E5Config
from gridplan.metrics import prediction_metrics
from gridplan.models import NoiseModel
from gridplan.stats import difference_se
from gridplan.tasks import TASK_A, TASK_B

MODELS = ("c1", "c2")
TASKS = (TASK_A, TASK_B)
#: Two success rates differ when their gap exceeds this many standard errors of the gap.
Z = 2.0


@dataclass(frozen=True, kw_only=True)
class BitNoiseRow(Record):
    """One model under one task (``models.csv``): closed-loop success and outcomes, E_tot and
    DRPE under every standard weighting of the task (``DRPE_<weighting>``)."""

    model: str
    task: str
    sigma: float
    success: float
    success_se: float
    n_episodes: int
    outcomes: dict[str, int] = outcomes_field()
    E_tot: float
    DRPE: dict[str, float] = columns("DRPE_{}")
    per_seed: tuple[float, ...]


# --------------------------------------------------------------------------- compute


def bit_noise_model(sigma: float) -> NoiseModel:
    """Two settings: noise ``sigma`` on ``c1`` only (setting 0) and on ``c2`` only (setting 1)."""
    s = torch.zeros(2, STATE_DIM)
    s[0, C1] = sigma
    s[1, C2] = sigma
    return NoiseModel(s)


def measure(ctx: GroupContext, cfg: E5Config) -> tuple[dict, EpisodeResults]:
    """``(model, task) -> BitNoiseRow`` for both models under both tasks, and the recorded
    Task B closed loop."""
    model = bit_noise_model(cfg.sigma)
    rows, recorded = {}, None
    for task in ctx.bar(TASKS, "tasks"):
        windows = standard_windows(ctx, cfg.protocol, task)
        metrics = prediction_metrics(model, windows, task)
        loop, res = closed_loop(ctx, model, task, cfg.protocol, record=task is TASK_B)
        if task is TASK_B:
            recorded = res
        for name, pm, summary in zip(MODELS, metrics, loop, strict=True):
            rows[(name, task.name)] = BitNoiseRow(
                model=f"{name}-noise",
                task=task.name,
                sigma=cfg.sigma,
                success=summary.success,
                success_se=summary.success_se,
                n_episodes=summary.n_episodes,
                outcomes=summary.outcomes,
                E_tot=pm.E_tot,
                DRPE=dict(pm.DRPE),
                per_seed=summary.per_seed,
            )
    return rows, recorded


def gap(a: BitNoiseRow, b: BitNoiseRow) -> tuple[float, float]:
    """``b - a`` success and the SE of that difference (independent samples)."""
    return difference_se(b.success, b.success_se, a.success, a.success_se)


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


# --------------------------------------------------------------------------- tables


def _etot_note(rows: dict) -> str:
    ours = [rows[(m, "B")].E_tot for m in MODELS]
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
    ours, se = rows[("c1", "B")].success, rows[("c1", "B")].success_se or 0.0
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


def success_table(report: Report, rows: dict, sigma: float) -> None:
    """Success under both tasks, E_tot and task DRPE, beside the paper's."""
    cells = []
    for name in MODELS:
        a, b = rows[(name, "A")], rows[(name, "B")]
        cells.append(
            [
                f"{name}-noise (σ = {sigma:g})",
                fmt_se(a.success, a.success_se),
                paper.E5["success_A"][name].cell(),
                fmt_se(b.success, b.success_se),
                paper.E5["success_B"][name].cell(),
                fmt(b.E_tot),
                paper.E5["E_tot"][name].cell(),
                fmt(b.DRPE["task"]),
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
        cells,
        "E_tot and task DRPE on Task B windows (H = 10); task DRPE uses Task B's binary "
        "relevance (dims 0-6, c1 included). On Task A windows: E_tot "
        + ", ".join(f"{m} {fmt(rows[(m, 'A')].E_tot)}" for m in MODELS)
        + ". "
        + _etot_note(rows),
    )


def outcomes_table(report: Report, rows: dict, sigma: float) -> None:
    """Goal / hazard / timeout counts (appendix H)."""
    ref_b = paper.E5["outcomes_B_c1"]
    cells = []
    for name in MODELS:
        for task in TASKS:
            r = rows[(name, task.name)]
            paper_cells = ["—"] * 3
            if name == "c1" and task is TASK_B:
                paper_cells = [
                    f"{ref_b[k].text} of {ref_b['episodes'].text}"
                    for k in ("goal", "hazard", "timeout")
                ]
            o = r.outcomes
            cells.append(
                [f"{name}-noise", task.name, f"{o['goal']} of {r.n_episodes}", paper_cells[0]]
                + [o["hazard"], paper_cells[1], o["timeout"], paper_cells[2]]
            )
    headers = ["model", "task", "goal", "goal (paper)", "hazard", "hazard (paper)", "timeout"]
    report.table(
        "Outcomes (appendix H)",
        [*headers, "timeout (paper)"],
        cells,
        "The paper's goal count is derived (240 − 35 − 8). " + _success_note(rows, sigma),
    )


# --------------------------------------------------------------------------- verdicts


def verdicts(report: Report, rows: dict) -> None:
    """The two effects of §5.3."""
    loss_b, se_b = gap(rows[("c1", "B")], rows[("c2", "B")])
    loss_a, se_a = gap(rows[("c1", "A")], rows[("c2", "A")])
    drop_c1, se_c1 = gap(rows[("c1", "B")], rows[("c1", "A")])
    ok = loss_b > Z * se_b and abs(loss_a) <= Z * max(se_a, 1e-12) and drop_c1 > Z * se_c1
    report.verdict(
        "The c1-noise model loses success under Task B only (§5.3)",
        ok,
        f"Task B: c2 − c1 = {fmt(loss_b, 2)} (SE {fmt(se_b, 2)}); Task A: c2 − c1 = "
        f"{fmt(loss_a, 2)} (SE {fmt(se_a, 2)}); c1 model A − B = {fmt(drop_c1, 2)} (paper: "
        f"0.97 vs 0.82 under B, both 0.97 under A; criterion: gaps beyond {Z:g} SE only "
        "where the task makes c1 relevant)",
    )
    d1, d2 = rows[("c1", "B")].DRPE["task"], rows[("c2", "B")].DRPE["task"]
    report.verdict(
        "Task-weighted DRPE flags exactly the failing model (§5.3)",
        d1 > 0 and d2 == 0,
        f"task DRPE c1 {fmt(d1)} vs c2 {fmt(d2)} (paper 0.214 vs 0.000; criterion c1 > 0, c2 = 0)",
    )


# --------------------------------------------------------------------------- run


def run(ctx: GroupContext) -> Report:
    """E5 (see the module docstring)."""
    cfg: E5Config = ctx.config
    rows, recorded = measure(ctx, cfg)
    n = cfg.protocol.n_episodes
    episode, why = pick_episode(recorded.outcome.cpu(), n)

    ctx.write_csv("models.csv", list(rows.values()))
    ctx.save_figure(bit_success_figure(rows, MODELS), "fig3_success.png")
    names = [f"{m}-noise model" for m in MODELS]
    ctx.save_figure(trajectory_figure(recorded, episode, n, names, why), "fig5_trajectories.png")

    report = Report("E5 — relevance is relational: same models, different task (§5.3, Fig. 3, 5)")
    success_table(report, rows, cfg.sigma)
    outcomes_table(report, rows, cfg.sigma)
    report.figure("fig3_success.png", "Success by task and noisy bit (Fig. 3)")
    report.figure(
        "fig5_trajectories.png", f"Task B trajectories from one start state: {why} (Fig. 5)"
    )
    verdicts(report, rows)
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
