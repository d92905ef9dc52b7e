"""TorchRL's CEM planner beside our full-width planner, on the same world models, in one run.

Both plan in the model and act in the true environment from the same start states
(``gridplan.planning.closed_loop.start_states``) to the task's horizon:

* **full-width**: ``gridplan.planning.planner.Planner`` at depth ``D`` (all ``4^D`` leaves, exact V*
  at the leaves), closed loop of ``gridplan.planning.closed_loop``;
* **CEM**: ``torchrl.modules.planners.CEMPlanner`` over ``gridplan.adapters.torchrl.
  WorldModelEnv`` with planning horizon ``D``, as the policy of a ``GridEnv`` rollout; once with
  the V*-shaped reward (the optimal advantage, the information the full-width planner uses at
  its leaves) and once with the sparse reward alone.

Printed per model and planner: success rate ± SE, hazard rate, mean steps of the successful
episodes, imagined transitions per second (full-width: leaves x depth per decision, rolled by
the fused rollout for the built-in models; CEM: candidates x horizon x iterations, counted by
the model env, which TorchRL's rollout keeps planning for finished episodes too), decisions
per second and wall time.

The floor of the full-width rows (``scripts/floors.py``): the transitions per second the
planner cannot pass on one thread, the ``randn`` rate over the normals a transition draws for
``M(.35,.1)``, the copy bandwidth over the bytes its leaf scoring touches for the oracle. The
CEM rows have none of their own: their time is TorchRL's per-step rollout and the model env.
``--against REF`` times the headline, the full-width planner's transitions per second with
``M(.35,.1)``, of this checkout against git ``REF`` in interleaved fresh processes
(``scripts/against.py``, docs/PERFORMANCE.md §13): the ratio ours / ref per pair, the median
and that floor.

    python scripts/bench_torchrl.py --quick        # ~half a minute on 2 cores
    python scripts/bench_torchrl.py --depth 3 --json bench_torchrl.json
    python scripts/bench_torchrl.py --quick --against main --pairs 8
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from tensordict import TensorDict
from torchrl.modules.planners import CEMPlanner

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import against  # noqa: E402

from gridplan.adapters import backend  # noqa: E402
from gridplan.adapters.torchrl import GridEnv, WorldModelEnv, planning_policy  # noqa: E402
from gridplan.models.noise import NoiseModel, OracleModel  # noqa: E402
from gridplan.planning.closed_loop import HAZARD  # noqa: E402

MODELS = {
    "oracle": OracleModel,
    "M(.35,.1)": lambda: NoiseModel.controlled(0.35, 0.1),
}
#: The model of ``--against``'s headline row (the full-width planner).
HEADLINE = "M(.35,.1)"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 seeds x 10 episodes")
    p.add_argument("--task", default="A", help="task name (default A)")
    p.add_argument("--depth", type=int, default=2, help="planner depth = CEM horizon (2)")
    p.add_argument("--seeds", type=int, default=5, help="start-state seeds 0..N-1 (5)")
    p.add_argument("--episodes", type=int, default=20, help="episodes per seed (20)")
    p.add_argument("--candidates", type=int, default=64, help="CEM candidates (64)")
    p.add_argument("--optim-steps", type=int, default=4, help="CEM iterations (4)")
    p.add_argument("--top-k", type=int, default=8, help="CEM elite count (8)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1; see README)")
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    against.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.episodes = 2, 10
    for name in ("depth", "seeds", "episodes", "candidates", "optim_steps", "top_k", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.top_k > args.candidates:
        p.error("--top-k must not exceed --candidates")
    if args.json is not None and args.json.exists():
        p.error(f"{args.json} exists; remove it first")
    return args


def summary(name, planner, success, hazard, steps, transitions, decisions, wall) -> dict:
    n = success.numel()
    rate = success.float().mean().item()
    won = steps[success]
    return {
        "model": name,
        "planner": planner,
        "success": rate,
        "se": math.sqrt(rate * (1 - rate) / n),
        "n": n,
        "hazard": hazard.float().mean().item(),
        "steps": won.float().mean().item() if won.numel() else float("nan"),
        "transitions_per_s": transitions / wall,
        "decisions_per_s": decisions / wall,
        "wall_s": wall,
    }


def run_full_width(name, model, task, start, args) -> dict:
    plan = backend.planner(model, args.depth, task, device=args.device)
    gen = torch.Generator(device=args.device).manual_seed(0)
    t0 = time.perf_counter()
    result = backend.closed_loop(plan, start, gen, task)
    wall = time.perf_counter() - t0
    decisions = int(result.steps.sum())
    transitions = decisions * plan.n_leaves * args.depth
    return summary(name, f"full-width D={args.depth}", result.success,
                   result.outcome == HAZARD, result.steps, transitions, decisions, wall)


def run_cem(name, model, task, start, args, shaping: bool) -> dict:
    torch.manual_seed(0)
    model_env = WorldModelEnv(model, task, shaping=shaping, device=args.device, seed=0)
    planner = CEMPlanner(model_env, planning_horizon=args.depth, optim_steps=args.optim_steps,
                         num_candidates=args.candidates, top_k=args.top_k)
    b = start.shape[0]
    env = GridEnv(b, task, device=args.device, seed=0)
    td = env.reset(TensorDict(observation=start, batch_size=[b], device=args.device),
                   set_state=True)
    t0 = time.perf_counter()
    ro = env.rollout(task.horizon, planning_policy(planner), auto_reset=False, tensordict=td,
                     break_when_any_done=False, break_when_all_done=True)
    wall = time.perf_counter() - t0
    nxt = ro["next"]
    success = nxt["goal"].any(dim=1).squeeze(-1)
    hazard = nxt["hazard"].any(dim=1).squeeze(-1)
    steps = nxt["step_count"][:, -1, 0]
    label = f"CEM H={args.depth} " + ("V*-shaped" if shaping else "sparse")
    decisions = ro.shape[1] * b
    return summary(name, label, success, hazard, steps, model_env.transitions, decisions, wall)


def table(rows: list[dict]) -> str:
    head = (f"{'model':<10} {'planner':<22} {'success':>15} {'hazard':>7} {'steps':>6} "
            f"{'transitions/s':>14} {'decisions/s':>12} {'wall s':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        ok = f"{r['success']:.3f} ± {r['se']:.3f}"
        lines.append(
            f"{r['model']:<10} {r['planner']:<22} {ok:>15} {r['hazard']:>7.3f} "
            f"{r['steps']:>6.1f} {r['transitions_per_s']:>14,.0f} {r['decisions_per_s']:>12,.0f} "
            f"{r['wall_s']:>7.2f}"
        )
    return "\n".join(lines)


def full_width_floor(name: str, task, depth: int) -> tuple[float, str] | None:
    """The full-width planner's floor with model ``name`` (transitions/s, what it is)."""
    import floors

    return floors.planner_floor(MODELS[name](), depth, task)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    task = backend.resolve(args.task)
    start = backend.start_states(range(args.seeds), args.episodes, task, args.device)
    if args.headline:
        row = run_full_width(HEADLINE, MODELS[HEADLINE](), task, start, args)
        what = f"full-width D={args.depth}, {HEADLINE}, {start.shape[0]} episodes"
        return against.emit(row["transitions_per_s"], "transitions/s", what)
    if args.against:
        child = against.child_argv(argv)
        floor = full_width_floor(HEADLINE, task, args.depth)
        return against.main_against(args, __file__, child, lambda _: floor)
    rows = []
    for name, make in MODELS.items():
        rows.append(run_full_width(name, make(), task, start, args))
        floor = full_width_floor(name, task, args.depth)
        rows[-1]["floor_transitions_per_s"], rows[-1]["floor_is"] = floor or (None, None)
        rows.append(run_cem(name, make(), task, start, args, shaping=True))
        rows.append(run_cem(name, make(), task, start, args, shaping=False))
    print(f"task {task.name}, {start.shape[0]} episodes (seeds 0..{args.seeds - 1} x "
          f"{args.episodes}), horizon {task.horizon}; CEM {args.candidates} candidates, "
          f"top {args.top_k}, {args.optim_steps} iterations; {args.threads} thread(s), "
          f"{args.device}")
    print(table(rows))
    for r in rows:
        if r.get("floor_transitions_per_s"):
            floor = r["floor_transitions_per_s"]
            print(f"floor of {r['model']} {r['planner']}: {floor:,.0f} transitions/s "
                  f"({r['floor_is']}, one thread); at {r['transitions_per_s'] / floor:.1%} of it")
    if args.json is not None:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
