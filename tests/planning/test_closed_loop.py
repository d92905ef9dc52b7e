"""Closed-loop runs: plan in the model, act in the true environment (paper §3, §5.1)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, TASK_B, Task
from gridplan.core.values import value_table
from gridplan.models.noise import NoiseModel, OracleModel, noise_grid
from gridplan.planning import closed_loop
from gridplan.planning.closed_loop import (
    GOAL,
    START_BLOCK,
    TIMEOUT,
    run_closed_loop,
    run_episodes,
    start_block,
    start_states,
)
from gridplan.planning.planner import Planner


def optimal_steps(task: Task, start: torch.Tensor) -> torch.Tensor:
    """Shortest number of steps to the goal, read back from ``V* = gamma^(n - 1)``."""
    v = value_table(task).lookup(start).double()
    return (1 + torch.round(torch.log(v) / math.log(task.gamma))).long()


@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
def test_the_depth_2_oracle_reaches_the_goal_by_a_shortest_path_in_every_episode(task):
    result = run_episodes(OracleModel(), task, depth=2, seeds=(0, 1), episodes=6)
    start = start_states((0, 1), 6, task)
    assert result.success.all()
    assert result.outcome_counts() == {"goal": 12, "hazard": 0, "timeout": 0}
    assert (result.returns == 1.0).all()
    assert torch.equal(result.steps, optimal_steps(task, start))


def test_the_goal_reached_on_the_last_step_of_the_horizon_counts_as_success(make_state):
    # From (4, 4) carrying with the door open: door, (6, 4), goal = 3 steps.
    start = make_state(agent=(4, 4), carrying=True, door_open=True)
    planner = Planner(OracleModel(), 2)
    just = run_closed_loop(planner, start, torch.Generator().manual_seed(0), horizon=3)
    assert just.success.item() and just.outcome.item() == GOAL
    assert just.steps.item() == 3 and just.returns.item() == 1.0
    short = run_closed_loop(planner, start, torch.Generator().manual_seed(0), horizon=2)
    assert not short.success.item() and short.outcome.item() == TIMEOUT
    assert short.steps.item() == 2 and short.returns.item() == 0.0


def test_the_horizon_defaults_to_the_tasks(make_state):
    start = make_state(agent=(4, 4), carrying=True, door_open=True)
    brief = dataclasses.replace(TASK_A, name="brief", horizon=2)
    result = run_closed_loop(Planner(OracleModel(), 2, brief), start, torch.Generator())
    assert result.outcome.item() == TIMEOUT and result.steps.item() == 2
    full = run_closed_loop(Planner(OracleModel(), 2), start, torch.Generator())
    assert full.outcome.item() == GOAL and full.steps.item() == 3


def test_recorded_trajectories_have_one_row_per_step_and_freeze_after_the_end(make_state):
    # One episode needs 1 step, the other 3; the run stops once both ended.
    start = torch.cat(
        [
            make_state(agent=(6, 4), carrying=True, door_open=True),
            make_state(agent=(4, 4), carrying=True, door_open=True),
        ]
    )
    result = run_closed_loop(
        Planner(OracleModel(), 1), start, torch.Generator().manual_seed(0), record=True
    )
    assert result.trajectory.shape == (4, 2, 12)
    assert result.actions.shape == (3, 2)
    assert torch.equal(result.trajectory[0], start)
    assert result.actions[:, 0].tolist() == [3, -1, -1]
    assert result.actions[:, 1].tolist() == [3, 3, 3]
    assert torch.equal(result.trajectory[1, 0], result.trajectory[3, 0])
    assert result.steps.tolist() == [1, 3]


def test_without_recording_no_trajectory_is_kept():
    result = run_episodes(OracleModel(), depth=1, seeds=(0,), episodes=2)
    assert result.trajectory is None and result.actions is None


def test_zero_noise_models_give_exactly_the_oracles_closed_loop_results():
    kwargs = {"depth": 2, "seeds": (3, 4), "episodes": 4, "record": True}
    oracle = run_episodes(OracleModel(), **kwargs)
    zero = run_episodes(NoiseModel.controlled(0.0, 0.0), **kwargs)
    for field in ("success", "returns", "steps", "outcome", "trajectory", "actions"):
        assert torch.equal(getattr(zero, field), getattr(oracle, field)), field


def test_run_episodes_is_reproducible():
    a = run_episodes(NoiseModel.controlled(0.5, 0.1), depth=2, seeds=(0,), episodes=6)
    b = run_episodes(NoiseModel.controlled(0.5, 0.1), depth=2, seeds=(0,), episodes=6)
    assert torch.equal(a.steps, b.steps) and torch.equal(a.outcome, b.outcome)


def test_a_multi_setting_model_plays_the_same_start_states_in_every_setting_block():
    # Irrelevant noise never changes a Task A decision's value: both blocks walk shortest paths.
    result = run_episodes(noise_grid([0.0], [0.0, 1.2]), depth=2, seeds=(0,), episodes=5)
    assert result.success.shape == (10,) and result.success.all()
    expected = optimal_steps(TASK_A, start_states((0,), 5))
    assert torch.equal(result.steps.view(2, 5), expected.repeat(2, 1))


def test_start_states_of_a_seed_do_not_depend_on_the_other_seeds():
    assert torch.equal(start_states((3,), 5), start_states((1, 3), 5)[5:])
    assert not torch.equal(start_states((1,), 5), start_states((3,), 5))


def test_closed_loop_rejects_bad_input(make_state):
    planner = Planner(OracleModel(), 1)
    with pytest.raises(ValueError, match="horizon must be >= 1, got 0"):
        run_closed_loop(planner, make_state(), torch.Generator(), horizon=0)
    with pytest.raises(ValueError, match=r"start must have shape \(B, 12\)"):
        run_closed_loop(planner, torch.zeros(2, 3), torch.Generator())
    with pytest.raises(ValueError, match="seeds must not be empty"):
        run_episodes(OracleModel(), seeds=(), episodes=2)
    with pytest.raises(ValueError, match="episodes must be >= 1, got 0"):
        run_episodes(OracleModel(), seeds=(0,), episodes=0)
    with pytest.raises(TypeError, match="got str 'Z'"):
        run_episodes(OracleModel(), task="Z", seeds=(0,), episodes=1)
    with pytest.raises(ValueError, match="depth must be an integer >= 1, got 0"):
        run_episodes(OracleModel(), depth=0, seeds=(0,), episodes=1)


@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
def test_episode_i_of_seed_s_is_the_same_for_10_30_and_40_episodes(task):
    runs = {n: start_states([0, 3], n, task) for n in (10, 30, 40)}
    for n, states in runs.items():
        assert states.shape == (2 * n, 12)
        check_state(states, "start")
    for n in (10, 30):
        for k in range(2):  # seed 0, then seed 3 (seed-major)
            longer = runs[40][k * 40 : k * 40 + n]
            assert torch.equal(runs[n][k * n : (k + 1) * n], longer)


def test_a_seed_starts_alike_whatever_the_other_seeds_and_across_block_boundaries():
    big = start_states(range(5), 2 * START_BLOCK + 7)  # 3 blocks per seed, 695 episodes
    for seed in range(5):
        alone = start_states([seed], START_BLOCK + 1)
        row = seed * (2 * START_BLOCK + 7)
        assert torch.equal(big[row : row + START_BLOCK + 1], alone)
        assert torch.equal(alone[:START_BLOCK], start_block(seed, 0))
        assert torch.equal(alone[START_BLOCK], start_block(seed, 1)[0])
    # Blocks and seeds are different draws, not copies of one another.
    assert not torch.equal(start_block(0, 0), start_block(0, 1))
    assert not torch.equal(start_block(0, 1), start_block(1, 0))
    assert big.unique(dim=0).shape[0] > 0.95 * big.shape[0]


def test_the_first_resets_of_a_big_batch_are_those_of_a_small_one():
    assert torch.equal(start_states([7], 1000)[:10], start_states([7], 10))
    assert torch.equal(start_states([7], 1)[0], start_states([7], 1000)[0])


def test_a_closed_loop_of_any_size_plays_the_shared_start_states():
    small = closed_loop.run_episodes(OracleModel(), depth=1, seeds=[0], episodes=3, record=True)
    large = closed_loop.run_episodes(OracleModel(), depth=1, seeds=[0, 1], episodes=5, record=True)
    assert torch.equal(small.trajectory[0], large.trajectory[0, :3])
    assert torch.equal(large.trajectory[0, 5:], start_states([1], 5))


def test_a_negative_seed_is_refused():
    with pytest.raises(ValueError, match="seed and block must be >= 0"):
        start_states([-1], 3)
