"""The levels of ``gridplan.evaluate``, one function each, and the context they share.

A level is a ``Level``: ``measure(ctx) -> dict`` gives its numbers, ``section`` names where
``gridplan.evaluate`` files them in the ``gridplan.evaluation.schema.Report`` (the paper's
measurements at the top level, ``prediction`` and ``closed_loop``; every other level under
``Report.ladder[name]``), ``requires`` the levels it builds on. ``REGISTRY`` holds them in run
order. ``L1`` and ``success`` are the paper's report (``PAPER_LEVELS``: prediction-error
metrics, paper §4, and the closed-loop success of the planner with the model, paper §3);
``L7`` requires ``success``.

``LevelContext`` holds one evaluation's model, task, depth, protocol and random streams, and
computes what several levels use (the held-out windows, the branch set ``Q``, the closed
loops, the model's decisions, rollouts and branches at ``Q``, the anchor runs) once, on first
use. Which random stream feeds what is fixed per component (``STREAMS``), so leaving a level
out never changes another level's numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, NamedTuple

import numpy as np
import torch

from gridplan.core.tasks import Task
from gridplan.data.datasets import EvalWindows, eval_windows
from gridplan.evaluation.anchors import AnchorSet, get_anchors
from gridplan.evaluation.branch import BranchSet, branch_set, decision_states, sample_rows
from gridplan.evaluation.common import RATE, Estimate, relevant_sq_error
from gridplan.evaluation.decisions import (
    Decisions,
    decide,
    decide_planner,
    decision_quality,
    exploitability,
)
from gridplan.evaluation.fidelity import (
    Branches,
    branch_predictions,
    imagined_rollout,
    interventional_fidelity,
    true_rollout,
)
from gridplan.evaluation.outcome import (
    PolicyRuns,
    outcome_fidelity,
    random_policy_success,
    run_anchor_policies,
)
from gridplan.evaluation.planner_choice import PlannerChoice
from gridplan.evaluation.probe import answer, build_questions
from gridplan.evaluation.ranking import policy_ranking
from gridplan.evaluation.schema import LEVEL_TITLES, Report
from gridplan.evaluation.spec import EvalSpec
from gridplan.evaluation.uncertainty import rollout_uncertainty, uncertainty_fn, uncertainty_source
from gridplan.metrics.bootstrap import paired_hierarchical_bootstrap
from gridplan.metrics.calibration import uncertainty_quality
from gridplan.metrics.prediction import prediction_metrics, standard_weights
from gridplan.metrics.stats import summarize_episodes
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import EpisodeResults, run_episodes, start_states
from gridplan.util.progress import Progress

#: Offsets of the seeded random streams, one per component.
STREAMS = {
    "branch": 1,
    "actions": 2,
    "model": 3,
    "env": 4,
    "decide": 5,
    "probe": 6,
    "xgap": 7,
    "anchors": 8,
    "anchor_model": 9,
    "random_policy": 10,
    "anchor_env": 11,
}


@dataclass
class LevelContext:
    """One evaluation's inputs and the intermediate results its levels share.

    Attributes:
        model: the (checked) single-setting world model.
        task: the task (``spec.task`` on ``spec.world``).
        spec: the evaluation spec (``gridplan.evaluation.spec.EvalSpec``): depth, closed loop,
            windows, ladder sizes, and the planner's tie rule and tree, which every search of
            the evaluation uses (the model's and the oracle's closed loops, the decisions at
            ``Q`` and at XGap's states).
        device: where everything runs.
        levels: the levels requested (decides what the shared rollouts and decisions keep).
        report: the report being filled (levels keep their per-unit arrays in it).
        progress: where the levels' stages and closed loops report their progress.
        planner: the planner measured (``gridplan.evaluation.planner_choice.PlannerChoice``);
            ``None`` or ``search`` is the paper's full-width search. Another planner runs the
            model's and the oracle's closed loops (success, L7) and makes the decisions of
            L4 and of XGap (``decide_planner``); the branch set ``Q`` and the probe stay the
            search's, so ``Q`` is the same states for every planner.
    """

    model: object
    task: Task
    spec: EvalSpec
    device: torch.device
    levels: tuple[str, ...]
    report: Report
    progress: Progress = field(default_factory=lambda: Progress(enabled=False))
    planner: PlannerChoice | None = None
    _clock: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def depth(self) -> int:
        """Planner depth ``D`` (the spec's)."""
        return self.spec.depth

    @property
    def search(self) -> dict:
        """The full-width search's knobs of the spec for the model: ``ties`` and ``tree``
        (``PlannerSpec.tree_for``)."""
        return {"ties": self.spec.planner.ties, "tree": self.spec.planner.tree_for(self.model)}

    def stream(self, name: str) -> torch.Generator:
        """A fresh generator of component ``name`` (``STREAMS``), seeded from ``spec.seed``."""
        seed = 1_000 * int(self.spec.seed) + STREAMS[name]
        return torch.Generator(device=self.device).manual_seed(seed)

    def lap(self, name: str) -> None:
        """Add the seconds since the last lap to ``report.timing[name]``."""
        now = time.perf_counter()
        self.report.timing[name] = self.report.timing.get(name, 0.0) + now - self._clock
        self._clock = now

    def closed_loop(self, model, what: str = "closed loop") -> EpisodeResults:
        """Recorded closed-loop episodes of the planner with ``model`` under the protocol
        (``what`` labels its progress)."""
        p = self.spec
        return run_episodes(
            model,
            self.task,
            self.depth,
            list(p.seeds),
            p.episodes,
            self.device,
            record=True,
            progress=self.progress,
            what=what,
            **self.search,
            planner_factory=None if self.is_search else self.build_planner,
        )

    @property
    def is_search(self) -> bool:
        """Whether the measured planner is the paper's full-width search."""
        return self.planner is None or self.planner.is_search

    def build_planner(self, model):
        """The measured planner for ``model`` (``PlannerChoice.build``)."""
        return self.planner.build(model, self.task, self.depth, self.device)

    def decide(self, roots: torch.Tensor, stream: str) -> Decisions:
        """The measured planner's decisions at ``roots`` with the model: ``decide`` for the
        search, ``decide_planner`` otherwise."""
        if self.is_search:
            return decide(
                self.model, roots, self.task, self.depth, self.stream(stream), **self.search
            )
        return decide_planner(self.build_planner(self.model), roots, self.stream(stream))

    def success_matrix(self, results: EpisodeResults) -> np.ndarray:
        """``(S, E)`` per-episode success (evaluation seed x episode) of ``results``."""
        p = self.spec
        return results.success.view(len(p.seeds), p.episodes).double().cpu().numpy()

    @cached_property
    def windows(self) -> EvalWindows:
        p = self.spec
        return eval_windows(p.n_windows, p.horizon, task=self.task, device=self.device)

    @cached_property
    def oracle_loop(self) -> EpisodeResults:
        if not self.is_search:
            return self.closed_loop(
                OracleModel(world=self.task.world), "closed loop (oracle, measured planner)"
            )
        return self.search_oracle_loop

    @cached_property
    def search_oracle_loop(self) -> EpisodeResults:
        """The oracle's closed loop with the full-width search (the branch set's states)."""
        if not self.is_search:
            return run_episodes(
                OracleModel(world=self.task.world),
                self.task,
                self.depth,
                list(self.spec.seeds),
                self.spec.episodes,
                self.device,
                record=True,
                progress=self.progress,
                what="closed loop (oracle planner)",
                **self.search,
            )
        return self.closed_loop(OracleModel(world=self.task.world), "closed loop (oracle planner)")

    @cached_property
    def model_loop(self) -> EpisodeResults:
        return self.closed_loop(self.model, "closed loop (model)")

    @cached_property
    def branch_set(self) -> BranchSet:
        """``Q``; its seconds (windows and the oracle's closed loop included, unless an
        earlier level built them) are timed as ``"branch set"``."""
        q = branch_set(
            self.windows,
            self.search_oracle_loop,
            self.spec.branch_states,
            self.stream("branch"),
        )
        self.lap("branch set")
        return q

    @cached_property
    def decisions(self) -> Decisions:
        """The model's decisions at ``Q``, with every leaf score if the probe is measured."""
        keep = "probe" in self.levels
        q = self.branch_set
        if not self.is_search:
            return self.decide(q.states, "decide")
        return decide(
            self.model, q.states, self.task, self.depth, self.stream("decide"), keep, **self.search
        )

    @cached_property
    def search_decisions(self) -> Decisions:
        """The full-width search's decisions at ``Q`` with every leaf score (the probe's)."""
        if self.is_search:
            return self.decisions
        q = self.branch_set
        return decide(
            self.model, q.states, self.task, self.depth, self.stream("decide"), True, **self.search
        )

    @cached_property
    def rollouts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(predicted, true, scores)``: the model's and the true ``H``-step rollouts of ``Q``
        under random actions, ``(N, H, S)`` each, and the model's uncertainty score at every
        step, ``(N, H)``, if ``uncertainty`` is measured (else None)."""
        q, p = self.branch_set, self.spec
        actions = torch.randint(
            0,
            self.task.world.n_actions,
            (len(q), p.horizon),
            generator=self.stream("actions"),
            device=self.device,
        )
        score = uncertainty_fn(self.model, self.task) if "uncertainty" in self.levels else None
        pred, scores = imagined_rollout(self.model, q.states, actions, self.stream("model"), score)
        true = true_rollout(q.states, actions, self.task, self.stream("env"))
        return pred, true, scores

    @cached_property
    def branches(self) -> Branches:
        q = self.branch_set
        return branch_predictions(
            self.model, q.states, self.task, self.stream("model"), self.stream("env")
        )

    @cached_property
    def anchors(self) -> AnchorSet:
        return AnchorSet(get_anchors(tuple(self.spec.anchors)), self.task, self.device)

    @cached_property
    def anchor_runs(self) -> PolicyRuns:
        p = self.spec
        starts = start_states([p.anchor_seed], p.anchor_starts, self.task, self.device)
        return run_anchor_policies(
            self.model,
            self.anchors,
            starts,
            p.anchor_rollouts,
            self.task,
            1_000 * p.seed + STREAMS["anchors"],
            self.stream("anchor_model"),
            self.stream("anchor_env"),
        )


class Level(NamedTuple):
    """One level of the ladder (module docstring)."""

    measure: Callable[[LevelContext], dict]
    section: Literal["ladder", "prediction", "closed_loop"] = "ladder"
    requires: tuple[str, ...] = ()


def _profile_intervals(
    per_window: np.ndarray, protocol: EvalSpec, names: tuple[str, ...]
) -> dict:
    """``{dim: [low, high]}``: percentile bootstrap 95% intervals of the ``(S,)`` profile,
    the held-out windows resampled (the rows of ``per_window``, ``(W, S)``)."""
    n = per_window.shape[0]
    rng = np.random.default_rng(protocol.seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=protocol.n_resamples)
    replicates = counts @ per_window / n
    low, high = np.percentile(replicates, [2.5, 97.5], axis=0)
    return {name: [float(lo), float(hi)] for name, lo, hi in zip(names, low, high, strict=True)}


def prediction(ctx: LevelContext) -> dict:
    """L1: E_tot, DRPE, the error profiles, the event audit and VPE on the held-out windows
    (``gridplan.metrics.prediction.PredictionMetrics.to_dict``), with ``profile_ci`` (95%
    bootstrap intervals of the profile over windows) and ``oracle_floor`` (the oracle's own
    E_tot and DRPE on the same windows: not 0, the distractors are stochastic). The
    per-window E_tot and DRPE go to ``report.per_window`` for paired comparisons."""
    metrics = prediction_metrics(ctx.model, ctx.windows, ctx.task)[0]
    floor = prediction_metrics(OracleModel(world=ctx.task.world), ctx.windows, ctx.task)[0]
    per_window = metrics.window_profile.double().numpy()
    ctx.report.per_window["E_tot"] = per_window.mean(axis=1)
    for name, w in standard_weights(ctx.task).items():
        ctx.report.per_window[f"DRPE_{name}"] = per_window @ w.double().numpy()
    return {
        **metrics.to_dict(),
        "profile_ci": _profile_intervals(per_window, ctx.spec, ctx.task.world.dim_names),
        "oracle_floor": {"E_tot": floor.E_tot, "DRPE": dict(floor.DRPE)},
    }


def closed_loop_success(ctx: LevelContext) -> dict:
    """The closed-loop success of the planner with the model (paper §3): ``seeds``,
    ``episodes``, ``success {mean, se, n}``, ``outcomes {goal, hazard, timeout}``,
    ``mean_steps``; the per-episode success goes to ``report.episode_success``."""
    results, seeds = ctx.model_loop, list(ctx.spec.seeds)
    summary = summarize_episodes(results, n_seeds=len(seeds))[0]
    ctx.report.episode_success = ctx.success_matrix(results)
    return {
        "seeds": seeds,
        "episodes": ctx.spec.episodes,
        "success": {"mean": summary.success, "se": summary.success_se, "n": summary.n_episodes},
        "outcomes": summary.outcomes,
        "mean_steps": float(results.steps.float().mean()),
    }


def interventional(ctx: LevelContext) -> dict:
    """L4: decision agreement and regret at ``Q``, interventional fidelity of the model's
    rollouts and branches; per-state regret and optimality go to ``report.per_state``."""
    q, decisions = ctx.branch_set, ctx.decisions
    pred, true, _ = ctx.rollouts
    branches = ctx.branches
    n_b = q.n_behaviour
    teacher, _ = imagined_rollout(ctx.model, q.states[:n_b], q.logged_actions, ctx.stream("model"))
    fid = interventional_fidelity(
        pred, true, q.behaviour, teacher, q.logged_targets, branches, ctx.task
    )
    ctx.report.per_state["decision_regret"] = decisions.regret.double().cpu().numpy()
    ctx.report.per_state["decision_optimal"] = decisions.optimal.double().cpu().numpy()
    return {
        **decision_quality(decisions).to_dict(),
        **fid.to_dict(),
        "n_states": len(q),
        "n_behaviour": n_b,
    }


def outcome(ctx: LevelContext) -> dict:
    """L5: reward, value and success fidelity of the anchor policies inside the model."""
    p = ctx.spec
    runs, branches = ctx.anchor_runs, ctx.branches
    numbers = outcome_fidelity(runs, branches, p.n_resamples, p.seed).to_dict()
    return {**numbers, "n_starts": p.anchor_starts, "rollouts": p.anchor_rollouts}


def ranking(ctx: LevelContext) -> dict:
    """L6: how the model ranks the anchor policies against their true values."""
    p = ctx.spec
    j_true, j_model = ctx.anchor_runs.values()
    return policy_ranking(ctx.anchors.names, j_true, j_model, p.n_resamples, p.seed).to_dict()


def _difference(a: np.ndarray, b: np.ndarray, protocol: EvalSpec) -> dict:
    """``mean(a - b)`` with its paired hierarchical bootstrap interval over evaluation seed
    and episode."""
    diff = paired_hierarchical_bootstrap(
        a, b, ("evaluation seed", "episode"), protocol.n_resamples, protocol.seed
    )
    out = Estimate(diff.difference, float("nan"), diff.low, diff.high, a.size).to_dict()
    if diff.warning:
        out["warning"] = diff.warning
    return out


def _random_success(ctx: LevelContext) -> np.ndarray:
    """``(S, E)`` success of the uniform random policy from the closed loop's start states:
    the anchor ``uniform_random`` on the paper's world, ``random_policy_success`` (over the
    world's ``n_actions``) on a task of another kind, which steps only the episodes still
    running: a DoorKey step is dearer than a gather from the paper world's tables."""
    p, seeds = ctx.spec, list(ctx.spec.seeds)
    starts = start_states(seeds, p.episodes, ctx.task, ctx.device)
    if not isinstance(ctx.task, Task):
        success = random_policy_success(ctx.task, starts, ctx.stream("random_policy"))
        return success.view(len(seeds), p.episodes).double().cpu().numpy()
    runs = run_anchor_policies(
        None,
        AnchorSet(get_anchors(("uniform_random",)), ctx.task, ctx.device),
        starts,
        1,
        ctx.task,
        1_000 * p.seed + STREAMS["random_policy"],
        ctx.stream("random_policy"),
        ctx.stream("random_policy"),
    )
    return runs.true_success.view(len(seeds), p.episodes).double().cpu().numpy()


def planning_utility(ctx: LevelContext) -> dict:
    """L7: success against the oracle planner and the random policy (policy gain, optimality
    regret) and the exploitability gap at states of the model's own episodes."""
    p = ctx.spec
    success = ctx.report.episode_success
    oracle = ctx.success_matrix(ctx.oracle_loop)
    random = _random_success(ctx)
    deployed = sample_rows(decision_states(ctx.model_loop), p.xgap_states, ctx.stream("xgap"))
    decisions = ctx.decide(deployed, "xgap")
    return {
        "success": Estimate.of(success, RATE).to_dict(),
        "success_oracle": Estimate.of(oracle, RATE).to_dict(),
        "success_random": Estimate.of(random, RATE).to_dict(),
        "policy_gain": _difference(success, random, p),
        "optimality_regret": _difference(oracle, success, p),
        **exploitability(decisions, p.xgap_threshold).to_dict(),
        "n_xgap_states": len(deployed),
    }


def probe(ctx: LevelContext) -> dict:
    """The WorldModelGym probe on a sample of ``Q`` (``gridplan.evaluation.probe``)."""
    q, decisions = ctx.branch_set, ctx.search_decisions
    rows = sample_rows(
        torch.arange(len(q), device=ctx.device), ctx.spec.probe_questions, ctx.stream("probe")
    )
    questions = build_questions(
        decisions.true_scores[rows], ctx.depth, ctx.stream("probe"), ctx.task.world.n_actions
    )
    return answer(questions, decisions.model_scores[rows]).to_dict()


def uncertainty(ctx: LevelContext) -> dict:
    """Risk-coverage of the model's uncertainty against the error of its rollouts of ``Q``
    (``gridplan.evaluation.uncertainty``, ``gridplan.metrics.calibration``)."""
    pred, true, scores = ctx.rollouts
    per_row_error = relevant_sq_error(pred, true, ctx.task).mean(dim=1)
    return uncertainty_quality(
        rollout_uncertainty(scores).cpu().numpy(),
        per_row_error.double().cpu().numpy(),
        uncertainty_source(ctx.model),
        ctx.spec.n_resamples,
        ctx.spec.seed,
    ).to_dict()


#: Every level, in run order (``gridplan.evaluation.schema.LEVELS`` plus ``success``, which
#: ``L7`` includes).
REGISTRY: dict[str, Level] = {
    "L1": Level(prediction, section="prediction"),
    "L4": Level(interventional),
    "L5": Level(outcome),
    "L6": Level(ranking),
    "success": Level(closed_loop_success, section="closed_loop"),
    "L7": Level(planning_utility, requires=("success",)),
    "probe": Level(probe),
    "uncertainty": Level(uncertainty),
}


def run_order(levels: tuple[str, ...]) -> tuple[str, ...]:
    """``levels`` and the levels they require, in ``REGISTRY`` order."""
    wanted = set(levels) | {r for lv in levels for r in REGISTRY[lv].requires}
    return tuple(name for name in REGISTRY if name in wanted)


def measure(ctx: LevelContext) -> None:
    """Run ``ctx.levels`` (and what they require) in order, filing each level's numbers in
    ``ctx.report`` and its seconds in ``ctx.report.timing`` (a required level's seconds count
    toward the level after it)."""
    for name in run_order(ctx.levels):
        level = REGISTRY[name]
        title = LEVEL_TITLES.get(name, "closed-loop success")
        title = f"{name} {title}" if name.startswith("L") else title
        with ctx.progress.stage(title):
            numbers = level.measure(ctx)
        if level.section == "ladder":
            ctx.report.ladder[name] = numbers
        else:
            setattr(ctx.report, level.section, numbers)
        if name in ctx.levels:
            ctx.lap(name)
