"""§5.4 (ii) tested: does the deterministic closed-loop policy cycle, and is systematic bias
worse than noise at equal error?

The paper (§5.4 (i), (ii)) says the random-data model's planner "loops in the western chamber",
that "without noise injection, the closed-loop deterministic policy cycles: the model's errors
are correlated across imagined steps, whereas zero-mean noise averages out across leaves", and
that "learned models fail where noise models succeed at equal MSE". E3 measures both on its
learned models, under both tie rules of the planner (``gridplan.planning.planner.TIES``).

**Cycling** (``episode_cycles``). An episode *cycles* when its true trajectory executes the same
action twice in the same task-relevant discrete state: agent cell, key cell, carrying, door
open (and ``c1`` where the task reads it; the V* table's index,
``gridplan.core.values.ValueTable.index``). The relevant dynamics are deterministic, so a
repeated (state, action) pair repeats the next relevant state as well: the agent is back where
it was, doing what it did. Its *period* is the smallest number of steps between two visits of
one pair; ``SHORT_PERIOD`` bounds a short loop. Only steps before the episode ends count (the
frozen rows after a goal or hazard are not steps). A policy that reads only the relevant state
(the oracle's) never revisits a pair on its way to the goal; a learned model's planner also
reads the irrelevant dims, so a revisit is a loop of the relevant behaviour, not necessarily
of the whole state.

**Noise twins at equal error** (``noise_twins``). For each learned model, a noise model of the
controlled family whose total error on E3's held-out windows equals the learned model's: its
per-dimension noise scale is ``c * sqrt(excess_d)``, ``excess_d`` the learned model's
per-dimension error profile above the floor of the oracle that predicts the distractors at their
expected position (a model trained by squared error predicts their conditional mean, so that
oracle is its floor; ``gridplan.core.readings``, switch ``distractors``), and the one scale ``c``
is found by bisection on ``log c`` until the twin's E_tot (the same draws at every ``c``) is
within ``SCALE_TOLERANCE`` of the learned one (``calibrate_scale``). The twin thus errs on the
same dims in the same shares, as zero-mean noise instead of the learned model's bias. A learned
E_tot at or below the floor, or above the largest scale's, is not matched (``matched`` False,
the nearest end is used).
Twins plan under E3's protocol on the same start states as the learned models (every training
seed's closed-loop seed), so the two are compared on common random numbers.

Letter legend: ``T`` steps, ``B`` episodes, ``M`` settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gridplan.core import dynamics
from gridplan.core.readings import PROJECT
from gridplan.core.tasks import TASK_A, Task
from gridplan.data.datasets import EvalWindows
from gridplan.evaluation.spec import EvalSpec
from gridplan.experiments.measure import closed_loop
from gridplan.experiments.runner import GroupContext
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import mean_se
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import GOAL, TIMEOUT, EpisodeResults

#: A loop of at most this many steps is short (the four moves around a cell and back).
SHORT_PERIOD = 4
#: Smallest and largest scale ``c`` of the twin calibration (``calibrate_scale``).
SCALE_RANGE = (1e-3, 16.0)
#: Relative E_tot error at which the calibration stops, and its most bisection steps.
SCALE_TOLERANCE = 1e-3
SCALE_STEPS = 24
#: The twins' reading: the default one, but the distractors predicted at their expected
#: position (the floor a squared-error model reaches; module docstring).
TWIN_READING = PROJECT.replace("project-expected-distractors", distractors="expected")


def episode_cycles(
    results: EpisodeResults, task: Task = TASK_A
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which episodes cycle and their shortest period (module docstring).

    Args:
        results: a recorded closed loop (``trajectory`` ``(T + 1, B, S)``, ``actions``
            ``(T, B)``, -1 after the episode ended).
        task: the task whose relevant discrete state is compared.

    Returns:
        ``(cycles, period)``: ``(B,)`` bool, and ``(B,)`` long, the smallest gap between two
        visits of one (relevant state, action) pair, 0 where the episode never revisits one.

    Raises:
        ValueError: if ``results`` holds no trajectory or actions.
    """
    if results.trajectory is None or results.actions is None:
        raise ValueError("cycling needs a recorded closed loop (run_episodes(record=True))")
    actions = results.actions
    t, b = actions.shape
    states = results.trajectory[:t].reshape(t * b, -1)
    index = dynamics.value_table(task, states.device).index(states).view(t, b)
    step = torch.arange(t, device=actions.device)
    # A step after the end gets a key no other step shares (negative, one per step).
    key = torch.where(actions >= 0, index * 4 + actions, -1 - step.unsqueeze(1)).T  # (B, T)
    same = key.unsqueeze(2) == key.unsqueeze(1)  # (B, T, T): steps i and j share a pair
    gap = step.view(1, t) - step.view(t, 1)  # (T, T): j - i
    big = t + 1
    period = torch.where(same & (gap > 0), gap, big).amin(dim=(1, 2))
    cycles = period < big
    return cycles, torch.where(cycles, period, torch.zeros_like(period))


@dataclass(frozen=True)
class Cycling:
    """Cycling of one model's episodes (``episode_cycles``).

    Attributes:
        episodes: episodes played.
        failed: episodes that did not reach the goal (hazard or timeout).
        cycling: episodes that cycle, all outcomes.
        failed_cycling: failed episodes that cycle.
        failed_short: failed episodes with a loop of period at most ``SHORT_PERIOD``.
        timeouts: episodes that ran out of time.
    """

    episodes: int
    failed: int
    cycling: int
    failed_cycling: int
    failed_short: int
    timeouts: int

    @property
    def failed_cycling_rate(self) -> float:
        """Fraction of the failed episodes that cycle (NaN without failures)."""
        return self.failed_cycling / self.failed if self.failed else float("nan")

    @property
    def cycling_rate(self) -> float:
        """Fraction of all episodes that cycle."""
        return self.cycling / self.episodes

    def to_dict(self) -> dict:
        return {
            **{k: getattr(self, k) for k in self.__dataclass_fields__},
            "failed_cycling_rate": self.failed_cycling_rate,
            "cycling_rate": self.cycling_rate,
        }


def cycling_of(results: EpisodeResults, rows: torch.Tensor, task: Task = TASK_A) -> Cycling:
    """``Cycling`` of the episodes ``rows`` (an index or bool mask into ``results``)."""
    cycles, period = episode_cycles(results, task)
    cycles, period = cycles[rows], period[rows]
    outcome = results.outcome[rows]
    failed = outcome != GOAL
    return Cycling(
        episodes=int(outcome.numel()),
        failed=int(failed.sum()),
        cycling=int(cycles.sum()),
        failed_cycling=int((cycles & failed).sum()),
        failed_short=int((cycles & failed & (period <= SHORT_PERIOD)).sum()),
        timeouts=int((outcome == TIMEOUT).sum()),
    )


def setting_cycling(results: EpisodeResults, settings: int, task: Task = TASK_A) -> list[Cycling]:
    """``Cycling`` of each setting of a setting-major closed loop of ``settings`` blocks."""
    n = results.outcome.shape[0] // settings
    return [cycling_of(results, slice(m * n, (m + 1) * n), task) for m in range(settings)]


def add_cycling(total: Cycling | None, part: Cycling) -> Cycling:
    """The counts of ``total`` and ``part`` summed (``total`` None: ``part``)."""
    if total is None:
        return part
    fields = total.__dataclass_fields__
    return Cycling(**{k: getattr(total, k) + getattr(part, k) for k in fields})


# --------------------------------------------------------------------------- noise twins


@dataclass(frozen=True)
class Twin:
    """A learned model's noise twin at equal E_tot (module docstring).

    Attributes:
        name: the learned model's name.
        target: the learned model's E_tot (mean over its seeds' models).
        scale: the scale ``c`` of the twin's noise.
        sigma: ``(S,)`` the twin's per-dimension noise std (normalized units).
        E_tot: the twin's E_tot on the calibration windows (single-setting draws).
        matched: the target lay inside the calibration's E_tot range.
    """

    name: str
    target: float
    scale: float
    sigma: tuple[float, ...]
    E_tot: float
    matched: bool


def floor_profile(windows: EvalWindows, task: Task = TASK_A) -> tuple[torch.Tensor, float]:
    """``(S,)`` per-dimension error and E_tot of the expected-distractor oracle on ``windows``."""
    pm = prediction_metrics(OracleModel(TWIN_READING, task.world), windows, task)[0]
    return pm.profile.double().cpu(), pm.E_tot


def _twin_e_tot(direction: torch.Tensor, scale: float, windows: EvalWindows, task: Task) -> float:
    """E_tot of the single-setting twin ``scale * direction`` on ``windows`` (the default
    generator of ``prediction_metrics``: the same draws for every scale)."""
    model = NoiseModel(
        (scale * direction).float(), task.noise_relevant_dims, TWIN_READING, task.world
    )
    return prediction_metrics(model, windows, task)[0].E_tot


def calibrate_scale(
    direction: torch.Tensor, target: float, windows: EvalWindows, task: Task = TASK_A
) -> tuple[float, float, bool]:
    """The scale ``c`` whose twin ``c * direction`` has E_tot ``target``: bisection on
    ``log c`` over ``SCALE_RANGE`` (E_tot rises with ``c``; every trial draws the same noise),
    stopped at ``SCALE_TOLERANCE`` relative error or after ``SCALE_STEPS`` steps. The curve
    can jump where a draw crosses half a cell (the next imagined step then reads another
    cell), so the trial closest to the target is returned with its E_tot, which the results
    report beside the target.

    Returns:
        ``(c, E_tot at c, matched)``; ``matched`` is False when ``target`` lies below the
        twin's E_tot at the smallest scale (the floor) or above it at the largest, where the
        nearest end is returned.
    """
    lo, hi = (math.log(c) for c in SCALE_RANGE)
    e_lo = _twin_e_tot(direction, SCALE_RANGE[0], windows, task)
    if target <= e_lo:
        return SCALE_RANGE[0], e_lo, False
    e_hi = _twin_e_tot(direction, SCALE_RANGE[1], windows, task)
    if target >= e_hi:
        return SCALE_RANGE[1], e_hi, False
    best = (abs(e_lo - target), SCALE_RANGE[0], e_lo)
    for _ in range(SCALE_STEPS):
        mid = 0.5 * (lo + hi)
        e = _twin_e_tot(direction, math.exp(mid), windows, task)
        best = min(best, (abs(e - target), math.exp(mid), e))
        if abs(e - target) <= SCALE_TOLERANCE * target:
            break
        lo, hi = (mid, hi) if e < target else (lo, mid)
    return best[1], best[2], True


def noise_twins(
    names: list[str],
    profiles: list[torch.Tensor],
    targets: list[float],
    windows: EvalWindows,
    task: Task = TASK_A,
) -> list[Twin]:
    """The noise twin of each learned model from its ``(S,)`` profile and E_tot target
    (module docstring; ``calibrate_scale``).

    Raises:
        ValueError: if the lists differ in length or are empty.
    """
    if not names or not len(names) == len(profiles) == len(targets):
        raise ValueError("noise_twins needs one profile and one target per name")
    floor = floor_profile(windows, task)[0]
    twins = []
    for name, profile, target in zip(names, profiles, targets, strict=True):
        direction = (profile.double().cpu() - floor).clamp(min=0.0).sqrt()
        scale, e_tot, matched = calibrate_scale(direction, float(target), windows, task)
        sigma = tuple(float(v) for v in (scale * direction).tolist())
        twins.append(Twin(name, float(target), float(scale), sigma, e_tot, matched))
    return twins


def twin_model(twins: list[Twin], task: Task = TASK_A) -> NoiseModel:
    """One multi-setting ``NoiseModel`` holding every twin (setting order = ``twins``)."""
    sigma = torch.tensor([t.sigma for t in twins], dtype=torch.float32)
    return NoiseModel(sigma, task.noise_relevant_dims, TWIN_READING, task.world)


def twin_success(
    ctx: GroupContext, model: NoiseModel, protocol: EvalSpec, ties: str, task: Task = TASK_A
) -> tuple[list[float], list[float], EpisodeResults]:
    """Success of every twin on the protocol's seeds x episodes under tie rule ``ties``: per
    twin the mean over the seeds' success rates and its SE over them, and the recorded
    closed loop (for ``setting_cycling``)."""
    summaries, results = closed_loop(ctx, model, task, protocol, record=True, ties=ties)
    stats = [mean_se(list(s.per_seed)) for s in summaries]
    return [m for m, _, _ in stats], [se for _, se, _ in stats], results
