"""One model's evaluation report: prediction-error metrics plus closed-loop success.

``model_report`` is what ``python -m eval`` prints and writes as JSON. Its keys are stable
because scripts read them: ``success {mean, se, n}``, ``outcomes {goal, hazard, timeout}``,
``model``, ``depth``, ``task``, ``seeds``, ``episodes``, ``mean_steps``, ``device``, and the
``gridplan.metrics.prediction.PredictionMetrics`` fields ``E_tot``, ``DRPE {binary, graded[,
task]}``, ``profile {dim_name: value}``, ``step_profile``, ``event_audit``, ``VPE``, ``horizon``,
``n_windows``.
"""

from __future__ import annotations

import torch

from gridplan.core.protocols import CONTROLLED, Protocol
from gridplan.core.tasks import TASK_A, Task
from gridplan.data import datasets as data
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import summarize_episodes
from gridplan.planning import closed_loop
from gridplan.planning.planner import Planner


def model_report(
    model,
    model_info: dict,
    task: Task = TASK_A,
    protocol: Protocol = CONTROLLED,
    device: str | torch.device = "cpu",
    progress: bool = True,
) -> dict:
    """Prediction-error metrics (paper §4) and closed-loop success (paper §3) of one model.

    Args:
        model: a single-setting ``WorldModel``.
        model_info: description stored under ``"model"`` (name, sigmas, checkpoint, ...).
        task: the task (the report stores its name).
        protocol: planner depth, seeds x episodes and held-out windows
            (``gridplan.core.protocols``).
        device: torch device for everything.
        progress: show a progress bar during the closed loop.

    Returns:
        The report dict (JSON-serializable).

    Raises:
        ValueError: on bad arguments, a model with several settings, or a depth whose
            search does not fit the planner's memory budget (raised before any work).
    """
    if getattr(model, "n_settings", 1) != 1:
        raise ValueError("model_report takes a single-setting model")
    # Building the planner checks the depth against its memory budget before the metrics run.
    Planner(model, protocol.depth, task, device=device)
    windows = data.eval_windows(protocol.n_windows, protocol.horizon, task=task, device=device)
    metrics = prediction_metrics(model, windows, task)[0].to_dict()
    results = closed_loop.run_episodes(
        model,
        task=task,
        depth=protocol.depth,
        seeds=list(protocol.seeds),
        episodes=protocol.episodes,
        device=device,
        progress=progress,
    )
    summary = summarize_episodes(results, n_seeds=len(protocol.seeds))[0]
    return {
        "model": model_info,
        "task": task.name,
        "depth": protocol.depth,
        "seeds": list(protocol.seeds),
        "episodes": protocol.episodes,
        "success": {"mean": summary.success, "se": summary.success_se, "n": summary.n_episodes},
        "outcomes": summary.outcomes,
        "mean_steps": float(results.steps.float().mean()),
        "device": str(torch.device(device)),
        **metrics,
    }
