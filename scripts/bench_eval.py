"""One ``python -m eval`` command of this checkout against a git ref, interleaved: wall, user
and system time, and the same results.

Each run is a fresh process of ``python -m eval ARGS --json FILE`` with ``PYTHONPATH`` set
to one tree (this checkout, uncommitted edits included, or ``--ref``'s worktree, made in a
temporary folder and removed afterwards), alternating ours then ref's ``--pairs`` times. The
processes' CPU times come from ``resource.getrusage(RUSAGE_CHILDREN)``. It prints every
run, the median ratio of the wall times (ref over ours: above 1 is faster), each side's
system share of its wall time, the floor a run is measured against (its user CPU time: one
thread cannot finish sooner than the computation it runs) and whether every run reported
the same success rates (every value under a key naming ``success``).

    python scripts/bench_eval.py --ref fc87f01 -- --model my_mlp.py:make --levels success
    python scripts/bench_eval.py --ref fc87f01 -- --ckpt runs/x/best.ckpt --planner cem --seeds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "scripts"))

from against import ref_worktree  # noqa: E402


def run_eval(tree: Path, argv: list[str], out: Path, threads: str | None) -> dict:
    """One fresh ``python -m eval`` of ``tree``; its times and report."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    if threads is not None:
        argv = [*argv, "--threads", threads]
    command = [sys.executable, "-m", "eval", *argv, "--json", str(out), "--force"]
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output, _ = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"eval in {tree} failed:\n{output[-3000:]}")
    return {"wall": wall, "output": output, "report": json.loads(out.read_text())}


def successes(report) -> object:
    """The success rates of a report: the values under every key containing ``success``."""
    if isinstance(report, dict):
        out = {}
        for k, v in report.items():
            if "success" in k.lower():
                out[k] = v
            else:
                inner = successes(v)
                if inner:
                    out[k] = inner
        return out
    if isinstance(report, list):
        inner = [successes(v) for v in report]
        return inner if any(inner) else []
    return {}


def timed(tree: Path, argv: list[str], tmp: Path, threads: str | None) -> dict:
    """``run_eval`` with the child's CPU times (``resource.getrusage`` of the children)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run_eval(tree, argv, tmp / "report.json", threads)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["user"] = after.ru_utime - before.ru_utime
    out["system"] = after.ru_stime - before.ru_stime
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="main", help="git ref to time against (main)")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved pairs (3)")
    parser.add_argument("--threads", help="--threads handed to both sides (default: each's own)")
    parser.add_argument("--json", type=Path, help="write the runs here")
    parser.add_argument("eval_args", nargs=argparse.REMAINDER, help="-- then python -m eval's")
    args = parser.parse_args(argv)
    eval_args = [a for a in args.eval_args if a != "--"]
    if not eval_args or args.pairs < 1:
        parser.error("give python -m eval's arguments after -- and --pairs >= 1")
    load = [round(x, 2) for x in os.getloadavg()]
    rows = []
    with ref_worktree(args.ref) as (tree, commit), tempfile.TemporaryDirectory() as tmp:
        sides = {"ours": HERE, f"ref {commit}": tree}
        print(
            f"python -m eval {' '.join(eval_args)}: this checkout against {args.ref} "
            f"({commit}), {args.pairs} interleaved pairs"
        )
        for i in range(args.pairs):
            pair = {}
            for side, root in sides.items():
                run = timed(root, eval_args, Path(tmp), args.threads)
                pair[side] = {k: run[k] for k in ("wall", "user", "system")}
                pair[side]["successes"] = successes(run["report"])
                print(
                    f"pair {i + 1} {side:12} wall {run['wall']:7.1f} s  user "
                    f"{run['user']:7.1f} s  system {run['system']:6.1f} s "
                    f"({run['system'] / run['wall']:.0%} of wall)",
                    flush=True,
                )
            rows.append(pair)
    ours, ref = list(sides)
    ratios = [r[ref]["wall"] / r[ours]["wall"] for r in rows]
    same = len({json.dumps(r[s]["successes"], sort_keys=True) for r in rows for s in sides}) == 1
    for side in sides:
        walls = [r[side]["wall"] for r in rows]
        system = statistics.median(r[side]["system"] / r[side]["wall"] for r in rows)
        floor = statistics.median(r[side]["user"] for r in rows)
        print(
            f"{side:12} median wall {statistics.median(walls):7.1f} s, system "
            f"{system:.1%} of wall, floor (user CPU time) {floor:.1f} s"
        )
    print(
        f"wall-time ratio {ref} / ours: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}); success numbers identical: {same}; "
        f"load average {load} -> {[round(x, 2) for x in os.getloadavg()]}"
    )
    if args.json:
        args.json.write_text(json.dumps({"pairs": rows, "load_average": load}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
