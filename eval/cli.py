"""Command line of ``python -m eval``: closed-loop and prediction-error evaluation.

Examples::

    python -m eval --model oracle
    python -m eval --model noise --sigma-r 0.35 --sigma-i 0.1 --json results/noise.json
    python -m eval --model oracle --task B --depth 2 --seeds 5 --episodes 40
    python -m eval --ckpt runs/uniform-balanced-20k-seed0/version_0/checkpoints/best.ckpt
    python -m eval --ckpt 'runs/*/version_*/checkpoints/best.ckpt'    # several, one by one

A built-in model is evaluated with the controlled grid's protocol by default, a checkpoint of
``python -m train`` with the learned models' (``gridplan.protocols``: paper §5.1, §5.4); the
checkpoint's report goes to ``<checkpoint>.eval.json`` beside it (``best.ckpt``
-> ``best.eval.json``, so best and last never collide) and into the run's TensorBoard folder
under ``eval/``.
"""

from __future__ import annotations

import argparse
import glob
import math
import sys
from pathlib import Path

import torch

from eval.report import format_table, write_json
from gridplan import tasks
from gridplan.evaluation import model_report
from gridplan.models import NoiseModel, OracleModel
from gridplan.protocols import CONTROLLED, LEARNED

BUILTIN_MODELS = ("oracle", "noise")
#: Options that set a ``gridplan.protocols.Protocol`` field of the same name; unset ones
#: come from the default protocol: built-in models as the controlled grid (paper §5.1),
#: checkpoints as the learned models of Table 3 (paper §5.4).
PROTOCOL_OPTIONS = ("depth", "seeds", "episodes", "horizon", "n_windows")


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
    # No parser defaults for these: they depend on --model vs --ckpt (see fill_defaults).
    unset = argparse.SUPPRESS
    p.add_argument(
        "--model", choices=BUILTIN_MODELS, default=unset, help="built-in model (default: oracle)"
    )
    p.add_argument(
        "--ckpt",
        action="append",
        default=unset,
        metavar="PATH",
        help="checkpoint of python -m train; repeat it or give a quoted glob for several",
    )
    p.add_argument("--sigma-r", type=_sigma, default=0.0, help="relevant noise, grid cells")
    p.add_argument("--sigma-i", type=_sigma, default=0.0, help="irrelevant noise, normalized")
    p.add_argument(
        "--depth",
        type=_positive_int,
        default=unset,
        help=f"planner depth D (default: {CONTROLLED.depth}; --ckpt: {LEARNED.depth})",
    )
    p.add_argument(
        "--seeds",
        type=_positive_int,
        default=unset,
        help=f"number of seeds 0..N-1 (default: {len(CONTROLLED.seeds)}; --ckpt: "
        f"{len(LEARNED.seeds)})",
    )
    p.add_argument(
        "--episodes",
        type=_positive_int,
        default=unset,
        help=f"episodes per seed (default: {CONTROLLED.episodes}; --ckpt: {LEARNED.episodes})",
    )
    p.add_argument("--task", choices=tasks.names(), default="A")
    p.add_argument(
        "--horizon",
        type=_positive_int,
        default=unset,
        help=f"open-loop rollout H (default: {CONTROLLED.horizon})",
    )
    p.add_argument(
        "--eval-windows",
        dest="n_windows",
        type=_positive_int,
        default=unset,
        help=f"held-out windows of the metrics (default: {CONTROLLED.n_windows})",
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


def fill_defaults(args: argparse.Namespace) -> None:
    """Resolve --model vs --ckpt and set ``args.protocol`` from the protocol options, the
    unset ones taken from that choice's default protocol."""
    args.ckpt = getattr(args, "ckpt", None)
    args.model = getattr(args, "model", None)
    if args.ckpt and args.model:
        raise ValueError("give either --model or --ckpt, not both")
    if not args.ckpt:
        args.model = args.model or "oracle"
    given = {name: getattr(args, name) for name in PROTOCOL_OPTIONS if hasattr(args, name)}
    if "seeds" in given:
        given["seeds"] = tuple(range(given["seeds"]))
    args.protocol = (LEARNED if args.ckpt else CONTROLLED).replace(**given)


def expand_checkpoints(patterns: list[str]) -> list[Path]:
    """Checkpoint paths from ``--ckpt`` values: globs expanded (sorted), duplicates dropped.

    Raises:
        ValueError: if a glob matches nothing.
    """
    paths: list[str] = []
    for pattern in patterns:
        found = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not found:
            raise ValueError(f"--ckpt {pattern!r} matches no file")
        paths += [p for p in found if p not in paths]
    return [Path(p) for p in paths]


def checkpoint_json_path(ckpt: Path, task: str = "A", depth: int = LEARNED.depth) -> Path:
    """Where a checkpoint's report goes by default: ``best.ckpt`` -> ``best.eval.json`` for
    Task A at the learned protocol's depth, ``best.eval.B-d4.json`` for any other, so reports
    of different tasks or depths never replace each other."""
    if (task, depth) == ("A", LEARNED.depth):
        return ckpt.with_suffix(".eval.json")
    return ckpt.with_suffix(f".eval.{task}-d{depth}.json")


def check_device(device: str) -> torch.device:
    """Parse ``--device``; Raises ValueError if torch cannot use it here."""
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"--device {device!r} is not a torch device: {err}") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"--device {device} but this torch ({torch.__version__}) sees no CUDA GPU; "
            "use --device cpu"
        )
    return dev


def _checkpoint_info(path: Path, model) -> dict:
    cfg = model.metadata.get("config", {})
    data = cfg.get("data", {})
    return {
        "name": "learned",
        "checkpoint": str(path),
        "variant": cfg.get("variant", {}).get("name"),
        "policy": data.get("policy"),
        "budget": data.get("budget"),
        "seed": cfg.get("seed"),
        "data_fingerprint": model.metadata.get("dataset", {}).get("fingerprint"),
    }


def _report(model, info: dict, args: argparse.Namespace) -> dict:
    """``model_report`` with the protocol given on the command line."""
    return model_report(
        model,
        info,
        task=tasks.get(args.task),
        protocol=args.protocol,
        device=args.device,
        progress=not args.no_progress,
    )


def _evaluate_checkpoints(args: argparse.Namespace) -> None:
    from gridplan.learned import load_world_model
    from gridplan.training import log_report

    paths = expand_checkpoints(args.ckpt)
    if args.json and len(paths) > 1:
        raise ValueError(
            f"--json names one file but {len(paths)} checkpoints were given; without --json "
            "each report goes beside its checkpoint"
        )
    outs = [
        Path(args.json) if args.json else checkpoint_json_path(p, args.task, args.protocol.depth)
        for p in paths
    ]
    if any(o.is_dir() for o in outs):
        raise ValueError(f"--json must name a file, not a folder: {args.json}")
    taken = [str(o) for o in outs if o.exists()]
    if taken and not args.force:
        raise FileExistsError(f"{', '.join(taken)} already exist(s); pass --force to overwrite")
    # Every file is loaded (and validated) before the first, possibly long, evaluation.
    models = [load_world_model(p, args.device) for p in paths]
    for path, model, out in zip(paths, models, outs, strict=True):
        report = _report(model, _checkpoint_info(path, model), args)
        print(format_table(report))
        write_json(report, out, overwrite=args.force)
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        step = int(model.metadata.get("global_step", 0))
        log_report(run_dir, report, step, "eval", tasks.get(args.task))
        print(f"json: {out}\ntensorboard: {run_dir} (eval/)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_device(args.device)
        fill_defaults(args)
        if args.json and not args.ckpt:
            out = Path(args.json)
            if out.is_dir():
                raise ValueError(f"--json must name a file, not a folder: {out}")
            if out.exists() and not args.force:
                raise FileExistsError(f"{out} already exists; pass --force to overwrite it")
        if args.ckpt:
            _evaluate_checkpoints(args)
            return 0
        model, info = _builtin_model(args)
        report = _report(model, info, args)
        print(format_table(report))
        if args.json:
            path = write_json(report, args.json, overwrite=args.force)
            print(f"json: {path}")
    except (ValueError, FileExistsError, FileNotFoundError, RuntimeError) as err:
        parser.exit(2, f"error: {err}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
