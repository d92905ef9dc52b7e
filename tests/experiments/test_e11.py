"""E11, the architecture zoo (``gridplan/experiments/e11.py``): the pools, the paired margin
over configurations then seeds with known answers, verdicts that can fail and a precondition
that voids them, the settings' checks, and the tiny profile end to end (slow)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gridplan.evaluation.spec import LEARNED
from gridplan.experiments import GROUPS, settings
from gridplan.experiments.e9 import LatentZooRecord
from gridplan.experiments.e11 import CLAIMS, METRICS, margin_row, pool_of, rank, verdicts
from gridplan.experiments.runner import read_done, run_groups
from gridplan.experiments.settings import Architecture
from gridplan.experiments.tables import GroupReport, RuleReport

#: Six configurations of two seeds: two state-model families, then four latent ones.
FAMILIES = ["mlp", "ensemble5", "latent_recon", "jepa", "rssm", "tdmpc"]
#: Success rises with the configuration's index.
SUCCESS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9]


def record(k: int, success: float, **metrics) -> LatentZooRecord:
    family = FAMILIES[k // 2]
    return LatentZooRecord(
        key=f"{family}-c", family=family, obs="state", budget="4k", seed=k % 2, ties="first",
        checkpoint="c", epochs=1, train_seconds=1.0, eval_seconds=2.0, success=success,
        success_se=0.0, n_episodes=10, decision_agreement=1.0, decoder="none",
        metrics={m: metrics.get(m) for m in METRICS},
    )  # fmt: skip


def zoo(successes=SUCCESS, **values) -> list[LatentZooRecord]:
    return [
        record(k, s, **{m: None if v[k] is None else float(v[k]) for m, v in values.items()})
        for k, s in enumerate(successes)
    ]


DOWN = list(range(12, 0, -1))  # orders the models exactly against success: ρ = −1
UP = list(range(12))  # ρ = +1
#: Barely related to success: ρ = −0.07 over the twelve models.
FLAT = [5, 9, 2, 11, 0, 7, 3, 10, 1, 8, 6, 4]
LATENT_ONLY = [None] * 4 + list(range(8, 0, -1))


def test_pools_hold_every_model_or_the_latent_families_only():
    records = zoo(DRPE=DOWN)
    assert len(pool_of(records, "all")) == 12
    assert {r.family for r in pool_of(records, "latent")} == {"latent_recon", "jepa", "rssm",
                                                               "tdmpc"}  # fmt: skip
    with pytest.raises(ValueError, match="unknown pool 'state'; valid: all, latent"):
        pool_of(records, "state")


def test_the_margin_of_an_exact_metric_over_a_flat_one_is_one_minus_its_abs_rho():
    row = margin_row(zoo(DRPE=DOWN, E_tot=FLAT), "all", "DRPE", "E_tot", n_resamples=400)
    rho_flat = np.corrcoef(FLAT, range(12))[0, 1]  # ranks are the values themselves
    assert row.n == 12 and row.margin == pytest.approx(1.0 - abs(rho_flat))
    assert row.low > 0 and row.high <= 1.0 and row.defined == 1.0
    # The same metric on both sides: every resample's margin is exactly zero.
    same = margin_row(zoo(DRPE=DOWN, E_tot=DOWN), "all", "DRPE", "E_tot", n_resamples=100)
    assert same.margin == 0.0 and same.low == 0.0 and same.high == 0.0


def test_a_zoo_of_constant_success_has_no_margin_in_any_resample():
    row = margin_row(zoo([0.0] * 12, DRPE=DOWN, E_tot=FLAT), "all", "DRPE", "E_tot", 100)
    assert row.n == 12 and row.margin is None and row.low is None and row.defined == 0.0


def test_the_margin_is_taken_over_the_models_that_define_both_metrics():
    row = margin_row(zoo(DRPE=DOWN, E_pred=LATENT_ONLY), "all", "DRPE", "E_pred", 100)
    assert row.n == 8 and row.margin == pytest.approx(0.0)
    none = margin_row(zoo(DRPE=DOWN), "latent", "DRPE", "E_pred", 100)
    assert none.n == 0 and none.margin is None and none.low is None


def states(report) -> list:
    return [v.reproduced for v in report.verdicts]


def test_verdicts_hold_when_the_numbers_say_so_and_fail_otherwise():
    good = rank(zoo(DRPE=DOWN, E_tot=FLAT, E_pred=[None] * 4 + FLAT[:8], E_excess=LATENT_ONLY,
                    decision_regret=DOWN, decision_agreement=UP), 200)  # fmt: skip
    report = GroupReport("t", "full")
    verdicts(report, good)
    assert len(report.verdicts) == len(CLAIMS) and states(report) == [True] * len(CLAIMS)
    bad = rank(zoo(DRPE=FLAT, E_tot=DOWN, E_pred=LATENT_ONLY, E_excess=[None] * 4 + UP[:8],
                   decision_regret=FLAT, decision_agreement=UP), 200)  # fmt: skip
    report = GroupReport("t", "full")
    verdicts(report, bad)
    assert states(report) == [True, False, False, False, False, False]
    other = GroupReport("t", "full")
    verdicts(RuleReport(other, "random"), bad)
    assert [v.claim for v in other.verdicts] == [f"{c} [ties=random]" for c in CLAIMS.values()]
    quiet = GroupReport("t", "quick")
    verdicts(quiet, good)
    assert all(v.reproduced is None and not v.stated for v in quiet.verdicts)


def test_a_zoo_that_does_not_span_success_voids_the_ranking_claims():
    narrow = [0.5 + 0.01 * k for k in range(12)]  # every configuration between 0.5 and 0.62
    ranked = rank(zoo(narrow, DRPE=DOWN, E_tot=FLAT, E_excess=LATENT_ONLY,
                      decision_regret=DOWN), 200)  # fmt: skip
    report = GroupReport("t", "full")
    verdicts(report, ranked)
    assert states(report) == [False, None, None, None, None, None]
    assert report.verdicts[1].detail.startswith("void: the zoo does not span success")


def test_the_full_zoo_is_every_architecture_as_python_m_train_trains_it():
    full = settings.E11["full"]
    assert GROUPS["e11"].configs is settings.E11
    assert set(full.families) == {"mlp", "ensemble5", "latent_recon", "jepa", "rssm", "tdmpc"}
    assert dict(full.pairs)["mlp"] == "state" and full.n_models == 84
    # docs/PREREGISTERED.md, Rule 8: nothing overridden, the learned protocol of python -m eval.
    assert full.train_overrides == () and full.budgets == ("4k", "20k")
    assert full.train_seeds == (0, 1, 2) and full.protocol == LEARNED
    assert settings.E11["quick"].n_models < full.n_models


@pytest.mark.parametrize(
    "change, message",
    [
        ({"budgets": ()}, "E11Config.budgets is empty"),
        (
            {"architectures": (Architecture(family="mamba", observations=("state",)),)},
            "no model choice 'mamba'",
        ),
        (
            {"architectures": (Architecture(family="jepa", observations=("audio",)),)},
            "no obs choice 'audio'",
        ),
        (
            {"architectures": (Architecture(family="jepa", observations=()),)},
            "family 'jepa' has no observation",
        ),
        (
            {"architectures": 2 * (Architecture(family="jepa", observations=("grid",)),)},
            "a family appears twice",
        ),
        ({"budgets": ("1k",), "train_seeds": (0,), "architectures": (
            Architecture(family="mlp", observations=("state",)),)}, "ranking needs >= 3"),
    ],
)  # fmt: skip
def test_bad_settings_are_refused_with_the_problem_named(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(settings.E11["full"], **change)


@pytest.mark.slow
def test_the_tiny_profile_runs_end_to_end_and_states_no_verdict(tmp_path):
    run_groups(GROUPS, ["e11"], tmp_path, "tiny", progress=False)
    folder = tmp_path / "e11"
    tiny = settings.E11["tiny"]
    assert read_done(folder)["profile"] == "tiny"
    results = json.loads((folder / "results.json").read_text())
    assert results["ties"] == ["first", "random"] and results["verdicts_stated"] is False
    for rule in ("first", "random"):
        models = results["by_ties"][rule]["models"]
        assert [m["ties"] for m in models] == [rule] * tiny.n_models
        assert [m["family"] for m in models] == list(tiny.families)
        for m in models:
            latent = m["family"] not in ("mlp", "ensemble5")
            assert (m["E_pred"] is not None) == latent, m["family"]
            assert m["DRPE"] is not None and 0.0 <= m["success"] <= 1.0
            assert m["decoder"] == ("none" if not latent else m["decoder"])
    assert (folder / "margins_ties-random.csv").exists()
    assert (folder / "fig_architecture_zoo.png").exists()
    table = (folder / "table.md").read_text()
    assert "no verdict stated" in table and "Which metric ranks every architecture" in table
    assert "Margins: |ρ(a)| − |ρ(b)|" in table
