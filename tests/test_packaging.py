"""gridplan as an installed package: ``configs/`` ships inside it as ``gridplan.conf`` and
Hydra reads it through the package; the slow test installs the wheel into a fresh virtual
environment and runs the command lines a researcher runs, from an empty folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from gridplan.training.config import (
    CONFIGS_ROOT,
    DEFAULT_CONFIG_DIR,
    compose,
    hydra_config_path,
)

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _package_folders() -> set[str]:
    """Every package of the tree (a folder with ``__init__.py``), named as installed."""
    names = set()
    for top, installed in (("gridplan", "gridplan"), ("gridplan_cli", "gridplan_cli"),
                           ("train", "train"), ("eval", "eval"), ("configs", "gridplan.conf")):
        for init in (ROOT / top).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / top).parts
            names.add(".".join((installed, *parts)))
    return names


def test_every_package_folder_of_the_tree_is_listed_in_pyproject():
    assert set(SETUPTOOLS["packages"]) == _package_folders()
    assert SETUPTOOLS["package-dir"] == {"gridplan.conf": "configs"}


def test_the_configs_come_from_the_installed_package():
    assert CONFIGS_ROOT == ROOT / "configs"  # this checkout's editable install
    assert hydra_config_path(DEFAULT_CONFIG_DIR) == "pkg://gridplan.conf.train"
    assert hydra_config_path(CONFIGS_ROOT / "zoo") == "pkg://gridplan.conf.zoo"


def test_a_folder_of_the_users_own_is_read_as_a_folder(tmp_path):
    assert hydra_config_path(tmp_path) == str(tmp_path.resolve())


def test_a_training_config_composes_through_the_package_from_any_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert compose(["data=4k"]).data.budget == "4k"


def test_a_source_tree_that_was_never_installed_says_how_to_install(tmp_path):
    """Only an install maps configs/ to gridplan.conf; PYTHONPATH alone names the fix."""
    probe = (
        "import sys, importlib.abc\n"
        "class NoConf(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'gridplan.conf':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoConf())\n"
        "import gridplan.training.config\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 1
    assert "gridplan.conf (gridplan's configs/) is not installed" in done.stderr
    assert "pip install -e ." in done.stderr


def _run(venv: Path, args: list[str], cwd: Path, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment outside the checkout with the wheel of this tree (and the
    pinned CPU torch) installed; returns its folder."""
    base = tmp_path_factory.mktemp("wheel")
    wheels, venv = base / "dist", base / "venv"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q",
                    "-w", str(wheels)], check=True, cwd=base, timeout=600)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    (wheel,) = wheels.glob("gridplan-*.whl")
    torch_pin = os.environ.get("GRIDPLAN_TORCH_PIN", "==2.13.0")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    f"torch{torch_pin}", str(wheel)], check=True, cwd=base, timeout=1800)
    return venv


@pytest.mark.slow
def test_the_wheel_trains_evaluates_and_runs_a_group_from_an_empty_folder(installed, tmp_path):
    """The README's first commands from a wheel install, in a folder holding no checkout."""
    work = tmp_path / "empty"
    work.mkdir()
    py = str(installed / "bin" / "python")
    out = _run(installed, ["gridplan-train", "data=4k", "trainer.max_epochs=2",
                           "out_dir=runs"], work)
    ckpt = re.findall(r"^checkpoint: (.+)$", out, re.M)[-1]
    assert Path(ckpt).is_file() and Path(ckpt).is_relative_to(work)
    out = _run(installed, ["gridplan-eval", "--ckpt", ckpt, "--seeds", "1", "--episodes",
                           "4"], work)
    assert "success" in out
    (work / "mine.py").write_text((ROOT / "scripts" / "example_model.py").read_text())
    out = _run(installed, ["gridplan-eval", "--model", "mine.py:make", "--levels", "success",
                           "--seeds", "1", "--episodes", "4"], work)
    assert "mine.py:make" in out
    (work / "myconf" / "variant").mkdir(parents=True)
    (work / "myconf" / "variant" / "mine.yaml").write_text("name: mine\nirrelevant_weight: 0.5\n")
    out = _run(installed, [py, "-m", "train", "--config-dir", "myconf", "variant=mine",
                           "data=4k", "trainer.max_epochs=1", "out_dir=runs"], work)
    assert (work / "runs" / "mine-balanced-4k-seed0" / "version_0" / "config.yaml").is_file()
    out = _run(installed, ["gridplan-train", "-m", "seed=1,2", "data=4k",
                           "trainer.max_epochs=1", "out_dir=sweep"], work)
    assert len(re.findall(r"^checkpoint: ", out, re.M)) == 2
    out = _run(installed, ["gridplan-data", "export", "--out", "data", "--budget", "4k"], work)
    assert (work / "data" / "A-balanced-4000-seed0.npz").is_file()
    out = _run(installed, ["gridplan-experiments", "--only", "e5", "--profile", "quick",
                           "--no-progress", "--out", "results"], work)
    assert "e5: ran" in out and "RuntimeWarning" not in out
    assert (work / "results" / "e5" / "done.json").is_file()


@pytest.mark.slow
def test_a_config_dir_that_does_not_exist_is_refused_and_nothing_is_written(installed, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(installed / "bin" / "gridplan-train"), "--config-dir", "nowhere",
                           "data=4k"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2
    assert "additional config folder" in done.stderr and "nowhere" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, extra",
    [
        (["python", "-c", "import gridplan.adapters.gymnasium"], "gymnasium"),
        (["python", "-c", "from gridplan.adapters import GridEnv"], "torchrl"),
        (["gridplan-train", "logger=mlflow", "data=4k"], "mlflow"),
    ],
    ids=["gymnasium", "torchrl", "mlflow"],
)
def test_a_missing_extra_of_the_wheel_names_its_install_command(installed, tmp_path, args, extra):
    """The wheel installed without extras: each optional feature names the exact command."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{installed / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0
    assert f'pip install "gridplan[{extra}]"' in done.stderr
    assert list(tmp_path.iterdir()) == []
