"""``gridplan.evaluate``: every level of the decision-centric ladder for one world model, and
the paper's report, measured by the same level functions.

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

Each level is one function of ``gridplan.evaluation.levels`` (``REGISTRY``); which random
stream feeds what is fixed per component (``gridplan.evaluation.levels.STREAMS``), so leaving a
level out never changes another level's numbers.

``paper_report`` is what ``python -m eval`` prints and writes without ladder options: the
levels ``L1`` and ``success`` (``gridplan.evaluation.levels.PAPER_LEVELS``) in the layout of
``gridplan.evaluation.schema.Report.paper_dict``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gridplan.core import tasks
from gridplan.core.protocols import CONTROLLED, Protocol
from gridplan.core.tasks import TASK_A, Task
from gridplan.evaluation.common import has_reward
from gridplan.evaluation.ladder_protocol import LadderProtocol, get_protocol
from gridplan.evaluation.latent_eval import planning_note, prepare_latent
from gridplan.evaluation.levels import PAPER_LEVELS, LevelContext, measure
from gridplan.evaluation.planner_choice import PlannerChoice
from gridplan.evaluation.schema import LEVELS, Report
from gridplan.evaluation.uncertainty import uncertainty_source
from gridplan.models.contract import check_model_world
from gridplan.models.latent_contract import is_latent_model
from gridplan.models.plugins import check_contract, checked
from gridplan.planning.planner import Planner, resolve_ties
from gridplan.util.progress import Progress, as_progress


def check_levels(levels: Sequence[str] | None, model=None) -> tuple[str, ...]:
    """The levels to measure, in ``LEVELS`` order (and ``"success"``, the closed loop without
    the rest of L7, last). ``None``: every level, ``uncertainty`` only if ``model`` exposes
    uncertainty.

    Raises:
        ValueError: on an unknown level, or ``uncertainty`` for a model without it.
    """
    if levels is None:
        wanted = [lv for lv in LEVELS if lv != "uncertainty" or uncertainty_source(model)]
        return tuple(wanted)
    unknown = [lv for lv in levels if lv not in LEVELS and lv != "success"]
    if unknown:
        raise ValueError(f"unknown levels {unknown}; valid: {', '.join(LEVELS)}")
    if "uncertainty" in levels and model is not None and uncertainty_source(model) is None:
        raise ValueError(
            "level 'uncertainty' needs a model with uncertainty(state, action) or "
            "predict_members(state, action) (K >= 2 members)"
        )
    # "success" (the closed loop alone, which L7 includes) is kept for the comparisons,
    # which report it beside any level asked for.
    wanted = tuple(lv for lv in LEVELS if lv in levels)
    return wanted + (("success",) if "success" in levels and "L7" not in levels else ())


def _measure(
    model,
    task: Task,
    depth: int,
    protocol: LadderProtocol,
    levels: tuple[str, ...],
    device: torch.device,
    model_info: dict | None,
    progress: bool | Progress,
    ties: str | None = None,
    planner: PlannerChoice | None = None,
) -> Report:
    """The report of ``levels`` of the checked model (``gridplan.evaluation.levels.measure``),
    with the notes on the model's own reward and on clamped predictions; ``ties`` is resolved
    against the model's reading before the model is wrapped."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    if getattr(model, "n_settings", 1) != 1:
        raise ValueError("evaluate takes a single-setting model (n_settings == 1)")
    ties = resolve_ties(model, ties)
    name = (model_info or {}).get("name", type(model).__name__)
    check_model_world(model, task.world)
    latent = None
    if is_latent_model(model) and not callable(getattr(model, "predict", None)):
        # A latent model: measured with the frozen-decoder protocol, then every level runs
        # on its decoded states (gridplan.evaluation.latent_eval).
        measured = prepare_latent(model, task, device)
        model, latent = measured.model, measured.report
    model = checked(model, name)
    check_contract(model, task, device, name)
    # Building a planner checks the depth against its memory budget before any level runs.
    Planner(model, depth, task, device=device, ties=ties)
    if planner is not None:
        planner.build(model, task, depth, device, ties)
    report = Report(
        model=dict(model_info or {"name": name}),
        task=task.name,
        depth=depth,
        device=str(device),
        levels=levels,
        protocol=protocol.to_dict(),
        world=task.world.spec(),
        ties=ties,
        planner=None if planner is None else planner.to_dict(),
        latent=latent,
    )
    if latent is not None:
        report.notes.append(planning_note(latent))
    if has_reward(model):
        report.notes.append(
            "the model predicts its own reward: the planner, the probe and the ladder's "
            "imagined rollouts score its reward (predict_reward), not the true reward of its "
            "predicted states; termination is still read from the predicted states"
        )
    clamped_before = getattr(model, "clamped", 0)
    predicted_before = getattr(model, "predicted", 0)
    ctx = LevelContext(
        model,
        task,
        depth,
        protocol,
        device,
        levels,
        report,
        as_progress(progress),
        ties,
        planner,
    )
    measure(ctx)
    clamped = getattr(model, "clamped", 0) - clamped_before
    predicted = getattr(model, "predicted", 0) - predicted_before
    if clamped:
        fraction = clamped / max(predicted, 1)
        report.clamped = {"values": clamped, "of": predicted, "fraction": fraction}
        report.notes.append(
            f"{fraction:.2%} of the predicted values ({clamped:,} of {predicted:,}) were "
            "outside [0, 1] and clamped into it; the next imagined steps started from the "
            "clamped states"
        )
    return report


def evaluate(
    model,
    task: str | Task = "A",
    depth: int | None = None,
    protocol: str | LadderProtocol | Protocol | None = None,
    levels: Sequence[str] | None = None,
    device: torch.device | str = "cpu",
    model_info: dict | None = None,
    progress: bool | Progress = False,
    ties: str | None = None,
    planner: PlannerChoice | None = None,
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
        progress: True shows each level's stage and closed loops (labelled bars in a
            terminal, lines when piped; ``gridplan.util.progress.Progress``), or a
            ``Progress`` to report into (e.g. one with a model prefix).
        ties: the planner's tie rule, ``"first"`` or ``"random"``; None: the model's
            reading's (``gridplan.planning.planner.resolve_ties``). The report records it.
        planner: the planner to measure with (``gridplan.evaluation.planner_choice``;
            default: the paper's full-width search, unrecorded). Its closed loops, L4
            decisions and XGap are that planner's (``gridplan.evaluation.levels``).

    Returns:
        Report.

    Raises:
        ValueError: on an unknown task, level, protocol or tie rule, ``depth < 1``, a multi-setting
            model, a depth whose search does not fit the planner's memory budget, or a model
            that breaks its contract (``gridplan.models.plugins.PluginError``, naming the
            method, step and rows).
    """
    task = tasks.get(task)
    if depth is None:
        depth = protocol.depth if isinstance(protocol, Protocol) else CONTROLLED.depth
    return _measure(
        model,
        task,
        depth,
        get_protocol(protocol),
        check_levels(levels, model),
        torch.device(device),
        model_info,
        progress,
        ties,
        planner,
    )


def paper_report(
    model,
    model_info: dict,
    task: Task = TASK_A,
    protocol: Protocol = CONTROLLED,
    device: str | torch.device = "cpu",
    progress: bool | Progress = True,
    ties: str | None = None,
    planner: PlannerChoice | None = None,
) -> dict:
    """Prediction-error metrics (paper §4) and closed-loop success (paper §3) of one model:
    the levels ``L1`` and ``success`` under ``protocol``'s depth, closed loop and windows.

    Args:
        model: a single-setting world model (checked as by ``evaluate``).
        model_info: description stored under ``"model"`` (name, sigmas, checkpoint, ...).
        task: the task (the report stores its name).
        protocol: planner depth, seeds x episodes and held-out windows
            (``gridplan.core.protocols``).
        device: torch device for everything.
        progress: as for ``evaluate``.
        ties: as for ``evaluate`` (recorded as the report's ``ties``).
        planner: as for ``evaluate``.

    Returns:
        ``Report.paper_dict()`` (JSON-serializable).

    Raises:
        ValueError: as ``evaluate``.
    """
    report = _measure(
        model,
        tasks.get(task),
        protocol.depth,
        LadderProtocol.of(protocol),
        PAPER_LEVELS,
        torch.device(device),
        model_info,
        progress,
        ties,
        planner,
    )
    return report.paper_dict()
