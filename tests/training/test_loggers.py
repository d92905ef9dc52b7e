"""The ``logger`` config group (gridplan.training.loggers): CSV and MLflow runs for real,
W&B's missing-package and one-run-per-process errors."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import yaml
from helpers_learned import debug_overrides, tiny_config

from gridplan.training import loggers, runs
from gridplan.training.config import compose
from train.__main__ import main


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _last(rows: list[dict[str, str]], column: str) -> float:
    return float([r[column] for r in rows if r.get(column)][-1])


def test_the_logger_group_lists_its_choices_and_checks_the_name(tmp_path):
    for name in ("tensorboard", "csv", "mlflow", "wandb"):
        assert tiny_config(tmp_path, f"logger={name}").logger.name == name
    assert tiny_config(tmp_path).logger.name == "tensorboard"
    with pytest.raises(ValueError, match="unknown logger.name 'neptune'"):
        tiny_config(tmp_path, "logger.name=neptune")


def test_a_csv_run_logs_metrics_hparams_and_figures_in_its_folder(tmp_path):
    metrics, artifacts = runs.train(tiny_config(tmp_path, "logger=csv"))
    run_dir = Path(artifacts["run_dir"])
    assert not list(run_dir.glob("events.out.tfevents.*"))
    rows = _rows(run_dir / "metrics.csv")
    assert _last(rows, "hp/E_tot") == pytest.approx(metrics["best/E_tot"])
    assert _last(rows, "best/DRPE_graded") == pytest.approx(metrics["best/DRPE_graded"])
    assert {"val/loss", "val/err_dim/agent_x", "train/loss_epoch"} <= set(rows[0])
    hparams = yaml.safe_load((run_dir / "hparams.yaml").read_text())
    assert (hparams["model.hidden"], hparams["seed"], hparams["logger.name"]) == (
        "[32, 32]",
        0,
        "csv",
    )
    figures = sorted(p.name for p in (run_dir / "figures").glob("*.png"))
    assert "best_profile_step6.png" in figures and "val_step_profile_step3.png" in figures


def test_a_vectorized_group_writes_each_members_csv_log(tmp_path):
    base = [*debug_overrides(tmp_path), "logger=csv", "trainer.figures_every_n_epochs=0"]
    results = runs.train_all(
        [compose([*base, f"seed={s}", "train.workers=1"]) for s in (0, 1)], progress=False
    )
    for seed, (metrics, artifacts) in enumerate(results):
        run_dir = Path(artifacts["run_dir"])
        assert _last(_rows(run_dir / "metrics.csv"), "hp/E_tot") == pytest.approx(
            metrics["best/E_tot"]
        )
        assert yaml.safe_load((run_dir / "hparams.yaml").read_text())["seed"] == seed
        assert not list(run_dir.glob("events.out.tfevents.*"))


def _mlflow_run(run_dir: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"file:{(run_dir / 'mlruns').resolve()}")
    experiment = client.get_experiment_by_name("gridplan")
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run


def test_an_mlflow_run_logs_to_a_local_file_store_in_its_folder(tmp_path):
    pytest.importorskip("mlflow")
    metrics, artifacts = runs.train(tiny_config(tmp_path, "logger=mlflow"))
    run_dir = Path(artifacts["run_dir"])
    client, run = _mlflow_run(run_dir)
    assert run.info.run_name == f"{run_dir.parent.name}/{run_dir.name}"
    assert run.data.params["model.hidden"] == "[32, 32]"
    assert run.data.params["logger.name"] == "mlflow"
    assert run.data.metrics["hp/E_tot"] == pytest.approx(metrics["best/E_tot"])
    assert run.data.metrics["best/DRPE_graded"] == pytest.approx(metrics["best/DRPE_graded"])
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "figures"} <= names
    figures = {a.path for a in client.list_artifacts(run.info.run_id, "figures")}
    assert "figures/best_profile_step6.png" in figures
    text = Path(client.download_artifacts(run.info.run_id, "config.yaml", str(tmp_path)))
    assert "hidden:\n  - 32\n  - 32" in text.read_text()


def test_a_vectorized_group_of_mlflow_runs_gives_each_run_its_store(tmp_path):
    pytest.importorskip("mlflow")
    base = [*debug_overrides(tmp_path), "logger=mlflow", "trainer.figures_every_n_epochs=0"]
    results = runs.train_all(
        [compose([*base, f"seed={s}", "train.workers=1"]) for s in (0, 1)], progress=False
    )
    for seed, (metrics, artifacts) in enumerate(results):
        _, run = _mlflow_run(Path(artifacts["run_dir"]))
        assert run.data.params["seed"] == str(seed)
        assert run.data.metrics["hp/E_tot"] == pytest.approx(metrics["best/E_tot"])


def test_a_logger_that_is_not_installed_names_its_install_command(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if W&B were not installed
    with pytest.raises(ImportError, match=r'pip install "gridplan\[wandb\]"'):
        runs.train(tiny_config(tmp_path, "logger=wandb"))
    assert main([*debug_overrides(tmp_path), "logger=wandb"]) == 2
    err = capsys.readouterr().err
    assert (
        "error: logger=wandb needs the 'wandb' package, which is not installed: "
        'pip install "gridplan[wandb]"' in err
    )
    assert not (tmp_path / "runs").exists()


def test_a_vectorized_group_refuses_a_one_run_per_process_logger(tmp_path, monkeypatch):
    monkeypatch.setattr(loggers, "require", lambda extra, feature: None)
    cfgs = [tiny_config(tmp_path, "logger=wandb", f"seed={s}") for s in (0, 1)]
    with pytest.raises(
        ValueError, match="logger=wandb holds one run per process.*train.vectorize=false"
    ):
        runs.train_all(cfgs, progress=False)
    assert not (tmp_path / "runs").exists()
    # Alone, one after another, each run has the process to itself.
    loggers.check_group_loggers([{"logger": {"name": "wandb"}}])
    assert (
        runs._vectorized_runs([tiny_config(tmp_path, "logger=wandb", "train.vectorize=false")])
        == []
    )


@pytest.mark.slow
def test_wandb_runs_one_after_another_are_offline_runs_of_their_own(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    folders = []
    for seed in (0, 1):
        _, artifacts = runs.train(tiny_config(tmp_path, "logger=wandb", f"seed={seed}"))
        (offline,) = Path(artifacts["run_dir"]).glob("wandb/offline-run-*")
        assert list(offline.glob("run-*.wandb"))
        assert list(offline.glob("files/media/images/best/profile_*.png"))
        folders.append(offline.name.rsplit("-", 1)[1])
    assert folders[0] != folders[1]  # the second run did not join the first
