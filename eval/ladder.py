"""The decision ladder on the command line: plug-in models, ``--levels``, ``--card``,
``--compare`` and ``--tensorboard`` of ``python -m eval``.

A model spec (``--model``, each side of ``--compare``) is one of:

- ``oracle``; ``noise`` (with ``--sigma-r``/``--sigma-i``, or inline in a spec:
  ``noise,sigma_r=0.35,sigma_i=0.1``);
- a factory ``pkg.module:factory`` or ``path/file.py:factory``, its keyword arguments from
  ``--model-arg key=value`` or inline (``file.py:make,slip=0.3``);
- in ``--compare``, a checkpoint path, a run folder or a quoted glob of either: several
  checkpoints are one arm of several training seeds, paired with the other arms by sorted
  position (``eval.specs``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from eval.report import format_table
from eval.specs import (
    LADDER_SIZES,
    builtin,
    plugin,
    spec_arm,
    spec_kind,
    task_of,
    unique_labels,
)
from gridplan.core import readings
from gridplan.data.datasets import eval_windows
from gridplan.evaluation.card import card_paths, write_card
from gridplan.evaluation.compare_models import (
    compare_models,
    comparison_lines,
    comparison_markdown,
)
from gridplan.evaluation.ladder import evaluate
from gridplan.evaluation.planner_choice import fit_learned_value
from gridplan.evaluation.schema import LEVELS, log_ladder, write_report, write_text
from gridplan.evaluation.spec import PAPER_LEVELS
from gridplan.models.contract import check_model_world
from gridplan.models.plugins import is_plugin_target, parse_args
from gridplan.planning.planners import needs_learned_value, planner_settings


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ladder's options of ``python -m eval``."""
    p.add_argument(
        "--model-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument of a plug-in factory: a Python literal, true/false/none in any "
        "case, else the text; repeatable",
    )
    p.add_argument(
        "--levels",
        metavar="LIST",
        help=f"ladder levels to measure, comma-separated from {','.join(LEVELS)}, and "
        "success (the closed loop without the rest of L7), or 'all' (default: the paper's "
        "report; 'all' with --card or --compare)",
    )
    p.add_argument(
        "--ladder-sizes",
        choices=tuple(LADDER_SIZES),
        default=None,
        help="sizes of the branch set, anchor runs, probe and XGap samples: those of the "
        "controlled (default), quick-controlled or tiny-controlled protocol; default: the "
        "spec's",
    )
    p.add_argument(
        "--card",
        action="store_true",
        help="also write the evaluation card <report>.card.md (+ .card.json, figures) beside "
        "the JSON report (default report: ./<model>.eval.json)",
    )
    p.add_argument(
        "--compare",
        nargs="+",
        metavar="SPEC",
        help="evaluate two or more models (built-ins, plug-ins file.py:factory, checkpoints, "
        "run folders or quoted checkpoint globs) under one protocol on the same draws and "
        "compare each with the first; writes --json (default ./compare.json), a Markdown "
        "table and a figure beside it",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="also log the report into TensorBoard here (checkpoints: their run folder)",
    )


def wants_ladder(args: argparse.Namespace) -> bool:
    """Whether the command asks for ladder levels (``--levels``, ``--card``, ``--compare``,
    or a spec whose levels are more than the paper's report)."""
    levels = args.spec.levels
    return bool(args.card or args.compare or levels is None or set(levels) - set(PAPER_LEVELS))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "model"


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
        return plugin(args.model, parse_args(args.model_arg), task_of(args), args.device)
    if args.model_arg:
        raise ValueError("--model-arg applies to a plug-in factory, not a built-in model")
    sigmas = {"sigma_r": args.sigma_r, "sigma_i": args.sigma_i}
    return builtin(args.model, sigmas, reading, task_of(args))


def default_json(info: dict) -> Path:
    """``./<model>.eval.json`` for a model evaluated with ``--card`` but no ``--json``."""
    parts = [str(info.get("name", "model"))]
    parts += [f"{k}{v}" for k, v in info.items() if k not in ("name", "factory", "path")]
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


def log_tensorboard(log_dir: Path, report: dict, step: int, task) -> None:
    """The paper's scalars and figures (when L1 was measured) and ``eval/ladder/...``."""
    from gridplan.training.module import log_report

    if "E_tot" in report:
        log_report(log_dir, report, step, "eval", task)
    log_ladder(log_dir, report, step, "eval")


def learned_value(args: argparse.Namespace, model, task):
    """The value a planner of ``args.spec`` that needs one plans with, fitted through
    ``model`` on the states of the spec's held-out windows (fitted value iteration,
    ``gridplan.evaluation.planner_choice.fit_learned_value``); None for any other planner."""
    spec = args.spec
    full = planner_settings(spec.planner.name, spec.depth, spec.planner.settings)
    if not needs_learned_value(spec.planner.name, full):
        return None
    windows = eval_windows(spec.n_windows, spec.horizon, task=task, device=args.device)
    states = windows.prev.reshape(-1, windows.prev.shape[-1])
    print(f"planner {spec.planner.name}: fitting a learned value on {states.shape[0]} logged "
          "states", flush=True)
    return fit_learned_value(model, states, task)


def run_one(model, info: dict, args, out: Path | None, log_dir: Path | None, step: int = 0):
    """Evaluate one model on the ladder, print it, write its JSON, card and TensorBoard.

    Returns:
        The report dict.
    """
    task = task_of(args, model)
    report = evaluate(
        model,
        args.spec,
        device=args.device,
        model_info=info,
        progress=not args.no_progress,
        learned_value=learned_value(args, model, task),
    ).to_dict()
    print(format_table(report))
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


def compare_paths(json_path: Path) -> dict[str, Path]:
    """The files of a comparison: ``out.json``, ``out.md`` (the table), ``out.png`` (figure)."""
    return {
        "json": json_path,
        "markdown": json_path.with_suffix(".md"),
        "figure": json_path.with_suffix(".png"),
    }


def _compare_arms(args: argparse.Namespace, reading) -> tuple:
    """The task and the arms of ``--compare``, every spec loaded and checked before the first,
    possibly long, evaluation. Without ``--world`` the task is played on the world of the
    first checkpoint (as ``--ckpt``), else the default world; the built-in and plug-in sides
    are built on it, and a checkpoint of another world is refused naming both."""
    kinds = [spec_kind(spec) for spec in args.compare]
    loaded = {
        i: spec_arm(spec, None, args.device, reading, args.allow_incomplete)
        for i, (spec, kind) in enumerate(zip(args.compare, kinds, strict=True))
        if kind == "checkpoint"
    }
    learned = [(args.compare[i], m) for i, arm in loaded.items() for m in arm.models]
    task = task_of(args, learned[0][1] if learned else None)
    for spec, model in learned:
        try:
            check_model_world(model, task.world)
        except ValueError as err:
            raise ValueError(f"--compare {spec}: {err}") from None
    arms = [
        loaded[i] if i in loaded else spec_arm(spec, task, args.device, reading)
        for i, spec in enumerate(args.compare)
    ]
    return task, arms


def run_compare(args: argparse.Namespace) -> None:
    """``--compare A B C ...``: every model under one spec (``args.spec``, its base chosen by
    ``eval.specs.comparison_protocol``) and any planner it names, the table against the first
    printed and written as
    JSON, Markdown and a figure."""
    if len(args.compare) < 2:
        raise ValueError(f"--compare needs at least two models, got {len(args.compare)}")
    if args.card:
        raise ValueError("--card describes one model; evaluate each side of --compare alone")
    if args.model_arg:
        raise ValueError(
            "--model-arg applies to --model; give a --compare side its arguments inline "
            "(file.py:make,key=value)"
        )
    out = Path(args.json) if args.json else Path("compare.json")
    paths = compare_paths(out)
    if out.is_dir():
        raise ValueError(f"--json must name a file, not a folder: {out}")
    taken = [str(p) for p in paths.values() if p.exists()]
    if taken and not args.force:
        raise FileExistsError(
            f"{', '.join(taken)} already exist(s); pass --force to overwrite or --json PATH"
        )
    task, arms = _compare_arms(args, readings.get(args.reading))
    names = unique_labels([arm.label for arm in arms])
    p = args.spec.replace(task=task.name, world=task.world.name)
    print(
        f"comparing {len(arms)} models under one spec: task {task.name}, depth {p.depth}, "
        f"{len(p.seeds)} seeds x {p.episodes} episodes, planner {p.planner.name}",
        flush=True,
    )
    result = compare_models(
        [arm.models for arm in arms],
        names,
        [arm.infos for arm in arms],
        spec=p,
        device=args.device,
        progress=not args.no_progress,
        protocol_rule=args.protocol_rule,
        fit_value=lambda model: learned_value(args, model, task),
    )
    # The recorded dict is what is printed and what the Markdown shows.
    recorded = result.to_dict()
    print("\n".join(comparison_lines(recorded)))
    write_report(recorded, paths["json"], overwrite=args.force)
    fig = result.figure()
    tmp = paths["figure"].with_name(f".{paths['figure'].name}.tmp")
    fig.savefig(tmp, dpi=120, format="png")
    tmp.replace(paths["figure"])
    write_text(paths["markdown"], comparison_markdown(recorded, paths["figure"].name))
    print(f"json: {paths['json']}\ntable: {paths['markdown']}\nfigure: {paths['figure']}")


def run_model(args: argparse.Namespace) -> None:
    """``--model NAME|TARGET`` on the ladder: printed, and written to ``--json`` (with
    ``--card`` and no ``--json``: ``default_json``), its card beside it."""
    model, info = command_line_model(args)
    out = Path(args.json) if args.json else (default_json(info) if args.card else None)
    if out is not None:
        check_outputs(out, args.card, args.force)
    log_dir = Path(args.tensorboard) if args.tensorboard else None
    run_one(model, info, args, out, log_dir)
