"""The decision ladder on the command line: plug-in models, ``--levels``, ``--card``,
``--compare`` and ``--tensorboard`` of ``python -m eval``.

A model spec (``--model``, each side of ``--compare``) is one of:

- ``oracle``; ``noise`` (with ``--sigma-r``/``--sigma-i``, or inline in a spec:
  ``noise,sigma_r=0.35,sigma_i=0.1``);
- a factory ``pkg.module:factory`` or ``path/file.py:factory``, its keyword arguments from
  ``--model-arg key=value`` or inline (``file.py:make,slip=0.3``);
- in ``--compare``, a checkpoint path or a quoted glob of checkpoints: several checkpoints
  are one arm of several training seeds, paired with the other arm's by sorted position.
"""

from __future__ import annotations

import argparse
import glob
import re
from pathlib import Path

from eval.report import format_table
from gridplan.core import readings, tasks
from gridplan.core.readings import PROJECT, Reading
from gridplan.evaluation.card import card_paths, write_card
from gridplan.evaluation.compare import compare
from gridplan.evaluation.ladder import check_levels, evaluate
from gridplan.evaluation.ladder_protocol import PROTOCOLS, LadderProtocol
from gridplan.evaluation.schema import LEVELS, ladder_lines, log_ladder, write_report
from gridplan.models.noise import NoiseModel, OracleModel
from gridplan.models.plugins import (
    build,
    check_contract,
    checked,
    is_plugin_target,
    parse_args,
    split_spec,
)

BUILTIN_MODELS = ("oracle", "noise")
#: Ladder sizes (branch states, anchors, probe questions, ...) of ``--ladder-sizes``; the
#: closed loop and windows always come from the protocol options.
LADDER_SIZES = ("default", "quick", "tiny")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ladder's options of ``python -m eval``."""
    p.add_argument(
        "--model-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of a plug-in factory (a Python literal or text); repeatable",
    )
    p.add_argument(
        "--levels",
        metavar="LIST",
        help=f"ladder levels to measure, comma-separated from {','.join(LEVELS)}, or 'all' "
        "(default: the paper's report; 'all' with --card or --compare)",
    )
    p.add_argument(
        "--ladder-sizes",
        choices=LADDER_SIZES,
        default="default",
        help="sizes of the branch set, anchor runs, probe and XGap samples",
    )
    p.add_argument(
        "--card",
        action="store_true",
        help="also write the evaluation card <report>.card.md (+ .card.json, figures) beside "
        "the JSON report (default report: ./<model>.eval.json)",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="evaluate two models (specs or checkpoint globs) on the same draws and compare",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log the report into TensorBoard here (checkpoints: their run folder)",
    )


def wants_ladder(args: argparse.Namespace) -> bool:
    """Whether the command asks for ladder levels (``--levels``, ``--card``, ``--compare``)."""
    return bool(args.levels or args.card or args.compare)


def parse_levels(text: str | None) -> tuple[str, ...] | None:
    """``--levels`` -> level names (``None``: every level that applies).

    Raises:
        ValueError: on an unknown level.
    """
    if text is None or text.strip() == "all":
        return None
    return check_levels([part.strip() for part in text.split(",") if part.strip()])


def ladder_protocol(args: argparse.Namespace) -> LadderProtocol:
    """The ladder protocol: the closed loop and windows of ``args.protocol``, the ladder's own
    sizes from ``--ladder-sizes``."""
    sizes = PROTOCOLS[args.ladder_sizes]
    return sizes.replace(
        seeds=args.protocol.seeds,
        episodes=args.protocol.episodes,
        horizon=args.protocol.horizon,
        n_windows=args.protocol.n_windows,
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "model"


def builtin(name: str, options: dict, reading: Reading = PROJECT) -> tuple[object, dict]:
    """A built-in model and its description from ``sigma_r``/``sigma_i`` options, under
    ``reading`` (or the reading an inline ``reading=NAME`` option names). The description
    names the reading unless it is the default.

    Raises:
        ValueError: on unknown options or readings, or sigmas given to the oracle.
    """
    unknown = set(options) - {"sigma_r", "sigma_i", "reading"}
    if unknown:
        raise ValueError(
            f"{name} takes only sigma_r and sigma_i (and a reading), got {sorted(unknown)}"
        )
    sigma_r, sigma_i = float(options.get("sigma_r", 0.0)), float(options.get("sigma_i", 0.0))
    reading = readings.get(options.get("reading", reading))
    shown = {} if reading.name == PROJECT.name else {"reading": reading.name}
    if name == "oracle":
        if sigma_r or sigma_i:
            raise ValueError("sigma_r/sigma_i apply to the noise model, not the oracle")
        return OracleModel(reading), {"name": "oracle", "sigma_r": 0.0, "sigma_i": 0.0, **shown}
    info = {"name": "noise", "sigma_r": sigma_r, "sigma_i": sigma_i, **shown}
    return NoiseModel.controlled(sigma_r, sigma_i, reading=reading), info


def plugin(target: str, options: dict, task, device) -> tuple[object, dict]:
    """A plug-in model, checked against the contract, and its description.

    Raises:
        PluginError: if it cannot be built or breaks the contract.
    """
    module, _, factory = target.rpartition(":")
    name = f"{Path(module).stem if module.endswith('.py') else module}.{factory}"
    model = checked(build(target, options, task, device), name)
    check_contract(model, task, device, name)
    return model, {"name": name, "factory": target, **options}


def spec_models(spec: str, task, device, reading: Reading = PROJECT) -> tuple[list, list[dict]]:
    """Models (one per training seed) and descriptions of one ``--compare`` side (a built-in
    model under ``reading`` unless the spec names its own).

    Raises:
        ValueError: if the spec names nothing loadable (``PluginError`` for plug-ins).
    """
    from gridplan.models.learned import load_world_model

    target, options = split_spec(spec)
    if target in BUILTIN_MODELS:
        model, info = builtin(target, options, reading)
        return [model], [info]
    if is_plugin_target(target) and not target.endswith(".ckpt"):
        model, info = plugin(target, options, task, device)
        return [model], [info]
    paths = sorted(glob.glob(target, recursive=True)) if glob.has_magic(target) else [target]
    if not paths:
        raise ValueError(f"--compare {spec!r} matches no checkpoint")
    if options:
        raise ValueError(f"checkpoints take no options, got {options} in {spec!r}")
    models = [load_world_model(p, device) for p in paths]
    return models, [{"name": "learned", "checkpoint": p} for p in paths]


def command_line_model(args: argparse.Namespace) -> tuple[object, dict]:
    """The model of ``--model`` (built-in with ``--sigma-r``/``--sigma-i``, or a plug-in with
    ``--model-arg``) and its description.

    Raises:
        ValueError: on ``--model-arg`` for a built-in model, or as ``builtin``/``plugin``.
    """
    reading = readings.get(args.reading)
    if is_plugin_target(args.model):
        if reading.name != readings.PROJECT.name:
            raise ValueError("--reading applies to the built-in models, not to a plug-in")
        return plugin(args.model, parse_args(args.model_arg), tasks.get(args.task), args.device)
    if args.model_arg:
        raise ValueError("--model-arg applies to a plug-in factory, not a built-in model")
    return builtin(args.model, {"sigma_r": args.sigma_r, "sigma_i": args.sigma_i}, reading)


def default_json(info: dict) -> Path:
    """``./<model>.eval.json`` for a model evaluated with ``--card`` but no ``--json``."""
    parts = [str(info.get("name", "model"))]
    parts += [f"{k}{v}" for k, v in info.items() if k not in ("name", "factory")]
    return Path(_slug("-".join(parts)) + ".eval.json")


def check_outputs(json_path: Path, card: bool, force: bool) -> None:
    """Refuse before evaluating if the report or its card would replace a file.

    Raises:
        ValueError: if ``json_path`` is a folder.
        FileExistsError: if a file exists and ``force`` is false.
    """
    if json_path.is_dir():
        raise ValueError(f"--json must name a file, not a folder: {json_path}")
    paths = [json_path] + (list(card_paths(json_path).values()) if card else [])
    taken = [str(p) for p in paths if p.exists()]
    if taken and not force:
        verb = "already exists" if len(taken) == 1 else "already exist"
        raise FileExistsError(f"{', '.join(taken)} {verb}; pass --force to overwrite")


def print_report(report: dict) -> None:
    """The paper's table (when L1 and L7 were measured) and the ladder's lines."""
    if "E_tot" in report and "success" in report:
        print(format_table(report))
    else:
        model = ", ".join(f"{k}={v}" for k, v in report["model"].items())
        print(f"model  {model}\ntask / depth  {report['task']} / {report['depth']}")
    for line in ladder_lines(report):
        print(line)


def log_tensorboard(log_dir: Path, report: dict, step: int, task) -> None:
    """The paper's scalars and figures (when L1 was measured) and ``eval/ladder/...``."""
    from gridplan.training.module import log_report

    if "E_tot" in report:
        log_report(log_dir, report, step, "eval", task)
    log_ladder(log_dir, report, step, "eval")


def run_one(model, info: dict, args, out: Path | None, log_dir: Path | None, step: int = 0):
    """Evaluate one model on the ladder, print it, write its JSON, card and TensorBoard.

    Returns:
        The report dict.
    """
    task = tasks.get(args.task)
    report = evaluate(
        model,
        task=task,
        depth=args.protocol.depth,
        protocol=ladder_protocol(args),
        levels=parse_levels(args.levels),
        device=args.device,
        model_info=info,
        progress=not args.no_progress,
    ).to_dict()
    print_report(report)
    if out is not None:
        write_report(report, out, overwrite=args.force)
        print(f"json: {out}")
        if args.card:
            written = write_card(report, out, overwrite=args.force)
            print(f"card: {written['markdown']}")
    if log_dir is not None:
        log_tensorboard(log_dir, report, step, task)
        print(f"tensorboard: {log_dir} (eval/ladder/)")
    return report


def run_compare(args: argparse.Namespace) -> None:
    """``--compare A B``: both arms under one protocol, the paired comparison printed and
    (``--json``) written with both arms' reports."""
    if args.card:
        raise ValueError("--card describes one model; evaluate each side of --compare alone")
    if args.model_arg:
        raise ValueError(
            "--model-arg applies to --model; give a --compare side its arguments inline "
            "(file.py:make,key=value)"
        )
    task = tasks.get(args.task)
    out = Path(args.json) if args.json else None
    if out is not None:
        check_outputs(out, False, args.force)
    reading = readings.get(args.reading)
    arms = [spec_models(spec, task, args.device, reading) for spec in args.compare]
    (models_a, infos_a), (models_b, infos_b) = arms
    result = compare(
        models_a,
        models_b,
        names=tuple(args.compare),
        infos=(infos_a, infos_b),
        task=task,
        depth=args.protocol.depth,
        protocol=ladder_protocol(args),
        levels=parse_levels(args.levels),
        device=args.device,
        progress=not args.no_progress,
    )
    for line in result.lines():
        print(line)
    if out is not None:
        write_report(result.to_dict(), out, overwrite=args.force)
        print(f"json: {out}")


def run_model(args: argparse.Namespace) -> None:
    """``--model NAME|TARGET`` on the ladder: printed, and written to ``--json`` (with
    ``--card`` and no ``--json``: ``default_json``), its card beside it."""
    model, info = command_line_model(args)
    out = Path(args.json) if args.json else (default_json(info) if args.card else None)
    if out is not None:
        check_outputs(out, args.card, args.force)
    log_dir = Path(args.tensorboard) if args.tensorboard else None
    run_one(model, info, args, out, log_dir)
