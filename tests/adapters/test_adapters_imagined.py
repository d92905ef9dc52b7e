"""Gymnasium: the imagined env over a world model, max_episode_steps, SyncVectorEnv seeding and
the ansi render mode; TorchRL: the model env holds models to python -m eval's contract."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import SyncVectorEnv
from gymnasium.wrappers import TimeAwareObservation
from torchrl.envs.utils import check_env_specs

from gridplan.adapters import rendering
from gridplan.adapters.gymnasium import (
    ENV_IDS,
    IMAGINED_IDS,
    GridPlanEnv,
    GridPlanVectorEnv,
    ImaginedEnv,
)
from gridplan.adapters.torchrl import WorldModelEnv
from gridplan.core import tasks
from gridplan.core.constants import DOWN, LEFT, RIGHT, UP
from gridplan.models.noise import OracleModel
from gridplan.models.plugins import OutOfRangeWarning, PluginError, check_contract

TASK_A, TASK_B = tasks.get("A"), tasks.get("B")
#: Dims that the actions decide (agent, key, flags); the distractors are random.
DECIDED = slice(0, 8)
#: The agent in the corner (0, 0) below its key (0, 1): DOWN never moves it.
CORNER = np.array([0, 0, 0, 1 / 7] + [0] * 8, dtype=np.float32)


class Overshoot:
    """A plain model whose outputs leave [0, 1] (python -m eval clamps them)."""

    def __init__(self):
        self.oracle = OracleModel()

    def predict(self, state, action, generator):
        return self.oracle.predict(state, action, generator) * 1.2 - 0.1


class ToGoal:
    """Predicts the agent on task A's goal cell (7, 4) whatever it does."""

    def predict(self, state, action, generator):
        nxt = state.clone()
        nxt[:, 0], nxt[:, 1] = 1.0, 4 / 7
        return nxt


class Misshapen:
    def predict(self, state, action, generator):
        return state[:, :11]


def _quiet(fn):
    """The warnings ``fn()`` raises, but the clamping note every new checked model gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if w.category is not OutOfRangeWarning]


# --- TorchRL: the same checks and clamping as python -m eval


def test_world_model_env_passes_check_env_specs_on_a_model_eval_clamps():
    model = Overshoot()
    with pytest.warns(OutOfRangeWarning):
        check_contract(model, TASK_A, "cpu")  # what python -m eval runs: accepted, clamped
        env = WorldModelEnv(model, seed=0)
    check_env_specs(env)
    assert env.clamped > 0
    assert env.model is model


def test_world_model_env_refuses_a_broken_model_naming_the_method():
    with pytest.raises(PluginError, match=r"predict returned shape \(8, 11\), expected \(8, 12\)"):
        WorldModelEnv(Misshapen())
    with pytest.raises(PluginError, match="without a callable predict"):
        WorldModelEnv(object())


# --- Gymnasium: the imagined env


@pytest.mark.parametrize("model", [OracleModel(), Overshoot()], ids=["oracle", "overshoot"])
def test_imagined_env_passes_gymnasiums_env_checker_without_warnings(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutOfRangeWarning)
        env = ImaginedEnv(model, render_mode="ansi")
    # Without a spec the checker cannot remake the env in other render modes (it warns so).
    assert _quiet(lambda: check_env(env, skip_render_check=True)) == []
    made = gym.make(IMAGINED_IDS["B"], model=model, render_mode="ansi", disable_env_checker=True)
    assert isinstance(made.unwrapped, ImaginedEnv) and made.unwrapped.task is TASK_B
    assert _quiet(lambda: check_env(made.unwrapped)) == []


def test_imagined_oracle_episodes_follow_the_true_env():
    true, dream = GridPlanEnv("B"), ImaginedEnv(OracleModel(), "B")
    a, _ = true.reset(seed=5)
    b, _ = dream.reset(seed=5)
    np.testing.assert_array_equal(a, b)
    for action in [RIGHT, UP, UP, LEFT, DOWN, RIGHT, RIGHT, UP]:
        a, ra, ta, ua, ia = true.step(action)
        b, rb, tb, ub, ib = dream.step(action)
        np.testing.assert_array_equal(a[DECIDED], b[DECIDED])
        assert (ra, ta, ua, ia) == (rb, tb, ub, ib)


def test_imagined_reward_and_termination_come_from_the_predicted_state(make_state):
    env = ImaginedEnv(ToGoal())
    env.reset(seed=0, options={"state": make_state(agent=(0, 0))[0]})
    obs, reward, terminated, truncated, info = env.step(LEFT)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info == {"goal": True, "hazard": False, "pickup": False, "door_opened": False}
    assert obs[:2].tolist() == pytest.approx([1.0, 4 / 7])
    with pytest.raises(gym.error.ResetNeeded):
        env.step(UP)


def test_imagined_predictions_are_clamped_into_the_observation_box():
    with pytest.warns(OutOfRangeWarning):
        env = ImaginedEnv(Overshoot())
    obs, _ = env.reset(seed=1)
    for _ in range(5):
        obs, *_ = env.step(RIGHT)
        assert env.observation_space.contains(obs)
    assert env.clamped > 0


def test_imagined_env_refuses_a_broken_model():
    with pytest.raises(PluginError, match=r"returned shape \(8, 11\)"):
        ImaginedEnv(Misshapen())


# --- max_episode_steps


def _stuck_steps(env, limit: int) -> int:
    """Steps until the episode ends with the agent pushing into the grid's corner."""
    env.reset(seed=0, options={"state": CORNER})
    for n in range(1, limit + 1):
        _, _, terminated, truncated, _ = env.step(DOWN)
        if terminated or truncated:
            assert truncated and not terminated
            return n
    return limit + 1


@pytest.mark.parametrize("steps", [7, 100])
def test_gym_make_honours_max_episode_steps_beyond_and_below_the_horizon(steps):
    env = gym.make(ENV_IDS["A"], max_episode_steps=steps)
    assert env.spec.max_episode_steps == steps
    assert _stuck_steps(env, 200) == steps
    timed = TimeAwareObservation(gym.make(ENV_IDS["A"], max_episode_steps=steps))
    obs, _ = timed.reset(seed=0)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = timed.step(DOWN)
        if terminated:
            break
    assert obs.shape == (13,)
    dream = gym.make(IMAGINED_IDS["A"], model=OracleModel(), max_episode_steps=steps)
    assert _stuck_steps(dream, 200) == steps


def test_the_default_limit_is_the_task_horizon_everywhere():
    env = gym.make(ENV_IDS["A"])
    assert env.spec.max_episode_steps == TASK_A.horizon == 60
    assert _stuck_steps(env, 200) == 60
    assert _stuck_steps(GridPlanEnv(), 200) == 60
    assert TimeAwareObservation(gym.make(ENV_IDS["B"])).reset(seed=0)[0].shape == (13,)
    assert gym.make_vec(ENV_IDS["A"], num_envs=2).max_episode_steps == 60


def test_vector_env_and_direct_construction_take_max_episode_steps():
    envs = gym.make_vec(ENV_IDS["A"], num_envs=3, max_episode_steps=5)
    envs.reset(seed=0, options={"state": np.tile(CORNER, (3, 1))})
    truncated = [envs.step(np.full(3, DOWN))[3].tolist() for _ in range(5)]
    assert truncated == [[False] * 3] * 4 + [[True] * 3]
    assert _stuck_steps(GridPlanEnv(max_episode_steps=3), 10) == 3
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="max_episode_steps must be an integer >= 1"):
            GridPlanEnv(max_episode_steps=bad)
        with pytest.raises(ValueError, match="max_episode_steps must be an integer >= 1"):
            GridPlanVectorEnv(2, max_episode_steps=bad)


# --- vector seeding as SyncVectorEnv


@pytest.mark.parametrize("seed", [5, [3, 9, 1, 2**40]], ids=["int", "list"])
def test_vector_seeds_give_the_starts_of_a_sync_vector_env(seed):
    ours = GridPlanVectorEnv(4, "B")
    sync = SyncVectorEnv([lambda: GridPlanEnv("B")] * 4)
    a, _ = ours.reset(seed=seed)
    b, _ = sync.reset(seed=seed)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[0], a[1])  # each sub-environment its own seed
    # Until an episode ends, the actions decide agent, key and flags alike in both.
    rng = np.random.default_rng(0)
    for _ in range(12):
        actions = rng.integers(0, 4, 4)
        a, ra, ta, ua, _ = ours.step(actions)
        b, rb, tb, ub, _ = sync.step(actions)
        np.testing.assert_array_equal(a[:, DECIDED], b[:, DECIDED])
        np.testing.assert_array_equal(np.c_[ra, ta, ua], np.c_[rb, tb, ub])
        if (ta | ua).any():
            break


def test_one_sub_environment_is_exactly_gridplan_env():
    ours, single = GridPlanVectorEnv(1), GridPlanEnv()
    a, _ = ours.reset(seed=[8])
    b, _ = single.reset(seed=8)
    np.testing.assert_array_equal(a[0], b)
    for action in [RIGHT, UP, UP, RIGHT, DOWN, LEFT, UP, UP]:
        a = ours.step(np.array([action]))[0]
        b = single.step(action)[0]
        np.testing.assert_array_equal(a[0], b)  # distractors as well


def test_a_masked_seeded_reset_reseeds_only_the_masked_rows():
    envs = GridPlanVectorEnv(3)
    first, _ = envs.reset(seed=0)
    mask = np.array([False, True, False])
    again, _ = envs.reset(seed=[7, 11, 13], options={"reset_mask": mask})
    np.testing.assert_array_equal(again[[0, 2]], first[[0, 2]])
    np.testing.assert_array_equal(again[1], GridPlanEnv().reset(seed=11)[0])


# --- render_mode="ansi"


def test_ansi_render_draws_the_grid(make_state):
    state = make_state(agent=(1, 2), key=(3, 6), d1=(0, 7), d2=(7, 0))[0]
    text = rendering.ansi(state, TASK_B)
    assert text == (
        "x....#..\n"
        "...k.#..\n"
        ".....#.H\n"
        ".....D..\n"
        ".....#..\n"
        ".A...#.G\n"
        ".....#..\n"
        ".....#.x\n"
    )
    carried = make_state(agent=(6, 4), carrying=True, door_open=True, c1=True)[0]
    lines = rendering.ansi(carried, TASK_B).splitlines()
    assert lines[3][5:7] == "/a"  # open door, the agent carrying the key beside it
    assert "k" not in "".join(lines)
    assert (lines[2][7], lines[5][7]) == ("G", "H")  # c1 swaps goal and hazard


def test_render_modes_of_the_envs(make_state):
    env = gym.make(ENV_IDS["A"], render_mode="ansi")
    obs, _ = env.reset(seed=0)
    text = env.render()
    assert text == rendering.ansi(torch.as_tensor(obs), TASK_A)
    assert text.count("\n") == 8 and text.count("A") + text.count("a") == 1
    assert GridPlanEnv().render() is None
    envs = GridPlanVectorEnv(2, render_mode="ansi")
    obs, _ = envs.reset(seed=0)
    assert envs.render() == tuple(rendering.ansi(torch.as_tensor(o), TASK_A) for o in obs)
    dream = ImaginedEnv(OracleModel(), render_mode="ansi")
    with pytest.raises(gym.error.ResetNeeded):
        dream.render()
    with pytest.raises(
        ValueError, match=r"render_mode must be None or one of \['ansi', 'rgb_array'\]"
    ):
        GridPlanEnv(render_mode="human")
    assert GridPlanEnv.metadata["render_modes"] == ["ansi", "rgb_array"]
