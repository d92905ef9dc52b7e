"""The planner's one decision: which leaf scorer serves a model (gridplan.planning.registry)."""

from __future__ import annotations

import pytest
import torch

from gridplan.core import readings
from gridplan.core.env import transition
from gridplan.core.tasks import TASK_A
from gridplan.models.contract import WorldModel
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.models.plugins import checked
from gridplan.planning.fused import FusedNoiseScorer, noise_scorer
from gridplan.planning.planner import Planner
from gridplan.planning.registry import (
    default_tree,
    leaf_scorer,
    register_scorer,
    registered_scorer,
    through_predict,
)
from gridplan.planning.scorers import GenericScorer, RewardScorer
from gridplan.planning.tree import TreeScorer


class TrueDynamics(WorldModel):
    """The true transition through ``predict``, without any declaration."""

    def predict(self, state, action, generator):
        return transition(state, action, generator)[0]


class Deterministic(TrueDynamics):
    deterministic = True


class Rewarded:
    """A plug-in (duck-typed) that predicts its own reward: 0.5 on every imagined step."""

    def predict(self, state, action, generator):
        return transition(state, action, generator)[0]

    def predict_reward(self, state, action, next_state):
        return torch.full((state.shape[0],), 0.5)


def test_registering_a_class_again_needs_the_same_factory():
    class Mine(TrueDynamics):
        pass

    assert registered_scorer(Mine) is None
    register_scorer(Mine, through_predict)
    register_scorer(Mine, through_predict)
    assert registered_scorer(Mine) is through_predict
    with pytest.raises(ValueError, match=r"Mine already has a leaf scorer \(through_predict\)"):
        register_scorer(Mine, noise_scorer)
    assert registered_scorer(Mine) is through_predict


def test_registration_refuses_an_instance_or_a_factory_that_cannot_be_called():
    with pytest.raises(TypeError, match="model_type must be a class, got <"):
        register_scorer(TrueDynamics(), through_predict)
    with pytest.raises(TypeError, match="factory must be callable, got str"):
        register_scorer(TrueDynamics, "fused")


def test_a_registration_holds_for_its_class_and_not_for_subclasses():
    class Sub(OracleModel):
        pass

    assert registered_scorer(OracleModel) is noise_scorer
    assert registered_scorer(Sub) is None
    assert type(Planner(Sub(), 1).scorer) is GenericScorer


def test_the_default_tree_is_the_readings_else_shared_prefixes_for_a_deterministic_model():
    assert default_tree(NoiseModel.controlled(0.1, 0.1)) == "independent"
    assert default_tree(OracleModel(readings.PAPER)) == "shared-prefix"
    assert default_tree(Deterministic()) == "shared-prefix"
    assert default_tree(TrueDynamics()) == "independent"
    assert type(Planner(Deterministic(), 2).scorer) is TreeScorer
    assert type(Planner(TrueDynamics(), 2).scorer) is GenericScorer


def test_an_unknown_tree_is_refused_before_any_scorer_is_built():
    with pytest.raises(ValueError, match="tree must be one of independent, shared-prefix or None"):
        leaf_scorer(TrueDynamics(), TASK_A, 2, tree="beam")
    with pytest.raises(ValueError, match="tree must be one of independent, shared-prefix, got"):
        FusedNoiseScorer(torch.zeros(1, 12), None, TASK_A, 2, tree="beam")


def test_a_plugin_scores_its_own_reward_on_independent_leaves():
    model = checked(Rewarded())
    assert type(leaf_scorer(model, TASK_A, 2)) is RewardScorer
    assert type(leaf_scorer(checked(TrueDynamics()), TASK_A, 2)) is GenericScorer
    assert type(leaf_scorer(model, TASK_A, 2, factory=through_predict)) is GenericScorer
    # The wrapper counts imagined steps in start_rollout: no tree may regroup its rows.
    with pytest.raises(ValueError, match="CheckedModel defines start_rollout"):
        leaf_scorer(model, TASK_A, 2, tree="shared-prefix")


def test_the_planner_hands_its_tree_and_budgets_to_the_registered_factory():
    seen = []

    class Recorded(TrueDynamics):
        pass

    def factory(model, task, depth, device, max_memory, max_rows, tree):
        seen.append((type(model), task, depth, str(device), max_memory, max_rows, tree))
        return through_predict(model, task, depth, device, max_memory, max_rows, tree)

    register_scorer(Recorded, factory)
    Planner(Recorded(), 2, max_memory=2**20, max_rows=64)
    Planner(Recorded(), 3, tree="shared-prefix")
    assert seen == [
        (Recorded, TASK_A, 2, "cpu", 2**20, 64, "independent"),
        (Recorded, TASK_A, 3, "cpu", 2 * 1024**3, None, "shared-prefix"),
    ]
