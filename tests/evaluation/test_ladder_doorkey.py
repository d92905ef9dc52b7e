"""The decision ladder on MiniGrid DoorKey (``gridplan.core.doorkey_task``): the levels its
world defines (``gridplan.evaluation.ladder.OTHER_WORLD_LEVELS``) give the oracle's known
answers, and irrelevant noise on the tiles decides exactly like the oracle (paper Prop. 1)."""

from __future__ import annotations

import pytest

import gridplan
from gridplan.core.world import get as get_world
from gridplan.evaluation.spec import EvalSpec
from gridplan.models.noise import OracleModel

DK6 = "minigrid-doorkey-6x6"
SPEC = EvalSpec(
    seeds=(0,),
    episodes=4,
    horizon=4,
    n_windows=12,
    branch_states=12,
    anchor_starts=4,
    anchor_rollouts=1,
    probe_questions=12,
    xgap_states=12,
    n_resamples=100,
)


def _ladder(model, world: str, levels: tuple[str, ...]) -> dict:
    report = gridplan.evaluate(model, SPEC, depth=1, world=world, levels=levels)
    return report.to_dict()


@pytest.fixture(scope="module")
def oracle_l7() -> dict:
    return _ladder(OracleModel(world=get_world(DK6)), DK6, ("L7",))


def test_the_oracles_planning_utility_on_doorkey(oracle_l7):
    l7 = oracle_l7["ladder"]["L7"]
    assert l7["success"]["mean"] == l7["success_oracle"]["mean"] == 1.0
    assert l7["optimality_regret"]["mean"] == 0.0
    assert l7["success_random"]["mean"] < l7["success_oracle"]["mean"]
    assert l7["policy_gain"]["mean"] == 1.0 - l7["success_random"]["mean"]
    # The oracle's leaf scores are the true returns: it promises what it delivers.
    assert l7["xgap"]["mean"] == 0.0
