"""Sequential vs vectorized training of the same K world-model runs, side by side.

For each K the same K runs (seeds 0..K-1 of the default 20k balanced uniform run, every
run exactly ``--epochs`` epochs: ``trainer.min_epochs = max_epochs``, so both sides train
the same total epochs) are trained twice, each time in a fresh process:

- **sequential**: ``train.vectorize=false``, ``gridplan.training.runs.train`` one run after another
  (each with its own Lightning trainer) in one process;
- **vectorized**: what ``python -m train -m seed=...`` does by default: vectorized groups
  (``gridplan.training.vectorized``), one worker process per core (``train.workers`` unset; at most
  one per run); ``--workers 1`` trains them as one stack in one process;
- **baseline** (with ``--baseline PATH``): both sides of another checkout (the previous
  main), run by that checkout's own copy of this script, interleaved with the two others
  (``baseline_sequential``, ``baseline``); the sequential and vectorized rows then give their
  ratio to the baseline's (baseline wall / wall).

Both sides run the threads ``python -m train`` gives them (one per run alone; a group in one
process takes the idle cores its stacked step pays for,
``gridplan.training.vectorized.group_threads``; ``--threads`` sets every side's count
instead) and the passive OpenMP wait policy of ``python -m train``; ``--repeats N`` runs
each side N times, interleaved, and reports the median; then per K the sides' CPU times
(every process's, children included) and the medians of the pairs' CPU-time ratios, which
move less with a shared machine's load than wall time does.

Both write every run's folder, checkpoints, metrics and TensorBoard scalars; neither draws
the dashboard images (``trainer.figures_every_n_epochs=0``: Matplotlib renders, the same work
on both sides). Reported per row: wall time, training transitions per second (epochs x
training rows, summed over runs, per wall second), peak memory (the process's resident
high-water mark above its level after imports; on CUDA the peak allocated device memory) and
the speedup (sequential / vectorized wall time). Then the compute floor: the FLOPs of one
member's training step and this machine's measured matmul rate on exactly those shapes, on
one thread (timed at the end, and in each vectorized run's own process right after its
training: on a shared machine the second is the reading, the load drifting between the runs
and the end), and the bare step: one stacked training step (forward, loss, backward, AdamW)
with no Lightning, data loading or validation around it, also on one thread. The vectorized
side is set against the floor twice: its wall time x the cores it held, and its CPU time
(under the passive policy a waiting thread sleeps, so the CPU time may be less).
``--world`` trains in another world (``gridplan.core.world``); the MLP's input and output
layers then have its width (``widths_of``), and so do the floor's shapes.

Then one row per latent family and observation kind (``model=latent_recon|jepa
obs=grid|pixels``, ``gridplan.training.latent_module``): one run of the same budget and epochs
trained alone in a fresh process (``--repeats`` times: the median), its wall time and
training transitions per second (observations drawn from the logged states in every step, as
training does; ``--latent-obs`` picks the kinds, empty for none).

Usage::

    python scripts/bench_training.py                  # K = 1, 5, 10, 20, 5 epochs
    python scripts/bench_training.py --quick          # K = 1, 5, 2 epochs (a minute or two)
    python scripts/bench_training.py --json out.json  # rows plus a speedup per K
    python scripts/bench_training.py --repeats 3        # medians of 3 interleaved runs
    python scripts/bench_training.py --baseline ../main  # and the previous main's vectorized side
    python scripts/bench_training.py --workers 1        # the vectorized side as one stack
    python scripts/bench_training.py --quick --world g8-k64  # in a world of width S = 136
    python scripts/bench_training.py --device cuda
    python scripts/bench_training.py --quick --ks 1 --latent-obs pixels   # latent rows: pixels
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from gridplan.util.threads import (  # noqa: E402
    available_cpus,
    configure_threads,
    intra_op_threads,
    set_wait_policy,
    training_threads,
)

set_wait_policy()  # as ``python -m train`` does, before torch is imported (gridplan.util.threads)

#: MLP widths of the default model: (input, hidden..., output).
WIDTHS = (16, 256, 256, 12)
BATCH = 256
#: Latent families with a row each (``configs/train/model/``).
LATENT_FAMILIES = ("latent_recon", "jepa")


def widths_of(state_dim: int) -> tuple[int, ...]:
    """The default model's widths in a world of state width ``S``: ``(S + 4, 256, 256, S)``."""
    return (state_dim + WIDTHS[0] - WIDTHS[-1], *WIDTHS[1:-1], state_dim)


def overrides(seed: int, args, out: Path, vectorize: bool, latent: str | None = None) -> list[str]:
    """A run's overrides; ``latent`` ``"<family>:<obs>"`` makes it a latent family's run."""
    accelerator = "gpu" if args.device.startswith("cuda") else "cpu"
    family = []
    if latent:
        model, obs = latent.split(":")
        family = [f"model={model}", f"obs={obs}"]
    # Chosen threads are every training job's (gridplan.training.runs.job_threads).
    threads = [f"threads={args.threads}"] if args.threads else []
    return [
        *family,
        *threads,
        f"seed={seed}",
        f"data.budget={args.budget}",
        f"trainer.max_epochs={args.epochs}",
        f"trainer.min_epochs={args.epochs}",
        "trainer.figures_every_n_epochs=0",
        "trainer.progress_bar=false",
        f"trainer.accelerator={accelerator}",
        f"train.vectorize={str(vectorize).lower()}",
        f"train.workers={args.workers or 'null'}",
        f"out_dir={out / 'runs'}",
        f"data.cache_dir={out / 'cache'}",
        f"world={args.world}",
    ]


def worker(args) -> dict:
    """One measurement in this (fresh) process: train K runs one way, report the numbers."""
    import logging
    import warnings

    import torch
    from joblib.externals.loky import get_reusable_executor

    from gridplan.training.config import compose
    from gridplan.training.dispatch import Launcher
    from gridplan.training.runs import new_run_dir, train_all
    from gridplan.training.vectorized import auto_workers

    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    configure_threads(training_threads(args.threads or None))
    out = Path(args.out)
    vectorize = args.worker == "vectorized"
    latent = args.worker.split("latent:", 1)[1] if args.worker.startswith("latent:") else None
    cfgs = [compose(overrides(s, args, out, vectorize, latent)) for s in range(args.k)]
    processes = auto_workers(cfgs[0], args.k) if vectorize else 1
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start, cpu = time.perf_counter(), cpu_seconds()
    # The runs alone one after another in this process; the groups as python -m train sends them.
    record_dir, _ = new_run_dir(out / "runs", "groups")  # where its groups' group.json go
    results = train_all(
        cfgs,
        progress=False,
        record_dir=record_dir,
        launcher=None if vectorize else Launcher("basic"),
    )
    get_reusable_executor().shutdown(wait=True)  # joblib's workers end: their CPU time counts
    wall = time.perf_counter() - start
    cpu = cpu_seconds() - cpu
    epochs = transitions = 0
    for metrics, artifacts in results:
        summary = json.loads(Path(artifacts["metrics"]).read_text())
        epochs += metrics["epochs"]
        transitions += metrics["epochs"] * summary["dataset"]["train_transitions"]
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:  # the largest process: this one, or a worker
        rss = max(resource.getrusage(who).ru_maxrss for who in (SELF, CHILDREN))
        peak = (rss - base_rss) / 1024
    floor = None
    if vectorize:  # timed in this process right after the run: a shared machine's load drifts
        from gridplan.core import world as worlds

        widths = widths_of(worlds.get(args.world).state_dim)
        with intra_op_threads(1):
            floor = matmul_floor(args.k, args.device, widths=widths)["seconds_per_step"]
    return {
        "mode": args.worker,
        "K": args.k,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "epochs": epochs,
        "transitions": transitions,
        "transitions_per_s": round(transitions / wall),
        "peak_MB": round(peak, 1),
        "threads": recorded_threads(record_dir) if vectorize else torch.get_num_threads(),
        "processes": processes,
        "floor_s_per_step": floor,
    }


SELF, CHILDREN = resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN


def recorded_threads(record_dir: Path) -> int:
    """The most torch threads a vectorized group of this run trained with: the
    ``group.json`` files of its launch under ``record_dir`` (``gridplan.training.runs.
    job_threads`` picks them)."""
    records = list(record_dir.glob("*/group.json"))
    if not records:
        raise SystemExit(f"no group.json under {record_dir}")
    return max(json.loads(r.read_text())["threads"] for r in records)


def cpu_seconds() -> float:
    """CPU time of this process and its finished worker processes."""
    return sum(
        u.ru_utime + u.ru_stime for u in (resource.getrusage(who) for who in (SELF, CHILDREN))
    )


#: The baseline checkout's sides: each is that checkout's own run of the side named.
BASELINE_SIDES = {"baseline_sequential": "sequential", "baseline": "vectorized"}


def measure(mode: str, k: int, args, out: Path) -> dict:
    """One side of one K in a fresh process; modes ``baseline_sequential`` and ``baseline``
    are the sequential and vectorized sides of the checkout ``--baseline`` (its own
    ``scripts/bench_training.py`` and ``gridplan``)."""
    script, cwd = Path(__file__), REPO
    if mode in BASELINE_SIDES:
        cwd = Path(args.baseline).resolve()
        script, mode = cwd / "scripts" / "bench_training.py", BASELINE_SIDES[mode]
    cmd = [sys.executable, str(script), "--worker", mode, "--k", str(k), "--out", str(out)]
    cmd += ["--epochs", str(args.epochs), "--budget", args.budget, "--device", args.device]
    cmd += ["--world", args.world]
    cmd += ["--threads", str(args.threads), "--workers", str(args.workers)]
    cmd += ["--latent-obs", args.latent_obs]
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if done.returncode:
        raise SystemExit(f"{mode} K={k} ({cwd}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_pair(k: int, args, out: Path) -> list[dict]:
    """Both sides of one K (and the baseline's two sides with ``--baseline``), ``--repeats``
    times, interleaved (sequential, vectorized, baseline_sequential, baseline, sequential,
    ...), so that a slow spell of a shared machine falls on every side; each side's row is
    its median-time run, with every run's wall time in run order in ``walls_s`` (the other
    rows also get ``pair_speedups``: sequential run ``i`` over their run ``i``; the
    sequential and vectorized rows ``baseline_ratios``: the baseline's run ``i`` of the same
    side over their run ``i``)."""
    modes = ["sequential", "vectorized"] + (list(BASELINE_SIDES) if args.baseline else [])
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    for _ in range(args.repeats):
        for mode in modes:
            runs[mode].append({**measure(mode, k, args, out), "mode": mode})
    rows = []
    for measured in runs.values():
        row = dict(sorted(measured, key=lambda r: r["wall_s"])[len(measured) // 2])
        row["walls_s"] = [r["wall_s"] for r in measured]
        row["cpus_s"] = [r["cpu_s"] for r in measured]
        rows.append(row)
    seq = rows[0]
    for row in rows[1:]:
        for times, key in (("walls_s", "pair_speedups"), ("cpus_s", "cpu_pair_speedups")):
            pairs = zip(seq[times], row[times], strict=True)
            row[key] = [round(a / b, 2) for a, b in pairs]
    if args.baseline:
        for ours, theirs in ((rows[0], rows[2]), (rows[1], rows[3])):
            for times, key in (("walls_s", "baseline_ratios"), ("cpus_s", "cpu_baseline_ratios")):
                pairs = zip(theirs[times], ours[times], strict=True)
                ours[key] = [round(a / b, 2) for a, b in pairs]
    return rows


def cpu_line(k: int, rows: list[dict]) -> str:
    """One K's CPU-time readings (every process's, children included): on a shared machine
    they move less with the load than wall time does; medians of the pairs' ratios."""
    median = statistics.median
    seq, vec, *base = rows
    line = f"K = {k} CPU s (median): sequential {median(seq['cpus_s']):.1f}, vectorized "
    line += f"{median(vec['cpus_s']):.1f}: {median(vec['cpu_pair_speedups']):.2f}x"
    if base:
        line += f"; the baseline's {median(base[1]['cpu_pair_speedups']):.2f}x; ours over the "
        line += f"baseline's: sequential {median(seq['cpu_baseline_ratios']):.2f}x, "
        line += f"vectorized {median(vec['cpu_baseline_ratios']):.2f}x"
    return line



def step_flops(batch: int = BATCH, widths: tuple[int, ...] = WIDTHS) -> int:
    """FLOPs of one member's training step (``gridplan.training.vectorized.step_flops``)."""
    from gridplan.training.vectorized import step_flops as flops

    return flops(batch, widths)


def bare_step(k: int, device: str, repeats: int = 30, widths: tuple[int, ...] = WIDTHS) -> float:
    """Median seconds of one ``k``-member training step with no framework around it: the
    stacked ``MLPDynamics`` forward on ``(k, 256)`` rows gathered from a 20k buffer, the
    squared error, backward and one fused AdamW step (``gridplan.training.module.adamw``).
    ``widths`` is the MLP's ``(S + 4, hidden..., S)`` (``widths_of``)."""
    import torch

    from gridplan.models.learned import MLPDynamics
    from gridplan.training.module import adamw

    gen = torch.Generator().manual_seed(0)
    net = MLPDynamics(list(widths[1:-1]), k, state_dim=widths[-1]).to(device)
    opt = adamw(list(net.parameters()), 1e-3, 1e-4, device)
    states = torch.rand(20_000, widths[-1], generator=gen).to(device)
    actions = torch.randint(0, 4, (20_000,), generator=gen).to(device)
    rows = torch.randint(0, 20_000, (k, BATCH), generator=gen).to(device)

    def step():
        pred = net(states[rows], actions[rows])
        loss = (pred - states[rows]).square().sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for _ in range(5):
        step()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def matmul_floor(
    k: int, device: str, repeats: int = 20, widths: tuple[int, ...] = WIDTHS
) -> dict:
    """Measured time of the matmuls of one ``k``-member training step (``torch.bmm`` on its
    exact shapes: forward, weight and input gradients), best of ``repeats``."""
    import torch

    shapes = []
    for i, o in zip(widths[:-1], widths[1:], strict=True):
        shapes.append(((k, BATCH, i), (k, i, o)))  # forward
        shapes.append(((k, i, BATCH), (k, BATCH, o)))  # weight gradient
        if i != widths[0]:
            shapes.append(((k, BATCH, o), (k, o, i)))  # input gradient
    ops = [(torch.randn(a, device=device), torch.randn(b, device=device)) for a, b in shapes]

    def run():
        for a, b in ops:
            torch.bmm(a, b)
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    run()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    flops = k * step_flops(widths=widths)
    return {"K": k, "seconds_per_step": best, "GFLOP_per_s": flops / best / 1e9}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="K = 1, 5 and 2 epochs")
    parser.add_argument("--ks", default=None, help="comma-separated K (default 1,5,10,20)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per run (default 5)")
    parser.add_argument("--budget", default="20k", help="transitions per run (default 20k)")
    parser.add_argument(
        "--world", default="default", help="the world trained on (gridplan.core.world; default)"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: as train gives them: 1 a run alone, a group its idle cores)",
    )
    parser.add_argument(
        "--workers", type=int, default=0, help="vectorized worker processes (0: as train picks)"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs per side and K, interleaved; the median"
    )
    parser.add_argument(
        "--latent-obs",
        default="grid,pixels",
        help="observation kinds of the latent families' rows (comma-separated; empty: none)",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="a checkout of the previous main: its vectorized side runs interleaved too",
    )
    parser.add_argument("--json", default=None, help="write the rows and speedups here")
    parser.add_argument("--out", default=None, help="scratch folder (default: a temp dir)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--k", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 2 if args.quick else 5
    for name in ("repeats", "threads", "workers"):
        low = 1 if name == "repeats" else 0
        if getattr(args, name) < low:
            parser.error(f"--{name} must be >= {low}, got {getattr(args, name)}")
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda but torch sees no CUDA GPU")
    ks = [int(k) for k in (args.ks or ("1,5" if args.quick else "1,5,10,20")).split(",")]
    if args.baseline and not (Path(args.baseline) / "scripts" / "bench_training.py").is_file():
        parser.error(f"--baseline {args.baseline} holds no scripts/bench_training.py")
    if args.json and Path(args.json).exists():
        parser.error(f"{args.json} already exists")
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_training-"))
    cores = available_cpus()
    load = os.getloadavg()[0]
    print(f"machine: {cores} cores, load average {load:.2f} at the start; device {args.device}")
    if load > 0.5 * (cores):
        print(f"warning: the machine is busy (load {load:.2f}); timings will be noisy")
    # Collect every dataset once, outside the timings.
    from gridplan.core import tasks
    from gridplan.data.datasets import parse_budget
    from gridplan.training.module import cached_dataset

    task = tasks.get("A", world=args.world)
    widths = widths_of(task.world.state_dim)
    for s in range(max(ks)):
        cached_dataset("balanced", parse_budget(args.budget), s, task, out / "cache")
    rows, speedup, against_baseline, sequential_baseline, cpu_lines = [], {}, {}, {}, []
    print("| K | mode | procs x threads | wall s | transitions/s | epochs | peak MB | speedup |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for k in ks:
        seq, vec, *base = measure_pair(k, args, out)
        cpu_lines.append(cpu_line(k, [seq, vec, *base]))
        speedup[k] = round(seq["wall_s"] / vec["wall_s"], 2)
        if base:
            sequential_baseline[k] = round(base[0]["wall_s"] / seq["wall_s"], 2)
            against_baseline[k] = round(base[1]["wall_s"] / vec["wall_s"], 2)
        for row in (seq, vec, *base):
            rows.append(row)
            s = f"{seq['wall_s'] / row['wall_s']:.2f}x" if row is not seq else ""
            if row is not seq and args.repeats > 1:  # the range of run i over run i
                s += f" ({min(row['pair_speedups']):.2f}-{max(row['pair_speedups']):.2f})"
            if base and row in (seq, vec):
                ratios = row["baseline_ratios"]
                ratio = (sequential_baseline if row is seq else against_baseline)[k]
                s += "; " if s else ""
                s += f"{ratio:.2f}x the baseline's ({min(ratios):.2f}-{max(ratios):.2f})"
            print(
                f"| {k} | {row['mode']} | {row['processes']} x {row['threads']} | "
                f"{row['wall_s']:.1f} | {row['transitions_per_s']:,} | "
                f"{row['epochs']} | {row['peak_MB']:.0f} | {s} |",
                flush=True,
            )
    print("\n".join(cpu_lines))
    end_load = os.getloadavg()[0]
    flops = step_flops(widths=widths)
    configure_threads(1)  # one core's floor: the vectorized side is counted per core
    print(
        f"\nfloor: {flops / 1e6:.1f} MFLOP per member step (forward + backward, batch {BATCH}, "
        f"MLP {widths}); the matmuls of one K-member step timed alone on {args.device}, one "
        "thread (one core's work, as the bare step); vectorized: the group's wall time x its "
        "processes x their threads (the cores it held), and its CPU time, per member step"
    )
    print(
        "| K | matmul GFLOP/s | floor ms per member step | bare step ms per member | "
        "vectorized core-ms per member step | x floor | its run's floor ms | x its run's | "
        "vectorized CPU ms per member step | x its run's (CPU) |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    floors = []
    for k in ks:
        floor = matmul_floor(k, args.device, widths=widths)
        vec = next(r for r in rows if r["mode"] == "vectorized" and r["K"] == k)
        cores_used = vec["processes"] * (1 if args.device.startswith("cuda") else vec["threads"])
        member_steps = vec["transitions"] / BATCH
        per_step = vec["wall_s"] * cores_used / member_steps
        cpu_step = vec["cpu_s"] / member_steps
        floor_step = floor["seconds_per_step"] / k
        own_floor = vec["floor_s_per_step"] / k
        floor.update(
            floor_ms_per_member_step=floor_step * 1e3,
            bare_step_ms_per_member=bare_step(k, args.device, widths=widths) / k * 1e3,
            vectorized_ms_per_member_step=per_step * 1e3,
            distance=per_step / floor_step,
            run_floor_ms_per_member_step=own_floor * 1e3,
            run_distance=per_step / own_floor,
        )
        cpu_cells = "n/a | n/a"  # a GPU's floor is not paid in CPU time
        if not args.device.startswith("cuda"):
            floor.update(
                vectorized_cpu_ms_per_member_step=cpu_step * 1e3,
                run_cpu_distance=cpu_step / own_floor,
            )
            cpu_cells = f"{cpu_step * 1e3:.2f} | {floor['run_cpu_distance']:.1f}x"
        floors.append(floor)
        print(
            f"| {k} | {floor['GFLOP_per_s']:.1f} | {floor_step * 1e3:.2f} | "
            f"{floor['bare_step_ms_per_member']:.2f} | "
            f"{per_step * 1e3:.2f} | {floor['distance']:.1f}x | "
            f"{own_floor * 1e3:.2f} | {floor['run_distance']:.1f}x | {cpu_cells} |",
            flush=True,
        )
    latent_rows = []
    kinds = [k for k in args.latent_obs.split(",") if k]
    if kinds:
        print(
            f"\nlatent families: one run each, {args.budget} transitions, {args.epochs} epochs, "
            "trained alone (observations drawn from the logged states every step)"
        )
        print("| family | obs | wall s | transitions/s | epochs | peak MB |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
    for family in LATENT_FAMILIES if kinds else ():
        for kind in kinds:
            mode = f"latent:{family}:{kind}"
            measured = [measure(mode, 1, args, out) for _ in range(args.repeats)]
            row = dict(sorted(measured, key=lambda r: r["wall_s"])[len(measured) // 2])
            row.update(family=family, obs=kind, walls_s=[r["wall_s"] for r in measured])
            latent_rows.append(row)
            print(
                f"| {family} | {kind} | {row['wall_s']:.1f} | {row['transitions_per_s']:,} | "
                f"{row['epochs']} | {row['peak_MB']:.0f} |",
                flush=True,
            )
    print(f"load average {load:.2f} at the start, {end_load:.2f} at the end")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": rows,
                    "speedup": speedup,
                    "baseline": args.baseline,
                    "speedup_over_baseline": against_baseline,
                    "sequential_speedup_over_baseline": sequential_baseline,
                    "epochs_per_run": args.epochs,
                    "budget": args.budget,
                    "world": task.world.spec(),
                    "device": args.device,
                    "cores": cores,
                    "load_start": load,
                    "load_end": end_load,
                    "step_MFLOP": flops / 1e6,
                    "floor": floors,
                    "latent": latent_rows,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
