"""Statistics (gridplan.metrics.stats): mean ± SE, Spearman with bootstrap CIs, iso-error pairs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import bootstrap, spearmanr

from gridplan.metrics.stats import (
    difference_se,
    iso_error_pairs,
    mean_se,
    spearman_ci,
    summarize_episodes,
)
from gridplan.planning.closed_loop import GOAL, EpisodeResults


@pytest.fixture(scope="module")
def noisy_pairs() -> tuple[np.ndarray, np.ndarray]:
    """40 pairs with a clear but imperfect negative rank relation."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, 40)
    return x, -x + rng.normal(0, 0.3, 40)


def test_mean_se_of_a_tiny_array_by_hand():
    # mean 2.5; sample variance ((1.5^2 + 0.5^2) * 2) / 3 = 5/3; SE = sqrt(5/3) / 2.
    mean, se, n = mean_se([1.0, 2.0, 3.0, 4.0])
    assert (mean, n) == (2.5, 4)
    assert se == pytest.approx(math.sqrt(5 / 3) / 2)


def test_mean_se_flattens_seeds_by_episodes():
    success = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # 2 seeds x 2 episodes
    mean, se, n = mean_se(success)
    assert (mean, n) == (0.75, 4)
    assert se == pytest.approx(0.25)  # std(ddof=1) = 0.5


def test_mean_se_of_one_value_has_undefined_se():
    mean, se, n = mean_se([0.7])
    assert (mean, n) == (0.7, 1) and math.isnan(se)


@pytest.mark.parametrize(("bad", "message"), [([], "empty"), ([1.0, float("nan")], "finite")])
def test_mean_se_rejects_empty_or_non_finite_input(bad, message):
    with pytest.raises(ValueError, match=message):
        mean_se(bad)


def test_spearman_of_a_monotone_sequence_is_plus_or_minus_one():
    x = np.arange(10.0)
    up = spearman_ci(x, x**3)
    down = spearman_ci(x, -np.exp(x))
    assert (up.rho, up.low, up.high) == pytest.approx((1.0, 1.0, 1.0)) and up.n == 10
    assert (down.rho, down.low, down.high) == pytest.approx((-1.0, -1.0, -1.0))


def test_spearman_matches_the_hand_formula_without_ties():
    # Rank differences (-1, 1, -1, 1, 0): rho = 1 - 6 * 4 / (5 * 24) = 0.8.
    assert spearman_ci([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]).rho == pytest.approx(0.8)


def test_bootstrap_ci_contains_the_estimate_and_is_reproducible(noisy_pairs):
    x, y = noisy_pairs
    a = spearman_ci(x, y, seed=1)
    assert a.rho == pytest.approx(spearmanr(x, y).statistic)
    assert a.low < a.rho < a.high < 0
    assert spearman_ci(x, y, seed=1) == a
    assert spearman_ci(x, y, seed=2) != a


def test_bootstrap_ci_agrees_with_scipy_paired_percentile_bootstrap(noisy_pairs):
    x, y = noisy_pairs
    ours = spearman_ci(x, y, n_resamples=2000, seed=0)
    ref = bootstrap(
        (x, y),
        lambda a, b: spearmanr(a, b).statistic,
        paired=True,
        vectorized=False,
        n_resamples=2000,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.05)
    assert ours.high == pytest.approx(ref.high, abs=0.05)


def test_constant_input_has_no_spearman():
    r = spearman_ci([1.0, 1.0, 1.0, 1.0], [0.1, 0.5, 0.2, 0.9])
    assert math.isnan(r.rho) and math.isnan(r.low) and r.n == 4
    assert json.loads(json.dumps(r.to_dict()))["rho"] is None


def test_degenerate_resamples_are_dropped_not_propagated():
    # Three pairs: about a quarter of resamples repeat one x value only (no rho).
    r = spearman_ci([0.0, 1.0, 2.0], [0.0, 1.0, 2.0], n_resamples=500)
    assert (r.rho, r.low, r.high) == pytest.approx((1.0, 1.0, 1.0))


@pytest.mark.parametrize(
    ("x", "y", "kwargs", "message"),
    [
        ([1, 2, 3], [1, 2], {}, "same length"),
        ([1, 2], [1, 2], {}, "at least 3"),
        ([1, 2, float("inf")], [1, 2, 3], {}, "finite"),
        ([1, 2, 3], [1, 2, 3], {"n_resamples": 0}, "n_resamples"),
        ([1, 2, 3], [1, 2, 3], {"confidence": 1.0}, "confidence"),
    ],
)
def test_spearman_rejects_bad_input(x, y, kwargs, message):
    with pytest.raises(ValueError, match=message):
        spearman_ci(x, y, **kwargs)


@pytest.fixture
def pool():
    """Five models: E_tot, DRPE, success. Hand-checked pairs (10% of the larger E_tot):
    (0, 1): |100 - 105| = 5 <= 10.5; (1, 2): 10 <= 11.5; (0, 2): 15 > 11.5;
    (3, 4): 10 <= 21; every pair across the two groups differs by far more."""
    e_tot = [100.0, 105.0, 115.0, 200.0, 210.0]
    drpe = [0.0, 0.05, 0.1, 0.0, 0.2]
    success = [0.97, 0.6, 0.4, 0.9, 0.1]
    return e_tot, drpe, success


def test_iso_pairs_are_selected_by_relative_total_error(pool):
    iso = iso_error_pairs(*pool)
    assert iso.pairs.tolist() == [[0, 1], [1, 2], [3, 4]]
    np.testing.assert_allclose(iso.delta_drpe, [0.05, 0.05, 0.2])
    np.testing.assert_allclose(iso.delta_success, [0.37, 0.2, 0.8])
    assert len(iso) == 3 and iso.tolerance == 0.10


def test_iso_pair_spearman_is_over_the_pair_gaps(pool):
    # |dDRPE| ranks (1.5, 1.5, 3), |dsuccess| ranks (2, 1, 3): rho = 1.5 / sqrt(1.5 * 2).
    iso = iso_error_pairs(*pool)
    assert iso.spearman.rho == pytest.approx(1.5 / math.sqrt(3.0))
    assert iso.spearman.n == 3


def test_strongest_pairs_are_sorted_by_success_gap(pool):
    top = iso_error_pairs(*pool).strongest(2)
    assert [(p["i"], p["j"]) for p in top] == [(3, 4), (0, 1)]
    assert top[0]["delta_success"] == pytest.approx(0.8)
    assert top[0]["e_tot"] == (200.0, 210.0) and top[0]["drpe"] == (0.0, 0.2)


def test_the_ten_percent_boundary_is_inclusive():
    assert iso_error_pairs([90.0, 100.0], [0, 1], [0, 1]).pairs.tolist() == [[0, 1]]
    assert len(iso_error_pairs([89.0, 100.0], [0, 1], [0, 1])) == 0


def test_too_few_pairs_give_an_undefined_spearman(pool):
    iso = iso_error_pairs(*pool, tolerance=0.05)
    assert iso.pairs.tolist() == [[0, 1], [3, 4]]
    assert math.isnan(iso.spearman.rho)
    assert json.loads(json.dumps(iso.to_dict()))["n_pairs"] == 2


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([1.0, 2.0], [0, 1], [0]), {}, "same length"),
        (([1.0], [0], [0]), {}, "at least 2"),
        (([-1.0, 1.0], [0, 1], [0, 1]), {}, "non-negative"),
        (([1.0, 1.0], [0, 1], [0, 1]), {"tolerance": -0.1}, "tolerance"),
    ],
)
def test_iso_pairs_reject_bad_input(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        iso_error_pairs(*args, **kwargs)


def _results(success: list[int], outcome: list[int]) -> EpisodeResults:
    n = len(success)
    return EpisodeResults(
        success=torch.tensor(success, dtype=torch.bool),
        returns=torch.zeros(n),
        steps=torch.ones(n, dtype=torch.long),
        outcome=torch.tensor(outcome),
    )


def test_episode_summaries_split_settings_and_seeds_as_evaluate_lays_them_out():
    # 2 settings x 2 seeds x 2 episodes, setting-major then seed-major.
    res = _results([1, 1, 1, 0, 0, 0, 1, 0], [GOAL, GOAL, GOAL, 2, 1, 2, GOAL, 1])
    first, second = summarize_episodes(res, n_settings=2, n_seeds=2)
    assert (first.success, first.n_episodes, first.per_seed) == (0.75, 4, (1.0, 0.5))
    assert first.success_se == pytest.approx(0.25)  # std(1, 1, 1, 0) = 0.5, / sqrt(4)
    assert first.outcomes == {"goal": 3, "hazard": 0, "timeout": 1}
    assert (second.success, second.per_seed) == (0.25, (0.0, 0.5))
    assert second.outcomes == {"goal": 1, "hazard": 2, "timeout": 1}
    # One setting, one seed: what python -m eval reports.
    (whole,) = summarize_episodes(res)
    assert (whole.success, whole.n_episodes) == (0.5, 8)
    assert whole.success == mean_se(res.success.float())[0]


def test_episode_summaries_reject_blocks_that_do_not_split():
    with pytest.raises(ValueError, match="8 episodes do not split into 3 settings x 1 seeds"):
        summarize_episodes(_results([1] * 8, [GOAL] * 8), n_settings=3)


def test_difference_se_adds_the_variances_and_treats_a_missing_se_as_zero():
    diff, se = difference_se(0.9, 0.03, 0.5, 0.04)
    assert diff == pytest.approx(0.4) and se == pytest.approx(0.05)
    assert difference_se(0.5, None, 0.25, 0.0) == (0.25, 0.0)
