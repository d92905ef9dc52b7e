"""Rule 5 of docs/PREREGISTERED.md: the quick and tiny profiles are smoke runs that print
numbers and state no verdict; only the full profile states verdicts
(``gridplan.experiments.tables.GroupReport.apply_profile``, which the runner applies to every
group's report)."""

from __future__ import annotations

import dataclasses

import pytest

from gridplan.experiments.profiles import PROFILES
from gridplan.experiments.runner import Group, read_done, run_groups
from gridplan.experiments.tables import SMOKE_LABEL, VERDICT_PROFILES, GroupReport


def test_only_the_full_profile_states_verdicts():
    assert VERDICT_PROFILES == {"full"}
    assert set(PROFILES) - VERDICT_PROFILES == {"quick", "tiny"}


@pytest.mark.parametrize("profile", ["quick", "tiny"])
def test_a_smoke_report_keeps_the_numbers_and_states_no_verdict(profile):
    early = GroupReport("G")
    early.verdict("effect one", True, "x = 0.9 (criterion > 0.5)")
    early.apply_profile(profile)
    early.verdict("effect two", False, "y = 0.1 (criterion > 0.5)")
    assert [v.reproduced for v in early.verdicts] == [None, None]
    assert [v.stated for v in early.verdicts] == [False, False]
    assert [v.label for v in early.verdicts] == [SMOKE_LABEL] * 2
    assert early.verdicts[0].detail == "x = 0.9 (criterion > 0.5)"
    assert early.overall() == (
        f"**Verdict: none stated (smoke run)** (profile `{profile}`: numbers only; "
        "2 effect(s) measured, no verdict stated)."
    )
    text = early.markdown()
    assert text.splitlines()[0] == (
        f"# G — profile `{profile}`: smoke run, numbers only, no verdict stated"
    )
    assert "reproduces" not in text
    assert "- **smoke run: no verdict** — effect one. x = 0.9 (criterion > 0.5)" in text


def test_a_full_report_states_its_verdicts_and_refuses_a_second_profile():
    report = GroupReport("G", "full")
    report.verdict("effect one", True, "")
    report.verdict("effect two", False, "")
    assert report.overall() == "**Verdict: partly reproduces** (1 of 2 effects reproduce)."
    assert report.markdown().splitlines()[0] == "# G"
    with pytest.raises(ValueError, match="already has profile 'full', not 'tiny'"):
        report.apply_profile("tiny")
    with pytest.raises(ValueError, match="non-empty profile"):
        GroupReport("G").apply_profile("")


@dataclasses.dataclass(frozen=True)
class _Config:
    value: int = 1


def test_the_runner_makes_every_groups_tiny_report_a_smoke_run(tmp_path):
    def run(ctx):
        report = GroupReport("toy report")
        report.verdict("the toy effect", True, "always")
        return report

    group = Group("toy", "toy group", run, {p: _Config() for p in PROFILES})
    run_groups({"toy": group}, None, tmp_path, "tiny", progress=False)
    done = read_done(tmp_path / "toy")
    assert done["verdict"].startswith("**Verdict: none stated (smoke run)**")
    assert [(v["reproduced"], v["stated"]) for v in done["verdicts"]] == [(None, False)]
    assert "no verdict stated" in (tmp_path / "toy" / "table.md").read_text().splitlines()[0]
