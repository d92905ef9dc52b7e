"""Loss variants, data module, dashboards and a tiny end-to-end training run."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from helpers_learned import probe_batch, tiny_config, tiny_stack
from omegaconf import OmegaConf
from paper_layout import DIM_NAMES
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gridplan.core.constants import STATE_LAYOUT_VERSION
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.data.datasets import EvalWindows, collect, eval_windows
from gridplan.metrics.prediction import prediction_metrics
from gridplan.models.learned import load_world_model
from gridplan.planning.closed_loop import run_episodes
from gridplan.training import module as training
from gridplan.training.module import (
    TransitionDataModule,
    cache_path,
    cached_dataset,
    dimension_weights,
    held_out_windows,
    relevance_order,
    sample_weights,
    weighted_mse,
)
from gridplan.training.runs import new_run_dir, train


@pytest.mark.parametrize(
    "variant, expected",
    [
        ("uniform", [1.0] * 12),
        ("anti_weighted", [0.1] * 6 + [1.0] * 6),
        ("rel_heavy", [10.0] * 6 + [1.0] * 6),
        ("rel_only", [1.0] * 6 + [0.0] * 6),
    ],
)
def test_variant_files_give_the_documented_dimension_weights(tmp_path, variant, expected):
    cfg = tiny_config(tmp_path, f"variant={variant}")
    assert dimension_weights(cfg.variant, TASK_A).tolist() == pytest.approx(expected)


def test_task_b_counts_c1_as_relevant():
    w = dimension_weights({"relevant_weight": 2.0, "irrelevant_weight": 0.5}, TASK_B)
    assert w.tolist() == [2.0] * 7 + [0.5] * 5


def test_event_transitions_get_the_event_weight():
    pickup = torch.tensor([True, False, False, False])
    door = torch.tensor([False, True, False, True])
    assert sample_weights(pickup, door, 10.0).tolist() == [10.0, 10.0, 1.0, 10.0]


def test_weighted_mse_matches_a_hand_computed_value():
    target = torch.zeros(2, 12)
    pred = torch.zeros(1, 2, 12)
    pred[0, 0, 0] = 0.1  # row 0, agent_x off by 0.1
    pred[0, 1, 7] = 0.2  # row 1, c2 off by 0.2
    dim_w = torch.tensor([3.0] * 6 + [0.5] * 6)
    sample_w = torch.tensor([2.0, 1.0])
    # (2 * 3 * 0.01 + 1 * 0.5 * 0.04) / (2 rows * 12 dims)
    expected = (0.06 + 0.02) / 24
    assert float(weighted_mse(pred, target, dim_w, sample_w)) == pytest.approx(expected)


def test_weighted_mse_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="pred must be"):
        weighted_mse(torch.zeros(1, 3, 12), torch.zeros(2, 12), torch.ones(12), torch.ones(2))


def _errors(tmp_path, variant: str, event: bool, n: int = 16) -> torch.Tensor:
    """The loss sum of a stack of one on ``n`` probe rows, all events or none."""
    state, action = probe_batch(n)
    module = tiny_stack(
        tmp_path,
        f"variant={variant}",
        states=state,
        actions=action,
        next_states=probe_batch(n, seed=1)[0],
        event=torch.full((n,), event),
    )
    return module.errors("train", torch.arange(n).unsqueeze(0), torch.ones(1, n)), module


def test_event_weights_reach_the_module_loss(tmp_path):
    plain, _ = _errors(tmp_path, "event_weighted", event=False)
    events, _ = _errors(tmp_path, "event_weighted", event=True)
    assert float(events) == pytest.approx(10.0 * float(plain), rel=1e-6)


def test_the_module_loss_is_the_weighted_mse(tmp_path):
    n = 16
    errors, module = _errors(tmp_path, "rel_heavy", event=False, n=n)
    pred = module.net(module.train_states, module.train_actions)
    weights = dimension_weights(tiny_config(tmp_path, "variant=rel_heavy").variant, TASK_A)
    mse = weighted_mse(pred, module.train_next_states, weights, torch.ones(n))
    assert float(errors) / (n * 12) == pytest.approx(float(mse), rel=1e-6)


def test_uniform_variant_ignores_event_flags(tmp_path):
    events, _ = _errors(tmp_path, "uniform", event=True)
    plain, _ = _errors(tmp_path, "uniform", event=False)
    assert torch.equal(events, plain)


def test_rel_only_leaves_irrelevant_outputs_untrained(tmp_path):
    errors, module = _errors(tmp_path, "rel_only", event=False)
    errors.sum().backward()
    last = module.net.layers[-1]
    assert last.weight.grad[..., 6:].abs().max() == 0
    assert last.weight.grad[..., :6].abs().max() > 0


def test_cached_dataset_is_collected_once_and_then_read_back(tmp_path):
    first = cached_dataset("balanced", 300, 4, TASK_A, tmp_path)
    path = cache_path(tmp_path, "balanced", 300, 4, TASK_A)
    stamp = path.stat().st_mtime_ns
    second = cached_dataset("balanced", 300, 4, TASK_A, tmp_path)
    assert path.stat().st_mtime_ns == stamp
    assert second.fingerprint() == first.fingerprint() == collect("balanced", 300, 4).fingerprint()


def test_a_corrupt_cache_file_is_collected_again(tmp_path):
    path = cache_path(tmp_path, "random", 200, 1, TASK_A)
    path.write_text("garbage")
    data = cached_dataset("random", 200, 1, TASK_A, tmp_path)
    assert data.fingerprint() == collect("random", 200, 1).fingerprint()


def _same_windows(a, b) -> bool:
    fields = ("start", "actions", "targets", "pickup", "door_opened", "prev")
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields) and a.meta == b.meta


def test_held_out_windows_are_kept_on_disk_and_read_back_by_a_new_process(tmp_path, monkeypatch):
    monkeypatch.setattr(training, "_WINDOWS", {})
    made = held_out_windows(12, 3, 77, "balanced", TASK_A, tmp_path)
    (path,) = tmp_path.glob("*.pt")
    assert path.name == "A-windows-balanced-12x3-seed77.pt"
    assert _same_windows(made, eval_windows(12, horizon=3, seed=77, policy="balanced"))
    monkeypatch.setattr(training, "_WINDOWS", {})  # as a fresh process sees it
    stamp = path.stat().st_mtime_ns
    read = held_out_windows(12, 3, 77, "balanced", TASK_A, tmp_path)
    assert read is not made and _same_windows(read, made)
    assert path.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("damage", ["garbage", "other settings", "other layout"])
def test_an_unusable_windows_file_is_reported_and_made_again(tmp_path, monkeypatch, caplog, damage):
    monkeypatch.setattr(training, "_WINDOWS", {})
    want = eval_windows(12, horizon=3, seed=77, policy="balanced")
    path = tmp_path / "A-windows-balanced-12x3-seed77.pt"
    if damage == "garbage":
        path.write_text("garbage")
    else:
        meta = {"seed": 5} if damage == "other settings" else {"layout_version": -1}
        dataclasses.replace(want, meta={**want.meta, **meta}).save(path)
    with caplog.at_level("WARNING", logger="gridplan.training.module"):
        got = held_out_windows(12, 3, 77, "balanced", TASK_A, tmp_path)
    reported = "do not match" if damage == "other settings" else "are unusable"
    assert f"cached windows {path} {reported}" in caplog.text
    assert _same_windows(got, want)
    assert _same_windows(EvalWindows.load(path), want)  # the file was made again


def test_data_module_splits_by_episode_and_builds_windows(tmp_path):
    cfg = OmegaConf.to_container(tiny_config(tmp_path), resolve=True)
    dm = TransitionDataModule(cfg["data"])
    dm.setup()
    train_eps = set(dm.train_set.episode.tolist())
    val_eps = set(dm.val_set.episode.tolist())
    assert not train_eps & val_eps
    assert len(dm.train_set) + len(dm.val_set) == 600
    assert len(dm.windows) == 16
    batch = next(iter(dm.train_dataloader()))
    assert [t.shape[0] for t in batch] == [64] * 5


def test_relevance_order_puts_the_six_relevant_dims_first():
    assert sorted(relevance_order(TASK_A)[:6]) == list(range(6))
    assert relevance_order(TASK_A)[6:] == list(range(6, 12))


def test_new_run_dirs_never_reuse_a_version(tmp_path):
    first, v0 = new_run_dir(tmp_path, "run")
    (first / "keep.txt").write_text("x")
    second, v1 = new_run_dir(tmp_path, "run")
    assert (v0, v1) == (0, 1)
    assert (first / "keep.txt").read_text() == "x"
    assert second.name == "version_1"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One debug training run shared by the tests below: (cfg, metrics, artifacts)."""
    tmp = tmp_path_factory.mktemp("tiny")
    cfg = tiny_config(tmp, "variant=event_weighted")
    metrics, artifacts = train(cfg)
    return cfg, metrics, artifacts


def test_training_writes_best_and_last_checkpoints_config_and_metrics(tiny_run):
    cfg, metrics, artifacts = tiny_run
    for key in ("best_checkpoint", "last_checkpoint", "config", "metrics"):
        assert artifacts[key] and open(artifacts[key], "rb").read(1)
    saved = OmegaConf.load(artifacts["config"])
    assert saved.variant.name == "event_weighted" and saved.data.seed == cfg.seed
    summary = json.loads(open(artifacts["metrics"]).read())
    assert summary["metrics"]["best/E_tot"] == pytest.approx(metrics["best/E_tot"])
    assert metrics["epochs"] == 2


def test_checkpoint_describes_config_layout_and_data(tiny_run):
    cfg, _, artifacts = tiny_run
    model = load_world_model(artifacts["best_checkpoint"])
    meta = model.metadata
    assert meta["state_layout_version"] == STATE_LAYOUT_VERSION
    assert meta["config"] == OmegaConf.to_container(cfg, resolve=True)
    data = collect("balanced", 600, cfg.seed)
    assert meta["dataset"]["fingerprint"] == data.fingerprint()
    assert meta["dataset"]["event_counts"] == data.event_counts()


def test_trained_checkpoint_is_scored_by_the_metrics_and_the_closed_loop(tiny_run):
    from gridplan.data.datasets import eval_windows

    model = load_world_model(tiny_run[2]["best_checkpoint"])
    metrics = prediction_metrics(model, eval_windows(8))[0]
    assert 0 < metrics.E_tot < 1
    results = run_episodes(model, depth=1, seeds=[0], episodes=2)
    assert results.success.shape == (2,)


def test_tensorboard_has_the_dashboard_scalars_and_images(tiny_run):
    events = EventAccumulator(tiny_run[2]["tensorboard"], size_guidance={"images": 0})
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    expected = {"val/loss", "val/E_tot", "val/DRPE_binary", "val/DRPE_graded"}
    expected |= {f"val/err_dim/{name}" for name in DIM_NAMES}
    expected |= {"val/event/carrying_at_pickup", "val/event/door_mse", "best/E_tot"}
    assert expected <= scalars
    assert len(events.Scalars("val/err_dim/agent_x")) == 2  # one point per epoch
    images = set(events.Tags()["images"])
    assert {"val/profile", "val/step_profile", "best/profile", "best/step_profile"} <= images


@pytest.mark.slow
def test_balanced_data_plans_well_and_random_data_misses_the_pickup(tmp_path):
    """Paper §5.4 (i) with the default recipe: 20k balanced transitions give a model that
    learns the pickup and plans at depth 2; 12k uniform-random ones never learn it."""
    from gridplan.data.datasets import eval_windows
    from gridplan.training.config import compose

    base = [f"out_dir={tmp_path / 'runs'}", f"data.cache_dir={tmp_path / 'cache'}"]
    base.append("trainer.progress_bar=false")
    windows = eval_windows(256)
    scores = {}
    for label, extra in (("balanced", []), ("random", ["data=12k", "data.policy=random"])):
        model = load_world_model(train(compose([*base, *extra]))[1]["best_checkpoint"])
        audit = prediction_metrics(model, windows)[0].event_audit
        success = run_episodes(model, depth=2, seeds=range(5), episodes=40).success.float().mean()
        scores[label] = (audit["carrying_at_pickup"], float(success))
    assert scores["balanced"][0] > 0.5 and scores["balanced"][1] >= 0.5
    assert scores["random"][0] < 0.5
    assert scores["random"][1] < scores["balanced"][1] - 0.25
