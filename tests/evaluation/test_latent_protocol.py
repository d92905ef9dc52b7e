"""The frozen-decoder protocol and the action-consistency probe (seed 004 §3-4) on reference
latent models with known answers."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gridplan.core.tasks import TASK_A, task_a
from gridplan.core.world import World
from gridplan.data.datasets import collect
from gridplan.metrics.action_consistency import action_consistency
from gridplan.metrics.frozen_decoder import (
    FLOORED,
    LatentTransitions,
    StateNormalization,
    encode_transitions,
    fit_frozen_decoder,
    latent_fidelity,
    latent_floor,
    protocol_splits,
)
from gridplan.models.latent_contract import LatentContractError, check_latent_model
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel

RELEVANT = list(TASK_A.relevant_dims)


@pytest.fixture(scope="module")
def splits():
    return protocol_splits(collect("balanced", 3000, seed=11), seed=0)


def _encoded(model, splits):
    return [encode_transitions(model, part) for part in splits]


def test_state_latent_model_has_no_relevant_excess_error_through_its_own_decoder(splits):
    model = StateLatentModel()
    fit, val, test = _encoded(model, splits)
    decoder = fit_frozen_decoder(fit, val, epochs=3)
    out = latent_fidelity(test, model.decode, fit_keys=decoder.fit_keys)
    assert out.E_repr == 0.0 and out.DRPE_repr == 0.0
    assert out.DRPE_excess == 0.0
    assert all(out.per_dim["excess"][j] == 0.0 for j in RELEVANT)
    # What remains is the distractors' irreducible draw: d2 is redrawn every step.
    assert out.E_excess == pytest.approx(out.E_pred) and out.E_excess > 0
    assert out.per_dim["excess"][10] > 1.0


def test_the_floor_is_the_perfect_latent_models_numbers_zero_without_stochastic_dims(splits):
    model = StateLatentModel()
    _, _, test = _encoded(model, splits)
    norm = StateNormalization.of(torch.cat([splits[0].states, splits[0].next_states]))
    own = latent_fidelity(test, model.decode, normalization=norm)
    floor = latent_floor(splits[2], norm, TASK_A)
    # The same model and draws through its identity decoder: the floor is its numbers.
    assert floor == {k: getattr(own, k) for k in FLOORED}
    assert floor["E_repr"] == 0.0 and floor["DRPE_pred"] == 0.0
    assert 0.25 < floor["E_excess"] == floor["E_pred"] < 0.5  # the distractors' draws
    # A world whose every dim is deterministic under the oracle has a floor of 0.
    calm = task_a(World(name="calm", d1=0, d2=0))
    data = protocol_splits(collect("balanced", 1000, seed=3, task=calm), seed=0)
    calm_norm = StateNormalization.of(torch.cat([data[0].states, data[0].next_states]))
    assert set(latent_floor(data[2], calm_norm, calm).values()) == {0.0}


def test_persistence_model_numbers_equal_the_persistence_baseline(splits):
    model = PersistenceLatentModel()
    fit, val, test = _encoded(model, splits)
    out = latent_fidelity(test, model.decode, fit_keys=fit.keys | val.keys)
    assert out.E_pred == out.E_persistence
    assert out.DRPE_pred == out.DRPE_persistence
    assert out.per_dim["pred"] == out.per_dim["persistence"]
    assert out.latent_drift == pytest.approx(out.E_tot_pred)


def test_identical_latents_give_exactly_zero_excess_even_with_a_poor_decoder(splits):
    fit, val, test = _encoded(StateLatentModel(), splits)
    poor = fit_frozen_decoder(fit, val, epochs=1, lr=1e-5)
    same = dataclasses.replace(test, z_pred=test.z_next.clone())
    out = latent_fidelity(same, poor)
    assert out.E_repr > 0.1
    assert out.E_excess == 0.0 and out.DRPE_excess == 0.0 and out.E_excess_event == 0.0
    assert out.latent_drift == 0.0


def test_negative_excess_is_kept():
    s = torch.full((4, 12), 0.5)
    s[:, 0] = torch.tensor([0.0, 0.2, 0.6, 1.0])
    noisy = s + 0.1
    t = LatentTransitions(
        z=s,
        z_next=noisy,
        z_pred=s.clone(),
        states=s,
        next_states=s,
        actions=torch.zeros(4, dtype=torch.long),
        episode=torch.arange(4),
        event=torch.zeros(4, dtype=torch.bool),
        source="hand",
    )
    out = latent_fidelity(
        t, lambda z: z, normalization=StateNormalization(s.mean(0), torch.ones(12))
    )
    assert out.E_pred == 0.0
    assert out.E_excess == pytest.approx(-0.01)


def test_episodes_weigh_equally_whatever_their_length():
    s = torch.full((4, 12), 0.5)
    s[:, 0] = torch.tensor([0.0, 0.2, 0.6, 1.0])
    pred = s.clone()
    pred[0] += 1.0  # episode 0: one row, error 1 per dim; episode 1: three exact rows
    t = LatentTransitions(
        z=s,
        z_next=s.clone(),
        z_pred=pred,
        states=s,
        next_states=s,
        actions=torch.zeros(4, dtype=torch.long),
        episode=torch.tensor([0, 1, 1, 1]),
        event=torch.zeros(4, dtype=torch.bool),
        source="hand",
    )
    out = latent_fidelity(
        t, lambda z: z, normalization=StateNormalization(s.mean(0), torch.ones(12))
    )
    assert out.E_pred == pytest.approx(0.5)  # not the row mean 0.25


def test_decoder_is_frozen_hashed_and_reproducible(splits):
    fit, val, _ = _encoded(StateLatentModel(), splits)
    a, b = fit_frozen_decoder(fit, val, epochs=2), fit_frozen_decoder(fit, val, epochs=2)
    assert a.digest == b.digest and len(a.digest) == 64
    assert not any(p.requires_grad for p in a.net.parameters())
    with torch.no_grad():
        next(a.net.parameters()).add_(1.0)
    with pytest.raises(ValueError, match="changed after it was frozen"):
        a(fit.z)


def test_decoder_fit_whose_episodes_overlap_the_test_episodes_is_an_error(splits):
    fit, val, _ = _encoded(StateLatentModel(), splits)
    decoder = fit_frozen_decoder(fit, val, epochs=1)
    with pytest.raises(ValueError, match="episode leakage: .* test episodes"):
        latent_fidelity(fit, decoder)
    with pytest.raises(ValueError, match="episode leakage"):
        fit_frozen_decoder(fit, fit, epochs=1)


def test_latent_nan_zero_variance_and_bad_observations_are_errors(splits):
    fit, _, _ = _encoded(StateLatentModel(), splits)
    bad = fit.z_pred.clone()
    bad[3, 2] = float("nan")
    with pytest.raises(ValueError, match="'z_pred' holds non-finite values .* 1 of"):
        dataclasses.replace(fit, z_pred=bad)
    with pytest.raises(ValueError, match=r"state dims \[4\] have zero variance"):
        StateNormalization.of(torch.cat([torch.rand(5, 4), torch.zeros(5, 1)], dim=1))
    model = StateLatentModel()
    with pytest.raises(ValueError, match="must be float32 .* got torch.float64"):
        model.encode(torch.rand(3, 12, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"must have shape \(B, 12\) .* got \(3, 11\)"):
        model.encode(torch.rand(3, 11))


def test_a_latent_model_returning_nan_breaks_the_contract():
    class NaNModel(PersistenceLatentModel):
        def predict_latent(self, z, action, generator):
            return torch.full_like(z, float("nan"))

    with pytest.raises(LatentContractError, match="NaNModel.predict_latent holds non-finite"):
        check_latent_model(NaNModel(), TASK_A.world)


def test_action_consistency_separates_the_oracle_from_persistence(splits):
    oracle = _encoded(StateLatentModel(), splits)
    still = _encoded(PersistenceLatentModel(), splits)
    good = action_consistency(oracle[0], oracle[2])
    flat = action_consistency(still[0], still[2])
    assert good.accuracy_real == flat.accuracy_real > 0.9
    assert good.consistency > 0.95
    assert flat.accuracy_pred < 0.4 and flat.consistency < 0.2
    with pytest.raises(ValueError, match="episode leakage"):
        action_consistency(oracle[0], oracle[0])
