"""DoorKey speed: MiniGrid's own ``DoorKeyEnv.step`` beside ``gridplan.core.doorkey_*``'s
batched step, interleaved in one run, and the time of exact value iteration.

Rows, each timed ``--rounds`` times, alternating with MiniGrid's so that both see the same
machine load (the median is reported):

* ``minigrid``: one ``DoorKeyEnv`` stepped with uniform random actions, reset on episode end
  (its step always builds the egocentric observation);
* ``step``: our validated ``step`` on ``B`` rows;
* ``step+obs+reset``: ``step``, the egocentric observation and a masked reset of finished
  rows: what MiniGrid's loop does, for ``B`` episodes at once.

Prints steps per second, the ratio to MiniGrid and the memory-bandwidth floor of our row
(state read and written plus the image, int64 state, uint8 image). ``--vi`` times
``values.layout_values`` on one 8x8 layout, all 20 8x8 layouts and one 16x16 layout.

``--against REF`` times the headline of this checkout against git ``REF`` in interleaved
fresh processes (``scripts/against.py``, docs/PERFORMANCE.md §13): the ratio ours / ref per
pair, the median and the floor. The headline is ``--row``: ``full`` (default) the
``step+obs+reset`` row at the largest of ``--batches``, with the same floor; ``step`` our
``step`` alone there (its floor: the state read and written); ``vi`` layouts per second of
value iteration, ``layout_values`` on the first ``--vi-layouts`` layouts of the ``--size``
world (cache cleared; no floor).

    python scripts/bench_minigrid.py --batches 1,64,4096 --vi
    python scripts/bench_minigrid.py --device cuda --batches 4096,65536,1048576
    python scripts/bench_minigrid.py --against main --pairs 8 --batches 4096 --min-time 0.5
    python scripts/bench_minigrid.py --against main --pairs 4 --row vi --size 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import against  # noqa: E402
import bench_planner as BENCH  # noqa: E402

from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gridplan.adapters.minigrid import PINNED_VERSION, make_env  # noqa: E402
from gridplan.core import doorkey_env as env  # noqa: E402
from gridplan.core import doorkey_values as values  # noqa: E402
from gridplan.core.doorkey_constants import N_ACTIONS, STATE_DIM  # noqa: E402
from gridplan.core.doorkey_observe import egocentric  # noqa: E402
from gridplan.core.doorkey_world import DoorKey  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402


def minigrid_rate(world: DoorKey, min_time: float, seed: int) -> float:
    """Steps per second of one MiniGrid ``DoorKeyEnv``, resets included."""
    gym_env = make_env(world)
    rng = np.random.default_rng(seed)
    gym_env.reset(seed=seed)
    steps, start = 0, time.perf_counter()
    while True:
        for a in rng.integers(0, N_ACTIONS, 256):
            _, _, term, trunc, _ = gym_env.step(int(a))
            if term or trunc:
                gym_env.reset()
        steps += 256
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return steps / elapsed


def ours_rate(world: DoorKey, batch: int, full: bool, device, min_time: float) -> float:
    """Rows stepped per second by our batched step (``full``: with observation and reset)."""
    gen = torch.Generator(device).manual_seed(batch)
    state = env.reset(batch, gen, world)
    actions = torch.randint(0, N_ACTIONS, (64, batch), generator=gen, device=device)

    def one(i: int):
        nonlocal state
        nxt, _, term, trunc, _ = env.step(state, actions[i % 64], world)
        if full:
            egocentric(nxt, world)
            nxt = torch.where((term | trunc).unsqueeze(1), env.reset(batch, gen, world), nxt)
        state = nxt

    for i in range(3):
        one(i)
    BENCH.sync(device)
    calls, start = 0, time.perf_counter()
    while True:
        one(calls)
        calls += 1
        if calls % 8 == 0:
            BENCH.sync(device)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                return calls * batch / elapsed


def time_vi() -> dict:
    """Seconds of value iteration (cache cleared): one 8x8 layout, all 20, one 16x16."""
    out = {}
    w8, w16 = DoorKey(size=8), DoorKey(size=16)
    for name, jobs in (
        ("8x8 one layout", [(w8, 3, 2)]),
        ("8x8 all 20 layouts", [(w8, *lay) for lay in w8.layouts]),
        ("16x16 one layout", [(w16, 7, 5)]),
    ):
        values.layout_values.cache_clear()
        start = time.perf_counter()
        sweeps = [values.layout_values(w, x, y, 0.95).sweeps for w, x, y in jobs]
        out[name] = {"seconds": time.perf_counter() - start, "max_sweeps": max(sweeps),
                     "states_per_layout": values.layout_size(jobs[0][0])}
    values.layout_values.cache_clear()
    return out


def vi_rate(world: DoorKey, layouts: int) -> float:
    """Layouts per second of ``layout_values`` on the first ``layouts`` of ``world`` (cache
    cleared before and after)."""
    values.layout_values.cache_clear()
    start = time.perf_counter()
    for wall_x, door_y in world.layouts[:layouts]:
        values.layout_values(world, wall_x, door_y, 0.95)
    elapsed = time.perf_counter() - start
    values.layout_values.cache_clear()
    return min(layouts, len(world.layouts)) / elapsed


def floor(world: DoorKey, device, image: bool = True) -> tuple[float, str, float]:
    """Rows per second our full row (``image``; else ``step`` alone) cannot pass, what it is,
    and the copy bandwidth (bytes/s) it divides by the row's bytes (state read and written,
    int64, and the uint8 image)."""
    bandwidth = BENCH.memory_bandwidth(device)
    row_bytes = 2 * STATE_DIM * 8 + image * world.view_size**2 * 3
    what = f"copy bandwidth {bandwidth / 1e9:.1f} GB/s / {row_bytes} bytes per row"
    return bandwidth / row_bytes, what, bandwidth


def headline(args, world: DoorKey, device) -> int:
    """The ``--row`` rate of one run of ``--against``, as ``against.emit``'s JSON line."""
    if args.row == "vi":
        rate = vi_rate(world, args.vi_layouts)
        return against.emit(rate, "layouts/s", f"value iteration, {world.name}")
    b = max(int(b) for b in args.batches.split(","))
    full = args.row == "full"
    rate = ours_rate(world, b, full, device, args.min_time)
    name = "step+obs+reset" if full else "step"
    return against.emit(rate, "rows/s", f"{name} B={b}, {world.name}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--batches", default="1,64,4096")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--vi", action="store_true", help="also time value iteration")
    parser.add_argument(
        "--row", choices=("full", "step", "vi"), default="full",
        help="the headline --against times: step+obs+reset, step alone or value iteration",
    )
    parser.add_argument(
        "--vi-layouts", type=int, default=3, help="layouts --row vi builds per run (3)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results (new file)")
    against.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.json is not None and args.json.exists():
        parser.error(f"--json {args.json} exists; pass a new path")
    device = torch.device(args.device)
    threads = configure_threads(args.threads)
    world = DoorKey(size=args.size)
    batches = [int(b) for b in args.batches.split(",")]
    if args.vi_layouts < 1:
        parser.error(f"--vi-layouts must be >= 1, got {args.vi_layouts}")
    if args.headline:
        return headline(args, world, device)
    if args.against:
        child = against.child_argv(argv)
        if args.row == "vi":
            return against.main_against(args, __file__, child)
        image = args.row == "full"
        return against.main_against(
            args, __file__, child, lambda _: floor(world, device, image)[:2]
        )
    rows: dict[str, list[float]] = {"minigrid": []}
    for r in range(args.rounds):
        rows["minigrid"].append(minigrid_rate(world, args.min_time, seed=r))
        for b in batches:
            for full in (False, True):
                name = f"{'step+obs+reset' if full else 'step'} B={b}"
                rows.setdefault(name, []).append(ours_rate(world, b, full, device, args.min_time))
    rate, what, bandwidth = floor(world, device)
    base = statistics.median(rows["minigrid"])
    print(f"{world.name}, minigrid=={PINNED_VERSION}, device {device}, {describe(threads)}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"floor {rate:,.0f} rows/s ({what})")
    result = {"world": world.name, "device": str(device), "threads": threads, "rows": {},
              "load_average": os.getloadavg()[0], "bandwidth": bandwidth,
              "floor_rows_per_s": rate}
    for name, rates in rows.items():
        med = statistics.median(rates)
        result["rows"][name] = {"steps_per_s": med, "ratio_to_minigrid": med / base}
        print(f"{name:24s} {med:14,.0f} steps/s  x{med / base:10,.1f} MiniGrid")
    if args.vi:
        result["vi"] = time_vi()
        for name, r in result["vi"].items():
            print(f"value iteration, {name}: {r['seconds']:.2f} s ({r['states_per_layout']:,} "
                  f"indices per layout, {r['max_sweeps']} sweeps)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return 0



if __name__ == "__main__":
    sys.exit(main())
