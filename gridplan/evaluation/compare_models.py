"""Any number of world models compared against a baseline under one protocol.

``compare_models(arms, names)`` evaluates every arm (a model, or several models: one per
training seed) under the same task, depth and ``EvalSpec``, so every model meets the same
start states, held-out windows, branch states and random streams (common random numbers).
The first arm is the baseline. For every metric the table holds each arm's value (the mean over
its models) and, for every other arm, the difference ``arm - baseline`` with a 95% paired
hierarchical bootstrap interval (``gridplan.metrics.bootstrap``) over the units the metric is
measured on:

- closed-loop success: training seed -> evaluation seed -> episode;
- ``E_tot`` and ``DRPE`` (binary, graded, and task where it differs): training seed -> held-out
  window (the per-window ``H``-step errors of ``report.per_window``);
- L4 decision agreement and regret: training seed -> branch state;
- every other ladder number (L4-L7, probe, uncertainty; ``HEADLINE``) and VPE, the event
  error: side by side, the difference without an interval (the level reports no per-unit
  values to pair);
- a latent model's frozen-decoder numbers ``E_repr``, ``E_pred``, ``E_excess`` (level
  ``latent``, ``gridplan.metrics.frozen_decoder``): side by side in the same way, the rows
  present when at least one arm is latent (a state model's cell reads n/a). Every latent
  model of a world is measured on the same protocol data (``gridplan.evaluation.latent_eval``),
  so the difference compares like with like.

An arm of one model paired with arms of ``T`` models counts as the same model at every
training seed (a built-in or plug-in has no training seed); arms of different ``T > 1`` are an
error. With three or fewer units at the top level that varies an interval is flagged as
indicative only.

``ModelComparison`` is written as JSON (``to_dict``, schema ``COMPARE_SCHEMA``,
``docs/schema/compare.schema.json``); the text (``comparison_lines``) and Markdown
(``comparison_markdown``) are renderings of that JSON form by one table (``comparison_table``,
a row per recorded row, named by level and metric), so what is printed is what is recorded;
``figure`` draws each metric per model with its 95% interval. Method: the paired hierarchical
bootstrap of the JEPA prediction-vs-planning protocol (arXiv 2610.19375).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from matplotlib.figure import Figure

from gridplan.evaluation.common import Estimate
from gridplan.evaluation.compare import HEADLINE
from gridplan.evaluation.schema import Report
from gridplan.evaluation.tabular import Table, number
from gridplan.metrics.bootstrap import paired_hierarchical_bootstrap
from gridplan.util.progress import Progress

#: Version of the comparison's JSON layout (``docs/schema/compare.schema.json``).
COMPARE_SCHEMA = "1.0"


@dataclass(frozen=True)
class Metric:
    """One row of the comparison.

    Attributes:
        level: ``"L1"``, ``"L4"``, ..., ``"latent"`` (frozen-decoder numbers) or ``"closed loop"``.
        key: the metric's name in the table.
        label: what it is, in words.
        units: where the per-unit values live on a ``Report`` (``"episode_success"``,
            ``"per_window/<key>"``, ``"per_state/<key>"``) and the bootstrap's level names,
            or None for a side-by-side row.
        higher_is_better: the direction in which a difference is an improvement.
    """

    level: str
    key: str
    label: str
    units: tuple[str, tuple[str, ...]] | None
    higher_is_better: bool


_EPISODES = ("training seed", "evaluation seed", "episode")
_WINDOWS = ("training seed", "window")
_W = "per_window/"
_STATES = ("training seed", "branch state")
#: The paired rows, in table order.
PAIRED = (
    Metric("closed loop", "success", "closed-loop success", ("episode_success", _EPISODES), True),
    Metric("L1", "E_tot", "E_tot (all 12 dims)", (_W + "E_tot", _WINDOWS), False),
    Metric("L1", "DRPE_graded", "DRPE, graded weights", (_W + "DRPE_graded", _WINDOWS), False),
    Metric("L1", "DRPE_binary", "DRPE, binary weights", (_W + "DRPE_binary", _WINDOWS), False),
    Metric("L1", "DRPE_task", "DRPE, the task's weights", (_W + "DRPE_task", _WINDOWS), False),
    Metric(
        "L4",
        "decision_agreement",
        "decision agreement",
        ("per_state/decision_optimal", _STATES),
        True,
    ),
    Metric(
        "L4", "decision_regret", "decision regret", ("per_state/decision_regret", _STATES), False
    ),
)
#: Higher-is-better ladder numbers among ``HEADLINE`` (the rest are errors or regrets).
_HIGHER = {"decision_agreement", "spearman", "pra", "success", "policy_gain"}
#: A latent report's frozen-decoder numbers (``Report.latent_dict``), all errors.
_LATENT = (
    ("E_repr", "E_repr, frozen decoder of the actual latent"),
    ("E_pred", "E_pred, frozen decoder of the predicted latent"),
    ("E_excess", "E_excess = E_pred - E_repr"),
)


def _side_by_side() -> tuple[Metric, ...]:
    paired = {(m.level, m.key) for m in PAIRED}
    rows = [
        Metric("L1", "VPE", "value-prediction error VPE", None, False),
        Metric("L1", "event_mse", "event error (flag at pickups and door openings)", None, False),
        *(Metric("latent", key, label, None, False) for key, label in _LATENT),
    ]
    for level, key in HEADLINE:
        # L7's success is the closed loop's, already a paired row.
        if (level, key) in paired or (level, key) == ("L7", "success"):
            continue
        rows.append(Metric(level, key, key.replace("_", " "), None, key in _HIGHER))
    return tuple(rows)


METRICS = PAIRED + _side_by_side()


def _scalar(report: dict, metric: Metric) -> float | None:
    """The metric's headline value in one report dict (None where it was not measured)."""
    if metric.level == "closed loop":
        entry = report.get("success")
    elif metric.key.startswith("DRPE_"):
        entry = report.get("DRPE", {}).get(metric.key.removeprefix("DRPE_"))
    elif metric.key == "event_mse":
        entry = report.get("event_audit", {}).get("event_mse")
    elif metric.level in ("L1", "latent"):
        entry = report.get(metric.key)
    else:
        entry = report.get("ladder", {}).get(metric.level, {}).get(metric.key)
    if isinstance(entry, dict):
        entry = entry.get("mean")
    return None if entry is None else float(entry)


def _units(report: Report, metric: Metric) -> np.ndarray | None:
    if metric.units is None:
        return None
    where = metric.units[0]
    if where == "episode_success":
        return report.episode_success
    table, _, key = where.partition("/")
    return getattr(report, table).get(key)


def _stack(reports: Sequence[Report], metric: Metric, size: int) -> np.ndarray | None:
    """``(T, ...)`` per-unit values of an arm, a one-model arm repeated to ``size``."""
    parts = [_units(r, metric) for r in reports]
    if not parts or any(p is None for p in parts):
        return None
    arr = np.stack([np.asarray(p, dtype=np.float64) for p in parts])
    return np.repeat(arr, size, axis=0) if arr.shape[0] == 1 and size > 1 else arr


def _own_interval(stacked: np.ndarray | None) -> dict | None:
    """Mean and normal 95% interval of an arm's per-unit values (for the figure)."""
    if stacked is None or stacked.size < 2:
        return None
    est = Estimate.of(stacked)
    return {"mean": est.mean, "low": est.low, "high": est.high, "n": est.n}


@dataclass
class ModelComparison:
    """Attributes:
    names: the arms' names (the first is the baseline), unique.
    infos: per arm, the ``model_info`` of each of its models.
    reports: per arm, one ``Report`` per model.
    task, depth, protocol: the one protocol every model was evaluated under.
    levels: the levels measured (closed-loop success and L1 always among them).
    protocol_rule: how the protocol was chosen, in words (printed and recorded).
    rows: one dict per measured metric: ``level``, ``metric``, ``label``,
        ``higher_is_better``, ``paired_over`` (the bootstrap's levels, or None), ``values``
        (name -> mean over the arm's models), ``intervals`` (name -> the arm's own 95%
        interval, or None), ``differences`` (name -> ``{difference, low, high, warning}``
        against the baseline, every arm but the baseline).
    ties: the tie rule every report was measured under (None if they differ).
    """

    names: tuple[str, ...]
    infos: list[list[dict]]
    reports: list[list[Report]]
    task: str
    depth: int
    protocol: dict
    levels: tuple[str, ...]
    protocol_rule: str = ""
    rows: list[dict] = field(default_factory=list)
    ties: str | None = None

    @property
    def baseline(self) -> str:
        return self.names[0]

    def protocol_line(self) -> str:
        """The protocol in one line (``protocol_line``)."""
        return protocol_line({"protocol": self.protocol, "task": self.task, "depth": self.depth})

    def to_dict(self) -> dict:
        """JSON form (schema ``COMPARE_SCHEMA``): the protocol, the table, every report."""
        from gridplan.util.jsonio import to_jsonable

        return to_jsonable(
            {
                "compare_schema_version": COMPARE_SCHEMA,
                "baseline": self.baseline,
                "models": [
                    {"name": n, "models": infos}
                    for n, infos in zip(self.names, self.infos, strict=True)
                ],
                "task": self.task,
                "depth": self.depth,
                **({} if self.ties is None else {"ties": self.ties}),
                "protocol": self.protocol,
                "protocol_rule": self.protocol_rule,
                "levels": list(self.levels),
                "rows": self.rows,
                "reports": {
                    n: [r.to_dict() for r in reps]
                    for n, reps in zip(self.names, self.reports, strict=True)
                },
            }
        )

    def lines(self) -> list[str]:
        """The comparison as text: ``comparison_lines(self.to_dict())``."""
        return comparison_lines(self.to_dict())

    def markdown(self, figure: str | None = None) -> str:
        """The comparison as Markdown: ``comparison_markdown(self.to_dict(), figure)``."""
        return comparison_markdown(self.to_dict(), figure)

    def figure(self) -> Figure:
        """Each paired metric per model (the arm's mean with its own normal 95% interval
        over its units), one panel per metric, the models numbered as in ``lines``, the
        baseline first (grey)."""
        rows = [r for r in self.rows if r["paired_over"] is not None]
        fig = Figure(figsize=(3.2 * max(len(rows), 1), 3.4), layout="constrained")
        axes = fig.subplots(1, max(len(rows), 1), squeeze=False)[0]
        for ax, row in zip(axes, rows, strict=False):
            xs = range(len(self.names))
            means = [row["values"][n] for n in self.names]
            errs = [[0.0] * len(xs), [0.0] * len(xs)]
            for i, n in enumerate(self.names):
                iv = row["intervals"].get(n)
                if iv is not None and means[i] is not None:
                    errs[0][i] = max(means[i] - iv["low"], 0.0)
                    errs[1][i] = max(iv["high"] - means[i], 0.0)
            colors = ["0.45"] + ["tab:blue"] * (len(self.names) - 1)
            heights = [0.0 if m is None else m for m in means]
            ax.bar(xs, heights, yerr=errs, color=colors, capsize=3)
            ax.set_xticks(list(xs), [f"[{i + 1}]" for i in xs], fontsize=8)
            ax.set_title(row["label"], fontsize=9)
        width = 40 * max(len(rows), 1)
        names = "; ".join(f"[{i + 1}] {n}" for i, n in enumerate(self.names))
        fig.supxlabel(textwrap.fill(names + " ([1]: baseline)", width), fontsize=7)
        fig.suptitle(textwrap.fill(self.protocol_line(), width), fontsize=7)
        return fig


def protocol_line(data: dict) -> str:
    """The protocol of a comparison's JSON form (``ModelComparison.to_dict``) in one line:
    task, depth, seeds x episodes, windows, sizes."""
    p = data["protocol"]
    seeds = p["seeds"]
    span = f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else seeds
    return (
        f"task {data['task']}, depth {data['depth']}, seeds {span} ({len(seeds)}) x "
        f"{p['episodes']} episodes, {p['n_windows']} held-out windows of H={p['horizon']}, "
        f"{p['branch_states']} branch states per part, {p['n_resamples']} bootstrap resamples"
    )


def _cells(row: dict, name: str, digits: int = 4) -> tuple[str, str]:
    """A model's value in a row, and its difference from the baseline with its interval
    (``*``: indicative only)."""
    shown = number(row["values"][name], digits)
    diff = row["differences"].get(name)
    if diff is None or diff["difference"] is None:
        return shown, ""
    text = f"{diff['difference']:+.{digits}f}"
    if diff["low"] is not None:
        text += f" [{diff['low']:+.{digits}f}, {diff['high']:+.{digits}f}]"
        if diff.get("indicative"):
            text += "*"
    return shown, text


def comparison_table(data: dict, markdown: bool = False) -> Table:
    """The table of a comparison's JSON form, one row per recorded row (keyed by level and
    metric): the level, the metric (its key in text, its label in Markdown), the baseline's
    value, then each other model's value and its difference from the baseline. Text names
    the models by number (``[i]``, ``d[i]``), Markdown by name."""
    names = [m["name"] for m in data["models"]]
    if markdown:
        header = ["level", "metric", f"{names[0]} (baseline)"]
        header += [h for n in names[1:] for h in (n, f"d({n})")]
    else:
        header = ["level", "metric", "[1]"]
        header += [h for i in range(2, len(names) + 1) for h in (f"[{i}]", f"d[{i}]")]
    body = []
    for row in data["rows"]:
        cells = [row["level"], row["label" if markdown else "metric"], _cells(row, names[0])[0]]
        for name in names[1:]:
            cells += _cells(row, name)
        body.append(tuple(cells))
    return Table("", "comparison", tuple(header), tuple(body))


def _legend(data: dict) -> list[str]:
    return [
        f"baseline: {data['baseline']}; d: model - baseline [95% paired bootstrap interval "
        "over the metric's units: episodes, windows or branch states, common random numbers]; "
        "* indicative only (three or fewer top-level units); no interval: the level reports no "
        "per-unit values to pair",
    ]


def comparison_lines(data: dict) -> list[str]:
    """A comparison's JSON form (``ModelComparison.to_dict``) as text, what ``python -m eval
    --compare`` prints: the protocol and its rule, the models numbered, the table
    (``comparison_table``), its legend and the bootstrap's warnings."""
    out = [f"protocol: {protocol_line(data)}"]
    if data["protocol_rule"]:
        out.append(f"protocol rule: {data['protocol_rule']}")
    for i, model in enumerate(data["models"]):
        role = " (baseline)" if i == 0 else ""
        many = len(model["models"])
        out.append(
            f"[{i + 1}] {model['name']}{role}"
            + (f", {many} models (training seeds)" if many > 1 else "")
        )
    out += comparison_table(data).text(header=True, indent="")
    out += _legend(data)
    warnings = sorted(
        {
            d["warning"]
            for row in data["rows"]
            for d in row["differences"].values()
            if d and d.get("warning")
        }
    )
    return out + [f"warning: {w}" for w in warnings]


def comparison_markdown(data: dict, figure: str | None = None) -> str:
    """A comparison's JSON form as Markdown (the ``.md`` beside ``--compare``'s JSON): the
    protocol, the table (``comparison_table``), its legend and the figure."""
    lines = ["# Model comparison", "", f"Protocol: {protocol_line(data)}.", ""]
    if data["protocol_rule"]:
        lines += [f"Protocol rule: {data['protocol_rule']}", ""]
    lines += [*comparison_table(data, markdown=True).markdown(), "", *_legend(data), ""]
    if figure:
        lines += [f"![comparison]({figure})", ""]
    return "\n".join(lines)


def _difference(a: np.ndarray, b: np.ndarray, levels, n_resamples: int, seed: int) -> dict:
    diff = paired_hierarchical_bootstrap(a, b, levels, n_resamples, seed)
    out = diff.to_dict()
    return {
        "difference": out["difference"],
        "low": out["low"],
        "high": out["high"],
        "units": out["units"],
        "indicative": out["indicative"],
        "warning": out["warning"],
    }


def table(
    names: Sequence[str], reports: Sequence[Sequence[Report]], n_resamples: int, seed: int = 0
) -> list[dict]:
    """The comparison's rows (``ModelComparison.rows``) from every arm's reports.

    Raises:
        ValueError: if two arms hold different numbers of models, both more than one.
    """
    sizes = {len(r) for r in reports}
    many = sizes - {1}
    if len(many) > 1:
        raise ValueError(
            "arms of several models are paired by training seed and need the same number of "
            "models, got "
            + ", ".join(f"{n}: {len(r)}" for n, r in zip(names, reports, strict=True))
        )
    size = max(sizes)
    dicts = [[r.to_dict() for r in reps] for reps in reports]
    rows = []
    for metric in METRICS:
        values = {}
        for name, ds in zip(names, dicts, strict=True):
            found = [_scalar(d, metric) for d in ds]
            values[name] = None if None in found else float(np.mean(found))
        if all(v is None for v in values.values()):
            continue
        stacks = {n: _stack(reps, metric, size) for n, reps in zip(names, reports, strict=True)}
        base = stacks[names[0]]
        differences = {}
        for name in names[1:]:
            a, v, v0 = stacks[name], values[name], values[names[0]]
            if a is not None and base is not None:
                differences[name] = _difference(a, base, metric.units[1], n_resamples, seed)
            else:
                differences[name] = {
                    "difference": None if v is None or v0 is None else v - v0,
                    "low": None,
                    "high": None,
                    "units": None,
                    "indicative": False,
                    "warning": None,
                }
        paired = base is not None and all(stacks[n] is not None for n in names)
        rows.append(
            {
                "level": metric.level,
                "metric": metric.key,
                "label": metric.label,
                "higher_is_better": metric.higher_is_better,
                "paired_over": list(metric.units[1]) if paired else None,
                "values": values,
                "intervals": {n: _own_interval(stacks[n]) for n in names},
                "differences": differences,
            }
        )
    return rows


def compare_models(
    arms: Sequence,
    names: Sequence[str],
    infos: Sequence[Sequence[dict]] | None = None,
    spec=None,
    device="cpu",
    progress: bool = False,
    protocol_rule: str = "",
    seed: int = 0,
    fit_value: Callable | None = None,
    **changes,
) -> ModelComparison:
    """Evaluate every arm under one spec and compare each with the first (the baseline).

    Args:
        arms: at least two arms, each a model or a sequence of models (training seeds).
        names: the arms' names, unique (plug-ins: name their file so that two files of the
            same name are told apart).
        infos: per arm, a ``model_info`` dict per model (default ``{"name": name}``).
        spec: the one ``EvalSpec`` (or its name) of every arm: task, world, planner (any
            planner it names, with its tie rule and tree), depth, protocol; its levels are
            measured besides closed-loop success and L1, which every comparison reports
            (None: every level).
        device: as for ``gridplan.evaluate``.
        progress: show each model's levels and closed loops, prefixed ``[i/n name]``.
        protocol_rule: how the protocol was chosen, recorded with the table.
        seed: bootstrap seed.
        fit_value: ``model -> LearnedValue``, the value a planner that needs one plans with,
            fitted for each model through that model
            (``gridplan.evaluation.planner_choice.fit_learned_value``); None otherwise.
        **changes: spec fields to change (``EvalSpec.replace``), e.g. ``depth=2``.

    Returns:
        ModelComparison.

    Raises:
        ValueError: on fewer than two arms, repeated names, arms of different sizes, or as
            ``gridplan.evaluate``.
    """
    from gridplan.evaluation.ladder import check_levels, evaluate
    from gridplan.evaluation.spec import resolve_spec

    arms = [list(a) if isinstance(a, (list, tuple)) else [a] for a in arms]
    names = tuple(names)
    if len(arms) < 2:
        raise ValueError(f"a comparison needs at least two models, got {len(arms)}")
    if len(names) != len(arms) or len(set(names)) != len(names):
        raise ValueError(f"every arm needs its own name, got {list(names)}")
    if infos is None:
        infos = [[{"name": n}] * len(a) for n, a in zip(names, arms, strict=True)]
    spec = resolve_spec(spec)
    spec = spec.replace(**changes) if changes else spec
    wanted = check_levels(spec.levels)
    measured = check_levels(tuple(dict.fromkeys(("L1", *wanted, "success"))))
    spec = spec.replace(levels=measured)
    total = sum(len(a) for a in arms)
    reports: list[list[Report]] = []
    k = 0
    for name, models, info in zip(names, arms, infos, strict=True):
        arm = []
        for model, model_info in zip(models, info, strict=True):
            k += 1
            shown = Progress(enabled=progress, prefix=f"[{k}/{total} {name}] ")
            arm.append(
                evaluate(
                    model,
                    spec,
                    device=device,
                    model_info=model_info,
                    progress=shown,
                    learned_value=None if fit_value is None else fit_value(model),
                )
            )
        reports.append(arm)
    rows = table(names, reports, spec.n_resamples, seed)
    return ModelComparison(
        names=names,
        infos=[list(i) for i in infos],
        reports=reports,
        task=reports[0][0].task,
        depth=spec.depth,
        protocol=reports[0][0].protocol,
        levels=measured,
        protocol_rule=protocol_rule,
        rows=rows,
        ties=_shared_ties(reports),
    )


def _shared_ties(reports: Sequence[Sequence[Report]]) -> str | None:
    """The tie rule every report was measured under, or None if they differ."""
    rules = {r.ties for arm in reports for r in arm}
    return rules.pop() if len(rules) == 1 else None
