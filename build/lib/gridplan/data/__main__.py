"""``python -m gridplan.data export`` (console script ``gridplan-data``): write the behaviour
datasets the baselines train on as ``.npz`` files (``gridplan.data.export``).

Examples::

    gridplan-data export                                   # the default run's: balanced 20k seed 0
    gridplan-data export --policy balanced random --budget 4k 12k 20k --seed 0 1 2 --out data
    gridplan-data export --policy expert --budget 12k --seed 3 --out data --force

Each (policy, budget, seed) becomes ``<out>/<task>-<policy>-<transitions>-seed<seed>.npz`` and
its metadata record ``.json`` beside it; the last line per file is ``exported: PATH
fingerprint``. An existing file is never replaced without ``--force``; bad arguments exit 2.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from gridplan.core import tasks
from gridplan.data.datasets import BEHAVIOUR_POLICIES, parse_budget
from gridplan.data.export import VAL_FRACTION, export_dataset, export_name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gridplan-data",
        description="gridplan's logged behaviour datasets (python -m gridplan.data).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser(
        "export",
        help="write the datasets python -m train trains on as .npz files",
        description="Write the datasets python -m train trains on (every combination of "
        "--policy, --budget and --seed) as OUT/<task>-<policy>-<transitions>-seed<seed>.npz "
        "with a metadata record (.json) beside each: arrays states, actions, next_states, "
        "rewards, terminated, pickup, door_opened, goal, episode, t, val (the trainer's "
        "validation episodes) and the dataset fingerprint a checkpoint records.",
    )
    export.add_argument("--policy", nargs="+", default=["balanced"], choices=BEHAVIOUR_POLICIES,
                        help="behaviour policies (data.policy; default balanced)")
    export.add_argument("--budget", nargs="+", default=["20k"],
                        help="transition budgets, e.g. 4k 12k 20k or 5000 (data.budget; "
                        "default 20k)")
    export.add_argument("--seed", nargs="+", type=int, default=[0],
                        help="data seeds (data.seed, which follows the run's seed; default 0)")
    export.add_argument("--task", default="A", choices=tasks.names(), help="task (default A)")
    export.add_argument("--world", default="default",
                        help="world (gridplan.core.world: default, g16-k8, g32-k64, g{N}-k{K}; "
                        "the trainer's world key)")
    export.add_argument("--val-fraction", type=float, default=VAL_FRACTION,
                        help=f"the trainer's data.val_fraction (default {VAL_FRACTION})")
    export.add_argument("--out", type=Path, default=Path("."),
                        help="output folder (default: the working folder)")
    export.add_argument("--force", action="store_true", help="replace existing files")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        task = tasks.get(args.task, world=args.world)
        budgets = [parse_budget(b) for b in args.budget]
        jobs = [
            (policy, n, seed, args.out / export_name(policy, n, seed, task))
            for policy, n, seed in itertools.product(args.policy, budgets, args.seed)
        ]
        if not args.force:
            taken = [str(path) for *_, path in jobs if path.exists()]
            if taken:
                raise FileExistsError(f"{', '.join(taken)} already exist(s); pass --force")
        for policy, n, seed, path in jobs:
            record = export_dataset(path, policy, n, seed, task, args.val_fraction, args.force)
            counts = record["event_counts"]
            print(
                f"{policy} {n} seed {seed}: {counts['episodes']} episodes, "
                f"{counts['pickups']} pickups, {counts['door_openings']} door openings, "
                f"{record['val_transitions']} validation transitions",
                flush=True,
            )
            print(f"exported: {path} {record['fingerprint']}", flush=True)
    except (ValueError, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
