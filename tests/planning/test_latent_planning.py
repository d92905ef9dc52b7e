"""Planning with latent models (gridplan.planning.latent_scorer): known answers of the reference
latent models."""

from __future__ import annotations

import pytest
import torch

from gridplan.core.tasks import TASK_A
from gridplan.evaluation.decisions import decide, decision_quality
from gridplan.models.latent_contract import LatentContractError, LatentThroughDecoder
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel
from gridplan.models.noise import OracleModel
from gridplan.planning.closed_loop import run_episodes, start_states
from gridplan.planning.latent_scorer import LatentScorer
from gridplan.planning.planner import Planner
from gridplan.planning.registry import through_predict


def test_state_latent_model_plans_exactly_as_the_oracle():
    latent = run_episodes(LatentThroughDecoder(StateLatentModel()), TASK_A, 2, (0, 1), 12)
    oracle = run_episodes(OracleModel(), TASK_A, 2, (0, 1), 12, factory=through_predict)
    assert torch.equal(latent.returns, oracle.returns)
    assert torch.equal(latent.steps, oracle.steps)
    assert latent.success.float().mean() == oracle.success.float().mean() == 1.0


def test_state_latent_model_agrees_with_every_optimal_decision():
    roots = start_states((0,), 24, TASK_A)
    gen = torch.Generator().manual_seed(0)
    quality = decision_quality(
        decide(LatentThroughDecoder(StateLatentModel()), roots, TASK_A, 2, gen)
    )
    assert quality.to_dict()["decision_agreement"]["mean"] == 1.0
    assert quality.to_dict()["decision_regret"]["mean"] == 0.0


def test_latent_models_get_the_latent_scorer_and_it_says_how_it_scores():
    planner = Planner(LatentThroughDecoder(StateLatentModel()), 2, TASK_A)
    assert isinstance(planner.scorer, LatentScorer)
    assert planner.scorer.describe()["leaf_score"] == "decoder"
    assert planner.scorer.describe()["leaf_value"] == "V* at the decoded leaf"


def test_a_stochastic_latent_model_is_refused_the_shared_prefix_tree():
    with pytest.raises(ValueError, match="stochastic latent model"):
        Planner(LatentThroughDecoder(StateLatentModel()), 2, TASK_A, tree="shared-prefix")
    Planner(LatentThroughDecoder(PersistenceLatentModel()), 2, TASK_A, tree="shared-prefix")


def test_a_latent_nan_while_planning_is_an_error_naming_the_method():
    class Broken(PersistenceLatentModel):
        def predict_latent(self, z, action, generator):
            out = z.clone()
            out[0, 0] = float("nan")
            return out

    planner = Planner(LatentThroughDecoder(Broken()), 1, TASK_A)
    with pytest.raises(
        LatentContractError, match=r"Broken.predict_latent holds non-finite .* 1 of"
    ):
        planner.act(start_states((0,), 2, TASK_A), torch.Generator().manual_seed(0))


def test_a_latent_model_without_decoder_needs_one_to_be_planned_with():
    class Opaque:
        obs_kind, deterministic, metadata = "state", True, {}

        def __init__(self):
            self.world, self.latent_dim = TASK_A.world, TASK_A.world.state_dim

        def encode(self, obs):
            return obs

        def predict_latent(self, z, action, generator):
            return z

    with pytest.raises(LatentContractError, match="has no decode.*frozen protocol decoder"):
        LatentThroughDecoder(Opaque())
