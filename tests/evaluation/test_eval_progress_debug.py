"""What a user sees while ``python -m eval`` runs and when their plug-in breaks: progress lines per
ladder level off a terminal, labelled loops, ``--debug`` tracebacks, the user's file:line in
errors, and the check that a model's randomness comes from its generator alone."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers_schema import validate_file

from eval.cli import main
from gridplan.core import tasks
from gridplan.models.plugins import PluginError, check_contract
from gridplan.util.progress import Progress

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--ladder-sizes",
    "tiny",
    "--depth",
    "2",
    "--seeds",
    "2",
    "--episodes",
    "3",
    "--eval-windows",
    "16",
    "--horizon",
    "4",
]
TITLES = {
    "L1": "L1 logged-future prediction",
    "L4": "L4 interventional fidelity",
    "L5": "L5 outcome fidelity",
    "L6": "L6 policy ranking",
    "L7": "L7 planning utility",
    "probe": "WorldModelGym probe",
}


def _plugin(tmp_path: Path, body: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_piped_card_prints_a_line_per_ladder_level(tmp_path, capsys):
    out = tmp_path / "oracle.json"
    assert main(["--model", "oracle", "--card", "--json", str(out), *TINY]) == 0
    err = capsys.readouterr().err.splitlines()
    levels = json.loads(out.read_text())["levels"]
    assert levels == ["L1", "L4", "L5", "L6", "L7", "probe"]
    for level in levels:
        assert f"{TITLES[level]}: started" in err, level
        assert any(line.startswith(f"{TITLES[level]}: done (") for line in err), level
    # The closed loops say which level runs them, how far they are and whose they are.
    loops = [line for line in err if "/ closed loop (" in line]
    assert any("closed loop (oracle planner): step" in line for line in loops)
    assert any(
        line.startswith("closed-loop success / closed loop (model): step ")
        and "/6 episodes done" in line
        for line in loops
    )
    # Off a terminal nothing redraws: no carriage returns.
    assert "\r" not in "\n".join(err)


@pytest.mark.slow
def test_piped_card_from_a_shell_shows_progress(tmp_path):
    out = tmp_path / "oracle.json"
    done = subprocess.run(
        [sys.executable, "-m", "eval", "--model", "oracle", "--card", "--json", str(out), *TINY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert validate_file(out) == "eval.schema.json"
    for title in TITLES.values():
        assert f"{title}: started" in done.stderr and f"{title}: done" in done.stderr


def test_piped_loops_report_steps_and_finished_episodes_and_end_with_a_line():
    sink = io.StringIO()
    progress = Progress(prefix="[1/2 m] ", file=sink, interval=0.0)
    with progress.stage("L7 planning utility"):
        loop = progress.loop("closed loop (model)", total=60, episodes=40)
        for finished in (0, 10, 40):
            loop.update(finished)
        loop.close()
    lines = sink.getvalue().splitlines()
    assert lines[0] == "[1/2 m] L7 planning utility: started"
    assert lines[1].startswith("[1/2 m] L7 planning utility / closed loop (model): step 1/60, 0/40")
    assert "step 3/60, 40/40 episodes done" in lines[-2]
    assert lines[-1].startswith("[1/2 m] L7 planning utility: done (")
    silent = io.StringIO()
    quiet = Progress(enabled=False, file=silent)
    with quiet.stage("L1"):
        assert quiet.loop("closed loop", 60, 4) is None
    assert silent.getvalue() == ""


RAISING = """
import torch


class Model:
    def predict(self, state, action, generator):
        scale = 0.0
        return state / int(1 / scale)


def make():
    return Model()
"""


def test_an_error_inside_predict_names_the_users_file_and_line(tmp_path, capsys):
    path = _plugin(tmp_path, RAISING)
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", f"{path}:make", "--levels", "L1", *TINY])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"raised ZeroDivisionError at {path}:8 in predict: return state / int(1 / scale)" in err
    assert "--debug shows the full traceback" in err


def test_debug_shows_the_full_traceback_through_the_users_code(tmp_path, capsys):
    path = _plugin(tmp_path, RAISING)
    with pytest.raises(PluginError) as info:
        main(["--model", f"{path}:make", "--levels", "L1", "--debug", *TINY])
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    cause = "".join(traceback.format_exception(info.value.__cause__))
    assert f'File "{path}", line 8, in predict' in cause
    assert "debug: full tracebacks" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("draw", "message"),
    [
        ("torch.randn(state.shape) * 0.01", "depends on a global random generator"),
        (
            "torch.from_numpy(np.random.normal(0, 0.01, tuple(state.shape))).float()",
            "depends on a global random generator",
        ),
        ("self.calls * 0.001", "gave different outputs for identically seeded generators"),
    ],
    ids=["torch-global", "numpy-global", "hidden-state"],
)
def test_randomness_from_anything_but_the_generator_is_flagged(tmp_path, draw, message):
    path = _plugin(
        tmp_path,
        f"""
        import numpy as np
        import torch


        class Model:
            calls = 0

            def predict(self, state, action, generator):
                self.calls += 1
                return (state + {draw}).clamp(0, 1)


        def make():
            return Model()
        """,
    )
    from eval.specs import plugin

    with pytest.raises(PluginError, match=message):
        plugin(f"{path}:make", {}, tasks.get("A"), "cpu")


def test_a_model_drawing_from_its_generator_passes_and_the_global_state_is_kept():
    class Seeded:
        def predict(self, state, action, generator):
            noise = torch.randn(state.shape, generator=generator) * 0.01
            return (state + noise).clamp(0, 1)

    torch.manual_seed(123)
    np.random.seed(7)
    before, np_before = torch.get_rng_state(), np.random.get_state()[1].copy()
    check_contract(Seeded(), tasks.get("A"), "cpu", "seeded")
    assert torch.equal(torch.get_rng_state(), before)
    assert np.array_equal(np.random.get_state()[1], np_before)
