"""``gridplan.evaluate``: every level of the decision-centric ladder for one world model.

``evaluate(model, task, depth, protocol, levels) -> Report`` measures, on the same seeds for
every model (common random numbers):

- ``L1``: the paper's prediction-error metrics on held-out windows (E_tot, DRPE, profiles,
  event audit, VPE; ``gridplan.metrics.prediction``);
- ``L4``: interventional fidelity and decision quality on the branch set ``Q``
  (``gridplan.evaluation.fidelity``, ``gridplan.evaluation.decisions``);
- ``L5``, ``L6``: outcome fidelity and policy ranking of the anchor policies
  (``gridplan.evaluation.outcome``, ``gridplan.evaluation.ranking``,
  ``gridplan.evaluation.anchors``);
- ``L7``: closed-loop success of the planner with the model (the paper's protocol), policy gain
  over the uniform random policy, optimality regret against the oracle planner at the same
  depth (both in success rate, with a paired hierarchical bootstrap interval over evaluation
  seed and episode), and the exploitability gap at states of the model's own episodes;
- ``probe``: the WorldModelGym probe on a sample of ``Q`` (``gridplan.evaluation.probe``);
- ``uncertainty``: for models exposing uncertainty (``gridplan.evaluation.uncertainty``).

Which random stream feeds what is fixed per component (``STREAMS``), so leaving a level out
never changes another level's numbers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core import tasks
from gridplan.core.protocols import BOOTSTRAP_RESAMPLES, CONTROLLED, LEARNED, PROFILES, Protocol
from gridplan.core.tasks import Task
from gridplan.data.datasets import eval_windows
from gridplan.evaluation.anchors import ANCHORS, AnchorSet, get_anchors
from gridplan.evaluation.branch import branch_set, decision_states, sample_rows
from gridplan.evaluation.common import RATE, Estimate, has_reward, relevant_sq_error
from gridplan.evaluation.decisions import XGAP_THRESHOLD, decide, decision_quality, exploitability
from gridplan.evaluation.fidelity import (
    branch_predictions,
    imagined_rollout,
    interventional_fidelity,
    true_rollout,
)
from gridplan.evaluation.outcome import outcome_fidelity, run_anchor_policies
from gridplan.evaluation.probe import answer, build_questions
from gridplan.evaluation.ranking import policy_ranking
from gridplan.evaluation.schema import LEVELS, Report
from gridplan.evaluation.uncertainty import (
    rollout_uncertainty,
    uncertainty_fn,
    uncertainty_quality,
    uncertainty_source,
)
from gridplan.metrics.bootstrap import paired_hierarchical_bootstrap
from gridplan.metrics.prediction import prediction_metrics
from gridplan.metrics.stats import summarize_episodes
from gridplan.models.noise import OracleModel
from gridplan.models.plugins import check_contract, checked
from gridplan.planning.closed_loop import run_episodes as closed_loop_evaluate
from gridplan.planning.closed_loop import start_states

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
}


@dataclass(frozen=True)
class LadderProtocol:
    """Every setting of one evaluation besides the model, the task and the depth.

    The closed-loop and window fields mirror ``gridplan.core.protocols.Protocol`` (their defaults
    are ``CONTROLLED``'s, paper §5.1); ``LadderProtocol.of`` builds one from any ``Protocol``.

    Attributes:
        seeds: closed-loop evaluation seeds (each seeds its own start states).
        episodes: closed-loop episodes per seed.
        horizon: ``H`` of the L1 windows and of the L4 interventional rollouts.
        n_windows: held-out windows of L1.
        branch_states: states per part of the branch set ``Q`` (behaviour, oracle-visited).
        anchor_starts: start states of the anchor runs (L5, L6).
        anchor_rollouts: rollouts ``K`` per anchor and start.
        anchor_seed: reset seed of the anchor runs' start states.
        probe_questions: probe questions (states sampled from ``Q``).
        xgap_states: decision states sampled from the model's own episodes for XGap.
        xgap_threshold: the stated XGap threshold (return units).
        n_resamples: bootstrap resamples of every bootstrap interval.
        seed: seed of the ladder's own random streams (``STREAMS``).
        anchors: anchor policy names (``gridplan.evaluation.anchors.ANCHOR_NAMES``).
    """

    seeds: tuple[int, ...] = CONTROLLED.seeds
    episodes: int = CONTROLLED.episodes
    horizon: int = CONTROLLED.horizon
    n_windows: int = CONTROLLED.n_windows
    branch_states: int = 512
    anchor_starts: int = 128
    anchor_rollouts: int = 8
    anchor_seed: int = 20_000
    probe_questions: int = 256
    xgap_states: int = 512
    xgap_threshold: float = XGAP_THRESHOLD
    n_resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = 0
    anchors: tuple[str, ...] = tuple(a.name for a in ANCHORS)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("protocol seeds must not be empty")
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "anchors", tuple(self.anchors))
        positive = (
            "episodes",
            "horizon",
            "n_windows",
            "branch_states",
            "anchor_starts",
            "anchor_rollouts",
            "probe_questions",
            "xgap_states",
            "n_resamples",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"protocol {name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.xgap_threshold < float("inf"):
            raise ValueError(f"xgap_threshold must be finite and >= 0, got {self.xgap_threshold}")
        if len(self.anchors) < 2:
            raise ValueError("policy ranking needs at least 2 anchor policies")
        get_anchors(self.anchors)

    @classmethod
    def of(cls, protocol: Protocol, **sizes) -> LadderProtocol:
        """The ladder protocol with ``protocol``'s seeds, episodes, windows and horizon, and
        the ladder's own sizes from ``sizes`` (defaults otherwise); ``protocol.depth`` is the
        caller's to pass to ``evaluate``."""
        return cls(
            seeds=protocol.seeds,
            episodes=protocol.episodes,
            horizon=protocol.horizon,
            n_windows=protocol.n_windows,
            **sizes,
        )

    def replace(self, **changes) -> LadderProtocol:
        """A copy with ``changes``, validated again."""
        return dataclasses.replace(self, **changes)

    def closed_loop(self, depth: int) -> Protocol:
        """The ``gridplan.core.protocols.Protocol`` of this protocol's closed loop at ``depth``."""
        return Protocol(depth, self.seeds, self.episodes, self.n_windows, self.horizon)

    def to_dict(self) -> dict:
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()
        }


#: Sizes of the smaller presets (the rest as ``LadderProtocol``'s defaults).
_QUICK_SIZES = {
    "branch_states": 128,
    "anchor_starts": 64,
    "anchor_rollouts": 4,
    "probe_questions": 64,
    "xgap_states": 256,
    "n_resamples": 500,
}
_TINY_SIZES = {
    "branch_states": 16,
    "anchor_starts": 8,
    "anchor_rollouts": 2,
    "probe_questions": 8,
    "xgap_states": 16,
    "n_resamples": PROFILES["tiny"].n_resamples,
}
#: Named protocols, their closed loop and windows from ``gridplan.core.protocols``: ``default``
#: (``CONTROLLED``, the paper's controlled grid, 10 seeds x 30 episodes), ``checkpoint``
#: (``LEARNED``, 5 seeds x 40 episodes), ``quick`` and ``tiny`` (the reproduction profiles'
#: controlled protocols with smaller ladder sizes, for trials and tests).
PROTOCOLS = {
    "default": LadderProtocol.of(CONTROLLED),
    "checkpoint": LadderProtocol.of(LEARNED),
    "quick": LadderProtocol.of(PROFILES["quick"].controlled, **_QUICK_SIZES),
    "tiny": LadderProtocol.of(PROFILES["tiny"].controlled, **_TINY_SIZES),
}


def get_protocol(protocol: str | LadderProtocol | Protocol | None) -> LadderProtocol:
    """Resolve a protocol name (``PROTOCOLS``), pass a ``LadderProtocol`` through, wrap a
    ``gridplan.core.protocols.Protocol`` (``LadderProtocol.of``), ``None`` -> ``default``.

    Raises:
        ValueError: on an unknown name.
    """
    if protocol is None:
        return PROTOCOLS["default"]
    if isinstance(protocol, LadderProtocol):
        return protocol
    if isinstance(protocol, Protocol):
        return LadderProtocol.of(protocol)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; valid: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[protocol]


def check_levels(levels: Sequence[str] | None, model=None) -> tuple[str, ...]:
    """The levels to measure, in ``LEVELS`` order. ``None``: every level, ``uncertainty`` only
    if ``model`` exposes uncertainty.

    Raises:
        ValueError: on an unknown level, or ``uncertainty`` for a model without it.
    """
    if levels is None:
        wanted = [lv for lv in LEVELS if lv != "uncertainty" or uncertainty_source(model)]
        return tuple(wanted)
    unknown = [lv for lv in levels if lv not in LEVELS]
    if unknown:
        raise ValueError(f"unknown levels {unknown}; valid: {', '.join(LEVELS)}")
    if "uncertainty" in levels and model is not None and uncertainty_source(model) is None:
        raise ValueError(
            "level 'uncertainty' needs a model with uncertainty(state, action) or "
            "predict_members(state, action) (K >= 2 members)"
        )
    return tuple(lv for lv in LEVELS if lv in levels)


class _Streams:
    def __init__(self, seed: int, device: torch.device) -> None:
        self.seed, self.device = seed, device

    def __call__(self, name: str) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(
            1_000 * int(self.seed) + STREAMS[name]
        )


def _success_matrix(results, protocol: LadderProtocol) -> np.ndarray:
    return results.success.view(len(protocol.seeds), protocol.episodes).double().cpu().numpy()


def _difference(a: np.ndarray, b: np.ndarray, protocol: LadderProtocol, seed: int) -> dict:
    diff = paired_hierarchical_bootstrap(
        a, b, ("evaluation seed", "episode"), protocol.n_resamples, seed
    )
    out = Estimate(diff.difference, float("nan"), diff.low, diff.high, a.size).to_dict()
    if diff.warning:
        out["warning"] = diff.warning
    return out


def evaluate(
    model,
    task: str | Task = "A",
    depth: int | None = None,
    protocol: str | LadderProtocol | Protocol | None = None,
    levels: Sequence[str] | None = None,
    device: torch.device | str = "cpu",
    model_info: dict | None = None,
    progress: bool = False,
) -> Report:
    """Evaluate one world model for decisions.

    Args:
        model: any object with ``predict(state, action, generator)`` (``gridplan.models.plugins``
            describes the contract and the optional methods); built-in models run as they
            are, any other model behind ``gridplan.models.plugins.CheckedModel``.
        task: task name or ``Task``.
        depth: planner depth ``D >= 1``; default the depth of ``protocol`` if it is a
            ``gridplan.core.protocols.Protocol``, else ``CONTROLLED.depth`` (4).
        protocol: a ``LadderProtocol``, a name in ``PROTOCOLS`` (default ``"default"``), or
            a ``gridplan.core.protocols.Protocol`` (its closed loop and windows, default sizes).
        levels: levels to measure (``gridplan.evaluation.schema.LEVELS``); default every level that
            applies (``uncertainty`` only for models exposing it).
        device: where everything runs.
        model_info: description stored in the report (default: the model's type name).
        progress: show progress bars of the closed loops.

    Returns:
        Report.

    Raises:
        ValueError: on an unknown task, level or protocol, ``depth < 1``, a multi-setting
            model, or a model that breaks its contract (``gridplan.models.plugins.PluginError``,
            naming the method, step and rows).
    """
    task = tasks.get(task)
    if depth is None:
        depth = protocol.depth if isinstance(protocol, Protocol) else CONTROLLED.depth
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    protocol = get_protocol(protocol)
    device = torch.device(device)
    if getattr(model, "n_settings", 1) != 1:
        raise ValueError("evaluate takes a single-setting model (n_settings == 1)")
    name = (model_info or {}).get("name", type(model).__name__)
    model = checked(model, name)
    check_contract(model, task, device, name)
    levels = check_levels(levels, model)
    stream = _Streams(protocol.seed, device)
    report = Report(
        model=dict(model_info or {"name": name}),
        task=task.name,
        depth=depth,
        device=str(device),
        levels=levels,
        protocol=protocol.to_dict(),
    )
    if has_reward(model):
        report.notes.append(
            "the model predicts its own reward: the planner, the probe and the ladder's "
            "imagined rollouts score its reward (predict_reward), not the true reward of its "
            "predicted states; termination is still read from the predicted states"
        )
    clock = {"t": time.perf_counter()}

    def lap(level: str) -> None:
        now = time.perf_counter()
        report.timing[level] = report.timing.get(level, 0.0) + now - clock["t"]
        clock["t"] = now

    need_q = {"L4", "L5", "probe", "uncertainty"} & set(levels)
    windows = None
    if "L1" in levels or need_q:
        windows = eval_windows(protocol.n_windows, protocol.horizon, task=task, device=device)
    if "L1" in levels:
        report.prediction = prediction_metrics(model, windows, task)[0].to_dict()
        lap("L1")

    seeds = list(protocol.seeds)
    oracle_loop = None
    if need_q or "L7" in levels:
        oracle_loop = closed_loop_evaluate(
            OracleModel(),
            task,
            depth,
            seeds,
            protocol.episodes,
            device,
            record=True,
            progress=progress,
        )
    q = None
    if need_q:
        q = branch_set(windows, oracle_loop, protocol.branch_states, stream("branch"))
    lap("branch set")

    decisions = None
    if {"L4", "probe"} & set(levels):
        decisions = decide(
            model, q.states, task, depth, stream("decide"), keep_scores="probe" in levels
        )
    rollouts = None
    if {"L4", "uncertainty"} & set(levels):
        actions = torch.randint(
            0, 4, (len(q), protocol.horizon), generator=stream("actions"), device=device
        )
        score = uncertainty_fn(model, task) if "uncertainty" in levels else None
        pred, u = imagined_rollout(model, q.states, actions, stream("model"), score)
        true = true_rollout(q.states, actions, task, stream("env"))
        rollouts = (pred, true, u)
    branches = None
    if {"L4", "L5"} & set(levels):
        branches = branch_predictions(model, q.states, task, stream("model"), stream("env"))
    if "L4" in levels:
        n_b = q.n_behaviour
        teacher, _ = imagined_rollout(model, q.states[:n_b], q.logged_actions, stream("model"))
        fid = interventional_fidelity(
            rollouts[0], rollouts[1], q.behaviour, teacher, q.logged_targets, branches, task
        )
        quality = decision_quality(decisions)
        report.ladder["L4"] = {
            **quality.to_dict(),
            **fid.to_dict(),
            "n_states": len(q),
            "n_behaviour": n_b,
        }
        report.per_state["decision_regret"] = decisions.regret.double().cpu().numpy()
        report.per_state["decision_optimal"] = decisions.optimal.double().cpu().numpy()
        lap("L4")

    if {"L5", "L6"} & set(levels):
        anchors = AnchorSet(get_anchors(tuple(protocol.anchors)), task, device)
        starts = start_states([protocol.anchor_seed], protocol.anchor_starts, task, device)
        runs = run_anchor_policies(
            model,
            anchors,
            starts,
            protocol.anchor_rollouts,
            task,
            1_000 * protocol.seed + STREAMS["anchors"],
            stream("anchor_model"),
        )
        if "L5" in levels:
            report.ladder["L5"] = outcome_fidelity(
                runs, branches, protocol.n_resamples, protocol.seed
            ).to_dict()
            report.ladder["L5"]["n_starts"] = protocol.anchor_starts
            report.ladder["L5"]["rollouts"] = protocol.anchor_rollouts
            lap("L5")
        if "L6" in levels:
            j_true, j_model = runs.values()
            report.ladder["L6"] = policy_ranking(
                anchors.names, j_true, j_model, protocol.n_resamples, protocol.seed
            ).to_dict()
            lap("L6")

    if "L7" in levels:
        results = closed_loop_evaluate(
            model,
            task,
            depth,
            seeds,
            protocol.episodes,
            device,
            record=True,
            progress=progress,
        )
        summary = summarize_episodes(results, n_seeds=len(seeds))[0]
        report.closed_loop = {
            "seeds": seeds,
            "episodes": protocol.episodes,
            "success": {
                "mean": summary.success,
                "se": summary.success_se,
                "n": summary.n_episodes,
            },
            "outcomes": summary.outcomes,
            "mean_steps": float(results.steps.float().mean()),
        }
        report.episode_success = _success_matrix(results, protocol)
        oracle_success = _success_matrix(oracle_loop, protocol)
        random_runs = run_anchor_policies(
            None,
            AnchorSet(get_anchors(("uniform_random",)), task, device),
            start_states(seeds, protocol.episodes, task, device),
            1,
            task,
            1_000 * protocol.seed + STREAMS["random_policy"],
            stream("random_policy"),
        )
        random_success = (
            random_runs.true_success.view(len(seeds), protocol.episodes).double().cpu().numpy()
        )
        deployed = sample_rows(decision_states(results), protocol.xgap_states, stream("xgap"))
        xgap = exploitability(
            decide(model, deployed, task, depth, stream("xgap")), protocol.xgap_threshold
        )
        s = report.episode_success
        report.ladder["L7"] = {
            "success": Estimate.of(s, RATE).to_dict(),
            "success_oracle": Estimate.of(oracle_success, RATE).to_dict(),
            "success_random": Estimate.of(random_success, RATE).to_dict(),
            "policy_gain": _difference(s, random_success, protocol, protocol.seed),
            "optimality_regret": _difference(oracle_success, s, protocol, protocol.seed),
            **xgap.to_dict(),
            "n_xgap_states": len(deployed),
        }
        lap("L7")

    if "probe" in levels:
        rows = sample_rows(
            torch.arange(len(q), device=device), protocol.probe_questions, stream("probe")
        )
        questions = build_questions(decisions.true_scores[rows], depth, stream("probe"))
        report.ladder["probe"] = answer(questions, decisions.model_scores[rows]).to_dict()
        lap("probe")

    if "uncertainty" in levels:
        per_row_error = relevant_sq_error(rollouts[0], rollouts[1], task).mean(dim=1)
        report.ladder["uncertainty"] = uncertainty_quality(
            rollout_uncertainty(rollouts[2]).cpu().numpy(),
            per_row_error.double().cpu().numpy(),
            uncertainty_source(model),
            protocol.n_resamples,
            protocol.seed,
        ).to_dict()
        lap("uncertainty")
    clamped = getattr(model, "clamped", 0)
    if clamped:
        report.notes.append(
            f"{clamped} predicted values outside [0, 1] were clamped into it; the next "
            "imagined steps started from the clamped states"
        )
    return report
