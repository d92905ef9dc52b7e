"""Latent world models: EMA target, VICReg terms by hand, losses, debug training runs and the
loader of their checkpoints (gridplan.models.latent, gridplan.training.latent_module)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from gridplan.core import env, world
from gridplan.core.render import obs_shape
from gridplan.core.tasks import TASK_A
from gridplan.models.latent import (
    DecodingLatentModel,
    HeadsLatentModel,
    LatentNetwork,
    LearnedLatentModel,
    RSSMLatentModel,
    TDHeads,
    covariance_loss,
    ema_update,
    load_latent_model,
    variance_loss,
)
from gridplan.models.learned import load_world_model
from gridplan.training.config import compose
from gridplan.training.latent_module import LatentWorldModelModule

W = world.DEFAULT


def test_ema_moves_the_target_a_decay_fraction_toward_the_online_weights():
    target, online = nn.Linear(1, 1), nn.Linear(1, 1)
    with torch.no_grad():
        target.weight.fill_(1.0), target.bias.fill_(2.0)
        online.weight.fill_(3.0), online.bias.fill_(6.0)
    ema_update(target, online, 0.75)
    assert target.weight.item() == 1.5 and target.bias.item() == 3.0
    assert online.weight.item() == 3.0
    ema_update(target, online, 0.0)
    assert target.bias.item() == 6.0
    with pytest.raises(ValueError, match=r"EMA decay must lie in \[0, 1\], got 1.5"):
        ema_update(target, online, 1.5)


def test_the_variance_term_is_zero_above_unit_std_and_near_one_for_a_collapsed_batch():
    # dim 0: values 0, 2 (unbiased variance 2, std > 1: no penalty); dim 1 collapsed.
    z = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    assert variance_loss(z).item() == pytest.approx(0.5 * (1 - 0.01))
    assert variance_loss(torch.ones(8, 3)).item() == pytest.approx(0.99)
    assert variance_loss(torch.tensor([[-2.0], [2.0]])).item() == 0.0


def test_the_covariance_term_sums_squared_off_diagonals_over_z():
    # Both dims equal: covariance [[2, 2], [2, 2]], off-diagonal squares 4 + 4, over Z = 2.
    assert covariance_loss(torch.tensor([[1.0, 1.0], [-1.0, -1.0]])).item() == 4.0
    decorrelated = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    assert covariance_loss(decorrelated).item() == 0.0
    with pytest.raises(ValueError, match=r"z must be \(B, Z\) with B >= 2, got \(1, 4\)"):
        covariance_loss(torch.zeros(1, 4))


def _module(*overrides: str) -> LatentWorldModelModule:
    cfg = OmegaConf.to_container(compose(list(overrides)), resolve=True)
    torch.manual_seed(0)
    return LatentWorldModelModule(cfg)


def _batch(n: int = 16, events: bool = False):
    s = env.reset(n, torch.Generator().manual_seed(1))
    a = torch.arange(n) % 4
    s1, _, _, info = env.step(s, a, torch.Generator().manual_seed(2))
    flag = torch.full((n,), events)
    return s, a, s1, flag, torch.zeros(n, dtype=torch.bool)


@pytest.mark.parametrize("family", ["latent_recon", "jepa", "tdmpc"])
def test_event_weighting_scales_every_weighted_term_of_an_all_event_batch(family):
    uniform = _module(f"model={family}", "obs=grid")
    weighted = _module(f"model={family}", "obs=grid", "variant=event_weighted")
    weighted.net.load_state_dict(uniform.net.state_dict())
    plain, heavy = uniform.terms(_batch(events=True)), weighted.terms(_batch(events=True))
    scaled = {
        "latent_recon": ("recon", "pred", "latent"),
        "jepa": ("latent",),
        "tdmpc": ("latent", "reward", "done", "value"),
    }[family]
    for name in scaled:
        assert heavy[name].item() == pytest.approx(10 * plain[name].item(), rel=1e-5)
    if family != "latent_recon":  # the regularisers do not depend on the events
        assert heavy["variance"].item() == pytest.approx(plain["variance"].item())


def _linear(weight: list[float], bias: float) -> nn.Linear:
    layer = nn.Linear(len(weight), 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([weight]))
        layer.bias.fill_(bias)
    return layer


def test_the_td_target_backs_up_the_best_action_through_the_model():
    heads = TDHeads(4, [8])
    # Inputs (z, one-hot action): action 2 alone earns 1, action 3 ends the episode, and
    # every latent is worth 2 to the target value head.
    heads.reward = _linear([0, 0, 0, 0, 0, 0, 1, 0], 0.0)
    heads.done = _linear([0, 0, 0, 0, 0, 0, 0, 120], -60.0)
    heads.target_value = _linear([0, 0, 0, 0], 2.0)
    target = heads.td_target(torch.randn(5, 4), lambda z, a: z, 0.9)
    # max(0 + 0.9 * 2, 0 + 0.9 * 2, 1 + 0.9 * 2, 0 + 0.9 * 0 * 2) = 2.8
    assert torch.allclose(target, torch.full((5,), 2.8))


def test_a_tdmpc_batch_scores_its_heads_against_the_logged_outcome():
    module = _module("model=tdmpc", "obs=grid")
    terms = module.terms(_batch())
    assert set(terms) == {"loss", "latent", "variance", "covariance", "reward", "done", "value"}
    assert all(torch.isfinite(v) for v in terms.values())
    weighted = (
        terms["latent"]
        + terms["variance"]
        + 0.04 * terms["covariance"]
        + 0.5 * (terms["reward"] + terms["done"])
        + 0.1 * terms["value"]
    )
    assert terms["loss"].item() == pytest.approx(weighted.item(), rel=1e-6)


def test_the_rollout_variant_scores_later_steps_and_skips_ended_ones():
    module = _module("model=latent_recon", "obs=pixels", "variant=rollout")
    s, a, s1, pickup, door = _batch(8)
    later_a = torch.zeros(8, 1, dtype=torch.long)
    later_s = s1.unsqueeze(1)
    none = torch.zeros(8, 1, dtype=torch.bool)
    one = module.terms((s, a, s1, pickup, door))
    ended = module.terms((s, a, s1, pickup, door, later_a, later_s, none, none))
    # Every later step invalid: the step-1 terms over H = 2 steps.
    assert ended["pred"].item() == pytest.approx(one["pred"].item() / 2, rel=1e-5)
    assert ended["recon"].item() == pytest.approx(one["recon"].item(), rel=1e-6)


def test_a_stochastic_latent_draws_from_the_given_generator_only():
    net = LatentNetwork("latent_recon", "state", obs_shape(W, "state"), 12, stochastic=True)
    model = DecodingLatentModel(net, {}, W)
    z = model.encode(model.observe(env.reset(4, torch.Generator().manual_seed(0))))
    a = torch.tensor([0, 1, 2, 3])

    def step(seed):
        return model.predict_latent(z, a, torch.Generator().manual_seed(seed))

    assert not model.deterministic
    assert torch.equal(step(5), step(5)) and not torch.equal(step(5), step(6))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two debug runs: a pixel reconstruction model through ``python -m train``'s main and a
    grid JEPA through ``gridplan.training.runs.train_run``."""
    from gridplan.training.runs import train_run
    from train.__main__ import main

    tmp = tmp_path_factory.mktemp("latent")
    common = [
        "trainer=debug",
        "data.budget=1000",
        "data.windows=8",
        f"out_dir={tmp}",
        f"data.cache_dir={tmp / 'cache'}",
        "logger=csv",
    ]
    assert main(["model=latent_recon", "obs=pixels", *common]) == 0
    return {
        "recon": next(tmp.glob("latent_recon-pixels-*/version_0")),
        "jepa": train_run(["model=jepa", "obs=grid", *common]),
        "tdmpc": train_run(["model=tdmpc", "obs=pixels", *common]),
        "rssm": train_run(["model=rssm", "obs=grid", *common]),
    }


def test_the_train_summary_of_a_latent_run_names_its_one_step_scores(capsys):
    from train.__main__ import _summary

    metrics = {
        "epochs": 2,
        "monitor": "val/loss",
        "best_score": 0.5,
        "train_seconds": 1.0,
        "best/latent_mse": 0.25,
        "best/recon_mse": 0.125,
        "best/pred_mse": 0.0625,
    }
    _summary(metrics, {"run_dir": "R", "best_checkpoint": "R/best.ckpt"})
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "epochs 2  val/loss 0.50000  latent_mse 0.2500  recon_mse 0.1250  pred_mse 0.0625  (1 s)"
    )
    assert out[-1] == "checkpoint: R/best.ckpt"


def test_debug_runs_land_in_their_family_and_observation_folders(runs):
    assert runs["recon"].parent.name == "latent_recon-pixels-uniform-balanced-1k-seed0"
    assert runs["jepa"].parent.name == "jepa-grid-uniform-balanced-1k-seed0"
    assert (runs["recon"] / "checkpoints" / "best.ckpt").is_file()


@pytest.mark.parametrize(
    ("run", "kind", "cls"),
    [
        ("recon", "pixels", DecodingLatentModel),
        ("jepa", "grid", LearnedLatentModel),
        ("tdmpc", "pixels", HeadsLatentModel),
        ("rssm", "grid", RSSMLatentModel),
    ],
)
def test_a_trained_checkpoint_loads_behind_the_latent_contract(runs, run, kind, cls):
    model = load_latent_model(runs[run] / "checkpoints" / "best.ckpt")
    assert type(model) is cls
    assert model.obs_kind == kind and model.world == W
    assert model.latent_dim == (96 if cls is RSSMLatentModel else 32)
    assert model.deterministic is (cls is not RSSMLatentModel)
    assert model.metadata["kind"] == "latent"
    state = env.reset(5, torch.Generator().manual_seed(0), TASK_A)
    z = model.encode(model.observe(state))
    assert z.shape == (5, model.latent_dim) and z.dtype == torch.float32
    assert torch.isfinite(z).all()
    z1 = model.predict_latent(z, torch.tensor([0, 1, 2, 3, 0]), torch.Generator())
    assert z1.shape == z.shape and z1.dtype == torch.float32
    assert hasattr(model, "decode") is issubclass(cls, DecodingLatentModel)
    if cls is HeadsLatentModel:
        a = torch.tensor([0, 1, 2, 3, 0])
        for out in (model.reward(z, a, z1), model.value(z1)):
            assert out.shape == (5,) and out.dtype == torch.float32 and torch.isfinite(out).all()
    if issubclass(cls, DecodingLatentModel):
        s = model.decode(z1)
        assert s.shape == (5, 12) and ((s >= 0) & (s <= 1)).all()


def test_an_rssm_draws_its_state_from_the_generator_and_filters_from_its_belief(runs):
    model = load_latent_model(runs["rssm"] / "checkpoints" / "best.ckpt")
    state = env.reset(4, torch.Generator().manual_seed(0), TASK_A)
    a = torch.tensor([0, 1, 2, 3])
    z = model.encode(model.observe(state))
    belief, _ = z.split([64, 32], dim=1)
    assert torch.equal(belief, torch.zeros(4, 64))  # one observation: the initial belief

    def step(seed):
        return model.predict_latent(z, a, torch.Generator().manual_seed(seed))

    assert torch.equal(step(5), step(5)) and not torch.equal(step(5), step(6))
    # The belief is deterministic: only the state part of the latent differs between draws.
    assert torch.equal(step(5)[:, :64], step(6)[:, :64])
    nxt, _, _, _ = env.step(state, a, torch.Generator().manual_seed(1))
    filtered = model.filter_latent(z, a, model.observe(nxt))
    assert torch.equal(filtered[:, :64], step(5)[:, :64])  # the same belief, then the posterior
    assert not torch.equal(filtered, model.encode(model.observe(nxt)))


def test_bad_observations_and_latents_are_refused_naming_the_problem(runs):
    model = load_latent_model(runs["recon"] / "checkpoints" / "best.ckpt")
    obs = model.observe(env.reset(2, torch.Generator().manual_seed(0)))
    with pytest.raises(ValueError, match=r"obs \(pixels\) must have dtype torch.uint8"):
        model.encode(obs.float())
    with pytest.raises(ValueError, match=r"obs must have shape \(B, 3, 32, 32\)"):
        model.encode(obs[:, :, :16])
    z = model.encode(obs)
    z[1, 3] = float("nan")
    with pytest.raises(ValueError, match=r"z holds non-finite values \(NaN or inf\) in rows \[1\]"):
        model.predict_latent(z, torch.zeros(2, dtype=torch.long), torch.Generator())
    with pytest.raises(ValueError, match=r"action must be a \(2,\) integer tensor in 0..3"):
        model.predict_latent(z.nan_to_num(), torch.tensor([0, 4]), torch.Generator())


def test_a_checkpoint_with_missing_or_wrong_contents_is_refused(runs, tmp_path):
    path = runs["jepa"] / "checkpoints" / "best.ckpt"
    ckpt = torch.load(path, weights_only=True)
    with pytest.raises(ValueError, match="is a latent world model .*load_latent_model"):
        load_world_model(path)
    no_obs = tmp_path / "no_obs.ckpt"
    torch.save(
        {**ckpt, "gridplan": {k: v for k, v in ckpt["gridplan"].items() if k != "obs"}}, no_obs
    )
    with pytest.raises(ValueError, match="the latent checkpoint lacks obs"):
        load_latent_model(no_obs)
    state_kind = tmp_path / "state.ckpt"
    torch.save({**ckpt, "gridplan": {**ckpt["gridplan"], "kind": "state"}}, state_kind)
    with pytest.raises(ValueError, match="is not a latent world model"):
        load_latent_model(state_kind)
    cut = tmp_path / "cut.ckpt"
    weights = {k: v for k, v in ckpt["state_dict"].items() if "decoder" not in k}
    weights.pop("net.dynamics.net.0.weight")
    torch.save({**ckpt, "state_dict": weights}, cut)
    with pytest.raises(ValueError, match="missing from the checkpoint: dynamics.net.0.weight"):
        load_latent_model(cut)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["obs=pixels"], "obs=pixels needs a latent model"),
        (["model=jepa", "model.stochastic=true"], "model.stochastic=true needs model=latent_recon"),
        (["model=jepa", "obs=grid", "model.members=2"], "trains one network: model.members=1"),
        (["model=latent_recon", "trainer.monitor=val/E_tot"], "selects its best checkpoint by"),
        (["model=latent_recon", "obs=pixels", "obs.pixels_per_cell=3"], "even int >= 2"),
        (["model=jepa", "obs=grid", "variant=rel_only"], "variant=rel_only weights state dim"),
        (["model=jepa", "obs=grid", "variant=anti_weighted"], "jepa has no state loss"),
        (["model=tdmpc", "obs=grid", "variant=rel_only"], "tdmpc has no state loss"),
        (["model=tdmpc", "model.stochastic=true"], "a tdmpc predicts a deterministic latent"),
        (["model=rssm", "model.stochastic=false"], "belong to model=rssm"),
        (["model=rssm", "model.belief_dim=96"], "belief_dim lies in 1..latent_dim - 1"),
        (["model=latent_recon", "model.belief_dim=8"], "belong to model=rssm"),
    ],
)
def test_configs_a_latent_family_cannot_train_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        compose(overrides)


def test_run_data_gives_back_the_split_a_checkpoint_trained_on(runs):
    from gridplan.training.latent_module import run_data

    model = load_latent_model(runs["jepa"] / "checkpoints" / "best.ckpt")
    train, val = run_data(model.metadata)
    assert len(train) == model.metadata["dataset"]["train_transitions"]
    assert len(val) == model.metadata["dataset"]["val_transitions"]
    assert not set(train.episode.tolist()) & set(val.episode.tolist())
    changed = {**model.metadata, "dataset": {"fingerprint": "0" * 16}}
    with pytest.raises(ValueError, match="the checkpoint recorded 0000000000000000"):
        run_data(changed)
