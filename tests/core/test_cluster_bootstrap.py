"""The two-stage cluster bootstrap (``gridplan.metrics.bootstrap.cluster_counts``) on tiny
designs whose resample distribution is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gridplan.metrics.bootstrap import cluster_counts, percentile_interval, spearman_of_counts


def test_two_clusters_are_drawn_binomially_and_their_units_inside_them():
    """Clusters a = units 0, 1 and b = unit 2. A resample draws 2 clusters; if a is drawn k
    times (k ~ Binomial(2, 1/2): 1/4, 1/2, 1/4), a's units get 2k copies and b's unit 2 - k."""
    counts = cluster_counts(["a", "a", "b"], 20_000, seed=5)
    assert counts.shape == (20_000, 3)
    k = counts[:, :2].sum(axis=1) / 2
    np.testing.assert_array_equal(k + counts[:, 2], 2.0)
    np.testing.assert_array_equal(np.unique(k), [0.0, 1.0, 2.0])
    freq = [float(np.mean(k == j)) for j in (0, 1, 2)]
    assert freq == pytest.approx([0.25, 0.5, 0.25], abs=0.015)
    # Inside a cluster drawn once, its two units are drawn with replacement: (2, 0), (1, 1),
    # (0, 2) with 1/4, 1/2, 1/4.
    once = counts[k == 1, 0]
    assert [float(np.mean(once == j)) for j in (0, 1, 2)] == pytest.approx(
        [0.25, 0.5, 0.25], abs=0.02
    )
    np.testing.assert_array_equal(counts, cluster_counts(["a", "a", "b"], 20_000, seed=5))
    assert not np.array_equal(counts, cluster_counts(["a", "a", "b"], 20_000, seed=6))


def test_identical_seeds_give_the_between_cluster_spread_that_seed_resampling_misses():
    """a = (0, 0), b = (1, 1): the mean of a resample is the share of b among the two drawn
    clusters, 0, 1/2 or 1 with 1/4, 1/2, 1/4, so the 95% interval is [0, 1]; resampling
    seeds within each configuration could never move the mean off 1/2."""
    values = np.array([0.0, 0.0, 1.0, 1.0])
    counts = cluster_counts(["a", "a", "b", "b"], 4000, seed=0)
    means = counts @ values / counts.sum(axis=1)
    np.testing.assert_array_equal(np.unique(means), [0.0, 0.5, 1.0])
    assert percentile_interval(means) == (0.0, 1.0)


def test_a_spearman_interval_over_clusters_of_perfectly_ordered_units_stays_at_minus_one():
    x = [0.9, 0.8, 0.5, 0.4, 0.2, 0.1]
    y = [0.1, 0.2, 0.5, 0.6, 0.8, 0.9]
    rep = spearman_of_counts(x, y, cluster_counts(["a", "a", "b", "b", "c", "c"], 500, 1))
    finite = rep[np.isfinite(rep)]
    assert finite.size > 400
    np.testing.assert_allclose(finite, -1.0)


def test_a_resample_whose_drawn_units_share_one_value_has_no_rho():
    # Success constant over every unit: each resample's rho is undefined, not a rounding
    # residue of the weighted variance of equal ranks (it was about 1e-16 in 126 of 200).
    rng = np.random.default_rng(0)
    x, y = rng.random(7), np.full(7, 0.05)
    counts = cluster_counts(list("abcdefg"), 200, 0)
    assert np.isnan(spearman_of_counts(x, y, counts)).all()
    # Constant only among the drawn units: units 2 and 3 (y 0.5) not drawn.
    y = np.array([0.1, 0.1, 0.5, 0.5, 0.1, 0.1, 0.1])
    counts = np.array([[2, 1, 0, 0, 1, 2, 1], [1, 1, 1, 1, 1, 1, 1]])
    rho = spearman_of_counts(x, y, counts)
    assert np.isnan(rho[0]) and np.isfinite(rho[1])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least one unit"):
        cluster_counts([], 10)
    with pytest.raises(ValueError, match="n_resamples"):
        cluster_counts(["a"], 0)
