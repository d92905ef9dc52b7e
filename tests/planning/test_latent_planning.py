"""Planning with latent models (gridplan.planning.latent_scorer): known answers of the reference
latent models."""

from __future__ import annotations

import pytest
import torch

from gridplan.core.env import state_outcome
from gridplan.core.tasks import TASK_A
from gridplan.core.values import value_table
from gridplan.evaluation.decisions import decide, decision_quality
from gridplan.models.latent_contract import LatentContractError, LatentThroughDecoder
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.planning.closed_loop import run_episodes, start_states
from gridplan.planning.latent_scorer import LatentScorer
from gridplan.planning.planner import Planner
from gridplan.planning.planners import make_planner
from gridplan.planning.registry import through_predict
from gridplan.planning.sequences import sequence_terms


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


class CountingEncoder(StateLatentModel):
    """The state latent model over noisy dynamics, counting the observations it encodes."""

    def __init__(self):
        super().__init__(dynamics=NoiseModel.controlled(0.35, 0.1))
        self.encoded = 0

    def encode(self, obs):
        self.encoded += obs.shape[0]
        return super().encode(obs)


def through_predict_terms(model, roots, actions, gen):
    """``sequence_terms`` as it was: every candidate row handed to ``model.predict``."""
    b, p, h = actions.shape
    state = roots.repeat_interleave(p, dim=0)
    alive = torch.ones(b * p, dtype=torch.bool)
    terms = torch.zeros(b * p, h)
    model.start_rollout(b * p, gen)
    for t in range(h):
        state = model.predict(state, actions.reshape(b * p, h)[:, t], gen)
        reward, goal, hazard = state_outcome(state, TASK_A)
        terms[:, t] = TASK_A.gamma**t * reward * alive
        alive &= ~(goal | hazard)
    terms[:, h - 1] += TASK_A.gamma**h * value_table(TASK_A).lookup(state) * alive
    return terms.view(b, p, h)


def test_candidates_of_a_latent_model_roll_in_latent_space_as_predict_rolls_them():
    model = LatentThroughDecoder(CountingEncoder())
    roots = start_states((0, 1), 6, TASK_A)
    actions = torch.randint(0, 4, (12, 5, 3), generator=torch.Generator().manual_seed(3))
    value = value_table(TASK_A)
    got = sequence_terms(model, TASK_A, roots, actions, value, torch.Generator().manual_seed(7))
    assert model.latent.encoded == 12
    want = through_predict_terms(model, roots, actions, torch.Generator().manual_seed(7))
    assert torch.equal(got, want) and got.abs().sum() > 0


@pytest.mark.parametrize("name", ["cem", "mppi"])
def test_a_sampling_planner_encodes_each_root_once_per_decision(name):
    model = LatentThroughDecoder(CountingEncoder())
    planner = make_planner(name, model, TASK_A, 3)
    roots = start_states((0,), 10, TASK_A)
    planner.plan(roots, torch.Generator().manual_seed(0))
    assert model.latent.encoded == 10
    planner.act(roots, torch.Generator().manual_seed(0))
    assert model.latent.encoded == 20
