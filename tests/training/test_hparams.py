"""TensorBoard HParams of training runs (gridplan.training.hparams_summary): every run's
session holds its flattened config and config text, and ``python -m eval --ckpt`` adds the
evaluation's metrics, read back through TensorBoard's own hparams plugin backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_learned import debug_overrides, module_checkpoint, tiny_module
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gridplan.training.hparams_summary import (
    EVAL_METRICS,
    TRAIN_METRICS,
    end_session,
    eval_metrics,
    flat_config,
    has_session,
    log_eval_metrics,
    trial_name,
    write_session,
)

CONFIG = {
    "variant": {"name": "uniform", "relevant_weight": 1.0},
    "model": {"hidden": [32, 32], "bootstrap": True},
    "experiment": None,
    "seed": 3,
}
REPORT = {
    "success": {"mean": 0.45, "se": 0.05, "n": 200},
    "DRPE": {"binary": 0.012, "graded": 0.008},
    "E_tot": 0.02,
}


def session_groups(logdir: Path) -> dict[str, dict]:
    """``{session name: {"hparams": {...}, "metrics": {tag: value}, "status": int}}`` as
    TensorBoard's HParams dashboard lists them (its ListSessionGroups handler)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups

    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    ctx = backend_context.Context(
        base_plugin.TBContext(logdir=str(logdir), multiplexer=mux, data_provider=provider)
    )
    statuses = [api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_RUNNING]
    request = api_pb2.ListSessionGroupsRequest(
        start_index=0,
        slice_size=1000,
        aggregation_type=api_pb2.AGGREGATION_AVG,
        allowed_statuses=statuses,
    )
    response = list_session_groups.Handler(context.RequestContext(), ctx, "", request).run()
    out = {}
    for group in response.session_groups:
        hparams = {k: getattr(v, v.WhichOneof("kind")) for k, v in group.hparams.items()}
        metrics = {m.name.tag: m.value for m in group.metric_values}
        (session,) = group.sessions
        out[group.name] = {"hparams": hparams, "metrics": metrics, "status": session.status}
    return out


def test_flat_config_joins_keys_and_spells_lists_and_null():
    assert flat_config(CONFIG) == {
        "variant.name": "uniform",
        "variant.relevant_weight": 1.0,
        "model.hidden": "[32, 32]",
        "model.bootstrap": True,
        "experiment": "null",
        "seed": 3,
    }


def test_eval_metrics_reads_success_drpe_and_e_tot_of_a_report():
    assert eval_metrics(REPORT) == {
        "hp/eval_success": 0.45,
        "hp/eval_DRPE_graded": 0.008,
        "hp/eval_DRPE_binary": 0.012,
        "hp/eval_E_tot": 0.02,
    }
    assert eval_metrics({"success": {"mean": 0.5}}) == {"hp/eval_success": 0.5}
    with pytest.raises(ValueError, match="none of success.mean, DRPE.graded"):
        log_eval_metrics("unused", CONFIG, {"model": "x"}, "t")


def test_a_session_then_eval_metrics_show_in_the_hparams_dashboard(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run_dir = tmp_path / "runs" / "uniform-balanced-600-seed3" / "version_0"
    assert trial_name(run_dir) == "uniform-balanced-600-seed3/version_0"
    writer = SummaryWriter(log_dir=str(run_dir))
    write_session(writer, CONFIG, trial_name(run_dir))
    writer.add_scalar("hp/E_tot", 0.03, 7)
    end_session(writer)
    writer.close()
    assert has_session(run_dir)
    (group,) = session_groups(tmp_path / "runs").values()
    assert group["hparams"] == {**flat_config(CONFIG), "seed": 3.0}
    assert group["metrics"] == {"hp/E_tot": pytest.approx(0.03)}

    assert log_eval_metrics(run_dir, CONFIG, REPORT, trial_name(run_dir), 7) == eval_metrics(REPORT)
    groups = session_groups(tmp_path / "runs")
    assert list(groups) == ["uniform-balanced-600-seed3/version_0"]  # still one session
    metrics = groups["uniform-balanced-600-seed3/version_0"]["metrics"]
    assert metrics == pytest.approx({"hp/E_tot": 0.03, **eval_metrics(REPORT)})
    # A second evaluation (--force) replaces the values: the last scalar counts.
    log_eval_metrics(run_dir, CONFIG, {**REPORT, "success": {"mean": 0.6}}, "unused", 7)
    assert session_groups(tmp_path / "runs")[trial_name(run_dir)]["metrics"][
        "hp/eval_success"
    ] == pytest.approx(0.6)


def test_eval_metrics_of_a_folder_without_session_start_one(tmp_path):
    """A run folder holding no HParams session (trained before runs wrote one) gets one
    from the checkpoint's config, so its evaluation still shows in HParams."""
    run_dir = tmp_path / "old" / "version_0"
    run_dir.mkdir(parents=True)
    assert not has_session(run_dir)
    log_eval_metrics(run_dir, CONFIG, REPORT, trial_name(run_dir))
    groups = session_groups(tmp_path)
    assert groups["old/version_0"]["hparams"]["variant.name"] == "uniform"
    assert groups["old/version_0"]["metrics"]["hp/eval_success"] == pytest.approx(0.45)


def test_every_session_lists_the_same_metric_columns(tmp_path):
    """TensorBoard takes the first experiment it finds among the runs: each one names all
    training and evaluation metrics."""
    from tensorboard.plugins.hparams import metadata
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    write_session(writer, CONFIG, "a/version_0")
    writer.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    events.Reload()
    content = events.SummaryMetadata(metadata.EXPERIMENT_TAG).plugin_data.content
    experiment = metadata.parse_experiment_plugin_data(content)
    assert [m.name.tag for m in experiment.metric_infos] == [*TRAIN_METRICS, *EVAL_METRICS]
    assert sorted(h.name for h in experiment.hparam_infos) == sorted(flat_config(CONFIG))


def _config_text(run_dir: Path) -> str:
    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    return events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()


@pytest.mark.slow
def test_a_vectorized_sweep_of_four_runs_has_hparams_and_eval_adds_its_metrics(tmp_path, capsys):
    """``python -m train -m seed=0,1,2,3`` (vectorized groups): each of the 4 runs has its
    HParams session (its flattened config) and config text; after ``python -m eval --ckpt``
    of each best checkpoint, its HParams carry the evaluation's success and DRPE."""
    from eval.cli import main as eval_main
    from train.__main__ import main

    overrides = [*debug_overrides(tmp_path), "trainer.figures_every_n_epochs=0"]
    assert main(["-m", *overrides, "seed=0,1,2,3"]) == 0
    assert "training runs 0, 1, 2, 3 as vectorized groups" in capsys.readouterr().out
    runs = tmp_path / "runs"
    run_dirs = sorted(runs.glob("uniform-balanced-600-seed*/version_0"))
    assert len(run_dirs) == 4
    groups = session_groups(runs)
    assert sorted(groups) == [trial_name(d) for d in run_dirs]
    for seed, run_dir in enumerate(run_dirs):
        group = groups[trial_name(run_dir)]
        assert group["hparams"]["seed"] == seed
        assert group["hparams"]["model.hidden"] == "[32, 32]"
        assert group["hparams"]["variant.name"] == "uniform"
        assert set(group["metrics"]) == set(TRAIN_METRICS)
        assert "    seed: " + str(seed) in _config_text(run_dir)

    for run_dir in run_dirs:
        assert (
            eval_main(["--ckpt", str(run_dir / "checkpoints" / "best.ckpt"), "--no-progress"]) == 0
        )
    assert capsys.readouterr().out.count("hparams: ") == 4
    groups = session_groups(runs)
    assert len(groups) == 4
    for run_dir in run_dirs:
        report = json.loads((run_dir / "checkpoints" / "best.eval.json").read_text())
        metrics = groups[trial_name(run_dir)]["metrics"]
        assert metrics["hp/eval_success"] == pytest.approx(report["success"]["mean"])
        assert metrics["hp/eval_DRPE_graded"] == pytest.approx(report["DRPE"]["graded"])
        assert metrics["hp/eval_DRPE_binary"] == pytest.approx(report["DRPE"]["binary"])
        assert metrics["hp/eval_E_tot"] == pytest.approx(report["E_tot"])
        assert set(TRAIN_METRICS) <= set(metrics)


def test_a_smoke_evaluation_leaves_the_hparams_alone(tmp_path, capsys):
    """An evaluation under another protocol (1 seed x 2 episodes) writes its own JSON but
    does not stand in for the protocol's evaluation in the run's HParams."""
    from eval.cli import main as eval_main

    run_dir = tmp_path / "r" / "version_0"
    (run_dir / "checkpoints").mkdir(parents=True)
    ckpt = module_checkpoint(tiny_module(tmp_path), run_dir / "checkpoints" / "best.ckpt")
    smoke = ["--seeds", "1", "--episodes", "2", "--eval-windows", "4", "--no-progress"]
    assert eval_main(["--ckpt", str(ckpt), *smoke]) == 0
    assert "hparams: unchanged" in capsys.readouterr().out
    assert not has_session(run_dir)
    assert "eval/success" in {t for t in _scalar_tags(run_dir)}
    assert not any(t.startswith("hp/") for t in _scalar_tags(run_dir))


def _scalar_tags(run_dir: Path) -> list[str]:
    events = EventAccumulator(str(run_dir))
    events.Reload()
    return events.Tags()["scalars"]
