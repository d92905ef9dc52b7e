"""Every file gridplan writes gets the umask's mode (0644 under umask 022), as ``open`` gives."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch
from helpers_learned import debug_overrides

from gridplan.core.tasks import TASK_A
from gridplan.training.module import cached_dataset, held_out_windows
from gridplan.training.run_status import write_status
from gridplan.util.files import current_umask, write_atomic, write_text_atomic


@pytest.fixture
def umask():
    """Run the test under a chosen umask and give the old one back."""
    held = os.umask(0o022)
    os.umask(held)
    yield lambda mask: os.umask(mask)
    os.umask(held)


def _modes(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_current_umask_reads_the_process_umask(umask):
    umask(0o027)
    assert current_umask() == 0o027
    umask(0o022)
    assert current_umask() == 0o022


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_get_the_mode_of_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    write_text_atomic(tmp_path / "a" / "metrics.json", "{}\n")
    write_atomic(tmp_path / "b.pt", lambda tmp: torch.save({"x": 1}, tmp))
    write_status(tmp_path / "run", "running")
    assert _modes(tmp_path) == {"a/metrics.json": mode, "b.pt": mode, "run/status.json": mode}
    assert not list(tmp_path.rglob(".*.tmp"))


def test_the_data_cache_is_readable_by_the_group_and_others(tmp_path, umask):
    umask(0o022)
    cached_dataset("random", 300, 0, TASK_A, tmp_path)
    held_out_windows(8, 5, 1, "random", TASK_A, tmp_path)
    modes = _modes(tmp_path)
    assert len(modes) == 2 and set(modes.values()) == {0o644}, modes


@pytest.mark.slow
def test_every_file_of_a_train_run_is_0644_under_umask_022(tmp_path, umask):
    from train.__main__ import main

    umask(0o022)
    assert main(debug_overrides(tmp_path)) == 0
    (run,) = (tmp_path / "runs").glob("*/version_0")
    modes = _modes(run)
    for name in ("config.yaml", "metrics.json", "status.json", ".hydra/config.yaml",
                 ".hydra/overrides.yaml", ".hydra/hydra.yaml", "checkpoints/best.ckpt"):
        assert modes.pop(name) == 0o644, name
    assert modes and set(modes.values()) == {0o644}, modes  # TensorBoard's files as well
    assert set(_modes(tmp_path / "cache").values()) == {0o644}
