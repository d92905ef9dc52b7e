"""Gymnasium observation options (state, grid, pixels) and the rgb_array render mode."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from gridplan.adapters import rendering  # noqa: E402
from gridplan.adapters.gymnasium import GridPlanVectorEnv, observation_space  # noqa: E402
from gridplan.core import render, world  # noqa: E402
from gridplan.core.tasks import TASK_A  # noqa: E402


@pytest.mark.parametrize("observation", render.OBS_KINDS)
@pytest.mark.parametrize("render_mode", [None, "ansi", "rgb_array"])
def test_every_observation_and_render_mode_passes_the_env_checker(observation, render_mode):
    env = gym.make("gridplan/KeyDoor-A-v0", observation=observation, render_mode=render_mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_observation_spaces_are_the_renderers_shapes_and_dtypes():
    assert observation_space(world.DEFAULT, "grid") == gym.spaces.Box(0.0, 1.0, (9, 8, 8))
    assert observation_space(world.DEFAULT, "pixels") == gym.spaces.Box(
        0, 255, (3, 32, 32), np.uint8
    )
    assert observation_space(world.get("g16-k8"), "grid").high.max() == 4.0


def test_pixel_observations_and_rgb_array_draw_the_state_of_the_env():
    env = gym.make("gridplan/KeyDoor-A-v0", observation="pixels", render_mode="rgb_array")
    obs, _ = env.reset(seed=4)
    state = torch.as_tensor(env.unwrapped._state)
    assert np.array_equal(obs, render.observe(state, world.DEFAULT, "pixels")[0].numpy())
    frame = env.render()
    assert frame.shape == (32, 32, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, obs.transpose(1, 2, 0))
    nxt, *_ = env.step(3)
    after = torch.as_tensor(env.unwrapped._state)
    assert np.array_equal(nxt, render.observe(after, world.DEFAULT, "pixels")[0].numpy())


def test_the_vector_env_batches_grid_observations_and_frames():
    envs = GridPlanVectorEnv(3, observation="grid", render_mode="rgb_array")
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (3, 9, 8, 8) and obs.dtype == np.float32
    assert np.array_equal(obs, render.observe(envs._state, world.DEFAULT, "grid").numpy())
    obs, *_ = envs.step(np.array([0, 1, 2]))
    assert np.array_equal(obs, render.observe(envs._state, world.DEFAULT, "grid").numpy())
    frames = envs.render()
    assert len(frames) == 3
    assert np.array_equal(frames[1], rendering.rgb_array(envs._state[1], TASK_A))


def test_an_unknown_observation_is_refused():
    with pytest.raises(ValueError, match="unknown observation kind 'rgb'"):
        gym.make("gridplan/KeyDoor-A-v0", observation="rgb")
