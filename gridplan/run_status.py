"""What a run folder is: ``status.json`` with ``running``, ``complete``, ``failed`` or
``interrupted`` (``gridplan.runs`` writes it; ``python -m eval --ckpt`` reads it).

The file is replaced atomically (``gridplan.files``), so a reader never sees a torn one.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from gridplan.files import write_text_atomic

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
