"""Ensembles: member configs and seeds, the stacked checkpoint, mean and trajectory-sampling
planning, the disagreement score and its relation to rollout error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_learned import debug_overrides
from omegaconf import OmegaConf

from gridplan.data.datasets import eval_windows
from gridplan.metrics.calibration import uncertainty_vs_error, window_disagreement
from gridplan.models.ensemble import (
    assemble,
    load_ensemble,
)
from gridplan.models.learned import EnsembleWorldModel, MLPDynamics, load_world_model
from gridplan.planning.closed_loop import run_episodes
from gridplan.training.config import compose
from gridplan.training.runs import member_configs, member_seed
from gridplan.training.vectorized import Member, train_group


def _biased(biases: list[float], dim: int = 0) -> MLPDynamics:
    """A delta network whose member ``k`` predicts ``state + biases[k]`` on ``dim`` only."""
    net = MLPDynamics([8], members=len(biases))
    last = net.layers[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
        last.bias[:, 0, dim] = torch.tensor(biases)
    return net


def _mid_states(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((n, 12), 0.5), torch.zeros(n, dtype=torch.long)


def test_member_seeds_are_distinct_and_reproducible():
    seeds = [member_seed(s, k) for s in range(3) for k in range(5)]
    assert len(set(seeds)) == 15
    assert member_seed(2, 4) == 4008876094  # the same in every process and on every machine


def test_member_configs_pin_the_data_and_vary_the_seed(tmp_path):
    cfg = compose([*debug_overrides(tmp_path), "seed=3", "model.members=3"])
    members = member_configs(cfg)
    assert [c.model.members for c, _ in members] == [1, 1, 1]
    assert [c.seed for c, _ in members] == [member_seed(3, k) for k in range(3)]
    assert [r for _, r in members] == [member_seed(3, k) for k in range(3)]
    assert {c.data.seed for c, _ in members} == {3}
    assert [c.name for c, _ in members] == [
        f"uniform-balanced-600-seed3-member{k}" for k in range(3)
    ]
    assert [r for _, r in member_configs(cfg, bootstrap=False)] == [None] * 3
    with pytest.raises(ValueError, match="members >= 2"):
        member_configs(compose(debug_overrides(tmp_path)))


def test_the_mean_mode_predicts_the_members_mean():
    model = EnsembleWorldModel(_biased([0.0, 0.1, 0.2]))
    state, action = _mid_states(4)
    out = model.predict(state, action)
    assert torch.allclose(out[:, 0], torch.full((4,), 0.6))
    assert torch.allclose(out[:, 1:], state[:, 1:])


def test_trajectory_sampling_uses_one_drawn_member_per_rollout():
    model = EnsembleWorldModel(_biased([0.0, 0.1, 0.2]), sampling="ts")
    state, action = _mid_states(64)
    gen = torch.Generator().manual_seed(5)
    model.start_rollout(64, gen)
    drawn = torch.randint(0, 3, (64,), generator=torch.Generator().manual_seed(5))
    first = model.predict(state, action)
    assert torch.allclose(first[:, 0], 0.5 + 0.1 * drawn.float())
    second = model.predict(first, action)
    assert torch.allclose(second[:, 0], 0.5 + 0.2 * drawn.float())
    assert len(set(drawn.tolist())) == 3
    with pytest.raises(ValueError, match="start_rollout"):
        model.predict(state[:10], action[:10])
    with pytest.raises(ValueError, match="unknown sampling"):
        EnsembleWorldModel(_biased([0.0, 0.1]), sampling="median")


def test_disagreement_is_the_members_variance_averaged_over_dims():
    model = EnsembleWorldModel(_biased([0.0, 0.1, 0.2]))
    state, action = _mid_states(3)
    assert model.member_predictions(state, action).shape == (3, 3, 12)
    var = np.var([0.0, 0.1, 0.2])
    assert torch.allclose(model.uncertainty(state, action), torch.full((3,), var / 12))
    agree = EnsembleWorldModel(_biased([0.1, 0.1]))
    assert torch.equal(agree.uncertainty(state, action), torch.zeros(3))


def test_rollout_disagreement_and_error_of_a_drifting_ensemble():
    """Members drift by 0, 0.02 and 0.04 per step on agent_x: the mean drifts 0.02 per step;
    the spread is the same at every state, so disagreement is the variance of the drifts."""
    windows = eval_windows(8, horizon=4)
    windows.targets[:] = windows.start.unsqueeze(1)  # a world where nothing moves
    windows.start[:, 0] = 0.5
    windows.targets[:, :, 0] = 0.5
    model = EnsembleWorldModel(_biased([0.0, 0.02, 0.04]))
    disagreement, error = window_disagreement(model, windows)
    var = np.var([0.0, 0.02, 0.04]) / 12
    assert torch.allclose(disagreement, torch.full((8,), var))
    drift = 0.02 * torch.arange(1, 5)
    assert torch.allclose(error, torch.full((8,), float((drift**2).mean() / 12)), atol=1e-7)


@pytest.fixture(scope="module")
def small_ensemble(tmp_path_factory):
    """Three bootstrap members trained as one group and assembled: (members, ensemble path)."""
    tmp = tmp_path_factory.mktemp("ens")
    cfg = compose([*debug_overrides(tmp), "model.members=3", "trainer.max_epochs=3"])
    members = [
        Member(c, tmp / f"member{k}", resample_seed=r)
        for k, (c, r) in enumerate(member_configs(cfg))
    ]
    result = train_group(members, progress=False)
    paths = [a["best_checkpoint"] for _, a in result.runs]
    resolved = OmegaConf.to_container(cfg, resolve=True)
    return paths, assemble(paths, resolved, tmp / "ensemble" / "best.ckpt", {"bootstrap": True})


def test_an_assembled_checkpoint_stacks_the_members(small_ensemble):
    paths, path = small_ensemble
    ens = load_ensemble(path)
    assert ens.members == 3 and ens.sampling == "mean"
    meta = load_world_model(path).metadata
    assert meta["model"]["members"] == 3
    assert [m["checkpoint"] for m in meta["ensemble"]["members"]] == [str(p) for p in paths]
    assert meta["ensemble"]["bootstrap"] is True
    assert "bootstrap" not in meta["dataset"]
    state, action = _mid_states(5)
    stacked = ens.member_predictions(state, action)
    for k, p in enumerate(paths):
        torch.testing.assert_close(stacked[k], load_world_model(p).predict(state, action))


def test_an_ensemble_plans_with_either_mode(small_ensemble):
    _, path = small_ensemble
    for sampling in ("mean", "ts"):
        model = load_ensemble(path, sampling=sampling)
        results = run_episodes(model, depth=1, seeds=[0], episodes=3)
        assert results.success.shape == (3,)


def test_uncertainty_vs_error_reports_a_seeded_spearman_ci_and_aurc(small_ensemble):
    from scipy.stats import spearmanr

    _, path = small_ensemble
    model, windows = load_ensemble(path), eval_windows(32)
    quality = uncertainty_vs_error(model, windows, n_resamples=200, seed=3)
    disagreement, error = window_disagreement(model, windows)
    assert quality.n == 32 and quality.source == "predict_members"
    rho = quality.spearman
    assert rho.rho == pytest.approx(spearmanr(disagreement.numpy(), error.numpy()).statistic)
    assert rho.low <= rho.rho <= rho.high
    assert uncertainty_vs_error(model, windows, n_resamples=200, seed=3) == quality
    assert uncertainty_vs_error(model, windows, n_resamples=200, seed=4).spearman != rho
    assert quality.aurc_optimal <= quality.aurc + 1e-12
    assert quality.curve[-1] == pytest.approx((1.0, float(error.double().mean())))
    assert quality.aurc_random == pytest.approx(float(error.double().mean()))


def test_assembling_needs_two_members_of_one_architecture(small_ensemble, tmp_path):
    paths, _ = small_ensemble
    with pytest.raises(ValueError, match=">= 2 member"):
        assemble(paths[:1], {}, tmp_path / "x.ckpt")


def test_an_ensemble_run_writes_one_stacked_checkpoint_and_its_uncertainty(tmp_path):
    import json

    from gridplan.training.runs import train

    overrides = [o for o in debug_overrides(tmp_path) if not o.startswith("model.")]
    cfg = compose(
        [
            *overrides,
            "model=ensemble5",
            "model.hidden=[32,32]",
            "model.members=2",
            "model.sampling=ts",
        ]
    )
    metrics, artifacts = train(cfg)
    model = load_world_model(artifacts["best_checkpoint"])
    assert isinstance(model, EnsembleWorldModel)
    assert (model.members, model.sampling) == (2, "ts")
    summary = json.loads(open(artifacts["metrics"]).read())
    assert len(summary["members"]) == 2
    assert summary["uncertainty"]["n"] == 16
    assert summary["uncertainty"]["spearman"]["low"] <= metrics["uncertainty_spearman"]
    assert -1 <= metrics["uncertainty_spearman"] <= 1
    members = json.loads(artifacts["members"])
    assert [p.rsplit("/", 1)[1] for p in members] == ["member0", "member1"]
    seeds = [m["seed"] for m in model.metadata["ensemble"]["members"]]
    assert seeds == [member_seed(0, 0), member_seed(0, 1)]


def test_an_ensemble_trained_on_doorkey_loads_on_its_world(tmp_path):
    from gridplan.training.runs import train

    cfg = compose(
        ["model=ensemble5", "world=minigrid-doorkey-6x6", "model.members=2"]
        + debug_overrides(tmp_path)
    )
    _, artifacts = train(cfg)
    ens = load_ensemble(artifacts["best_checkpoint"])
    assert ens.world.name == "minigrid-doorkey-6x6" and ens.members == 2
    assert ens.member_predictions(torch.zeros(3, 9), torch.zeros(3, dtype=torch.long)).shape == (
        2,
        3,
        9,
    )
