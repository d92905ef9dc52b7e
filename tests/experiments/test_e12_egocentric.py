"""E12's egocentric models (``gridplan/experiments/e12_egocentric.py``): ρ over them alone and
pooled with the grid, and the two claims, on hand-built records with known answers."""

from __future__ import annotations

import pytest

from gridplan.experiments.e8 import ScaleRecord
from gridplan.experiments.e12_egocentric import claims, summarize

WORLD = "minigrid-doorkey-8x8-t4"


def _record(family: str, e_tot: float, drpe: float, success: float) -> ScaleRecord:
    return ScaleRecord(
        world=WORLD,
        size=8,
        distractors=4,
        state_width=17,
        name=f"{family} {e_tot}",
        family=family,
        sigma_r=None,
        sigma_i=None,
        key=None,
        seed=0,
        E_tot=e_tot,
        DRPE_graded=drpe,
        DRPE_binary=drpe,
        success=success,
        success_se=0.0,
        n_episodes=60,
    )


def test_drpe_that_orders_success_exactly_beats_an_unrelated_e_tot():
    # DRPE falls as success rises (ρ = -1); E_tot's ranks 1, 3, 2, 4 against success's 1..4:
    # ρ = 1 - 6 (0 + 1 + 1 + 0) / (4 (16 - 1)) = 0.8, so the margin is 1 - 0.8.
    ego = [
        _record("egocentric", e, d, s)
        for e, d, s in [(0.1, 0.4, 0.2), (0.3, 0.3, 0.3), (0.2, 0.2, 0.4), (0.4, 0.1, 0.5)]
    ]
    grid = [_record("controlled", 0.1 * i, 0.1 * i, 1.0 - 0.1 * i) for i in range(4)]
    row = summarize(WORLD, grid, ego, 200, (3.0, 4.0))
    assert row.n_models == 4 and row.success_mean == 0.35 and row.success_max == 0.5
    assert row.rho_DRPE == -1.0 and row.rho_E_tot == pytest.approx(0.8)
    assert row.margin == pytest.approx(0.2)
    assert (row.train_seconds, row.measure_seconds) == (3.0, 4.0)
    verdict = claims(row)
    assert verdict["ego_lead"][0] is True and "|-1.00| vs |0.80|" in verdict["ego_lead"][1]
    # Pooled: the grid adds 4 models whose E_tot and DRPE both order success exactly.
    assert row.pooled_rho_DRPE < row.pooled_rho_E_tot < 0
    assert verdict["ego_pooled"][0] is True


def test_constant_success_leaves_the_claim_unchecked_and_too_few_models_rank_nothing():
    ego = [_record("egocentric", 0.1 * i, 0.2 * i, 0.0) for i in range(1, 5)]
    grid = [_record("controlled", 0.1 * i, 0.1 * i, 1.0 - 0.1 * i) for i in range(4)]
    row = summarize(WORLD, grid, ego, 200, (0.0, 0.0))
    assert row.rho_DRPE is None and row.margin is None
    ok, detail = claims(row)["ego_lead"]
    assert ok is None and "undefined" in detail
    two = summarize(WORLD, grid, ego[:2], 200, (0.0, 0.0))
    assert two.rho_E_tot is None and two.pooled_rho_E_tot is not None
