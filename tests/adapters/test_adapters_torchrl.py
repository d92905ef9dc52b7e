"""TorchRL adapters: spec checks, agreement with gridplan.core.env, partial resets and steps, the
model-based env's rewards, and TorchRL's CEM and MPPI planners closing the loop on our
models in the true environment."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs
from torchrl.modules.planners import CEMPlanner, MPPIPlanner
from torchrl.objectives.value import TDLambdaEstimator

from gridplan.adapters.torchrl import (
    GridEnv,
    WorldModelEnv,
    planning_policy,
    value_operator,
)
from gridplan.core import env as core
from gridplan.core import tasks
from gridplan.core.constants import DOWN, LEFT, RIGHT, UP
from gridplan.core.values import value_table
from gridplan.models.contract import WorldModel
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.models.plugins import CHECK_ROWS
from gridplan.planning.closed_loop import start_states

TASK_A, TASK_B = tasks.get("A"), tasks.get("B")
GAMMA = TASK_A.gamma


def from_states(env: GridEnv, state: torch.Tensor) -> TensorDict:
    """``env`` reset to the given ``(B, 12)`` states."""
    b = state.shape[0]
    given = TensorDict(observation=state, batch_size=[b])
    return env.reset(given, set_state=True)


def scores(*actions: int) -> torch.Tensor:
    """One-hot action scores ``(len(actions), 4)``."""
    return torch.nn.functional.one_hot(torch.tensor(actions), 4).float()


def closed_loop(planner, start: torch.Tensor, task="A", seed: int = 0) -> TensorDict:
    """Run ``planner`` as the policy of a ``GridEnv`` from ``start`` to the task's horizon."""
    env = GridEnv(start.shape[0], task, seed=seed)
    return env.rollout(
        tasks.get(task).horizon,
        planning_policy(planner),
        auto_reset=False,
        tensordict=from_states(env, start),
        break_when_any_done=False,
        break_when_all_done=True,
    )


def optimal_steps(start: torch.Tensor) -> torch.Tensor:
    v = value_table(TASK_A).lookup(start).double()
    return (1 + torch.round(torch.log(v) / math.log(GAMMA))).long()


@pytest.mark.parametrize("task", ["A", "B"])
def test_grid_env_passes_check_env_specs(task):
    check_env_specs(GridEnv(5, task, seed=0), break_when_any_done="both")


@pytest.mark.parametrize(
    "model", [OracleModel(), NoiseModel.controlled(0.35, 0.1)], ids=["oracle", "M(.35,.1)"]
)
@pytest.mark.parametrize("shaping", [False, True])
def test_world_model_env_passes_check_env_specs(model, shaping):
    check_env_specs(WorldModelEnv(model, "B", shaping=shaping, seed=0))


def test_grid_env_is_gridplan_env_on_a_generator_seeded_alike():
    env = GridEnv(6, "B", seed=9)
    td = env.reset()
    gen = torch.Generator().manual_seed(9)
    state = core.reset(6, gen, TASK_B)
    torch.testing.assert_close(td["observation"], state, rtol=0, atol=0)
    for action in ([UP] * 6, [RIGHT, LEFT, DOWN, UP, RIGHT, RIGHT]):
        td["action"] = torch.tensor(action)
        out = env.step(td)["next"]
        state, reward, term, events = core.step(state, torch.tensor(action), gen, TASK_B)
        torch.testing.assert_close(out["observation"], state, rtol=0, atol=0)
        assert torch.equal(out["reward"].squeeze(1), reward)
        assert torch.equal(out["terminated"].squeeze(1), term)
        for name in ("goal", "hazard", "pickup", "door_opened"):
            assert torch.equal(out[name].squeeze(1), events[name])
        td = out


def test_the_goal_on_the_last_step_terminates_and_the_horizon_truncates(make_state):
    task = dataclasses.replace(TASK_A, name="A-horizon-2", horizon=2)
    env = GridEnv(2, task, seed=0)
    start = torch.cat(
        [make_state(agent=(6, 5), carrying=True, door_open=True), make_state(agent=(0, 0))]
    )
    td = from_states(env, start)
    td["action"] = torch.tensor([DOWN, UP])
    out = env.step(td)["next"]
    assert not out["done"].any() and out["step_count"].squeeze(1).tolist() == [1, 1]
    out["action"] = torch.tensor([RIGHT, UP])
    last = env.step(out)["next"]
    assert last["reward"].squeeze(1).tolist() == [1.0, 0.0]
    assert last["goal"].squeeze(1).tolist() == [True, False]
    assert last["terminated"].squeeze(1).tolist() == [True, False]
    assert last["truncated"].squeeze(1).tolist() == [False, True]
    assert last["done"].squeeze(1).tolist() == [True, True]


def test_a_partial_reset_draws_only_the_reset_rows():
    env = GridEnv(4, seed=3)
    first = env.reset()
    mask = torch.tensor([[False], [True], [False], [True]])
    again = env.reset(first.clone().set("_reset", mask), set_state=False)
    gen = torch.Generator().manual_seed(3)
    core.reset(4, gen, TASK_A)
    fresh = core.reset(2, gen, TASK_A)
    expected = first["observation"].clone()
    expected[[1, 3]] = fresh
    torch.testing.assert_close(again["observation"], expected, rtol=0, atol=0)


def test_rollout_freezes_finished_rows_with_partial_steps(make_state):
    start = torch.cat(
        [make_state(agent=(6, 4), carrying=True, door_open=True), make_state(agent=(4, 4),
                                                                             carrying=True,
                                                                             door_open=True)]
    )
    env = GridEnv(2, seed=0)
    ro = env.rollout(
        5,
        actions=[torch.tensor([RIGHT, RIGHT])] * 5,
        auto_reset=False,
        tensordict=from_states(env, start),
        break_when_any_done=False,
        break_when_all_done=True,
    )
    # Row 0 ends at step 1, row 1 (door, (6, 4), goal) at step 3.
    assert ro.shape == (2, 3)
    assert ro["next", "step_count"][:, :, 0].tolist() == [[1, 1, 1], [1, 2, 3]]
    assert ro["next", "reward"][:, :, 0].tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]]


def test_model_env_rewards_and_terminates_from_predicted_states(make_state):
    menv = WorldModelEnv(OracleModel(), seed=0)
    state = make_state(agent=(6, 4), carrying=True, door_open=True, rows=3)
    td = TensorDict(observation=state, action=scores(RIGHT, LEFT, UP), batch_size=[3])
    out = menv.step(td)["next"]
    assert out["reward"].squeeze(1).tolist() == [1.0, 0.0, 0.0]
    assert out["terminated"].squeeze(1).tolist() == [True, False, False]
    assert out["observation"][:, 0].tolist() == pytest.approx([1.0, 5 / 7, 6 / 7])


def test_shaped_rewards_are_the_optimal_advantages(make_state):
    menv = WorldModelEnv(OracleModel(), shaping=True, seed=0)
    # V*(6, 4) = 1; LEFT -> the door cell, V* = gamma; UP -> (6, 5), V* = gamma.
    state = make_state(agent=(6, 4), carrying=True, door_open=True, rows=3)
    td = TensorDict(observation=state, action=scores(RIGHT, LEFT, UP), batch_size=[3])
    reward = menv.step(td)["next", "reward"].squeeze(1)
    assert reward.tolist() == pytest.approx([0.0, GAMMA**2 - 1, GAMMA**2 - 1])


def test_model_env_steps_any_batch_shape_and_noisy_models_stay_in_the_box():
    menv = WorldModelEnv(NoiseModel.controlled(0.35, 0.1), seed=0)
    td = menv.reset(TensorDict(batch_size=[3, 5]))
    ro = menv.rollout(4, auto_reset=False, tensordict=td, break_when_any_done=False)
    assert ro.shape == (3, 5, 4)
    obs = ro["next", "observation"]
    assert obs.min() >= 0 and obs.max() <= 1 and menv.transitions == 60


class CountingOracle(WorldModel):
    """The oracle, counting ``start_rollout`` calls and their row counts."""

    def __init__(self):
        self.oracle = OracleModel()
        self.rollouts = []

    def predict(self, state, action, generator):
        return self.oracle.predict(state, action, generator)

    def start_rollout(self, batch, generator):
        self.rollouts.append(batch)


def test_every_planner_iteration_starts_one_imagined_rollout(make_state):
    model = CountingOracle()
    menv = WorldModelEnv(model, seed=0)
    planner = CEMPlanner(menv, planning_horizon=2, optim_steps=3, num_candidates=10, top_k=2)
    env = GridEnv(4, seed=0)
    checks = len(model.rollouts)
    planner(env.reset())
    # The plug-in contract check (python -m eval's) runs its rollouts of CHECK_ROWS first
    # (the method calls and the randomness check), then each planner iteration one of 40.
    assert checks >= 1 and model.rollouts[:checks] == [CHECK_ROWS] * checks
    assert model.rollouts[checks:] == [40, 40, 40]
    assert menv.transitions == 3 * 2 * 40


def test_cem_on_the_oracle_reaches_a_goal_within_its_horizon(make_state):
    # Three steps from the goal: door, (6, 4), goal; sparse reward, horizon 4. With 256
    # candidates some reach the goal at every decision (about 16 expected at the first);
    # the undiscounted sum does not prefer the shortest of them.
    torch.manual_seed(0)
    menv = WorldModelEnv(OracleModel(), seed=0)
    planner = CEMPlanner(menv, planning_horizon=4, optim_steps=3, num_candidates=256, top_k=8)
    start = make_state(agent=(4, 4), carrying=True, door_open=True, rows=4)
    ro = closed_loop(planner, start)
    steps = ro["next", "step_count"][:, -1, 0]
    assert ro["next", "goal"][:, -1, 0].all() and not ro["next", "hazard"].any()
    assert (steps >= 3).all() and (steps <= 6).all()


def test_cem_without_a_horizon_to_the_goal_sees_no_reward():
    # Sparse reward, horizon 2, starts far from the goal: no candidate ever scores.
    torch.manual_seed(0)
    menv = WorldModelEnv(OracleModel(), seed=0)
    planner = CEMPlanner(menv, planning_horizon=2, optim_steps=2, num_candidates=16, top_k=4)
    ro = closed_loop(planner, start_states([0], 4))
    assert not ro["next", "goal"].any()


def test_shaped_cem_on_the_oracle_succeeds_from_reset_states():
    torch.manual_seed(0)
    menv = WorldModelEnv(OracleModel(), shaping=True, seed=0)
    planner = CEMPlanner(menv, planning_horizon=2, optim_steps=3, num_candidates=32, top_k=4)
    start = start_states([0], 8)
    ro = closed_loop(planner, start)
    steps = ro["next", "step_count"][:, -1, 0]
    assert ro["next", "goal"].any(dim=1).all()
    # CEM's mean scores need not pick an optimal action every time: near-shortest paths.
    excess = steps - optimal_steps(start)
    assert (excess >= 0).all() and excess.float().mean() <= 1.0


def test_shaped_cem_on_a_noisy_model_mostly_succeeds():
    torch.manual_seed(0)
    menv = WorldModelEnv(NoiseModel.controlled(0.35, 0.1), shaping=True, seed=0)
    planner = CEMPlanner(menv, planning_horizon=2, optim_steps=3, num_candidates=32, top_k=4)
    ro = closed_loop(planner, start_states([1], 12), seed=1)
    success = ro["next", "goal"].any(dim=1).float().mean()
    assert success >= 0.75
    assert not ro["next", "hazard"].any()


def test_mppi_with_the_exact_value_reaches_the_goal_from_reset_states():
    torch.manual_seed(0)
    menv = WorldModelEnv(OracleModel(), seed=0)
    advantage = TDLambdaEstimator(
        gamma=GAMMA, lmbda=0.95, value_network=value_operator("A"), deactivate_vmap=True
    )
    planner = MPPIPlanner(menv, advantage, temperature=10.0, planning_horizon=3,
                          optim_steps=3, num_candidates=32, top_k=8)
    ro = closed_loop(planner, start_states([2], 4))
    assert ro["next", "goal"].any(dim=1).all()


def test_value_operator_reads_v_star(make_state):
    state = make_state(agent=(6, 4), carrying=True, door_open=True)
    td = value_operator("A")(TensorDict(observation=state, batch_size=[1]))
    assert td["state_value"].tolist() == [[1.0]]


def test_bad_input_is_refused(make_state):
    with pytest.raises(ValueError, match="batch_size"):
        GridEnv(0)
    with pytest.raises(ValueError, match="unknown task"):
        WorldModelEnv(OracleModel(), "Z")
    env = GridEnv(1, seed=0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        from_states(env, torch.full((1, 12), 2.0))
    td = env.reset()
    td["action"] = torch.tensor([7])
    with pytest.raises(ValueError, match="action values"):
        env.step(td)


@pytest.mark.slow
def test_a_missing_torchrl_names_the_extra():
    code = (
        "import sys; sys.modules['torchrl'] = None\n"
        "try:\n    import gridplan.adapters.torchrl\n"
        "except ImportError as err:\n    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "gridplan[torchrl]"' in out.stdout


def test_the_benchmark_prints_one_row_per_model_and_planner(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # leave the session's alone
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_torchrl.py"
    spec = importlib.util.spec_from_file_location("bench_torchrl", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    bench.main(["--seeds", "1", "--episodes", "2", "--depth", "1", "--candidates", "8",
                "--top-k", "2", "--optim-steps", "1", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["model"], r["planner"]) for r in rows] == [
        (model, planner)
        for model in ("oracle", "M(.35,.1)")
        for planner in ("full-width D=1", "CEM H=1 V*-shaped", "CEM H=1 sparse")
    ]
    assert all(r["n"] == 2 and 0 <= r["success"] <= 1 and r["transitions_per_s"] > 0
               for r in rows)
    # The depth-1 oracle planner reaches the goal from every start: V* at the leaves.
    assert rows[0]["success"] == 1.0
    assert "transitions/s" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--json", str(out)])
