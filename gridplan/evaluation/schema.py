"""The evaluation report of one model: a dataclass, its versioned JSON form and its scalars.

``Report.to_dict()`` is what ``python -m eval --json`` writes with ladder options
(``Report.paper_dict()``, the paper's measurements alone, without them). Its top level keeps
the keys of the paper's measurements that scripts already read (``success {mean, se, n}``,
``outcomes``, ``mean_steps``, ``seeds``, ``episodes``, ``E_tot``, ``DRPE``, ``profile``,
``step_profile``, ``event_audit``, ``VPE``, ``horizon``, ``n_windows``, ``model``, ``task``,
``depth``, ``device``) and adds:

- ``schema_version``: ``SCHEMA_VERSION``; readers reject other major versions;
- ``levels``: the levels measured, in ``LEVELS`` order;
- ``protocol``: the evaluation spec, whole (``gridplan.evaluation.spec.EvalSpec.to_dict``:
  task, world, planner, depth, seeds, sizes, thresholds, levels) and ``spec_hash``, its content
  hash (``EvalSpec.content_hash``); both are in the paper's report too (as ``spec``,
  ``spec_hash``);
- ``ladder``: level -> numbers, ``L4``, ``L5``, ``L6``, ``L7``, ``probe``, ``uncertainty``
  (each present only if measured). A mean is ``{"mean", "se", "low", "high", "n"}`` with a 95%
  interval; the README section "Evaluate your own model" defines every number;
- ``profile_ci``: ``{dim: [low, high]}``, 95% bootstrap intervals of ``profile`` over the
  held-out windows; ``oracle_floor``: ``{"E_tot", "DRPE"}`` of the oracle on the same windows
  (not 0: the distractors are stochastic), both with L1;
- ``clamped``: ``{"values", "of", "fraction"}`` of a plug-in's predictions clamped into
  ``[0, 1]`` (only when some were);
- ``notes``: plain-language caveats (e.g. the model's own reward was used);
- ``timing``: seconds per level;
- ``ties``: the planner's tie rule (``"first"`` or ``"random"``,
  ``gridplan.planning.planner.TIES``), also in the paper's report; a report without it was
  measured under ``"random"``, the rule before it was recorded.
- ``E_repr``, ``E_pred``, ``E_excess`` (a latent model only: the frozen-decoder protocol's
  numbers, ``gridplan.metrics.frozen_decoder``) and ``latent``: the protocol's full result
  (``gridplan.evaluation.latent_eval.prepare_latent``), in both layouts.

Schema history: 1 (no ``schema_version`` key, ``Report.paper_dict``) holds only the paper's
measurements; 2 adds the keys above; 2.1 records the whole spec under ``protocol`` and its
``spec_hash``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gridplan.core import tasks
from gridplan.core.world import recorded
from gridplan.util.jsonio import dumps, to_jsonable

#: Version of the JSON layout, ``"<major>.<minor>"``; a major change breaks readers.
SCHEMA_VERSION = "2.1"
#: A latent model's headline numbers of the frozen-decoder protocol.
LATENT_HEADLINE = ("E_repr", "E_pred", "E_excess")
#: Every level, in report order. L1: the paper's prediction-error metrics; L7 includes the
#: closed-loop success of the paper's planner.
LEVELS = ("L1", "L4", "L5", "L6", "L7", "probe", "uncertainty")
#: L1 keys of the ladder's report that the paper's report (schema 1) leaves out: the profile's
#: bootstrap intervals and the oracle's floor on the same windows.
LADDER_ONLY_L1 = ("profile_ci", "oracle_floor")
LEVEL_TITLES = {
    "L1": "logged-future prediction",
    "L4": "interventional fidelity",
    "L5": "outcome fidelity",
    "L6": "policy ranking",
    "L7": "planning utility",
    "probe": "WorldModelGym probe",
    "uncertainty": "uncertainty",
}


def check_schema(data: dict) -> dict:
    """Return ``data`` if it is a report of this schema's major version.

    Raises:
        ValueError: if ``schema_version`` is missing or of another major version.
    """
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, str) or version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise ValueError(
            f"not a gridplan report of schema {SCHEMA_VERSION.split('.')[0]}.x "
            f"(schema_version {version!r}); re-run python -m eval to rebuild it"
        )
    return data


@dataclass
class Report:
    """Everything measured for one model under one protocol.

    Attributes:
        model: description of the model (name, settings, checkpoint or import path, ...).
        task: task name.
        depth: planner depth ``D``.
        device: torch device the evaluation ran on.
        levels: the levels measured.
        protocol: the evaluation spec, whole (``EvalSpec.to_dict``).
        prediction: the L1 metrics (``gridplan.metrics.prediction.PredictionMetrics.to_dict``) or
            None.
        closed_loop: ``seeds``, ``episodes``, ``success``, ``outcomes``, ``mean_steps``, or
            None when L7 was not measured.
        ladder: level -> numbers.
        notes: caveats in plain language.
        timing: seconds per level.
        episode_success: ``(S, E)`` per-episode success (evaluation seed x episode), kept for
            paired comparisons; not serialized.
        per_state: per-state arrays (``decision_regret``, ``decision_optimal`` over the branch
            set) for paired comparisons; not serialized.
        per_window: per-window arrays of L1 (``E_tot``, ``DRPE_<weighting>`` over the
            held-out windows) for paired comparisons; not serialized.
        clamped: ``{"values", "of", "fraction"}``: predicted values clamped into ``[0, 1]``
            out of all predicted values, or None if nothing was clamped.
        world: the task's world (``gridplan.core.world.World.spec``); a report without one
            (written before worlds) is the default world's.
        ties: the tie rule of the evaluation's planners (``"first"``, ``"random"``), or None
            where not known.
        planner: the planner measured (``PlannerChoice.to_dict``: ``name``, ``settings``,
            ``learned_value``), or None for the paper's full-width search with exact V*
            when no planner was chosen.
        latent: a latent model's frozen-decoder protocol result
            (``gridplan.evaluation.latent_eval.LatentMeasurement.report``), or None.
        spec_hash: the spec's content hash (``EvalSpec.content_hash``).
    """

    model: dict
    task: str
    depth: int
    device: str
    levels: tuple[str, ...]
    protocol: dict
    prediction: dict | None = None
    closed_loop: dict | None = None
    ladder: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timing: dict[str, float] = field(default_factory=dict)
    episode_success: np.ndarray | None = None
    per_state: dict[str, np.ndarray] = field(default_factory=dict)
    per_window: dict[str, np.ndarray] = field(default_factory=dict)
    clamped: dict | None = None
    world: dict | None = None
    ties: str | None = None
    planner: dict | None = None
    latent: dict | None = None
    spec_hash: str | None = None

    def latent_dict(self) -> dict:
        """``E_repr``, ``E_pred``, ``E_excess`` (frozen decoder), ``latent_floor`` (the same
        three of the perfect latent model, where measured) and ``latent``, or ``{}``."""
        if self.latent is None:
            return {}
        frozen, floor = self.latent["frozen"], self.latent.get("floor")
        headline = {k: frozen[k] for k in LATENT_HEADLINE}
        if floor is not None:
            headline["latent_floor"] = {k: floor[k] for k in LATENT_HEADLINE}
        return {**headline, "latent": self.latent}

    def to_dict(self) -> dict:
        """The JSON form (module docstring)."""
        out = {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "task": self.task,
            **({} if self.world is None else {"world": self.world}),
            "depth": self.depth,
            "device": self.device,
            "levels": list(self.levels),
            "protocol": self.protocol,
            "spec_hash": self.spec_hash,
            **({} if self.ties is None else {"ties": self.ties}),
            **({} if self.planner is None else {"planner": self.planner}),
        }
        if self.closed_loop is not None:
            out.update(self.closed_loop)
        if self.prediction is not None:
            out.update(self.prediction)
        out.update(self.latent_dict())
        out["ladder"] = self.ladder
        if self.clamped is not None:
            out["clamped"] = self.clamped
        out["notes"] = list(self.notes)
        out["timing"] = {k: round(v, 4) for k, v in self.timing.items()}
        return to_jsonable(out)

    def paper_dict(self) -> dict:
        """The paper's report (schema 1, no ``schema_version``): ``model``, ``task``,
        ``depth``, ``seeds``, ``episodes``, ``success {mean, se, n}``, ``outcomes``,
        ``mean_steps``, ``device``, then the L1 metrics (``E_tot``, ``DRPE``, ``profile``,
        ``step_profile``, ``event_audit``, ``VPE``, ``horizon``, ``n_windows``), then ``ties``,
        ``spec`` (the evaluation spec, whole) and ``spec_hash``.

        Raises:
            ValueError: if the L1 metrics or the closed-loop success were not measured.
        """
        if self.prediction is None or self.closed_loop is None:
            raise ValueError(
                "the paper's report needs the L1 metrics and the closed-loop success "
                f"(measured: {', '.join(self.levels) or 'nothing'})"
            )
        return {
            "model": self.model,
            "task": self.task,
            **({} if self.world is None else {"world": self.world}),
            "depth": self.depth,
            **({} if self.planner is None else {"planner": self.planner}),
            **self.closed_loop,
            "device": self.device,
            **{k: v for k, v in self.prediction.items() if k not in LADDER_ONLY_L1},
            **({} if self.ties is None else {"ties": self.ties}),
            **to_jsonable(self.latent_dict()),
            "spec": self.protocol,
            "spec_hash": self.spec_hash,
        }


def _walk(prefix: str, value, out: dict[str, float]) -> None:
    if isinstance(value, dict):
        if "mean" in value and "n" in value:
            if value["mean"] is not None:
                out[prefix] = float(value["mean"])
            return
        for k, v in value.items():
            _walk(f"{prefix}/{k}", v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            out[prefix] = float(value)


def ladder_scalars(report: dict, prefix: str = "eval") -> dict[str, float]:
    """Flat TensorBoard scalars of a report's ladder: ``<prefix>/ladder/<level>/<metric>``.

    A mean contributes its value; nested groups extend the tag
    (``eval/ladder/L5/value_error_per_policy/greedy``); lists (the risk-coverage curve, the
    anchors' values) and counts of units are left out, except
    ``eval/ladder/L6/J_true/<anchor>`` and ``.../J_model/<anchor>``.
    """
    out: dict[str, float] = {}
    for level, numbers in report.get("ladder", {}).items():
        for key, value in numbers.items():
            if isinstance(value, list):
                continue
            _walk(f"{prefix}/ladder/{level}/{key}", value, out)
        for anchor in numbers.get("anchors", []) if isinstance(numbers, dict) else []:
            for key in ("J_true", "J_model"):
                out[f"{prefix}/ladder/{level}/{key}/{anchor['name']}"] = float(anchor[key])
    return out


def log_ladder(log_dir: str | Path, report: dict, step: int = 0, prefix: str = "eval") -> int:
    """Write ``ladder_scalars(report, prefix)`` into TensorBoard, in a new event file of
    ``log_dir`` (earlier event files are kept). Returns the number of scalars written."""
    from torch.utils.tensorboard import SummaryWriter

    scalars = ladder_scalars(report, prefix)
    writer = SummaryWriter(log_dir=str(log_dir))
    try:
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, step)
    finally:
        writer.close()
    return len(scalars)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` through a temporary file in the same folder, then rename it into place,
    so a reader never sees a half-written file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_report(data: dict, path: str | Path, overwrite: bool = False) -> Path:
    """Write a report dict as JSON; never replaces an existing file unless ``overwrite``.

    Raises:
        FileExistsError: if ``path`` exists and ``overwrite`` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, dumps(data, indent=2) + "\n")
    return path


def report_task(report: dict) -> tasks.Task:
    """The task a report was measured on: its ``task`` on its ``world`` (a report without
    ``world`` is the default world's).

    Raises:
        ValueError: on an unknown task or a malformed world.
    """
    return tasks.get(report["task"], world=recorded(report, "the report"))


def memory_clause(report: dict) -> str:
    """``"; <memory>"`` of a latent report whose model plans from more than the current
    observation (``gridplan.models.episode_memory.memory_words``), else ``""``."""
    memory = report.get("memory")
    return f"; {memory}" if memory else ""
