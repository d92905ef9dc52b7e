"""``gridplan-train``, ``gridplan-eval``, ``gridplan-data``, ``gridplan-experiments`` and
``gridplan-board`` run gridplan's own command lines, even from a folder whose ``train.py`` /
``eval.py`` shadows ``python -m train`` / ``-m eval``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gridplan_cli

ROOT = Path(__file__).resolve().parents[1]


def _scripts() -> dict[str, str]:
    import tomllib  # Python 3.11+, as tests/test_layout.py

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


DECOY = "import sys\nprint('DECOY {name}.py ran')\nsys.exit(7)\n"


@pytest.fixture
def decoy_folder(tmp_path, monkeypatch):
    """A working folder with a train.py and an eval.py of its own, first on ``sys.path`` (as
    ``python -c`` and ``python -m`` put the working folder), and no train/eval imported."""
    for name in ("train", "eval"):
        (tmp_path / f"{name}.py").write_text(DECOY.format(name=name))
        for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
            monkeypatch.delitem(sys.modules, key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_pyproject_declares_the_five_console_scripts():
    assert _scripts() == {
        "gridplan-train": "gridplan_cli:train_main",
        "gridplan-eval": "gridplan_cli:eval_main",
        "gridplan-data": "gridplan.data.__main__:main",
        "gridplan-experiments": "gridplan.experiments.__main__:main",
        "gridplan-board": "gridplan.board.__main__:main",
    }


def test_the_decoy_would_shadow_a_plain_import(decoy_folder):
    import importlib.util

    assert Path(importlib.util.find_spec("train").origin) == decoy_folder / "train.py"


def test_train_main_runs_ours_from_a_folder_with_a_decoy(decoy_folder, capsys):
    assert gridplan_cli.train_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "DECOY" not in out and "train learned world models" in out
    assert Path(sys.modules["train"].__file__) == ROOT / "train" / "__init__.py"


def test_eval_main_runs_ours_from_a_folder_with_a_decoy(decoy_folder, capsys):
    with pytest.raises(SystemExit) as exit_:  # argparse's --help exits 0
        gridplan_cli.eval_main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "DECOY" not in out and "--ckpt" in out
    assert Path(sys.modules["eval"].__file__) == ROOT / "eval" / "__init__.py"


def test_an_imported_decoy_is_replaced_by_gridplans_package(decoy_folder, capsys):
    with pytest.raises(SystemExit):
        import train  # noqa: F401  (the decoy: prints and exits)
    assert "DECOY train.py ran" in capsys.readouterr().out
    sys.modules["train"] = type(sys)("train")
    sys.modules["train"].__file__ = str(decoy_folder / "train.py")
    assert gridplan_cli.own_package("train").__file__ == str(ROOT / "train" / "__init__.py")


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, expect",
    [
        ("gridplan-train", "train learned world models"),
        ("gridplan-eval", "--ckpt"),
        ("gridplan-data", "export"),
    ],
)
def test_each_entry_point_runs_from_a_temp_folder_with_decoys(tmp_path, script, expect):
    """What the installed script does (``from MOD import FUNC; sys.exit(FUNC())``), through
    ``python -c``, which puts the working folder first on ``sys.path``."""
    for name in ("train", "eval"):
        (tmp_path / f"{name}.py").write_text(DECOY.format(name=name))
    module, func = _scripts()[script].split(":")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; from {module} import {func}; sys.exit({func}())",
            "--help",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "DECOY" not in done.stdout and expect in done.stdout
