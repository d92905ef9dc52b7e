"""The evaluation card of one report: the decision contract, what was measured, the profile per
level with intervals, pass/fail gates, figures and a verdict in plain language.

``write_card(report, json_path)`` writes beside the JSON report ``<stem>.card.md``,
``<stem>.card.json`` (schema ``CARD_SCHEMA``) and the figures ``<stem>.card.<name>.png``:
``profile`` (per-dimension L1 error ordered by relevance, with 95% bootstrap intervals over
the held-out windows and the oracle's floor), ``values`` (each anchor policy's
true value against its value inside the model, L6) and ``risk_coverage`` (uncertainty). A
report ``out.json`` gets ``out.card.md``, a checkpoint's ``best.eval.json`` gets
``best.eval.card.md``.

The gates are fixed before any model is seen (``GATES``): L4 the planner's first action is
optimal in at least 90% of branch states; L5 the anchor policies' values inside the model are
within 0.05 (return units, values lie in [0, 1]) of their true values on average; L6 the model
orders at least 80% of the anchor pairs like the environment (0.5 is a random ordering).
The gates mean the same on MiniGrid DoorKey, where the anchor policies act over its seven
actions (``gridplan.evaluation.anchors``).
The card also lists L1 beside the oracle's floor (the oracle's own E_tot on the same windows,
not 0 because the distractors are stochastic), the clamped share of a plug-in's predictions,
why L0 does not apply to this model (``l0_status``: what it observes, its world's state size)
and what to fix first (``what_to_fix``: derived from the measurements; for a latent model, a
collapsed representation first, ``representation_findings``).
Card format: "How Should World Models Be Evaluated for Embodied Decision-Making?"
(arXiv 2606.15032), §5-6 (decision contract, gated profile, evaluation card).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from gridplan.core.render import PARTIAL_OBS_KINDS
from gridplan.core.world import recorded
from gridplan.evaluation.schema import LEVEL_TITLES, check_schema, report_task, write_text
from gridplan.evaluation.tabular import report_tables
from gridplan.util.jsonio import dumps

CARD_SCHEMA = "1.0"


@dataclass(frozen=True)
class Gate:
    """A pass/fail threshold on one ladder number.

    Attributes:
        level: ``"L4"``, ``"L5"`` or ``"L6"``.
        metric: key in that level's numbers.
        threshold: the bar.
        higher_is_better: pass when the value is ``>=`` (else ``<=``) the threshold.
        meaning: what passing says, in words.
        explain: the measured value in words (``{value}`` is replaced).
    """

    level: str
    metric: str
    threshold: float
    higher_is_better: bool
    meaning: str
    explain: str

    def check(self, value: float | None) -> bool | None:
        if value is None:
            return None
        return value >= self.threshold if self.higher_is_better else value <= self.threshold

    @property
    def rule(self) -> str:
        return f"{self.metric} {'>=' if self.higher_is_better else '<='} {self.threshold:g}"


GATES = (
    Gate(
        "L4",
        "decision_agreement",
        0.90,
        True,
        "the planner's first actions are optimal",
        "the planner's first action is optimal in {value:.0%} of branch states",
    ),
    Gate(
        "L5",
        "value_error",
        0.05,
        False,
        "policy values inside the model are accurate",
        "policy values inside the model are off by {value:.3f} on average",
    ),
    Gate(
        "L6",
        "pra",
        0.80,
        True,
        "the model ranks policies like the environment",
        "it orders {value:.0%} of the anchor-policy pairs like the environment",
    ),
)

#: Every rung of the ladder the card lists, with its name.
CARD_LEVELS = {
    "L0": "visual plausibility",
    "L1": LEVEL_TITLES["L1"],
    "L2": "semantic alignment",
    "L3": "physical plausibility",
    **{k: v for k, v in LEVEL_TITLES.items() if k != "L1"},
}
#: Levels of the ladder that this laboratory cannot measure, and why (L0's reason depends on
#: the model's observations: ``l0_status``).
NOT_APPLICABLE = {
    "L2": "no instructions or semantics to align with",
    "L3": "the physics is the gridworld's rules, checked at L4 (action effects)",
}


def l0_status(report: dict) -> str:
    """Why L0 (visual plausibility) is not measured, for the report's model: what it observes
    (a latent model's ``obs_kind``, else the state) and its world's state size."""
    from gridplan.core.render import obs_shape

    world = report_task(report).world
    kind = (report.get("latent") or {}).get("obs_kind", "state")
    state = f"the {world.state_dim}-number state of world {world.describe()}"
    if kind == "state":
        return f"no observations are rendered: the model reads {state} itself"
    shape = "x".join(map(str, obs_shape(world, kind)))
    return (
        f"the model reads {kind} observations ({shape}) rendered from {state}, and is "
        "measured through decoded states: it generates no observations to judge"
    )


def not_applicable(report: dict) -> dict[str, str]:
    """Every level the card marks not applicable, with the reason for this report. The gated
    levels L4-L6 apply on both kinds of world (MiniGrid DoorKey runs the same anchor policies,
    ``gridplan.evaluation.anchors``)."""
    return {"L0": l0_status(report), **NOT_APPLICABLE}


def card_stem(json_path: str | Path) -> Path:
    """``out.json`` -> ``out``; ``best.eval.json`` -> ``best.eval`` (the card's prefix)."""
    path = Path(json_path)
    return path.with_suffix("") if path.suffix == ".json" else path


def card_paths(json_path: str | Path) -> dict[str, Path]:
    """Every file ``write_card`` may write for the report at ``json_path``."""
    stem = card_stem(json_path)
    return {
        "markdown": stem.with_name(stem.name + ".card.md"),
        "json": stem.with_name(stem.name + ".card.json"),
        "profile": stem.with_name(stem.name + ".card.profile.png"),
        "values": stem.with_name(stem.name + ".card.values.png"),
        "risk_coverage": stem.with_name(stem.name + ".card.risk_coverage.png"),
    }


def _value(report: dict, level: str, key: str) -> float | None:
    entry = report.get("ladder", {}).get(level, {}).get(key)
    if isinstance(entry, dict):
        return entry.get("mean")
    return entry


def policy_class(report: dict) -> str:
    """The planner of the report in words: the paper's full-width search with exact V* (or,
    for a latent model planned through its heads, its reward and value heads:
    ``latent.planning``), or the planner and settings ``report["planner"]`` records
    (``PlannerChoice.to_dict``)."""
    depth = report["depth"]
    actions = recorded(report, "report").n_actions
    planner = report.get("planner")
    planning = (report.get("latent") or {}).get("planning") or {}
    if planning.get("leaf_score") == "heads":
        leaves = f"the {planning['reward']} plus gamma^{depth} times the {planning['leaf_value']}"
    else:
        leaves = f"the sparse reward on predicted states plus gamma^{depth} V* (exact)"
    if planner is None or planner["name"] == "search":
        return (
            f"full-width tree search at depth {depth} over the model (all {actions}^{depth} action "
            f"sequences), leaves scored by {leaves}, first action of the best leaf, replanned "
            "every step"
        )
    settings = ", ".join(f"{k}={v}" for k, v in planner["settings"].items())
    what = {
        "search-learned-v": f"full-width tree search at depth {depth} with a learned value "
        "(fitted value iteration through the model) at the leaves",
        "search-no-heuristic": f"full-width tree search at depth {depth} with no terminal "
        "value (depth-limited return)",
        "cem": "cross-entropy method over action sequences",
        "mppi": "MPPI over action sequences",
        "mcts": "batched PUCT tree search with a uniform prior",
    }[planner["name"]]
    return (
        f"{what} ({settings or 'default settings'}), sparse reward on predicted states, "
        "first action of the committed sequence, replanned every step"
    )


def contract(report: dict) -> dict:
    """The decision contract: task, policy class, action interface, horizons, use, and the
    planner's tie rule ``ties`` when the report records it."""
    task = report_task(report)
    relevant = [task.world.dim_names[d] for d in task.relevant_dims]
    depth = report["depth"]
    return {
        "task": {
            "name": task.name,
            "goal": list(task.goal),
            "hazard": None if task.hazard is None else list(task.hazard),
            "goal_swaps_on_c1": task.swap_on_c1,
            "relevant_dims": relevant,
            "gamma": task.gamma,
        },
        "policy_class": policy_class(report)
        + (f"; tied best first actions: {report['ties']}" if "ties" in report else ""),
        "action_interface": f"controlled: {task.world.n_actions} discrete actions executed "
        "directly (never inferred)",
        "horizon": {
            "episode": task.horizon,
            "lookahead": depth,
            "open_loop": report.get("protocol", {}).get("horizon"),
        },
        "decision_use": "planning (model-predictive control with this planner)",
        **({"ties": report["ties"]} if "ties" in report else {}),
    }


def gates(report: dict) -> list[dict]:
    """Each gate with its rule, the model's value and whether it passed (``None``: the level
    was not measured)."""
    out = []
    for gate in GATES:
        value = _value(report, gate.level, gate.metric)
        out.append(
            {
                "level": gate.level,
                "metric": gate.metric,
                "rule": gate.rule,
                "meaning": gate.meaning,
                "value": value,
                "passed": gate.check(value),
                "explanation": None if value is None else gate.explain.format(value=value),
            }
        )
    return out


def verdict(report: dict, checked: list[dict] | None = None) -> str:
    """The plain-language verdict of a report."""
    checked = gates(report) if checked is None else checked
    use = f"planning with the depth-{report['depth']} planner on task {report['task']}"
    failed = [g for g in checked if g["passed"] is False]
    unmeasured = [g for g in checked if g["passed"] is None]
    parts = []
    if failed:
        parts.append(f"Not fit for {use}.")
        parts += [f"{g['level']} fails ({g['rule']}): {g['explanation']}." for g in failed]
    elif unmeasured:
        missing = ", ".join(g["level"] for g in unmeasured)
        parts.append(f"No verdict on {use}: gate levels {missing} were not measured.")
    else:
        parts.append(f"Fit for {use}: every gate passes.")
    success = _value(report, "L7", "success")
    if success is not None:
        oracle = _value(report, "L7", "success_oracle")
        parts.append(
            f"In closed loop it succeeds in {success:.0%} of episodes "
            f"(the oracle planner: {oracle:.0%})."
        )
    xgap = _value(report, "L7", "xgap")
    if xgap is not None and xgap > report["ladder"]["L7"]["xgap_threshold"]:
        parts.append(
            f"The planner exploits it: the plans it picks promise {xgap:.2f} more "
            "return than they deliver."
        )
    return " ".join(parts)


#: Below this predicted flag at its event (truth 1) the event counts as missed.
EVENT_MISSED = 0.5


def representation_findings(report: dict) -> list[str]:
    """A latent model's collapsed representation, from its frozen-decoder protocol
    (``gridplan.metrics.frozen_decoder``): ``E_repr`` at or above the persistence baseline
    means the actual next latent tells the frozen decoder less about the next state than
    copying the current state does, so a small ``E_excess`` says nothing of the dynamics. The
    finding gives both errors, ``E_excess``, the latent's effective rank where the report has
    it, and the fix. Empty for a state model or a representation that beats persistence."""
    latent = report.get("latent")
    frozen = (latent or {}).get("frozen")
    if not frozen or frozen["E_repr"] < frozen["E_persistence"]:
        return []
    rank = frozen.get("effective_rank")
    rank_text = (
        ""
        if rank is None
        else f"; the latent's effective rank is {rank:.1f} of Z = {latent['latent_dim']}"
    )
    excess = frozen["E_excess"]
    excess_text = (
        f"E_excess {excess:+.4f} is small because there is little left to predict, not "
        "because the dynamics are right"
        if abs(excess) <= frozen["E_repr"]
        else f"E_excess {excess:+.4f} is larger still: the predicted latents decode worse than "
        "the actual ones, so the dynamics are wrong as well"
    )
    partial = (
        " On a partial observation (here "
        f"{latent['obs_kind']}) one observation does not determine the state, and the "
        "protocol's transitions start from one: part of E_repr is that, for any encoder."
        if latent.get("obs_kind") in PARTIAL_OBS_KINDS
        else ""
    )
    return [
        "the representation has collapsed: through the frozen protocol decoder the actual "
        "next latent tells less about the next state than copying the current state does "
        f"(E_repr {frozen['E_repr']:.3f} against the persistence baseline "
        f"{frozen['E_persistence']:.3f}, variance-normalized d){rank_text}. {excess_text}."
        f"{partial} Fix the encoder first: a reconstruction loss or a variance-covariance "
        "term (VICReg) against collapse, and check that encode reads its input (pixels scaled "
        "to [0, 1], no constant or detached features)"
    ]


def what_to_fix(report: dict) -> list[str]:
    """What to fix first, derived from the measurements, most important first: a latent
    model's collapsed representation (``representation_findings``), the failed gates, the
    relevant dimension that weighs most in the graded DRPE (its share of it), missed
    decision-critical events (event audit), and how much of E_tot sits on irrelevant
    dimensions (error there never changes a decision). Never empty."""
    from gridplan.core.relevance import relevance_weights

    # A collapsed representation comes first: it is the cause of any gate it fails.
    out = representation_findings(report)
    out += [
        f"{g['level']} ({g['rule']}): {g['explanation']}"
        for g in gates(report)
        if g["passed"] is False
    ]
    if "profile" not in report:
        return out or ["L1 was not measured: add it (--levels L1,...) to see which error to fix"]
    task = report_task(report)
    names = task.world.dim_names
    weights = relevance_weights(task).tolist()
    profile = [report["profile"][names[d]] for d in range(len(names))]
    contrib = [w * e for w, e in zip(weights, profile, strict=True)]
    total = sum(contrib)
    if total > 0:
        top = max(range(len(names)), key=lambda d: contrib[d])
        out.append(
            f"{names[top]} weighs most in DRPE: {contrib[top] / total:.0%} of the graded "
            f"DRPE (error {profile[top]:.4f}, relevance weight {weights[top]:.3f})"
        )
    audit = report.get("event_audit") or {}
    for key, event, flag in (
        ("carrying_at_pickup", "key pickups", "carrying"),
        ("door_open_at_opening", "door openings", "door_open"),
    ):
        value = audit.get(key)
        if value is not None and value < EVENT_MISSED:
            out.append(
                f"{event} are missed: predicted {flag} {value:.2f} at the event (truth 1, "
                f"read as set above {EVENT_MISSED}); weight these transitions in training"
            )
    irrelevant = [d for d in range(len(names)) if d not in task.relevant_dims]
    e_all = sum(profile)
    if e_all > 0:
        share = sum(profile[d] for d in irrelevant) / e_all
        if share >= 0.5:
            floor = report.get("oracle_floor")
            irreducible = (
                f"; E_tot {report['E_tot']:.4f} against the oracle floor "
                f"{floor['E_tot']:.4f}, which the randomly moving distractors (or floor tiles) "
                "make irreducible"
                if floor is not None and "E_tot" in report
                else ""
            )
            out.append(
                f"{share:.0%} of E_tot is on dimensions irrelevant to task {task.name} "
                f"(it never changes a decision): no need to spend capacity there{irreducible}"
            )
    if not out:
        out.append("nothing stands out: no gate fails and no relevant error dominates")
    return out


def profile_rows(report: dict) -> list[dict]:
    """The measured profile: every recorded number of the report's tables
    (``gridplan.evaluation.tabular.report_tables``, as the terminal prints them), with its
    section, path, meaning, shown value and interval, and the recorded value."""
    return [
        {
            "level": table.section,
            "metric": row.metric,
            "label": row.what or row.metric,
            "value": row.value,
            "interval": row.interval,
            "estimate": row.recorded,
        }
        for table in report_tables(report)
        for row in table.rows
    ]


def _profile_figure(report: dict) -> Figure | None:
    if "profile" not in report:
        return None
    from gridplan.core.relevance import relevance_weights

    task = report_task(report)
    weights = relevance_weights(task).tolist()
    names = task.world.dim_names
    order = sorted(range(len(names)), key=lambda d: -weights[d])
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    colors = ["tab:red" if d in task.relevant_dims else "tab:gray" for d in order]
    values = [report["profile"][names[d]] for d in order]
    ci = report.get("profile_ci")
    errors = None
    if ci is not None:
        low = [max(v - ci[names[d]][0], 0.0) for v, d in zip(values, order, strict=True)]
        high = [max(ci[names[d]][1] - v, 0.0) for v, d in zip(values, order, strict=True)]
        errors = [low, high]
    ax.bar(range(len(order)), values, color=colors, yerr=errors, capsize=2, ecolor="0.25")
    floor = report.get("oracle_floor")
    if floor is not None:
        ax.axhline(
            floor["E_tot"],
            color="0.4",
            linestyle="--",
            linewidth=1,
            label=f"oracle floor: its E_tot (mean of {len(names)} dims) {floor['E_tot']:.4f}",
        )
        ax.legend(fontsize=7, loc="upper right")
    ax.set_xticks(range(len(order)), [names[d] for d in order], rotation=45, ha="right")
    ax.set_ylabel("open-loop MSE (H steps)")
    bars = "\nbars: 95% bootstrap intervals over the held-out windows" if ci is not None else ""
    ax.set_title(
        f"L1 error profile, ordered by relevance (red: relevant to task {task.name}){bars}",
        fontsize=9,
    )
    return fig


def _values_figure(report: dict) -> Figure | None:
    l6 = report.get("ladder", {}).get("L6")
    if l6 is None:
        return None
    fig = Figure(figsize=(4.6, 4.2), layout="constrained")
    ax = fig.add_subplot()
    jt = [a["J_true"] for a in l6["anchors"]]
    jm = [a["J_model"] for a in l6["anchors"]]
    top = max(max(jt), max(jm), 0.05) * 1.08
    ax.plot([0, top], [0, top], color="0.6", linewidth=1, label="J inside = J true")
    ax.scatter(jt, jm, color="tab:blue", zorder=3)
    for a in l6["anchors"]:
        ax.annotate(
            a["name"],
            (a["J_true"], a["J_model"]),
            fontsize=6,
            xytext=(3, 2),
            textcoords="offset points",
        )
    ax.set_xlabel("J_E: true value (discounted return)")
    ax.set_ylabel("J_hat: value inside the model")
    ax.set_title(f"anchor policies (PRA {l6['pra']['mean']:.2f})")
    ax.legend(loc="upper left", fontsize=7)
    return fig


def _risk_figure(report: dict) -> Figure | None:
    unc = report.get("ladder", {}).get("uncertainty")
    if unc is None:
        return None
    fig = Figure(figsize=(4.6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    cov, risk = zip(*unc["curve"], strict=True)
    ax.plot(cov, risk, "-o", markersize=2, label=f"model (AURC {unc['aurc']:.4f})")
    ax.axhline(unc["aurc_random"], color="0.6", linestyle="--", label="uninformative score")
    ax.plot([], [], " ", label=f"optimal AURC {unc['aurc_optimal']:.4f}")
    ax.set_xlabel("coverage (fraction of most certain rollouts kept)")
    ax.set_ylabel("mean rollout error (IPE)")
    rho = unc["spearman"]
    title = f"risk-coverage ({unc['source']})"
    if rho["rho"] is not None and rho["low"] is not None:
        title += f"\nSpearman(u, error) {rho['rho']:.2f} [{rho['low']:.2f}, {rho['high']:.2f}]"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig


def _markdown(card: dict, report: dict) -> str:
    c = card["contract"]
    t = c["task"]
    model = ", ".join(f"{k}={v}" for k, v in report["model"].items())
    lines = [
        f"# Evaluation card: {report['model'].get('name', 'model')}",
        "",
        f"Model: {model}. Report: `{card['report']}` (schema {report['schema_version']}).",
        "",
        "## Decision contract",
        "",
        f"- Task: {t['name']} (goal {tuple(t['goal'])}"
        + (f", hazard {tuple(t['hazard'])}" if t["hazard"] else "")
        + (", goal and hazard swap with c1" if t["goal_swaps_on_c1"] else "")
        + f"); relevant dims {', '.join(t['relevant_dims'])}; gamma {t['gamma']}.",
        f"- Policy class: {c['policy_class']}.",
        f"- Action interface: {c['action_interface']}.",
        f"- Horizons: episode {c['horizon']['episode']} steps, lookahead "
        f"{c['horizon']['lookahead']}, open-loop rollouts {c['horizon']['open_loop']}.",
        f"- Decision use: {c['decision_use']}.",
        "",
        "## Levels measured",
        "",
        "| level | what | measured |",
        "| --- | --- | --- |",
    ]
    for level, what in CARD_LEVELS.items():
        if level in card["not_applicable"]:
            status = f"not applicable: {card['not_applicable'][level]}"
        else:
            status = "yes" if level in card["levels"] else "no"
        lines.append(f"| {level} | {what} | {status} |")
    lines += [
        "",
        "## Gates (thresholds fixed before evaluation)",
        "",
        "| level | rule | means | value | result |",
        "| --- | --- | --- | --- | --- |",
    ]
    for g in card["gates"]:
        value = "n/a" if g["value"] is None else f"{g['value']:.4g}"
        result = {True: "pass", False: "FAIL", None: "not measured"}[g["passed"]]
        lines.append(f"| {g['level']} | {g['rule']} | {g['meaning']} | {value} | {result} |")
    lines += ["", "## Profile (every recorded number, 95% intervals)"]
    for table in report_tables(report):
        lines += ["", *table.markdown()]
    lines += ["", "## What to fix", ""] + [f"- {item}" for item in card["what_to_fix"]]
    lines += ["", "## Figures", ""]
    for name, path in card["figures"].items():
        lines.append(f"![{name}]({path})")
    lines += ["", "## Verdict", "", card["verdict"], ""]
    if report.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    return "\n".join(lines)


def build_card(report: dict, json_name: str = "report.json") -> dict:
    """The card's JSON form (without figures) of a report dict.

    Raises:
        ValueError: if ``report`` is not a report of the current schema.
    """
    check_schema(report)
    checked = gates(report)
    return {
        "card_schema_version": CARD_SCHEMA,
        "report": json_name,
        "model": report["model"],
        "contract": contract(report),
        "levels": list(report["levels"]),
        "not_applicable": not_applicable(report),
        "gates": checked,
        "profile": profile_rows(report),
        "verdict": verdict(report, checked),
        "what_to_fix": what_to_fix(report),
        "l1": _l1(report),
        "clamped": report.get("clamped"),
        "figures": {},
    }


def _l1(report: dict) -> dict | None:
    """L1's headline numbers beside the oracle's floor on the same windows."""
    if "E_tot" not in report:
        return None
    return {
        "E_tot": report["E_tot"],
        "DRPE": report["DRPE"],
        "oracle_floor": report.get("oracle_floor"),
        "event_audit": report.get("event_audit"),
    }


def write_card(report: dict, json_path: str | Path, overwrite: bool = False) -> dict[str, Path]:
    """Write the card of ``report`` beside ``json_path`` (module docstring).

    Returns:
        Name -> path of every file written.

    Raises:
        FileExistsError: if a card file exists and ``overwrite`` is false (nothing written).
        ValueError: if ``report`` is not a report of the current schema.
    """
    paths = card_paths(json_path)
    taken = [str(p) for p in paths.values() if p.exists()]
    if taken and not overwrite:
        raise FileExistsError(f"{', '.join(taken)} already exist(s); pass --force to overwrite")
    card = build_card(report, Path(json_path).name)
    written: dict[str, Path] = {}
    paths["markdown"].parent.mkdir(parents=True, exist_ok=True)
    for name, make in (
        ("profile", _profile_figure),
        ("values", _values_figure),
        ("risk_coverage", _risk_figure),
    ):
        fig = make(report)
        if fig is not None:
            tmp = paths[name].with_name(f".{paths[name].name}.tmp")
            fig.savefig(tmp, dpi=120, format="png")
            tmp.replace(paths[name])
            card["figures"][name] = paths[name].name
            written[name] = paths[name]
    write_text(paths["json"], dumps(card, indent=2) + "\n")
    write_text(paths["markdown"], _markdown(card, report))
    written["json"], written["markdown"] = paths["json"], paths["markdown"]
    return written
