"""Command line of ``python -m eval``: closed-loop and prediction-error evaluation.

Examples::

    python -m eval --model oracle
    python -m eval --model noise --sigma-r 0.35 --sigma-i 0.1 --json results/noise.json
    python -m eval --model oracle --task B --depth 2 --seeds 5 --episodes 40
"""

from __future__ import annotations

import argparse
import math
import sys

import torch

from eval.report import format_table, model_report, write_json
from gridplan.constants import TASKS
from gridplan.models import NoiseModel, OracleModel

BUILTIN_MODELS = ("oracle", "noise")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def _sigma(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"sigma must be a finite number >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m eval",
        description="Evaluate a world model for decisions: closed-loop success of the "
        "full-width planner, E_tot, DRPE, error profiles, event audit and VPE.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", choices=BUILTIN_MODELS, default="oracle", help="built-in model")
    p.add_argument("--sigma-r", type=_sigma, default=0.0, help="relevant noise, grid cells")
    p.add_argument("--sigma-i", type=_sigma, default=0.0, help="irrelevant noise, normalized")
    p.add_argument("--depth", type=_positive_int, default=4, help="planner depth D")
    p.add_argument("--seeds", type=_positive_int, default=10, help="number of seeds (0..N-1)")
    p.add_argument("--episodes", type=_positive_int, default=30, help="episodes per seed")
    p.add_argument("--task", choices=TASKS, default="A")
    p.add_argument("--horizon", type=_positive_int, default=10, help="open-loop rollout H")
    p.add_argument(
        "--eval-windows", type=_positive_int, default=1000, help="held-out windows of the metrics"
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def _builtin_model(args: argparse.Namespace):
    if args.model == "oracle":
        if args.sigma_r or args.sigma_i:
            raise ValueError("--sigma-r/--sigma-i apply to --model noise, not the oracle")
        return OracleModel(), {"name": "oracle", "sigma_r": 0.0, "sigma_i": 0.0}
    info = {"name": "noise", "sigma_r": args.sigma_r, "sigma_i": args.sigma_i}
    return NoiseModel.controlled(args.sigma_r, args.sigma_i), info


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        torch.device(args.device)
        model, info = _builtin_model(args)
        report = model_report(
            model,
            info,
            task=args.task,
            depth=args.depth,
            seeds=list(range(args.seeds)),
            episodes=args.episodes,
            horizon=args.horizon,
            n_windows=args.eval_windows,
            device=args.device,
            progress=not args.no_progress,
        )
        print(format_table(report))
        if args.json:
            path = write_json(report, args.json, overwrite=args.force)
            print(f"json: {path}")
    except (ValueError, FileExistsError, RuntimeError) as err:
        parser.exit(2, f"error: {err}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
