"""The suite tables: newest track version only, models ordered by mean success, and per track
the rankings by success, E_tot and DRPE with their rank agreement, checked by hand."""

from __future__ import annotations

import pytest
from helpers_board import MODELS, OLD_A, TRACKS, VALUES, make_row

from gridplan.board import suite_tables
from gridplan.board.leaderboard import model_labels, rank_agreement

ORACLE, NOISE, MLP = (MODELS[m][1] for m in ("oracle", "noise(0.35,0.1)", "mlp-20k"))


@pytest.fixture
def table():
    rows = [make_row(m, t) for m, t in VALUES]
    rows.append(make_row("oracle", "quick-a", values=(0.99, 0.0, 0.0, 0.1), old=True))
    (table,) = suite_tables(rows)
    return table


def test_only_the_newest_version_of_a_track_is_shown_and_the_others_counted(table):
    assert [(t["name"], t["version"], t["hash"]) for t in table.tracks] == [
        ("quick-a", 2, TRACKS["quick-a"][1]), ("quick-b", 1, TRACKS["quick-b"][1])]
    assert table.left_out == {"quick-a": 1}
    assert len(table.cells) == 6
    assert table.cells[(ORACLE, "quick-a")]["metrics"]["success"]["value"] == 0.92


def test_a_newer_version_wins_over_a_larger_hash_and_equal_versions_take_the_larger_hash():
    old = make_row("oracle", "quick-a", old=True)
    new = make_row("mlp-20k", "quick-a")
    assert (OLD_A[0], new["track"]["version"]) == (1, 2)
    (table,) = suite_tables([old, new])
    assert table.tracks[0]["version"] == 2 and table.models == (MLP,)
    twin = make_row("oracle", "quick-a")
    twin["track"]["hash"] = "f" * 64
    (table,) = suite_tables([twin, new])
    assert table.tracks[0]["hash"] == "f" * 64 and table.models == (ORACLE,)


def test_models_are_ordered_by_mean_success_and_a_model_missing_a_track_comes_last():
    rows = [make_row(m, t) for m, t in VALUES if (m, t) != ("oracle", "quick-b")]
    (table,) = suite_tables(rows)
    # means: mlp (0.74 + 0.70) / 2 = 0.72, noise (0.61 + 0.55) / 2 = 0.58, oracle misses quick-b
    assert table.models == (MLP, NOISE, ORACLE)
    assert table.mean_success(MLP) == pytest.approx(0.72)
    assert table.mean_success(ORACLE) is None


def test_rankings_and_their_spearman_rho_by_hand(table):
    a, b = table.rankings
    assert a.by["success"] == (ORACLE, MLP, NOISE)  # 0.92, 0.74, 0.61
    assert a.by["e_tot"] == (NOISE, ORACLE, MLP)  # 0.18, 0.21, 0.29
    assert a.by["drpe"] == (ORACLE, MLP, NOISE)  # 0.0012, 0.015, 0.034
    # success ranks (oracle, noise, mlp) = (3, 1, 2); -E_tot ranks = (2, 3, 1); d = (1, -2, 1):
    # rho = 1 - 6 * 6 / (3 * (9 - 1)) = -0.5
    assert a.rho["e_tot"] == pytest.approx(-0.5)
    assert a.rho["drpe"] == pytest.approx(1.0)
    assert a.n == {"e_tot": 3, "drpe": 3}
    assert b.by["e_tot"] == (ORACLE, MLP, NOISE) and b.rho["e_tot"] == pytest.approx(1.0)
    # the MLP has no DRPE on quick-b: two models are too few for a rank correlation
    assert b.by["drpe"] == (ORACLE, NOISE) and b.n["drpe"] == 2 and b.rho["drpe"] is None


def test_rank_agreement_is_undefined_on_a_constant_side():
    assert rank_agreement([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None
    assert rank_agreement([0.9, 0.5, 0.1], [0.1, 0.2, 0.3]) == pytest.approx(1.0)
    assert rank_agreement([0.9, 0.5, 0.1, 0.3], [0.3, 0.2, 0.1, 0.4]) == pytest.approx(-0.4)
    with pytest.raises(ValueError, match="differ in length"):
        rank_agreement([0.1, 0.2, 0.3], [0.1])


def test_a_track_shared_by_two_suites_shows_its_rows_in_both():
    rows = [make_row("oracle", "quick-a"), make_row("mlp-20k", "quick-a", suite="full"),
            make_row("mlp-20k", "quick-b", suite="full")]
    full, quick = suite_tables(rows)
    assert (full.suite, quick.suite) == ("full", "quick")
    assert set(full.cells) == {(ORACLE, "quick-a"), (MLP, "quick-a"), (MLP, "quick-b")}
    assert set(quick.cells) == {(ORACLE, "quick-a"), (MLP, "quick-a")}


def test_two_models_of_one_name_are_told_apart_by_their_fingerprints():
    twin = make_row("oracle", "quick-a")
    twin["model"]["fingerprint"] = "0" * 64
    labels = model_labels([make_row("oracle", "quick-a"), twin, make_row("mlp-20k", "quick-a")])
    assert labels == {ORACLE: f"oracle [{ORACLE[:8]}]", "0" * 64: "oracle [00000000]",
                      MLP: "mlp-20k"}


def test_a_figure_has_one_point_per_row_with_both_metrics(table):
    from gridplan.board.plots import points

    assert points(table, "drpe") == [
        (ORACLE, "quick-a", 0.0012, 0.92), (ORACLE, "quick-b", 0.0009, 0.88),
        (MLP, "quick-a", 0.015, 0.74),
        (NOISE, "quick-a", 0.034, 0.61), (NOISE, "quick-b", 0.041, 0.55),
    ]
    assert len(points(table, "e_tot")) == 6 and points(table, "not_measured") == []
