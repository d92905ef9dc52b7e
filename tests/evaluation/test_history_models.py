"""Models with opaque, history-aware state (``gridplan.models.opaque``): a TensorDict or tuple
state laid out as a flat latent and back, the closed loop handing each episode's history to
``init``, the boundary's refusals (a mutated state, a batch that differs from the actions', NaN
in one branch, a history of the wrong length), and a history plug-in through ``python -m
eval`` deciding exactly as the same dynamics behind the latent contract."""

from __future__ import annotations

import json

import pytest
import torch
from tensordict import TensorDict

from eval.cli import main
from gridplan.core import tasks
from gridplan.core.world import DEFAULT
from gridplan.models.latent_contract import LatentContractError, LatentThroughDecoder
from gridplan.models.latent_reference import StateLatentModel
from gridplan.models.opaque import OpaqueLatent, StateLayout, admit_history
from gridplan.models.plugins import CheckedHistoryModel, PluginError, check_plugin
from gridplan.planning.closed_loop import run_episodes

TINY = [
    "--ladder-sizes", "tiny", "--depth", "2", "--seeds", "1", "--episodes", "4",
    "--eval-windows", "16", "--horizon", "4", "--no-progress",
]  # fmt: skip

PLUGINS = '''
import torch
from tensordict import TensorDict
from gridplan.models.latent_reference import StateLatentModel


class Recurrent:
    """The oracle's step behind an opaque TensorDict state: the current state and how many
    observations the state was filtered from."""

    obs_kind, deterministic, history, metadata = "state", False, 3, {}

    def __init__(self, world):
        self.world = world
        self.dynamics = StateLatentModel(world)

    def init(self, observations, actions):
        n, length = observations.shape[:2]
        seen = torch.full((n, 1), float(length))
        return TensorDict({"s": observations[:, -1].clone(), "seen": seen}, batch_size=[n])

    def step(self, state, action, generator):
        s = self.dynamics.predict_latent(state["s"], action, generator)
        return TensorDict({"s": s, "seen": state["seen"]}, batch_size=[s.shape[0]])

    def decode(self, state):
        return state["s"]


def recurrent(task):
    return Recurrent(task.world)


def latent(task):
    return StateLatentModel(task.world)
'''


class Recurrent:
    """``PLUGINS``'s model, for the tests that build it directly."""

    obs_kind, deterministic, history, metadata = "state", False, 3, {}

    def __init__(self, world=DEFAULT):
        self.world = world
        self.dynamics = StateLatentModel(world)
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def init(self, observations, actions):
        self.seen.append((observations.clone(), actions.clone()))
        return (observations[:, -1].clone(), torch.zeros(observations.shape[0], 2))

    def step(self, state, action, generator):
        return (self.dynamics.predict_latent(state[0], action, generator), state[1] + 1)

    def decode(self, state):
        return state[0]


# 1. the state laid out as a latent ----------------------------------------------------------


def test_a_nested_tensordict_state_packs_into_one_latent_and_back():
    state = TensorDict(
        {"h": torch.arange(12.0).view(3, 4), "rnn": {"c": torch.ones(3, 2, 2)},
         "token": torch.tensor([[5], [7], [9]])},
        batch_size=[3],
    )  # fmt: skip
    layout = StateLayout.of(state, 3, "m.init")
    assert layout.names == ("h", "rnn.c", "token")
    assert layout.width == 4 + 4 + 1
    z = layout.pack(state, 3, "m.init")
    assert z.shape == (3, 9) and z.dtype == torch.float32
    assert z[1].tolist() == [4.0, 5.0, 6.0, 7.0, 1.0, 1.0, 1.0, 1.0, 7.0]
    back = layout.unpack(z)
    assert back["token"].dtype == torch.int64 and torch.equal(back["token"], state["token"])
    assert torch.equal(back["rnn", "c"], state["rnn", "c"])


def test_a_state_of_another_layout_than_inits_is_refused_by_name():
    layout = StateLayout.of((torch.zeros(2, 3), torch.zeros(2, 1)), 2, "m.init")
    with pytest.raises(LatentContractError, match=r"m.step returned a state laid out as tuple"):
        layout.pack((torch.zeros(2, 4), torch.zeros(2, 1)), 2, "m.step")


# 2. the boundary ------------------------------------------------------------------------------


class Mutating(Recurrent):
    def step(self, state, action, generator):
        state[1].add_(1)
        return super().step(state, action, generator)


class WrongBatch(Recurrent):
    def step(self, state, action, generator):
        s, count = super().step(state, action, generator)
        return s[:1].expand(s.shape[0] // 2, -1), count[: s.shape[0] // 2]


class NaNBranch(Recurrent):
    def step(self, state, action, generator):
        s, count = super().step(state, action, generator)
        count = count.clone()
        count[action == 2] = float("nan")
        return s, count


def _check(model):
    return check_plugin(model, tasks.TASK_A, "cpu", "mine.make", "mine.py")


def test_a_model_that_mutates_the_state_it_was_given_is_refused():
    with pytest.raises(PluginError) as info:
        _check(Mutating())
    assert str(info.value).startswith(
        "mine.make.step (from mine.py) modified the state it was given (leaf state[1] changed "
        "in place)"
    )


def test_a_step_whose_batch_differs_from_the_actions_names_the_method_and_shapes():
    with pytest.raises(PluginError) as info:
        _check(WrongBatch())
    assert str(info.value).startswith(
        "mine.make.step (from mine.py) returned a state whose leaf state[0] is (4, 12) float32, "
        "but it was given 8 rows"
    )


def test_a_step_that_returns_nan_in_one_branch_names_the_leaf_and_rows():
    with pytest.raises(PluginError) as info:
        _check(NaNBranch())
    message = str(info.value)
    assert (
        "mine.make.step (from mine.py) returned non-finite values (NaN or inf) in leaf " in message
    )
    assert "state[1], 2 of 8 rows (first rows [2, 6])" in message


def test_a_history_of_the_wrong_length_names_the_method_and_shapes():
    latent = admit_history(CheckedHistoryModel(Recurrent(), "mine.make", "mine.py"), DEFAULT)
    obs = torch.rand(5, 2, 12)
    with pytest.raises(LatentContractError) as info:
        latent.encode_history(obs, torch.zeros(5, 2, dtype=torch.long))
    assert str(info.value) == (
        "mine.make.init (from mine.py) takes T + 1 observations and the T int64 actions "
        "between them; got observations (5, 2, 12) float32, actions (5, 2) int64: pass "
        "actions of shape (5, 1) int64"
    )
    with pytest.raises(
        LatentContractError, match=r"reads 1 to 3 observations \(its history\), got 4"
    ):
        latent.encode_history(torch.rand(5, 4, 12), torch.zeros(5, 3, dtype=torch.long))


class Unbatched(Recurrent):
    def init(self, observations, actions):
        s, count = super().init(observations, actions)
        return TensorDict({"s": s, "count": count}, batch_size=[])

    def step(self, state, action, generator):
        s = self.dynamics.predict_latent(state["s"], action, generator)
        return TensorDict({"s": s, "count": state["count"]}, batch_size=[])

    def decode(self, state):
        return state["s"]


def test_a_tensordict_without_its_batch_size_is_refused():
    with pytest.raises(PluginError) as info:
        _check(Unbatched())
    assert str(info.value).startswith(
        "mine.make.init (from mine.py) returned a TensorDict of batch size [], but it was "
        "given 2 rows; build it with batch_size=[2]"
    )


class MutatingBoth(Recurrent):
    def step(self, state, action, generator):
        state[0].mul_(1.0).add_(0.5)
        state[1].add_(1)
        return super().step(state, action, generator)


def test_every_leaf_mutated_in_place_is_named():
    with pytest.raises(PluginError, match=r"\(leaf state\[0\], state\[1\] changed in place\)"):
        _check(MutatingBoth())


@pytest.mark.parametrize("history", [0, None])
def test_a_plugin_without_a_history_length_is_told_to_declare_one(tmp_path, history):
    model = Recurrent()
    model.history = history
    with pytest.raises(PluginError, match=r"history must be an integer >= 1"):
        _check(model)
    # Loaded from a file, the factory's model is recognized by init and step whatever its
    # history declares, and the boundary names what is wrong with it.
    plugin = tmp_path / "declares.py"
    plugin.write_text(
        PLUGINS + f"\n\ndef bad(task):\n    m = Recurrent(task.world)\n"
        f"    m.history = {history!r}\n    return m\n"
    )
    from gridplan.models.plugins import build

    built = build(f"{plugin}:bad", {}, tasks.TASK_A, "cpu")
    with pytest.raises(PluginError, match=r"history must be an integer >= 1"):
        _check(built)


# 3. the closed loop hands each episode its history --------------------------------------------


def test_the_closed_loop_plans_from_each_episodes_last_observations_and_actions():
    model = Recurrent()
    latent = LatentThroughDecoder(admit_history(model, DEFAULT))
    model.seen.clear()
    result = run_episodes(latent, depth=1, seeds=[0], episodes=3, record=True)
    plans = model.seen
    assert plans[0][0].shape == (3, 1, 12) and plans[0][1].shape == (3, 0)
    # Decision t reads the last min(t + 1, 3) true states and the actions between them.
    for t in (1, 2, 5):
        obs, actions = plans[t]
        length = min(t + 1, 3)
        assert obs.shape == (3, length, 12)
        assert torch.equal(obs, result.trajectory[t + 1 - length : t + 1].transpose(0, 1))
        taken = result.actions[t + 1 - length : t].T.clamp(min=0)
        assert torch.equal(actions, taken)


def test_a_history_model_of_the_oracles_dynamics_decides_exactly_as_the_latent_one():
    history = LatentThroughDecoder(admit_history(Recurrent(), DEFAULT))
    latent = LatentThroughDecoder(StateLatentModel(DEFAULT))
    a = run_episodes(history, depth=2, seeds=[0, 1], episodes=6, record=True)
    b = run_episodes(latent, depth=2, seeds=[0, 1], episodes=6, record=True)
    assert torch.equal(a.actions, b.actions) and torch.equal(a.success, b.success)
    assert isinstance(history.latent, OpaqueLatent) and history.latent.latent_dim == 14


# 4. through python -m eval --------------------------------------------------------------------


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "history_plugins.py"
    path.write_text(PLUGINS)
    return path


@pytest.mark.slow
def test_a_tensordict_plugin_evaluates_with_its_card_and_compares(plugins):
    assert main(["--model", f"{plugins}:recurrent", "--json", "h.json", "--card", *TINY]) == 0
    assert main(["--model", f"{plugins}:latent", "--json", "l.json", *TINY]) == 0
    h, lat = json.loads(open("h.json").read()), json.loads(open("l.json").read())
    assert h["success"] == lat["success"] and h["mean_steps"] == lat["mean_steps"]
    card = (plugins.parent / "h.card.md").read_text()
    assert "latent model: frozen-decoder protocol" in card
    # Its Z is said to be the flattened state, not a latent of one observation.
    assert "Z is the model's state flattened, init from the last 3 observation(s)" in card
    argv = ["--compare", f"{plugins}:recurrent", f"{plugins}:latent", *TINY]
    assert main([*argv, "--json", "compare.json"]) == 0


@pytest.mark.parametrize("planner", ["cem", "mppi", "mcts"])
def test_every_planner_plans_a_history_model_as_the_same_latent_model(planner):
    from gridplan.planning.planners import make_planner

    task = tasks.TASK_A
    runs = []
    for model in (
        LatentThroughDecoder(admit_history(Recurrent(), DEFAULT)),
        LatentThroughDecoder(StateLatentModel(DEFAULT)),
    ):
        factory = lambda m: make_planner(planner, m, task, depth=2)  # noqa: E731
        runs.append(run_episodes(model, task, 2, [0], 4, record=True, planner_factory=factory))
    assert torch.equal(runs[0].actions, runs[1].actions)


def test_the_python_api_admits_a_history_model_at_its_boundary():
    from gridplan import evaluate

    report = evaluate(Recurrent(), levels=("success",), seeds=(0,), episodes=3, depth=1)
    assert report.latent is not None and report.latent["latent_dim"] == 14
