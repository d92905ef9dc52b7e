"""The floor of a benchmark's planner part: the rate this machine cannot pass (docs/PERFORMANCE.md
§1), for benchmarks that plan inside a larger run (``bench_ladder.py``, ``bench_torchrl.py``).

Imported only when a floor is measured: ``bench_planner`` sets the OpenMP wait policy when it
is first imported, which must not change a benchmark's own timings.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

with warnings.catch_warnings():
    # Its wait policy comes after the benchmark's torch: the floors run on one thread, where
    # OpenMP does not wait.
    warnings.filterwarnings("ignore", "OMP_WAIT_POLICY set after torch", RuntimeWarning)
    import bench_planner as bench  # noqa: E402

import torch  # noqa: E402

from gridplan.planning.closed_loop import start_states  # noqa: E402
from gridplan.planning.fused import FusedNoiseScorer  # noqa: E402
from gridplan.planning.planner import Planner  # noqa: E402


def planner_floor(model, depth: int, task, rows: int = 2**12) -> tuple[float, str] | None:
    """Model transitions per second that the depth-``depth`` planner of ``model`` cannot pass
    on one CPU thread, measured now, and what it is: for a model the fused scorer plans with,
    the ``randn`` rate over the normals a transition draws (the noise models), or where it
    draws none (the oracle) the copy bandwidth over the bytes its leaf scoring touches per
    transition (``bench_planner.op_census`` on ``rows`` leaf rows); ``None`` for a model
    planned through its own ``predict`` (a plug-in: its cost is its own)."""
    planner = Planner(model, depth, task)
    if not isinstance(planner.scorer, FusedNoiseScorer):
        return None
    cpu, before = torch.device("cpu"), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        root = start_states([0], max(1, rows // 4**depth), task)
        census = bench.op_census(planner, root)
        normals = census["normals_per_transition"]
        if normals:
            return bench.normal_rate(cpu) / normals, f"randn rate / {normals} normals each"
        touched = census["bytes_touched_per_transition"]
        rate = bench.memory_bandwidth(cpu) / touched
        return rate, f"copy bandwidth / {touched:.0f} bytes touched each"
    finally:
        torch.set_num_threads(before)
