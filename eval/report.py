"""Evaluation reports: run the closed loop for one model, build the JSON dict, print a table.

The JSON keys ``success {mean, se, n}``, ``outcomes {goal, hazard, timeout}``, ``model``,
``depth``, ``task``, ``seeds``, ``episodes`` are stable: scripts read them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from gridplan.closed_loop import EpisodeResults, evaluate
from gridplan.stats import mean_se


def closed_loop_report(
    model,
    model_info: dict,
    task: str,
    depth: int,
    seeds: list[int],
    episodes: int,
    device: str,
    progress: bool = True,
) -> dict:
    """Closed-loop success of a single-setting model as the stable JSON dict."""
    results: EpisodeResults = evaluate(
        model, task=task, depth=depth, seeds=seeds, episodes=episodes, device=device,
        progress=progress,
    )
    mean, se, n = mean_se(results.success.float().cpu().numpy())
    return {
        "model": model_info,
        "task": task,
        "depth": depth,
        "seeds": list(seeds),
        "episodes": episodes,
        "success": {"mean": mean, "se": se, "n": n},
        "outcomes": results.outcome_counts(),
        "mean_steps": float(results.steps.float().mean()),
        "device": str(torch.device(device)),
    }


def format_table(report: dict) -> str:
    """Human-readable table of a report dict."""
    model = ", ".join(f"{k}={v}" for k, v in report["model"].items())
    s = report["success"]
    o = report["outcomes"]
    rows = [
        ("model", model),
        ("task / depth", f"{report['task']} / {report['depth']}"),
        ("episodes", f"{len(report['seeds'])} seeds x {report['episodes']} = {s['n']}"),
        ("success rate", f"{s['mean']:.3f} ± {s['se']:.3f} (SE)"),
        ("outcomes", f"goal {o['goal']}, hazard {o['hazard']}, timeout {o['timeout']}"),
        ("mean steps", f"{report['mean_steps']:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


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
