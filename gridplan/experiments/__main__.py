"""``python -m gridplan.experiments`` (``gridplan-experiments``; from a checkout also
``python scripts/reproduce.py``): reproduce the DRPE paper's experiment groups, each table
beside the paper's numbers.

Examples::

    python -m gridplan.experiments                 # every group, the paper's protocol
    python -m gridplan.experiments --quick            # reduced seeds x episodes: minutes on 2 cores
    python -m gridplan.experiments --only e1,e5 --out results/ --device cuda
    python -m gridplan.experiments --only e2 --force  # recompute a finished group
    python -m gridplan.experiments --only e1,e2,e5,e6 --reading paper   # -> results/paper/...
    python -m gridplan.experiments --only e1,e5 --ties random   # -> results/project-ties-random/...
    python -m gridplan.experiments --launcher joblib --jobs 2   # e3's trainings as 2 Hydra jobs
    python -m gridplan.experiments --only e3,e4 --preset paper-error-scale  # -> its own folder
    python -m gridplan.experiments --only e3 --launcher slurm --jobs 8 \
        --launcher-override hydra.launcher.partition=gpu --device cuda

Each group writes ``<out>/<group>/`` (CSV + JSON of every number, ``table.md`` with the paper's
values beside ours and a verdict, PNG figures, ``done.json`` last). Finished groups are skipped
unless ``--force``. ``--reading NAME`` runs the controlled models and the planner under another
reading of the paper's ambiguous choices (``gridplan/core/readings.py``) into ``<out>/<NAME>/``,
never over the default's results; the learned models of e3 are shared by every reading.
``--ties first|random`` sets the planner's tie rule of that reading
(``gridplan.core.readings.with_ties``): a rule other than the reading's own runs as the reading
``<NAME>-ties-<rule>`` into its own folder (e3 evaluates its models under both rules anyway).
``--preset NAME`` trains the learned groups' models (e3, e4, e7) under a training preset
(``gridplan/experiments/presets.py``; ``paper-error-scale``: docs/PREREGISTERED.md Rule 2) into
``<out>/<NAME>/<group>``, never over the default's results.
``--launcher NAME`` sends e3's training groups (one vectorized group per job, ``--jobs`` of
them) through the Hydra launcher ``python -m train`` uses (``hydra/launcher=NAME``: joblib,
submitit_local, the SLURM preset ``slurm`` of ``configs/train/hydra/launcher/``, ...;
``gridplan/training/dispatch.py``); without it they train in worker processes here. The
models are the same either way, and finished groups are still skipped. See
``gridplan/experiments`` and, for the profiles' protocols, the spec files of
``configs/eval/protocols/``.
"""

from __future__ import annotations

import argparse
import sys

from gridplan.util.allocator import retain_freed_memory  # noqa: E402
from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)
retain_freed_memory()  # large temporaries stay mapped (gridplan.util.allocator)

from gridplan.core import readings  # noqa: E402
from gridplan.experiments import GROUPS, PROFILES, presets, run_groups  # noqa: E402
from gridplan.training.dispatch import Launcher  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gridplan.experiments",
        description="Regenerate the paper's tables and figures (groups: "
        + ", ".join(f"{name} = {g.title}" for name, g in GROUPS.items())
        + ").",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--only", metavar="GROUPS", help="comma-separated groups, e.g. e1,e5 (default: all)"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="reduced seeds x episodes and sweeps (same as --profile quick)",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="full",
        help="; ".join(f"{name}: {profile.summary}" for name, profile in PROFILES.items())
        + " (gridplan.experiments.profiles)",
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads, of this process and of each training job it launches; 0: "
        "gridplan.util.threads.default_threads, OMP_NUM_THREADS or 1. "
        "One by default: parallel reductions round differently with the thread count, and one "
        "thread gives the same numbers on every machine (OpenMP waits passively unless "
        "OMP_WAIT_POLICY is set, so more threads do not spin on a busy machine)",
    )
    p.add_argument("--out", default="results", help="results root folder")
    p.add_argument(
        "--reading",
        choices=readings.names(),
        default=readings.PROJECT.name,
        help="reading of the paper's ambiguous choices (gridplan.core.readings); any but the "
        "default writes under <out>/<reading>/",
    )
    p.add_argument(
        "--ties",
        choices=readings.CHOICES["ties"],
        default=None,
        help="the planner's rule among tied best first actions (default: the reading's; "
        "project and paper: first, docs/PREREGISTERED.md Rule 1); another rule than the "
        "reading's writes under <out>/<reading>-ties-<rule>/",
    )
    p.add_argument(
        "--preset",
        choices=tuple(presets.PRESETS),
        help="train the learned groups (e3, e4, e7) under this training preset "
        "(gridplan.experiments.presets) into <out>/<preset>/<group>",
    )
    p.add_argument(
        "--launcher",
        metavar="NAME",
        help="send the training groups to this Hydra launcher, one vectorized group per job "
        "(a hydra/launcher choice of python -m train: joblib, submitit_local, slurm, ...); "
        "default: worker processes on this machine",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="training groups (one job each) with --launcher; also joblib's n_jobs "
        "(default: one per usable core, at most one per 8 runs)",
    )
    p.add_argument(
        "--launcher-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Hydra override of the launch, e.g. hydra.launcher.partition=gpu (repeatable)",
    )
    p.add_argument("--force", action="store_true", help="recompute groups already finished")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--list", action="store_true", help="list the groups and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        for name, group in GROUPS.items():
            reads = f" (reuses {', '.join(group.reads)} when finished)" if group.reads else ""
            print(f"{name}  {group.title}{reads}")
        return 0
    if args.quick and args.profile not in ("full", "quick"):
        parser.error("--quick conflicts with --profile " + args.profile)
    profile = "quick" if args.quick else args.profile
    names = None
    if args.only is not None:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        if not names:
            parser.error(f"--only names no group; valid groups: {', '.join(GROUPS)}")
    if args.launcher is None and (args.jobs is not None or args.launcher_override):
        parser.error("--jobs and --launcher-override need --launcher")
    try:
        launcher = None
        if args.launcher is not None:
            launcher = Launcher(args.launcher, args.jobs, tuple(args.launcher_override))
        threads = configure_threads(args.threads or None)
        print(describe(threads), flush=True)
        status = run_groups(
            GROUPS,
            names,
            out=args.out,
            profile=profile,
            device=args.device,
            force=args.force,
            progress=not args.no_progress,
            threads=threads,
            reading=readings.with_ties(readings.get(args.reading), args.ties),
            launcher=launcher,
            preset=presets.get(args.preset) if args.preset else None,
        )
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    print(" ".join(f"{name}: {state}" for name, state in status.items()))
    return 1 if "failed" in status.values() else 0


if __name__ == "__main__":
    sys.exit(main())
