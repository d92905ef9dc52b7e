"""Time one tree's planner in this process: the worker of ``bench_planner.py --against``.

Version-agnostic: imports the planner and the noise model from whichever module layout the
``gridplan`` on ``sys.path`` has (the layer packages ``gridplan.planning`` / ``gridplan.models``
or the older flat modules ``gridplan.planner`` / ``gridplan.models``), so the same program times
the current tree and any git ref. Nothing of this checkout is put on the path: the caller
chooses the tree through ``PYTHONPATH``.

Plans ``--calls`` decisions (after one warm-up decision) on the root states saved in
``--roots`` (a ``torch.save`` of a ``(B, 12)`` float tensor) on ``--threads`` intra-op threads
(default one; ``0``: the settings the tree's command lines take by default, ``cli_defaults``;
``--busy``: beside a process spinning on one core), from a generator seeded with ``--seed``,
and prints one JSON line: the seconds
and CPU seconds (of the whole process: on a shared machine they leave out the time other
processes held the core) of each timed call, the model transitions (``B * 4^D * D``) per
second and per CPU second of their medians and per second of the fastest call, a SHA-256 of
every chosen action in call order (equal across trees exactly when their actions are
identical), the file ``gridplan`` was imported from and any ``gridplan`` module loaded from
elsewhere (there should be none).

    PYTHONPATH=/path/to/tree python scripts/planner_timing.py --roots roots.pt --depth 4
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


@contextlib.contextmanager
def busy_neighbour():
    """A process spinning on this process's last allowed CPU for the duration of the block
    (the neighbour of docs/PERFORMANCE.md §8)."""
    cpus = sorted(os.sched_getaffinity(0))
    proc = subprocess.Popen(
        [sys.executable, "-c", "while True: pass"],
        preexec_fn=lambda: os.sched_setaffinity(0, {cpus[-1]}),
    )
    try:
        time.sleep(0.3)
        yield
    finally:
        proc.kill()
        proc.wait()


def _modules() -> tuple:
    """The tree's planner and noise-model modules, by the layout of the ``gridplan`` package
    that imported: its directory decides, because a missing submodule could still resolve
    elsewhere (an editable install maps ``gridplan``'s children to its own checkout)."""
    import gridplan

    if (Path(gridplan.__file__).parent / "planning").is_dir():
        names = ("gridplan.planning.planner", "gridplan.models.noise")
    else:
        names = ("gridplan.planner", "gridplan.models")
    return tuple(importlib.import_module(name) for name in names)


def _foreign_modules() -> list[str]:
    """Loaded ``gridplan`` modules from outside the package directory of ``gridplan``."""
    import gridplan

    home = Path(gridplan.__file__).parent
    return sorted(
        name
        for name, module in sys.modules.items()
        if name.startswith("gridplan.")
        and getattr(module, "__file__", None)
        and not Path(module.__file__).is_relative_to(home)
    )


def build_model(models, name: str):
    """``"oracle"`` or ``"M(sigma_r,sigma_i)"`` (e.g. ``"M(.35,.1)"``) from ``models``."""
    if name == "oracle":
        return models.OracleModel()
    if name.startswith("M(") and name.endswith(")"):
        try:
            sigma_r, sigma_i = (float(v) for v in name[2:-1].split(","))
        except ValueError:
            raise SystemExit(f"model {name!r}: expected M(sigma_r,sigma_i)") from None
        return models.NoiseModel.controlled(sigma_r, sigma_i)
    raise SystemExit(f"unknown model {name!r}: oracle or M(sigma_r,sigma_i)")


def cli_defaults() -> None:
    """Take the thread and allocator settings that the tree's command lines take when given
    none, before torch is imported: where the tree has ``gridplan.util.threads``, its wait
    policy and ``configure_threads()``'s default count (and ``gridplan.util.allocator``'s
    setting where it has one); otherwise torch's own defaults, which the command lines of
    such a tree kept. The caller leaves ``OMP_WAIT_POLICY`` and ``OMP_NUM_THREADS`` unset."""
    import gridplan

    # Only the tree's own modules: an editable install would fill in a missing one.
    util = Path(gridplan.__file__).parent / "util"
    if not (util / "threads.py").is_file():
        return
    threads = importlib.import_module("gridplan.util.threads")
    threads.set_wait_policy()
    if (util / "allocator.py").is_file():
        importlib.import_module("gridplan.util.allocator").retain_freed_memory()
    threads.configure_threads(None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roots", required=True, help="torch.save file of (B, 12) root states")
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--model", default="M(.35,.1)", help="oracle or M(sigma_r,sigma_i)")
    parser.add_argument("--calls", type=int, default=5, help="timed decisions (after a warm-up)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the planner's generator")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (1); 0: the tree's command-line defaults (cli_defaults)",
    )
    parser.add_argument("--busy", action="store_true", help="beside a process spinning on one core")
    args = parser.parse_args(argv)
    if min(args.calls, args.depth) < 1 or args.threads < 0:
        parser.error("--calls and --depth must be >= 1, --threads >= 0")

    if args.threads == 0:
        cli_defaults()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    import gridplan

    planner_module, models = _modules()
    root = torch.load(args.roots)
    planner = planner_module.Planner(build_model(models, args.model), args.depth)
    gen = torch.Generator().manual_seed(args.seed)
    digest = hashlib.sha256()
    digest.update(planner.act(root, gen).numpy().tobytes())
    seconds, cpu_seconds = [], []
    with busy_neighbour() if args.busy else contextlib.nullcontext():
        for _ in range(args.calls):
            start, cpu_start = time.perf_counter(), time.process_time()
            actions = planner.act(root, gen)
            seconds.append(time.perf_counter() - start)
            cpu_seconds.append(time.process_time() - cpu_start)
            digest.update(actions.numpy().tobytes())
    transitions = root.shape[0] * 4**args.depth * args.depth
    result = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "transitions_per_s": transitions / statistics.median(seconds),
        "transitions_per_cpu_s": transitions / statistics.median(cpu_seconds),
        "best_transitions_per_s": transitions / min(seconds),
        "actions_sha256": digest.hexdigest(),
        "gridplan": gridplan.__file__,
        "foreign_modules": _foreign_modules(),
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
