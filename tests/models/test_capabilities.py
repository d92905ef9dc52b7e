"""What a model offers, read once (``gridplan.models.capabilities``), and the one boundary it
crosses (``gridplan.models.plugins.admit``): the record of each kind of model, and a model's
contract exercised once however often it is admitted on the same world and device."""

from __future__ import annotations

import inspect

import pytest
import torch

import gridplan.models.capabilities as capabilities
from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.core.readings import PROJECT
from gridplan.models.capabilities import (
    METHOD_OF,
    Capabilities,
    Encoder,
    LatentTransition,
    RolloutStart,
    Transition,
    Uncertainty,
    capabilities_of,
    declare,
    record_checked,
)
from gridplan.models.latent_contract import LatentThroughDecoder
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel
from gridplan.models.learned import EnsembleWorldModel, LearnedWorldModel, MLPDynamics
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.models.plugins import CheckedLatentModel, CheckedModel, PluginError, admit
from gridplan.models.signatures import METHODS

TASK_A = tasks.get("A")
G16 = tasks.get("A", world="g16-k8")


class Counting:
    """A plug-in that returns its input and counts its calls; it predicts its own reward."""

    def __init__(self) -> None:
        self.calls = 0

    def predict(self, state, action, generator):
        self.calls += 1
        return state.clone()

    def predict_reward(self, state, action, next_state):
        return torch.zeros(state.shape[0], dtype=state.dtype)


def test_each_protocol_is_one_method_of_the_contracts_with_its_parameters():
    protocols = {
        name: cls
        for cls in vars(capabilities).values()
        if inspect.isclass(cls) and getattr(cls, "_is_protocol", False)
        for name in METHOD_OF.values()
        if name in vars(cls)
    }
    assert set(protocols) == set(METHOD_OF.values()) == {name for _, name in METHODS}
    for (contract, name), method in METHODS.items():
        if contract == "history" and name not in ("init", "step"):
            # A history model's heads reach the library as the latent contract's, through
            # gridplan.models.opaque.OpaqueLatent.
            continue
        params = tuple(inspect.signature(getattr(protocols[name], name)).parameters)[1:]
        assert params == method.params, name


def test_a_plain_object_declares_what_it_has_and_the_defaults_of_what_it_lacks():
    caps = declare(Counting())
    assert caps.transition and caps.reward
    assert not (caps.rollout_start or caps.encoder or caps.ensemble or caps.uncertainty)
    assert caps.n_settings == 1 and caps.world is None and caps.deterministic is None
    assert not caps.is_deterministic and caps.uncertainty_source is None
    assert capabilities_of(Counting()) == caps


def test_a_method_that_is_not_callable_is_not_a_capability():
    class Odd:
        predict = None
        n_settings = 3

    caps = declare(Odd())
    assert not caps.transition and caps.n_settings == 3


def test_built_in_models_carry_their_record_computed_once():
    oracle = OracleModel()
    caps = oracle.capabilities
    assert caps is oracle.capabilities is capabilities_of(oracle)
    assert caps == declare(oracle)
    assert caps.transition and caps.rollout_start and not caps.latent
    assert caps.reading == PROJECT and caps.world == worlds.DEFAULT and caps.n_settings == 1
    noise = NoiseModel(torch.zeros(3, 12))
    assert noise.capabilities.n_settings == 3


def test_the_learned_models_declare_determinism_members_and_sampling():
    single = LearnedWorldModel(MLPDynamics(hidden=(8,)))
    assert single.capabilities.is_deterministic and single.capabilities.ensemble
    assert single.capabilities.members == 1 and single.capabilities.uncertainty_source is None
    ts = EnsembleWorldModel(MLPDynamics(hidden=(8,), members=3), sampling="ts")
    caps = ts.capabilities
    assert caps.sampling == "ts" and caps.members == 3 and not caps.is_deterministic
    assert caps.uncertainty_source == "uncertainty"


def test_latent_models_declare_the_latent_contract():
    persistence = PersistenceLatentModel()
    caps = persistence.capabilities
    assert caps.latent and caps.latent_only and caps.is_deterministic
    assert caps.obs_kind == "state" and caps.latent_dim == 12
    state = StateLatentModel().capabilities
    assert state.decoder and state.latent_only
    through = LatentThroughDecoder(StateLatentModel())
    assert through.capabilities.transition and not through.capabilities.latent
    assert through.capabilities.bytes_per_row == through.bytes_per_row


def test_the_protocols_name_each_capability():
    oracle, latent = OracleModel(), PersistenceLatentModel()
    assert isinstance(oracle, Transition) and isinstance(oracle, RolloutStart)
    assert isinstance(latent, Encoder) and isinstance(latent, LatentTransition)
    assert not isinstance(oracle, Encoder) and not isinstance(oracle, Uncertainty)
    ensemble = EnsembleWorldModel(MLPDynamics(hidden=(8,), members=2))
    assert isinstance(ensemble, Uncertainty)


def test_a_plug_in_wrapper_offers_exactly_what_the_plug_in_offers():
    wrapped = CheckedModel(Counting(), "counting")
    caps = capabilities_of(wrapped)
    assert caps.transition and caps.reward and not caps.ensemble and not caps.uncertainty
    latent = CheckedLatentModel(StateLatentModel(), "state")
    assert capabilities_of(latent).decoder and not capabilities_of(latent).value


def test_admit_exercises_a_model_once_per_world_and_device():
    plugin = Counting()
    model = admit(plugin, TASK_A, "cpu", "counting")
    exercised = plugin.calls
    # predict once, then three seeded calls of the randomness check.
    assert isinstance(model, CheckedModel) and exercised == 4
    assert model.capabilities.checked_on == (worlds.DEFAULT, torch.device("cpu"))
    assert admit(model, TASK_A, "cpu", "counting") is model
    assert admit(model, tasks.get("B"), "cpu", "counting") is model
    assert plugin.calls == exercised
    admit(model, G16, "cpu", "counting")
    assert plugin.calls == 2 * exercised


def test_admit_keeps_a_built_in_model_and_refuses_another_world():
    oracle = OracleModel()
    assert admit(oracle, TASK_A) is oracle and oracle.capabilities.checked_on is not None
    with pytest.raises(ValueError, match="predicts world default"):
        admit(OracleModel(), G16)


def test_admit_puts_a_latent_plug_in_behind_its_wrapper_once():
    model = admit(PersistenceLatentModel(), TASK_A, "cpu", "p.make", "p.py")
    assert isinstance(model, CheckedLatentModel)
    assert model.capabilities.checked_on == (worlds.DEFAULT, torch.device("cpu"))
    assert admit(model, TASK_A, "cpu") is model
    with pytest.raises(PluginError, match="reads observations of world default"):
        admit(PersistenceLatentModel(), G16, "cpu", "p.make", "p.py")


def test_only_this_packages_models_are_written_to():
    plugin = Counting()
    assert record_checked(plugin, worlds.DEFAULT, "cpu") is plugin
    assert not hasattr(plugin, "capabilities")
    assert isinstance(capabilities_of(plugin), Capabilities)
