"""E9, the latent zoo: the two-stage bootstrap over configurations then seeds, the ranking on
hand-built zoos with known ρ, verdicts that can fail, the settings' checks, and the tiny
profile end to end (slow)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gridplan.evaluation.spec import LEARNED
from gridplan.experiments import GROUPS, settings
from gridplan.experiments.e9 import (
    CLAIMS,
    METRICS,
    LatentZooRecord,
    config_means,
    config_seed_counts,
    meta_table,
    rank_metric,
    verdicts,
)
from gridplan.experiments.runner import read_done, run_groups
from gridplan.experiments.tables import GroupReport, RuleReport


def record(key: str, seed: int, success: float, **metrics) -> LatentZooRecord:
    return LatentZooRecord(
        key=key, family="jepa", obs="grid", budget="1k", seed=seed, ties="first", checkpoint="c",
        epochs=1,
        train_seconds=0.0, eval_seconds=0.0, success=success, success_se=0.0, n_episodes=10,
        decision_agreement=1.0, decoder="frozen",
        metrics={k: metrics.get(k) for k in METRICS},
    )  # fmt: skip


def zoo(metric: str, values, successes) -> list[LatentZooRecord]:
    return [
        record(f"c{k // 2}", k % 2, s, **{metric: v})
        for k, (v, s) in enumerate(zip(values, successes, strict=True))
    ]


def test_config_then_seed_counts_keep_each_configuration_whole():
    groups = ["a", "a", "b", "b", "c", "c"]
    counts = config_seed_counts(groups, n_resamples=400, seed=1)
    assert counts.shape == (400, 6)
    assert np.all(counts.sum(axis=1) == 6)  # three configurations of two seeds each drawn
    # A configuration's seeds are drawn only when the configuration is: both zero or both sum
    # to a multiple of its size.
    for lo in (0, 2, 4):
        assert np.all((counts[:, lo : lo + 2].sum(axis=1) % 2) == 0)
    assert np.any(counts[:, 0] == 0) and np.any(counts[:, 0] >= 2)


def test_a_metric_that_orders_success_exactly_has_rho_minus_one():
    records = zoo("DRPE", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.9, 0.8, 0.6, 0.4, 0.2, 0.0])
    row = rank_metric(records, "DRPE", n_resamples=300)
    assert row.rho == pytest.approx(-1.0) and row.n == 6
    assert row.high == pytest.approx(-1.0)  # every resample with two values orders them alike
    assert row.model_high == pytest.approx(-1.0)


def test_a_metric_defined_on_fewer_than_three_models_has_no_rho():
    records = zoo("recon_loss", [0.1, 0.2, None, None], [0.9, 0.1, 0.5, 0.4])
    row = rank_metric(records, "recon_loss", n_resamples=100)
    assert row.rho is None and row.n == 2
    assert row.undefined == "2 models define it (needs 3)"


def test_an_undefined_rho_says_which_side_is_constant():
    flat = rank_metric(zoo("DRPE", [0.1, 0.2, 0.3, 0.4], [0.0] * 4), "DRPE", n_resamples=50)
    assert flat.rho is None and flat.undefined == "success is 0.00 for every model"
    same = rank_metric(zoo("DRPE", [0.5] * 4, [0.1, 0.2, 0.3, 0.4]), "DRPE", n_resamples=50)
    assert same.rho is None and same.undefined == "the metric is 0.5 for every model"


def test_resamples_with_constant_success_are_counted_not_hidden():
    # Only configuration c1 succeeds: a resample drawing c0 twice (1/4) has no rho, nor one
    # drawing c1 twice with a single model copied four times (1/4 * 2/16): 72% are defined.
    row = rank_metric(zoo("DRPE", [0.4, 0.3, 0.2, 0.1], [0.0, 0.0, 0.5, 0.7]), "DRPE", 2000)
    assert row.rho == pytest.approx(-4.5 / np.sqrt(22.5))
    assert row.defined == pytest.approx(0.71875, abs=0.03)


def test_the_table_is_sorted_by_absolute_rho_and_means_are_per_configuration():
    records = zoo("DRPE", [0.1, 0.2, 0.3, 0.4], [0.9, 0.7, 0.3, 0.1])
    records = [dataclasses.replace(r, metrics={**r.metrics, "E_tot": e}) for r, e in
               zip(records, [0.1, 0.3, 0.2, 0.4], strict=True)]  # fmt: skip
    rows = meta_table(records, n_resamples=100)
    assert [r.metric for r in rows[:2]] == ["DRPE", "E_tot"]
    assert rows[0].rho == pytest.approx(-1.0) and rows[1].rho == pytest.approx(-0.8)
    means = config_means(records)
    assert [m["key"] for m in means] == ["c0", "c1"]
    assert means[0]["success"] == pytest.approx(0.8) and means[0]["DRPE"] == pytest.approx(0.15)


#: Metric values of six models whose success rises with their index: ``UP`` orders them as
#: success does, ``DOWN`` the other way round, ``FLAT`` barely (ρ +0.09).
UP, DOWN, FLAT = [0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 5, 0, 4, 1, 3]


def _rows(**values) -> list:
    succ = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]
    records = [
        record(f"c{k // 2}", k % 2, s, **{m: float(v[k]) for m, v in values.items()})
        for k, s in enumerate(succ)
    ]
    return meta_table(records, n_resamples=200), config_means(records)


def test_verdicts_can_fail_and_reduced_profiles_state_none():
    # The latent loss and E_tot rank success perfectly, DRPE barely; E_excess and regret rise
    # with success, consistency falls: every claim on the ranking fails.
    rows, configs = _rows(
        latent_pred_loss=DOWN, DRPE=FLAT, E_tot=DOWN, E_excess=UP,
        action_consistency=DOWN, decision_regret=UP,
    )  # fmt: skip
    report = GroupReport("t", "full")
    verdicts(report, rows, configs)
    assert len(report.verdicts) == len(CLAIMS)
    assert [v.reproduced for v in report.verdicts] == [True, False, False, False, False, False]
    other = GroupReport("t", "full")
    verdicts(RuleReport(other, "random"), rows, configs)
    assert [v.claim for v in other.verdicts] == [f"{c} [ties=random]" for c in CLAIMS.values()]
    assert [v.reproduced for v in other.verdicts] == [v.reproduced for v in report.verdicts]
    quiet = GroupReport("t", "quick")
    verdicts(quiet, rows, configs)
    assert all(v.reproduced is None and not v.stated for v in quiet.verdicts)


def test_verdicts_hold_when_the_numbers_say_so():
    rows, configs = _rows(
        latent_pred_loss=FLAT, DRPE=DOWN, E_tot=FLAT, E_excess=DOWN,
        action_consistency=UP, decision_regret=DOWN,
    )  # fmt: skip
    report = GroupReport("t", "full")
    verdicts(report, rows, configs)
    assert all(v.reproduced for v in report.verdicts[1:])


def test_the_full_zoo_holds_at_least_24_latent_models_and_bad_settings_are_refused():
    full = settings.E9["full"]
    assert full.n_models >= 24
    assert set(full.families) == {"latent_recon", "jepa"}
    # docs/PREREGISTERED.md, Rule 6: trained as `python -m train` trains, measured with the
    # learned protocol of `python -m eval --ckpt`.
    assert full.train_overrides == () and full.budgets == ("4k", "20k")
    assert full.protocol == LEARNED
    assert GROUPS["e9"].configs is settings.E9
    with pytest.raises(ValueError, match="E9Config.budgets is empty"):
        dataclasses.replace(full, budgets=())
    with pytest.raises(ValueError, match="ranking needs >= 3"):
        dataclasses.replace(full, families=("jepa",), observations=("grid",), budgets=("1k",),
                            train_seeds=(0, 1))  # fmt: skip


@pytest.mark.slow
def test_the_tiny_profile_runs_end_to_end_and_states_no_verdict(tmp_path):
    run_groups(GROUPS, ["e9"], tmp_path, "tiny", progress=False)
    folder = tmp_path / "e9"
    assert read_done(folder)["profile"] == "tiny"
    results = json.loads((folder / "results.json").read_text())
    assert len(results["models"]) == settings.E9["tiny"].n_models
    assert results["ties"] == ["first", "random"]
    for rule in ("first", "random"):
        models = results["by_ties"][rule]["models"]
        assert [m["ties"] for m in models] == [rule] * settings.E9["tiny"].n_models
    assert (folder / "models_ties-random.csv").exists()
    assert (folder / "fig_latent_zoo_ties-random.png").exists()
    assert results["verdicts_stated"] is False
    table = (folder / "table.md").read_text()
    assert "no verdict stated" in table and "Which metric ranks latent models" in table
    assert (folder / "fig_latent_zoo.png").exists()
