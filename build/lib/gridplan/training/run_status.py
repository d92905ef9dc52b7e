"""What a run folder is: ``status.json`` with ``running``, ``complete``, ``failed`` or
``interrupted`` (``gridplan.training.runs`` writes it; ``python -m eval --ckpt`` reads it).

The file is replaced atomically (``gridplan.util.files``), so a reader never sees a torn one.
Under SLURM it also names the job (``job``), so a job that SLURM requeues after preemption or
a timeout finds the run it left ``interrupted`` and resumes it (``requeued_run``).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from gridplan.util.files import write_text_atomic

STATUS_FILE = "status.json"
STATUSES = ("running", "complete", "failed", "interrupted")


def write_status(run_dir: str | os.PathLike, status: str, **extra) -> Path:
    """Record ``status`` (one of ``STATUSES``) with the time, host and process id, plus any
    JSON-able ``extra`` (``error=...``); returns the file's path.

    Raises:
        ValueError: on an unknown status.
    """
    if status not in STATUSES:
        raise ValueError(f"unknown run status {status!r}; valid: {', '.join(STATUSES)}")
    record = {
        "status": status,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "job": scheduler_job(),
        **extra,
    }
    return write_text_atomic(Path(run_dir) / STATUS_FILE, json.dumps(record, indent=2) + "\n")


def read_status(run_dir: str | os.PathLike) -> dict | None:
    """The run's status record, or None if the folder has no ``status.json`` (a run made
    before runs recorded their status).

    Raises:
        ValueError: if the file is not a status record.
    """
    path = Path(run_dir) / STATUS_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(record, dict) or record.get("status") not in STATUSES:
        raise ValueError(f"{path} holds no run status ({', '.join(STATUSES)})")
    return record


def scheduler_job() -> str | None:
    """The SLURM job of this process (``<array job>_<task>`` for an array task), or None."""
    env = os.environ
    if "SLURM_ARRAY_JOB_ID" in env and "SLURM_ARRAY_TASK_ID" in env:
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID")


def requeued_run(parent: str | os.PathLike) -> Path | None:
    """The run under ``parent`` (``out_dir/<run name>``) that this SLURM job started before
    it was requeued and did not complete, if this is a requeued job (``SLURM_RESTART_COUNT``
    >= 1) and that run has a ``checkpoints/last.ckpt``; else None."""
    job = scheduler_job()
    if job is None or int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) < 1:
        return None
    for run_dir in sorted(Path(parent).glob("version_*"), reverse=True):
        try:
            record = read_status(run_dir)
        except ValueError:
            continue
        if (
            record is not None
            and record.get("job") == job
            and record["status"] != "complete"
            and (run_dir / "checkpoints" / "last.ckpt").is_file()
        ):
            return run_dir
    return None
