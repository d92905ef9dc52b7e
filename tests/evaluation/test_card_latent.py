"""The card of a model that reads observations: L0 names what it observes and its world's state
size, and a collapsed representation (E_repr at or above the persistence baseline) is diagnosed
in "what to fix", with the latent's effective rank."""

from __future__ import annotations

import pytest
import torch

import gridplan
from gridplan.core import world as worlds
from gridplan.core.tasks import TASK_A
from gridplan.evaluation.card import build_card, l0_status, representation_findings
from gridplan.evaluation.latent_eval import LatentProtocol, prepare_latent
from gridplan.evaluation.spec import EvalSpec
from gridplan.metrics.frozen_decoder import effective_rank
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel
from gridplan.models.noise import OracleModel

PROTOCOL = EvalSpec(seeds=(0,), episodes=2, horizon=4, n_windows=16, n_resamples=50)
SMALL = LatentProtocol(transitions=3000)


class ConstantEncoder(PersistenceLatentModel):
    """A fully collapsed encoder: every observation maps to the same latent."""

    def encode(self, obs):
        return torch.full((obs.shape[0], self.latent_dim), 0.5)


@pytest.fixture(scope="module")
def state_report() -> dict:
    return gridplan.evaluate(
        OracleModel(), depth=2, spec=PROTOCOL, levels=["L1"], model_info={"name": "oracle"}
    ).to_dict()


@pytest.fixture(scope="module")
def collapsed() -> dict:
    return prepare_latent(ConstantEncoder(), TASK_A, protocol=SMALL).report


def test_l0_of_a_state_model_names_the_state_of_its_world(state_report):
    assert l0_status(state_report) == (
        "no observations are rendered: the model reads the 12-number state of world "
        f"{worlds.DEFAULT.describe()} itself"
    )
    assert build_card(state_report)["not_applicable"]["L0"] == l0_status(state_report)


def test_l0_of_a_pixel_model_of_a_24_dim_world_names_its_pixels_and_state_size(state_report):
    g16 = worlds.get("g16-k8")
    report = {**state_report, "world": g16.spec(), "latent": {"obs_kind": "pixels"}}
    assert l0_status(report) == (
        f"the model reads pixels observations (3x64x64) rendered from the 24-number state of "
        f"world {g16.describe()}, and is measured through decoded states: it generates no "
        "observations to judge"
    )


def test_effective_rank_has_known_answers():
    assert effective_rank(torch.full((50, 8), 0.3)) == 0.0
    # Two orthogonal directions of equal spread: exactly rank 2.
    z = torch.zeros(4, 6)
    z[0, 0], z[1, 0], z[2, 1], z[3, 1] = 1.0, -1.0, 1.0, -1.0
    assert effective_rank(z) == pytest.approx(2.0, abs=1e-9)
    # One direction only: rank 1, whatever the latent width.
    line = torch.arange(10.0).unsqueeze(1) * torch.ones(1, 5)
    assert effective_rank(line) == pytest.approx(1.0, abs=1e-9)


def test_a_constant_encoder_is_measured_not_refused(collapsed):
    frozen = collapsed["frozen"]
    assert frozen["effective_rank"] == 0.0
    assert frozen["latent_drift_relative"] is None
    # The decoder of a constant latent predicts one constant state, near the fit episodes'
    # mean: about one variance per dim (more where the test episodes' mean differs).
    assert 0.95 < frozen["E_repr"] < 1.3
    assert frozen["E_repr"] > frozen["E_persistence"]
    # Persistence of a constant latent predicts exactly the actual next latent.
    assert frozen["E_excess"] == 0.0 and frozen["E_pred"] == frozen["E_repr"]


def test_a_collapsed_representation_is_the_first_thing_to_fix(state_report, collapsed):
    report = {**state_report, "latent": collapsed}
    frozen = collapsed["frozen"]
    fixes = build_card(report)["what_to_fix"]
    assert fixes[0].startswith(
        "the representation has collapsed: through the frozen protocol decoder the actual next "
        "latent tells less about the next state than copying the current state does "
        f"(E_repr {frozen['E_repr']:.3f} against the persistence baseline "
        f"{frozen['E_persistence']:.3f}, variance-normalized d); the latent's effective rank is "
        "0.0 of Z = 12. E_excess +0.0000 is small because there is little left to predict"
    )


def test_a_readable_representation_gets_no_collapse_finding(state_report):
    readable = prepare_latent(StateLatentModel(), TASK_A, protocol=SMALL).report
    assert readable["frozen"]["E_repr"] < readable["frozen"]["E_persistence"]
    assert readable["frozen"]["effective_rank"] > 5
    assert representation_findings({**state_report, "latent": readable}) == []


def test_the_finding_reads_the_numbers_of_the_report():
    report = {
        "latent": {
            "latent_dim": 32,
            "frozen": {"E_repr": 1.03, "E_persistence": 0.87, "E_excess": 0.0002},
        }
    }
    (finding,) = representation_findings(report)
    assert "(E_repr 1.030 against the persistence baseline 0.870, variance-normalized d)." in (
        finding
    )
    assert "E_excess +0.0002 is small" in finding and "effective rank" not in finding


def test_a_large_excess_is_not_called_small_and_a_partial_view_is_named():
    report = {
        "latent": {
            "latent_dim": 32,
            "obs_kind": "egocentric",
            "frozen": {"E_repr": 1.2, "E_persistence": 0.9, "E_excess": 34.3151},
        }
    }
    (finding,) = representation_findings(report)
    assert "is small" not in finding
    assert "E_excess +34.3151 is larger still: the predicted latents decode worse" in finding
    assert "On a partial observation (here egocentric) one observation does not" in finding


def test_the_policy_class_says_when_leaves_were_scored_by_the_models_heads():
    from gridplan.evaluation.card import policy_class

    planning = {
        "leaf_score": "heads",
        "reward": "model reward head",
        "leaf_value": "model value head at the leaf latent",
    }
    heads = policy_class({"depth": 2, "latent": {"planning": planning}})
    assert "leaves scored by the model reward head plus gamma^2 times the model value" in heads
    decoder = policy_class({"depth": 2, "latent": {"planning": {"leaf_score": "decoder"}}})
    assert "sparse reward on predicted states plus gamma^2 V* (exact)" in decoder
