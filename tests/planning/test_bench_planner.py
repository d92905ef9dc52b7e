"""The benchmark's learned-model rows (scripts/bench_planner.py) measure what they claim: all
paths plan the same MLP to the same actions, the FLOP count is the network's, and the busy
neighbour is a real process that is gone afterwards. ``--against``: its timing program imports
the module layout of the tree it is given (older commits' flat modules too) and hashes the
actions it chose; the pairs run in fresh processes and the temporary worktree is removed."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gridplan.planning.closed_loop import start_states


def load_bench():
    """``scripts/bench_planner.py`` as a module (scripts/ is not a package)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_planner.py"
    spec = importlib.util.spec_from_file_location("bench_planner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = load_bench()


def test_one_transition_of_the_learned_rows_mlp_is_145408_flop():
    model = BENCH.learned_model(torch.device("cpu"))
    assert BENCH.mlp_flop(model.net) == 2 * (16 * 256 + 256 * 256 + 256 * 12) == 145_408
    again = BENCH.learned_model(torch.device("cpu")).net.parameters()
    assert all(torch.equal(a, b) for a, b in zip(model.net.parameters(), again, strict=True))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_every_learned_path_including_torchrl_chooses_the_trees_actions(depth):
    pytest.importorskip("torchrl")
    model = BENCH.learned_model(torch.device("cpu"))
    root = start_states([0], 6)
    deciders = BENCH.learned_deciders(model, depth, root, 2**30)
    assert set(deciders) == set(BENCH.LEARNED_PATHS)
    actions = {p: d(torch.Generator().manual_seed(1)) for p, d in deciders.items()}
    for path, chosen in actions.items():
        assert torch.equal(chosen, actions["tree"]), path


def test_a_learned_group_reports_rates_speedups_and_memory():
    args = argparse.Namespace(min_time=0.01, max_memory=2**30, learned_paths=["generic", "tree"])
    rows = BENCH.learned_group(
        BENCH.learned_model(torch.device("cpu")), 2, 4, args, torch.device("cpu"), 145_408, 1e10
    )
    assert [r["path"] for r in rows] == ["generic", "tree"]
    tree = rows[1]
    assert tree["same_actions_as_tree"] and tree["predictions_per_s"] < tree["transitions_per_s"]
    assert tree["predictions_per_s"] / tree["transitions_per_s"] == pytest.approx(20 / 32)
    assert tree["ceiling_fraction"] == pytest.approx(tree["predictions_per_s"] * 145_408 / 1e10)


def test_the_busy_neighbour_spins_while_the_block_runs_and_is_gone_after():
    with BENCH.busy_neighbour() as pid:
        os.kill(pid, 0)  # alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


#: A stand-in for an older commit's flat layout: ``gridplan.planner`` and ``gridplan.models``.
FLAT_PLANNER = """
import torch


class Planner:
    def __init__(self, model, depth):
        self.depth = depth

    def act(self, root, generator):
        return torch.randint(4, (root.shape[0],), generator=generator)
"""
FLAT_MODELS = """
class NoiseModel:
    @classmethod
    def controlled(cls, sigma_r, sigma_i):
        return cls()


class OracleModel(NoiseModel):
    pass
"""


def test_the_timing_program_plans_with_the_flat_layout_of_an_older_tree(tmp_path):
    package = tmp_path / "gridplan"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "planner.py").write_text(FLAT_PLANNER)
    (package / "models.py").write_text(FLAT_MODELS)
    roots = tmp_path / "roots.pt"
    torch.save(start_states([0], 5), roots)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    command = [sys.executable, str(BENCH.TIMING_PROGRAM), "--roots", str(roots), "--calls", "3"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout)
    assert Path(result["gridplan"]) == package / "__init__.py"
    assert result["foreign_modules"] == [] and result["threads"] == 1
    assert len(result["seconds"]) == len(result["cpu_seconds"]) == 3
    # The warm-up decision and the three timed ones, in call order, from one seeded stream.
    gen = torch.Generator().manual_seed(1)
    digest = hashlib.sha256()
    for _ in range(4):
        digest.update(torch.randint(4, (5,), generator=gen).numpy().tobytes())
    assert result["actions_sha256"] == digest.hexdigest()


def test_a_ref_that_names_no_commit_is_an_error_naming_it():
    with pytest.raises(RuntimeError, match="no-such-ref"):
        with BENCH.ref_worktree("no-such-ref-anywhere"):
            pass


def _worktrees() -> list[str]:
    repo = Path(BENCH.__file__).resolve().parents[1]
    listing = BENCH.git(repo, "worktree", "list", "--porcelain").splitlines()
    return [line.removeprefix("worktree ") for line in listing if line.startswith("worktree ")]


def test_the_refs_worktree_holds_its_commit_while_open_and_is_removed_after():
    repo = Path(BENCH.__file__).resolve().parents[1]
    with BENCH.ref_worktree("HEAD") as (tree, commit):
        assert str(tree) in _worktrees()
        assert BENCH.git(tree, "rev-parse", "HEAD").startswith(commit)
        assert (tree / "gridplan" / "__init__.py").is_file()
    assert str(tree) not in _worktrees() and not tree.exists()
    assert BENCH.git(repo, "rev-parse", "HEAD").startswith(commit)


@pytest.mark.slow
def test_against_head_times_both_trees_in_fresh_processes_and_prints_every_pair(capsys):
    result = BENCH.against("HEAD", 1, 4, "oracle", 2, 1)
    assert len(result["pairs"]) == 2 and result["actions_identical"]
    ratios = [p["ratio"] for p in result["pairs"]]
    assert result["median_ratio"] == pytest.approx(sum(ratios) / 2)
    assert result["min_ratio"] == min(ratios) > 0
    lines = capsys.readouterr().out.splitlines()
    pairs = [line for line in lines if line.startswith("pair ")]
    assert len(pairs) == 2 and all(line.endswith("actions identical") for line in pairs)
    assert lines[-1].startswith("median ratio")
