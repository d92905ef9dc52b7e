"""Vectorized training: a member of a group is the run trained alone (init, minibatch order,
weights, metrics, checkpoints), members stop on their own, and the group's record."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
from helpers_learned import assert_members_equal_runs_alone, debug_overrides
from omegaconf import OmegaConf
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

from gridplan.models.learned import MLPDynamics, load_world_model
from gridplan.training import vectorized
from gridplan.training.config import compose
from gridplan.training.engine import WorldModelModule
from gridplan.training.members import Member, epoch_order, group_key, member_init, prepare
from gridplan.training.module import lr_factor
from gridplan.training.runs import new_run_dir, train
from gridplan.training.vectorized import (
    GroupProgress,
    auto_workers,
    group_threads,
    run_flops,
    step_flops,
    train_group,
)


def _without(tmp, keys: tuple[str, ...], *extra: str) -> list[str]:
    """Debug overrides minus those of ``keys`` (set by ``extra`` instead)."""
    kept = [o for o in debug_overrides(tmp) if o.split("=", 1)[0] not in keys]
    return kept + list(extra)


def test_epoch_order_replays_the_global_draws_of_a_dataloader_epoch():
    """Three epochs of a shuffled DataLoader (and a validation pass after each) under the
    global generator visit rows in the order ``epoch_order`` gives from a copy of it."""
    n, batch = 50, 8
    torch.manual_seed(3)
    stream = torch.Generator()
    stream.set_state(torch.get_rng_state())
    rows = TensorDataset(torch.arange(n))
    sampler = BatchSampler(RandomSampler(rows), batch, drop_last=False)
    train = DataLoader(rows, sampler=sampler, batch_size=None)
    val = DataLoader(rows, batch_size=batch)
    for _ in range(3):
        seen = torch.cat([b[0] for b in train])
        for _ in val:
            pass
        assert torch.equal(seen, epoch_order(stream, n))


def test_member_init_matches_a_seeded_module_and_leaves_the_global_generator_alone(tmp_path):
    cfg = OmegaConf.to_container(compose([*debug_overrides(tmp_path), "seed=7"]), resolve=True)
    before = torch.get_rng_state()
    net, _ = member_init(cfg)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(7)
    module = WorldModelModule(cfg, {})
    for p, q in zip(net.parameters(), module.net.parameters(), strict=True):
        assert torch.equal(p, q)


def test_lr_factor_is_the_cosine_to_five_percent():
    assert lr_factor(0, 10) == pytest.approx(1.0)
    assert lr_factor(5, 10) == pytest.approx(0.525)
    assert lr_factor(10, 10) == pytest.approx(0.05)
    assert lr_factor(30, 10) == pytest.approx(0.05)


def _configs(tmp):
    """Three runs a sweep might hold: two seeds with different loss variants, and a third
    on half the data with a smaller batch (another epoch length, another cohort)."""
    return [
        compose([*debug_overrides(tmp), "seed=0", "trainer.limit_train_batches=null"]),
        compose(
            [
                *debug_overrides(tmp),
                "seed=1",
                "variant=event_weighted",
                "trainer.limit_train_batches=null",
            ]
        ),
        compose(
            _without(
                tmp,
                ("data.budget", "data.batch_size"),
                "seed=2",
                "data.budget=300",
                "data.batch_size=32",
                "model.lr=1e-3",
            )
        ),
    ]


@pytest.fixture(scope="module")
def alone_and_grouped(tmp_path_factory):
    """The runs of ``_configs`` trained one by one with ``train`` (stacks of one) and as one
    group, with every training batch's states of every member recorded on both sides."""
    tmp = tmp_path_factory.mktemp("vec")
    cfgs = _configs(tmp)
    seen: list[dict[int, list[torch.Tensor]]] = []
    original = WorldModelModule.training_step

    def record(self, batch, batch_idx):
        rows, weight = batch["rows"], batch["weight"]
        for j, i in enumerate(self.order[: rows.shape[0]]):
            real = rows[j][weight[j] > 0]
            seen[-1].setdefault(i, []).append(self.train_states[real].clone())
        return original(self, batch, batch_idx)

    alone = []
    stream = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WorldModelModule, "training_step", record)
        for cfg in cfgs:
            seen.append({})
            alone.append(train(cfg))
        seen.append({})
        members = [
            Member(c, new_run_dir(tmp / "grouped", f"m{i}")[0]) for i, c in enumerate(cfgs)
        ]
        result = train_group(members, name="sweep", record_dir=tmp / "record", stream=stream)
    seen_alone = [runs[0] for runs in seen[:-1]]
    return tmp, alone, result, seen_alone, seen[-1], stream.getvalue()


def test_a_member_sees_the_minibatches_of_its_run_alone(alone_and_grouped):
    _, _, _, seen_alone, per_member, _ = alone_and_grouped
    for i, batches in enumerate(seen_alone):
        assert len(per_member[i]) == len(batches) > 0
        for a, b in zip(batches, per_member[i], strict=True):
            assert torch.equal(a, b)


def test_a_member_ends_with_the_weights_and_metrics_of_its_run_alone(alone_and_grouped):
    _, alone, result, _, _, _ = alone_and_grouped
    assert_members_equal_runs_alone(
        alone, result.runs, ("best/E_tot", "best/DRPE_graded", "best/DRPE_binary", "best/VPE")
    )


def test_a_member_checkpoint_is_the_checkpoint_of_its_run_alone(alone_and_grouped):
    _, alone, result, _, _, _ = alone_and_grouped
    for (_, a_alone), (_, a_group) in zip(alone, result.runs, strict=True):
        ckpt_a = torch.load(a_alone["best_checkpoint"], weights_only=False)
        ckpt_g = torch.load(a_group["best_checkpoint"], weights_only=False)
        assert set(ckpt_a) - set(ckpt_g) == {"loops", "callbacks"}
        assert set(ckpt_g["state_dict"]) == set(ckpt_a["state_dict"])
        meta_a, meta_g = ckpt_a["gridplan"], ckpt_g["gridplan"]
        assert meta_g == meta_a
        for key in ("epoch", "global_step"):
            assert ckpt_g[key] == ckpt_a[key]
        opt_a, opt_g = ckpt_a["optimizer_states"][0], ckpt_g["optimizer_states"][0]
        assert opt_g["state"][0]["step"] == opt_a["state"][0]["step"]
        assert opt_g["param_groups"][0]["lr"] == pytest.approx(opt_a["param_groups"][0]["lr"])
        sched_a, sched_g = ckpt_a["lr_schedulers"][0], ckpt_g["lr_schedulers"][0]
        assert sched_g["last_epoch"] == sched_a["last_epoch"]
        summary_a = json.loads(open(a_alone["metrics"]).read())
        summary_g = json.loads(open(a_group["metrics"]).read())
        assert set(summary_g["metrics"]) == set(summary_a["metrics"])
        assert summary_g["dataset"] == summary_a["dataset"]
        saved = OmegaConf.load(a_group["config"])
        assert OmegaConf.to_container(saved) == meta_a["config"]


def test_the_group_record_and_progress_line(alone_and_grouped):
    tmp, _, result, _, _, progress = alone_and_grouped
    record = json.loads((tmp / "record" / "group.json").read_text())
    assert record == result.record
    assert [m["label"] for m in record["members"]] == [
        "uniform-balanced-600-seed0",
        "event_weighted-balanced-600-seed1",
        "uniform-balanced-300-seed2",
    ]
    assert record["cohorts"] >= 2
    assert record["member_epochs"] == sum(m["epochs"] for m in record["members"]) == 6
    lines = progress.strip().splitlines()
    assert lines[-1].startswith("group sweep: epoch 2/2, 0/3 training, best val/loss ")
    assert "\r" not in progress


def test_members_stop_on_their_own_and_leave_the_stack(tmp_path):
    """With patience 1, members stop at the epochs their runs alone stop at; the group's
    optimizer steps count only the members still training."""
    base = [*debug_overrides(tmp_path), "trainer.max_epochs=8", "trainer.patience=1"]
    base += ["model.lr=0.05", "trainer.figures_every_n_epochs=100"]
    cfgs = [compose([*base, f"seed={s}"]) for s in (0, 1, 2)]
    alone = [train(c)[0]["epochs"] for c in cfgs]
    members = [Member(c, new_run_dir(tmp_path / "g", f"m{i}")[0]) for i, c in enumerate(cfgs)]
    result = train_group(members, progress=False)
    grouped = [m["epochs"] for m, _ in result.runs]
    assert grouped == alone
    assert min(alone) < 8, "no member stopped early; the test needs one that does"
    steps = result.record["members"][0]["steps_per_epoch"]
    assert result.record["member_steps"] == sum(alone) * steps
    assert result.record["optimizer_steps"] == max(alone) * steps
    for m in result.record["members"]:
        assert ("patience 1" in m["stopped"]) or ("max_epochs" in m["stopped"])


def test_a_bootstrap_member_trains_on_a_resample_of_its_split(tmp_path):
    cfg = compose([*debug_overrides(tmp_path), "trainer.max_epochs=1"])
    members = [
        Member(cfg, new_run_dir(tmp_path / "g", f"m{i}")[0], resample_seed=s)
        for i, s in enumerate((11, 12))
    ]
    result = train_group(members, progress=False)
    boots = [
        load_world_model(a["best_checkpoint"]).metadata["dataset"]["bootstrap"]
        for _, a in result.runs
    ]
    n = boots[0]["rows"]
    assert [b["seed"] for b in boots] == [11, 12]
    # A resample of n rows with replacement holds about 1 - 1/e of them.
    for b in boots:
        assert 0.55 * n < b["distinct_rows"] < 0.72 * n
    assert boots[0]["distinct_rows"] != boots[1]["distinct_rows"]


def test_runs_of_different_architectures_cannot_share_a_group(tmp_path):
    a = compose(debug_overrides(tmp_path))
    b = compose(_without(tmp_path, ("model.hidden",), "model.hidden=[16,16]"))
    assert group_key(OmegaConf.to_container(a, resolve=True)) != group_key(
        OmegaConf.to_container(b, resolve=True)
    )
    members = [Member(c, tmp_path / f"m{i}") for i, c in enumerate((a, b))]
    with pytest.raises(ValueError, match="model.hidden differ"):
        train_group(members, progress=False)


def test_an_ensemble_config_is_not_a_group_member(tmp_path):
    cfg = compose([*debug_overrides(tmp_path), "model.members=3"])
    with pytest.raises(ValueError, match="model.members=3"):
        train_group([Member(cfg, tmp_path / "m")], progress=False)


def test_progress_prints_a_line_when_members_finish():
    out = io.StringIO()
    progress = GroupProgress("demo", 2, out, interval=1e9)

    class _Run:
        def __init__(self, score, label):
            self.best = type("S", (), {"score": score})()
            self.label = label
            self.trainer_cfg = {"monitor": "val/loss"}

    class _Module:
        def __init__(self, alive):
            self.order = list(range(alive))
            self.runs = {0: _Run(0.5, "a"), 1: _Run(0.25, "b")}

    trainer = type("T", (), {"current_epoch": 0, "max_epochs": 4})()
    progress.on_train_epoch_end(trainer, _Module(2))
    progress.on_train_epoch_end(trainer, _Module(2))
    trainer.current_epoch = 1
    progress.on_train_epoch_end(trainer, _Module(1))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("group demo: epoch 1/4, 2/2 training, best val/loss 0.25000 (b)")
    assert lines[1].startswith("group demo: epoch 2/4, 1/2 training")


def test_a_stacked_forward_equals_each_members_own():
    nets = [MLPDynamics([8, 8], 1) for _ in range(3)]
    stacked = MLPDynamics([8, 8], 3)
    with torch.no_grad():
        parts = zip(*(n.parameters() for n in nets), strict=True)
        for p, part in zip(stacked.parameters(), parts, strict=True):
            p.copy_(torch.cat(part))
    gen = torch.Generator().manual_seed(0)
    state = torch.rand(3, 5, 12, generator=gen)
    action = torch.randint(0, 4, (3, 5), generator=gen)
    out = stacked(state, action)
    for k, net in enumerate(nets):
        torch.testing.assert_close(out[k], net(state[k], action[k])[0])


def _weights(path) -> list[torch.Tensor]:
    return list(load_world_model(path).net.parameters())


def test_train_all_vectorized_in_two_workers_equals_one_after_another(tmp_path):
    """A sweep of four runs: as two groups in two worker processes, and with
    ``train.vectorize=false`` (each run by ``train``), the same checkpoints come out."""
    from gridplan.training.runs import train_all

    base = [*debug_overrides(tmp_path), "trainer.figures_every_n_epochs=0"]
    seeds = (0, 1, 2, 3)
    vec = train_all(
        [compose([*base, f"seed={s}", "train.workers=2"]) for s in seeds], progress=False
    )
    seq = train_all([compose([*base, f"seed={s}", "train.vectorize=false"]) for s in seeds])
    records = (tmp_path / "runs" / "groups" / "version_0").glob("*/group.json")
    groups = sorted(p.parent.name for p in records)
    assert groups == ["group1.1", "group1.2"]
    for (m_v, a_v), (m_s, a_s) in zip(vec, seq, strict=True):
        assert a_v["run_dir"] != a_s["run_dir"]
        assert m_v["epochs"] == m_s["epochs"]
        for p, q in zip(
            _weights(a_v["best_checkpoint"]), _weights(a_s["best_checkpoint"]), strict=True
        ):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_figures_every_zero_draws_no_images(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = compose([*debug_overrides(tmp_path), "trainer.figures_every_n_epochs=0"])
    result = train_group([Member(cfg, tmp_path / "m")], progress=False)
    events = EventAccumulator(result.runs[0][1]["tensorboard"], size_guidance={"images": 0})
    events.Reload()
    assert events.Tags()["images"] == []
    assert "val/loss" in events.Tags()["scalars"] and "best/E_tot" in events.Tags()["scalars"]


def test_groups_take_the_workers_that_pay_for_their_start_one_per_core_at_most(monkeypatch):
    monkeypatch.setattr(vectorized, "available_cpus", lambda: 4)
    cpu = compose(["trainer.accelerator=cpu"])
    work = vectorized.run_flops(cpu)  # 100 epochs of 20k transitions
    start = vectorized.WORKER_START_FLOP
    # w workers, not w - 1, where the work exceeds w (w - 1) starts; one per core at most.
    runs = (1, 2 * start / work + 1, 6 * start / work + 1, 12 * start / work + 1, 10**4)
    assert [auto_workers(cpu, int(r)) for r in runs] == [1, 2, 3, 4, 4]
    assert auto_workers(cpu, int(2 * start / work)) == 1
    cpu.train.workers = 2
    assert [auto_workers(cpu, runs) for runs in (1, 5)] == [1, 2]
    on_gpu = OmegaConf.merge(compose([]), {"trainer": {"accelerator": "gpu"}})
    assert auto_workers(on_gpu, 5) == 1  # one process drives the device
    # Ten runs of 5 epochs on 20k transitions are not worth a worker's start.
    small = compose(["trainer.accelerator=cpu", "trainer.max_epochs=5"])
    assert auto_workers(small, 10) == 1
    with pytest.raises(ValueError, match="train.workers must be >= 1 or null, got 0"):
        compose(["train.workers=0"])


def test_run_flops_count_the_steps_a_run_takes_at_most():
    cfg = compose(["data.budget=4k", "trainer.max_epochs=3", "data.batch_size=256"])
    per_step = step_flops(256, (16, 256, 256, 12))
    steps = math.ceil(4000 * (1 - cfg.data.val_fraction) / 256)
    assert run_flops(cfg) == 3 * steps * per_step
    capped = compose(["data.budget=4k", "trainer.max_epochs=3", "trainer.max_steps=5"])
    assert run_flops(capped) == 5 * per_step
    with pytest.raises(ValueError, match="train.workers must be >= 1 or null, got 0"):
        compose(["train.workers=0"])



def _same_snapshot(a, b) -> bool:
    """Whether two snapshots hold equal weights and AdamW state."""
    weights = all(torch.equal(w, v) for w, v in zip(a.weights, b.weights, strict=True))
    moments = all(
        m.keys() == n.keys() and all(torch.equal(m[k], n[k]) for k in m)
        for m, n in zip(a.moments, b.moments, strict=True)
    )
    return weights and moments


def test_a_cohort_sitting_out_a_step_and_a_dropped_member_leave_the_others_unchanged(tmp_path):
    """One stacked network holds two cohorts (batches of 32 rows: a longer epoch, ranked
    first; of 64 rows: two members). A step of the first cohort alone moves no weight, moment
    or step count of the second; dropping a member of the second moves the remaining
    members' rows and AdamW state, unchanged."""
    base = [*debug_overrides(tmp_path), "trainer.limit_train_batches=null"]
    cfgs = [compose([*base, "seed=0"]), compose([*base, "seed=1"])]
    cfgs.append(compose([*base, "seed=2", "data.batch_size=32"]))
    runs, buffers = prepare([Member(c, None) for c in cfgs])
    module = WorldModelModule(runs[0].config, runs[0].summary, runs, buffers)
    opt = module.configure_optimizers()["optimizer"]
    assert module.cohort_members == [[2], [0, 1]] and module.order == [2, 0, 1]
    assert module.net.layers[0].weight.shape[0] == 3

    def step(k: int) -> None:
        module.net.zero_grad(set_to_none=True)
        rows = torch.arange(3 * 8).view(3, 8)[:k]
        module.errors("train", rows, torch.ones(k, 8)).sum().backward()
        module._share_grads(k)
        opt.step()

    step(3)
    before = {i: module.snapshot(i, opt, 0.0) for i in (0, 1, 2)}
    step(1)
    assert not _same_snapshot(module.snapshot(2, opt, 0.0), before[2])
    assert module.snapshot(2, opt, 0.0).moments[0]["step"] == 2
    for i in (0, 1):
        assert _same_snapshot(module.snapshot(i, opt, 0.0), before[i])
    kept = {i: module.snapshot(i, opt, 0.0) for i in (1, 2)}
    module.drop([0], opt)
    assert module.order == [2, 1] and module.net.layers[0].weight.shape[0] == 2
    for i in (1, 2):
        assert _same_snapshot(module.snapshot(i, opt, 0.0), kept[i])


def test_a_group_takes_a_thread_per_share_of_its_stacked_step_up_to_its_cores():
    cfg = compose(["trainer.accelerator=cpu"])  # 256 rows through 16 -> 256 -> 256 -> 12
    per_member = 2 * 2 * 256 * (16 * 256 + 256 * 256 + 256 * 12) + 2 * 256 * (256 * 256 + 256 * 12)
    assert vectorized.config_step_flops(cfg) == per_member == 109_576_192
    # 150 MFLOP a thread: a run alone and a pair keep one, three members take two.
    assert [group_threads(cfg, k, 2) for k in (1, 2, 3, 10, 20)] == [1, 1, 2, 2, 2]
    assert group_threads(cfg, 10, 16) == 7  # 1.096 GFLOP / 150 MFLOP
    assert group_threads(cfg, 10, 1) == group_threads(cfg, 10, 0) == 1
