"""Differential check of ``gridplan.core.doorkey_*`` against MiniGrid's own DoorKey, at any scale.

Steps MiniGrid's ``DoorKeyEnv`` and our batched step side by side from layouts MiniGrid drew
from its own seeds, with the same actions, and compares states, rewards, terminations,
truncations, the egocentric ``7x7x3`` images and the fully observed grids after every step
(``gridplan.adapters.minigrid.differential``). Prints the counts, the mismatches per field and
the events visited; exits 1 on any mismatch, 2 if the installed MiniGrid is not the pinned one.

    python scripts/check_minigrid.py --transitions 20000
    python scripts/check_minigrid.py --transitions 1000000 --shards 16 --json check.json

``--worlds`` lists grid sizes, ``N:S`` for a step limit ``S`` other than MiniGrid's ``10 N^2``
(the default ``5:40`` makes truncations frequent); the transitions are shared equally among
the worlds and, within a world, among ``--shards`` worker processes with distinct seeds.
``--rgb K`` also compares the RGB frames (``get_frame``, ``get_pov_render``, 8-pixel tiles)
every ``K`` ticks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridplan.adapters.minigrid import PINNED_VERSION, differential, require_pinned  # noqa: E402
from gridplan.core.doorkey_world import DoorKey  # noqa: E402


def parse_worlds(text: str) -> list[DoorKey]:
    """``"5,6,8,16,5:40"`` -> worlds; raises ValueError naming a malformed entry."""
    worlds = []
    for item in text.split(","):
        size, _, steps = item.partition(":")
        try:
            worlds.append(DoorKey(size=int(size), max_steps=int(steps) if steps else None))
        except ValueError as err:
            raise ValueError(f"--worlds entry {item!r}: {err}") from err
    return worlds


def _shard(size: int, max_steps: int, transitions: int, seed: int, args: dict) -> dict:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    tally = differential(DoorKey(size=size, max_steps=max_steps), transitions, seed, **args)
    return {
        "transitions": tally.transitions, "episodes": tally.episodes,
        "mismatches": dict(tally.mismatches), "events": dict(tally.events),
        "examples": tally.examples,
    }


def run(worlds: list[DoorKey], args: argparse.Namespace) -> list[dict]:
    """One merged record per world."""
    share = -(-args.transitions // (len(worlds) * args.shards))
    options = {"envs": args.envs, "guided": args.guided, "epsilon": args.epsilon,
               "full_every": args.full_every, "rgb_every": args.rgb}
    jobs = [(w, k) for w in worlds for k in range(args.shards)]
    # Distinct seeds for every world and shard: MiniGrid's resets and the action draws.
    calls = [
        (w.size, w.max_steps, share, (args.seed * 1000 + i) * 1000 + k, options)
        for i, (w, k) in enumerate(jobs)
    ]
    if args.shards == 1:
        results = [_shard(*call) for call in calls]
    else:
        with ProcessPoolExecutor(max_workers=args.shards) as pool:
            results = list(pool.map(_shard, *zip(*calls, strict=True)))
    records = []
    for w in worlds:
        mine = [r for (world, _), r in zip(jobs, results, strict=True) if world == w]
        mismatches, events = Counter(), Counter()
        for r in mine:
            mismatches.update(r["mismatches"])
            events.update(r["events"])
        records.append({
            "world": w.name, "max_steps": w.max_steps,
            "transitions": sum(r["transitions"] for r in mine),
            "episodes": sum(r["episodes"] for r in mine),
            "mismatches": dict(mismatches), "events": dict(events),
            "examples": [e for r in mine for e in r["examples"]][:10],
        })
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=100_000)
    parser.add_argument("--worlds", default="5,6,8,16,5:40")
    parser.add_argument("--envs", type=int, default=32, help="environments in lockstep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--guided", type=float, default=0.5,
                        help="share of episodes greedy in Q* (grids up to 8)")
    parser.add_argument("--epsilon", type=float, default=0.25)
    parser.add_argument("--full-every", type=int, default=1)
    parser.add_argument("--rgb", type=int, default=0, metavar="K",
                        help="compare the RGB frames every K ticks (0: never)")
    parser.add_argument("--shards", type=int, default=1, help="worker processes per world")
    parser.add_argument("--json", type=Path, default=None, help="write the records (new file)")
    args = parser.parse_args(argv)
    try:
        require_pinned()
    except (ImportError, RuntimeError) as err:
        print(f"check_minigrid: {err}", file=sys.stderr)
        return 2
    if args.transitions < 1 or args.shards < 1:
        parser.error("--transitions and --shards must be >= 1")
    if args.json is not None and args.json.exists():
        parser.error(f"--json {args.json} exists; pass a new path")
    worlds = parse_worlds(args.worlds)
    start = time.perf_counter()
    records = run(worlds, args)
    wall = time.perf_counter() - start
    print(f"minigrid=={PINNED_VERSION}; load average {os.getloadavg()[0]:.2f}; {wall:.1f} s")
    for r in records:
        print(f"{r['world']} (max_steps {r['max_steps']}): {r['transitions']:,} transitions, "
              f"{r['episodes']:,} episodes, mismatches {sum(r['mismatches'].values())} "
              f"{r['mismatches'] or ''}")
        print("  events: " + ", ".join(f"{k} {v:,}" for k, v in sorted(r["events"].items())))
        for example in r["examples"]:
            print(f"  mismatch {example}")
    total = sum(sum(r["mismatches"].values()) for r in records)
    print(f"total: {sum(r['transitions'] for r in records):,} transitions, {total} mismatches")
    if args.json is not None:
        args.json.write_text(json.dumps({"records": records, "wall_s": wall}, indent=1))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
