"""Honest verdicts: the paper's effects are scored with criteria that can fail (the exact
Table 2 pair, the row factor, the columns, E5's magnitude, AR(1)'s dose response), and
claims that hold by construction are sanity checks that never count as reproduced."""

from __future__ import annotations

from gridplan.core.readings import BELIEF, CARRIED_FLAGS, PROJECT
from gridplan.experiments import e1, e6, settings
from gridplan.experiments.e1 import error_channels, table2_models
from gridplan.experiments.records import ControlledRecord, model_name
from gridplan.experiments.tables import GroupReport


def record(sr: float, si: float, e_tot: float, success: float, se: float = 0.02):
    return ControlledRecord(
        name=model_name(sr, si),
        family="controlled",
        sigma_r=sr,
        sigma_i=si,
        E_tot=e_tot,
        DRPE_graded=sr,
        DRPE_binary=sr,
        VPE=0.0,
        success=success,
        success_se=se,
        n_episodes=300,
        outcomes={"goal": round(300 * success), "hazard": 0, "timeout": round(300 * (1 - success))},
        per_seed=(success,),
        profile=(0.0,) * 12,
    )


def verdicts_of(report: GroupReport) -> dict[str, bool | None]:
    return {v.claim.split(" (")[0]: v.reproduced for v in report.verdicts}


def test_sanity_checks_are_listed_but_never_counted():
    report = GroupReport("toy")
    report.verdict("an effect", False, "numbers")
    report.sanity("a construction", True, "it cannot fail", "zero")
    assert report.overall() == "**Verdict: does not reproduce** (0 of 1 effects reproduce)."
    text = report.markdown()
    assert "Sanity checks (hold by construction; not counted)" in text
    assert "- **holds** — a construction. zero. By construction: it cannot fail." in text


def grid(oracle, e03, e01_2, e35_0, e35, e35_12, s35):
    """A 2 x 3 grid (σR 0 and 0.35; σI 0, 0.1 or 0.3, 1.2) holding Table 2's models."""
    return [
        record(0.0, 0.0, oracle, 0.97),
        record(0.0, 0.3, e03, 0.97),
        record(0.0, 1.2, e01_2, 0.97),
        record(0.35, 0.0, e35_0, s35),
        record(0.35, 0.1, e35, s35),
        record(0.35, 1.2, e35_12, s35),
    ]


#: The paper's numbers (Table 2; rows x14 and x91), and this repository's default reading's
#: (docs/RESULTS.md before readings: the pair 21% apart, the oracle at 0.045, rows x2.8-x3.8).
PAPERS = grid(0.020, 0.151, 91 * 0.020, 0.14, 0.152, 14 * 0.14, 0.37)
PROJECTS = grid(0.045, 0.098, 0.171, 0.071, 0.077, 0.198, 0.28)
EXACT = (
    "The paper's own pair M(0, 0.3) and M(0.35, 0.1) is matched in total error and differs "
    "widely in success"
)
SCALE = "Table 2's total errors: oracle 0.020, M(0, 0.3) 0.151, M(0.35, 0.1) 0.152"
FACTOR = "Along a row of fixed σR, E_tot varies by a factor of 14 to 91"


def e1_verdicts(records) -> dict[str, bool | None]:
    report = GroupReport("e1")
    rows = e1.row_homogeneity(records)
    iso = e1.iso_pairs(records, settings.E1["full"])[0]
    e1.verdicts(report, records, iso, rows, table2_models(records), 0.10)
    return verdicts_of(report)


def test_the_exact_table_2_pair_the_scale_and_the_row_factor_pass_with_the_papers_numbers():
    papers, ours = e1_verdicts(PAPERS), e1_verdicts(PROJECTS)
    assert (papers[EXACT], papers[SCALE], papers[FACTOR]) == (True, True, True)
    assert (ours[EXACT], ours[SCALE], ours[FACTOR]) == (False, False, False)


def test_a_column_whose_success_rises_with_sigma_r_fails():
    claim = "Along any column of fixed σI, success is non-increasing in σR"
    assert e1_verdicts(PAPERS)[claim] is True
    # The σI = 0 column: 0.50 at σR = 0, 1.00 at σR = 0.35.
    rising = [record(0.0, 0.0, 0.020, 0.5), *PAPERS[1:3], record(0.35, 0.0, 0.14, 1.0, 0.0)]
    rising += PAPERS[4:]
    assert e1_verdicts(rising)[claim] is False


def test_the_row_success_check_is_a_sanity_check_not_a_verdict():
    report = GroupReport("e1")
    records = PAPERS
    iso = e1.iso_pairs(records, settings.E1["full"])[0]
    e1.verdicts(report, records, iso, e1.row_homogeneity(records), table2_models(records), 0.1)
    assert [c.claim for c in report.sanity_checks] == [
        "Along a row of fixed σR success is statistically constant (§5.1)"
    ]
    assert all("statistically constant" not in v.claim for v in report.verdicts)


def ar1_row(sr: float, success: float) -> e6.AR1Row:
    return e6.AR1Row(
        model=model_name(sr, 0.0),
        sigma_r=sr,
        sigma_i=0.0,
        kind="relevant" if sr else "irrelevant",
        depth=4,
        rho=0.8,
        success_ar1=success,
        success_ar1_se=0.02,
        success_indep=success,
        success_indep_se=0.02,
        success_oracle=1.0,
        success_oracle_se=0.0,
        E_tot_ar1=0.1,
        E_tot_indep=0.1,
        DRPE_ar1=0.1,
        DRPE_indep=0.1,
        n_episodes=300,
    )


def test_the_ar1_dose_response_verdict_needs_a_rise_beyond_two_se():
    cfg = settings.E6["full"]
    claim = "With AR(1) noise the relevant-noise dose response is not monotone"
    for successes, want in [((1.0, 0.32, 0.20), False), ((1.0, 0.20, 0.40), True)]:
        report = GroupReport("e6")
        rows = [ar1_row(0.0, 1.0)] + [
            ar1_row(sr, s) for sr, s in zip((0.15, 0.25, 0.35), successes, strict=True)
        ]
        e6.ar1_report(report, cfg, rows)
        assert verdicts_of(report)[claim] is want
        assert [c.claim.split(" (")[0] for c in report.sanity_checks] == [
            "With AR(1) noise irrelevant noise stays harmless"
        ]


def test_the_table_2_note_names_the_switches_that_keep_errors_small():
    assert len(error_channels(PROJECT)) == 4
    assert error_channels(CARRIED_FLAGS) == []
    assert error_channels(BELIEF) == []
