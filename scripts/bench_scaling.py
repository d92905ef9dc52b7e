"""Speed at scale: how each cost grows with the world's state width and grid size, in one run.

Measures side by side, on one thread, in the worlds of ``WORLDS`` (``gridplan.core.world``:
widths ``S`` = 12, 40, 136 on the 8-grid, grids ``N`` = 8, 16, 32 with two distractors, and
``g32-k64`` with both at once):

* **planner**: model transitions per second of the depth-``D`` planner with the fused noise
  scorer (``M(.35,.1)`` and the oracle) and the generic scorer (independent leaves through
  ``predict``) on a learned MLP of the world's width (the 256-256 SiLU delta MLP of
  ``bench_planner.py``, fixed random weights), each beside its floor: the fused rows' op census
  (bytes touched, normals drawn per transition) against this machine's copy bandwidth and
  ``randn`` rate, the MLP's FLOP per transition against the matmul ceiling of its layers;
  peak memory against the planner's ``max_memory`` budget;
* **env**: ``gridplan.core.env.step`` states per second, beside the floor of reading and
  writing every state once at the copy bandwidth;
* **V\\***: construction time of the exact table (``gridplan.core.values``, Task A and B; built
  fresh: the first build in this process, else the uncached function), its entries and bytes,
  and the graded relevance weights of Eq. 1 (Task A; ``--no-weights`` skips them);
* **training** (the three widths): samples per second of one stacked 5-member training step
  without a framework (``bench_training.bare_step``) beside the matmul floor of its shapes, and
  ``python -m train`` end to end (``bench_training.py``'s worker, fresh processes): the steady
  epoch and the fixed cost of a run, from a 1- and a 4-epoch run (``--no-trainer`` skips it).

Then the growth: for every measurement its cost per unit of work (a transition, a state, a
sample; a table, a weight vector, a run) in each world as a multiple of the default world's,
and the fitted exponent ``b`` of ``cost ~ x^b`` along each dimension (``x = S`` over the width
worlds, ``x = N`` over the grid worlds; least squares in log-log), of the wall time and of the
process's CPU time. Exit status 1 if a planner row's peak memory exceeds ``--max-memory``.
Close other work first: the load average is recorded with the results (docs/PERFORMANCE.md
§14).

    python scripts/bench_scaling.py                        # the table of docs/PERFORMANCE.md
    python scripts/bench_scaling.py --quick --json s.json  # a small sanity run
    python scripts/bench_scaling.py --worlds default,g32-k64 --device cuda
    python scripts/bench_scaling.py --against main --pairs 8 --worlds g32-k64

``--against REF`` times one headline, the fused planner's rate (``M(.35,.1)``, Task A, the
depth and episodes of ``--quick`` or the full run) in the last world of ``--worlds`` (the
largest, ``g32-k64``, by default), of this checkout against git ``REF`` in interleaved fresh
processes (``scripts/against.py``, docs/PERFORMANCE.md §13): the ratio ours / ref per pair,
the median, and the row's floor, this machine's one-thread ``randn`` rate over the normals a
transition draws.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# bench_planner puts this checkout on sys.path and sets the OpenMP wait policy before torch.
_SCRIPTS = Path(__file__).resolve().parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, _SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _load("bench_planner")
TRAINING = _load("bench_training")
sys.path.insert(0, str(_SCRIPTS))

import against  # noqa: E402
import torch  # noqa: E402

from gridplan.core import tasks, values  # noqa: E402
from gridplan.core import world as worlds  # noqa: E402
from gridplan.core.env import reset, step  # noqa: E402
from gridplan.models.learned import LearnedWorldModel, MLPDynamics  # noqa: E402
from gridplan.models.noise import NoiseModel, OracleModel  # noqa: E402
from gridplan.planning.closed_loop import start_states  # noqa: E402
from gridplan.planning.planner import Planner  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402

#: The worlds measured by name (``g8-k2`` is ``default``), the default world first: every
#: ratio is against it.
WORLDS = tuple(
    worlds.get(name).name for name in ("g8-k2", "g8-k16", "g8-k64", "g16-k2", "g32-k2", "g32-k64")
)
#: The two dimensions: the worlds along each, through the default world, and the variable.
DIMENSIONS = {
    "S": tuple(worlds.get(name).name for name in ("g8-k2", "g8-k16", "g8-k64")),
    "N": tuple(worlds.get(name).name for name in ("g8-k2", "g16-k2", "g32-k2")),
}
PLANNER_MODELS = ("M(.35,.1)", "oracle", "mlp")
#: What is measured in each world (``--sections``), in run order.
SECTIONS = ("value", "env", "planner", "training")
#: Run sizes: planner depth and episodes per decision (fused, MLP), states per env step,
#: seconds timed per row, tasks of the V* rows, timed bare training steps, whether the MLP
#: rows get their matmul ceiling, leaf rows of the op census, MiB copied for the bandwidth.
SETTINGS = {
    "full": {
        "depth": 4,
        "episodes": 1000,
        "mlp_episodes": 100,
        "env_states": 100_000,
        "min_time": 1.0,
        "value_tasks": ("A", "B"),
        "bare_repeats": 20,
        "mlp_ceiling": True,
        "census_rows": 2**16,
        "bandwidth_mib": 512,
    },
    "quick": {
        "depth": 2,
        "episodes": 50,
        "mlp_episodes": 10,
        "env_states": 2_000,
        "min_time": 0.02,
        "value_tasks": ("A",),
        "bare_repeats": 3,
        "mlp_ceiling": False,
        "census_rows": 2**12,
        "bandwidth_mib": 64,
    },
}
#: Members of the stacked bare training step (``python -m train -m seed=0..4`` stacks five).
STACK = 5
#: The end-to-end training runs: transitions of their dataset (the default ``data=20k``), and
#: the epochs of the two timed runs whose difference is the steady epoch.
TRAINER_BUDGET, TRAINER_EPOCHS = 20_000, (1, 4)
#: The planner's leaf budget in these rows (``Planner(max_memory=...)``), checked per row.
SCALING_MAX_MEMORY = 256 * 2**20


def fit_exponent(xs, costs) -> float | None:
    """Least-squares slope ``b`` of ``log cost = a + b log x``; ``None`` below two points.

    Raises:
        ValueError: if the lengths differ or a value is not positive.
    """
    xs, costs = list(xs), list(costs)
    if len(xs) != len(costs):
        raise ValueError(f"{len(xs)} x values but {len(costs)} costs")
    if any(v <= 0 for v in xs + costs):
        raise ValueError("x values and costs must be positive")
    if len(set(xs)) < 2:
        return None
    lx, lc = [math.log(v) for v in xs], [math.log(v) for v in costs]
    mx, mc = sum(lx) / len(lx), sum(lc) / len(lc)
    num = sum((a - mx) * (b - mc) for a, b in zip(lx, lc, strict=True))
    return num / sum((a - mx) ** 2 for a in lx)


def median_times(fn, device: torch.device, min_time: float) -> tuple[float, float]:
    """Median wall and CPU seconds (this process) of ``fn()`` over at least 3 calls and
    ``min_time``, after a warm-up. On one thread the CPU seconds leave out the time other
    processes held the core, so their growth is the steadier on a shared machine."""
    fn()
    walls: list[float] = []
    cpus: list[float] = []
    while sum(walls) < min_time or len(walls) < 3:
        BENCH.sync(device)
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        BENCH.sync(device)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def once(fn) -> tuple[float, float]:
    """Wall and CPU seconds of one call of ``fn()``."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def _world_fields(world: worlds.World) -> dict:
    return {"world": world.name, "size": world.size, "state_dim": world.state_dim}


def mlp_model(world: worlds.World, device: torch.device) -> LearnedWorldModel:
    """``bench_planner``'s learned-row MLP at the width of ``world`` (fixed random weights)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(BENCH.LEARNED_SEED)
        net = MLPDynamics(
            BENCH.LEARNED_HIDDEN, activation="silu", predict_delta=True, state_dim=world.state_dim
        )
    return LearnedWorldModel(net, world=world).to(device)


def timed_planner(model, task, depth, episodes, device, min_time, max_memory, tree=None):
    """The planner of ``model`` at ``depth`` on ``episodes`` start states of ``task`` (seed 0),
    timed: ``(planner, median wall s, median CPU s, peak memory bytes or None)`` per decision."""
    planner = Planner(model, depth, task, max_memory, device=device, tree=tree)
    root = start_states([0], episodes, task, device=device)
    gen = torch.Generator(device=device).manual_seed(1)
    with BENCH.PeakMemory(device) as mem:
        seconds, cpu = median_times(lambda: planner.act(root, gen), device, min_time)
    return planner, seconds, cpu, mem.peak


def planner_rows(world, settings: dict, device, floors: dict, max_memory: int) -> list[dict]:
    """The three planner rows of ``world`` (Task A): rate, floor, peak memory."""
    task = tasks.get("A", world=world)
    depth = settings["depth"]
    rows = []
    for name in PLANNER_MODELS:
        if name == "mlp":
            model, tree, episodes = mlp_model(world, device), "independent", "mlp_episodes"
        elif name == "oracle":
            model, tree, episodes = OracleModel(world=world), None, "episodes"
        else:
            model, tree, episodes = NoiseModel.controlled(0.35, 0.1, task), None, "episodes"
        b = settings[episodes]
        planner, seconds, cpu, peak = timed_planner(
            model, task, depth, b, device, settings["min_time"], max_memory, tree
        )
        transitions = b * 4**depth * depth
        row = {
            "section": "planner",
            "measure": f"planner {name}",
            **_world_fields(world),
            "scorer": type(planner.scorer).__name__,
            "depth": depth,
            "episodes": b,
            "unit": "transition",
            "rate_per_s": transitions / seconds,
            "cost_s": seconds / transitions,
            "cpu_cost_s": cpu / transitions,
            "peak_memory_bytes": peak,
            "max_memory_bytes": max_memory,
            "within_budget": None if peak is None else peak <= max_memory,
        }
        if name == "mlp":
            flop = BENCH.mlp_flop(model.net)
            row["flop_per_transition"] = flop
            key = ("mlp", world.state_dim)
            if key not in floors and settings["mlp_ceiling"]:
                # Seconds of sgemm bursts per layer shape: once per width.
                floors[key] = BENCH.matmul_ceiling(device, model.net, 0.2)
            if key in floors:
                row["floor_per_s"] = floors[key]["flop_per_s"] / flop
                row["floor"] = "matmul ceiling of the layers / FLOP per transition"
        else:
            # The census counts bytes and normals, the same on every device: on CPU.
            cpu_planner = Planner(model, depth, task, max_memory)
            census_root = start_states([0], max(1, settings["census_rows"] // 4**depth), task)
            census = BENCH.op_census(cpu_planner, census_root)
            memory = floors["bandwidth"] / census["bytes_touched_per_transition"]
            normals = census["normals_per_transition"]
            row.update(census, memory_floor_per_s=memory)
            # docs/PERFORMANCE.md §1: a noise model is bound by the serial randn stream; the
            # oracle's chunks stay in cache, so it runs above its DRAM floor.
            if normals:
                row["floor_per_s"] = row["randn_floor_per_s"] = floors["randn"] / normals
                row["floor"] = "randn rate / normals drawn"
            else:
                row["floor_per_s"] = memory
                row["floor"] = "copy bandwidth / bytes touched (DRAM; the chunks stay in cache)"
        rows.append(row)
    return rows


def env_row(world, settings: dict, device, floors: dict) -> dict:
    """``env.step`` states per second in ``world`` (Task A) beside its memory floor."""
    task = tasks.get("A", world=world)
    n = settings["env_states"]
    gen = torch.Generator(device=device).manual_seed(0)
    state = reset(n, gen, task)
    action = torch.randint(0, 4, (n,), generator=gen, device=device)
    with BENCH.PeakMemory(device) as mem:
        seconds, cpu = median_times(
            lambda: step(state, action, gen, task), device, settings["min_time"]
        )
    state_bytes = 2 * world.state_dim * state.element_size()
    return {
        "section": "env",
        "measure": "env.step",
        **_world_fields(world),
        "states": n,
        "unit": "state",
        "rate_per_s": n / seconds,
        "cost_s": seconds / n,
        "cpu_cost_s": cpu / n,
        "floor_per_s": floors["bandwidth"] / state_bytes,
        "floor": "copy bandwidth / (state read + written)",
        "peak_memory_bytes": mem.peak,
    }


def build_values(task: tasks.Task) -> tuple[float, float, str]:
    """Wall and CPU seconds of one fresh build of ``task``'s V* and how it was built: the
    cached builder's first build in this process (which then serves the planner), else the
    uncached one."""
    build = values._value_iteration
    misses = build.cache_info().misses
    seconds, cpu = once(lambda: build(task))
    if build.cache_info().misses > misses:
        return seconds, cpu, "first build in this process"
    return *once(lambda: build.__wrapped__(task)), "uncached builder"


def value_rows(world, settings: dict, weights: bool) -> list[dict]:
    """V* build time and table size per task of ``world``; the graded weights' time (Task A)."""
    rows = []
    for name in settings["value_tasks"]:
        task = tasks.get(name, world=world)
        with BENCH.PeakMemory(torch.device("cpu")) as mem:
            seconds, cpu, how = build_values(task)
        entries = values.table_size(task)
        rows.append(
            {
                "section": "value",
                "measure": f"V* build, Task {name}",
                **_world_fields(world),
                "unit": "table",
                "cost_s": seconds,
                "cpu_cost_s": cpu,
                "entries_per_s": entries / seconds,
                "table_entries": entries,
                "table_bytes": 4 * entries,
                "working_bytes": values.check_table_memory(task),
                "built_by": how,
                "peak_memory_bytes": mem.peak,
            }
        )
    if weights:
        task = tasks.get("A", world=world)
        with BENCH.PeakMemory(torch.device("cpu")) as mem:
            seconds, cpu = once(lambda: values._graded_weights.__wrapped__(task))
        rows.append(
            {
                "section": "value",
                "measure": "graded weights (Eq. 1), Task A",
                **_world_fields(world),
                "unit": "weight vector",
                "cost_s": seconds,
                "cpu_cost_s": cpu,
                "peak_memory_bytes": mem.peak,
            }
        )
    return rows


def trainer_rows(world, dev: str, scratch: Path) -> list[dict]:
    """``python -m train`` in ``world``: one run of ``TRAINER_EPOCHS[0]`` and one of
    ``TRAINER_EPOCHS[1]`` epochs, each in a fresh process (``bench_training.py``'s worker,
    one thread); their difference is the steady epoch (samples per second) and the rest of
    the shorter run its fixed cost (start-up, data, dashboards, the last validation).

    The dataset is collected first and an untimed run goes before them: a first run also
    writes the held-out windows to the data cache, which the timed runs then read."""
    from gridplan.training.module import cached_dataset

    cached_dataset("balanced", TRAINER_BUDGET, 0, tasks.get("A", world=world), scratch / "cache")
    runs = []
    for epochs in (TRAINER_EPOCHS[0], *TRAINER_EPOCHS):
        args = argparse.Namespace(
            epochs=epochs,
            budget=str(TRAINER_BUDGET),
            device=dev,
            threads=1,
            workers=1,
            world=world.name,
        )
        runs.append(TRAINING.measure("vectorized", 1, args, scratch))
    return trainer_summary(world, *runs)


def trainer_summary(world, warm_up: dict, short: dict, long: dict) -> list[dict]:
    """The rows of ``trainer_rows`` from its three runs (``bench_training.worker``'s dicts:
    ``wall_s``, ``cpu_s``, ``transitions``, ``peak_MB``): the steady epoch from the
    difference of the timed runs, the fixed cost from the rest of the shorter one."""
    seconds = long["wall_s"] - short["wall_s"]
    cpu = long["cpu_s"] - short["cpu_s"]
    samples = long["transitions"] - short["transitions"]
    extra = TRAINER_EPOCHS[1] - TRAINER_EPOCHS[0]

    def fixed_cost(total: float, difference: float) -> float | None:
        """The shorter run less its epochs; ``None`` where the difference is not positive
        (on a busy machine it can vanish) or leaves nothing."""
        if difference <= 0:
            return None
        rest = total - difference / extra * TRAINER_EPOCHS[0]
        return rest if rest > 0 else None

    common = {
        "section": "training",
        **_world_fields(world),
        "walls_s": [short["wall_s"], long["wall_s"]],
        "cpus_s": [short["cpu_s"], long["cpu_s"]],
        "warm_up_wall_s": warm_up["wall_s"],
        "epochs": list(TRAINER_EPOCHS),
        "peak_memory_bytes": int(long["peak_MB"] * 2**20),
    }
    return [
        {
            **common,
            "measure": "python -m train, per epoch",
            "unit": "sample",
            "samples": samples,
            "rate_per_s": samples / seconds if seconds > 0 and samples > 0 else None,
            "cost_s": seconds / samples if seconds > 0 and samples > 0 else None,
            "cpu_cost_s": cpu / samples if cpu > 0 and samples > 0 else None,
        },
        {
            **common,
            "measure": "python -m train, fixed cost",
            "unit": "run",
            "cost_s": fixed_cost(short["wall_s"], seconds),
            "cpu_cost_s": fixed_cost(short["cpu_s"], cpu),
        },
    ]


def training_rows(world, settings: dict, device, trainer: bool, scratch: Path) -> list[dict]:
    """Training samples per second at the width of ``world``: the stacked bare step beside its
    matmul floor, and ``python -m train`` end to end (``trainer_rows``)."""
    from gridplan.training import module  # noqa: F401  (imported outside the memory peak)

    widths = TRAINING.widths_of(world.state_dim)
    dev = str(device)
    samples = STACK * TRAINING.BATCH
    with BENCH.PeakMemory(device) as mem:
        seconds = TRAINING.bare_step(STACK, dev, settings["bare_repeats"], widths)
    floor = TRAINING.matmul_floor(STACK, dev, settings["bare_repeats"], widths)
    rows = [
        {
            "section": "training",
            "measure": f"training step, {STACK} stacked",
            **_world_fields(world),
            "widths": list(widths),
            "unit": "sample",
            "rate_per_s": samples / seconds,
            "cost_s": seconds / samples,
            "floor_per_s": samples / floor["seconds_per_step"],
            "floor": "matmuls of the step's shapes alone",
            "peak_memory_bytes": mem.peak,
        }
    ]
    return rows + (trainer_rows(world, dev, scratch) if trainer else [])


def _growth_of(rows: list[dict], key: str) -> dict:
    """Cost ``key`` of ``rows`` (one measurement) per world over the default world's, and
    the exponent along each dimension (``None`` where fewer than two worlds have a cost)."""
    cost = {r["world"]: r[key] for r in rows if r.get(key) is not None}
    by_world = {r["world"]: r for r in rows}
    base = cost.get(WORLDS[0])
    out = {"ratio_vs_default": {w: (c / base if base else None) for w, c in cost.items()}}
    for variable, line in DIMENSIONS.items():
        present = [w for w in line if w in cost]
        xs = [by_world[w]["state_dim" if variable == "S" else "size"] for w in present]
        out[f"exponent_{variable}"] = (
            fit_exponent(xs, [cost[w] for w in present]) if len(present) >= 2 else None
        )
    return out


def growth(rows: list[dict]) -> list[dict]:
    """Per measurement: its wall cost in each world over the default world's and the fitted
    exponent along each dimension of ``DIMENSIONS`` (``None`` where worlds are missing), and
    the same of its CPU cost under ``"cpu"`` where it was measured."""
    out = []
    for measure in dict.fromkeys(r["measure"] for r in rows):
        mine = [r for r in rows if r["measure"] == measure]
        entry = {"measure": measure, **_growth_of(mine, "cost_s")}
        cpu = any(r.get("cpu_cost_s") is not None for r in mine)
        entry["cpu"] = _growth_of(mine, "cpu_cost_s") if cpu else None
        out.append(entry)
    return out


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_exp(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def fmt_seconds(x: float) -> str:
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def print_rows(rows: list[dict], growths: list[dict]) -> None:
    ratio = {g["measure"]: g["ratio_vs_default"] for g in growths}
    head = (
        f"{'measure':34} {'world':8} {'N':>3} {'S':>4} {'rate /s':>9} {'floor /s':>9} "
        f"{'% floor':>7} {'cost x':>7} {'peak MB':>8} {'budget':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        floor = r.get("floor_per_s")
        if r["cost_s"] is None:
            rate = "-"
        elif r.get("rate_per_s") is not None:
            rate = BENCH.fmt_rate(r["rate_per_s"])
        else:  # a whole job (a table, a weight vector, a run's fixed cost): its seconds
            rate = fmt_seconds(r["cost_s"])
        share = f"{100 * r['rate_per_s'] / floor:.0f}" if floor and r.get("rate_per_s") else "-"
        within = r.get("within_budget")
        budget = "-" if within is None else ("ok" if within else "OVER")
        print(
            f"{r['measure']:34} {r['world']:8} {r['size']:>3} {r['state_dim']:>4} {rate:>9} "
            f"{BENCH.fmt_rate(floor):>9} {share:>7} "
            f"{fmt_ratio(ratio[r['measure']].get(r['world'])):>7} "
            f"{BENCH.fmt_mb(r.get('peak_memory_bytes')):>8} {budget:>6}"
        )


def print_growth(growths: list[dict]) -> None:
    """Cost multiples and exponents, wall time then CPU time (``-``: not measured)."""
    corner, wide, big = WORLDS[-1], DIMENSIONS["S"][-1], DIMENSIONS["N"][-1]
    print(f"{'':34} {'wall time':^40} | {'CPU time':^40}")
    cols = f"{'S=136 x':>8} {'~S^b':>6} {'N=32 x':>8} {'~N^b':>6} {corner + ' x':>9}"
    head = f"{'measure':34} {cols} | {cols}"
    print(head)
    print("-" * len(head))

    def cells(g: dict | None) -> str:
        g = g or {"ratio_vs_default": {}, "exponent_S": None, "exponent_N": None}
        r = g["ratio_vs_default"]
        return (
            f"{fmt_ratio(r.get(wide)):>8} {fmt_exp(g['exponent_S']):>6} "
            f"{fmt_ratio(r.get(big)):>8} {fmt_exp(g['exponent_N']):>6} "
            f"{fmt_ratio(r.get(corner)):>9}"
        )

    for g in growths:
        print(f"{g['measure']:34} {cells(g)} | {cells(g['cpu'])}")


def world_list(text: str) -> list[worlds.World]:
    """``"g8-k2,g32-k64"`` -> the worlds (names of ``gridplan.core.world.get``)."""
    try:
        return [worlds.get(name.strip()) for name in text.split(",") if name.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def section_list(text: str) -> list[str]:
    """``"value,planner"`` -> ``["value", "planner"]`` (names of ``SECTIONS``)."""
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown sections {unknown or text!r}; valid: {', '.join(SECTIONS)}"
        )
    return chosen


def headline(world: worlds.World, settings: dict, device, max_memory: int) -> int:
    """``--against``'s run: the fused planner's transitions/s, ``M(.35,.1)``, in ``world``."""
    task = tasks.get("A", world=world)
    depth, episodes = settings["depth"], settings["episodes"]
    model = NoiseModel.controlled(0.35, 0.1, task)
    seconds = timed_planner(
        model, task, depth, episodes, device, settings["min_time"], max_memory
    )[1]
    what = f"planner M(.35,.1), D={depth}, B={episodes}, {world.name}"
    return against.emit(episodes * 4**depth * depth / seconds, "transitions/s", what)


def headline_floor(world: worlds.World, settings: dict) -> tuple[float, str] | None:
    """The floor of ``headline``'s row (``scripts/floors.py``)."""
    import floors

    task = tasks.get("A", world=world)
    model = NoiseModel.controlled(0.35, 0.1, task)
    return floors.planner_floor(model, settings["depth"], task)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--worlds",
        type=world_list,
        default=None,
        help=f"comma-separated worlds (default {','.join(WORLDS)}; ratios need {WORLDS[0]})",
    )
    parser.add_argument(
        "--sections",
        type=section_list,
        default=list(SECTIONS),
        help=f"comma-separated sections to run (default {','.join(SECTIONS)})",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--max-memory",
        type=BENCH.parse_bytes,
        default=SCALING_MAX_MEMORY,
        help="the planner's leaf budget, checked against each row's peak (default 256M)",
    )
    parser.add_argument(
        "--no-weights",
        dest="weights",
        action="store_false",
        help="skip the graded relevance weights' rows",
    )
    parser.add_argument(
        "--no-trainer",
        dest="trainer",
        action="store_false",
        help="skip the end-to-end python -m train rows",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sanity run: D=2, few episodes, Task A only; no weights, trainer or "
        "matmul-ceiling rows",
    )
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    against.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.json and args.json.exists():
        parser.error(f"{args.json} already exists; choose another path")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but torch.cuda.is_available() is False")
    try:
        print(describe(configure_threads(args.threads)))
    except ValueError as err:
        parser.error(str(err))
    settings = SETTINGS["quick" if args.quick else "full"]
    weights, trainer = args.weights and not args.quick, args.trainer and not args.quick
    chosen = args.worlds or [worlds.get(name) for name in WORLDS]
    names = [w.name for w in chosen]
    if len(set(names)) != len(names):
        parser.error(f"--worlds names a world twice: {','.join(names)}")
    if args.headline:
        return headline(chosen[-1], settings, device, args.max_memory)
    if args.against:
        child, last = against.child_argv(argv), chosen[-1]
        return against.main_against(
            args, __file__, child, lambda _: headline_floor(last, settings)
        )
    # Everything imported so far lives on: no collection should walk it again (PeakMemory
    # collects before each row, and Lightning's modules made that 0.2 s a row).
    gc.freeze()
    info = BENCH.machine(device)
    print(f"machine: {info}")
    floors = {
        "bandwidth": BENCH.memory_bandwidth(device, settings["bandwidth_mib"]),
        "randn": BENCH.normal_rate(device),
    }
    print(
        f"floors: copy bandwidth {floors['bandwidth'] / 1e9:.1f} GB/s (read + write), "
        f"randn {BENCH.fmt_rate(floors['randn'])}/s"
    )
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench_scaling-") as tmp:
        for world in chosen:
            start = time.perf_counter()
            if "value" in args.sections:
                rows += value_rows(world, settings, weights)
            if "env" in args.sections:
                rows.append(env_row(world, settings, device, floors))
            if "planner" in args.sections:
                rows += planner_rows(world, settings, device, floors, args.max_memory)
            # Training does not read the grid: once per state width.
            trained = {r["state_dim"] for r in rows if r["section"] == "training"}
            if "training" in args.sections and world.state_dim not in trained:
                rows += training_rows(world, settings, device, trainer, Path(tmp))
            print(f"{world.describe()}: {time.perf_counter() - start:.1f} s", flush=True)
    order = list(dict.fromkeys(r["measure"] for r in rows))
    rows.sort(key=lambda r: order.index(r["measure"]))  # stable: worlds stay in run order
    growths = growth(rows)
    print()
    print_rows(rows, growths)
    print()
    print_growth(growths)
    if hasattr(os, "getloadavg"):
        info["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average {info.get('load_average')} -> {info.get('load_average_after')}")
    result = {
        "machine": info,
        "settings": {**settings, "threads": torch.get_num_threads(), "max_memory": args.max_memory},
        "memory_bandwidth_bytes_per_s": floors["bandwidth"],
        "randn_per_s": floors["randn"],
        "worlds": [w.spec() for w in chosen],
        "rows": rows,
        "growth": growths,
    }
    over = [r for r in rows if r.get("within_budget") is False]
    for r in over:
        peak = BENCH.fmt_mb(r["peak_memory_bytes"])
        print(f"over budget: {r['measure']} in {r['world']}: {peak} MB of {args.max_memory} B")
    if args.json:
        BENCH.write_json(args.json, result)
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
