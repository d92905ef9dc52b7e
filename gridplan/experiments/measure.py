"""The measurements every group takes: held-out windows and closed-loop success summaries.

Groups of one ``run_groups`` call score models on identical windows (``standard_windows``,
cached per process) and summarize closed loops the same way ``python -m eval`` does
(``gridplan.metrics.stats.summarize_episodes``).
"""

from __future__ import annotations

from gridplan.core.tasks import TASK_A, Task
from gridplan.data.datasets import EvalWindows, eval_windows
from gridplan.evaluation.spec import EvalSpec
from gridplan.experiments.runner import GroupContext
from gridplan.metrics.stats import EpisodeSummary, summarize_episodes
from gridplan.models.capabilities import capabilities_of
from gridplan.planning.closed_loop import EpisodeResults, run_episodes
from gridplan.planning.planner import TIES

_WINDOWS_CACHE: dict[tuple, EvalWindows] = {}


def tie_rules(main: str) -> tuple[str, ...]:
    """Every tie rule of ``gridplan.planning.planner.TIES``, ``main`` first: the order a group
    that plays its learned models under both rules reports them (``docs/PREREGISTERED.md``,
    Rule 1)."""
    return (main, *(r for r in TIES if r != main))


def standard_windows(ctx: GroupContext, protocol: EvalSpec, task: Task = TASK_A) -> EvalWindows:
    """The protocol's held-out evaluation windows (``protocol.n_windows`` windows of
    ``protocol.horizon`` steps, default seed of ``eval_windows``), cached per process."""
    key = (protocol.n_windows, protocol.horizon, task, str(ctx.device))
    if key not in _WINDOWS_CACHE:
        _WINDOWS_CACHE[key] = eval_windows(
            protocol.n_windows, protocol.horizon, task=task, device=ctx.device
        )
    return _WINDOWS_CACHE[key]


def closed_loop(
    ctx: GroupContext,
    model,
    task: Task,
    protocol: EvalSpec,
    record: bool = False,
    ties: str | None = None,
) -> tuple[list[EpisodeSummary], EpisodeResults]:
    """Closed-loop success of every setting of ``model`` under ``protocol`` (one batched
    ``run_episodes`` call). The planner breaks ties by ``ties`` (``"first"``, ``"random"``),
    by default the run's reading's rule (``ctx.reading.ties``), for a learned model as for
    the controlled family.

    Returns:
        ``(summaries, results)``: one ``EpisodeSummary`` per setting and the raw setting-major
        ``EpisodeResults`` (with trajectories when ``record``).
    """
    results = run_episodes(
        model,
        task=task,
        depth=protocol.depth,
        seeds=list(protocol.seeds),
        episodes=protocol.episodes,
        device=ctx.device,
        record=record,
        progress=ctx.progress,
        ties=ctx.reading.ties if ties is None else ties,
    )
    settings = capabilities_of(model).n_settings
    return summarize_episodes(results, settings, len(protocol.seeds)), results
