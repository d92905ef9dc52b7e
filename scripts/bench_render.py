"""DoorKey RGB speed: MiniGrid's own ``get_frame``/``get_pov_render`` beside
``gridplan.core.doorkey_render``'s batched ``rgb``/``pov_rgb``, interleaved in one run.

``B`` MiniGrid ``DoorKeyEnv``s are reset from seeds and played a few uniform steps; our
``(B, 10)`` states are loaded from them (``gridplan.adapters.minigrid.load_state``), so both
sides draw the same frames (checked before timing; exit 1 if not). Each round times MiniGrid
drawing the ``B`` frames one by one (its tile cache warm, as in a long run), ours drawing them
in one call, and a plain copy of our frames (``clone``: as many bytes read and written as our
gather moves, nothing else), the floor; for the full frame (highlighted, MiniGrid's default)
and the egocentric image. The medians over ``--rounds`` are printed as frames per second with
the ratios ours / MiniGrid and ours / floor.

    python scripts/bench_render.py --batch 256 --tile-sizes 8,32
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)

import bench_planner as BENCH  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from gridplan.adapters.minigrid import PINNED_VERSION, load_state, make_env, track  # noqa: E402
from gridplan.core import doorkey_render as render  # noqa: E402
from gridplan.core.doorkey_world import DoorKey  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402


def played(world: DoorKey, batch: int, seed: int) -> tuple[list, torch.Tensor]:
    """``batch`` MiniGrid environments a few uniform steps into an episode, and our states."""
    rng, envs, rows = np.random.default_rng(seed), [], []
    for i in range(batch):
        env = make_env(world)
        env.reset(seed=seed * 100_003 + i)
        tracked = track(env)
        for a in rng.integers(0, 7, int(rng.integers(0, 12))):
            _, _, terminated, truncated, _ = env.step(int(a))
            if terminated or truncated:
                break
        envs.append(env.unwrapped)
        rows.append(load_state(env, tracked))
    return envs, torch.tensor(rows)


def seconds(fn, device: torch.device, min_time: float) -> float:
    """Mean seconds of one ``fn()`` over at least ``min_time`` seconds (after one warm-up)."""
    fn()
    BENCH.sync(device)
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        BENCH.sync(device)
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls


def pairs(envs: list, state: torch.Tensor, world: DoorKey, ts: int) -> dict:
    """Per image kind: MiniGrid drawing every frame, and ours drawing the batch."""
    return {
        "full frame": (lambda: [e.get_frame(True, ts) for e in envs],
                       lambda: render.rgb(state, world, ts)),
        "egocentric": (lambda: [e.get_pov_render(ts) for e in envs],
                       lambda: render.pov_rgb(state, world, ts)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--tile-sizes", default="8,32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.5)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    threads = configure_threads(args.threads)
    world, batch = DoorKey(size=args.size), args.batch
    envs, state = played(world, batch, seed=0)
    state = state.to(device)
    print(f"{world.name}, B={batch}, minigrid=={PINNED_VERSION}, device {device}, "
          f"{describe(threads)}, load average {os.getloadavg()[0]:.2f}")
    for ts in (int(t) for t in args.tile_sizes.split(",")):
        for name, (theirs, ours) in pairs(envs, state, world, ts).items():
            frames = ours()
            same = np.array_equal(np.stack(theirs()), frames.cpu().numpy())
            if not same:
                print(f"ts={ts} {name}: our frames differ from MiniGrid's", file=sys.stderr)
                return 1
            timed = {"minigrid": theirs, "ours": ours, "copy": frames.clone}
            times: dict[str, list[float]] = {k: [] for k in timed}
            for _ in range(args.rounds):
                for k, fn in timed.items():
                    on = torch.device("cpu") if k == "minigrid" else device
                    times[k].append(seconds(fn, on, args.min_time))
            rate = {k: batch / statistics.median(v) for k, v in times.items()}
            print(f"ts={ts:3d} {name:11s} minigrid {rate['minigrid']:12,.0f} frames/s  ours "
                  f"{rate['ours']:12,.0f} frames/s  x{rate['ours'] / rate['minigrid']:8,.1f}"
                  f"  floor (a copy of the frames) {rate['copy']:12,.0f} frames/s"
                  f"  ours/floor {rate['ours'] / rate['copy']:.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    return 0



if __name__ == "__main__":
    sys.exit(main())
