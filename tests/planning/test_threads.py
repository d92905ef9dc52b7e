"""Thread settings of the command lines (gridplan.util.threads): passive OpenMP waiting set before
torch starts, one thread by default, and the ``threads`` options of train, eval and
reproduce."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers_learned import debug_overrides

from gridplan.training.config import compose
from gridplan.util import threads

REPO = Path(__file__).resolve().parents[2]


def test_the_wait_policy_is_set_to_passive_unless_the_user_chose_one():
    env: dict[str, str] = {}
    assert threads.set_wait_policy(env) == "PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert threads.set_wait_policy(mine) == "ACTIVE" and mine == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_setting_the_policy_after_torch_started_warns_that_it_cannot_take_effect(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.warns(RuntimeWarning, match="set after torch was imported"):
        threads.set_wait_policy()


def test_configure_threads_sets_torch_and_defaults_to_one_thread(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        assert threads.configure_threads(2) == 2 and torch.get_num_threads() == 2
        assert threads.default_threads() == 1
        assert threads.configure_threads(None) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert threads.configure_threads(None) == 3 and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    assert 1 <= threads.available_cpus() <= (os.cpu_count() or 1)


def test_a_training_process_takes_one_thread_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.training_threads() == 1
    assert threads.training_threads(3) == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert threads.training_threads() == 4 and threads.training_threads(2) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="OMP_NUM_THREADS must be an integer >= 1, got 'many'"):
        threads.training_threads()
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        threads.training_threads(0)


def test_chosen_threads_mark_the_choice_for_the_block_and_restore_both(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    assert not threads.threads_chosen(None) and threads.threads_chosen(3)
    with threads.chosen_threads(1):
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        assert threads.threads_chosen(None)
    assert "OMP_NUM_THREADS" not in os.environ and torch.get_num_threads() == before
    with threads.chosen_threads(None):  # no choice: nothing changes
        assert not threads.threads_chosen(None) and torch.get_num_threads() == before
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with threads.chosen_threads(1):
        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert os.environ["OMP_NUM_THREADS"] == "2"
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        with threads.chosen_threads(0):
            pass


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_configure_threads_rejects_what_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match=f"threads must be an integer >= 1, got {bad!r}"):
        threads.configure_threads(bad)


@pytest.mark.parametrize(
    ("v2", "v1", "want"),
    [("200000 100000", None, 2.0), ("max 100000", None, None), (None, ("150000", "100000"), 1.5)],
)
def test_a_cgroup_cpu_quota_caps_the_cpus(tmp_path, monkeypatch, v2, v1, want):
    v1_files = zip(("CGROUP_V1_QUOTA", "CGROUP_V1_PERIOD"), v1 or (None, None), strict=True)
    for name, value in (("CGROUP_V2_CPU_MAX", v2), *v1_files):
        path = tmp_path / name
        if value is not None:
            path.write_text(value + "\n")
        monkeypatch.setattr(threads, name, str(path))
    assert threads.cpu_quota() == want
    if want is not None:
        assert threads.available_cpus() <= max(1, -(-want // 1))


def test_describe_names_the_threads_and_the_policy(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert threads.describe(3) == "threads: 3 (OMP_WAIT_POLICY=PASSIVE)"


def run_cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` in the repository, without the caller's OpenMP wait policy and with
    OpenMP printing the settings it started with (GNU OpenMP: ``OMP_DISPLAY_ENV``)."""
    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    environ |= {"OMP_DISPLAY_ENV": "VERBOSE", **env}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def openmp_started_passive(done: subprocess.CompletedProcess) -> bool:
    """Whether GNU OpenMP started with passive waiting (spin count 0); skips the test where
    the OpenMP runtime prints no settings."""
    if "OPENMP DISPLAY ENVIRONMENT" not in done.stderr:
        pytest.skip("this OpenMP runtime does not print its settings")
    return "GOMP_SPINCOUNT = '0'" in done.stderr


EVAL = ["-m", "eval", "--model", "oracle", "--depth", "1", "--seeds", "1", "--episodes", "2"]
EVAL += ["--eval-windows", "10", "--no-progress", "--threads", "1"]


def test_eval_starts_openmp_passive_and_prints_its_threads():
    done = run_cli(EVAL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "threads: 1 (OMP_WAIT_POLICY=PASSIVE)"
    assert openmp_started_passive(done)


@pytest.mark.slow
def test_a_wait_policy_the_user_set_is_kept():
    done = run_cli(["-m", "eval", "--help"], OMP_WAIT_POLICY="ACTIVE")
    assert done.returncode == 0 and not openmp_started_passive(done)


def test_a_plain_torch_process_starts_openmp_spinning():
    # The check above can fail: without the entry point's set-up OpenMP spins.
    done = run_cli(["-c", "import torch; torch.ones(8).sum()"])
    assert not openmp_started_passive(done)


@pytest.mark.parametrize(
    "args",
    [["scripts/reproduce.py", "--list"], ["-m", "train", "--help"]],
    ids=["reproduce", "train"],
)
def test_reproduce_and_train_start_openmp_passive(args):
    done = run_cli(args)
    assert done.returncode == 0, done.stderr
    assert openmp_started_passive(done)


def load_reproduce():
    spec = importlib.util.spec_from_file_location("reproduce", REPO / "scripts" / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    with pytest.warns(RuntimeWarning, match="set after torch was imported"):
        spec.loader.exec_module(module)
    return module


def test_reproduce_rejects_negative_threads_and_train_takes_a_threads_key(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.raises(SystemExit) as stop:
        load_reproduce().main(["--only", "e1", "--threads", "-1", "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert "threads must be an integer >= 1, got -1" in capsys.readouterr().err
    assert compose(["threads=2"]).threads == 2 and compose([]).threads is None
    from train.__main__ import main

    assert main(["threads=0", f"out_dir={tmp_path}"]) == 2
    assert "threads must be an integer >= 1, got 0" in capsys.readouterr().err


def test_eval_takes_one_thread_unless_told(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    done = run_cli(EVAL[:-2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "threads: 1 (OMP_WAIT_POLICY=PASSIVE)"


#: An MLP layer's fresh 64 MiB output, made and freed 10 times; prints the minor page faults
#: of the last three (the heap settles in the first few: torch aligns its large blocks, so a
#: freed one is reused once its neighbours have been freed too). ``train`` trains a run of
#: the overrides that follow in between, as an experiment evaluates after its training.
FAULTS = """
import resource, sys, torch
from gridplan.util.allocator import retain_freed_memory
if sys.argv[1] in ("retain", "train"):
    assert retain_freed_memory()
if sys.argv[1] == "train":
    from gridplan.training import compose, train
    train(compose(sys.argv[2:]))
torch.set_num_threads(1)
x, w = torch.ones(65536, 64), torch.ones(64, 256)
for i in range(10):
    if i == 7:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.nn.functional.silu(x @ w).sum()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_retained_memory_is_not_faulted_in_again():
    pages = 64 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    faults = {}
    for mode in ("retain", "default"):
        done = run_cli(["-c", FAULTS, mode])
        assert done.returncode == 0, done.stderr
        faults[mode] = int(done.stdout.split()[-1])
    # Without the setting every output maps fresh pages and faults each one in.
    assert faults["default"] >= 3 * pages
    assert faults["retain"] < pages // 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_training_in_the_process_keeps_the_retained_memory_setting(tmp_path):
    done = run_cli(["-c", FAULTS, "train", *debug_overrides(tmp_path), "trainer.max_epochs=1"])
    assert done.returncode == 0, done.stderr[-3000:]
    # Training set its own, lower thresholds once: a 64 MiB output was then mapped afresh.
    assert int(done.stdout.split()[-1]) < 64 * 2**20 // os.sysconf("SC_PAGE_SIZE") // 4
