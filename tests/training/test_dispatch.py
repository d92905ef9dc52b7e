"""Training jobs through a Hydra launcher (``gridplan.training.dispatch``): values come back
in order, ``joblib`` runs them in worker processes, a job's error is raised here."""

from __future__ import annotations

import json
import os

import pytest

from gridplan.training.dispatch import Job, Launcher, launch


def test_joblib_runs_the_jobs_in_worker_processes_and_returns_their_values_in_order(tmp_path):
    pids = launch(
        [Job("a", os.getpid), Job("b", os.getpid), Job("c", os.getpid)],
        tmp_path,
        Launcher(),
        parallel=2,
    )
    assert len(pids) == 3 and os.getpid() not in pids
    assert sorted(p.name for p in tmp_path.glob("*.result.pt")) == [
        "a.result.pt",
        "b.result.pt",
        "c.result.pt",
    ]
    assert (tmp_path / "multirun.yaml").is_file()


def test_one_job_runs_here_and_its_error_is_raised_here(tmp_path):
    assert launch([Job("here", os.getpid)], tmp_path / "one") == [os.getpid()]
    with pytest.raises(json.JSONDecodeError, match="Expecting property name"):
        launch([Job("bad", json.loads, {"s": "{"})], tmp_path / "bad", Launcher("basic"))


def test_bad_job_names_and_launchers_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="unique words"):
        launch([Job("a", os.getpid), Job("a", os.getpid)], tmp_path)
    with pytest.raises(ValueError, match="unique words"):
        launch([Job("a,b", os.getpid)], tmp_path)
    with pytest.raises(ValueError, match="unknown launcher 'nope'"):
        launch([Job("a", os.getpid)], tmp_path, Launcher("nope"))
    assert list(tmp_path.iterdir()) == []
