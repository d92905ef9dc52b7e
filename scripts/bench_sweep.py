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

Usage::

    python scripts/bench_sweep.py                         # K = 4 seeds, 3 epochs, 2 jobs
    python scripts/bench_sweep.py --seeds 8 --jobs 2 --json sweep.json
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=4, help="sweep seed=0..K-1")
    p.add_argument("--epochs", type=int, default=3, help="trainer.max_epochs")
    p.add_argument("--jobs", type=int, default=2, help="hydra.launcher.n_jobs of the joblib ways")
    p.add_argument("--budget", default="20k", help="data.budget")
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        out = Path(tmp)
        # The datasets are made once, before any timing (every way then reads the cache).
        warm = command("vectorized", args, out, "warm")
        warm[warm.index(f"trainer.max_epochs={args.epochs}")] = "trainer.max_epochs=1"
        run(warm)
        rows = []
        for way in WAYS:
            wall, lines = run(command(way, args, out))
            if len(lines) != args.seeds:
                raise RuntimeError(f"{way}: {len(lines)} checkpoint lines for {args.seeds} runs")
            rows.append({"way": way, "wall_seconds": round(wall, 2)})
            print(f"{way:>14}: {wall:7.1f} s", flush=True)
    base = rows[0]["wall_seconds"]
    for row in rows:
        row["speedup_vs_sequential"] = round(base / row["wall_seconds"], 2)
    print(f"\nsweep seed=0..{args.seeds - 1}, {args.epochs} epochs, {args.budget}, "
          f"n_jobs={args.jobs}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}")
    print(f"{'way':>14}  {'wall s':>8}  {'speedup':>8}")
    for row in rows:
        print(f"{row['way']:>14}  {row['wall_seconds']:8.1f}  {row['speedup_vs_sequential']:7.2f}x")
    if args.json:
        meta = {k: getattr(args, k) for k in ("seeds", "epochs", "jobs", "budget")}
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
