"""``gridplan-eval --suite NAME --models ... --board DIR``: one row per (model, track), computed
once per (model fingerprint, track hash), through a Hydra launcher."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gridplan.evaluation.spec as spec_module
from eval.cli import main
from eval.suite import fingerprint
from gridplan.board.store import Board
from gridplan.evaluation.spec import load_track

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["oracle", "noise,sigma_r=0.35,sigma_i=0.1"]


@pytest.fixture
def small_tracks(tmp_path, monkeypatch):
    """The shipped spec tree, copied with the quick tracks made smaller (1 seed x 2 episodes,
    32 windows) so a suite runs in seconds; ``SPEC_ROOT`` points at the copy."""
    root = tmp_path / "eval_specs"
    shutil.copytree(spec_module.SPEC_ROOT, root)
    for track in ("quick-a", "quick-b"):
        path = root / "tracks" / f"{track}.yaml"
        path.write_text(path.read_text().replace("episodes: 8", "episodes: 2")
                        .replace("n_windows: 128", "n_windows: 32") + "seeds: [0]\n")
    monkeypatch.setattr(spec_module, "SPEC_ROOT", root)
    return root


def _run(board: Path, *extra: str) -> int:
    return main(["--suite", "quick", "--models", *MODELS, "--board", str(board), "--no-progress",
                 "--threads", "1", *extra])


def test_fingerprints_name_what_is_evaluated(tmp_path):
    assert fingerprint("noise,sigma_r=0.35") == fingerprint("noise,sigma_r=0.35,sigma_i=0")
    assert fingerprint("noise,sigma_r=0.35") != fingerprint("noise,sigma_r=0.2")
    assert fingerprint("oracle") != fingerprint("oracle,reading=paper")
    plugin = tmp_path / "mine.py"
    plugin.write_text((ROOT / "scripts" / "example_model.py").read_text())
    before = fingerprint(f"{plugin}:make")
    assert before == fingerprint(f"{plugin}:make")
    assert before != fingerprint(f"{plugin}:make,slip=0.3")
    plugin.write_text(plugin.read_text() + "\n# edited\n")
    assert fingerprint(f"{plugin}:make") != before


def test_a_suite_writes_a_row_per_pair_once_and_recomputes_an_edited_track(
    small_tracks, tmp_path, capsys
):
    board = tmp_path / "board"
    assert _run(board) == 0
    first = capsys.readouterr().out
    assert "suite quick: 2 model(s) x 2 track(s); 4 to compute, 0 on the board" in first
    rows = Board(board).rows()
    assert len(rows) == 4
    for row in rows:
        report = json.loads((board / row["report"]).read_text())
        assert row["metrics"]["success"]["value"] == report["success"]["mean"]
        assert row["metrics"]["e_tot"]["value"] == report["E_tot"]
        assert row["metrics"]["regret"]["value"] == report["ladder"]["L4"]["decision_regret"][
            "mean"]
        assert row["track"]["hash"] == report["spec_hash"]
        assert f"success {row['metrics']['success']['value']:.3f}" in first
    oracle = [r for r in rows if r["model"]["name"] == "oracle"]
    assert {r["metrics"]["regret"]["value"] for r in oracle} == {0.0}  # the oracle decides best
    # The same command again computes nothing.
    assert _run(board) == 0
    again = capsys.readouterr().out
    assert "0 to compute, 4 on the board" in again and "not recomputed" in again
    # Editing one track changes its hash: only that track is computed again.
    path = small_tracks / "tracks" / "quick-b.yaml"
    path.write_text(path.read_text().replace("depth: 2", "depth: 1"))
    assert _run(board) == 0
    edited = capsys.readouterr().out
    assert "2 to compute, 2 on the board" in edited
    assert len(Board(board).rows()) == 6  # the rows of the old hash are kept, not mixed
    assert load_track("quick-b").depth == 1


def test_bad_suite_input_is_refused_before_anything_is_written(tmp_path, capsys):
    board = tmp_path / "board"
    with pytest.raises(SystemExit) as err:
        main(["--suite", "fast", "--models", "oracle", "--board", str(board)])
    assert err.value.code == 2
    assert "unknown suite 'fast'; valid suites: paper, pixels, planners, quick" in (
        capsys.readouterr().err)
    with pytest.raises(SystemExit):
        main(["--suite", "quick", "--models", "oracle", "--board", str(board), "--depth", "3"])
    assert "drop --depth" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--suite", "quick", "--models", "oracle"])
    assert "--suite needs --board DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--models", "oracle"])
    assert "--models names the models of --suite" in capsys.readouterr().err
    assert not board.exists()


@pytest.mark.slow
def test_a_suite_over_four_models_runs_through_the_joblib_launcher(small_tracks, tmp_path, capsys):
    board = tmp_path / "board"
    models = [*MODELS, "noise,sigma_r=0.0,sigma_i=0.3", f"{ROOT / 'scripts/example_model.py'}:make"]
    assert main(["--suite", "quick", "--models", *models, "--board", str(board), "--launcher",
                 "joblib", "--launcher-override", "hydra.launcher.n_jobs=2", "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "8 to compute" in out.out and "hydra/launcher=joblib" in out.err
    assert len(Board(board).rows()) == 8
