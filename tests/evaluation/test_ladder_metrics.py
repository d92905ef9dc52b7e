"""Known answers of the ladder's statistics on tiny hand-built arrays: PRA, MMRV, Spearman,
risk-coverage and AURC, Brier and value error, the paired hierarchical bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from gridplan.evaluation.common import RATE, Estimate
from gridplan.evaluation.fidelity import Branches
from gridplan.evaluation.outcome import PolicyRuns, outcome_fidelity
from gridplan.evaluation.ranking import (
    mean_max_rank_violation,
    pairwise_ranking_accuracy,
    policy_ranking,
    spearman,
)
from gridplan.metrics.bootstrap import (
    paired_hierarchical_bootstrap,
    resample_means,
    resample_spearman,
    spearman_of_counts,
)
from gridplan.metrics.calibration import aurc, risk_coverage, uncertainty_quality

# Three policies: the model swaps the order of the last two.
J_TRUE = [0.1, 0.5, 0.3]
J_MODEL = [0.2, 0.4, 0.6]


def test_pra_counts_the_pairs_ordered_alike():
    # (0,1) and (0,2) agree, (1,2) is swapped.
    assert pairwise_ranking_accuracy(J_TRUE, J_MODEL) == pytest.approx(2 / 3)
    assert pairwise_ranking_accuracy(J_TRUE, J_TRUE) == 1.0


def test_pra_drops_pairs_tied_in_truth_and_counts_model_ties_as_misses():
    assert pairwise_ranking_accuracy([0.1, 0.1, 0.3], [0.3, 0.2, 0.4]) == 1.0
    assert pairwise_ranking_accuracy([0.1, 0.2], [0.5, 0.5]) == 0.0
    assert math.isnan(pairwise_ranking_accuracy([0.2, 0.2], [0.1, 0.3]))


def test_mmrv_is_the_mean_of_each_policys_largest_misranked_gap():
    # Policy 0 is never mis-ranked; policies 1 and 2 are mis-ranked against each other (gap .2).
    assert mean_max_rank_violation(J_TRUE, J_MODEL) == pytest.approx((0 + 0.2 + 0.2) / 3)
    assert mean_max_rank_violation(J_TRUE, J_TRUE) == 0.0
    # Reversed order: each policy's largest gap is to the policy farthest from it.
    assert mean_max_rank_violation([0.0, 0.5, 1.0], [1.0, 0.5, 0.0]) == pytest.approx(
        (1.0 + 0.5 + 1.0) / 3
    )


def test_spearman_of_hand_ranks():
    # ranks (1, 3, 2) vs (1, 2, 3): sum d^2 = 2, rho = 1 - 6*2 / (3*8).
    assert spearman(J_TRUE, J_MODEL) == pytest.approx(0.5)
    assert math.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_ranking_functions_reduce_the_last_axis_of_replicates():
    reps_t = np.array([J_TRUE, J_TRUE])
    reps_m = np.array([J_MODEL, J_TRUE])
    np.testing.assert_allclose(pairwise_ranking_accuracy(reps_t, reps_m), [2 / 3, 1.0])
    np.testing.assert_allclose(spearman(reps_t, reps_m), [0.5, 1.0])
    np.testing.assert_allclose(mean_max_rank_violation(reps_t, reps_m), [0.4 / 3, 0.0])


def test_ranking_rejects_bad_inputs():
    with pytest.raises(ValueError, match="same shape"):
        spearman([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="at least 2"):
        pairwise_ranking_accuracy([1.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        mean_max_rank_violation([1.0, float("nan")], [1.0, 2.0])


def test_policy_ranking_of_identical_values_is_perfect_with_a_degenerate_interval():
    j = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.5, 0.7], [0.9, 0.8, 1.0, 0.9]])
    r = policy_ranking(("a", "b", "c"), j, j, n_resamples=200)
    assert (r.spearman.mean, r.pra.mean, r.mmrv.mean) == (1.0, 1.0, 0.0)
    assert (r.pra.low, r.pra.high) == (1.0, 1.0)
    assert r.j_true == pytest.approx((0.25, 0.575, 0.9))


def test_risk_coverage_and_aurc_by_hand():
    e = [1.0, 4.0, 2.0, 3.0]
    coverage, risk = risk_coverage([0.1, 0.4, 0.2, 0.3], e)
    np.testing.assert_allclose(coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [1.0, 1.5, 2.0, 2.5])
    assert aurc([0.1, 0.4, 0.2, 0.3], e) == pytest.approx(1.75)
    # The most certain rows are the worst: risks 4, 3.5, 3, 2.5.
    assert aurc([0.4, 0.1, 0.3, 0.2], e) == pytest.approx(3.25)


def test_aurc_counts_tied_scores_at_their_group_mean():
    # Groups {1, 3} (mean 2) then {2, 6} (mean 4): risks 2, 2, 8/3, 3.
    assert aurc([0.0, 0.0, 1.0, 1.0], [1.0, 3.0, 2.0, 6.0]) == pytest.approx(
        (2 + 2 + 8 / 3 + 3) / 4
    )
    assert aurc([5.0] * 4, [1.0, 3.0, 2.0, 6.0]) == pytest.approx(3.0)


def test_uncertainty_quality_reports_optimal_and_random_areas():
    rng = np.random.default_rng(0)
    err = rng.random(200)
    q = uncertainty_quality(err + 0.01 * rng.random(200), err, "uncertainty", n_resamples=100)
    assert q.spearman.rho > 0.95
    assert q.aurc_optimal <= q.aurc < q.aurc_random
    assert q.aurc_random == pytest.approx(err.mean())
    assert q.curve[-1][0] == 1.0 and q.curve[-1][1] == pytest.approx(err.mean())


def _runs() -> PolicyRuns:
    # One policy, two starts, two rollouts each.
    return PolicyRuns(
        names=("p",),
        true_return=torch.tensor([[[1.0, 0.0], [0.9, 0.9]]]),
        model_return=torch.tensor([[[1.0, 1.0], [0.0, 0.0]]]),
        true_success=torch.tensor([[[True, False], [True, True]]]),
        model_success=torch.tensor([[[True, True], [False, False]]]),
    )


def _branches() -> Branches:
    zeros = torch.zeros(4, 2, 12)
    return Branches(
        pred=zeros,
        true=zeros,
        reward_model=torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
        reward_true=torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
    )


def test_brier_value_error_and_reward_error_by_hand():
    out = outcome_fidelity(_runs(), _branches(), n_resamples=100)
    # p_hat = (1, 0); start 0: ((1-1)^2 + (1-0)^2)/2 = .5, start 1: ((0-1)^2 * 2)/2 = 1.
    assert out.brier.mean == pytest.approx(0.75)
    # p = (.5, 1): start 0 (.25 + .25)/2, start 1 0.
    assert out.brier_floor.mean == pytest.approx(0.125)
    # J_E = mean(1, 0, .9, .9) = .7, J_hat = .5.
    assert out.value_error.mean == pytest.approx(0.2)
    assert out.value_error_per_policy == {"p": pytest.approx(0.2)}
    # One of 8 branches is wrong by 1; it is one of the 2 with a non-zero reward.
    assert out.reward_error.mean == pytest.approx(1 / 8)
    assert out.reward_error_events.mean == pytest.approx(0.5)


def test_estimate_of_a_sample_and_its_clipped_interval():
    est = Estimate.of([1.0, 2.0, 3.0])
    assert (est.mean, est.se, est.n) == (2.0, pytest.approx(1 / math.sqrt(3)), 3)
    rate = Estimate.of([0.0] * 9 + [1.0], RATE)
    assert rate.low == 0.0 and rate.high < 1.0
    with pytest.raises(ValueError, match="finite"):
        Estimate.of([1.0, float("inf")])


def test_paired_bootstrap_of_identical_arms_is_zero():
    a = np.random.default_rng(0).random((2, 4, 5))
    d = paired_hierarchical_bootstrap(a, a, n_resamples=200)
    assert (d.difference, d.low, d.high) == (0.0, 0.0, 0.0)
    assert d.units == (2, 4, 5)


def test_paired_bootstrap_resamples_the_top_level_as_units():
    # All variation sits between 5 training seeds (one of them differs by 1): a resample's
    # difference is (draws of that seed) / 5, Binomial(5, .2) / 5, whose 97.5% point is .6
    # (P[X >= 3] = .058, P[X >= 4] = .007); a flat bootstrap over 100 episodes would be
    # far narrower.
    a = np.zeros((5, 2, 10))
    a[4] = 1.0
    d = paired_hierarchical_bootstrap(a, np.zeros_like(a), n_resamples=4000, seed=1)
    assert d.difference == pytest.approx(0.2)
    assert (d.low, d.high) == (0.0, pytest.approx(0.6))
    assert d.warning is None


def test_paired_bootstrap_warns_with_three_or_fewer_top_level_units():
    a = np.random.default_rng(0).random((3, 4, 5))
    d = paired_hierarchical_bootstrap(a, a * 0.5, n_resamples=100)
    assert d.indicative and "indicative" in d.warning and "training seed" in d.warning
    # A single training seed: the evaluation seeds become the top level (10 > 3: no warning).
    b = np.random.default_rng(1).random((1, 10, 5))
    one = paired_hierarchical_bootstrap(b, np.zeros_like(b), n_resamples=100)
    assert one.warning is None and "conditional" in one.notes[0]


def test_paired_bootstrap_is_seeded_and_validates():
    a = np.random.default_rng(0).random((1, 10, 30))
    b = np.random.default_rng(1).random((1, 10, 30))
    assert paired_hierarchical_bootstrap(a, b, seed=3) == paired_hierarchical_bootstrap(
        a, b, seed=3
    )
    with pytest.raises(ValueError, match="same shape"):
        paired_hierarchical_bootstrap(a, b[:, :5])
    with pytest.raises(ValueError, match="levels"):
        paired_hierarchical_bootstrap(a[0], b[0])
    with pytest.raises(ValueError, match="non-finite"):
        paired_hierarchical_bootstrap(a * np.nan, b)


def test_resample_means_draws_units_jointly():
    x = np.arange(6.0).reshape(2, 3)
    (rx, ry) = resample_means((x, x * 2), n_resamples=50, seed=0)
    assert rx.shape == (50, 2)
    np.testing.assert_allclose(ry, 2 * rx)
    # Row 1 is row 0 + 3 in every unit, so in every replicate.
    np.testing.assert_allclose(rx[:, 1] - rx[:, 0], 3.0)


def test_spearman_of_counts_is_the_rho_of_each_expanded_resample():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 40).astype(float)  # many ties
    y = x + rng.integers(0, 3, 40)
    counts = rng.multinomial(40, np.full(40, 1 / 40), size=25)
    expected = [spearmanr(np.repeat(x, c), np.repeat(y, c)).statistic for c in counts]
    np.testing.assert_allclose(spearman_of_counts(x, y, counts), expected, rtol=0, atol=1e-12)
    # All ones: the plain rho; a resample that is constant on one side: NaN.
    assert spearman_of_counts(x, y, np.ones((1, 40)))[0] == pytest.approx(spearmanr(x, y)[0])
    one = np.zeros((1, 40))
    one[0, 3] = 40
    assert np.isnan(spearman_of_counts(x, y, one)[0])


def test_resample_spearman_is_seeded_and_validates():
    rng = np.random.default_rng(1)
    u = rng.random(200)
    e = u + rng.random(200)
    reps = resample_spearman(u, e, n_resamples=300, seed=4)
    assert reps.shape == (300,) and np.array_equal(reps, resample_spearman(u, e, 300, 4))
    assert np.percentile(reps, 2.5) < spearmanr(u, e)[0] < np.percentile(reps, 97.5)
    with pytest.raises(ValueError, match="at least 3 pairs"):
        resample_spearman([1.0, 2.0], [2.0, 1.0])
