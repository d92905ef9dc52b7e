"""Files that several processes may write at once: unique temporary name, then atomic rename.

A reader sees either the old file or the whole new one, never a torn one, even when parallel
sweep jobs (``hydra/launcher=joblib``, SLURM arrays) write the same path: each writer has its
own temporary file in the target's folder (same file system, so ``os.replace`` is atomic)
and the last rename wins.

``tempfile.mkstemp`` creates its file with mode ``0600`` whatever the umask; the renamed file
gets the mode a plain ``open(path, "w")`` would give (``0666`` less the umask, ``0644`` under
umask ``022``), so collaborators on shared storage read results as they read any other file.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask (e.g. ``0o022``), read without changing it where Linux exposes it
    (``/proc/self/status``); elsewhere set and restored at once under a lock."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary path beside ``path``, then rename it onto
    ``path``; returns ``path``. Parent folders are created; the file gets ``new_file_mode()``.

    Raises:
        Exception: whatever ``write`` raises; the temporary file is removed and ``path`` is
            untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (``write_atomic``); returns ``path``."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
