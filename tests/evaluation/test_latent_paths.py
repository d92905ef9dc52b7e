"""Latent-model path: the comparison prints the frozen-decoder rows, an undefined Spearman rho
says which side is constant, a plug-in's non-finite output names its method on full batches,
the obs/model refusal names the model chosen, and the ``heads`` leaf score of the latent
scorer (``gridplan.planning.latent_scorer``) against the decoder score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from eval.cli import main
from gridplan.core.constants import N_ACTIONS, RIGHT
from gridplan.core.env import reset, state_outcome
from gridplan.core.tasks import TASK_A
from gridplan.core.values import value_table
from gridplan.evaluation.card import profile_rows
from gridplan.evaluation.compare_models import compare_models, table
from gridplan.evaluation.latent_eval import LatentProtocol, planning_note, prepare_latent
from gridplan.evaluation.ranking import constant_sides, policy_ranking
from gridplan.evaluation.spec import EvalSpec
from gridplan.evaluation.tabular import report_tables
from gridplan.models.latent_contract import LatentContractError, LatentThroughDecoder
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel
from gridplan.models.noise import OracleModel
from gridplan.planning.latent_scorer import LatentScorer
from gridplan.training.config import compose

PROTOCOL = EvalSpec(
    seeds=(0,),
    episodes=2,
    horizon=4,
    n_windows=16,
    branch_states=8,
    anchor_starts=4,
    anchor_rollouts=1,
    probe_questions=4,
    xgap_states=8,
    n_resamples=50,
)
LATENT_ROWS = ["E_repr", "E_pred", "E_excess"]


# 1. --compare prints E_repr / E_pred / E_excess ----------------------------------------------


@pytest.fixture(scope="module")
def comparison():
    return compare_models(
        [StateLatentModel(), PersistenceLatentModel(), OracleModel()],
        ["state", "still", "oracle"],
        depth=1,
        spec=PROTOCOL,
        levels=["L1"],
    )


def test_the_comparison_prints_each_latent_models_frozen_decoder_numbers(comparison):
    rows = {r["metric"]: r for r in comparison.rows if r["level"] == "latent"}
    assert list(rows) == LATENT_ROWS
    for key in LATENT_ROWS:
        state, still = (comparison.reports[i][0].latent["frozen"][key] for i in (0, 1))
        row = rows[key]
        assert row["values"] == {"state": state, "still": still, "oracle": None}
        assert row["differences"]["still"]["difference"] == still - state
        assert row["differences"]["oracle"]["difference"] is None
        assert row["paired_over"] is None and row["higher_is_better"] is False
    # Persistence predicts nothing: its excess is larger than the oracle dynamics'.
    assert rows["E_excess"]["values"]["still"] > rows["E_excess"]["values"]["state"]
    printed = {line.split()[1]: line for line in comparison.lines() if line.startswith("latent")}
    assert list(printed) == LATENT_ROWS
    for key in LATENT_ROWS:
        state, still = rows[key]["values"]["state"], rows[key]["values"]["still"]
        assert printed[key].split()[2:] == [
            f"{state:.4f}",
            f"{still:.4f}",
            f"{still - state:+.4f}",
            "n/a",
        ]
    assert "| latent | E_excess = E_pred - E_repr |" in comparison.markdown()


def test_a_comparison_of_state_models_has_no_latent_rows(comparison):
    oracle = comparison.reports[2]
    rows = table(["oracle", "again"], [oracle, oracle], n_resamples=50)
    assert [r["level"] for r in rows if r["level"] == "latent"] == []
    assert {r["metric"] for r in rows} >= {"success", "E_tot", "VPE"}


PLUGINS = """
from gridplan.models.latent_reference import PersistenceLatentModel, StateLatentModel


def state(task):
    return StateLatentModel(task.world)


def still(task):
    return PersistenceLatentModel(task.world)
"""


def test_eval_compare_of_two_latent_plugins_prints_the_latent_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    plugins = tmp_path / "latent_plugins.py"
    plugins.write_text(PLUGINS)
    tiny = ["--ladder-sizes", "tiny", "--depth", "1", "--seeds", "1", "--episodes", "2"]
    tiny += ["--eval-windows", "16", "--horizon", "4", "--levels", "L1", "--no-progress"]
    argv = ["--compare", f"{plugins}:state", f"{plugins}:still", *tiny]
    assert main(argv) == 0
    printed = [line.split() for line in capsys.readouterr().out.splitlines()]
    latent = {words[1]: words[2:] for words in printed if words and words[0] == "latent"}
    assert list(latent) == LATENT_ROWS
    result = json.loads(Path("compare.json").read_text())
    reports = [result["reports"][name][0] for name in (result["baseline"], *_others(result))]
    for key in LATENT_ROWS:
        base, other = (r[key] for r in reports)
        diff = other - base
        assert latent[key] == [f"{base:.4f}", f"{other:.4f}", f"{diff:+.4f}"]


def _others(result: dict) -> list[str]:
    return [m["name"] for m in result["models"] if m["name"] != result["baseline"]]


# 2. an undefined Spearman rho says why ------------------------------------------------------


def _l6(j_model) -> dict:
    j_true = [[0.2, 0.4], [0.9, 0.7], [0.5, 0.5]]
    return policy_ranking(["a", "b", "c"], j_true, j_model, n_resamples=20).to_dict()


def test_spearman_of_a_constant_model_side_says_j_model_is_constant():
    l6 = _l6([[0.0, 0.0]] * 3)
    assert l6["spearman"]["mean"] is None
    assert constant_sides(l6["anchors"]) == "constant: J_model 0 at every anchor"
    (table,) = report_tables({"ladder": {"L6": l6}})
    (shown,) = [line for line in table.text() if line.split()[0] == "spearman"]
    assert "  n/a (constant: J_model 0 at every anchor)  " in shown
    (row,) = [r for r in profile_rows({"ladder": {"L6": l6}}) if r["metric"] == "spearman"]
    assert row["value"] == "n/a (constant: J_model 0 at every anchor)"


def test_spearman_names_both_constant_sides_and_nothing_when_it_is_defined():
    both = [{"name": n, "J_true": 0.5, "J_model": 0.25} for n in "abc"]
    assert constant_sides(both) == (
        "constant: J_true 0.5 at every anchor and J_model 0.25 at every anchor"
    )
    l6 = _l6([[0.1, 0.1], [0.3, 0.3], [0.2, 0.2]])
    assert l6["spearman"]["mean"] == 1.0
    assert constant_sides(l6["anchors"]) is None
    (table,) = report_tables({"ladder": {"L6": l6}})
    (shown,) = [line for line in table.text() if line.split()[0] == "spearman"]
    assert shown.split()[1] == "1.000"


# 3. non-finite outputs on full batches name the plug-in's method -----------------------------

#: The contract check probes 8 rows; these plug-ins break only on batches above this.
LARGE = 64


def _nan_when_large(out: torch.Tensor) -> torch.Tensor:
    return torch.full_like(out, float("nan")) if out.shape[0] > LARGE else out


class LargeBatchNaNDecode(StateLatentModel):
    def decode(self, z):
        return _nan_when_large(super().decode(z))


class LargeBatchNaNEncode(StateLatentModel):
    def encode(self, obs):
        return _nan_when_large(super().encode(obs))


class LargeBatchNaNPredict(StateLatentModel):
    def predict_latent(self, z, action, generator):
        return _nan_when_large(super().predict_latent(z, action, generator))


SMALL = LatentProtocol(transitions=3000)


def test_a_decode_nan_on_large_batches_names_the_plugin_and_decode():
    with pytest.raises(
        LatentContractError,
        match=r"^LargeBatchNaNDecode\.decode\(test z_next\) holds non-finite values \(NaN or "
        r"inf\) in (\d+) of \1 rows \(first rows \[0, 1, 2, 3, 4\]\); look for a division "
        r"by zero",
    ):
        prepare_latent(LargeBatchNaNDecode(), TASK_A, protocol=SMALL)
    # Planning decodes through the same method and names it too.
    model = LatentThroughDecoder(LargeBatchNaNDecode())
    states = reset(LARGE + 1, torch.Generator().manual_seed(0), TASK_A)
    with pytest.raises(
        LatentContractError,
        match=rf"^LargeBatchNaNDecode\.decode holds non-finite .* in {LARGE + 1} of {LARGE + 1}",
    ):
        model.decode_latent(model.encode_states(states))


@pytest.mark.parametrize(
    ("model", "method"),
    [(LargeBatchNaNEncode(), "encode"), (LargeBatchNaNPredict(), "predict_latent")],
)
def test_encode_and_predict_nan_on_large_batches_name_the_plugin_and_method(model, method):
    name = type(model).__name__
    with pytest.raises(LatentContractError, match=rf"^{name}\.{method} holds non-finite values"):
        prepare_latent(model, TASK_A, protocol=SMALL)


# 4. the obs/model refusal names the model chosen ----------------------------------------------


@pytest.mark.parametrize(("model", "obs"), [("ensemble5", "grid"), ("mlp", "pixels")])
def test_a_state_model_with_observations_is_refused_naming_it_and_the_latent_models(model, obs):
    with pytest.raises(ValueError) as err:
        compose([f"model={model}", f"obs={obs}"])
    assert str(err.value) == (
        f"obs={obs} needs a latent model: model={model} (model.family mlp) reads the state; "
        "the models that accept grid, pixels, egocentric or full observations are "
        "model=latent_recon, model=jepa, model=tdmpc and model=rssm"
    )


# 5. the heads leaf score --------------------------------------------------------------------


class RewardHead(StateLatentModel):
    """``z = s`` with a reward head: the true reward of the decoded next state."""

    def __init__(self, task=TASK_A):
        super().__init__(task.world)
        self.task = task

    def reward(self, z, action, z_next):
        return state_outcome(self.decode(z_next).clamp(0.0, 1.0), self.task)[0]


class RewardValueHeads(RewardHead):
    """And a value head: exact V* of the decoded state."""

    def __init__(self, task=TASK_A):
        super().__init__(task)
        self.table = value_table(task)

    def value(self, z):
        return self.table.lookup(self.decode(z).clamp(0.0, 1.0))


class ConstantReward(StateLatentModel):
    """A wrong reward head: 1 after every step."""

    def reward(self, z, action, z_next):
        return torch.ones(z.shape[0])


def _scores(latent, heads: bool, root: torch.Tensor, depth: int) -> torch.Tensor:
    scorer = LatentScorer(LatentThroughDecoder(latent, heads=heads), TASK_A, depth)
    return scorer.scores(root, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("latent", [RewardHead(), RewardValueHeads()], ids=["reward", "value"])
def test_true_heads_give_exactly_the_decoder_scores(latent):
    root = reset(6, torch.Generator().manual_seed(3), TASK_A)
    # Depth 3 from the starts and from beside the goal: rewards, terminals and leaves all count.
    near = root.clone()
    near[:, :6] = _beside_the_goal()[0, :6]
    for start in (root, near):
        heads, decoder = _scores(latent, True, start, 3), _scores(latent, False, start, 3)
        assert heads.shape == (6, N_ACTIONS**3)
        assert torch.equal(heads, decoder)
    assert decoder.max() == 1.0  # the goal reached at the first step: reward 1, terminal


def _beside_the_goal() -> torch.Tensor:
    """Agent at (6, 4) next to Task A's goal (7, 4), key carried, door open."""
    root = reset(1, torch.Generator().manual_seed(0), TASK_A)
    cells = TASK_A.world.size - 1
    root[0, :6] = torch.tensor([6 / cells, 4 / cells, 6 / cells, 4 / cells, 1.0, 1.0])
    return root


def test_a_constant_reward_head_changes_the_scores_as_computed_by_hand():
    root, g = _beside_the_goal(), TASK_A.gamma
    decoder = _scores(ConstantReward(), False, root, 1)[0]
    heads = _scores(ConstantReward(), True, root, 1)[0]
    # Right reaches the goal: reward 1, terminal, under both. Every other action lands two
    # steps from the goal, V* = gamma: decoder 0 + gamma * gamma, head 1 + gamma * gamma.
    others = [a for a in range(N_ACTIONS) if a != RIGHT]
    assert decoder[RIGHT] == heads[RIGHT] == 1.0
    assert decoder[others].tolist() == pytest.approx([g * g] * 3, abs=1e-6)
    assert heads[others].tolist() == pytest.approx([1 + g * g] * 3, abs=1e-6)
    # The wrong head now prefers any step away from the goal.
    assert int(heads.argmax()) != RIGHT and int(decoder.argmax()) == RIGHT


def test_describe_says_which_reward_and_value_score_the_leaves():
    def described(latent, heads):
        return LatentScorer(LatentThroughDecoder(latent, heads=heads), TASK_A, 1).describe()

    decoder = described(RewardValueHeads(), False)
    assert (decoder["leaf_score"], decoder["reward"], decoder["leaf_value"]) == (
        "decoder",
        "true reward of decoded states",
        "V* at the decoded leaf",
    )
    reward = described(RewardHead(), True)
    assert (reward["leaf_score"], reward["reward"], reward["leaf_value"]) == (
        "heads",
        "model reward head",
        "V* at the decoded leaf",
    )
    both = described(RewardValueHeads(), True)
    assert (both["leaf_score"], both["reward"], both["leaf_value"]) == (
        "heads",
        "model reward head",
        "model value head at the leaf latent",
    )
    note = planning_note({"planning": both, "obs_kind": "state", "latent_dim": 12})
    assert "leaves scored with the model's reward head and model value head at the leaf" in note


def test_a_non_finite_reward_head_while_planning_names_the_method():
    class NaNReward(StateLatentModel):
        def reward(self, z, action, z_next):
            return _nan_when_large(torch.zeros(z.shape[0]))

    root = reset(2, torch.Generator().manual_seed(0), TASK_A)
    message = r"^NaNReward\.reward holds non-finite .* in 128 of 128 rows"
    with pytest.raises(LatentContractError, match=message):
        _scores(NaNReward(), True, root, 3)  # 2 x 64 leaf rows
