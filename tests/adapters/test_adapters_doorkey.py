"""The Gymnasium and TorchRL adapters on MiniGrid DoorKey: the libraries' own checkers, the seven
actions, agreement with ``gridplan.core.dynamics``, an optimal episode, and the refused
drawings (the paper world's)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from torchrl.envs.utils import check_env_specs

from gridplan.adapters.gymnasium import ENV_IDS, GridPlanEnv, GridPlanVectorEnv, ImaginedEnv
from gridplan.adapters.torchrl import GridEnv, WorldModelEnv, value_operator
from gridplan.core import doorkey_world, dynamics, tasks
from gridplan.core.doorkey_constants import DONE, FORWARD, LEFT, PICKUP, RIGHT, TOGGLE
from gridplan.models.noise import OracleModel

WORLD = "minigrid-doorkey-6x6"
TASK = tasks.get("A", world=WORLD)
#: 6x6 with two floor tiles: a wider state (9 + 2 * 2 dims) and random dims.
TILED = "minigrid-doorkey-6x6-t2"


def _quiet(fn) -> list[str]:
    """The warnings ``fn()`` raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


def _greedy(obs: np.ndarray) -> int:
    """The action of highest Q* (first of ties) in the observed state."""
    q = dynamics.value_table(TASK).q_values(torch.as_tensor(obs).unsqueeze(0))
    return int(q.argmax(dim=1))


def _oracle(world: str = WORLD) -> OracleModel:
    return OracleModel(world=doorkey_world.get(world))


# --- Gymnasium: spaces and checkers


@pytest.mark.parametrize(("world", "width"), [(WORLD, 9), (TILED, 13)])
def test_doorkey_env_passes_gymnasiums_env_checker_without_warnings(world, width):
    env = GridPlanEnv(task="A", world=world)
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (width,), np.float32)
    assert env.action_space == gym.spaces.Discrete(7)
    assert env.max_episode_steps == 360  # MiniGrid's 10 N^2
    # No render mode exists on DoorKey, so there is nothing to remake the env in.
    assert _quiet(lambda: check_env(env, skip_render_check=True)) == []


def test_doorkey_env_through_gym_make_passes_the_full_checker():
    env = gym.make(ENV_IDS["A"], world=WORLD, max_episode_steps=360)
    assert env.unwrapped.task == TASK and env.spec.max_episode_steps == 360
    assert env.unwrapped.metadata["render_modes"] == []
    assert _quiet(lambda: check_env(env.unwrapped)) == []


def test_imagined_doorkey_env_over_the_oracle_passes_the_checker_without_warnings():
    env = ImaginedEnv(_oracle(TILED))  # the world the model declares
    assert env.task == tasks.get("A", world=TILED)
    assert env.action_space == gym.spaces.Discrete(7)
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (13,), np.float32)
    assert _quiet(lambda: check_env(env, skip_render_check=True)) == []


# --- Gymnasium: the dynamics are gridplan.core.dynamics'


def test_a_seeded_doorkey_episode_is_the_task_protocols_on_a_generator_seeded_alike():
    env = GridPlanEnv("A", world=TILED, info_state=True)
    task = tasks.get("A", world=TILED)
    obs, info = env.reset(seed=4)
    gen = torch.Generator().manual_seed(4)
    state = dynamics.reset(task, 1, gen)
    np.testing.assert_array_equal(obs, state[0].numpy())
    assert info["state_dims"] == task.world.dim_names
    for action in (LEFT, FORWARD, PICKUP, RIGHT, TOGGLE, DONE):
        obs, reward, terminated, truncated, info = env.step(action)
        state, r, term, events = dynamics.step(task, state, torch.tensor([action]), gen)
        np.testing.assert_array_equal(obs, state[0].numpy())
        assert (reward, terminated, truncated) == (float(r[0]), bool(term[0]), False)
        assert info["pickup"] == bool(events["pickup"][0])
        assert info["door_opened"] == bool(events["door_opened"][0])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_on_q_star_reaches_the_goal_through_the_gymnasium_env(seed):
    env = GridPlanEnv("A", world=WORLD)
    obs, _ = env.reset(seed=seed)
    seen = {"pickup": False, "door_opened": False}
    for _ in range(env.max_episode_steps):
        obs, reward, terminated, truncated, info = env.step(_greedy(obs))
        seen = {name: seen[name] or info[name] for name in seen}
        if terminated or truncated:
            break
    assert (reward, terminated, truncated, info["goal"]) == (1.0, True, False, True)
    # Every DoorKey start has the door locked: the optimal path picks up the key, unlocks.
    assert seen == {"pickup": True, "door_opened": True}
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)


def test_imagined_oracle_doorkey_episode_follows_the_true_env():
    true, dream = GridPlanEnv("A", world=WORLD), ImaginedEnv(_oracle(), world=WORLD)
    a, _ = true.reset(seed=1)
    b, _ = dream.reset(seed=1)
    np.testing.assert_array_equal(a, b)
    for _ in range(40):
        action = _greedy(a)
        a, ra, ta, _, ia = true.step(action)
        b, rb, tb, _, ib = dream.step(action)
        np.testing.assert_array_equal(a, b)
        assert (ra, ta, ia) == (rb, tb, ib)
        if ta:
            break
    assert ta and ra == 1.0


def test_doorkey_actions_outside_0_to_6_are_refused():
    env = GridPlanEnv("A", world=WORLD)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"0\.\.6, got 7"):
        env.step(7)


# --- Gymnasium: the vector env


def test_vector_doorkey_env_steps_seven_valued_actions_as_the_task_protocol():
    envs = GridPlanVectorEnv(3, "A", world=WORLD)
    assert envs.single_action_space == gym.spaces.Discrete(7)
    assert envs.action_space == gym.spaces.MultiDiscrete([7, 7, 7])
    obs, _ = envs.reset(seed=[5, 6, 7])
    for i, seed in enumerate((5, 6, 7)):
        np.testing.assert_array_equal(obs[i], GridPlanEnv("A", world=WORLD).reset(seed=seed)[0])
    for actions in ([6, 3, 0], [2, 2, 1], [5, 4, 2]):
        # Without tiles a DoorKey step draws nothing: any generator gives the same next state.
        want, r, term, events = dynamics.step(
            TASK, torch.as_tensor(obs), torch.tensor(actions), torch.Generator()
        )
        obs, reward, terminated, truncated, info = envs.step(np.array(actions))
        np.testing.assert_array_equal(obs, want.numpy())
        np.testing.assert_array_equal(reward, r.double().numpy())
        np.testing.assert_array_equal(terminated, term.numpy())
        np.testing.assert_array_equal(info["pickup"], events["pickup"].numpy())
        assert not truncated.any()
    with pytest.raises(ValueError, match=r"actions must lie in 0\.\.6, got \[0, 7, 0\]"):
        envs.step(np.array([0, 7, 0]))


# --- MiniGrid's views are observations; the paper world's drawings are refused


@pytest.mark.parametrize(("kind", "shape"), [("egocentric", (3, 7, 7)), ("full", (3, 6, 6))])
def test_minigrids_codes_are_observations_that_pass_the_checker(kind, shape):
    env = GridPlanEnv(task="A", world=TILED, observation=kind)
    assert env.observation_space == gym.spaces.Box(0.0, 10.0, shape, np.float32)
    assert _quiet(lambda: check_env(env, skip_render_check=True)) == []


@pytest.mark.parametrize("make", [GridPlanEnv, lambda **kw: GridPlanVectorEnv(2, **kw)])
@pytest.mark.parametrize("kind", ["grid", "pixels"])
def test_drawn_observations_are_refused_on_doorkey(make, kind):
    with pytest.raises(ValueError, match=f"no '{kind}' observation; its kinds: state, egoc"):
        make(world=WORLD, observation=kind)


@pytest.mark.parametrize("make", [GridPlanEnv, lambda **kw: GridPlanVectorEnv(2, **kw)])
@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes_are_refused_on_doorkey(make, mode):
    with pytest.raises(ValueError, match=f"render_mode='{mode}'.*render_mode=None"):
        make(world=WORLD, render_mode=mode)


# --- TorchRL


def test_torchrl_grid_env_passes_check_env_specs_on_doorkey():
    env = GridEnv(batch_size=3, world=WORLD, seed=0)
    assert env.action_spec.space.n == 7
    assert env.observation_spec["observation"].shape == (3, 9)
    check_env_specs(env)


def test_torchrl_grid_env_steps_as_the_task_protocol():
    env = GridEnv(batch_size=2, world=WORLD, seed=0)
    td = env.reset()
    td["action"] = torch.tensor([PICKUP, RIGHT])
    out = env.step(td)["next"]
    want, reward, term, _ = dynamics.step(TASK, td["observation"], td["action"], torch.Generator())
    torch.testing.assert_close(out["observation"], want, rtol=0, atol=0)
    torch.testing.assert_close(out["reward"], reward.unsqueeze(1), rtol=0, atol=0)


def test_torchrl_world_model_env_passes_check_env_specs_on_doorkey():
    env = WorldModelEnv(_oracle(), shaping=True, seed=0)
    assert env.task == TASK and env.action_spec.shape == (7,)
    check_env_specs(env)


def test_world_model_env_executes_the_argmax_of_seven_scores():
    env = WorldModelEnv(_oracle(), world=WORLD, seed=0)
    start = dynamics.reset(TASK, 7, torch.Generator().manual_seed(2))
    scores = torch.eye(7)  # row a scores action a highest
    td = env.step(env.reset().expand(7).clone().set("observation", start).set("action", scores))
    want = dynamics.transition(TASK, start, torch.arange(7), torch.Generator())[0]
    torch.testing.assert_close(td["next", "observation"], want, rtol=0, atol=0)


def test_value_operator_on_doorkey_is_the_tasks_v_star():
    states = dynamics.reset(TASK, 5, torch.Generator().manual_seed(0))
    got = value_operator("A", world=WORLD)(observation=states)
    want = dynamics.value_table(TASK).lookup(states)
    torch.testing.assert_close(got.squeeze(1), want, rtol=0, atol=0)
