"""Evaluation reports: prediction-error metrics plus closed-loop success for one model.

``model_report`` returns the JSON dict written by ``python -m eval --json``. Its keys are
stable because scripts read them: ``success {mean, se, n}``, ``outcomes {goal, hazard,
timeout}``, ``model``, ``depth``, ``task``, ``seeds``, ``episodes``, ``E_tot``,
``DRPE {binary, graded[, task]}``, ``profile {dim_name: value}``, ``event_audit``, ``VPE``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from gridplan import tasks
from gridplan.closed_loop import evaluate
from gridplan.constants import DIM_NAMES, STATE_DIM
from gridplan.data import eval_windows
from gridplan.metrics import prediction_metrics
from gridplan.stats import mean_se
from gridplan.tasks import TASK_A, Task
from gridplan.values import relevance_weights


def model_report(
    model,
    model_info: dict,
    task: Task = TASK_A,
    depth: int = 4,
    seeds: list[int] = tuple(range(10)),
    episodes: int = 30,
    horizon: int = 10,
    n_windows: int = 1000,
    device: str = "cpu",
    progress: bool = True,
) -> dict:
    """Prediction-error metrics (SPEC §5) and closed-loop success (SPEC §4) of one model.

    Args:
        model: a single-setting ``WorldModel``.
        model_info: description stored under ``"model"`` (name, sigmas, checkpoint, ...).
        task: the task (the report stores its name).
        depth: planner depth ``D``.
        seeds: closed-loop seeds; ``episodes`` episodes each.
        horizon: open-loop rollout length ``H`` of the metrics.
        n_windows: held-out evaluation windows ``W``.
        device: torch device for everything.
        progress: show a progress bar during the closed loop.

    Returns:
        The report dict (JSON-serializable).

    Raises:
        ValueError: on bad arguments, or a model with several settings.
    """
    if getattr(model, "n_settings", 1) != 1:
        raise ValueError("model_report takes a single-setting model")
    windows = eval_windows(n_windows, horizon, task=task, device=device)
    metrics = prediction_metrics(model, windows, task)[0].to_dict()
    results = evaluate(
        model,
        task=task,
        depth=depth,
        seeds=seeds,
        episodes=episodes,
        device=device,
        progress=progress,
    )
    mean, se, n = mean_se(results.success.float().cpu().numpy())
    return {
        "model": model_info,
        "task": task.name,
        "depth": depth,
        "seeds": list(seeds),
        "episodes": episodes,
        "success": {"mean": mean, "se": se, "n": n},
        "outcomes": results.outcome_counts(),
        "mean_steps": float(results.steps.float().mean()),
        "device": str(torch.device(device)),
        **metrics,
    }


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def format_table(report: dict) -> str:
    """Human-readable table of a ``model_report`` dict; the profile is ordered by relevance."""
    model = ", ".join(f"{k}={v}" for k, v in report["model"].items())
    s, o = report["success"], report["outcomes"]
    drpe = ", ".join(f"{k} {v:.4f}" for k, v in report["DRPE"].items())
    rows = [
        ("model", model),
        ("task / depth", f"{report['task']} / {report['depth']}"),
        ("success rate", f"{s['mean']:.3f} ± {s['se']:.3f} (SE, n={s['n']})"),
        ("outcomes", f"goal {o['goal']}, hazard {o['hazard']}, timeout {o['timeout']}"),
        ("mean steps", f"{report['mean_steps']:.1f}"),
        ("E_tot", f"{report['E_tot']:.4f}  (H={report['horizon']}, {report['n_windows']} windows)"),
        ("DRPE", drpe),
        ("VPE", f"{report['VPE']:.4f}"),
    ]
    audit = report["event_audit"]
    rows.append(
        (
            "event audit",
            f"carrying at pickup {_fmt(audit.get('carrying_at_pickup'))} "
            f"(pickup MSE {_fmt(audit.get('pickup_mse'))}, n={audit.get('n_pickup')}); "
            f"door MSE {_fmt(audit.get('door_mse'))} (n={audit.get('n_door')})",
        )
    )
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    weights = relevance_weights(tasks.get(report["task"])).tolist()
    order = sorted(range(STATE_DIM), key=lambda d: -weights[d])
    lines.append("per-dimension error (ordered by graded relevance weight):")
    for d in order:
        name = DIM_NAMES[d]
        lines.append(f"  {name:<10} w={weights[d]:.3f}  err={report['profile'][name]:.5f}")
    return "\n".join(lines)


def write_json(report: dict, path: Path, overwrite: bool = False) -> Path:
    """Write ``report`` to ``path``; refuses to replace an existing file unless ``overwrite``.

    Raises:
        FileExistsError: if ``path`` exists and ``overwrite`` is False.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path
