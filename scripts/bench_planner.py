"""Planner benchmark: the batched planner beside the per-episode reference, in one run.

Measures model transitions per second (leaves x depth per second) and decisions per second of
the batched planner (fused rollout, and the generic ``model.predict`` rollout for comparison)
and of ``gridplan.planning.reference.ref_plan`` (one episode, one leaf at a time, in plain Python)
on the same start states, checks that both choose the same actions given the same tie-break and
noise draws, and prints the ratio. Sweeps depth and batch size, reports peak memory, this
machine's memory bandwidth and random-number rate (the floors of docs/PERFORMANCE.md) and,
with ``--e1``, the wall time of the full E1 sweep (paper §5.1: 48 noise settings x 10 seeds x
30 episodes, depth 4).

Learned-model rows (``--learned``, on by default): the 16-256-256-12 SiLU delta MLP of paper
§5.4 (fixed random weights) planned four ways on the same start states, timed interleaved:
the independent-leaf generic planner in one ``predict`` call per step (the baseline without
the shared-prefix tree), the same with cache-sized calls, the shared-prefix tree (the planner's
default for this deterministic model) and a TorchRL ``ModelBasedEnvBase`` rollout of the
same network (when ``torchrl`` is installed); all four must choose identical actions. Beside
them the measured matmul ceiling of the network's layers (each layer's shape at its best sgemm
rate, ``matmul_ceiling``), a depth-6 row within a stated memory
budget, and with ``--call-sweep`` the MLP's rate per ``predict`` call size (the measurement
behind ``gridplan.planning.scorers.CACHE_BYTES``). ``--busy`` adds rows with a neighbour process
spinning on one core, at 1 and 2 threads.

    python scripts/bench_planner.py --quick                 # sanity run: fewer sizes and repeats
    python scripts/bench_planner.py --json bench.json --e1  # the numbers of docs/PERFORMANCE.md
    python scripts/bench_planner.py --threads 1 --only-learned --call-sweep --busy
    python scripts/bench_planner.py --device cuda --max-memory 8G
    python scripts/bench_planner.py --against b91621d --pairs 8  # this checkout vs a git ref
    python scripts/bench_planner.py --scaling --quick       # scripts/bench_scaling.py's run

``--against REF`` times only the fused noise planner (default ``M(.35,.1)``, D = 4, 4,000
episodes) of this checkout, uncommitted edits included, against git ``REF`` checked out in a
temporary worktree: fresh processes alternate (this checkout, REF, this checkout, ...), each
importing its own tree's ``gridplan`` through ``scripts/planner_timing.py`` (either module
layout), one thread each. Every pair's rates and ratio are printed, then the median ratio and
its range; the exit status is 1 if the two trees choose different actions. Run it before
landing a change to a hot path (docs/PERFORMANCE.md, "Timing against a git ref").

The reference is timed on fewer decisions than the batched planner (its rate is per decision,
so the ratio is fair); its actions are checked on the first episodes of the batch, handed the
batched planner's draws (``fused_draws`` replays the fused scorer's). Close other work first:
the load average is recorded with the results.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib.util
import json
import math
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from against import git, ref_worktree  # noqa: E402, F401  (git: the tests' worktree listing)

from gridplan.util.allocator import retain_freed_memory  # noqa: E402
from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)
retain_freed_memory()  # large temporaries stay mapped (gridplan.util.allocator)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from gridplan.core.constants import N_ACTIONS  # noqa: E402
from gridplan.core.env import state_outcome  # noqa: E402
from gridplan.core.tasks import TASK_A, Task  # noqa: E402
from gridplan.core.values import value_table  # noqa: E402
from gridplan.models.learned import LearnedWorldModel, MLPDynamics  # noqa: E402
from gridplan.models.noise import NoiseModel, OracleModel, noise_grid  # noqa: E402
from gridplan.planning.closed_loop import run_episodes, start_states  # noqa: E402
from gridplan.planning.fused import FusedNoiseScorer  # noqa: E402
from gridplan.planning.planner import DEFAULT_MAX_MEMORY, Planner  # noqa: E402
from gridplan.planning.reference import (  # noqa: E402
    REF_DISTRACTOR_MOVES,
    ref_decode,
    ref_encode,
    ref_oracle_predict,
    ref_plan,
    ref_step,
    value_table_list,
)
from gridplan.planning.registry import through_predict  # noqa: E402
from gridplan.planning.scorers import action_sequences  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402

MODELS = {
    "oracle": OracleModel,
    "M(.35,.1)": lambda: NoiseModel.controlled(0.35, 0.1),
}
#: The paper's E1 grid (§5.1): sigma_r in cells, sigma_i in normalized units.
E1_SIGMA_R = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35)
E1_SIGMA_I = (0.0, 0.1, 0.2, 0.3, 0.6, 1.2)
#: Reference decisions timed per depth (more would only take longer, not change the rate).
REFERENCE_EPISODES = {1: 40, 2: 20, 3: 8, 4: 6, 5: 2, 6: 1}
#: The generic rollout is timed only up to this many leaf rows per decision (it is slow).
GENERIC_MAX_ROWS = 2**20
HEADLINE_DEPTH, HEADLINE_EPISODES = 4, 1000
_STAY = len(REF_DISTRACTOR_MOVES) - 1


def parse_bytes(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"1.5G"`` or a plain byte count -> bytes."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B")
    try:
        if text and text[-1] in units:
            value = float(text[:-1]) * units[text[-1]]
        else:
            value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte size: {text!r} (e.g. 2G, 512M)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"byte size must be positive, got {text!r}")
    return int(value)


def int_list(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]`` (positive integers)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated integer list: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"need positive integers, got {text!r}")
    return values


def _release_free_heap() -> None:
    """Hand freed heap pages back to the OS (glibc), so the next block's allocations show up
    in its resident high-water mark instead of reusing pages of earlier blocks."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakMemory:
    """Peak memory of a block, in bytes: CUDA allocator peak, or on CPU the rise of the
    process's resident high-water mark (Linux ``/proc``; ``None`` where unavailable)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak: int | None = None

    @staticmethod
    def _status(field: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise OSError(field)

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
        else:
            gc.collect()
            _release_free_heap()
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
                self._base = self._status("VmRSS")
            except OSError:
                self._base = None
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self._base
        elif self._base is not None:
            self.peak = self._status("VmHWM") - self._base


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def memory_bandwidth(device: torch.device, mib: int = 512) -> float:
    """Copy bandwidth in bytes/s (bytes read + bytes written), best of 5 large copies."""
    src = torch.ones(mib * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    best = math.inf
    for _ in range(5):
        sync(device)
        start = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / best


def normal_rate(device: torch.device, n: int = 2**24) -> float:
    """Standard normals per second from ``torch.randn`` with an explicit generator."""
    gen = torch.Generator(device=device).manual_seed(0)
    out = torch.empty(n, device=device)
    best = math.inf
    for _ in range(3):
        sync(device)
        start = time.perf_counter()
        out.normal_(generator=gen)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return n / best


def time_decisions(planner: Planner, root: torch.Tensor, min_time: float) -> tuple[float, int]:
    """Seconds per ``act`` call on ``root`` (after one warm-up call) and the calls timed."""
    device = root.device
    gen = torch.Generator(device=device).manual_seed(1)
    planner.act(root, gen)
    calls, start = 0, time.perf_counter()
    while True:
        planner.act(root, gen)
        sync(device)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls, calls


class OpCensus(TorchDispatchMode):
    """Counts the elementwise work of the tensor ops run inside it: element-ops (each op's
    largest operand size) and bytes touched (operands read plus results written). Views and ops
    on fewer than ``min_numel`` elements (setup, not per leaf) are not counted."""

    def __init__(self, min_numel: int = 1024) -> None:
        super().__init__()
        self.min_numel = min_numel
        self.calls = self.element_ops = self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.is_view:
            return out
        operands = (args, {k: v for k, v in kwargs.items() if k != "out"})
        reads = [t for t in tree_flatten(operands)[0] if isinstance(t, torch.Tensor)]
        writes = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        size = max((t.numel() for t in reads + writes), default=0)
        if size >= self.min_numel:
            self.calls += 1
            self.element_ops += size
            self.bytes += sum(t.numel() * t.element_size() for t in reads + writes)
        return out


def op_census(planner: Planner, root: torch.Tensor) -> dict:
    """Element-ops and bytes touched per model transition by the fused scorer's leaf scoring
    (noise drawing excluded; its cost is the randn rate)."""
    scorer = planner.scorer
    settings = torch.zeros(root.shape[0], dtype=torch.long)
    noise = scorer.draw_noise(settings, torch.Generator(device=root.device).manual_seed(0))
    with OpCensus() as census:
        scorer.scores(root, noise)
    transitions = root.shape[0] * planner.n_leaves * planner.depth
    return {
        "op_calls_per_step": census.calls / planner.depth,
        "element_ops_per_transition": census.element_ops / transitions,
        "bytes_touched_per_transition": census.bytes / transitions,
        "normals_per_transition": scorer.hi - scorer.lo,
    }


def fused_draws(
    scorer: FusedNoiseScorer,
    root: torch.Tensor,
    generator: torch.Generator,
    episodes: int | None = None,
) -> torch.Tensor | None:
    """The noise ``scorer.leaf_scores(root, generator)`` adds to the leaves, drawn again
    exactly as it draws it (same units, same order), from a generator in the same state.

    Args:
        scorer: the planner's fused scorer.
        root: ``(B, 12)`` root states.
        generator: in the state ``leaf_scores`` would find it (in ``act``: after the ties).
        episodes: return only the first ``E`` episodes' noise, drawing only the units that
            hold them (default: all ``B``).

    Returns:
        ``(D, K, E, L)`` float32 noise in normalized units on ``scorer.dims`` (zeros where
        nothing is drawn), or ``None`` if the scorer draws nothing at all.
    """
    e = root.shape[0] if episodes is None else episodes
    if scorer.hi == scorer.lo:
        return None
    out = root.new_zeros(scorer.depth, scorer.n_dims, e, scorer.n_leaves)
    for lo, hi, settings in scorer.units(root.shape[0]):
        if lo >= e:
            break
        noise = scorer.draw_noise(settings, generator)
        if noise is not None:
            out[:, scorer.lo : scorer.hi, lo : min(hi, e)] = noise[:, :, : min(hi, e) - lo]
    return out


def _f32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def replayed_predict_fn(noise: list, task: Task, depth: int):
    """``ref_plan`` ``predict_fn`` that adds the batched planner's draws for one episode.

    ``noise[t][k][l]`` is the draw of step ``t``, relevant dim ``task.relevant_dims[k]``,
    leaf ``l`` (``fused_draws``). ``ref_action_values`` calls ``predict_fn`` leaf by leaf in leaf
    order, each leaf starting from the root and then feeding back the previous output, so a new
    leaf is recognised by an input that is not the last output. Additions are rounded to float32
    as the batched planner rounds them.
    """
    dims = task.relevant_dims
    calls = {"leaf": -1, "step": 0, "last": None}

    def predict(vector, action):
        if vector is not calls["last"]:
            calls["leaf"], calls["step"] = calls["leaf"] + 1, 0
        leaf, t = calls["leaf"], calls["step"]
        expected = (leaf // 4 ** (depth - 1 - t)) % 4
        if action != expected:
            raise AssertionError(f"leaf {leaf} step {t}: reference action {action} != {expected}")
        state = ref_decode(vector)
        out = ref_encode(ref_step(state, action, _STAY, (state.d2_x, state.d2_y), task)[0])
        for k, dim in enumerate(dims):
            out[dim] = min(max(_f32(_f32(out[dim]) + noise[t][k][leaf]), 0.0), 1.0)
        calls["step"] += 1
        calls["last"] = out
        return out

    return predict


def run_reference(planner: Planner, root: torch.Tensor, episodes: int) -> dict:
    """Time ``ref_plan`` on the first ``episodes`` roots and check its actions against the
    batched planner's on the whole batch, replaying the batched tie and noise draws."""
    device = root.device
    gen = torch.Generator(device=device).manual_seed(2)
    replay = torch.Generator(device=device).set_state(gen.get_state())
    batched = planner.act(root, gen)[:episodes].tolist()
    ties = torch.rand(root.shape[0], 4, generator=replay, device=device)[:episodes].tolist()
    noise = None
    if isinstance(planner.scorer, FusedNoiseScorer):
        noise = fused_draws(planner.scorer, root, replay, episodes)
    roots = root[:episodes].cpu().tolist()
    if noise is None:
        predict_fns = [ref_oracle_predict] * episodes
    else:
        draws = noise.cpu().permute(2, 0, 1, 3).tolist()
        predict_fns = [replayed_predict_fn(d, planner.task, planner.depth) for d in draws]
    value_table_list(planner.task)  # built once, outside the timing
    start = time.perf_counter()
    actions = [
        ref_plan(root_i, planner.depth, planner.task, fn, tie, ties=planner.ties)
        for root_i, fn, tie in zip(roots, predict_fns, ties, strict=True)
    ]
    seconds = (time.perf_counter() - start) / episodes
    return {"seconds_per_decision": seconds, "identical": actions == batched, "checked": episodes}


def bench_row(model_name, path, depth, episodes, args, device) -> dict:
    """One timed configuration of the batched planner."""
    model = MODELS[model_name]()
    # "generic": the model's leaves through its predict, in place of its registered scorer.
    factory = through_predict if path == "generic" else None
    planner = Planner(model, depth, max_memory=args.max_memory, device=device, factory=factory)
    root = start_states([0], episodes, device=device)
    with PeakMemory(device) as mem:
        seconds, calls = time_decisions(planner, root, args.min_time)
    transitions = episodes * 4**depth * depth
    return {
        "model": model_name,
        "path": path,
        "depth": depth,
        "episodes": episodes,
        "leaf_rows": episodes * 4**depth,
        "calls": calls,
        "seconds_per_call": seconds,
        "decisions_per_s": episodes / seconds,
        "transitions_per_s": transitions / seconds,
        "peak_memory_bytes": mem.peak,
        "max_memory_bytes": args.max_memory,
    }


def e1_sweep(device: torch.device, max_memory: int) -> dict:
    """Wall time of the full E1 sweep as one setting-major batch."""
    model = noise_grid(E1_SIGMA_R, E1_SIGMA_I)
    start = time.perf_counter()
    result = run_episodes(
        model, TASK_A, 4, tuple(range(10)), 30, device=device, max_memory=max_memory
    )
    sync(device)
    wall = time.perf_counter() - start
    success = result.success.float().view(model.n_settings, -1).mean(dim=1)
    return {
        "wall_s": wall,
        "settings": model.n_settings,
        "episodes": result.success.numel(),
        "mean_env_steps": float(result.steps.float().mean()),
        "success_oracle_cell": float(success[0]),
        "success_sigma_r_035": float(success[-len(E1_SIGMA_I) :].mean()),
    }


#: The learned rows' model: paper §5.4's MLP (16 -> 256 -> 256 -> 12, SiLU, delta), fixed
#: random weights (decisions only have to agree between the paths, not be good).
LEARNED_HIDDEN, LEARNED_SEED = (256, 256), 0
LEARNED_PATHS = ("generic-1call", "generic", "tree", "torchrl")
#: Fewest timed decisions per learned path: the row is their median, and on a shared machine
#: the median of two (their mean) moved the tree's row by 10-15% from run to run.
LEARNED_MIN_DECISIONS = 5
#: The depth-6 learned row: 1,000 episodes through the tree within this memory budget.
LEARNED_D6_EPISODES, LEARNED_D6_BUDGET = 1000, 64 * 2**20
#: Rows per predict call of ``--call-sweep``.
CALL_SWEEP_ROWS = (256, 512, 1024, 1792, 2048, 4096, 8192, 16384, 65536)


def learned_model(device: torch.device) -> LearnedWorldModel:
    """The learned rows' MLP, the same weights in every run (global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(LEARNED_SEED)
        net = MLPDynamics(LEARNED_HIDDEN, activation="silu", predict_delta=True)
    return LearnedWorldModel(net).to(device)


def mlp_flop(net: MLPDynamics) -> int:
    """Multiply-add FLOP of one transition (one row through every member's linear layers)."""
    widths = [net.state_dim + N_ACTIONS, *net.hidden, net.state_dim]
    return 2 * net.members * sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=False))


#: Rows of the ceiling's sgemm bursts: around the planner's calls for the MLP (3,307 rows).
CEILING_ROWS = (1024, 2048, 4096)


def sgemm_rate(device: torch.device, n_in: int, n_out: int, min_time: float) -> dict:
    """Best sgemm rate (FLOP/s) of one linear layer's shape, ``(rows, n_in) @ (n_in, n_out)``
    into an existing output (no bias, no activation), over ``CEILING_ROWS`` and both layouts:
    ``out = x W`` and ``out^T = W^T x^T`` (how ``MLPDynamics._infer`` runs the output layer)."""
    best = {"flop_per_s": 0.0}
    for rows in CEILING_ROWS:
        x = torch.randn(rows, n_in, device=device)
        w = torch.randn(n_in, n_out, device=device)
        w_t = w.t().contiguous()
        out = torch.empty(rows, n_out, device=device)
        out_t = torch.empty(n_out, rows, device=device)
        layouts = {
            "x W": lambda x=x, w=w, out=out: torch.mm(x, w, out=out),
            "W^T x^T": lambda x=x, w_t=w_t, out_t=out_t: torch.mm(w_t, x.t(), out=out_t),
        }
        reps = max(1, 2**22 // (rows * max(n_in, n_out)))
        for layout, gemm in layouts.items():
            for _ in range(3):
                sync(device)
                start, calls = time.perf_counter(), 0
                while time.perf_counter() - start < min_time / 3:
                    for _ in range(reps):
                        gemm()
                    calls += reps
                sync(device)
                rate = 2 * rows * n_in * n_out * calls / (time.perf_counter() - start)
                if rate > best["flop_per_s"]:
                    best = {"flop_per_s": rate, "rows": rows, "layout": layout}
    return {"shape": [n_in, n_out], **best}


def matmul_ceiling(device: torch.device, net: MLPDynamics, min_time: float = 0.3) -> dict:
    """The matmul ceiling of one transition of ``net``: every linear layer's shape at its
    best sgemm rate (``sgemm_rate``), the transition's FLOP over the sum of the layers' best
    times (``flop_per_s``). ``widest_flop_per_s`` is the widest layer's rate alone, at which
    the 16-wide input and 12-wide output layers cannot run, so a ceiling at that rate lies
    above what the shapes allow."""
    widths = [net.state_dim + N_ACTIONS, *net.hidden, net.state_dim]
    layers = [
        sgemm_rate(device, a, b, min_time) for a, b in zip(widths[:-1], widths[1:], strict=False)
    ]
    flop = [2 * a * b for a, b in zip(widths[:-1], widths[1:], strict=False)]
    seconds = sum(f / layer["flop_per_s"] for f, layer in zip(flop, layers, strict=True))
    widest = max(layers, key=lambda layer: math.prod(layer["shape"]))
    return {
        "flop_per_s": sum(flop) / seconds,
        "widest_flop_per_s": widest["flop_per_s"],
        "layers": layers,
    }


def call_sweep(model: LearnedWorldModel, device: torch.device, min_time: float) -> list[dict]:
    """The MLP's ``predict`` rate (rows per second) per call size."""
    gen = torch.Generator().manual_seed(3)
    rows_out = []
    for rows in CALL_SWEEP_ROWS:
        state = torch.rand(rows, model.world.state_dim, generator=gen).to(device)
        action = torch.randint(0, N_ACTIONS, (rows,), generator=gen).to(device)
        model.predict(state, action)
        times = []
        while sum(times) < min_time or len(times) < 3:
            sync(device)
            start = time.perf_counter()
            model.predict(state, action)
            sync(device)
            times.append(time.perf_counter() - start)
        rows_out.append({"call_rows": rows, "rows_per_s": rows / statistics.median(times)})
    return rows_out


def torchrl_decider(model, task: Task, depth: int, root: torch.Tensor):
    """``generator -> actions`` of the full-width search rolled as one TorchRL
    ``ModelBasedEnvBase`` rollout of ``model`` over all ``B * 4^D`` leaves, scored with the
    generic scorer's operations; ``None`` if torchrl is not installed."""
    try:
        from tensordict import TensorDict
        from tensordict.nn import TensorDictModule
        from torchrl.data import Categorical, Composite, Unbounded
        from torchrl.envs.model_based import ModelBasedEnvBase
    except ImportError:
        return None
    from gridplan.planning.planner import break_ties, default_ties

    device, episodes, leaves = root.device, root.shape[0], 4**depth
    rows = episodes * leaves
    values = value_table(task, device)
    discounts = [task.gamma**t for t in range(depth + 1)]
    plan = [a.repeat(episodes) for a in action_sequences(depth, device).T]

    class Imagine(torch.nn.Module):
        """One imagined step and the task's reward of arriving (no done: leaves roll on)."""

        def forward(self, observation, action):
            nxt = model.predict(observation, action, None)
            reward, goal, hazard = state_outcome(nxt, task)
            return nxt, reward.unsqueeze(1), (goal | hazard).unsqueeze(1)

    class LeafEnv(ModelBasedEnvBase):
        def __init__(self) -> None:
            module = TensorDictModule(
                Imagine(),
                in_keys=["observation", "action"],
                out_keys=["observation", "reward", "arrived"],
            )
            super().__init__(module, device=device, batch_size=torch.Size([rows]))
            flag = Categorical(2, (rows, 1), dtype=torch.bool)
            self.observation_spec = Composite(
                observation=Unbounded((rows, task.world.state_dim)),
                arrived=flag.clone(),
                shape=(rows,),
            )
            self.action_spec = Categorical(N_ACTIONS, (rows,))
            self.reward_spec = Unbounded((rows, 1))
            self.done_spec = Composite(done=flag.clone(), terminated=flag.clone(), shape=(rows,))
            self.start = None

        def _reset(self, tensordict=None, **kwargs):
            no = torch.zeros(rows, 1, dtype=torch.bool, device=device)
            return TensorDict(
                {"observation": self.start, "arrived": no, "done": no, "terminated": no},
                batch_size=[rows],
                device=device,
            )

        def _set_seed(self, seed):
            return seed

    env = LeafEnv()
    step = {"t": 0}

    def policy(td):
        td.set("action", plan[step["t"]])
        step["t"] += 1
        return td

    @torch.no_grad()
    def decide(generator: torch.Generator) -> torch.Tensor:
        tie = torch.rand(episodes, N_ACTIONS, generator=generator, device=device)
        env.start, step["t"] = root.repeat_interleave(leaves, dim=0), 0
        td = env.rollout(depth, policy=policy, break_when_any_done=False)
        reward, arrived = td["next", "reward"][..., 0], td["next", "arrived"][..., 0]
        score = torch.zeros(rows, device=device)
        alive = torch.ones(rows, dtype=torch.bool, device=device)
        for t in range(depth):
            score += discounts[t] * reward[:, t] * alive
            alive &= ~arrived[:, t]
        score += discounts[depth] * values.lookup(td["next", "observation"][:, -1]) * alive
        q = score.view(episodes, N_ACTIONS, leaves // N_ACTIONS).amax(dim=2)
        return break_ties(q, tie, default_ties(model))

    return decide


def learned_deciders(
    model, depth: int, root: torch.Tensor, max_memory: int, paths=LEARNED_PATHS
) -> dict:
    """``path -> generator -> actions`` of the available learned ``paths`` (and the tree)."""
    device = root.device
    single = Planner(model, depth, max_memory=max_memory, device=device, tree="independent")
    single.scorer.call_rows = None  # one predict call per chunk and step, no tree
    planners = {
        "generic-1call": single,
        "generic": Planner(model, depth, max_memory=max_memory, device=device, tree="independent"),
        "tree": Planner(model, depth, max_memory=max_memory, device=device),
    }
    out = {
        path: (lambda gen, p=p: p.act(root, gen))
        for path, p in planners.items()
        if path in paths or path == "tree"
    }
    torchrl = torchrl_decider(model, TASK_A, depth, root) if "torchrl" in paths else None
    if torchrl is not None:
        out["torchrl"] = torchrl
    return out


def learned_group(model, depth, episodes, args, device, flop, ceiling) -> list[dict]:
    """One (depth, episodes) group of learned rows, timed interleaved, actions compared."""
    root = start_states([0], episodes, device=device)
    deciders = learned_deciders(model, depth, root, args.max_memory, args.learned_paths)
    actions, peaks, times = {}, {}, {path: [] for path in deciders}
    for path, decide in deciders.items():
        with PeakMemory(device) as mem:
            actions[path] = decide(torch.Generator(device=device).manual_seed(1))
            sync(device)
        peaks[path] = mem.peak
    def timed(path: str) -> bool:
        return sum(times[path]) >= args.min_time and len(times[path]) >= LEARNED_MIN_DECISIONS

    while not all(timed(path) for path in deciders):
        for path, decide in deciders.items():
            if timed(path):
                continue
            gen = torch.Generator(device=device).manual_seed(1)
            sync(device)
            start = time.perf_counter()
            decide(gen)
            sync(device)
            times[path].append(time.perf_counter() - start)
    leaves = episodes * 4**depth
    predictions = {p: leaves * depth for p in deciders}
    predictions["tree"] = episodes * sum(4**t for t in range(1, depth + 1))
    rows = []
    for path in deciders:
        seconds = statistics.median(times[path])
        rows.append(
            {
                "model": "mlp-256",
                "path": path,
                "depth": depth,
                "episodes": episodes,
                "leaf_rows": leaves,
                "calls": len(times[path]),
                "seconds_per_call": seconds,
                "decisions_per_s": episodes / seconds,
                "transitions_per_s": leaves * depth / seconds,
                "predictions_per_s": predictions[path] / seconds,
                "ceiling_fraction": predictions[path] / seconds * flop / ceiling,
                # Best against best: the fastest decision beside the ceiling's best burst.
                "best_seconds_per_call": min(times[path]),
                "best_ceiling_fraction": predictions[path] / min(times[path]) * flop / ceiling,
                "equivalent_ceiling_fraction": leaves * depth / seconds * flop / ceiling,
                "same_actions_as_tree": bool(torch.equal(actions[path], actions["tree"])),
                "peak_memory_bytes": peaks[path],
                "max_memory_bytes": args.max_memory,
            }
        )
    base = {r["path"]: r["seconds_per_call"] for r in rows}
    for r in rows:
        for ref in ("generic-1call", "torchrl"):
            if ref in base:
                r[f"speedup_vs_{ref}"] = base[ref] / r["seconds_per_call"]
    return rows


def learned_depth6(model, args, device, flop, ceiling) -> dict:
    """Depth 6, ``LEARNED_D6_EPISODES`` episodes through the tree within
    ``LEARNED_D6_BUDGET``: one timed decision, its peak memory."""
    root = start_states([0], LEARNED_D6_EPISODES, device=device)
    planner = Planner(model, 6, max_memory=LEARNED_D6_BUDGET, device=device)
    with PeakMemory(device) as mem:
        sync(device)
        start = time.perf_counter()
        planner.act(root, torch.Generator(device=device).manual_seed(1))
        sync(device)
        seconds = time.perf_counter() - start
    predictions = LEARNED_D6_EPISODES * sum(4**t for t in range(1, 7))
    return {
        "model": "mlp-256",
        "path": "tree",
        "depth": 6,
        "episodes": LEARNED_D6_EPISODES,
        "leaf_rows": LEARNED_D6_EPISODES * 4**6,
        "seconds_per_call": seconds,
        "transitions_per_s": LEARNED_D6_EPISODES * 4**6 * 6 / seconds,
        "predictions_per_s": predictions / seconds,
        "ceiling_fraction": predictions / seconds * flop / ceiling,
        "chunks": -(-LEARNED_D6_EPISODES * 4**6 // planner.scorer.max_rows),
        "peak_memory_bytes": mem.peak,
        "max_memory_bytes": LEARNED_D6_BUDGET,
    }


def learned_section(args, device: torch.device) -> dict:
    """Every learned row, the ceiling measured in the same run, and the summary."""
    model = learned_model(device)
    flop = mlp_flop(model.net)
    ceiling = matmul_ceiling(device, model.net)
    layers = ", ".join(
        f"{a}x{b} {layer['flop_per_s'] / 1e9:.1f} ({layer['layout']}, {layer['rows']} rows)"
        for layer in ceiling["layers"]
        for a, b in [layer["shape"]]
    )
    print(
        f"matmul ceiling: {ceiling['flop_per_s'] / 1e9:.1f} GFLOP/s per transition "
        f"(GFLOP/s per layer: {layers}; widest alone "
        f"{ceiling['widest_flop_per_s'] / 1e9:.1f}); {flop:,} FLOP per transition -> "
        f"{fmt_rate(ceiling['flop_per_s'] / flop)} transitions/s",
        flush=True,
    )
    rows = []
    for depth in args.learned_depths:
        for episodes in args.learned_batches:
            rows += learned_group(model, depth, episodes, args, device, flop, ceiling["flop_per_s"])
            print(f"learned depth {depth}, {episodes} episodes: done", flush=True)
    out = {"flop_per_transition": flop, "matmul_ceiling": ceiling, "rows": rows}
    if args.learned_d6:
        out["depth6"] = learned_depth6(model, args, device, flop, ceiling["flop_per_s"])
    # The same rows against the widest layer's rate alone (the looser ceiling).
    narrower = ceiling["flop_per_s"] / ceiling["widest_flop_per_s"]
    for r in rows + ([out["depth6"]] if args.learned_d6 else []):
        r["widest_ceiling_fraction"] = r["ceiling_fraction"] * narrower
    if args.call_sweep:
        out["call_sweep"] = call_sweep(model, device, args.min_time / 2)
    head = [r for r in rows if r["depth"] == HEADLINE_DEPTH and r["episodes"] == 1000]
    tree = next((r for r in head if r["path"] == "tree"), None)
    if tree is not None:
        out["headline"] = {
            "speedup_vs_generic_1call": tree.get("speedup_vs_generic-1call"),
            "speedup_vs_torchrl": tree.get("speedup_vs_torchrl"),
            "ceiling_fraction": tree["ceiling_fraction"],
            "widest_ceiling_fraction": tree["widest_ceiling_fraction"],
            "best_ceiling_fraction": tree["best_ceiling_fraction"],
            "equivalent_ceiling_fraction": tree["equivalent_ceiling_fraction"],
        }
    out["actions_identical"] = all(r["same_actions_as_tree"] for r in rows)
    return out


def print_learned(section: dict) -> None:
    head = (
        f"{'path':13} {'D':>2} {'B':>5} {'s/call':>7} {'trans/s':>8} {'pred/s':>8} "
        f"{'ceil %':>6} {'wide %':>6} {'best %':>6} {'x 1call':>7} {'x trl':>6} {'same':>5} "
        f"{'peak MB':>8}"
    )
    print(head)
    print("-" * len(head))
    rows = section["rows"] + ([section["depth6"]] if "depth6" in section else [])
    for r in rows:
        x1, xt = r.get("speedup_vs_generic-1call"), r.get("speedup_vs_torchrl")
        same = r.get("same_actions_as_tree")
        print(
            f"{r['path']:13} {r['depth']:>2} {r['episodes']:>5} {r['seconds_per_call']:>7.3f} "
            f"{fmt_rate(r['transitions_per_s']):>8} {fmt_rate(r['predictions_per_s']):>8} "
            f"{100 * r['ceiling_fraction']:>6.0f} {100 * r['widest_ceiling_fraction']:>6.0f} "
            f"{fmt_pct(r.get('best_ceiling_fraction')):>6} "
            f"{'-' if x1 is None else f'{x1:.2f}':>7} {'-' if xt is None else f'{xt:.2f}':>6} "
            f"{'-' if same is None else ('yes' if same else 'NO'):>5} "
            f"{fmt_mb(r['peak_memory_bytes']):>8}"
        )
    for r in section.get("call_sweep", []):
        print(f"predict call of {r['call_rows']:>6} rows: {fmt_rate(r['rows_per_s'])} rows/s")


@contextlib.contextmanager
def busy_neighbour():
    """A second process spinning on one core (the last CPU this process may use) for the
    duration of the block; yields its pid."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    def pin() -> None:
        if cpus:
            os.sched_setaffinity(0, {cpus[-1]})

    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)
    try:
        time.sleep(0.3)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def median_seconds(fn, device: torch.device, min_time: float) -> float:
    """Median seconds of ``fn()`` over at least 3 calls and ``min_time`` (after a warm-up)."""
    fn()
    times: list[float] = []
    while sum(times) < min_time or len(times) < 3:
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def busy_rows(workloads: dict, device: torch.device, min_time: float) -> list[dict]:
    """Each workload (``name -> (fn, work units per call)``) at 1 and 2 threads, quiet and
    beside a busy neighbour; ``slowdown_2_vs_1`` is 2-thread time over 1-thread time."""
    before = torch.get_num_threads()
    rows = []
    try:
        for busy in (False, True):
            with busy_neighbour() if busy else contextlib.nullcontext():
                for name, (fn, units) in workloads.items():
                    seconds = {}
                    for threads in (1, 2):
                        torch.set_num_threads(threads)
                        seconds[threads] = median_seconds(fn, device, min_time)
                    for threads, sec in seconds.items():
                        rows.append(
                            {
                                "workload": name,
                                "busy_neighbour": busy,
                                "threads": threads,
                                "seconds_per_call": sec,
                                "units_per_s": units / sec,
                                "slowdown_2_vs_1": seconds[2] / seconds[1],
                            }
                        )
    finally:
        torch.set_num_threads(before)
    return rows


def print_busy(rows: list[dict]) -> None:
    print(f"{'workload':34} {'neighbour':>9} {'threads':>7} {'per s':>8} {'2 vs 1':>7}")
    for r in rows:
        print(
            f"{r['workload']:34} {'busy' if r['busy_neighbour'] else 'quiet':>9} "
            f"{r['threads']:>7} {fmt_rate(r['units_per_s']):>8} {r['slowdown_2_vs_1']:>6.2f}x"
        )


def planner_workloads(device: torch.device) -> dict:
    """The busy rows' planner workloads: ``name -> (fn, transitions per call)``."""
    root = start_states([0], 1000, device=device)
    noisy = Planner(MODELS["M(.35,.1)"](), 4, device=device)
    learned_root = start_states([0], 100, device=device)
    learned = Planner(learned_model(device), 4, device=device)
    gen = torch.Generator(device=device).manual_seed(1)
    return {
        "planner M(.35,.1) D=4 B=1000": (lambda: noisy.act(root, gen), 1000 * 4**4 * 4),
        "planner mlp tree D=4 B=100": (lambda: learned.act(learned_root, gen), 100 * 4**4 * 4),
    }


def machine(device: torch.device) -> dict:
    info = {
        "device": str(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}"


def write_json(path: Path, result: dict) -> None:
    """Write a benchmark's results as indented JSON (parent folders made) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


def fmt_mb(x: int | None) -> str:
    return "-" if x is None else f"{x / 2**20:.0f}"


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'model':10} {'path':8} {'D':>2} {'B':>6} {'rows':>9} {'dec/s':>8} {'trans/s':>8} "
        f"{'ref dec/s':>9} {'speedup':>8} {'same':>5} {'peak MB':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ref = r.get("reference") or {}
        speed = r.get("speedup_vs_reference")
        same = ref.get("identical")
        print(
            f"{r['model']:10} {r['path']:8} {r['depth']:>2} {r['episodes']:>6} "
            f"{r['leaf_rows']:>9} {fmt_rate(r['decisions_per_s']):>8} "
            f"{fmt_rate(r['transitions_per_s']):>8} "
            f"{fmt_rate(ref.get('decisions_per_s')):>9} "
            f"{'-' if speed is None else f'{speed:.0f}x':>8} "
            f"{'-' if same is None else ('yes' if same else 'NO'):>5} "
            f"{fmt_mb(r['peak_memory_bytes']):>8}"
        )


def sweep(args, device: torch.device) -> list[dict]:
    """Every (depth, model, batch) row; the reference runs once per depth and model, on the
    largest batch, and gives the speedup of every row of that depth and model."""
    rows = []
    largest = max(args.batches)
    for depth in args.depths:
        for model_name in MODELS:
            census_root = start_states([0], max(1, 2**16 // 4**depth), device=device)
            census = op_census(Planner(MODELS[model_name](), depth, device=device), census_root)
            group = []
            for episodes in args.batches:
                row = bench_row(model_name, "fused", depth, episodes, args, device)
                row.update(census)
                group.append(row)
                if episodes * 4**depth <= GENERIC_MAX_ROWS:
                    group.append(bench_row(model_name, "generic", depth, episodes, args, device))
            model = MODELS[model_name]()
            planner = Planner(model, depth, max_memory=args.max_memory, device=device)
            ref_episodes = min(REFERENCE_EPISODES.get(depth, 1), largest)
            ref = run_reference(planner, start_states([0], largest, device=device), ref_episodes)
            ref["decisions_per_s"] = 1.0 / ref["seconds_per_decision"]
            for row in group:
                row["speedup_vs_reference"] = row["decisions_per_s"] / ref["decisions_per_s"]
                if row["path"] == "fused" and row["episodes"] == largest:
                    row["reference"] = ref
            rows += group
            print(f"depth {depth}, {model_name}: done", flush=True)
    return rows


def summarize(rows: list[dict]) -> dict:
    """The headline numbers: the slowest model's fused row at depth 4 with >= 1,000 episodes."""
    headline = [
        r
        for r in rows
        if r["path"] == "fused"
        and r["depth"] == HEADLINE_DEPTH
        and r["episodes"] >= HEADLINE_EPISODES
    ]
    checked = [r["reference"]["identical"] for r in rows if "reference" in r]
    return {
        "speedup_vs_reference": min((r["speedup_vs_reference"] for r in headline), default=None),
        "transitions_per_s": min((r["transitions_per_s"] for r in headline), default=None),
        "actions_identical": bool(checked) and all(checked),
        "headline": f"depth {HEADLINE_DEPTH}, >= {HEADLINE_EPISODES} episodes, slowest model",
    }


#: The worker ``--against`` runs in a fresh process per timing, on either tree.
TIMING_PROGRAM = Path(__file__).resolve().with_name("planner_timing.py")
#: Defaults of ``--against``: the fused noise planner's configuration of docs/PERFORMANCE.md,
#: and the decisions each timing process times after its warm-up (their median is its rate).
AGAINST_DEPTH, AGAINST_EPISODES, AGAINST_MODEL, AGAINST_CALLS = 4, 4000, "M(.35,.1)", 8


def time_tree(
    tree: Path, roots: Path, depth: int, model: str, calls: int, threads: int, busy: bool = False
) -> dict:
    """One timing of ``tree``'s planner in a fresh process (``TIMING_PROGRAM``) that imports
    ``gridplan`` from ``tree`` alone; ``threads = 0``: at the settings the tree's command
    lines take by default (``OMP_WAIT_POLICY`` and ``OMP_NUM_THREADS`` left unset), ``busy``:
    beside a process spinning on one core.

    Raises:
        RuntimeError: if the process fails or imported ``gridplan`` code from another tree.
    """
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS=str(threads))
    if not threads:
        for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY"):
            env.pop(name, None)
    command = [sys.executable, str(TIMING_PROGRAM), "--roots", str(roots), "--depth", str(depth)]
    command += ["--model", model, "--calls", str(calls), "--threads", str(threads)]
    command += ["--busy"] if busy else []
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree)
    if done.returncode:
        raise RuntimeError(f"timing {tree} failed:\n{done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    home = tree.resolve() / "gridplan"
    if not Path(result["gridplan"]).resolve().is_relative_to(home) or result["foreign_modules"]:
        raise RuntimeError(
            f"timing {tree} imported gridplan from {result['gridplan']} "
            f"(and {result['foreign_modules']} from elsewhere), not from {home}"
        )
    return result


def against(
    ref: str, depth: int, episodes: int, model: str, pairs: int, threads: int, busy: bool = False
) -> dict:
    """The fused planner of this checkout timed against git ``ref`` in interleaved pairs.

    Each pair is two fresh processes, this checkout then ``ref`` (a temporary worktree), on
    the same root states and tie/noise seed; each process times ``AGAINST_CALLS`` decisions
    after a warm-up and reports their median rate. The ratio of a pair is ours over
    ref's rate; on a shared machine only the median over many pairs means anything. Beside it
    the ratio of the fastest calls (other processes only ever slow a call down, so the fastest
    is the least disturbed) and of the rates per CPU second (leaving out the time other
    processes held the cores); neither is what a user waits, both are steadier.
    Prints every pair, the median ratio and the range. ``threads = 0`` runs each tree at its
    command lines' default thread settings, ``busy`` beside a process spinning on one core.

    Returns:
        ``{"ref", "commit", "depth", "episodes", "model", "threads", "pairs": [...],
        "median_ratio", "min_ratio", "max_ratio", "median_best_ratio", "median_cpu_ratio",
        "actions_identical", "load_average", "load_average_after"}``.
    """
    ours = Path(__file__).resolve().parents[1]
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    rows = []
    with ref_worktree(ref) as (tree, commit), tempfile.TemporaryDirectory() as tmp:
        roots = Path(tmp) / "roots.pt"
        torch.save(start_states([0], episodes), roots)
        setting = f"{threads} thread(s)" if threads else "each tree's command-line defaults"
        print(
            f"{model} D={depth} B={episodes}, {setting} per process"
            f"{', beside a busy process' if busy else ''}: "
            f"this checkout against {ref} ({commit}), {pairs} interleaved pairs"
        )
        for i in range(pairs):
            mine = time_tree(ours, roots, depth, model, AGAINST_CALLS, threads, busy)
            theirs = time_tree(tree, roots, depth, model, AGAINST_CALLS, threads, busy)
            row = {
                "ours_threads": mine["threads"],
                "ref_threads": theirs["threads"],
                "ours_transitions_per_s": mine["transitions_per_s"],
                "ref_transitions_per_s": theirs["transitions_per_s"],
                "ratio": mine["transitions_per_s"] / theirs["transitions_per_s"],
                "best_ratio": mine["best_transitions_per_s"] / theirs["best_transitions_per_s"],
                "cpu_ratio": mine["transitions_per_cpu_s"] / theirs["transitions_per_cpu_s"],
                "identical": mine["actions_sha256"] == theirs["actions_sha256"],
                "actions_sha256": mine["actions_sha256"],
            }
            rows.append(row)
            same = "identical" if row["identical"] else "DIFFER"
            print(
                f"pair {i + 1:>2}: ours {row['ours_transitions_per_s'] / 1e6:5.2f} "
                f"({row['ours_threads']}T) ref {row['ref_transitions_per_s'] / 1e6:5.2f} "
                f"({row['ref_threads']}T) M transitions/s, "
                f"ratio {row['ratio']:.3f} (fastest {row['best_ratio']:.3f}, "
                f"CPU time {row['cpu_ratio']:.3f}), actions {same}",
                flush=True,
            )
    ratios = [r["ratio"] for r in rows]
    identical = all(r["identical"] for r in rows) and len({r["actions_sha256"] for r in rows}) == 1
    floor = against_floor(model)
    out = {
        "ref": ref,
        "commit": commit,
        "depth": depth,
        "episodes": episodes,
        "model": model,
        "threads": threads,
        "busy_neighbour": busy,
        "pairs": rows,
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "median_best_ratio": statistics.median(r["best_ratio"] for r in rows),
        "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in rows),
        "actions_identical": identical,
        "floor_transitions_per_s": floor,
        "load_average": load,
    }
    if hasattr(os, "getloadavg"):
        out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"median ratio {out['median_ratio']:.3f} (range {out['min_ratio']:.3f}-"
        f"{out['max_ratio']:.3f}) over {pairs} pairs, fastest calls "
        f"{out['median_best_ratio']:.3f}, CPU time {out['median_cpu_ratio']:.3f}; "
        f"actions identical: {identical}; "
        f"load average {load} -> {out.get('load_average_after')}"
    )
    if floor is not None:
        ours_rate = statistics.median(r["ours_transitions_per_s"] for r in rows)
        print(
            f"floor: {floor / 1e6:.1f} M transitions/s (this machine's one-stream normal rate "
            f"/ {AGAINST_NORMALS} normals per transition, docs/PERFORMANCE.md §1); "
            f"ours at {ours_rate / floor:.0%} of it"
        )
    return out


#: Normals a transition of ``M(sigma_r, sigma_i)`` draws in the fused rollout (Task A, §1).
AGAINST_NORMALS = 6


def against_floor(model: str) -> float | None:
    """The random-number floor of ``--against``'s model in transitions/s, measured now on one
    thread (the oracle draws nothing: ``None``)."""
    if model == "oracle":
        return None
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return normal_rate(torch.device("cpu")) / AGAINST_NORMALS
    finally:
        torch.set_num_threads(before)


def against_main(args) -> int:
    """``--against``: every (depth, batch) pair of ``--depths`` x ``--batches``; exit status 1
    if any actions differ between the trees."""
    threads = 1 if args.threads is None else args.threads
    results = [
        against(
            args.against, depth, episodes, args.against_model, args.pairs, threads,
            args.against_busy,
        )
        for depth in args.depths or [AGAINST_DEPTH]
        for episodes in args.batches or [AGAINST_EPISODES]
    ]
    if args.json:
        write_json(args.json, {"against": results})
    return 0 if all(r["actions_identical"] for r in results) else 1


#: ``--scaling``: the run of this script's sibling, every other argument handed to it.
SCALING_PROGRAM = Path(__file__).resolve().with_name("bench_scaling.py")


def scaling_main(argv: list[str]) -> int:
    """``--scaling``: ``scripts/bench_scaling.py`` (the costs across worlds) with ``argv``."""
    spec = importlib.util.spec_from_file_location("bench_scaling", SCALING_PROGRAM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--scaling" in argv:
        return scaling_main([a for a in argv if a != "--scaling"])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument(
        "--depths",
        type=int_list,
        help=f"search depths (default 1,2,4,6; with --against {AGAINST_DEPTH})",
    )
    parser.add_argument(
        "--batches",
        type=int_list,
        help="episodes per decision (default 100,1000,4000; the largest is checked against "
        f"the reference; with --against {AGAINST_EPISODES})",
    )
    parser.add_argument(
        "--max-memory",
        type=parse_bytes,
        default=DEFAULT_MAX_MEMORY,
        help="the planner's budget for its leaf tensors (Planner max_memory), e.g. 2G, 256M "
        "(default 2G)",
    )
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds timed per row")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch intra-op threads (default: gridplan.util.threads.default_threads; with "
        "--against 1, and 0 runs each tree at its command lines' default settings)",
    )
    parser.add_argument("--e1", action="store_true", help="also time the full E1 sweep")
    parser.add_argument(
        "--no-learned", dest="learned", action="store_false", help="skip the learned-model rows"
    )
    parser.add_argument(
        "--only-learned", action="store_true", help="only the learned-model rows (and --busy)"
    )
    parser.add_argument(
        "--learned-depths", type=int_list, default=[2, 4], help="learned rows' depths (2,4)"
    )
    parser.add_argument(
        "--learned-batches",
        type=int_list,
        default=[100, 1000],
        help="learned rows' episodes per decision (default 100,1000)",
    )
    parser.add_argument(
        "--learned-paths",
        type=lambda text: [p.strip() for p in text.split(",") if p.strip()],
        default=list(LEARNED_PATHS),
        help=f"learned paths to time (default {','.join(LEARNED_PATHS)}; tree is always run)",
    )
    parser.add_argument(
        "--no-learned-d6",
        dest="learned_d6",
        action="store_false",
        help=f"skip the depth-6 learned row ({LEARNED_D6_EPISODES} episodes, "
        f"{LEARNED_D6_BUDGET // 2**20} MiB budget)",
    )
    parser.add_argument(
        "--call-sweep", action="store_true", help="the MLP's predict rate per call size"
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="rows at 1 and 2 threads beside a neighbour process spinning on one core",
    )
    parser.add_argument("--only-busy", action="store_true", help="only the --busy rows")
    parser.add_argument(
        "--against",
        metavar="REF",
        help="only time the fused planner of this checkout against git REF (a temporary "
        "worktree), interleaved in fresh processes, one thread each unless --threads; prints "
        "every pair and the median ratio",
    )
    parser.add_argument(
        "--pairs", type=int, default=8, help="interleaved pairs of --against (default 8)"
    )
    parser.add_argument(
        "--against-busy",
        action="store_true",
        help="time --against's pairs beside a process spinning on one core",
    )
    parser.add_argument(
        "--against-model",
        choices=list(MODELS),
        default=AGAINST_MODEL,
        help=f"the model --against plans with (default {AGAINST_MODEL})",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="run scripts/bench_scaling.py instead (planner, env, V* and training across "
        "worlds), every other argument handed to it",
    )
    parser.add_argument("--quick", action="store_true", help="small sanity run")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    unknown = set(args.learned_paths) - set(LEARNED_PATHS)
    if unknown:
        valid = ", ".join(LEARNED_PATHS)
        parser.error(f"unknown --learned-paths {sorted(unknown)}; valid: {valid}")
    if args.pairs < 1:
        parser.error(f"--pairs must be >= 1, got {args.pairs}")
    if args.threads is not None and args.threads < (0 if args.against else 1):
        parser.error(f"--threads must be >= 1 (0 with --against), got {args.threads}")
    if args.against:
        if args.device != "cpu":
            parser.error("--against times the planner on the CPU only (no --device)")
        return against_main(args)
    args.depths = args.depths or [1, 2, 4, 6]
    args.batches = args.batches or [100, 1000, 4000]
    if args.quick:
        args.depths, args.batches, args.min_time = [1, 2, 4], [100, 1000], 0.2
        args.learned_batches, args.learned_d6 = [100], False
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but torch.cuda.is_available() is False")
    try:
        print(describe(configure_threads(args.threads)))
    except ValueError as err:
        parser.error(str(err))

    info = machine(device)
    print(f"machine: {info}")
    busy = info.get("load_average", [0.0])[0]
    if device.type == "cpu" and busy > 0.5 and torch.get_num_threads() > 1:
        print(
            f"warning: load average {busy} on {info['cpus']} CPUs: other processes compete and "
            "timings are unreliable (docs/PERFORMANCE.md §8; OpenMP waits "
            f"{os.environ.get('OMP_WAIT_POLICY', 'actively')}; --threads 1 degrades least)"
        )
    bandwidth = memory_bandwidth(device)
    normals = normal_rate(device)
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + write); randn {fmt_rate(normals)}/s")

    result: dict = {"memory_bandwidth_bytes_per_s": bandwidth, "randn_per_s": normals}
    identical = True
    if args.only_busy:
        args.busy, args.learned, args.only_learned = True, False, False
    if not (args.only_learned or args.only_busy):
        rows = sweep(args, device)
        print()
        print_table(rows)
        result.update(summarize(rows), rows=rows)
        identical = result["actions_identical"]
        if result["speedup_vs_reference"] is None:
            print(f"\nno headline row: needs {result['headline']}")
        else:
            print(
                f"\nheadline ({result['headline']}): "
                f"{fmt_rate(result['transitions_per_s'])} transitions/s, "
                f"{result['speedup_vs_reference']:.0f}x the reference, "
                f"actions identical: {result['actions_identical']}"
            )
        if args.e1:
            result["e1"] = e1_sweep(device, args.max_memory)
            print(f"E1 sweep (48 settings x 10 seeds x 30 episodes, D=4): {result['e1']}")
    if args.learned or args.only_learned:
        result["learned"] = learned_section(args, device)
        print()
        print_learned(result["learned"])
        identical = identical and result["learned"]["actions_identical"]
        if "headline" in result["learned"]:
            print(f"learned headline (D=4, B=1000, tree): {result['learned']['headline']}")
    if args.busy and device.type == "cpu":
        result["busy"] = busy_rows(planner_workloads(device), device, args.min_time)
        print()
        print_busy(result["busy"])
    result["machine"] = info
    if hasattr(os, "getloadavg"):
        info["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        write_json(args.json, result)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
