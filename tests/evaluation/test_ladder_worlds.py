"""The decision ladder, its leaf scores and fitted values on a world other than the default:
the oracle is perfect at every decision level and irrelevant noise decides exactly like it
(paper Prop. 1), with every state read in that world's layout."""

from __future__ import annotations

import pytest
import torch

import gridplan
from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.core.env import reset
from gridplan.evaluation.decisions import leaf_scores
from gridplan.evaluation.spec import EvalSpec
from gridplan.metrics.relevance_estimation import FVIConfig, fitted_value_iteration
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.planner import Planner

G16 = worlds.get("g16-k8")
TASK = tasks.get("A", world=G16)
PROTOCOL = EvalSpec(
    seeds=(0,),
    episodes=4,
    horizon=6,
    n_windows=16,
    branch_states=16,
    anchor_starts=16,
    anchor_rollouts=2,
    probe_questions=16,
    xgap_states=16,
    n_resamples=100,
)


def _ladder(model) -> dict:
    return gridplan.evaluate(model, PROTOCOL, depth=2, world=G16.name).to_dict()


@pytest.fixture(scope="module")
def oracle_report() -> dict:
    return _ladder(OracleModel(world=G16))


@pytest.mark.slow
def test_the_oracle_is_perfect_at_every_decision_level_on_g16_k8(oracle_report):
    assert oracle_report["world"] == G16.spec()
    lad = oracle_report["ladder"]
    assert lad["L4"]["decision_agreement"]["mean"] == 1.0
    assert lad["L4"]["decision_regret"]["mean"] == 0.0
    assert lad["L5"]["value_error"]["mean"] == 0.0
    assert lad["L7"]["optimality_regret"]["mean"] == 0.0
    assert lad["probe"]["regret"]["mean"] == 0.0
    assert len(oracle_report["profile"]) == G16.state_dim


@pytest.mark.slow
def test_irrelevant_noise_gives_the_oracles_ladder_on_g16_k8(oracle_report):
    report = _ladder(NoiseModel.controlled(0.0, 0.6, TASK))
    assert report["ladder"] == oracle_report["ladder"]
    assert report["E_tot"] > oracle_report["E_tot"]


def test_leaf_scores_read_roots_of_the_tasks_world():
    roots = reset(8, torch.Generator().manual_seed(0), TASK)
    scores = leaf_scores(OracleModel(world=G16), roots, TASK, 2, torch.Generator())
    assert scores.shape == (8, 16)
    q = Planner(OracleModel(world=G16), 2, TASK).action_values(roots, torch.Generator())
    torch.testing.assert_close(scores.view(8, 4, 4).amax(dim=2), q)


def test_a_fitted_value_reads_states_of_its_world():
    states = reset(16, torch.Generator().manual_seed(1), TASK)
    config = FVIConfig(iterations=2, epochs=1, hidden=(8,))
    fitted = fitted_value_iteration(OracleModel(world=G16), states, TASK, config)
    assert fitted.world == G16
    assert fitted(states).shape == (16,)
    with pytest.raises(ValueError, match=r"\(B, 24\), got \(2, 12\)"):
        fitted(torch.zeros(2, 12))
