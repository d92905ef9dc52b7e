"""Ladder benchmark: the full decision ladder of one model beside today's ``python -m eval``.

Both run in one process on the same machine, interleaved (eval, ladder, eval, ladder, ...) so
a change of load hits both alike, at the default protocol of a built-in model
(``configs/eval/protocols/controlled.yaml``, paper §5.1: depth 4, 10 seeds x 30 episodes,
1000 held-out windows of H = 10): ``python -m eval``
(``gridplan.evaluation.ladder.paper_report``) computes the L1 prediction metrics and the
closed-loop success;
``gridplan.evaluate`` adds L4-L7, the WorldModelGym probe and, for models exposing it,
uncertainty. The cost ratio is ladder / eval of the medians per model (the target is at most
3x); the per-level seconds of the ladder come from its report.

    python scripts/bench_ladder.py                          # oracle, M(.35,.1), the example
    python scripts/bench_ladder.py --repeats 5 --json bench_ladder.json
    python scripts/bench_ladder.py --quick                  # a smoke run, seconds
    python scripts/bench_ladder.py --quick --models 'M(.35,.1)' --against main --pairs 4

Close other work first; the load average is recorded with the results.

``--against REF`` times the headline, the full ladder of the first of ``--models`` (runs per
second, after one untimed run), of this checkout against git ``REF`` in interleaved fresh
processes (``scripts/against.py``, docs/PERFORMANCE.md §13): the ratio ours / ref per pair,
the median, and a floor: the ladder cannot finish sooner than its closed-loop planner part,
at least (seeds x episodes x mean steps) decisions of ``4^D`` leaves x ``D`` transitions, at
the planner's floor rate (``scripts/floors.py``: one thread's ``randn`` rate over the normals a
transition draws for a noise model, the copy bandwidth over the bytes its leaf scoring touches
for the oracle; none for a plug-in planned through its own ``predict``). The other levels add
to that time without a floor of their own, so the ladder runs far below it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

# Run from any folder against this checkout, installed or not.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import against  # noqa: E402

import gridplan  # noqa: E402
from gridplan.core import tasks  # noqa: E402
from gridplan.evaluation.ladder import paper_report  # noqa: E402
from gridplan.evaluation.spec import load_spec  # noqa: E402
from gridplan.models.noise import NoiseModel, OracleModel  # noqa: E402
from gridplan.models.plugins import build, checked  # noqa: E402
from gridplan.util.jsonio import dumps  # noqa: E402

MODELS = {
    "oracle": lambda task, device: OracleModel(),
    "M(.35,.1)": lambda task, device: NoiseModel.controlled(0.35, 0.1),
    # Behind the contract checks on both sides, as python -m eval --model file.py:make runs it.
    "example plug-in": lambda task, device: checked(
        build(f"{ROOT / 'scripts' / 'example_model.py'}:make", {}, task, device), "example"
    ),
}


def _eval_today(model, name: str, spec, device) -> float:
    start = time.perf_counter()
    paper_report(model, {"name": name}, spec, device, progress=False)
    return time.perf_counter() - start


def _ladder(model, name: str, spec, device) -> tuple[float, dict]:
    seconds, report = _ladder_report(model, name, spec, device)
    return seconds, dict(report.timing)


def _ladder_report(model, name: str, spec, device):
    start = time.perf_counter()
    report = gridplan.evaluate(
        model, spec.replace(levels=None), device=device, model_info={"name": name}
    )
    return time.perf_counter() - start, report


def headline(name: str, spec, task, device) -> int:
    """``--against``'s run: the full ladder of model ``name`` per second after one untimed
    run, with the closed loop's planner transitions (a lower bound: every decision plans
    ``4^D`` leaves of ``D`` steps; episodes that end early plan no further)."""
    model = MODELS[name](task, device)
    _ladder_report(model, name, spec, device)
    seconds, report = _ladder_report(model, name, spec, device)
    loop = report.closed_loop
    decisions = len(loop["seeds"]) * loop["episodes"] * loop["mean_steps"]
    transitions = decisions * 4**spec.depth * spec.depth
    return against.emit(
        1 / seconds, "runs/s", f"the full ladder of {name}", planner_transitions=transitions
    )


def headline_floor(name: str, spec, task, device, heads: list[dict]) -> tuple | None:
    """The full ladder's floor in runs per second (the module's docstring) and what it is."""
    import floors

    planner = floors.planner_floor(MODELS[name](task, device), spec.depth, task)
    if planner is None:
        return None
    transitions = heads[0]["planner_transitions"]
    what = (
        f"its closed-loop planner's {transitions:,.0f} transitions at "
        f"{planner[0] / 1e6:.1f} M/s, {planner[1]}"
    )
    return planner[0] / transitions, what


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each (median kept)")
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--task", default="A")
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="the quick protocol, one repeat")
    p.add_argument("--json", metavar="PATH", help="write the results here")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    against.add_arguments(p, pairs=4)
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.json and Path(args.json).exists() and not args.force:
        p.error(f"{args.json} already exists; pass --force to overwrite it")
    protocol = load_spec("quick-controlled" if args.quick else "controlled").replace(
        depth=args.depth, task=args.task
    )
    repeats = 1 if args.quick else args.repeats
    task, device = tasks.get(args.task), torch.device(args.device)
    if args.headline:
        return headline(args.models[0], protocol, task, device)
    if args.against:
        name, child = args.models[0], against.child_argv(argv)
        return against.main_against(
            args, __file__, child, lambda heads: headline_floor(name, protocol, task, device, heads)
        )
    print(
        f"protocol {'quick' if args.quick else 'default'}: depth {args.depth}, "
        f"{len(protocol.seeds)} seeds x {protocol.episodes} episodes, {protocol.n_windows} "
        f"windows; {repeats} repeat(s); threads {torch.get_num_threads()}; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    rows = []
    for name in args.models:
        model = MODELS[name](task, device)
        # One untimed run of each warms caches (V* tables, anchor tables, imports).
        _eval_today(model, name, protocol, device)
        _ladder(model, name, protocol, device)
        today, ladder, levels = [], [], []
        for _ in range(repeats):
            today.append(_eval_today(model, name, protocol, device))
            seconds, timing = _ladder(model, name, protocol, device)
            ladder.append(seconds)
            levels.append(timing)
        t, lad = statistics.median(today), statistics.median(ladder)
        per_level = {k: statistics.median(x[k] for x in levels) for k in levels[0]}
        rows.append(
            {
                "model": name,
                "eval_s": t,
                "ladder_s": lad,
                "ratio": lad / t,
                "eval_runs_s": today,
                "ladder_runs_s": ladder,
                "ladder_levels_s": per_level,
            }
        )
        print(
            f"{name:<16} python -m eval {t:7.2f} s   full ladder {lad:7.2f} s   "
            f"ratio {lad / t:4.2f}x   ("
            + ", ".join(f"{k} {v:.2f}" for k, v in per_level.items())
            + ")"
        )
    worst = max(r["ratio"] for r in rows)
    print(f"worst ratio {worst:.2f}x (target <= 3x)")
    if args.json:
        out = {
            "protocol": protocol.to_dict(),
            "depth": args.depth,
            "task": task.name,
            "device": str(device),
            "threads": torch.get_num_threads(),
            "load_average": os.getloadavg()[0],
            "repeats": repeats,
            "rows": rows,
            "worst_ratio": worst,
        }
        Path(args.json).write_text(dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
