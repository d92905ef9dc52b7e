"""Environment-step benchmark: ``gridplan.core.env.step`` beside a plain Python loop and gymnax.

Times the batched true step (validated ``step`` and unvalidated ``transition``) on 1 thread
at several batch sizes, the per-episode reference step of ``gridplan.planning.reference`` (a plain
Python loop over states) and, where ``jax`` and ``gymnax`` import (here, or in the Python
given by ``--gymnax-python``, e.g. a separate venv), gymnax's jitted, vmapped FourRooms step
pinned to one core, all in one run; prints steps per second and the ratios. ``--busy`` adds
``env.step`` rows at 1 and 2 threads beside a neighbour process spinning on one core.

    python scripts/bench_env.py                                   # gymnax where importable
    python scripts/bench_env.py --gymnax-python /tmp/gymnax-venv/bin/python --busy --json env.json

gymnax's step does other work (FourRooms: a 13x13 maze, one agent, slippery moves, auto-reset);
both are the step a batched agent loop calls. Close other work first: the load average is
recorded with the results.

The floor: this machine's copy bandwidth (``bench_planner.memory_bandwidth``, bytes read +
written) over the bytes a step must move per state, its state read and its next state written
(2 x 12 float32); the step also writes rewards and flags and reads the world's tables, so the
floor is a bound, not a target. ``--against REF`` times the headline, ``env.step`` on
``HEADLINE_SIZE`` states, of this checkout against git ``REF`` in interleaved fresh processes
(``scripts/against.py``, docs/PERFORMANCE.md §13) and prints the ratio ours / ref per pair, the
median and the floor:

    python scripts/bench_env.py --against main --pairs 8 --min-time 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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

import torch  # noqa: E402

from gridplan.core.env import reset, step, transition  # noqa: E402
from gridplan.core.tasks import TASK_A  # noqa: E402
from gridplan.planning.reference import REF_DISTRACTOR_MOVES, ref_decode, ref_step  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402

#: Batch sizes of the step rows; the must-show comparison is at 1e5.
SIZES = (1_000, 10_000, 100_000, 1_000_000)
HEADLINE_SIZE = 100_000
#: States stepped by the plain Python loop (its rate does not depend on the count).
PYTHON_STATES = 20_000
DEFAULT_GYMNAX_PYTHON = "/tmp/gymnax-venv/bin/python"

#: Run by the gymnax interpreter: ``argv = sizes min_time``; prints one JSON line.
GYMNAX_WORKER = r"""
import json, sys, time
import jax, gymnax
sizes, min_time = [int(v) for v in sys.argv[1].split(",")], float(sys.argv[2])
env, params = gymnax.make("FourRooms-misc")
reset = jax.vmap(env.reset, in_axes=(0, None))
step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
out = {"jax": jax.__version__, "devices": [str(d) for d in jax.devices()], "rows": []}
for n in sizes:
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    _, state = reset(keys, params)
    actions = jax.random.randint(jax.random.PRNGKey(1), (n,), 0, 4)
    start = time.perf_counter()
    jax.block_until_ready(step(keys, state, actions, params))
    compile_s = time.perf_counter() - start
    times = []
    while sum(times) < min_time or len(times) < 5:
        start = time.perf_counter()
        state = step(keys, state, actions, params)[1]
        jax.block_until_ready(state)
        times.append(time.perf_counter() - start)
    times.sort()
    out["rows"].append({"states": n, "steps_per_s": n / times[len(times) // 2],
                        "compile_s": compile_s})
print(json.dumps(out))
"""


def gymnax_rows(python: str | None, sizes, min_time: float) -> dict:
    """gymnax's FourRooms step per batch size, in ``python`` (or this interpreter where jax and
    gymnax import), pinned to one CPU with XLA on one thread; ``{"skipped": why}`` if neither
    has them."""
    candidates = [p for p in (python, sys.executable) if p]
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
        "intra_op_parallelism_threads=1"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    cpu = sorted(os.sched_getaffinity(0))[0] if hasattr(os, "sched_getaffinity") else None
    errors = []
    for interpreter in candidates:
        if not Path(interpreter).exists():
            errors.append(f"{interpreter}: not found")
            continue
        done = subprocess.run(
            [interpreter, "-c", GYMNAX_WORKER, ",".join(map(str, sizes)), str(min_time)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None,
        )
        if done.returncode == 0:
            return {"python": interpreter, **json.loads(done.stdout.strip().splitlines()[-1])}
        errors.append(f"{interpreter}: {done.stderr.strip().splitlines()[-1:]}")
    return {"skipped": "; ".join(errors) or "no interpreter with jax and gymnax"}


def torch_rows(sizes, min_time: float, functions=(("step", step), ("transition", transition))):
    """``functions`` (default ``env.step`` and ``env.transition``): steps per second per batch
    size, ``[{"function", "states", "steps_per_s"}]``."""
    rows = []
    cpu = torch.device("cpu")
    for n in sizes:
        gen = torch.Generator().manual_seed(0)
        state = reset(n, gen)
        action = torch.randint(0, 4, (n,), generator=gen)
        for name, fn in functions:

            def call(fn=fn, state=state, action=action, gen=gen):
                return fn(state, action, gen)

            seconds = BENCH.median_seconds(call, cpu, min_time)
            rows.append({"function": name, "states": n, "steps_per_s": n / seconds})
    return rows


def python_loop_rate(n: int = PYTHON_STATES) -> float:
    """Steps per second of ``gridplan.planning.reference.ref_step``, one state at a time."""
    gen = torch.Generator().manual_seed(0)
    states = [ref_decode(row) for row in reset(n, gen).tolist()]
    actions = torch.randint(0, 4, (n,), generator=gen).tolist()
    moves = torch.randint(0, len(REF_DISTRACTOR_MOVES), (n,), generator=gen).tolist()
    cells = [tuple(c) for c in torch.randint(0, 8, (n, 2), generator=gen).tolist()]
    start = time.perf_counter()
    for s, a, m, c in zip(states, actions, moves, cells, strict=True):
        ref_step(s, a, m, c, TASK_A)
    return n / (time.perf_counter() - start)


def floor() -> tuple[float, str]:
    """States per second a step cannot pass here, and what it is (the module's docstring)."""
    bandwidth = BENCH.memory_bandwidth(torch.device("cpu"))
    state = reset(1, torch.Generator().manual_seed(0))
    touched = 2 * state.shape[1] * state.element_size()
    return bandwidth / touched, (
        f"copy bandwidth {bandwidth / 1e9:.1f} GB/s / {touched} B per state, read + written"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=BENCH.int_list, default=list(SIZES), help="batch sizes (states)"
    )
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds timed per row")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (default 1: one core)"
    )
    parser.add_argument(
        "--gymnax-python",
        default=os.environ.get("GYMNAX_PYTHON", DEFAULT_GYMNAX_PYTHON),
        help="a Python with jax and gymnax (default $GYMNAX_PYTHON or "
        f"{DEFAULT_GYMNAX_PYTHON}); this interpreter is tried too",
    )
    parser.add_argument("--no-gymnax", action="store_true", help="skip the gymnax rows")
    parser.add_argument(
        "--busy", action="store_true", help="env.step at 1 and 2 threads beside a busy neighbour"
    )
    parser.add_argument("--quick", action="store_true", help="small sanity run")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    against.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.min_time = [1_000, 100_000], 0.2
    try:
        threads = describe(configure_threads(args.threads))
    except ValueError as err:
        parser.error(str(err))
    if args.headline:
        (row,) = torch_rows([HEADLINE_SIZE], args.min_time, (("step", step),))
        return against.emit(row["steps_per_s"], "steps/s", f"env.step, {HEADLINE_SIZE:,} states")
    if args.against:
        return against.main_against(args, __file__, against.child_argv(argv), lambda _: floor())
    print(threads)
    info = BENCH.machine(torch.device("cpu"))
    print(f"machine: {info}")

    result: dict = {"machine": info, "torch": torch_rows(args.sizes, args.min_time)}
    result["python_loop_steps_per_s"] = python_loop_rate()
    if not args.no_gymnax:
        result["gymnax"] = gymnax_rows(args.gymnax_python, args.sizes, args.min_time)
    gym = {r["states"]: r["steps_per_s"] for r in result.get("gymnax", {}).get("rows", [])}
    heads = ("steps/s", "gymnax", "ratio", "x loop")
    print(f"\n{'function':11} {'states':>9} " + " ".join(f"{h:>9}" for h in heads))
    for r in result["torch"]:
        other = gym.get(r["states"])
        r["ratio_to_gymnax"] = None if other is None else r["steps_per_s"] / other
        r["ratio_to_python_loop"] = r["steps_per_s"] / result["python_loop_steps_per_s"]
        ratio = "-" if other is None else f"{r['ratio_to_gymnax']:.2f}"
        print(
            f"{r['function']:11} {r['states']:>9,} {BENCH.fmt_rate(r['steps_per_s']):>9} "
            f"{BENCH.fmt_rate(other):>9} {ratio:>9} {r['ratio_to_python_loop']:>9.0f}"
        )
    loop = BENCH.fmt_rate(result["python_loop_steps_per_s"])
    print(f"plain Python loop (gridplan.planning.reference.ref_step): {loop} steps/s")
    result["floor_steps_per_s"], what = floor()
    steps = [r for r in result["torch"] if r["function"] == "step"]
    best = max(steps, key=lambda r: r["steps_per_s"])
    print(
        f"floor: {BENCH.fmt_rate(result['floor_steps_per_s'])} states/s ({what}); the fastest "
        f"env.step row ({best['states']:,} states) at "
        f"{best['steps_per_s'] / result['floor_steps_per_s']:.1%} of it"
    )
    if "skipped" in result.get("gymnax", {}):
        print(f"gymnax skipped: {result['gymnax']['skipped']}")
    if args.busy:
        gen = torch.Generator().manual_seed(0)
        state = reset(HEADLINE_SIZE, gen)
        action = torch.randint(0, 4, (HEADLINE_SIZE,), generator=gen)
        work = {"env.step 1e5": (lambda: step(state, action, gen), HEADLINE_SIZE)}
        result["busy"] = BENCH.busy_rows(work, torch.device("cpu"), args.min_time)
        print()
        BENCH.print_busy(result["busy"])
    if hasattr(os, "getloadavg"):
        info["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
