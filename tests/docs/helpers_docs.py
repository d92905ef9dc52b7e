"""Shared helper of the documentation tests: building the site with ``mkdocs build --strict``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_site(site_dir: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the repository's site into ``site_dir``; the finished
    process (``returncode``, and ``stdout`` and ``stderr`` as text)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
