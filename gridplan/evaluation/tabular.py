"""Tables of a recorded report: one renderer for the terminal and the Markdown card.

``report_tables(report)`` reads only the report dict that is written as JSON
(``Report.to_dict``, or the paper's ``Report.paper_dict``) and turns it into ``Table`` objects:
the closed loop, L1 (with its per-dimension profile), a latent model's frozen-decoder numbers,
then one table per ladder level in ``LEVELS`` order. ``Table.text`` prints one in the terminal
(``python -m eval``), ``Table.markdown`` writes it into the card
(``gridplan.evaluation.card``), so both show the same numbers at the same precision.

Every number of the report is a row, named by its path inside the table's JSON object
(``decision_agreement``, ``DRPE/graded``, ``value_error_per_policy/greedy``, ``J_true/greedy``:
the same paths as the TensorBoard tags of ``gridplan.evaluation.schema.ladder_scalars``). A mean
with an interval (``{"mean", "se", "low", "high", "n"}``) shows its mean and ``[low, high]``.
Series drawn as figures (``step_profile``, the risk-coverage ``curve``), settings (a latent
model's ``protocol`` and ``planning``) and text are not rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gridplan.evaluation.ranking import spearman_text
from gridplan.evaluation.schema import LEVEL_TITLES, LEVELS, memory_clause, report_task

#: What a row is, in words, and its decimals, by ``<section>/<path>``, else by the first part of
#: its path (a group); 4 decimals otherwise (a count shows as an integer).
MEANINGS: dict[str, tuple[str, int]] = {
    "closed loop/success": ("success rate of the planner on the environment", 3),
    "closed loop/mean_steps": ("mean episode length, steps", 1),
    "L1/E_tot": ("open-loop MSE over every dimension (E_tot)", 4),
    "L1/DRPE/graded": ("decision-relevant prediction error, graded weights", 4),
    "L1/DRPE/binary": ("decision-relevant prediction error, binary weights", 4),
    "L1/DRPE/task": ("decision-relevant prediction error, the task's weights", 4),
    "L1/VPE": ("value-prediction error (VPE)", 4),
    "L1/event_audit/n_pickup": ("key pickups in the held-out windows", 0),
    "L1/event_audit/n_door": ("door openings in the held-out windows", 0),
    "L1/event_audit/pickup_mse": ("squared error of carrying at key pickups", 4),
    "L1/event_audit/pickup_state_mse": ("state MSE (every dimension) at key pickups", 4),
    "L1/event_audit/door_mse": ("squared error of door_open at door openings", 4),
    "L1/event_audit/door_state_mse": ("state MSE (every dimension) at door openings", 4),
    "L1/event_audit/carrying_at_pickup": ("predicted carrying at key pickups (truth 1)", 4),
    "L1/event_audit/door_open_at_opening": ("predicted door_open at door openings (truth 1)", 4),
    "L1/event_audit/event_mse": ("event error: flag MSE at pickups and door openings", 4),
    "L1/oracle_floor/E_tot": (
        "the oracle's E_tot, same windows (not 0 where distractors or tiles move at random)",
        4,
    ),
    "L1/E_repr": ("E_repr, frozen decoder of the actual latent", 4),
    "L1/E_pred": ("E_pred, frozen decoder of the predicted latent", 4),
    "L1/E_excess": ("E_excess = E_pred - E_repr", 4),
    "L1/latent_floor/E_excess": (
        "the perfect latent model's E_excess, same transitions (not 0 with random distractors)",
        4,
    ),
    "L4/horizon": ("steps H of the interventional rollouts", 0),
    "L4/n_states": ("branch states", 0),
    "L4/n_behaviour": ("of them from the behaviour policy", 0),
    "L4/decision_agreement": ("decision agreement: first action optimal", 3),
    "L4/decision_regret": ("decision regret", 4),
    "L4/ipe": ("interventional prediction error (IPE)", 4),
    "L4/ipe_behaviour": ("IPE from behaviour states", 4),
    "L4/ipe_shifted": ("IPE from oracle-visited states", 4),
    "L4/teacher_forced": ("teacher-forced error, same starts", 4),
    "L4/action_effect": ("action-effect error", 4),
    "L5/n_starts": ("anchor start states", 0),
    "L5/rollouts": ("rollouts per anchor and start", 0),
    "L5/reward_error": ("reward-prediction error", 4),
    "L5/reward_error_events": ("reward-prediction error at rewarded steps", 4),
    "L5/value_error": ("value error of the anchor policies", 4),
    "L5/brier": ("success Brier score", 4),
    "L5/brier_floor": ("success Brier floor (true probability)", 4),
    "L6/spearman": ("Spearman rho of policy values", 3),
    "L6/pra": ("pairwise ranking accuracy", 3),
    "L6/mmrv": ("mean maximum rank violation", 4),
    "L7/xgap_threshold": ("the stated XGap threshold, return units", 4),
    "L7/predicted_return": ("return the model promises for the picked plans", 4),
    "L7/achieved_return": ("return the picked plans deliver", 4),
    "L7/n_xgap_states": ("decision states of XGap", 0),
    "L7/success": ("closed-loop success", 3),
    "L7/success_oracle": ("oracle planner's success", 3),
    "L7/success_random": ("random policy's success", 3),
    "L7/policy_gain": ("policy gain over random", 3),
    "L7/optimality_regret": ("optimality regret", 3),
    "L7/xgap": ("exploitability gap XGap", 4),
    "L7/xgap_exceed": ("decisions with XGap above threshold", 3),
    "probe/n_questions": ("probe questions", 0),
    "probe/n_dropped": ("dropped: their candidates' true returns are equal", 0),
    "probe/candidates": ("candidate plans per question", 0),
    "probe/regret": ("WorldModelGym normalized regret", 3),
    "probe/reward_error": ("WorldModelGym reward error", 4),
    "uncertainty/spearman": ("Spearman(uncertainty, rollout error)", 3),
    "uncertainty/aurc": ("area under the risk-coverage curve", 4),
    "uncertainty/aurc_optimal": ("AURC of the optimal ordering", 4),
    "uncertainty/aurc_random": ("AURC of an uninformative score", 4),
    "uncertainty/n": ("rollouts scored", 0),
    # Groups: every row under them.
    "closed loop/outcomes": ("episodes ending this way", 0),
    "L1/oracle_floor": ("the oracle on the same windows", 4),
    "L1/latent_floor": ("the perfect latent model (z = s, the oracle's step, identity)", 4),
    "L5/value_error_per_policy": ("value error of this anchor policy", 4),
    "L6/J_true": ("true value of this anchor policy (discounted return)", 4),
    "L6/J_model": ("value of this anchor policy inside the model", 4),
    "probe/picked": ("share of questions where the model picked this candidate", 4),
}
#: Keys that are not rows: series drawn as figures, settings, and the texts in a title.
NOT_ROWS = frozenset(("step_profile", "curve", "planning", "protocol", "decoder", "source"))
#: Top-level keys of a report that are L1's numbers.
L1_KEYS = (
    "E_tot",
    "DRPE",
    "VPE",
    "event_audit",
    "oracle_floor",
    "E_repr",
    "E_pred",
    "E_excess",
    "latent_floor",
)
#: The columns of a table of numbers.
METRIC_HEADER = ("metric", "value", "interval", "what")


@dataclass(frozen=True)
class Row:
    """One recorded number of a table.

    Attributes:
        metric: its path inside the table's JSON object (``"DRPE/graded"``).
        value: the number as shown (``"n/a"`` where undefined).
        interval: ``"[low, high]"`` of a mean, a success rate's SE, or ``""``.
        what: its meaning in words (``MEANINGS``), or ``""``.
        recorded: the JSON value it was read from (a number or a mean's dict).
    """

    metric: str
    value: str
    interval: str
    what: str
    recorded: object


@dataclass(frozen=True)
class Table:
    """A titled table: ``header`` names the columns of every row of ``body``.

    Attributes:
        title: one line above the table.
        section: ``"closed loop"``, ``"L1"``, ``"L1 profile"``, ``"latent"``, a level of
            ``LEVELS``, or ``"comparison"`` (``gridplan.evaluation.compare_models``).
        header, body: the cells as shown.
        rows: of a table of numbers, the ``Row`` each line of ``body`` shows (else empty).
    """

    title: str
    section: str
    header: tuple[str, ...]
    body: tuple[tuple[str, ...], ...]
    rows: tuple[Row, ...] = ()

    @classmethod
    def of_rows(cls, title: str, section: str, rows: list[Row]) -> Table:
        """A table of numbers: one line per row, columns ``METRIC_HEADER``."""
        body = tuple((r.metric, r.value, r.interval, r.what) for r in rows)
        return cls(title, section, METRIC_HEADER, body, tuple(rows))

    def text(self, header: bool = False, indent: str = "  ") -> list[str]:
        """The title, then one line per row (after the header with ``header``), each column
        padded to its widest cell and two spaces from the next, so every column starts at
        the same place as its header."""
        lines = [list(self.header)] if header else []
        lines += [list(cells) for cells in self.body]
        widths = [max(len(cells[i]) for cells in lines) for i in range(len(self.header))]
        out = [self.title] if self.title else []
        for cells in lines:
            padded = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
            out.append(indent + padded.rstrip())
        return out

    def markdown(self) -> list[str]:
        """The title in bold, then a Markdown table."""
        out = [f"**{self.title}**", ""] if self.title else []
        out += ["| " + " | ".join(self.header) + " |", "|" + " --- |" * len(self.header)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in self.body]
        return out


def number(value, digits: int) -> str:
    """``value`` to ``digits`` decimals (an int as it is); ``n/a`` for None or NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.{digits}f}"


def _is_estimate(value) -> bool:
    return isinstance(value, dict) and "n" in value and ("mean" in value or "rho" in value)


def _row(section: str, path: str, value) -> Row:
    group = path.split("/")[0]
    what, digits = MEANINGS.get(f"{section}/{path}", MEANINGS.get(f"{section}/{group}", ("", 4)))
    if not _is_estimate(value):
        return Row(path, number(value, digits), "", what, value)
    mean = value.get("mean", value.get("rho"))
    interval = ""
    if value.get("low") is not None and value.get("high") is not None:
        interval = f"[{number(value['low'], digits)}, {number(value['high'], digits)}]"
    elif "se" in value and "low" not in value:
        interval = f"± {number(value['se'], digits)} (SE, n={value['n']})"
    return Row(path, number(mean, digits), interval, what, value)


def rows_of(section: str, data: dict, prefix: str = "") -> list[Row]:
    """Every recorded number of ``data`` (a level's numbers, or part of a report) as rows of
    ``section``, in the recorded order: a mean as one row, an undefined number as ``n/a``,
    nested groups as ``group/key``, a list of named records (L6's anchors) as
    ``<field>/<name>``."""
    rows: list[Row] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key in NOT_ROWS or isinstance(value, (str, bool)):
            continue
        if value is None or _is_estimate(value) or isinstance(value, (int, float)):
            rows.append(_row(section, path, value))
        elif isinstance(value, dict):
            rows += rows_of(section, value, f"{path}/")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            rows += [
                _row(section, f"{prefix}{field}/{record['name']}", entry)
                for record in value
                for field, entry in record.items()
                if field != "name"
            ]
    return rows


def _level_title(level: str, numbers: dict) -> str:
    title = f"{level} {LEVEL_TITLES[level]}" if level.startswith("L") else LEVEL_TITLES[level]
    if level == "uncertainty":
        title += f" ({numbers['source']})"
    return title


def _level_rows(level: str, numbers: dict) -> list[Row]:
    """A level's rows; L6's Spearman rho that reads ``n/a`` says which side is constant."""
    rows = rows_of(level, numbers)
    if level != "L6":
        return rows
    return [
        replace(r, value=spearman_text(r.value, numbers["anchors"]))
        if r.metric == "spearman"
        else r
        for r in rows
    ]


def profile_table(report: dict) -> Table:
    """L1's per-dimension error ordered by graded relevance weight, with the 95% bootstrap
    interval over the held-out windows (``profile_ci``) where recorded; the paper's report
    (``Report.paper_dict``) records none, and its table has no interval column."""
    from gridplan.core.relevance import relevance_weights

    task = report_task(report)
    names = task.world.dim_names
    weights = relevance_weights(task).tolist()
    ci = report.get("profile_ci") or {}
    body = []
    for d in sorted(range(len(names)), key=lambda d: -weights[d]):
        name = names[d]
        relevant = "yes" if d in task.relevant_dims else "no"
        cells = (name, relevant, f"{weights[d]:.3f}", number(report["profile"][name], 4))
        if ci:
            cells += (f"[{ci[name][0]:.4f}, {ci[name][1]:.4f}]" if name in ci else "",)
        body.append(cells)
    intervals = "; 95% bootstrap intervals over the held-out windows" if ci else ""
    return Table(
        f"L1 error profile (open-loop MSE over H={report['horizon']} steps, ordered by graded "
        f"relevance weight{intervals})",
        "L1 profile",
        ("dim", "relevant", "weight", "error", *(("interval",) if ci else ())),
        tuple(body),
    )


def report_tables(report: dict) -> list[Table]:
    """Every measured part of a report dict as tables (module docstring): the closed loop
    (``success``), L1 (``E_tot``) and its profile, a latent model's frozen-decoder protocol
    (``latent``), each level of ``report["ladder"]``, and the ensemble uncertainty of the
    paper's report of an ensemble checkpoint (top-level ``uncertainty``)."""
    tables = []
    if "success" in report:
        part = {k: report[k] for k in ("success", "outcomes", "mean_steps") if k in report}
        title = (
            f"closed loop: the planner on the environment ({len(report['seeds'])} seeds x "
            f"{report['episodes']} episodes)"
        )
        tables.append(Table.of_rows(title, "closed loop", rows_of("closed loop", part)))
    if "E_tot" in report:
        part = {k: report[k] for k in L1_KEYS if k in report}
        title = (
            f"L1 {LEVEL_TITLES['L1']} (H={report['horizon']}, {report['n_windows']} held-out "
            "windows)"
        )
        tables.append(Table.of_rows(title, "L1", rows_of("L1", part)))
    if "profile" in report:
        tables.append(profile_table(report))
    latent = report.get("latent")
    if latent:
        title = (
            f"latent model: frozen-decoder protocol ({latent['obs_kind']} observations, "
            f"Z = {latent['latent_dim']}{memory_clause(latent)}; E_* in variance-normalized "
            "units)"
        )
        tables.append(Table.of_rows(title, "latent", rows_of("latent", latent)))
    ladder = dict(report.get("ladder", {}))
    if "uncertainty" in report and "uncertainty" not in ladder:
        ladder["uncertainty"] = report["uncertainty"]
    for level in LEVELS:
        if level in ladder:
            numbers = ladder[level]
            rows = _level_rows(level, numbers)
            tables.append(Table.of_rows(_level_title(level, numbers), level, rows))
    return tables
