"""Bring-your-own-model: loading factories by import path or file, the contract checks that turn
a broken plug-in into a clear error, the model's own reward in the planner, and the worked
example of ``scripts/example_model.py`` evaluated end to end."""

from __future__ import annotations

import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import gridplan
from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.core.constants import RIGHT
from gridplan.core.env import reset, transition
from gridplan.evaluation.decisions import decide
from gridplan.evaluation.spec import CONTROLLED, EvalSpec, fitted_to
from gridplan.models.noise import OracleModel
from gridplan.models.plugins import (
    CheckedModel,
    OutOfRangeWarning,
    PluginError,
    build,
    check_contract,
    checked,
    load_factory,
    parse_args,
    split_spec,
)
from gridplan.planning.registry import leaf_scorer
from gridplan.planning.scorers import GenericScorer, RewardScorer

TASK_A = tasks.get("A")
EXAMPLE = Path(__file__).resolve().parents[2] / "scripts" / "example_model.py"
PROTOCOL = EvalSpec(
    seeds=(0,),
    episodes=4,
    horizon=4,
    n_windows=32,
    branch_states=32,
    anchor_starts=16,
    anchor_rollouts=2,
    probe_questions=16,
    xgap_states=32,
    n_resamples=100,
)


class TrueDynamics:
    """A plug-in that steps the true environment (a duck-typed oracle)."""

    def predict(self, state, action, generator):
        return transition(state, action, generator, TASK_A)[0]


class TrueDynamicsAndReward(TrueDynamics):
    """The true environment with its true reward, predicted by the plug-in itself."""

    def predict_reward(self, state, action, next_state):
        return transition(state, action, torch.Generator(), TASK_A)[1].to(state.dtype)


class NeverRewarded(TrueDynamics):
    """True dynamics, but it predicts that no step is ever rewarded."""

    def predict_reward(self, state, action, next_state):
        return torch.zeros(state.shape[0], dtype=state.dtype)


class Broken(TrueDynamics):
    """True dynamics until imagined step ``at``, then ``corrupt`` is applied to the output."""

    def __init__(self, corrupt, at: int = 1) -> None:
        self.corrupt, self.at, self.steps = corrupt, at, 0

    def start_rollout(self, batch, generator):
        self.steps = 0

    def predict(self, state, action, generator):
        self.steps += 1
        out = super().predict(state, action, generator)
        return self.corrupt(out) if self.steps >= self.at else out


def _nan_rows(out):
    out = out.clone()
    out[:2, 0] = float("nan")
    return out


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "my_model.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_model_arguments_parse_as_literals():
    assert parse_args(["slip=0.3", "name=fast", "flag=True", "n=4", "x=none"]) == {
        "slip": 0.3,
        "name": "fast",
        "flag": True,
        "n": 4,
        "x": None,
    }
    assert split_spec("pkg.mod:make,slip=0.2") == ("pkg.mod:make", {"slip": 0.2})
    with pytest.raises(PluginError, match="key=value"):
        parse_args(["slip"])
    with pytest.raises(PluginError, match="given twice"):
        parse_args(["a=1", "a=2"])


def test_an_import_path_that_does_not_exist_is_named(tmp_path):
    with pytest.raises(PluginError, match="cannot import module 'no_such_package.models'"):
        load_factory("no_such_package.models:make")
    with pytest.raises(PluginError, match="does not exist"):
        load_factory(f"{tmp_path / 'missing.py'}:make")
    with pytest.raises(PluginError, match="neither a built-in model"):
        load_factory("noise")


def test_a_missing_or_non_callable_factory_is_named(tmp_path):
    path = _write(
        tmp_path,
        """
        SETTINGS = {"slip": 0.1}

        def make_model():
            return None
        """,
    )
    with pytest.raises(PluginError, match="no attribute 'make'.*make_model"):
        load_factory(f"{path}:make")
    with pytest.raises(PluginError, match="is a dict, not a callable factory"):
        load_factory(f"{path}:SETTINGS")
    # An installed module's factory by dotted path.
    assert load_factory("gridplan.models.noise:OracleModel") is OracleModel


def test_a_file_that_fails_to_import_or_a_factory_that_fails_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import not_a_module_anywhere\n")
    with pytest.raises(PluginError, match="importing .*bad.py.* failed: ModuleNotFoundError"):
        load_factory(f"{bad}:make")
    path = _write(
        tmp_path,
        """
        class Thing:
            pass

        def make(size: int = 1):
            if size < 0:
                raise ValueError("size must be >= 0")
            return Thing()
        """,
    )
    with pytest.raises(PluginError, match="rejected its arguments"):
        build(f"{path}:make", {"colour": "red"}, TASK_A, "cpu")
    # The error names the line of the user's file that raised.
    with pytest.raises(
        PluginError, match=r"raised ValueError at .*my_model.py:7 in make: raise ValueError"
    ):
        build(f"{path}:make", {"size": -1}, TASK_A, "cpu")
    with pytest.raises(PluginError, match="without a callable predict"):
        build(f"{path}:make", {}, TASK_A, "cpu")


def test_the_factory_receives_task_and_device_when_it_asks_for_them(tmp_path):
    path = _write(
        tmp_path,
        """
        class Model:
            def __init__(self, task, device):
                self.task, self.device = task, device

            def predict(self, state, action, generator):
                return state

        def make(task, device):
            return Model(task, device)
        """,
    )
    model = build(f"{path}:make", {}, tasks.get("B"), "cpu")
    assert model.task.name == "B" and model.device == torch.device("cpu")


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda out: out[:, :11], r"returned shape \(8, 11\), expected \(8, 12\)"),
        (lambda out: out.double(), "returned dtype torch.float64, expected torch.float32"),
        (lambda out: out.to("meta"), "on meta, expected cpu"),
        (lambda out: out.tolist(), "must return a torch.Tensor, got list"),
        (_nan_rows, r"non-finite values \(NaN or inf\) in 2 of 8 rows \(first rows \[0, 1\]\)"),
    ],
    ids=["shape", "dtype", "device", "type", "non-finite"],
)
def test_a_broken_output_is_an_error_naming_the_problem(corrupt, message):
    with pytest.raises(PluginError, match=message):
        check_contract(Broken(corrupt), TASK_A, "cpu", "my_model")


def test_non_finite_outputs_name_the_imagined_step():
    model = CheckedModel(Broken(_nan_rows, at=3), "my_model")
    gen = torch.Generator().manual_seed(0)
    state = reset(8, gen, TASK_A)
    model.start_rollout(8, gen)
    action = torch.zeros(8, dtype=torch.long)
    for _ in range(2):
        state = model.predict(state, action, gen)
    with pytest.raises(PluginError, match="my_model.predict .* 2 of 8 rows .* imagined step 3"):
        model.predict(state, action, gen)
    # Inside the ladder the same error ends the evaluation.
    with pytest.raises(PluginError, match="non-finite"):
        gridplan.evaluate(Broken(_nan_rows, at=2), depth=2, spec=PROTOCOL, levels=["L4"])


def test_outputs_outside_the_unit_interval_are_clamped_with_one_warning():
    model = CheckedModel(Broken(lambda out: out + 2.0), "drifter")
    gen = torch.Generator().manual_seed(0)
    state = reset(4, gen, TASK_A)
    action = torch.zeros(4, dtype=torch.long)
    with pytest.warns(OutOfRangeWarning, match="48 values outside"):
        out = model.predict(state, action, gen)
    assert torch.equal(out, torch.ones_like(out))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(state, action, gen)
    assert model.clamped == 96
    with pytest.warns(OutOfRangeWarning):
        report = gridplan.evaluate(
            Broken(lambda out: out * 1.5), depth=2, spec=PROTOCOL, levels=["L4"]
        )
    assert any("and clamped into it" in note for note in report.notes)
    # The clamp count is a fraction of all predicted values.
    clamped = report.clamped
    assert 0 < clamped["values"] < clamped["of"]
    assert clamped["fraction"] == clamped["values"] / clamped["of"]


def test_a_predict_of_the_wrong_signature_names_the_method_and_step():
    class ForgotTheGenerator:
        def predict(self, state, action):
            return state

    message = (
        r"user_model.predict \(at imagined step 1\) has the wrong signature: it is "
        r"predict\(state, action\)"
    )
    with pytest.raises(PluginError, match=message):
        check_contract(ForgotTheGenerator(), TASK_A, "cpu", "user_model")


def test_broken_optional_methods_are_named():
    class BadReward(TrueDynamics):
        def predict_reward(self, state, action, next_state):
            return torch.zeros(state.shape[0], 1)

    class BadMembers(TrueDynamics):
        def predict_members(self, state, action):
            return state

    class NegativeUncertainty(TrueDynamics):
        def uncertainty(self, state, action):
            return -torch.ones(state.shape[0])

    with pytest.raises(PluginError, match=r"predict_reward returned shape \(8, 1\)"):
        check_contract(BadReward(), TASK_A, "cpu")
    with pytest.raises(PluginError, match=r"predict_members must return \(K, 8, 12\)"):
        check_contract(BadMembers(), TASK_A, "cpu")
    with pytest.raises(PluginError, match="negative scores in 8 of 8 rows"):
        check_contract(NegativeUncertainty(), TASK_A, "cpu")


def test_built_in_models_are_trusted_and_plugins_wrapped():
    oracle = OracleModel()
    assert checked(oracle) is oracle
    wrapped = checked(TrueDynamics())
    assert isinstance(wrapped, CheckedModel)
    assert not hasattr(wrapped, "predict_reward") and not hasattr(wrapped, "uncertainty")
    assert type(leaf_scorer(wrapped, TASK_A, 2)) is GenericScorer
    assert type(leaf_scorer(checked(NeverRewarded()), TASK_A, 2)) is RewardScorer
    with pytest.raises(PluginError, match="n_settings=3"):
        CheckedModel(type("Multi", (TrueDynamics,), {"n_settings": 3})())


def test_a_wrapped_plugin_keeps_the_world_it_declares():
    # python -m eval wraps a plug-in before fitting the spec to its world (eval/specs.py).
    world = worlds.get("g16-k8")
    wrapped = checked(type("Big", (TrueDynamics,), {"world": world})())
    assert wrapped.world is world
    assert fitted_to(CONTROLLED.replace(world="g16-k8"), wrapped).world == "g16-k8"
    assert not hasattr(checked(TrueDynamics()), "world")


@pytest.mark.parametrize(
    "thing, match",
    [("oracle", "a str without a callable predict.*python -m eval --model"), (object(), "object")],
)
def test_evaluate_refuses_an_object_that_is_not_a_model_by_name(thing, match):
    with pytest.raises(PluginError, match=match):
        gridplan.evaluate(thing, depth=1, spec="tiny-controlled", levels=["L4"])


def test_the_planner_scores_the_models_own_reward(make_state):
    # One step west of the goal, the key carried and the door open: moving right arrives.
    state = make_state(agent=(6, 4), carrying=True, door_open=True, rows=2)
    gen = torch.Generator
    truth = decide(OracleModel(), state, TASK_A, 2, gen().manual_seed(0), keep_scores=True)
    own = decide(checked(TrueDynamicsAndReward()), state, TASK_A, 2, gen().manual_seed(0), True)
    # Its own reward is the true one: the same leaf scores as the oracle's.
    torch.testing.assert_close(own.model_scores, truth.model_scores)
    assert own.action.tolist() == [RIGHT, RIGHT]
    blind = decide(checked(NeverRewarded()), state, TASK_A, 2, gen().manual_seed(0), True)
    # Never rewarded: the leaves that arrive first (RIGHT, then anything) promise 1 in truth
    # and 0 inside this model (they terminate on the goal with no reward and no V* after).
    arrive = slice(4 * RIGHT, 4 * RIGHT + 4)
    assert torch.all(truth.model_scores[:, arrive] == 1.0)
    assert torch.all(blind.model_scores[:, arrive] == 0.0)
    assert torch.all(blind.action != RIGHT) and torch.all(blind.regret > 0)


def test_a_plugin_of_the_true_dynamics_is_as_perfect_as_the_oracle():
    kwargs = {"depth": 2, "spec": PROTOCOL, "levels": ["L4", "L5", "L6", "probe"]}
    oracle = gridplan.evaluate(OracleModel(), **kwargs).to_dict()
    plugin = gridplan.evaluate(TrueDynamicsAndReward(), **kwargs).to_dict()
    assert plugin["ladder"] == oracle["ladder"]
    assert any("predicts its own reward" in note for note in plugin["notes"])
    assert plugin["model"] == {"name": "TrueDynamicsAndReward"}


def test_the_worked_example_runs_every_level_from_its_file():
    path = list(sys.path)
    model = build(f"{EXAMPLE}:make", {"slip": 0.3}, TASK_A, "cpu")
    # The plug-in's folder is importable while it loads and taken off the path after.
    assert model.slip == 0.3 and sys.path == path
    report = gridplan.evaluate(model, depth=2, spec=PROTOCOL).to_dict()
    assert report["levels"] == ["L1", "L4", "L5", "L6", "L7", "probe", "uncertainty"]
    lad = report["ladder"]
    # Slipping moves: some decisions are sub-optimal, yet it ranks the policies well and its
    # uncertainty (the slip chance where a move goes through) points at its errors.
    assert 0.0 < lad["L4"]["decision_agreement"]["mean"] <= 1.0
    assert lad["L4"]["ipe"]["mean"] > 0.0
    assert lad["L6"]["spearman"]["mean"] > 0.5
    assert lad["uncertainty"]["source"] == "uncertainty"
    assert lad["uncertainty"]["aurc"] <= lad["uncertainty"]["aurc_random"]


def test_an_option_named_path_is_recorded_not_shadowed_by_the_plugin_file(tmp_path):
    from eval.specs import plugin

    path = _write(
        tmp_path,
        """
        from gridplan.core.env import transition

        class Model:
            def __init__(self, task, weights):
                self.task, self.weights = task, weights

            def predict(self, state, action, generator):
                return transition(state, action, generator, self.task)[0]

        def make(task, path="w.pt"):
            return Model(task, path)
        """,
    )
    task = tasks.get("A")
    _, info = plugin(f"{path}:make", {"path": "weights.pt"}, task, "cpu")
    assert info["path"] == "weights.pt" and str(path) in info["factory"]
    _, plain = plugin(f"{path}:make", {}, task, "cpu")
    assert plain["path"].endswith("my_model.py")
