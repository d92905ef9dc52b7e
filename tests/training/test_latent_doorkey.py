"""Latent world models on MiniGrid DoorKey's observations (``gridplan.core.render``'s
``egocentric`` and ``full`` kinds): the codes of hand-built states, the refusals of the kinds a
world does not draw, and a tiny model trained on the egocentric view and evaluated (L1 and
success) through the frozen-decoder protocol."""

from __future__ import annotations

import json

import pytest
import torch
from helpers_learned import debug_overrides

from gridplan.core import doorkey_observe, dynamics, tasks
from gridplan.core import doorkey_task as dt
from gridplan.core import world as worlds
from gridplan.core.doorkey_constants import DOOR_OBJECT, EMPTY, FLOOR, KEY_OBJECT, LOCKED, YELLOW
from gridplan.core.doorkey_observe import egocentric, full_grid
from gridplan.core.render import obs_shape, observe
from gridplan.models.latent import load_latent_model
from gridplan.training.config import compose

DK8 = worlds.get("minigrid-doorkey-8x8")
DK6 = worlds.get("minigrid-doorkey-6x6")


def _cells(agent, heading, key, carrying=0, door=LOCKED, wall_x=4, door_y=2):
    """``(1, 10)`` MiniGrid state of the 8x8 world; a carried key sits on the agent."""
    key = agent if carrying else key
    return torch.tensor([[*agent, heading, *key, carrying, door, wall_x, door_y, 0]])


def test_the_egocentric_observation_is_minigrids_view_channels_first():
    # The agent at (1, 3) looks east at the key in front of it; the locked door (4, 2) lies
    # three cells ahead and one to the left: view cell (V // 2 - 1, V - 1 - 3) = (2, 3).
    cells = _cells((1, 3), 0, (2, 3))
    state = dt.encode(cells, None, DK8)
    obs = observe(state, DK8, "egocentric")
    want = doorkey_observe.egocentric(cells, DK8).permute(0, 3, 1, 2).float()
    assert obs.dtype == torch.float32 and obs.shape == (1, 3, 7, 7)
    assert obs_shape(DK8, "egocentric") == (3, 7, 7)
    assert torch.equal(obs, want)
    assert obs[0, :, 3, 5].tolist() == [KEY_OBJECT, YELLOW, 0]
    assert obs[0, :, 2, 3].tolist() == [DOOR_OBJECT, YELLOW, LOCKED]
    assert obs[0, :, 3, 6].tolist() == [EMPTY, 0, 0]
    # A noisy belief is drawn as the state it rounds to.
    noisy = state + 0.02 * torch.randn(state.shape, generator=torch.Generator().manual_seed(0))
    assert torch.equal(observe(noisy, DK8, "egocentric"), want)


def test_the_full_observation_is_the_fully_observed_grid_channels_first():
    cells = torch.cat([_cells((1, 3), 0, (2, 3)), _cells((2, 5), 3, (0, 0), carrying=1)])
    obs = observe(dt.encode(cells, None, DK8), DK8, "full")
    want = doorkey_observe.full_grid(cells, DK8).permute(0, 3, 1, 2).float()
    assert obs.shape == (2, 3, 8, 8) == (2, *obs_shape(DK8, "full"))
    assert torch.equal(obs, want)
    assert obs[0, :, 4, 2].tolist() == [DOOR_OBJECT, YELLOW, LOCKED]


@pytest.mark.parametrize("kind", ["grid", "pixels"])
def test_doorkey_refuses_the_paper_worlds_kinds_naming_its_own(kind):
    state = dt.encode(_cells((1, 3), 0, (2, 3)), None, DK8)
    with pytest.raises(ValueError, match=f"no '{kind}' observation; its kinds: state, egoc"):
        observe(state, DK8, kind)


@pytest.mark.parametrize("kind", ["egocentric", "full"])
def test_the_paper_world_refuses_doorkeys_kinds_naming_its_own(kind):
    with pytest.raises(ValueError, match=f"no '{kind}' observation; its kinds: state, grid, pi"):
        obs_shape(worlds.DEFAULT, kind)


def test_a_world_with_floor_tiles_draws_them_as_doorkey_observe_does():
    tiled = worlds.get("minigrid-doorkey-8x8-t2")
    state = dynamics.reset(tasks.get("A", world=tiled), 64, torch.Generator().manual_seed(0))
    cells, tiles = dt.decode(state, tiled)
    for kind, draw in (("egocentric", egocentric), ("full", full_grid)):
        want = draw(cells, tiled, tiles).permute(0, 3, 1, 2).float()
        assert torch.equal(observe(state, tiled, kind), want)
    assert (observe(state, tiled, "full")[:, 0] == FLOOR).any()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["obs=egocentric"], "world 'default' has no 'egocentric' observation"),
        (["obs=grid", "world=minigrid-doorkey-8x8"], "has no 'grid' observation"),
        (["model=mlp", "obs=egocentric", "world=minigrid-doorkey-8x8"], "needs a latent model"),
    ],
)
def test_the_training_config_refuses_a_kind_the_world_does_not_draw(overrides, message):
    with pytest.raises(ValueError, match=message):
        compose(["model=jepa", *overrides])


def test_the_training_config_accepts_the_views_on_doorkey():
    for kind in ("egocentric", "full"):
        cfg = compose(["model=jepa", f"obs={kind}", "world=minigrid-doorkey-8x8"])
        assert cfg.obs.name == kind


def test_a_tiny_latent_model_trains_on_the_egocentric_view_and_evaluates(tmp_path):
    from eval.cli import main as eval_main
    from train.__main__ import main as train_main

    overrides = [*debug_overrides(tmp_path), "model=latent_recon", "obs=egocentric"]
    assert train_main([*overrides, "world=minigrid-doorkey-6x6", "model.channels=[8,8]"]) == 0
    (ckpt,) = (tmp_path / "runs").glob("*/version_0/checkpoints/best.ckpt")
    model = load_latent_model(ckpt)
    assert model.world == DK6 and model.obs_kind == "egocentric"
    assert model.obs_shape == (3, 7, 7) and model.net.n_actions == 7
    tiny = ["--seeds", "1", "--episodes", "2", "--eval-windows", "8", "--no-progress"]
    assert eval_main(["--ckpt", str(ckpt), *tiny]) == 0
    (path,) = ckpt.parent.glob("best.eval.*.json")
    report = json.loads(path.read_text())
    assert report["world"] == DK6.spec() and report["spec"]["levels"] == ["L1", "success"]
    assert report["success"]["n"] == 2 and 0.0 <= report["success"]["mean"] <= 1.0
    assert report["latent"]["obs_kind"] == "egocentric"
    assert report["E_tot"] >= 0.0 and report["DRPE"]["binary"] >= 0.0
    assert len(report["profile"]) == DK6.state_dim
