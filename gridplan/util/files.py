"""Files that several processes may write at once: unique temporary name, then atomic rename.

A reader sees either the old file or the whole new one, never a torn one, even when parallel
sweep jobs (``hydra/launcher=joblib``, SLURM arrays) write the same path: each writer has its
own temporary file in the target's folder (same file system, so ``os.replace`` is atomic)
and the last rename wins.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a fresh temporary path beside ``path``, then rename it onto
    ``path``; returns ``path``. Parent folders are created.

    Raises:
        whatever ``write`` raises; the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (``write_atomic``); returns ``path``."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
