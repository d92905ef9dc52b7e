"""Planners side by side: gridplan's CEM and MPPI against TorchRL's on the same model, and
decisions per second of every planner at matched compute (docs/PERFORMANCE.md, "Planners").

1. **Equality with TorchRL.** ``torchrl.modules.planners.CEMPlanner`` and ``MPPIPlanner`` plan
   on a ``ModelBasedEnvBase`` (``SequenceEnv`` here) whose reward is the term of
   ``gridplan.planning.sequences.sequence_terms``: ``gamma^t r(s_hat_{t+1})`` and, at the last
   step, ``gamma^H V*(s_hat_H)`` while alive, so their undiscounted sum over the horizon is the
   return gridplan's planners maximise. TorchRL draws its candidates from torch's global
   generator; the bench seeds it with the seed gridplan's planner takes from its stream
   (``gridplan.planning.sequences.own_generator``), so both planners see the same candidates.
   MPPI's advantage module (``ReturnToGo``) is the masked reward summed to the end. Where the
   model's relevant predictions are deterministic (the oracle, ``M(0, sigma_I)``) the two
   must choose identical actions root by root; with relevant noise the draws of the model
   differ (gridplan's from the caller's stream, TorchRL's env from its own), so the
   agreement with the exact ``Q*`` is compared instead.
2. **Throughput at matched compute.** Decisions per second on ``B`` roots for every planner
   of ``gridplan.planning.planners`` and TorchRL's two, each at 1,024 model predictions per
   decision (the depth-4 search's ``4^4`` leaves x 4 steps; CEM/MPPI 4 rounds x 64
   candidates x 4 steps; MCTS 256 simulations x 4 children in rounds of 1, 4, 16, 64 and
   171 simulations, of at most 64 (``parallel=64``) and of one: ``parallel=1``), with the
   ratio to ``search (generic)``: the paper's search
   through ``predict`` on independent leaves, the matched-compute baseline. ``search`` is
   the same search with its own fast scorer (the noise family's fused scorer: fewer,
   cheaper predictions for the same decisions), shown for reference. ``floor`` is one call
   that predicts, scores and values the 1,024 rows per root and nothing else: what any
   planner at this compute spends at least. Every call is timed in turn with the others
   (medians over ``--repeats``; by wall time, or ``--clock cpu`` by the thread's CPU time,
   which a busy machine disturbs less), with the load average printed beside them, in a process
   that keeps freed memory (``gridplan.util.allocator``, as the other benchmarks);
   ``--base DIR`` (a worktree of an earlier main) adds that tree's MCTS, at its own default
   settings, and each MCTS row's ratio to it.
   ``optimal``: the share of roots whose chosen action is optimal under the exact ``Q*``.
   The JSON holds every row's ratio to the generic search and, per model, MCTS's
   (``mcts_ratio_to_generic_search``).

Usage::

    python scripts/bench_planners.py                 # B = 256, 3 repeats, oracle and M(0.2, 0)
    python scripts/bench_planners.py --episodes 64 --repeats 1 --json out.json
    python scripts/bench_planners.py --throughput-only --base ../base  # MCTS against a main
    python scripts/bench_planners.py --throughput-only --clock cpu     # on a busy machine
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.data import Composite, Unbounded  # noqa: E402
from torchrl.envs.model_based import ModelBasedEnvBase  # noqa: E402
from torchrl.modules.planners import CEMPlanner, MPPIPlanner  # noqa: E402

from gridplan.core.constants import N_ACTIONS  # noqa: E402
from gridplan.core.env import state_outcome  # noqa: E402
from gridplan.core.tasks import TASK_A, Task  # noqa: E402
from gridplan.core.values import value_table  # noqa: E402
from gridplan.models.noise import NoiseModel, OracleModel  # noqa: E402
from gridplan.planning.closed_loop import start_states  # noqa: E402
from gridplan.planning.learned_value import LearnedValue  # noqa: E402
from gridplan.planning.planner import Planner  # noqa: E402
from gridplan.planning.planners import make_planner  # noqa: E402
from gridplan.planning.registry import through_predict  # noqa: E402
from gridplan.util.allocator import retain_freed_memory  # noqa: E402


class _Step(nn.Module):
    """``(observation, t, action scores) -> (next observation, t + 1, reward, done, done)``:
    one imagined step with the discounted reward term and, at step ``H - 1``, the terminal
    value (``gridplan.planning.sequences.sequence_terms``)."""

    def __init__(self, model, task: Task, horizon: int, value, generator) -> None:
        super().__init__()
        self.model, self.task, self.horizon, self.value = model, task, horizon, value
        self.generator = generator

    def forward(self, observation, t, action):
        batch, s = observation.shape[:-1], observation.shape[-1]
        state = observation.reshape(-1, s)
        step = t.reshape(-1)
        nxt = self.model.predict(state, action.reshape(-1, N_ACTIONS).argmax(1), self.generator)
        reward, goal, hazard = state_outcome(nxt, self.task)
        done = goal | hazard
        term = self.task.gamma ** step.double() * reward.double()
        last = (step == self.horizon - 1) & ~done
        term = term + last * self.task.gamma**self.horizon * self.value.lookup(nxt).double()
        flag = done.view(*batch, 1)
        return (
            nxt.view(*batch, s),
            (t + 1),
            term.float().view(*batch, 1),
            flag,
            flag.clone(),
        )


class SequenceEnv(ModelBasedEnvBase):
    """A gridplan world model as a TorchRL model-based env whose summed reward over ``H``
    steps is gridplan's candidate return (module docstring)."""

    def __init__(self, model, task: Task, horizon: int, value, seed: int = 0) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        step = _Step(model, task, horizon, value, self.generator)
        module = TensorDictModule(
            step,
            in_keys=["observation", "t", "action"],
            out_keys=["observation", "t", "reward", "terminated", "done"],
        )
        super().__init__(module, batch_size=torch.Size([]))
        s = task.world.state_dim
        self.observation_spec = Composite(
            observation=Unbounded(shape=(s,)), t=Unbounded(shape=(1,), dtype=torch.int64)
        )
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Unbounded(shape=(N_ACTIONS,), dtype=torch.float32)
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)

    def _reset(self, tensordict=None, **kwargs):
        # TorchRL resets the candidates that ended; their later rewards are masked
        # (post-done), so they restart from the zero state at step 0.
        shape = self.batch_size if tensordict is None else tensordict.batch_size
        no = torch.zeros(*shape, 1, dtype=torch.bool)
        return TensorDict(
            {
                "observation": torch.zeros(*shape, self.observation_spec["observation"].shape[-1]),
                "t": torch.zeros(*shape, 1, dtype=torch.int64),
                "done": no,
                "terminated": no.clone(),
            },
            batch_size=shape,
        )

    def _set_seed(self, seed):
        self.generator.manual_seed(int(seed or 0))


class ReturnToGo(nn.Module):
    """MPPI's advantage module: the masked reward summed from each step to the end, so the
    advantage of the first step is the candidate's return."""

    def forward(self, td):
        r = td.get(("next", "reward"))
        td.set("advantage", r.flip(-2).cumsum(-2).flip(-2))
        return td


def roots_td(roots: torch.Tensor) -> TensorDict:
    b = roots.shape[0]
    t = torch.zeros(b, 1, dtype=torch.int64)
    no = torch.zeros(b, 1, dtype=torch.bool)
    return TensorDict(
        {"observation": roots, "t": t, "done": no, "terminated": no.clone()}, batch_size=[b]
    )


def torchrl_planner(name: str, model, task, settings: dict, value):
    env = SequenceEnv(model, task, settings["horizon"], value)
    common = dict(
        planning_horizon=settings["horizon"],
        optim_steps=settings["iterations"],
        num_candidates=settings["candidates"],
        top_k=settings["elites"],
    )
    if name == "cem":
        return CEMPlanner(env, **common)
    return MPPIPlanner(env, ReturnToGo(), settings["temperature"], **common)


def torchrl_act(planner, roots: torch.Tensor, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return planner.planning(roots_td(roots)).argmax(-1)


def own_seed(generator_seed: int) -> int:
    """The seed gridplan's sampling planner takes from a generator seeded ``generator_seed``
    (its first draw, ``gridplan.planning.sequences.own_generator``)."""
    g = torch.Generator().manual_seed(generator_seed)
    return int(torch.randint(0, 2**62, (1,), generator=g))


SETTINGS = {
    "cem": {"horizon": 4, "candidates": 64, "elites": 8, "iterations": 4},
    "mppi": {"horizon": 4, "candidates": 64, "elites": 8, "iterations": 4, "temperature": 10.0},
}


def equality(models: dict, roots: torch.Tensor, seeds: range) -> list[dict]:
    """Ours against TorchRL's, root by root, on each model and generator seed."""
    table = value_table(TASK_A)
    q = table.q_values(roots)
    rows = []
    for label, model in models.items():
        for name, settings in SETTINGS.items():
            ours = make_planner(name, model, TASK_A, 4, settings)
            theirs = torchrl_planner(name, model, TASK_A, settings, table)
            same, opt_ours, opt_theirs = [], [], []
            for seed in seeds:
                a = ours.act(roots, torch.Generator().manual_seed(seed))
                b = torchrl_act(theirs, roots, own_seed(seed))
                same.append(float((a == b).double().mean()))
                best = q.amax(1) - 1e-6
                opt_ours.append(float((q.gather(1, a[:, None])[:, 0] >= best).double().mean()))
                opt_theirs.append(float((q.gather(1, b[:, None])[:, 0] >= best).double().mean()))
            rows.append(
                {
                    "model": label,
                    "planner": name,
                    "identical_actions": statistics.mean(same),
                    "optimal_ours": statistics.mean(opt_ours),
                    "optimal_torchrl": statistics.mean(opt_theirs),
                    "roots": roots.shape[0] * len(seeds),
                }
            )
    return rows


#: The clocks a call may be timed by: wall time, or the CPU time of the calling thread (one
#: torch thread: the call's own work, without the time other processes hold the core).
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def interleaved(fns: dict, repeats: int, clock: str = "wall") -> dict[str, float]:
    """Median seconds of each call of ``fns`` on ``clock`` (``CLOCKS``), the calls taken in
    turn ``repeats`` times (after one warm-up round), so that a busy machine's load falls on
    all of them alike."""
    now = CLOCKS[clock]
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = now()
            fn()
            times[name].append(now() - t0)
    return {name: statistics.median(v) for name, v in times.items()}


def base_tree_search(base: Path):
    """``TreeSearchPlanner`` of the checkout at ``base`` (an earlier main's
    ``gridplan/planning/mcts.py``, loaded as a module of its own beside this tree's)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "base_mcts", base / "gridplan" / "planning" / "mcts.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.TreeSearchPlanner


def floor_fn(model, roots: torch.Tensor, predictions: int):
    """The hardware floor of ``predictions`` per decision: one call that predicts, scores
    (reward, termination) and values that many rows per root and nothing else, what any
    planner at that compute spends at least."""
    table = value_table(TASK_A)
    rows = roots.repeat_interleave(predictions, dim=0)
    actions = torch.arange(N_ACTIONS).repeat(rows.shape[0] // N_ACTIONS)

    def run():
        nxt = model.predict(rows, actions, torch.Generator().manual_seed(0))
        state_outcome(nxt, TASK_A)
        table.lookup(nxt)

    return run


def throughput(
    model, label: str, roots: torch.Tensor, repeats: int, base=None, clock: str = "wall"
) -> list[dict]:
    """Decisions per second of every planner on ``roots`` (module docstring), timed in
    turn; ``base``: an earlier checkout whose MCTS is timed beside this tree's."""
    table = value_table(TASK_A)
    learned = LearnedValue(LearnedNet(), TASK_A)
    b = roots.shape[0]
    planners = {
        "search": (Planner(model, 4, TASK_A), None),
        "search (generic)": (
            Planner(model, 4, TASK_A, tree="independent", factory=through_predict),
            1024,
        ),
        "search-learned-v": (
            make_planner("search-learned-v", model, TASK_A, 4, learned=learned),
            1024,
        ),
        "search-no-heuristic": (make_planner("search-no-heuristic", model, TASK_A, 4), 1024),
        "cem": (make_planner("cem", model, TASK_A, 4, SETTINGS["cem"]), 1024),
        "mppi": (make_planner("mppi", model, TASK_A, 4, SETTINGS["mppi"]), 1024),
        "mcts": (make_planner("mcts", model, TASK_A, 4), 1024),
        "mcts (parallel=1)": (make_planner("mcts", model, TASK_A, 4, {"parallel": 1}), 1024),
        "mcts (parallel=64)": (make_planner("mcts", model, TASK_A, 4, {"parallel": 64}), 1024),
    }
    if base is not None:
        planners["mcts (base)"] = (base_tree_search(base)(model, TASK_A, table, 256, 1.0), 1024)
    fns = {
        name: (lambda p=planner: p.act(roots, torch.Generator().manual_seed(0)))
        for name, (planner, _) in planners.items()
    }
    for name, settings in SETTINGS.items():
        theirs = torchrl_planner(name, model, TASK_A, settings, table)
        fns[f"torchrl {name}"] = lambda p=theirs: torchrl_act(p, roots, 0)
    fns["floor (1,024 predictions)"] = floor_fn(model, roots, 1024)
    seconds = interleaved(fns, repeats, clock)
    q = table.q_values(roots)
    rows = []
    for name, sec in seconds.items():
        row = {
            "model": label,
            "planner": name,
            "predictions_per_decision": planners[name][1] if name in planners else 1024,
            "decisions_per_s": b / sec,
        }
        if name in planners:
            a = fns[name]()
            row["optimal"] = float(
                (q.gather(1, a[:, None])[:, 0] >= q.amax(1) - 1e-6).double().mean()
            )
        rows.append(row)
    by_name = {r["planner"]: r["decisions_per_s"] for r in rows}
    for row in rows:
        row["ratio_to_generic_search"] = row["decisions_per_s"] / by_name["search (generic)"]
    if base is not None:
        for row in rows:
            if row["planner"].startswith("mcts"):
                row["ratio_to_base_mcts"] = row["decisions_per_s"] / by_name["mcts (base)"]
    return rows


class LearnedNet(nn.Module):
    """An untrained value MLP of the fitted value's shape (12-128-128-1,
    ``gridplan.metrics.relevance_estimation.ValueNet``): its cost, not its values, matters
    for throughput."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(
            nn.Linear(12, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 1)
        )

    @torch.no_grad()
    def forward(self, state):
        return self.net(2 * state - 1).squeeze(1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=256, help="roots per decision batch B")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time calls by wall time or by the thread's CPU time (steadier on a busy machine)",
    )
    p.add_argument("--seeds", type=int, default=3, help="generator seeds of the equality check")
    p.add_argument("--json", type=Path)
    p.add_argument(
        "--base",
        type=Path,
        help="checkout of an earlier main (git worktree add DIR fc87f01) whose MCTS is timed "
        "in turn with this tree's",
    )
    p.add_argument(
        "--throughput-only", action="store_true", help="skip the equality check with TorchRL"
    )
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    retain_freed_memory()
    roots = start_states((0,), args.episodes, TASK_A)
    models = {
        "oracle": OracleModel(),
        "M(0,0.5)": NoiseModel.controlled(0.0, 0.5),
        "M(0.2,0)": NoiseModel.controlled(0.2, 0.0),
    }
    eq = []
    if not args.throughput_only:
        eq = equality(models, roots[: min(64, args.episodes)], range(args.seeds))
        print(
            f"{'model':10} {'planner':6} {'identical':>9} {'optimal ours':>12} "
            f"{'optimal torchrl':>15}"
        )
        for r in eq:
            print(
                f"{r['model']:10} {r['planner']:6} {r['identical_actions']:>9.3f} "
                f"{r['optimal_ours']:>12.3f} {r['optimal_torchrl']:>15.3f}"
            )
    rows = []
    for label in ("oracle", "M(0.2,0)"):
        rows += throughput(models[label], label, roots, args.repeats, args.base, args.clock)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\nload average {load:.2f}; calls timed in turn ({args.clock} time), "
        f"medians of {args.repeats}"
    )
    print(
        f"{'model':10} {'planner':26} {'pred/dec':>8} {'dec/s':>9} {'x generic':>9} "
        f"{'x base':>7} {'optimal':>7}"
    )
    for r in rows:
        preds = r["predictions_per_decision"] or "fast"
        base = f"{r['ratio_to_base_mcts']:.2f}" if "ratio_to_base_mcts" in r else ""
        optimal = f"{r['optimal']:.3f}" if "optimal" in r else ""
        print(
            f"{r['model']:10} {r['planner']:26} {preds:>8} {r['decisions_per_s']:>9.1f} "
            f"{r['ratio_to_generic_search']:>9.2f} {base:>7} {optimal:>7}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "equality": eq,
                    "throughput": rows,
                    # MCTS (its default settings) over the generic search, per model.
                    "mcts_ratio_to_generic_search": {
                        r["model"]: r["ratio_to_generic_search"]
                        for r in rows
                        if r["planner"] == "mcts"
                    },
                    "episodes": args.episodes,
                    "threads": 1,
                    "load_average": load,
                    "clock": args.clock,
                    "base": None if args.base is None else str(args.base),
                },
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
