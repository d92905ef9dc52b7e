"""``gridplan.evaluate``: every level of the decision-centric ladder for one world model, and
the paper's report, measured by the same level functions.

``evaluate(model, spec) -> Report`` measures, under one ``EvalSpec``
(``gridplan.evaluation.spec``) and on the same seeds for
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
levels ``L1`` and ``success`` (``gridplan.evaluation.spec.PAPER_LEVELS``) in the layout of
``gridplan.evaluation.schema.Report.paper_dict``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from gridplan.evaluation.common import has_reward
from gridplan.evaluation.latent_eval import planning_note, prepare_latent
from gridplan.evaluation.levels import LevelContext, measure
from gridplan.evaluation.planner_choice import PlannerChoice
from gridplan.evaluation.schema import LEVELS, Report
from gridplan.evaluation.spec import (
    CONTROLLED,
    PAPER_LEVELS,
    EvalSpec,
    fitted_to,
    resolve_spec,
)
from gridplan.evaluation.uncertainty import uncertainty_source
from gridplan.models.capabilities import capabilities_of
from gridplan.models.plugins import CheckedModel, admit
from gridplan.planning.learned_value import LearnedValue
from gridplan.planning.planner import Planner
from gridplan.util.progress import Progress, as_progress


def every_level(model) -> tuple[str, ...]:
    """Every level of ``LEVELS`` that applies to ``model`` (``uncertainty`` only if it
    exposes uncertainty); every world defines every level."""
    return tuple(lv for lv in LEVELS if lv != "uncertainty" or uncertainty_source(model))


def check_levels(levels: Sequence[str] | None, model=None) -> tuple[str, ...]:
    """The levels to measure, in ``LEVELS`` order (and ``"success"``, the closed loop without
    the rest of L7, last). ``None``: every level, ``uncertainty`` only if ``model`` exposes
    uncertainty.

    Raises:
        ValueError: on an unknown level, or ``uncertainty`` for a model without it.
    """
    if levels is None:
        return every_level(model)
    unknown = [lv for lv in levels if lv not in LEVELS and lv != "success"]
    if unknown:
        raise ValueError(f"unknown levels {unknown}; valid: {', '.join(LEVELS)}, success")
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
    spec: EvalSpec,
    levels: tuple[str, ...],
    device: torch.device,
    model_info: dict | None,
    progress: bool | Progress,
    learned_value: LearnedValue | None,
) -> Report:
    """The report of ``levels`` of the model under ``spec``
    (``gridplan.evaluation.levels.measure``), with the notes on the model's own reward and on
    clamped predictions. The model crosses ``gridplan.models.plugins.admit`` here, once; the
    levels read its ``Capabilities``."""
    offers = capabilities_of(model)
    if offers.n_settings != 1:
        raise ValueError("evaluate takes a single-setting model (n_settings == 1)")
    task = spec.resolved_task()
    name = (model_info or {}).get("name", type(model).__name__)
    if offers.history_only:
        # Admitted, a history model is the latent model of its flattened state.
        model = admit(model, task, device, name)
        offers = capabilities_of(model)
    latent = None
    if offers.latent_only:
        # A latent model: measured with the frozen-decoder protocol, then every level runs
        # on its decoded states (gridplan.evaluation.latent_eval).
        heads = spec.planner.leaf_score == "heads"
        measured = prepare_latent(model, task, device, heads=heads)
        model, latent = measured.model, measured.report
    elif spec.planner.leaf_score != "decoder":
        raise ValueError(
            f"leaf_score {spec.planner.leaf_score!r} scores a latent model's leaves with its own "
            f"heads; {name} is a state model, whose leaves are scored with the true reward and "
            "V* (drop --leaf-score)"
        )
    model = admit(model, task, device, name)
    ties, tree = spec.planner.ties, spec.planner.tree_for(model)
    # Building a planner checks the depth against its memory budget before any level runs.
    Planner(model, spec.depth, task, device=device, ties=ties, tree=tree)
    planner = None
    if not spec.planner.is_search:
        planner = PlannerChoice.of(spec.planner, spec.depth, learned_value)
        planner.build(model, task, spec.depth, device)
    report = Report(
        model=dict(model_info or {"name": name}),
        task=task.name,
        depth=spec.depth,
        device=str(device),
        levels=levels,
        protocol=spec.to_dict(),
        spec_hash=spec.content_hash(),
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
    ctx = LevelContext(model, task, spec, device, levels, report, as_progress(progress), planner)
    if isinstance(model, CheckedModel):
        _measure_clamped(ctx)
    else:
        measure(ctx)
    return report


def _measure_clamped(ctx: LevelContext) -> None:
    """``measure(ctx)`` of a plug-in, with the note on the predictions it clamped."""
    model, report = ctx.model, ctx.report
    clamped_before, predicted_before = model.clamped, model.predicted
    measure(ctx)
    clamped = model.clamped - clamped_before
    predicted = model.predicted - predicted_before
    if clamped:
        fraction = clamped / max(predicted, 1)
        report.clamped = {"values": clamped, "of": predicted, "fraction": fraction}
        report.notes.append(
            f"{fraction:.2%} of the predicted values ({clamped:,} of {predicted:,}) were "
            "outside [0, 1] and clamped into it; the next imagined steps started from the "
            "clamped states"
        )


def evaluate(
    model,
    spec: EvalSpec | str | Path | None = None,
    *,
    device: torch.device | str = "cpu",
    model_info: dict | None = None,
    progress: bool | Progress = False,
    learned_value: LearnedValue | None = None,
    **changes,
) -> Report:
    """Evaluate one world model for decisions under one spec.

    Args:
        model: any object with ``predict(state, action, generator)`` (``gridplan.models.plugins``
            describes the contract and the optional methods); built-in models run as they
            are, any other model behind ``gridplan.models.plugins.CheckedModel``.
        spec: the ``EvalSpec`` (``gridplan.evaluation.spec``): task, world, planner (tie rule,
            tree, settings), depth, closed loop, windows, ladder sizes and levels; or the name
            of a protocol or track file (``"controlled"``, ``"learned"``, ``"quick-a"``) or a
            path to a spec file. Default: ``controlled`` (paper §5.1) with every level that
            applies.
        device: where everything runs.
        model_info: description stored in the report (default: the model's type name).
        progress: True shows each level's stage and closed loops (labelled bars in a
            terminal, lines when piped; ``gridplan.util.progress.Progress``), or a
            ``Progress`` to report into (e.g. one with a model prefix).
        learned_value: the fitted value of a planner that needs one (``search-learned-v``,
            ``value=learned``; ``gridplan.evaluation.planner_choice.fit_learned_value``).
        **changes: spec fields to change (``EvalSpec.replace``), e.g. ``task="B"``,
            ``levels=["L7"]``, ``planner={"ties": "random"}``.

    Returns:
        Report; its ``protocol`` is the spec, whole, and ``spec_hash`` its content hash.

    Raises:
        ValueError: on an unknown spec, spec key, task, level or tie rule, a multi-setting
            model, a depth whose search does not fit the planner's memory budget, a model of
            another world than the spec's, or a model that breaks its contract
            (``gridplan.models.plugins.PluginError``, naming the method, step and rows).
    """
    spec = resolve_spec(spec)
    every = spec.levels is None and changes.get("levels") is None
    spec = spec.replace(**changes) if changes else spec
    spec = fitted_to(spec, model)
    if every:
        spec = spec.replace(levels=every_level(model))
    return _measure(
        model,
        spec,
        check_levels(spec.levels, model),
        torch.device(device),
        model_info,
        progress,
        learned_value,
    )


def paper_report(
    model,
    model_info: dict,
    spec: EvalSpec = CONTROLLED,
    device: str | torch.device = "cpu",
    progress: bool | Progress = True,
    learned_value: LearnedValue | None = None,
) -> dict:
    """Prediction-error metrics (paper §4) and closed-loop success (paper §3) of one model:
    the levels ``L1`` and ``success`` under ``spec`` (its other levels are ignored).

    Args:
        model: a single-setting world model (checked as by ``evaluate``).
        model_info: description stored under ``"model"`` (name, sigmas, checkpoint, ...).
        spec: task, world, planner, depth, closed loop and held-out windows.
        device: torch device for everything.
        progress: as for ``evaluate``.
        learned_value: as for ``evaluate``.

    Returns:
        ``Report.paper_dict()`` (JSON-serializable).

    Raises:
        ValueError: as ``evaluate``.
    """
    report = evaluate(
        model,
        spec,
        device=device,
        model_info=model_info,
        progress=progress,
        learned_value=learned_value,
        levels=PAPER_LEVELS,
    )
    return report.paper_dict()
