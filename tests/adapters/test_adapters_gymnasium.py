"""Gymnasium adapters: API checkers, agreement with gridplan.core.env, termination vs truncation,
events, seeding, and the vector env's autoreset modes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from gridplan.adapters.gymnasium import ENV_IDS, GridPlanEnv, GridPlanVectorEnv
from gridplan.core import env as core
from gridplan.core import render, tasks
from gridplan.core import world as worlds
from gridplan.core.constants import DOWN, LEFT, RIGHT, UP

#: Dims that the actions decide (agent, key, flags); the distractors are random.
DECIDED = slice(0, 8)

TASK_A, TASK_B = tasks.get("A"), tasks.get("B")


def short_task(horizon: int) -> tasks.Task:
    """Task A's geometry with a shorter horizon (an unregistered Task passes straight in)."""
    return dataclasses.replace(TASK_A, name=f"A-horizon-{horizon}", horizon=horizon)


@pytest.mark.parametrize("env_id", sorted(ENV_IDS.values()))
def test_registered_envs_pass_gymnasiums_env_checker_without_warnings(env_id):
    env = gym.make(env_id)
    assert isinstance(env.unwrapped, GridPlanEnv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (12,), np.float32)
    assert env.action_space == gym.spaces.Discrete(4)


def test_make_with_the_module_prefix_imports_and_registers():
    env = gym.make("gridplan.adapters.gymnasium:gridplan/KeyDoor-B-v0")
    assert env.unwrapped.task is tasks.get("B")


def test_a_seeded_episode_is_gridplan_env_on_a_generator_seeded_alike():
    env = GridPlanEnv("B")
    obs, info = env.reset(seed=11)
    gen = torch.Generator().manual_seed(11)
    state = core.reset(1, gen, TASK_B)
    assert info == {}
    np.testing.assert_array_equal(obs, state[0].numpy())
    for action in (UP, RIGHT, RIGHT, DOWN, LEFT):
        obs, reward, terminated, truncated, info = env.step(action)
        state, r, term, events = core.step(state, torch.tensor([action]), gen, TASK_B)
        np.testing.assert_array_equal(obs, state[0].numpy())
        assert reward == float(r[0]) and terminated == bool(term[0]) and not truncated
        assert info == {name: bool(events[name][0]) for name in info}
    # An unseeded reset continues the stream; a reseed replays the first episode.
    assert not np.array_equal(env.reset()[0], env.reset(seed=11)[0])
    np.testing.assert_array_equal(
        env.reset(seed=11)[0], core.reset(1, torch.Generator().manual_seed(11), TASK_B)[0].numpy()
    )


def test_goal_terminates_with_reward_one_and_the_goal_event(make_state):
    env = GridPlanEnv("A")
    env.reset(options={"state": make_state(agent=(6, 4), carrying=True, door_open=True)[0]})
    obs, reward, terminated, truncated, info = env.step(RIGHT)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info == {"goal": True, "hazard": False, "pickup": False, "door_opened": False}
    assert obs[0] == 1.0 and obs[1] == pytest.approx(4 / 7)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(LEFT)


def test_hazard_terminates_with_reward_minus_one_in_task_b(make_state):
    env = GridPlanEnv("B")
    # c1 = 0: goal (7, 2), hazard (7, 5).
    env.reset(options={"state": make_state(agent=(7, 6), carrying=True, door_open=True)[0]})
    _, reward, terminated, truncated, info = env.step(DOWN)
    assert (reward, terminated, truncated) == (-1.0, True, False)
    assert info["hazard"] and not info["goal"]


def test_pickup_and_door_opening_events(make_state):
    env = GridPlanEnv("A")
    env.reset(options={"state": make_state(agent=(1, 1), key=(2, 1))[0]})
    obs, _, _, _, info = env.step(RIGHT)
    assert info["pickup"] and not info["door_opened"]
    assert obs[4] == 1.0
    env.reset(options={"state": make_state(agent=(4, 4), carrying=True)[0]})
    obs, reward, _, _, info = env.step(RIGHT)
    assert info["door_opened"] and not info["pickup"] and reward == 0.0
    assert obs[0] == pytest.approx(4 / 7) and obs[5] == 1.0  # opened, agent stayed


def test_the_horizon_truncates_and_does_not_terminate(make_state):
    env = GridPlanEnv(short_task(3))
    env.reset(seed=0, options={"state": make_state(agent=(0, 0), key=(4, 7))[0]})
    for _ in range(2):
        _, _, terminated, truncated, _ = env.step(UP)
        assert not terminated and not truncated
    _, reward, terminated, truncated, _ = env.step(UP)
    assert (reward, terminated, truncated) == (0.0, False, True)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(UP)


def test_the_goal_on_the_last_step_terminates_rather_than_truncates(make_state):
    env = GridPlanEnv(short_task(1))
    env.reset(options={"state": make_state(agent=(6, 4), carrying=True, door_open=True)[0]})
    _, _, terminated, truncated, _ = env.step(RIGHT)
    assert terminated and not truncated


def test_bad_actions_and_options_are_refused():
    env = GridPlanEnv()
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)
    env.reset(seed=0)
    for action in (4, -1, 1.5, "up"):
        with pytest.raises(ValueError, match="action"):
            env.step(action)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"start": 0})
    with pytest.raises(ValueError, match=r"shape \(1, 12\)"):
        env.reset(options={"state": np.zeros(11)})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        env.reset(options={"state": np.full(12, 2.0)})
    with pytest.raises(ValueError, match="unknown task"):
        GridPlanEnv("Z")


def test_make_vec_builds_the_batched_env_with_batched_spaces():
    envs = gym.make_vec("gridplan/KeyDoor-A-v0", num_envs=5)
    assert isinstance(envs, GridPlanVectorEnv)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert envs.action_space == gym.spaces.MultiDiscrete([4] * 5)
    assert envs.observation_space == gym.spaces.Box(0.0, 1.0, (5, 12), np.float32)
    assert envs.single_action_space == gym.spaces.Discrete(4)


def test_vector_steps_are_one_batched_gridplan_env_step():
    envs = GridPlanVectorEnv(6, "B")
    obs, _ = envs.reset(seed=4)
    # Sub-environment i starts from seed 4 + i; sub-environment 0's generator serves the steps.
    gens = [torch.Generator().manual_seed(4 + i) for i in range(6)]
    state = torch.cat([core.reset(1, g, TASK_B) for g in gens])
    gen = gens[0]
    np.testing.assert_array_equal(obs, state.numpy())
    rng = np.random.default_rng(0)
    for _ in range(5):
        actions = rng.integers(0, 4, 6)
        obs, reward, terminated, truncated, info = envs.step(actions)
        state, r, term, events = core.step(state, torch.as_tensor(actions), gen, TASK_B)
        np.testing.assert_array_equal(obs, state.numpy())
        np.testing.assert_array_equal(reward, r.numpy())
        assert reward.dtype == np.float64
        np.testing.assert_array_equal(terminated, term.numpy())
        assert not truncated.any()
        for name in ("goal", "hazard", "pickup", "door_opened"):
            np.testing.assert_array_equal(info[name], events[name].numpy())
            assert info[f"_{name}"].all()


def _near_goal_batch(make_state):
    """Row 0 is one step from the goal, row 1 far from it."""
    return np.concatenate(
        [
            make_state(agent=(6, 4), carrying=True, door_open=True).numpy(),
            make_state(agent=(0, 0), key=(4, 7)).numpy(),
        ]
    )


def test_next_step_autoreset_restarts_the_row_on_the_following_step(make_state):
    envs = GridPlanVectorEnv(2, short_task(4))
    envs.reset(seed=1, options={"state": _near_goal_batch(make_state)})
    gen = torch.Generator().manual_seed(1)
    state = torch.as_tensor(_near_goal_batch(make_state))
    obs, reward, terminated, truncated, info = envs.step(np.array([RIGHT, UP]))
    state, *_ = core.step(state, torch.tensor([RIGHT, UP]), gen, TASK_A)
    assert terminated.tolist() == [True, False] and reward.tolist() == [1.0, 0.0]
    np.testing.assert_array_equal(obs, state.numpy())
    # Next step: row 1 steps, then row 0 gets a fresh start state (its action is ignored).
    obs, reward, terminated, truncated, info = envs.step(np.array([LEFT, UP]))
    row1, *_ = core.step(state[1:], torch.tensor([UP]), gen, TASK_A)
    fresh = core.reset(1, gen, TASK_A)
    np.testing.assert_array_equal(obs, torch.cat([fresh, row1]).numpy())
    assert reward.tolist() == [0.0, 0.0] and not terminated.any() and not truncated.any()
    assert info["_goal"].tolist() == [False, True]
    # Row 1 truncates on its 4th step, row 0 carries on in its new episode.
    envs.step(np.array([UP, UP]))
    _, _, terminated, truncated, _ = envs.step(np.array([UP, UP]))
    assert truncated.tolist() == [False, True] and not terminated.any()


def test_next_step_autoreset_matches_gymnasiums_sync_vector_env(make_state):
    """Same start states and actions: rewards, terminations, truncations, info masks and the
    decided dims agree with SyncVectorEnv over single envs (distractors are random)."""
    task = short_task(4)
    start = _near_goal_batch(make_state)
    ours = GridPlanVectorEnv(2, task)
    sync = SyncVectorEnv([lambda: GridPlanEnv(task)] * 2)
    ours.reset(seed=0, options={"state": start})
    sync.reset(seed=0, options={"state": start[0]})
    sync.reset(options={"state": start[1], "reset_mask": np.array([False, True])})
    restarted = np.zeros(2, dtype=bool)
    for actions in ([RIGHT, UP], [UP, UP], [UP, RIGHT], [DOWN, RIGHT], [UP, UP], [LEFT, UP]):
        a, b = ours.step(np.array(actions)), sync.step(np.array(actions))
        for x, y in zip(a[1:4], b[1:4], strict=True):
            np.testing.assert_array_equal(x, y)
        assert a[4]["_goal"].tolist() == b[4].get("_goal", np.zeros(2, bool)).tolist()
        restarted |= ~a[4]["_goal"]
        np.testing.assert_array_equal(a[0][~restarted, DECIDED], b[0][~restarted, DECIDED])
    assert restarted.all()


def test_same_step_autoreset_reports_the_final_observation(make_state):
    envs = GridPlanVectorEnv(2, "A", autoreset_mode=AutoresetMode.SAME_STEP)
    envs.reset(seed=2, options={"state": _near_goal_batch(make_state)})
    obs, reward, terminated, _, info = envs.step(np.array([RIGHT, UP]))
    assert terminated.tolist() == [True, False] and reward.tolist() == [1.0, 0.0]
    assert info["_final_obs"].tolist() == [True, False] and info["final_obs"][1] is None
    assert info["final_obs"][0][0] == 1.0  # on the goal column
    assert info["final_info"]["goal"].tolist() == [True, False]
    assert info["_goal"].tolist() == [False, True]
    assert obs[0][0] <= 4 / 7  # the new episode starts in the western chamber
    _, reward, terminated, _, info = envs.step(np.array([UP, UP]))
    assert info["_goal"].all() and "final_obs" not in info


def test_disabled_autoreset_needs_a_masked_reset(make_state):
    envs = GridPlanVectorEnv(2, "A", autoreset_mode="Disabled")
    obs0, _ = envs.reset(seed=3, options={"state": _near_goal_batch(make_state)})
    obs1, *_ = envs.step(np.array([RIGHT, UP]))
    with pytest.raises(ValueError, match=r"sub-environments \[0\] have ended"):
        envs.step(np.array([UP, UP]))
    obs2, _ = envs.reset(options={"reset_mask": np.array([True, False])})
    np.testing.assert_array_equal(obs2[1], obs1[1])
    assert obs2[0][0] <= 4 / 7
    envs.step(np.array([UP, UP]))


def test_record_episode_statistics_counts_our_episodes():
    envs = RecordEpisodeStatistics(GridPlanVectorEnv(3, short_task(5)))
    envs.reset(seed=0)
    lengths = []
    for _ in range(12):
        *_, info = envs.step(np.array([UP, DOWN, LEFT]))
        if "episode" in info:
            lengths += info["episode"]["l"][info["_episode"]].tolist()
    assert lengths == [5, 5, 5, 5, 5, 5]


def test_vector_env_refuses_bad_seeds_and_bad_input():
    envs = GridPlanVectorEnv(3)
    for seed in ([0, 1], [0, 1, None], [0, 1, 2.0], "0", [0, True, 2]):
        with pytest.raises(ValueError, match="seed must be"):
            envs.reset(seed=seed)
    with pytest.raises(ValueError, match=r"seeds must lie in 0\.\.2\*\*63-1"):
        envs.reset(seed=[0, -1, 2])
    with pytest.raises(ValueError, match="full reset"):
        envs.reset(options={"reset_mask": np.array([True, False, False])})
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="actions"):
        envs.step(np.array([0, 1]))
    with pytest.raises(ValueError, match="actions"):
        envs.step(np.array([0, 1, 4]))
    with pytest.raises(ValueError, match="reset_mask"):
        envs.reset(options={"reset_mask": np.array([0, 1, 0])})
    with pytest.raises(ValueError, match="num_envs"):
        GridPlanVectorEnv(0)


def test_gridplan_imports_without_the_adapters_libraries():
    code = (
        "import sys, gridplan, gridplan.core.env, gridplan.planning.planner, "
        "gridplan.planning.closed_loop, "
        "gridplan.models.noise, gridplan.adapters; "
        "print(sorted({'gymnasium', 'torchrl', 'tensordict'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_gymnasium_names_the_extra():
    code = (
        "import sys; sys.modules['gymnasium'] = None\n"
        "try:\n    import gridplan.adapters.gymnasium\n"
        "except ImportError as err:\n    print(err)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "gridplan[gymnasium]"' in out.stdout


# info_state: the physical state beside any observation -----------------------------------------


@pytest.mark.parametrize("observation", ["state", "grid", "pixels"])
def test_info_state_passes_the_env_checker_without_warnings(observation):
    env = gym.make(ENV_IDS["A"], observation=observation, info_state=True)
    assert env.unwrapped.info_state
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_info_state_is_the_state_the_observation_draws_on_reset_and_every_step():
    world = worlds.get("g16-k8")
    env = GridPlanEnv("A", world=world, observation="pixels", info_state=True)
    obs, info = env.reset(seed=5)
    gen = torch.Generator().manual_seed(5)
    state = core.reset(1, gen, tasks.get("A", world=world))
    assert info["state_dims"] == world.dim_names and len(info["state_dims"]) == 24
    assert info["state"].dtype == np.float32 and info["state"].shape == (24,)
    np.testing.assert_array_equal(info["state"], state[0].numpy())
    np.testing.assert_array_equal(obs, render.observe(state, world, "pixels")[0].numpy())
    for action in (RIGHT, DOWN, DOWN):
        obs, _, _, _, info = env.step(action)
        state = core.step(state, torch.tensor([action]), gen, tasks.get("A", world=world))[0]
        np.testing.assert_array_equal(info["state"], state[0].numpy())
        np.testing.assert_array_equal(obs, render.observe(state, world, "pixels")[0].numpy())
        assert {"goal", "pickup", "state", "state_dims"} <= set(info)


def test_info_state_is_off_by_default_and_must_be_a_bool():
    assert GridPlanEnv("A").reset(seed=0)[1] == {}
    with pytest.raises(ValueError, match="info_state must be True or False, got 1"):
        GridPlanEnv("A", info_state=1)


def test_vector_info_state_holds_every_row_and_the_final_state_of_ended_rows(make_state):
    envs = GridPlanVectorEnv(
        2, "A", autoreset_mode=AutoresetMode.SAME_STEP, observation="grid", info_state=True
    )
    start = torch.cat([make_state(agent=(6, 4), carrying=True, door_open=True),
                       make_state(agent=(1, 1))])
    _, info = envs.reset(seed=0, options={"state": start.numpy()})
    np.testing.assert_array_equal(info["state"], start.numpy())
    assert info["_state"].tolist() == [True, True]
    _, _, terminated, _, info = envs.step(np.array([RIGHT, RIGHT]))
    assert terminated.tolist() == [True, False]
    np.testing.assert_array_equal(info["state"], envs._state.numpy())
    final = info["final_info"]
    assert final["_state"].tolist() == [True, False]
    assert final["state"][0, :2].tolist() == [1.0, pytest.approx(4 / 7)]
    assert final["state"][1].tolist() == [0.0] * 12
