"""TensorBoard HParams of a training run: its flattened config beside its training and
evaluation metrics (``docs/DESIGN.md``, "Dashboards and HParams").

Every run folder holds one HParams *session* (TensorBoard's hparams plugin,
``tensorboard.plugins.hparams.summary_v2``): the session start info with the run's
flattened config (``flat_config``: ``model.hidden``, ``variant.name``, ``seed``, ...) and the
*experiment* naming every hparam and every metric column, ``TRAIN_METRICS`` and
``EVAL_METRICS``. TensorBoard reads a metric's value as the last scalar of its tag in the
session's run folder: training writes ``hp/E_tot``, ``hp/DRPE_graded``, ``hp/DRPE_binary``
and ``hp/best_score`` when the run ends; ``python -m eval --ckpt`` writes ``hp/eval_success``,
``hp/eval_DRPE_graded``, ``hp/eval_DRPE_binary`` and ``hp/eval_E_tot`` of the checkpoint's
evaluation (``log_eval_metrics``).

TensorBoard keeps the first hparams summary of a run folder and the first experiment it
finds among all runs, so every run writes the same experiment (all metrics, training and
evaluation alike, listed from the start) and writes it once; ``log_eval_metrics`` adds a
session only to a folder that has none (a run trained before sessions were written).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tensorboard.plugins.hparams import summary_v2 as hp

#: HParams metrics of training: ``tag -> (key of the run's metrics, title, description)``.
TRAIN_METRICS = {
    "hp/E_tot": ("best/E_tot", "E_tot", "open-loop MSE of the best checkpoint, all 12 dims"),
    "hp/DRPE_graded": (
        "best/DRPE_graded",
        "DRPE graded",
        "open-loop error weighted by graded relevance (paper Eq. 1), best checkpoint",
    ),
    "hp/DRPE_binary": (
        "best/DRPE_binary",
        "DRPE binary",
        "open-loop error on the relevant dims, best checkpoint",
    ),
    "hp/best_score": ("best_score", "best monitor", "trainer.monitor of the best checkpoint"),
}
#: HParams metrics of ``python -m eval --ckpt`` (Task A, the learned protocol):
#: ``tag -> (path in the evaluation report, title, description)``.
EVAL_METRICS = {
    "hp/eval_success": (
        ("success", "mean"),
        "eval success",
        "closed-loop success of the planner on the model (python -m eval --ckpt)",
    ),
    "hp/eval_DRPE_graded": (("DRPE", "graded"), "eval DRPE graded", "python -m eval --ckpt"),
    "hp/eval_DRPE_binary": (("DRPE", "binary"), "eval DRPE binary", "python -m eval --ckpt"),
    "hp/eval_E_tot": (("E_tot",), "eval E_tot", "python -m eval --ckpt"),
}
#: Tag of the session start info in a run's events (the hparams plugin's).
SESSION_TAG = "_hparams_/session_start_info"


def flat_config(config: dict, prefix: str = "") -> dict[str, bool | int | float | str]:
    """A resolved config as HParams values: nested keys joined by dots
    (``{"model": {"hidden": [32, 32]}}`` -> ``{"model.hidden": "[32, 32]"}``); lists as
    their text, None as ``"null"``; bools, ints, floats and strings as they are."""
    out: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_config(value, f"{name}."))
        elif value is None:
            out[name] = "null"
        elif isinstance(value, bool | int | float | str):
            out[name] = value
        else:
            out[name] = str(value)
    return out


def trial_name(run_dir: str | Path) -> str:
    """A run's session name in HParams: ``<run name>/version_<N>`` of its folder."""
    run_dir = Path(run_dir)
    return f"{run_dir.parent.name}/{run_dir.name}"


def experiment_summary(names):
    """The hparams plugin's experiment: hparams ``names`` and every metric column."""
    metrics = [
        hp.Metric(tag, display_name=title, description=text)
        for table in (TRAIN_METRICS, EVAL_METRICS)
        for tag, (_, title, text) in table.items()
    ]
    return hp.hparams_config_pb(hparams=[hp.HParam(n) for n in sorted(names)], metrics=metrics)


def write_session(writer, config: dict, trial: str) -> None:
    """Write the HParams experiment and session start of one run through ``writer`` (a
    ``torch.utils.tensorboard.SummaryWriter`` of the run folder).

    Args:
        writer: the run folder's writer.
        config: the resolved run config (``flat_config`` of it is logged).
        trial: the session's trial id, e.g. ``<run name>/version_<N>``.
    """
    values = flat_config(config)
    # Summaries of another plugin go through the writer's file writer, as add_hparams does.
    file_writer = writer._get_file_writer()
    file_writer.add_summary(experiment_summary(values))
    file_writer.add_summary(hp.hparams_pb(values, trial_id=trial, start_time_secs=time.time()))


def end_session(writer) -> None:
    """Mark the run's HParams session finished (status ``STATUS_SUCCESS``) through a
    ``SummaryWriter`` of its folder; a run that stops early stays ``STATUS_UNKNOWN``."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    info = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time())
    summary = summary_pb2.Summary()
    summary.value.add(
        tag=metadata.SESSION_END_INFO_TAG,
        metadata=metadata.create_summary_metadata(
            plugin_data_pb2.HParamsPluginData(session_end_info=info)
        ),
        tensor=metadata.NULL_TENSOR,
    )
    writer._get_file_writer().add_summary(summary)


def has_session(log_dir: str | Path) -> bool:
    """Whether ``log_dir``'s own event files (not its subfolders') hold an HParams session."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            if any(v.tag == SESSION_TAG for v in event.summary.value):
                return True
    return False


def eval_metrics(report: dict) -> dict[str, float]:
    """The ``EVAL_METRICS`` values found in an evaluation report (``best.eval.json``'s
    form)."""
    out = {}
    for tag, (path, _, _) in EVAL_METRICS.items():
        value: Any = report
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            out[tag] = float(value)
    return out


def log_eval_metrics(
    log_dir: str | Path, config: dict, report: dict, trial: str, step: int = 0
) -> dict[str, float]:
    """Add a checkpoint's evaluation to its run's HParams: the ``EVAL_METRICS`` scalars of
    ``report`` in a new event file of ``log_dir``, after a session (``write_session`` of
    ``config``) when the folder has none.

    Args:
        log_dir: the run folder (a training run's events stay as they are).
        config: the run's resolved config (the checkpoint's ``metadata["config"]``).
        report: the evaluation report (``success``, ``DRPE``, ``E_tot``).
        trial: the session's trial id if one is written.
        step: the scalars' step (the checkpoint's global step).

    Returns:
        The metrics written, ``{tag: value}``.

    Raises:
        ValueError: if ``report`` holds none of the metrics.
    """
    from torch.utils.tensorboard import SummaryWriter

    values = eval_metrics(report)
    if not values:
        raise ValueError(
            "the evaluation report holds none of success.mean, DRPE.graded, DRPE.binary, "
            "E_tot; nothing to add to the run's HParams"
        )
    fresh = not has_session(log_dir)
    writer = SummaryWriter(log_dir=str(log_dir))
    try:
        if fresh:
            write_session(writer, config, trial)
        for tag, value in values.items():
            writer.add_scalar(tag, value, step)
    finally:
        writer.close()
    return values
