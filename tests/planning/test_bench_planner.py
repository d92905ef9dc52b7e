"""The benchmark's learned-model rows (scripts/bench_planner.py) measure what they claim: all
paths plan the same MLP to the same actions, the FLOP count is the network's, and the busy
neighbour is a real process that is gone afterwards."""

from __future__ import annotations

import argparse
import importlib.util
import os
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
