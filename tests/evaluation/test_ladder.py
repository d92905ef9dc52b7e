"""Known answers of the decision ladder through ``gridplan.evaluate``: the oracle is perfect at
every decision level, M(0, sigma_i) decides exactly like it (paper Prop. 1), M(.35, .1) is
flagged at every level; decisions and XGap of hand-built models; uncertainty of a tiny
ensemble built from noise models."""

from __future__ import annotations

import json

import pytest
import torch
from paper_layout import CELL_SCALE

import gridplan
from gridplan.core import tasks
from gridplan.core.constants import AGENT_X
from gridplan.core.env import transition
from gridplan.core.values import value_table
from gridplan.evaluation.decisions import decide, exploitability
from gridplan.evaluation.ladder import check_levels, paper_report
from gridplan.evaluation.levels import REGISTRY, run_order
from gridplan.evaluation.schema import LEVELS
from gridplan.evaluation.spec import PAPER_LEVELS, EvalSpec
from gridplan.models.noise import NoiseModel, OracleModel, noise_grid
from gridplan.planning.closed_loop import start_states

TASK_A = tasks.get("A")
PROTOCOL = EvalSpec(
    seeds=(0,),
    episodes=8,
    horizon=6,
    n_windows=64,
    branch_states=64,
    anchor_starts=32,
    anchor_rollouts=4,
    probe_questions=32,
    xgap_states=64,
    n_resamples=200,
)
DEPTH = 2


def _ladder(model, **kwargs) -> dict:
    kwargs.setdefault("spec", PROTOCOL)
    kwargs.setdefault("depth", DEPTH)
    return gridplan.evaluate(model, **kwargs).to_dict()


@pytest.fixture(scope="module")
def oracle_report() -> dict:
    return _ladder(OracleModel())


def _mean(section: dict, key: str) -> float:
    return section[key]["mean"]


def test_the_oracle_is_perfect_at_every_decision_level(oracle_report):
    lad = oracle_report["ladder"]
    l4, l5, l6, l7, probe = (lad[k] for k in ("L4", "L5", "L6", "L7", "probe"))
    assert _mean(l4, "decision_agreement") == 1.0
    assert _mean(l4, "decision_regret") == 0.0
    assert _mean(l4, "ipe") == 0.0 and _mean(l4, "action_effect") == 0.0
    assert _mean(l5, "reward_error") == 0.0 and _mean(l5, "value_error") == 0.0
    assert _mean(l5, "brier") == _mean(l5, "brier_floor")
    assert (_mean(l6, "pra"), _mean(l6, "spearman"), _mean(l6, "mmrv")) == (1.0, 1.0, 0.0)
    assert all(a["J_true"] == a["J_model"] for a in l6["anchors"])
    assert _mean(l7, "xgap") == 0.0 and _mean(l7, "xgap_exceed") == 0.0
    assert _mean(l7, "optimality_regret") == 0.0 and _mean(l7, "success") == 1.0
    assert _mean(probe, "regret") == 0.0 and _mean(probe, "reward_error") == 0.0


@pytest.mark.parametrize("sigma_i", [0.1, 0.6, 1.2])
def test_irrelevant_noise_decides_exactly_like_the_oracle(oracle_report, sigma_i):
    # Paper Prop. 1: noise on irrelevant dims never reaches a decision. Every ladder number
    # (decisions, XGap, probe, policy values and ranking, success) is identical, not just close;
    # only the L1 prediction errors see the noise.
    report = _ladder(NoiseModel.controlled(0.0, sigma_i))
    assert report["ladder"] == oracle_report["ladder"]
    assert report["E_tot"] > oracle_report["E_tot"]


def test_relevant_noise_is_flagged_at_every_decision_level(oracle_report):
    lad = _ladder(NoiseModel.controlled(0.35, 0.1))["ladder"]
    assert _mean(lad["L4"], "decision_agreement") < 1.0
    assert _mean(lad["L4"], "decision_regret") > 0.0
    assert _mean(lad["L4"], "ipe") > 0.0
    assert _mean(lad["L5"], "value_error") > 0.0
    assert _mean(lad["L6"], "mmrv") > 0.0
    assert _mean(lad["L7"], "xgap") > 0.0
    assert _mean(lad["probe"], "regret") > 0.0


def test_a_level_alone_gives_the_same_numbers_as_in_the_full_ladder(oracle_report):
    model = NoiseModel.controlled(0.2, 0.3)
    full = _ladder(model)
    alone = _ladder(model, levels=["L4"])
    assert alone["levels"] == ["L4"] and set(alone["ladder"]) == {"L4"}
    assert alone["ladder"]["L4"] == full["ladder"]["L4"]
    assert "success" not in alone and "E_tot" not in alone


def test_the_paper_report_is_the_ladder_s_l1_and_closed_loop_success():
    model, info = NoiseModel.controlled(0.35, 0.1), {"name": "noise"}
    paper = paper_report(model, info, PROTOCOL.replace(depth=DEPTH), progress=False)
    ladder = _ladder(model, levels=["L1", "L7"], model_info=info)
    head = ["model", "task", "world", "depth", "seeds", "episodes", "success", "outcomes"]
    head.append("mean_steps")
    assert list(paper)[: len(head) + 2] == [*head, "device", "E_tot"]
    # The same measurement; the two specs differ in their levels only.
    labels = ("spec", "spec_hash")
    assert {k: v for k, v in paper.items() if k not in labels} == {
        k: ladder[k] for k in paper if k not in labels
    }
    assert paper["spec"] == {**ladder["protocol"], "levels": ["L1", "success"]}
    assert paper["success"]["n"] == len(PROTOCOL.seeds) * PROTOCOL.episodes
    assert ladder["ladder"]["L7"]["success"]["mean"] == paper["success"]["mean"]
    # L7's closed-loop success is a level of its own, timed with L7.
    assert run_order(("L7",)) == ("success", "L7")
    assert set(_ladder(model, levels=["L7"])["timing"]) == {"L7"}


def test_the_paper_report_needs_l1_and_the_closed_loop():
    report = gridplan.evaluate(OracleModel(), depth=DEPTH, spec=PROTOCOL, levels=["L6"])
    with pytest.raises(ValueError, match="L1 metrics and the closed-loop success"):
        report.paper_dict()


def test_every_level_of_the_schema_is_registered_in_report_order():
    ladder_levels = [name for name in REGISTRY if name != "success"]
    assert tuple(ladder_levels) == LEVELS
    assert PAPER_LEVELS == ("L1", "success")


def test_reports_are_seeded_json_with_the_paper_keys(oracle_report):
    again = _ladder(OracleModel())
    again.pop("timing")
    first = dict(oracle_report)
    first.pop("timing")
    assert again == first
    text = json.dumps(oracle_report, allow_nan=False)
    for key in ("schema_version", "success", "outcomes", "E_tot", "DRPE", "profile", "ladder"):
        assert f'"{key}"' in text
    assert oracle_report["levels"] == ["L1", "L4", "L5", "L6", "L7", "probe"]


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="unknown levels"):
        check_levels(["L4", "L9"])
    with pytest.raises(ValueError, match="depth"):
        gridplan.evaluate(OracleModel(), depth=0, spec=PROTOCOL)
    with pytest.raises(ValueError, match="single-setting"):
        gridplan.evaluate(noise_grid([0.0, 0.1], [0.0]), spec=PROTOCOL)
    with pytest.raises(ValueError, match="uncertainty"):
        gridplan.evaluate(OracleModel(), spec=PROTOCOL, levels=["uncertainty"])
    with pytest.raises(ValueError, match="unknown spec 'huge'; valid tracks: obs-grid"):
        gridplan.evaluate(OracleModel(), "huge")


class FrozenModel:
    """Predicts that nothing ever moves."""

    def predict(self, state, action, generator):
        return state.clone()


class GoalHallucinator:
    """Predicts that every action lands the agent on the goal."""

    def predict(self, state, action, generator):
        out = state.clone()
        out[:, AGENT_X : AGENT_X + 2] = torch.tensor([7.0, 4.0]) / CELL_SCALE
        return out


def test_decisions_of_a_frozen_model_against_the_exact_values(make_state, random_states, gen):
    states = torch.cat(
        [make_state(agent=(6, 4), carrying=True, door_open=True), random_states(31, gen)]
    )
    d = decide(FrozenModel(), states, TASK_A, 2, torch.Generator().manual_seed(0))
    table = value_table(TASK_A)
    # Every leaf scores gamma^2 V*(s), so the tie-break picks uniformly; the chosen leaf's true
    # return and Q* come from the exact table.
    torch.testing.assert_close(d.predicted, TASK_A.gamma**2 * table.lookup(states))
    torch.testing.assert_close(d.q_true, table.q_values(states))
    torch.testing.assert_close(
        d.regret, table.q_values(states).amax(1) - d.q_true[torch.arange(32), d.action]
    )
    assert d.optimal.tolist() == (d.regret <= 1e-6).tolist()
    # A chosen sequence never returns more than the best continuation of its first action.
    chosen_q = d.q_true[torch.arange(32), d.action]
    assert torch.all(d.achieved <= chosen_q + 1e-6)


def test_a_goal_hallucinating_model_is_exploited():
    states = start_states([0], 64, TASK_A)
    d = decide(GoalHallucinator(), states, TASK_A, 2, torch.Generator().manual_seed(0))
    # Every leaf promises the goal on the first step: predicted return 1 everywhere.
    assert torch.all(d.predicted == 1.0)
    x = exploitability(d, threshold=0.1)
    assert x.xgap.mean == pytest.approx(1.0 - float(d.achieved.mean()))
    # From reset states (V* about .56) the promise of 1 falls far short.
    assert x.xgap.mean > 0.3 and x.exceed.mean > 0.9


class TinyEnsemble:
    """An ensemble of noise models that is exact in the west chamber and noisy east of the
    wall: its members disagree exactly where its predictions are wrong."""

    members = 4

    def __init__(self) -> None:
        self.noisy = [NoiseModel.controlled(0.6, 0.0) for _ in range(self.members)]
        self.private = torch.Generator().manual_seed(123)

    def _east(self, state):
        return (state[:, AGENT_X] * CELL_SCALE).round() >= 5

    def _blend(self, state, noisy, exact):
        return torch.where(self._east(state).unsqueeze(1), noisy, exact)

    def predict(self, state, action, generator):
        exact = transition(state, action, generator)[0]
        return self._blend(state, self.noisy[0].predict(state, action, generator), exact)

    def predict_members(self, state, action):
        exact = transition(state, action, self.private)[0]
        out = [
            self._blend(state, m.predict(state, action, self.private), exact) for m in self.noisy
        ]
        return torch.stack(out)


class ScoredOracle:
    """The oracle with a useless constant uncertainty score."""

    def predict(self, state, action, generator):
        return transition(state, action, generator)[0]

    def uncertainty(self, state, action):
        return torch.ones(state.shape[0])


def test_uncertainty_of_a_tiny_ensemble_tracks_its_rollout_error():
    report = _ladder(TinyEnsemble(), levels=["uncertainty"])
    u = report["ladder"]["uncertainty"]
    assert u["source"] == "predict_members" and u["n"] == 2 * PROTOCOL.branch_states
    assert u["spearman"]["rho"] > 0.3
    assert u["aurc_optimal"] <= u["aurc"] < u["aurc_random"]


def test_a_constant_uncertainty_score_is_uninformative():
    report = _ladder(ScoredOracle(), levels=["uncertainty"])
    u = report["ladder"]["uncertainty"]
    assert u["source"] == "uncertainty"
    assert u["aurc"] == pytest.approx(u["aurc_random"])
    assert u["spearman"]["rho"] is None


def test_default_levels_include_uncertainty_only_for_models_exposing_it():
    assert "uncertainty" in check_levels(None, TinyEnsemble())
    assert "uncertainty" not in check_levels(None, NoiseModel.controlled(0.1, 0.1))


def test_task_b_reads_c1_as_relevant():
    # In Task B c1 is decision-relevant, so M(0, sigma_i) (which noises c1) is no longer free.
    oracle = _ladder(OracleModel(), task="B", levels=["L4"])["ladder"]["L4"]
    noisy = _ladder(NoiseModel.controlled(0.0, 0.8), task="B", levels=["L4"])["ladder"]["L4"]
    assert _mean(oracle, "decision_agreement") == 1.0
    assert _mean(noisy, "ipe") > 0.0
    assert _mean(noisy, "decision_agreement") < 1.0
