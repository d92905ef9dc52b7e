"""Bring-your-own-model: loading by import path, argument parsing, and a clear error for each
way a plug-in can break the contract; the worked example runs end to end."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import gridplan
from gridplan import tasks
from gridplan.env import reset, transition
from gridplan.ladder.evaluate import LadderProtocol
from gridplan.models import NoiseModel
from gridplan.planner import Planner
from gridplan.plugins import (
    CheckedModel,
    OutOfRangeWarning,
    PluginError,
    RewardScorer,
    build,
    check_contract,
    checked,
    load_factory,
    parse_args,
    split_spec,
)

TASK_A = tasks.get("A")
EXAMPLE = Path(__file__).resolve().parents[1] / "scripts" / "example_model.py"
TINY = LadderProtocol(
    seeds=(0,),
    episodes=4,
    horizon=4,
    n_windows=32,
    branch_states=16,
    anchor_starts=8,
    anchor_rollouts=2,
    probe_questions=8,
    xgap_states=16,
    n_resamples=50,
)


def write_plugin(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "user_model.py"
    path.write_text("import torch\nfrom gridplan.env import transition\n\n" + textwrap.dedent(body))
    return path


def test_model_arguments_parse_as_literals():
    assert parse_args(["slip=0.3", "name=abc", "flag=True", "off=false", "n=3", "x=None"]) == {
        "slip": 0.3,
        "name": "abc",
        "flag": True,
        "off": False,
        "n": 3,
        "x": None,
    }
    assert split_spec("pkg.mod:make,slip=0.2") == ("pkg.mod:make", {"slip": 0.2})
    with pytest.raises(PluginError, match="key=value"):
        parse_args(["slip"])
    with pytest.raises(PluginError, match="twice"):
        parse_args(["a=1", "a=2"])


def test_an_unimportable_module_is_named():
    with pytest.raises(PluginError, match="cannot import module 'no_such_pkg.models'"):
        load_factory("no_such_pkg.models:make")


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(PluginError, match="does not exist"):
        load_factory(f"{tmp_path / 'absent.py'}:make")


def test_a_missing_factory_lists_what_the_module_has(tmp_path):
    path = write_plugin(tmp_path, "def build():\n    return None\n")
    with pytest.raises(PluginError, match="no attribute 'make'.*build"):
        load_factory(f"{path}:make")


def test_a_factory_that_is_not_callable(tmp_path):
    path = write_plugin(tmp_path, "make = 3\n")
    with pytest.raises(PluginError, match="is a int, not a callable"):
        load_factory(f"{path}:make")


def test_a_module_that_fails_to_import_is_reported(tmp_path):
    path = write_plugin(tmp_path, "raise RuntimeError('broken on purpose')\n")
    with pytest.raises(PluginError, match="importing .* failed: RuntimeError: broken on purpose"):
        load_factory(f"{path}:make")


def test_a_malformed_target():
    with pytest.raises(PluginError, match="pkg.module:factory"):
        load_factory("just_a_name")


def test_factory_arguments_and_injected_task_and_device(tmp_path):
    path = write_plugin(
        tmp_path,
        """
        class M:
            def __init__(self, scale, task, device):
                self.scale, self.task, self.device = scale, task, device
            def predict(self, state, action, generator):
                return transition(state, action, generator, self.task)[0]

        def make(scale=1.0, task=None, device=None):
            return M(scale, task, device)
        """,
    )
    model = build(f"{path}:make", {"scale": 2.0}, TASK_A, "cpu")
    assert (model.scale, model.task, model.device) == (2.0, TASK_A, torch.device("cpu"))
    with pytest.raises(PluginError, match="rejected its arguments"):
        build(f"{path}:make", {"bogus": 1}, TASK_A, "cpu")


def test_a_factory_returning_no_model(tmp_path):
    path = write_plugin(tmp_path, "def make():\n    return 42\n")
    with pytest.raises(PluginError, match="without a callable predict"):
        build(f"{path}:make", {}, TASK_A, "cpu")


class Broken:
    """A model whose output is spoiled by ``spoil(out, state) -> out``."""

    def __init__(self, spoil):
        self.spoil = spoil

    def predict(self, state, action, generator):
        return self.spoil(transition(state, action, generator, TASK_A)[0], state)


def _nan_rows(out, state):
    out = out.clone()
    out[[1, 3], 0] = float("nan")
    return out


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda out, s: out[:, :11], r"returned shape \(8, 11\), expected \(8, 12\)"),
        (lambda out, s: out.double(), "dtype torch.float64, expected torch.float32"),
        (lambda out, s: out.to("meta"), "tensor on meta, expected cpu"),
        (lambda out, s: out.tolist(), "must return a torch.Tensor, got list"),
        (
            _nan_rows,
            r"non-finite values .* in 2 of 8 rows \(first rows \[1, 3\]\) at imagined "
            r"step 1",
        ),
    ],
    ids=["shape", "dtype", "device", "type", "non-finite"],
)
def test_each_broken_output_is_a_clear_error(spoil, message):
    with pytest.raises(PluginError, match=message):
        check_contract(Broken(spoil), TASK_A, "cpu", "user_model")


def test_non_finite_output_names_the_step_of_the_rollout(gen):
    model = CheckedModel(Broken(lambda out, s: out), "user_model")
    state = reset(5, gen, TASK_A)
    action = torch.zeros(5, dtype=torch.long)
    model.start_rollout(5, gen)
    model.predict(state, action, gen)
    model.inner.spoil = _nan_rows
    with pytest.raises(PluginError, match="2 of 5 rows .* at imagined step 2"):
        model.predict(state, action, gen)


def test_outputs_outside_the_unit_interval_are_clamped_with_one_warning(gen):
    model = CheckedModel(Broken(lambda out, s: out + 0.5), "user_model")
    state = reset(6, gen, TASK_A)
    action = torch.zeros(6, dtype=torch.long)
    with pytest.warns(OutOfRangeWarning, match="outside \\[0, 1\\].*clamped"):
        out = model.predict(state, action, gen)
    assert out.max() <= 1.0 and out.min() >= 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(state, action, gen)


def test_a_raising_predict_names_the_method(gen):
    class Raises:
        def predict(self, state, action):  # forgot the generator
            return state

    with pytest.raises(PluginError, match="user_model.predict raised TypeError"):
        check_contract(Raises(), TASK_A, "cpu", "user_model")


def test_optional_methods_are_checked_and_only_exposed_when_present():
    class Rewards:
        def predict(self, state, action, generator):
            return transition(state, action, generator, TASK_A)[0]

        def predict_reward(self, state, action, next_state):
            return torch.zeros(state.shape[0], 1)

    with pytest.raises(PluginError, match=r"predict_reward returned shape \(8, 1\)"):
        check_contract(Rewards(), TASK_A, "cpu", "user_model")
    plain = CheckedModel(Broken(lambda out, s: out))
    assert not hasattr(plain, "predict_reward") and not hasattr(plain, "uncertainty")


def test_built_in_models_are_not_wrapped():
    model = NoiseModel.controlled(0.1, 0.1)
    assert checked(model) is model
    assert isinstance(checked(Broken(lambda out, s: out)), CheckedModel)


def test_a_model_with_its_own_reward_is_planned_with_it(make_state):
    class NoReward:
        """True dynamics, but it believes no reward ever comes."""

        def predict(self, state, action, generator):
            return transition(state, action, generator, TASK_A)[0]

        def predict_reward(self, state, action, next_state):
            return torch.zeros(state.shape[0])

    model = checked(NoReward())
    planner = Planner(model, 1, TASK_A)
    assert isinstance(planner.scorer, RewardScorer)
    # One step from the goal: the true reward would make moving right worth 1; with its own
    # zero reward and termination at the goal, the model values that move at 0.
    state = make_state(agent=(6, 4), carrying=True, door_open=True)
    q = planner.action_values(state, torch.Generator())
    assert float(q[0, 3]) == 0.0 and float(q[0, 2]) > 0.0


def test_the_worked_example_runs_through_evaluate():
    model = build(f"{EXAMPLE}:make", {"slip": 0.2}, TASK_A, "cpu")
    report = gridplan.evaluate(model, depth=2, protocol=TINY, model_info={"name": "example"})
    data = report.to_dict()
    assert set(data["ladder"]) == {"L4", "L5", "L6", "L7", "probe", "uncertainty"}
    assert data["ladder"]["uncertainty"]["source"] == "uncertainty"
    assert any("own reward" in note for note in data["notes"])
    # It knows the rules, so it plans well; the slips cost some decision quality.
    assert data["ladder"]["L7"]["success"]["mean"] > 0.5
