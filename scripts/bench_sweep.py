"""Wall time of one ``python -m train -m`` sweep run four ways, side by side in one run.

The sweep is ``seed=0,1,...,K-1 trainer.max_epochs=E`` (default K = 4, E = 3, the default
20k balanced uniform run), each way in a fresh process from the same warm dataset cache:

- ``sequential``: ``train.vectorize=false``, the basic launcher: one run after another;
- ``joblib``: ``train.vectorize=false hydra/launcher=joblib hydra.launcher.n_jobs=N``: one
  run per job, N processes of one torch thread;
- ``joblib_groups``: ``hydra/launcher=joblib hydra.launcher.n_jobs=N`` (vectorize on, the
  default): the seeds dealt into N vectorized groups, one group per job;
- ``vectorized``: ``train.workers=1``, one vectorized group in this process.

Every way trains the same runs to the same epochs and writes every run's folder. Printed:
the wall time of each and its speedup over ``sequential``; ``--json PATH`` writes the rows.

The floor: K runs of one thread each, independent, cannot finish sooner than one run's wall
time x K / C on C = min(n_jobs, CPUs) cores; one run's time is the ``sequential`` way's wall
/ K (with ``--against``, one run of seed 0 timed alone). It bounds the ways that run the
seeds as independent runs; the vectorized ways share one start-up and dataset load per group
and stack the members' steps, so they can pass it, and by how much is what they gain.
``--against REF`` times the headline, the sweep's runs per second by ``--way`` (default
``joblib_groups``), of this checkout against git ``REF`` in interleaved fresh processes
(``scripts/against.py``, docs/PERFORMANCE.md §13; ``python -m train`` and its launcher's
workers import the tree of their side): the ratio ours / ref per pair, the median and the floor.

Usage::

    python scripts/bench_sweep.py                         # K = 4 seeds, 3 epochs, 2 jobs
    python scripts/bench_sweep.py --seeds 8 --jobs 2 --json sweep.json
    python scripts/bench_sweep.py --quick --against main --pairs 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import against  # noqa: E402

WAYS = {
    "sequential": ["train.vectorize=false", "hydra/launcher=basic"],
    "joblib": ["train.vectorize=false", "hydra/launcher=joblib", "hydra.launcher.n_jobs={jobs}"],
    "joblib_groups": ["hydra/launcher=joblib", "hydra.launcher.n_jobs={jobs}"],
    "vectorized": ["train.workers=1"],
}


def command(way: str, args, out: Path, folder: str | None = None) -> list[str]:
    seeds = ",".join(str(s) for s in range(args.seeds))
    extra = [a.format(jobs=args.jobs) for a in WAYS[way]]
    return [
        sys.executable,
        "-m",
        "train",
        "-m",
        f"seed={seeds}",
        f"trainer.max_epochs={args.epochs}",
        f"data.budget={args.budget}",
        f"out_dir={out / (folder or way)}",
        f"data.cache_dir={out / 'cache'}",
        *extra,
    ]


def run(cmd: list[str]) -> tuple[float, list[str]]:
    """Wall seconds of ``cmd`` and its ``checkpoint:`` lines; raises if it fails."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("checkpoint: ")]
    return wall, lines


def warm_up(args, out: Path) -> None:
    """Make the datasets once, before any timing (every way then reads the cache)."""
    warm = command("vectorized", args, out, "warm")
    warm[warm.index(f"trainer.max_epochs={args.epochs}")] = "trainer.max_epochs=1"
    run(warm)


def time_way(way: str, args, out: Path) -> float:
    """Wall seconds of the sweep run ``way``; raises unless every run wrote its checkpoint."""
    wall, lines = run(command(way, args, out))
    if len(lines) != args.seeds:
        raise RuntimeError(f"{way}: {len(lines)} checkpoint lines for {args.seeds} runs")
    return wall


def cores(args) -> int:
    """The cores the floor's independent runs share: min(n_jobs, CPUs)."""
    return max(1, min(args.jobs, len(os.sched_getaffinity(0))))


def against_floor(args) -> tuple[float, str]:
    """The floor in runs per second, from one run of seed 0 timed alone (after a warm-up)."""
    alone = argparse.Namespace(**{**vars(args), "seeds": 1})
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        warm_up(alone, Path(tmp))
        single = time_way("sequential", alone, Path(tmp))
    what = f"one run alone {single:.1f} s x K / {cores(args)} cores"
    return cores(args) / single, what


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=4, help="sweep seed=0..K-1")
    p.add_argument("--epochs", type=int, default=3, help="trainer.max_epochs")
    p.add_argument("--jobs", type=int, default=2, help="hydra.launcher.n_jobs of the joblib ways")
    p.add_argument("--budget", default="20k", help="data.budget")
    p.add_argument(
        "--way", choices=list(WAYS), default="joblib_groups", help="--against's headline way"
    )
    p.add_argument("--quick", action="store_true", help="K = 2 seeds, 1 epoch, data.budget=2k")
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON here")
    against.add_arguments(p, pairs=4)
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs, args.budget = 2, 1, "2k"
    if args.headline:
        with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
            warm_up(args, Path(tmp))
            wall = time_way(args.way, args, Path(tmp))
        what = f"{args.way} sweep of {args.seeds} runs, {args.epochs} epochs, {args.budget}"
        return against.emit(args.seeds / wall, "runs/s", what)
    if args.against:
        child = against.child_argv(argv)
        return against.main_against(args, __file__, child, lambda _: against_floor(args))
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        out = Path(tmp)
        warm_up(args, out)
        rows = []
        for way in WAYS:
            wall = time_way(way, args, out)
            rows.append({"way": way, "wall_seconds": round(wall, 2)})
            print(f"{way:>14}: {wall:7.1f} s", flush=True)
    base = rows[0]["wall_seconds"]
    floor = base / cores(args)
    for row in rows:
        row["speedup_vs_sequential"] = round(base / row["wall_seconds"], 2)
    print(f"\nsweep seed=0..{args.seeds - 1}, {args.epochs} epochs, {args.budget}, "
          f"n_jobs={args.jobs}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}")
    print(f"{'way':>14}  {'wall s':>8}  {'speedup':>8}  {'/ floor':>8}")
    for row in rows:
        print(f"{row['way']:>14}  {row['wall_seconds']:8.1f}  "
              f"{row['speedup_vs_sequential']:7.2f}x  {row['wall_seconds'] / floor:7.2f}x")
    print(f"floor {floor:.1f} s: one run's time (sequential / K) x K / {cores(args)} cores, "
          "the bound of independent runs (the module's docstring)")
    if args.json:
        meta = {k: getattr(args, k) for k in ("seeds", "epochs", "jobs", "budget")}
        meta["floor_seconds"] = round(floor, 2)
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
