"""The markdown report of a group (``table.md``): verdicts first, then the sanity checks,
tables, text and figures; and the cell formats its tables share (paper style:
``0.97 ± 0.01``, ρ with CI).

A verdict scores an effect the paper states, which our laboratory could fail to show. A
claim that holds by construction here (irrelevant noise never reaches a leaf score, so its
DRPE is 0, its imagined agent never moves, and a row of fixed σR plans alike; a table has
all its rows) is a *sanity check*: listed, never counted as a reproduced effect.

Only the ``full`` profile states verdicts (``VERDICT_PROFILES``; ``docs/PREREGISTERED.md``,
Rule 5): under ``quick`` and ``tiny`` a report is a smoke run (``GroupReport.apply_profile``,
which the runner calls on every group's report), its verdicts keep their numbers and criteria
but state nothing and count toward nothing."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gridplan.metrics.stats import SpearmanResult

#: The profiles whose reports state verdicts (``docs/PREREGISTERED.md``, Rule 5); a report of
#: any other profile is a smoke run.
VERDICT_PROFILES = frozenset({"full"})
#: The label of a verdict a smoke run does not state.
SMOKE_LABEL = "smoke run: no verdict"


def fmt(x, digits: int = 3) -> str:
    """A number for a markdown cell; ``None``/NaN print as ``n/a``."""
    if x is None:
        return "n/a"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def fmt_se(mean, se, digits: int = 2) -> str:
    """``mean ± se`` (the paper's style for success rates)."""
    if se is None or (isinstance(se, float) and math.isnan(se)):
        return fmt(mean, digits)
    return f"{fmt(mean, digits)} ± {fmt(se, digits)}"


def fmt_rho(result: SpearmanResult | Mapping | None, digits: int = 2) -> str:
    """Spearman ρ with its bootstrap CI: ``-0.97 [-0.99, -0.93]``."""
    if result is None:
        return "n/a"
    if isinstance(result, Mapping):
        rho, low, high = result.get("rho"), result.get("low"), result.get("high")
    else:
        rho, low, high = result.rho, result.low, result.high
    if rho is None or (isinstance(rho, float) and math.isnan(rho)):
        return "n/a"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return fmt(rho, digits)
    return f"{fmt(rho, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


def paper_cell(ref: Mapping, key: str) -> str:
    """The paper's value ``ref[key]`` as a cell (``PaperValue.cell``), ``—`` if it gives none."""
    return ref[key].cell() if key in ref else "—"


def md_table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A GitHub markdown table; cells are converted with ``str``."""
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, the table {len(headers)} columns")
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines)


@dataclass
class Verdict:
    """Whether one effect of the paper reproduces.

    Attributes:
        claim: the paper's effect in words, with its source.
        reproduced: True/False, or None when it could not be checked (an input is missing)
            or is not stated.
        detail: our numbers beside the paper's, and the criterion used.
        stated: False in a smoke run (``VERDICT_PROFILES``): the numbers are printed, no
            verdict is stated (``reproduced`` is then None).
    """

    claim: str
    reproduced: bool | None
    detail: str
    stated: bool = True

    @property
    def label(self) -> str:
        """``reproduces``, ``does not reproduce``, ``not checked`` or ``SMOKE_LABEL``."""
        if not self.stated:
            return SMOKE_LABEL
        return {True: "reproduces", False: "does not reproduce", None: "not checked"}[
            self.reproduced
        ]

    def line(self) -> str:
        """One markdown bullet."""
        return f"- **{self.label}** — {self.claim}. {self.detail}"


@dataclass
class SanityCheck:
    """A claim that holds by construction in this laboratory (see the module docstring).

    Attributes:
        claim: what is checked, with its source.
        holds: whether it held in this run (False points at a bug, not at the paper).
        why: why it holds by construction.
        detail: the numbers.
    """

    claim: str
    holds: bool
    why: str
    detail: str

    def line(self) -> str:
        """One markdown bullet."""
        word = "holds" if self.holds else "FAILS"
        return f"- **{word}** — {self.claim}. {self.detail}. By construction: {self.why}."


class GroupReport:
    """The markdown report (``table.md``) of one group: verdicts first, then tables.

    Args:
        title: heading, e.g. ``"E1 — controlled 8×6 grid (paper §5.1, Fig. 2, Table 2)"``.
        profile: the reproduction profile (``apply_profile``); None until it is known.
    """

    def __init__(self, title: str, profile: str | None = None) -> None:
        self.title = title
        self.verdicts: list[Verdict] = []
        self.sanity_checks: list[SanityCheck] = []
        self.blocks: list[str] = []
        self.profile: str | None = None
        if profile is not None:
            self.apply_profile(profile)

    @property
    def smoke(self) -> bool:
        """Whether this is a smoke run: a known profile outside ``VERDICT_PROFILES``."""
        return self.profile is not None and self.profile not in VERDICT_PROFILES

    def apply_profile(self, profile: str) -> None:
        """Record the run's profile; in a smoke run every verdict, added before or after,
        is not stated (``Verdict.stated`` False, ``reproduced`` None; its detail, the
        numbers and the criterion, is kept).

        Raises:
            ValueError: if ``profile`` is empty or differs from one recorded before.
        """
        if not profile:
            raise ValueError("profile must be a non-empty profile name")
        if self.profile is not None and self.profile != profile:
            raise ValueError(f"report already has profile {self.profile!r}, not {profile!r}")
        self.profile = profile
        if self.smoke:
            for v in self.verdicts:
                v.reproduced, v.stated = None, False

    def verdict(self, claim: str, reproduced: bool | None, detail: str) -> Verdict:
        """Add a verdict; ``reproduced`` None means it could not be checked. In a smoke run
        (``apply_profile``) it is recorded as not stated."""
        v = Verdict(claim, None if reproduced is None else bool(reproduced), detail)
        if self.smoke:
            v.reproduced, v.stated = None, False
        self.verdicts.append(v)
        return v

    def sanity(self, claim: str, holds: bool, why: str, detail: str) -> SanityCheck:
        """Add a sanity check (not counted by ``overall``)."""
        check = SanityCheck(claim, bool(holds), why, detail)
        self.sanity_checks.append(check)
        return check

    def table(self, title: str, headers: Sequence[str], rows, note: str = "") -> None:
        """Add a titled markdown table and an optional note below it."""
        block = f"### {title}\n\n{md_table(headers, rows)}"
        if note:
            block += f"\n\n{note}"
        self.blocks.append(block)

    def text(self, markdown: str) -> None:
        """Add a paragraph."""
        self.blocks.append(markdown)

    def figure(self, filename: str, caption: str) -> None:
        """Reference a PNG written into the group folder."""
        self.blocks.append(f"![{caption}]({filename})\n\n*{caption}*")

    def overall(self) -> str:
        """The one-line verdict over all checked effects; a smoke run's says that none is
        stated."""
        if self.smoke:
            return (
                f"**Verdict: none stated (smoke run)** (profile `{self.profile}`: "
                f"numbers only; {len(self.verdicts)} effect(s) measured, no verdict stated)."
            )
        checked = [v for v in self.verdicts if v.reproduced is not None]
        ok = sum(v.reproduced for v in checked)
        if not checked:
            word = "not checked"
        elif ok == len(checked):
            word = "reproduces"
        elif ok == 0:
            word = "does not reproduce"
        else:
            word = "partly reproduces"
        unchecked = len(self.verdicts) - len(checked)
        extra = f"; {unchecked} not checked" if unchecked else ""
        return f"**Verdict: {word}** ({ok} of {len(checked)} effects reproduce{extra})."

    def markdown(self, footer: str = "") -> str:
        """The full ``table.md`` text."""
        title = self.title
        if self.smoke:
            title += f" — profile `{self.profile}`: smoke run, numbers only, no verdict stated"
        parts = [f"# {title}", self.overall()]
        if self.verdicts:
            parts.append("\n".join(v.line() for v in self.verdicts))
        if self.sanity_checks:
            lines = "\n".join(c.line() for c in self.sanity_checks)
            parts.append(f"Sanity checks (hold by construction; not counted):\n\n{lines}")
        parts.extend(self.blocks)
        if footer:
            parts.append(footer)
        return "\n\n".join(parts) + "\n"


class RuleReport:
    """A ``GroupReport`` view whose verdicts name the tie rule they were measured under: the
    claims checked again under the other tie rule (``docs/PREREGISTERED.md``, Rule 1) carry
    ``" [ties=<rule>]"``.

    Args:
        report: the group's report.
        ties: the tie rule of the verdicts added through this view.
    """

    def __init__(self, report: GroupReport, ties: str) -> None:
        self.report, self.suffix = report, f" [ties={ties}]"

    def verdict(self, claim: str, reproduced: bool | None, detail: str) -> Verdict:
        """``GroupReport.verdict`` of the claim with the rule's suffix."""
        return self.report.verdict(claim + self.suffix, reproduced, detail)
