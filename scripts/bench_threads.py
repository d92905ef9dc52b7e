"""Thread settings per workload: the measurement behind ``gridplan.util.threads.default_threads``.

Each workload runs in fresh processes (OpenMP reads its wait policy once, at start-up) under
every setting, ``1`` thread, ``2`` threads with ``OMP_WAIT_POLICY=PASSIVE`` (main's default
before this measurement) and ``2`` threads with the policy unset (OpenMP's own: spin, then
sleep), the settings rotated within each round so that no setting always runs first; then the
same rounds beside a busy neighbour (a process spinning on one core). It prints each
workload's median rate per setting and its ratio to the default the command lines now pick,
beside the workload's floor measured in the same run (the random-number rate of the noise
model, the per-layer matmul ceiling of the MLPs), and the load average before and after.

Workloads (depth 4, the evaluation protocol's 300 roots unless stated):

* ``fused``: the fused planner, ``M(.35, .1)``, 4,000 episodes (the ``--against`` workload);
* ``mlp-tree``: the 16-256-256-12 SiLU MLP as a ``LearnedWorldModel`` (the shared-prefix tree);
* ``mlp-plugin``: the same network as a plain ``torch.nn`` plug-in that declares nothing (the
  generic path: one ``predict`` call of 76,800 rows per imagined step).

``--against REF`` times the first of ``--workloads`` at setting ``1`` (one thread, passive)
of this checkout against git ``REF`` in interleaved fresh processes (``scripts/against.py``,
docs/PERFORMANCE.md §13): the ratio ours / ref per pair, the median and the same floor.

    python scripts/bench_threads.py --rounds 4 --json threads.json
    python scripts/bench_threads.py --workloads fused --rounds 8 --neighbour busy
    python scripts/bench_threads.py --workloads mlp-tree --against main --pairs 8
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import against  # noqa: E402

#: ``name -> (threads, OMP_WAIT_POLICY or None for unset)``.
SETTINGS = {"1": (1, "PASSIVE"), "2-passive": (2, "PASSIVE"), "2-unset": (2, None)}
#: The setting of main before this measurement (``configure_threads`` then took the cores).
PREVIOUS = "2-passive"
WORKLOADS = ("fused", "mlp-tree", "mlp-plugin")
#: Timed decisions per process, after one warm-up decision.
CALLS = {"fused": 4, "mlp-tree": 3, "mlp-plugin": 2}


def plugin_network(hidden: int = 256):
    """The plug-in row's network: state and one-hot action -> 2 SiLU layers -> delta."""
    from torch import nn

    return nn.Sequential(
        nn.Linear(16, hidden),
        nn.SiLU(),
        nn.Linear(hidden, hidden),
        nn.SiLU(),
        nn.Linear(hidden, 12),
    )


class PluginMLP:
    """A user's MLP plug-in: ``predict`` through ``nn.Module`` with fresh activations."""

    def __init__(self) -> None:
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.net = plugin_network()
        self.eye = torch.eye(4)

    def predict(self, state, action, generator):
        import torch

        with torch.no_grad():
            delta = self.net(torch.cat([state, self.eye[action]], dim=1))
            return (state + delta).clamp(0.0, 1.0)


def worker(name: str, calls: int) -> dict:
    """Time ``calls`` decisions of workload ``name`` in this process; its rate per second."""
    import hashlib

    import torch

    from gridplan.models.noise import NoiseModel
    from gridplan.planning.closed_loop import start_states
    from gridplan.planning.planner import Planner

    episodes = 4000 if name == "fused" else 300
    if name == "fused":
        model = NoiseModel.controlled(0.35, 0.1)
    elif name == "mlp-tree":
        from bench_planner import learned_model

        model = learned_model(torch.device("cpu"))
    else:
        model = PluginMLP()
    planner = Planner(model, 4)
    root = start_states(range(10), episodes // 10)
    gen = torch.Generator().manual_seed(1)
    digest = hashlib.sha256(planner.act(root, gen).numpy().tobytes())
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        digest.update(planner.act(root, gen).numpy().tobytes())
        seconds.append(time.perf_counter() - start)
    return {
        "transitions_per_s": episodes * 4**4 * 4 / statistics.median(seconds),
        "threads": torch.get_num_threads(),
        "actions_sha256": digest.hexdigest(),
    }


def run_worker(name: str, setting: str) -> dict:
    threads, policy = SETTINGS[setting]
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_NUM_THREADS"] = str(threads)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    command = [sys.executable, __file__, "--worker", name, "--calls", str(CALLS[name])]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"worker {name} {setting} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def floors() -> dict:
    """Each workload's floor in transitions/s on one thread, measured here."""
    import torch
    from bench_planner import learned_model, matmul_ceiling, mlp_flop, normal_rate

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    net = learned_model(cpu).net
    ceiling = matmul_ceiling(cpu, net, min_time=0.2)["flop_per_s"] / mlp_flop(net)
    # The fused noise model draws 6 normals per transition (docs/PERFORMANCE.md §1).
    return {"fused": normal_rate(cpu) / 6, "mlp-tree": ceiling, "mlp-plugin": ceiling}


#: What each workload's floor is (``floors``).
FLOOR_IS = {
    "fused": "one thread's randn rate / 6 normals per transition",
    "mlp-tree": "matmul ceiling of the layers / FLOP per transition",
    "mlp-plugin": "matmul ceiling of the layers / FLOP per transition",
}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(workloads, rounds: int, neighbours) -> list[dict]:
    from bench_planner import busy_neighbour

    rows = []
    for neighbour in neighbours:
        spinner = busy_neighbour() if neighbour == "busy" else contextlib.nullcontext()
        with spinner:
            for r in range(rounds):
                order = list(SETTINGS)[r % len(SETTINGS) :] + list(SETTINGS)[: r % len(SETTINGS)]
                for name in workloads:
                    for setting in order:
                        out = run_worker(name, setting)
                        rows.append(
                            {
                                "workload": name,
                                "neighbour": neighbour,
                                "round": r,
                                "setting": setting,
                                **out,
                            }
                        )
                        print(
                            f"{neighbour:5} round {r + 1} {name:10} {setting:9} "
                            f"{out['transitions_per_s'] / 1e6:7.2f} M/s",
                            flush=True,
                        )
    return rows


def summary(rows: list[dict], default: str, floor: dict) -> list[dict]:
    """Median rate per (workload, neighbour, setting), its ratio to ``default`` and to
    ``PREVIOUS`` (per-round ratios, median), and to the floor."""
    out = []
    keys = sorted({(r["workload"], r["neighbour"]) for r in rows})
    for workload, neighbour in keys:
        mine = [r for r in rows if (r["workload"], r["neighbour"]) == (workload, neighbour)]
        by = {
            s: {r["round"]: r["transitions_per_s"] for r in mine if r["setting"] == s}
            for s in SETTINGS
        }
        for setting, rates in by.items():
            vs_default = [rates[k] / by[default][k] for k in rates]
            out.append(
                {
                    "workload": workload,
                    "neighbour": neighbour,
                    "setting": setting,
                    "median": statistics.median(rates.values()),
                    "min": min(rates.values()),
                    "max": max(rates.values()),
                    "ratio_to_default": statistics.median(vs_default),
                    "floor": floor.get(workload),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per neighbour (4)")
    parser.add_argument(
        "--neighbour",
        choices=("both", "quiet", "busy"),
        default="both",
        help="without, beside a busy process, or both (default)",
    )
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    against.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        out = worker(args.worker, args.calls)
        if args.headline:
            what = f"{args.worker}, {args.calls} decisions, setting 1"
            return against.emit(out["transitions_per_s"], "transitions/s", what)
        print(json.dumps(out))
        return 0
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown or args.rounds < 1 or not workloads:
        parser.error(f"unknown workloads {unknown} (valid: {', '.join(WORKLOADS)}) or rounds < 1")
    from gridplan.util.threads import default_threads, set_wait_policy

    set_wait_policy()  # this process only measures the floors, on one thread
    if args.against:
        name = workloads[0]
        child = ["--worker", name, "--calls", str(CALLS[name]), "--headline"]
        env = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        return against.main_against(
            args, __file__, child, lambda _: (floors()[name], FLOOR_IS[name]), env
        )
    default = "1" if default_threads() == 1 else "2-passive"
    before = load()
    floor = floors()
    neighbours = ("quiet", "busy") if args.neighbour == "both" else (args.neighbour,)
    rows = measure(workloads, args.rounds, neighbours)
    table = summary(rows, default, floor)
    print(
        f"\n{'workload':10} {'neighbour':9} {'setting':9} {'median':>8} {'range':>15} "
        f"{'/ default':>9} {'/ floor':>7}   (M transitions/s; default = {default}, "
        f"main's was {PREVIOUS})"
    )
    for s in table:
        print(
            f"{s['workload']:10} {s['neighbour']:9} {s['setting']:9} {s['median'] / 1e6:8.2f} "
            f"{s['min'] / 1e6:7.2f}-{s['max'] / 1e6:<7.2f} {s['ratio_to_default']:9.3f} "
            f"{s['median'] / s['floor']:7.1%}"
        )
    print(
        "floors (1 thread, M transitions/s): "
        + ", ".join(f"{k} {v / 1e6:.2f}" for k, v in floor.items())
    )
    print(f"load average {before} -> {load()}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": rows,
                    "summary": table,
                    "floors": floor,
                    "load_average": before,
                    "load_average_after": load(),
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
