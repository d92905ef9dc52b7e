"""Planner safety: non-finite predictions and depths beyond the memory budget are errors."""

from __future__ import annotations

import pytest
import torch

from eval.cli import main
from gridplan.core.constants import RIGHT, STATE_DIM
from gridplan.core.env import reset
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning import closed_loop
from gridplan.planning.planner import Planner
from gridplan.planning.scorers import GENERIC_BYTES_PER_ROW, check_prediction


class NaNOnRight(OracleModel):
    """The oracle, except that every leaf whose imagined action is RIGHT becomes NaN."""

    def predict(self, state, action, generator):
        nxt = super().predict(state, action, generator)
        return torch.where((action == RIGHT).unsqueeze(1), torch.nan, nxt)


class AllNaN(OracleModel):
    def predict(self, state, action, generator):
        return torch.full_like(state, torch.nan)


def test_a_model_returning_nan_for_some_leaves_stops_the_planner_with_a_clear_error():
    root = reset(3, torch.Generator().manual_seed(0))
    # Depth 2: 16 leaves per episode, 4 of them RIGHT at step 0 -> 12 of 48 rows.
    with pytest.raises(
        ValueError,
        match=r"NaNOnRight.predict returned non-finite values \(NaN or inf\) at imagined step 0 "
        r"in 12 of 48 leaf rows",
    ):
        Planner(NaNOnRight(), 2).act(root, torch.Generator().manual_seed(1))


def test_a_model_returning_nan_everywhere_cannot_finish_a_closed_loop():
    with pytest.raises(ValueError, match=r"AllNaN.predict returned non-finite .* in 16 of 16"):
        closed_loop.run_episodes(AllNaN(), depth=1, seeds=[0], episodes=4)


def test_the_generic_path_of_a_built_in_model_is_checked_too():
    # generic=True routes the oracle through predict; a finite model passes untouched.
    root = reset(4, torch.Generator().manual_seed(0))
    fused = Planner(OracleModel(), 2).action_values(root, torch.Generator())
    generic = Planner(OracleModel(), 2, generic=True).action_values(root, torch.Generator())
    torch.testing.assert_close(fused, generic, rtol=0, atol=0)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_check_prediction_counts_the_rows_holding_any_non_finite_value(value):
    pred = torch.zeros(5, STATE_DIM)
    pred[1, 3] = value
    pred[4, 0] = value
    pred[4, 11] = value
    with pytest.raises(ValueError, match=r"OracleModel.predict .* imagined step 2 in 2 of 5"):
        check_prediction(pred, OracleModel(), 2, 5)
    check_prediction(torch.zeros(5, STATE_DIM), OracleModel(), 2, 5)


@pytest.mark.parametrize("generic", [False, True])
def test_a_depth_beyond_the_memory_budget_is_refused_before_any_allocation(generic):
    with pytest.raises(ValueError, match=r"depth 20 needs .* GiB .* max_memory = 2.00 GiB"):
        Planner(OracleModel(), 20, generic=generic)


def test_the_budget_check_names_the_largest_depth_that_fits_and_counts_setting_blocks():
    # Generic scorer: 4^D leaves x (GENERIC_BYTES_PER_ROW + 8 (D + 1)) bytes per setting.
    per_leaf = GENERIC_BYTES_PER_ROW + 8 * 4
    Planner(OracleModel(), 3, max_memory=64 * per_leaf, generic=True)
    with pytest.raises(ValueError, match="depth 4 .* the largest depth that fits is 3"):
        Planner(OracleModel(), 4, max_memory=64 * per_leaf + 8 * 64, generic=True)
    two = NoiseModel.controlled([0.0, 0.1], [0.0, 0.0])
    with pytest.raises(ValueError, match=r"depth 3 needs .* \(2 x 4\^3 leaves"):
        Planner(two, 3, max_memory=64 * per_leaf, generic=True)


def test_eval_cli_rejects_a_too_deep_search_up_front_naming_depth_and_budget(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--model", "oracle", "--depth", "20", "--no-progress"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "depth 20 needs" in err and "max_memory = 2.00 GiB" in err
    assert "largest depth that fits is 11" in err
