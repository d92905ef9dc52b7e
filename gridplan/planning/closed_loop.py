"""Closed-loop evaluation: plan in the model, act in the true environment (paper §3, §5.1).

Episodes of every model setting run in lockstep as one batch laid out setting-major
``(M * b, S)``; columns whose episodes have ended in every setting are dropped from the
batch, so finished work is not re-planned.

Seeding. Start states are common random numbers: episode ``i`` of seed ``s`` starts from the
same state whatever the number of episodes, the other seeds, the batch or the device, so
runs of different sizes compare on shared start states (the first 10 episodes of a
40-episode run are those of a 10-episode run). They are drawn in blocks of
``START_BLOCK`` episodes: block ``k = i // START_BLOCK`` of seed ``s`` is
``dynamics.reset(task, START_BLOCK, g)`` on CPU with ``g`` seeded from
``numpy.random.SeedSequence((s, k))``, and episode ``i`` is its row ``i % START_BLOCK``.
Everything after the start (the true environment's distractors, planning noise and
tie-breaks) comes from one stream per ``run_episodes`` call, seeded from the seeds and the
episode count, so what happens after the start is not shared across run sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core import dynamics
from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, TaskKind
from gridplan.models.capabilities import capabilities_of
from gridplan.models.episode_memory import episode_memory
from gridplan.planning.planner import Planner
from gridplan.util.progress import Progress, bar

#: Episodes per start-state block (module docstring): part of the seeding scheme, so changing
#: it changes every start state.
START_BLOCK = 64

#: Codes of ``EpisodeResults.outcome``.
OUTCOMES = ("goal", "hazard", "timeout")
GOAL, HAZARD, TIMEOUT = range(3)


@dataclass
class EpisodeResults:
    """Per-episode results of a closed-loop run, all indexed like the start states.

    Attributes:
        success: ``(B,)`` bool, the active goal reached within the horizon.
        returns: ``(B,)`` float, undiscounted sum of true rewards.
        steps: ``(B,)`` long, environment steps taken (the horizon on a timeout).
        outcome: ``(B,)`` long codes into ``OUTCOMES``.
        trajectory: ``(T + 1, B, S)`` true states (rows frozen after termination), or None.
        actions: ``(T, B)`` executed actions (-1 after termination), or None.
    """

    success: torch.Tensor
    returns: torch.Tensor
    steps: torch.Tensor
    outcome: torch.Tensor
    trajectory: torch.Tensor | None = None
    actions: torch.Tensor | None = None

    def outcome_counts(self) -> dict[str, int]:
        """Number of episodes ending at the goal, on the hazard, and by timeout."""
        return {name: int((self.outcome == i).sum()) for i, name in enumerate(OUTCOMES)}


def start_block(seed: int, block: int, task: TaskKind = TASK_A) -> torch.Tensor:
    """Start states of episodes ``[block * START_BLOCK, (block + 1) * START_BLOCK)`` of
    ``seed``: ``(START_BLOCK, S)`` float32 on CPU (the module docstring gives the scheme).

    Raises:
        ValueError: if ``seed`` or ``block`` is negative.
    """
    if seed < 0 or block < 0:
        raise ValueError(f"seed and block must be >= 0, got seed {seed}, block {block}")
    state = np.random.SeedSequence((int(seed), int(block))).generate_state(2, dtype=np.uint32)
    gen = torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
    return dynamics.reset(task, START_BLOCK, gen)


def start_states(
    seeds: Sequence[int], episodes: int, task: TaskKind = TASK_A, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Start states of episodes ``0..episodes-1`` of each seed, seed-major: ``(n_seeds * E, S)``.

    Episode ``i`` of seed ``s`` is the same state whatever ``episodes``, the other seeds and
    the device (blocks of ``START_BLOCK``, module docstring).

    Raises:
        ValueError: if ``seeds`` is empty, a seed is negative or ``episodes < 1``.
        TypeError: if ``task`` is not a ``Task``.
    """
    if len(seeds) == 0:
        raise ValueError("seeds must not be empty")
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    blocks = -(-episodes // START_BLOCK)
    parts = [
        torch.cat([start_block(int(seed), k, task) for k in range(blocks)])[:episodes]
        for seed in seeds
    ]
    return torch.cat(parts).to(device)


def run_closed_loop(
    planner: Planner,
    start: torch.Tensor,
    generator: torch.Generator,
    horizon: int | None = None,
    record: bool = False,
    progress: bool | Progress = False,
    what: str = "closed loop",
) -> EpisodeResults:
    """Run every episode of ``start`` to termination or ``horizon`` steps.

    Args:
        planner: chooses actions from the true current state through its world model.
        start: ``(B, S)`` start states, setting-major if the model has several settings.
        generator: one stream for the true environment's distractors, planning noise and
            tie-breaks (same seed, same device -> same episodes).
        horizon: maximum environment steps (default ``planner.task.horizon``, 60 in the
            paper's tasks).
        record: keep the true trajectory and actions.
        progress: True: a progress bar over environment steps in a terminal only
            (``gridplan.util.progress.bar``); a ``gridplan.util.progress.Progress``: its
            labelled bar, or piped lines of steps and finished episodes.
        what: the loop's label in the progress output.

    Returns:
        EpisodeResults for all ``B`` episodes.

    Raises:
        ValueError: on a malformed start batch or ``horizon < 1``.
    """
    check_state(start, "start", planner.task.world)
    task = planner.task
    horizon = task.horizon if horizon is None else horizon
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    m = capabilities_of(planner.model).n_settings
    b = start.shape[0]
    if b % m:
        raise ValueError(f"{b} start states do not split into {m} setting blocks")
    device = start.device
    state = start.clone()
    active = torch.ones(b, dtype=torch.bool, device=device)
    success = torch.zeros(b, dtype=torch.bool, device=device)
    hazard = torch.zeros(b, dtype=torch.bool, device=device)
    returns = torch.zeros(b, device=device)
    steps = torch.zeros(b, dtype=torch.long, device=device)
    trajectory = [state.clone()] if record else None
    actions = [] if record else None
    # A history model, or a recurrent one on a partial observation, plans from its belief of
    # each episode, not from the state alone.
    history = episode_memory(planner.model, state)
    # A labelled Progress tracks steps and finished episodes (piped lines too); a bool keeps
    # the plain terminal-only bar of the experiment runners.
    labelled = isinstance(progress, Progress)
    tracker = progress.loop(what, horizon, b) if labelled else None
    clock = range(horizon) if labelled else bar(range(horizon), what, enabled=progress, piped=False)
    for _ in clock:
        live_cols = active.view(m, -1).any(dim=0)
        if not live_cols.any():
            break
        rows = torch.arange(b, device=device).view(m, -1)[:, live_cols].reshape(-1)
        sub = state[rows]
        if history is not None:
            planner.model.plan_from(sub, history.roots(rows))
        action = planner.act(sub, generator)
        nxt, reward, done, info = dynamics.step(task, sub, action, generator)
        live = active[rows]
        state[rows] = torch.where(live.unsqueeze(1), nxt, sub)
        returns[rows] += reward * live
        steps[rows] += live.long()
        success[rows] |= info["goal"] & live
        hazard[rows] |= info["hazard"] & live
        active[rows] = live & ~done
        if history is not None:
            history.push(rows, action, state)
        if record:
            full = torch.full((b,), -1, dtype=torch.long, device=device)
            full[rows] = torch.where(live, action, torch.full_like(action, -1))
            actions.append(full)
            trajectory.append(state.clone())
        if tracker is not None:
            tracker.update(int((~active).sum()))
    if tracker is not None:
        tracker.close()
    if history is not None:
        planner.model.plan_from(None)
    outcome = torch.full((b,), TIMEOUT, dtype=torch.long, device=device)
    outcome[success] = GOAL
    outcome[hazard] = HAZARD
    return EpisodeResults(
        success=success,
        returns=returns,
        steps=steps,
        outcome=outcome,
        trajectory=torch.stack(trajectory) if record else None,
        actions=torch.stack(actions) if record and actions else None,
    )


def run_episodes(
    model,
    task: TaskKind = TASK_A,
    depth: int = 4,
    seeds: Sequence[int] = tuple(range(10)),
    episodes: int = 30,
    device: torch.device | str = "cpu",
    record: bool = False,
    progress: bool | Progress = False,
    what: str = "closed loop",
    planner_factory=None,
    **planner_kwargs,
) -> EpisodeResults:
    """Closed-loop success of ``model`` (all its settings) on the seeds' start states.

    Every setting plays the same ``len(seeds) * episodes`` start states (common random
    numbers; episode ``i`` of seed ``s`` is the same in a run of any size, module
    docstring), so the returned tensors are setting-major ``(M * S * E,)``. The planning and
    environment stream is seeded from the seeds and the episode count, so the call is
    reproducible. ``progress`` and ``what`` as for ``run_closed_loop``. ``planner_factory``,
    a callable ``model -> planner`` (a planner of ``gridplan.planning.planners``), replaces
    the full-width ``Planner`` (``planner_kwargs`` are then not used).

    Raises:
        ValueError: on ``depth < 1``, empty or negative seeds or ``episodes < 1``.
        TypeError: if ``task`` is not a ``Task``.
    """
    if planner_factory is None:
        planner = Planner(model, depth, task, device=device, **planner_kwargs)
    else:
        planner = planner_factory(model)
    start = start_states(seeds, episodes, task, device)
    m = capabilities_of(model).n_settings
    start = start.repeat(m, 1) if m > 1 else start
    gen = torch.Generator(device=device).manual_seed(
        1_000_003 * int(seeds[0]) + 7919 * len(seeds) + episodes
    )
    return run_closed_loop(
        planner,
        start.view(-1, task.world.state_dim),
        gen,
        record=record,
        progress=progress,
        what=what,
    )
