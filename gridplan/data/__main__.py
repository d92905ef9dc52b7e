"""``python -m gridplan.data export`` (console script ``gridplan-data``): write the behaviour
datasets the baselines train on as ``.npz`` files (``gridplan.data.export``).

Examples::

    gridplan-data export                                   # the default run's: balanced 20k seed 0
    gridplan-data export --policy balanced random --budget 4k 12k 20k --seed 0 1 2 --out data
    gridplan-data export --policy expert --budget 12k --seed 3 --out data --force
    gridplan-data export --budget 4k --sequences pixels --out data  # episodes of pixel frames

Each (policy, budget, seed) becomes ``<out>/<task>-<policy>-<transitions>-seed<seed>.npz`` and
its metadata record ``.json`` beside it; the last line per file is ``exported: PATH
fingerprint``. With ``--sequences KIND`` each file is the same dataset as episode
sequences of ``KIND`` observations (``state``, ``grid`` or ``pixels``) for multi-step
training, ``<...>-seq-<KIND>.npz`` (``gridplan.data.export.export_sequences``: ``obs``,
``state``, ``action``, ``reward``, ``is_first``/``is_last``/``is_terminal``, ``episode``,
``step``, ...; ``obs[k + 1]`` is the observation after ``action[k]``). Every argument is
checked before anything is written: a bad one (a budget below 2 transitions, a seed outside
the trainer's range, an ``--out`` that is a file) exits 2 naming it, and so does an existing
``.npz`` or ``.json`` without ``--force``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

from gridplan.core import tasks
from gridplan.core.render import ALL_OBS_KINDS
from gridplan.data.datasets import BEHAVIOUR_POLICIES, check_val_fraction, parse_budget
from gridplan.data.export import (
    VAL_FRACTION,
    check_seed,
    check_transitions,
    export_dataset,
    export_name,
    export_sequences,
    sequence_name,
    sidecar,
)


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
                        help="world (gridplan.core.world: default, g16-k8, g32-k64, g{N}-k{K}, "
                        "minigrid-doorkey-{N}x{N}[-t{T}]; the trainer's world key)")
    export.add_argument("--val-fraction", type=float, default=VAL_FRACTION,
                        help=f"the trainer's data.val_fraction (default {VAL_FRACTION})")
    export.add_argument("--out", type=Path, default=Path("."),
                        help="output folder (default: the working folder)")
    export.add_argument("--sequences", choices=ALL_OBS_KINDS, metavar="KIND",
                        help="write episode sequences of KIND observations (state, grid or "
                        "pixels) for multi-step training instead of transitions: arrays obs, "
                        "state, action, reward, pickup, door_opened, goal, is_first, is_last, "
                        "is_terminal, episode, step, val; obs[k+1] follows action[k]")
    export.add_argument("--force", action="store_true", help="replace existing files")
    return parser


def _checked(values, check, flag: str) -> tuple[list, list[str]]:
    """``check`` applied to each value: ``(results of the good ones, one error per bad one)``."""
    good, errors = [], []
    for value in values:
        try:
            good.append(check(value))
        except ValueError as err:
            errors.append(f"{flag} {value}: {err}")
    return good, errors


def _check_out(out: Path) -> None:
    """Raises ValueError if ``out`` or its nearest existing parent is a file, or that folder is
    not writable."""
    for folder in (out, *out.parents):
        if not folder.exists():
            continue
        if not folder.is_dir():
            what = f"--out {out}" if folder == out else f"--out {out}: {folder}"
            raise ValueError(f"{what} is a file; give a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"--out {out}: cannot write into {folder}")
        return


def _plan(args: argparse.Namespace) -> tuple[tasks.Task, list[tuple[str, int, int, Path]]]:
    """The task and the ``(policy, budget, seed, path)`` of every file to write, each once.

    Raises:
        ValueError: naming every bad argument, or an ``--out`` that is a file.
        FileExistsError: naming the files that exist when ``--force`` is not given.
    """
    found, errors = _checked([args.world], lambda w: tasks.get(args.task, world=w), "--world")
    budgets, budget_errors = _checked(
        args.budget, lambda budget: check_transitions(parse_budget(budget)), "--budget"
    )
    seeds, seed_errors = _checked(args.seed, check_seed, "--seed")
    errors += budget_errors + seed_errors
    errors += _checked([args.val_fraction], check_val_fraction, "--val-fraction")[1]
    if errors:
        raise ValueError("\n".join(errors))
    _check_out(args.out)
    task = found[0]
    def name(policy: str, n: int, seed: int) -> str:
        if args.sequences:
            return sequence_name(policy, n, seed, task, args.sequences)
        return export_name(policy, n, seed, task)

    jobs = {
        args.out / name(policy, n, seed): (policy, n, seed)
        for policy, n, seed in itertools.product(args.policy, budgets, seeds)
    }
    outputs = [p for path in jobs for p in (path, sidecar(path)) if p.exists()]
    if outputs and not args.force:
        raise FileExistsError(f"{', '.join(map(str, outputs))} already exist(s); pass --force")
    not_files = [str(p) for p in outputs if not p.is_file()]
    if not_files:
        raise ValueError(f"{', '.join(not_files)} exist(s) and not as a file; give another --out")
    return task, [(*job, path) for path, job in jobs.items()]


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status:
    0, or 2 when an argument is bad or a file would be replaced without ``--force`` (nothing
    is written then)."""
    args = build_parser().parse_args(argv)
    try:
        task, jobs = _plan(args)
        for policy, n, seed, path in jobs:
            if args.sequences:
                record = export_sequences(
                    path, policy, n, seed, task, args.sequences, args.val_fraction, args.force
                )
            else:
                record = export_dataset(
                    path, policy, n, seed, task, args.val_fraction, args.force
                )
            counts = record["event_counts"]
            print(
                f"{policy} {n} seed {seed}: {counts['episodes']} episodes, "
                f"{counts['pickups']} pickups, {counts['door_openings']} door openings, "
                f"{record['val_transitions']} validation transitions",
                flush=True,
            )
            print(f"exported: {path} {record['fingerprint']}", flush=True)
    except (ValueError, FileExistsError) as err:
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
