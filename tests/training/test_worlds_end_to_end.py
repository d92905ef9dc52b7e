"""A world other than the default end to end: ``python -m train world=g16-k8``, then
``python -m eval --ckpt`` on the checkpoint's own world (and refused on another), and the
Gymnasium and TorchRL adapters on that world passing their libraries' checkers."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers_learned import debug_overrides

from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.models.learned import load_world_model

G16 = worlds.get("g16-k8")
TINY = ["--seeds", "1", "--episodes", "2", "--eval-windows", "8", "--no-progress"]


@pytest.fixture(scope="module")
def g16_checkpoint(tmp_path_factory) -> Path:
    from train.__main__ import main

    tmp = tmp_path_factory.mktemp("g16")
    assert main([*debug_overrides(tmp), "world=g16-k8"]) == 0
    (path,) = (tmp / "runs").glob("g16-k8-*/version_0/checkpoints/best.ckpt")
    return path


@pytest.mark.slow
def test_a_checkpoint_records_its_world(g16_checkpoint):
    model = load_world_model(g16_checkpoint)
    assert model.world == G16 and model.world.name == "g16-k8"
    assert model.net.state_dim == 24
    assert model.metadata["world"] == G16.spec()


@pytest.mark.slow
def test_eval_scores_a_checkpoint_on_its_own_world(g16_checkpoint, capsys):
    from eval.cli import main

    assert main(["--ckpt", str(g16_checkpoint), *TINY]) == 0
    assert "success rate" in capsys.readouterr().out
    (path,) = g16_checkpoint.parent.glob("best.eval.*.json")
    report = json.loads(path.read_text())
    assert report["world"] == G16.spec() and report["task"] == "A"
    assert len(report["profile"]) == 24 and "d2_3_y" in report["profile"]


@pytest.mark.slow
def test_eval_refuses_a_checkpoint_on_another_world_naming_both(g16_checkpoint, capsys):
    from eval.cli import main

    before = sorted(g16_checkpoint.parent.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        main(["--ckpt", str(g16_checkpoint), "--world", "default", "--json",
              str(g16_checkpoint.parent / "other.json"), *TINY])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--world default asks for default (8x8, S=12" in err
    assert "the model predicts g16-k8 (16x16, S=24" in err
    assert sorted(g16_checkpoint.parent.iterdir()) == before


@pytest.mark.slow
def test_the_gymnasium_env_on_g16_k8_passes_the_env_checker():
    import gymnasium as gym
    import numpy as np
    from gymnasium.utils.env_checker import check_env

    from gridplan.adapters.gymnasium import GridPlanEnv

    env = gym.make("gridplan.adapters.gymnasium:gridplan/KeyDoor-B-v0", world="g16-k8").unwrapped
    assert isinstance(env, GridPlanEnv)
    assert env.task == tasks.get("B", world=G16)
    assert env.observation_space.shape == (24,)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    assert [str(w.message) for w in caught] == []
    obs, _ = env.reset(seed=3)
    assert obs.shape == (24,) and obs.dtype == np.float32
    assert (obs[[0, 2]] * 15 < G16.wall_x).all()  # agent and key start west of the wall


@pytest.mark.slow
def test_the_torchrl_env_on_g16_k8_passes_check_env_specs():
    from torchrl.envs.utils import check_env_specs

    from gridplan.adapters.torchrl import GridEnv

    env = GridEnv(4, "A", world="g16-k8", seed=0)
    assert env.task == tasks.get("A", world=G16)
    check_env_specs(env, break_when_any_done="both")
    state = env.reset()["observation"]
    assert tuple(state.shape) == (4, 24)


@pytest.mark.slow
def test_the_imagined_envs_of_a_g16_k8_checkpoint_pass_their_checkers(g16_checkpoint):
    from gymnasium.utils.env_checker import check_env
    from torchrl.envs.utils import check_env_specs

    from gridplan.adapters.gymnasium import ImaginedEnv
    from gridplan.adapters.torchrl import WorldModelEnv

    model = load_world_model(g16_checkpoint)
    env = ImaginedEnv(model, "A", world="g16-k8")
    assert env.observation_space.shape == (24,)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert [str(w.message) for w in caught] == []
    check_env_specs(WorldModelEnv(model, "B", world="g16-k8", seed=0))
    # Without world= the env plays in the model's own world; another world is refused.
    assert ImaginedEnv(model, "A").task.world == worlds.get("g16-k8")
    with pytest.raises(ValueError, match="predicts world g16-k8.*played on default"):
        ImaginedEnv(model, "A", world="default")
