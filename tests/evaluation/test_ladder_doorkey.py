"""The decision ladder on MiniGrid DoorKey (``gridplan.core.doorkey_task``): the levels its
world defines (every level of ``gridplan.evaluation.schema.LEVELS``) give the oracle's known
answers, and irrelevant noise on the tiles decides and ranks the anchor policies exactly like
the oracle (paper Prop. 1)."""

from __future__ import annotations

import pytest
import torch

import gridplan
from gridplan.core import tasks
from gridplan.evaluation.card import build_card
from gridplan.evaluation.spec import EvalSpec
from gridplan.models.noise import NoiseModel, OracleModel

DK6 = tasks.get("A", world="minigrid-doorkey-6x6")
DK6_TILES = tasks.get("A", world="minigrid-doorkey-6x6-t2")
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


def _report(model, task, levels: tuple[str, ...]) -> dict:
    return gridplan.evaluate(model, SPEC, depth=1, world=task.world.name, levels=levels).to_dict()


def _ladder(model, task, levels: tuple[str, ...]) -> dict:
    return _report(model, task, levels)["ladder"]


@pytest.fixture(scope="module")
def oracle_report() -> dict:
    return _report(OracleModel(world=DK6.world), DK6, ("L4", "L5", "L6", "L7", "probe"))


@pytest.fixture(scope="module")
def oracle(oracle_report) -> dict:
    return oracle_report["ladder"]


def test_the_oracle_decides_optimally_at_the_branch_states(oracle):
    l4 = oracle["L4"]
    assert l4["decision_agreement"]["mean"] == 1.0
    assert l4["decision_regret"]["mean"] == 0.0
    # The relevant dims are deterministic: the oracle's rollouts and branches are exact.
    assert l4["ipe"]["mean"] == l4["teacher_forced"]["mean"] == 0.0
    assert l4["action_effect"]["mean"] == 0.0
    assert l4["n_states"] == 24 and l4["n_behaviour"] == 12


def test_the_oracles_planning_utility(oracle):
    l7 = oracle["L7"]
    assert l7["success"]["mean"] == l7["success_oracle"]["mean"] == 1.0
    assert l7["optimality_regret"]["mean"] == 0.0
    assert l7["success_random"]["mean"] < l7["success_oracle"]["mean"]
    assert l7["policy_gain"]["mean"] == 1.0 - l7["success_random"]["mean"]
    # The oracle's leaf scores are the true returns: it promises what it delivers.
    assert l7["xgap"]["mean"] == 0.0


def test_the_oracle_answers_the_probe_perfectly(oracle):
    probe = oracle["probe"]
    assert probe["regret"]["mean"] == 0.0 and probe["reward_error"]["mean"] == 0.0
    # Another candidate that ties the best plan's true return may be picked, at no regret.
    assert probe["n_questions"] == 12 and probe["n_dropped"] < 12


def test_noise_on_the_tiles_decides_exactly_like_the_oracle():
    levels = ("L4", "probe")
    truth = _ladder(OracleModel(world=DK6_TILES.world), DK6_TILES, levels)
    noisy = _ladder(NoiseModel.controlled(0.0, 0.5, DK6_TILES), DK6_TILES, levels)
    assert noisy == truth
    assert truth["L4"]["decision_agreement"]["mean"] == 1.0


def test_the_oracles_outcome_fidelity_and_policy_ranking_are_exact(oracle):
    l5, l6 = oracle["L5"], oracle["L6"]
    assert l5["value_error"]["mean"] == 0.0
    assert set(l5["value_error_per_policy"].values()) == {0.0}
    assert l5["reward_error"]["mean"] == 0.0
    assert l5["brier"]["mean"] == l5["brier_floor"]["mean"]
    assert l6["pra"]["mean"] == 1.0 and l6["mmrv"]["mean"] == 0.0
    j = {a["name"]: a["J_true"] for a in l6["anchors"]}
    assert all(a["J_true"] == a["J_model"] for a in l6["anchors"])
    # The anchors span weak to strong on DoorKey too.
    assert j["key_ignoring"] == 0.0 and j["greedy"] > j["eps_greedy_0.5"] > j["uniform_random"]


def test_noise_on_the_tiles_ranks_the_anchors_exactly_like_the_oracle():
    levels = ("L5", "L6")
    truth = _ladder(OracleModel(world=DK6_TILES.world), DK6_TILES, levels)
    noisy = _ladder(NoiseModel.controlled(0.0, 1.2, DK6_TILES), DK6_TILES, levels)
    assert noisy == truth
    assert truth["L6"]["pra"]["mean"] == 1.0 and truth["L5"]["value_error"]["mean"] == 0.0


def test_the_card_gates_the_anchor_levels(oracle_report):
    card = build_card(oracle_report)
    assert not {"L5", "L6"} & set(card["not_applicable"])
    passed = {g["level"]: g["passed"] for g in card["gates"]}
    assert passed == {"L4": True, "L5": True, "L6": True}
    assert card["verdict"].startswith(
        "Fit for planning with the depth-1 planner on task A: every gate passes."
    )


class EastNoisy:
    """Two members on DoorKey: the oracle, and the oracle with noise east of the middle
    column; ``predict`` is the noisy member. Its members disagree exactly where it is wrong."""

    members = 2

    def __init__(self, world) -> None:
        self.world = world
        self.oracle = OracleModel(world=world)
        self.private = torch.Generator().manual_seed(123)

    def _members(self, state, action, generator):
        exact = self.oracle.predict(state, action, generator)
        noise = 0.3 * torch.randn(exact.shape, generator=self.private)
        east = (state[:, 0] > 0.5).unsqueeze(1)
        return exact, torch.where(east, (exact + noise).clamp(0.0, 1.0), exact)

    def predict(self, state, action, generator):
        return self._members(state, action, generator)[1]

    def predict_members(self, state, action):
        return torch.stack(self._members(state, action, torch.Generator().manual_seed(0)))


class ConstantScore:
    """The oracle with a constant uncertainty score."""

    def __init__(self, world) -> None:
        self.world = world
        self.oracle = OracleModel(world=world)

    def predict(self, state, action, generator):
        return self.oracle.predict(state, action, generator)

    def uncertainty(self, state, action):
        return torch.ones(state.shape[0])


def test_uncertainty_on_doorkey_tracks_the_rollout_error_of_its_members():
    u = _ladder(EastNoisy(DK6.world), DK6, ("uncertainty",))["uncertainty"]
    assert u["source"] == "predict_members" and u["n"] == 2 * SPEC.branch_states
    assert u["spearman"]["rho"] > 0.3
    assert u["aurc_optimal"] <= u["aurc"] < u["aurc_random"]


def test_a_constant_uncertainty_on_doorkey_is_uninformative():
    u = _ladder(ConstantScore(DK6.world), DK6, ("uncertainty",))["uncertainty"]
    assert u["source"] == "uncertainty" and u["spearman"]["rho"] is None
    assert u["aurc"] == pytest.approx(u["aurc_random"])
