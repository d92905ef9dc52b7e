"""Command line of ``python -m eval``: closed-loop and prediction-error evaluation.

Examples::

    python -m eval --model oracle
    python -m eval --model noise --sigma-r 0.35 --sigma-i 0.1 --json results/noise.json
    python -m eval --model noise --sigma-r 0.35 --sigma-i 0.1 --reading paper
    python -m eval --model noise --sigma-r 0.35 --ties random   # random tie-breaks
    python -m eval --model oracle --task B --depth 2 --seeds 5 --episodes 40
    python -m eval --ckpt runs/uniform-balanced-20k-seed0/version_0/checkpoints/best.ckpt
    python -m eval --ckpt 'runs/*/version_*/checkpoints/best.ckpt'    # several, one by one
    python -m eval --ckpt runs/uniform-balanced-20k-seed0/version_1 --card  # a run folder
    python -m eval --model scripts/example_model.py:make --card      # a plug-in, every level
    python -m eval --model noise --sigma-r 0.35 --levels L4,L7 --json noisy.json
    python -m eval --compare oracle noise,sigma_r=0.35,sigma_i=0.1   # paired, same draws
    python -m eval --model noise --sigma-r 0.2 --planner cem --planner-setting candidates=32
    python -m eval --model noise --sigma-r 0.2 --planner search-learned-v --levels L4,L7
    python -m eval --model noise --sigma-r 0.35 --track quick-a        # a benchmark track
    python -m eval --model oracle --spec my_spec.yaml --task B          # a spec file, overridden
    python -m eval --suite quick --model scripts/example_model.py:make --board board/

Without ladder options (``--levels``, ``--card``, ``--compare``) the report is the paper's
(``gridplan.evaluation.ladder.paper_report``: the levels L1 and closed-loop success); with them
it is ``gridplan.evaluate``'s, a superset measured by the same level functions
(``eval.ladder``).

Every evaluation runs under one ``EvalSpec`` (``gridplan.evaluation.spec``), which the report
records whole with its content hash: ``--spec FILE`` or ``--track NAME`` names one, and every
other option (task, world, depth, seeds, episodes, windows, planner, tie rule, tree, levels)
overrides a field of it (``eval.specs.command_line_spec``). Without either, a built-in model
or plug-in is evaluated under the controlled protocol, a checkpoint of ``python -m train`` under
the learned models' (``configs/eval/protocols/``: paper §5.1, §5.4); the
checkpoint's report goes to ``<checkpoint>.eval.json`` beside it (``best.ckpt``
-> ``best.eval.json``, so best and last never collide; another task or protocol gets a name
that says so, ``checkpoint_json_path``) and into the run's TensorBoard folder under ``eval/``.
The evaluation of a run's ``best.ckpt`` under that protocol (Task A, the one written to
``best.eval.json``) also becomes the run's HParams metrics ``hp/eval_success``,
``hp/eval_DRPE_graded``, ``hp/eval_DRPE_binary`` and ``hp/eval_E_tot``
(``gridplan.training.hparams_summary.log_eval_metrics``), beside its config and training
metrics in TensorBoard's HParams tab.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from eval import ladder, suite
from eval.report import format_table
from eval.specs import (
    BUILTIN_MODELS,
    SPEC_FLAGS,
    check_complete,
    command_line_spec,
    expand_checkpoints,
    task_of,
)
from gridplan.core import readings, tasks
from gridplan.evaluation.ladder import paper_report
from gridplan.evaluation.schema import write_report
from gridplan.evaluation.spec import CONTROLLED, LEAF_SCORES, LEARNED, EvalSpec, track_names
from gridplan.models.plugins import PluginError, is_plugin_target
from gridplan.planning.planner import TIES
from gridplan.planning.planners import PLANNERS
from gridplan.planning.registry import TREES
from gridplan.util.threads import configure_threads, describe


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
        # Usage lines name the command the user typed: the console script or the module.
        prog="gridplan-eval" if Path(sys.argv[0]).name == "gridplan-eval" else "python -m eval",
        description="Evaluate a world model for decisions: closed-loop success of the "
        "full-width planner, E_tot, DRPE, error profiles, event audit and VPE.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    # No parser defaults for these: they depend on --model vs --ckpt (see fill_defaults).
    unset = argparse.SUPPRESS
    p.add_argument(
        "--model",
        default=unset,
        metavar="MODEL",
        help=f"built-in model ({', '.join(BUILTIN_MODELS)}; default: oracle), or a plug-in "
        "factory pkg.module:factory or path/file.py:factory",
    )
    p.add_argument(
        "--ckpt",
        action="append",
        default=unset,
        metavar="PATH",
        help="checkpoint of python -m train (or its run folder: checkpoints/best.ckpt); "
        "repeat it or give a quoted glob for several",
    )
    p.add_argument(
        "--spec",
        default=unset,
        metavar="FILE",
        help="an evaluation spec file (YAML, gridplan.evaluation.spec; 'base: controlled' "
        "starts from a shipped protocol); the options below override its fields",
    )
    p.add_argument(
        "--track",
        default=unset,
        metavar="NAME",
        help=f"a benchmark track shipped in configs/eval/tracks ({', '.join(track_names())}); "
        "the options below override its fields",
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
    p.add_argument(
        "--reading",
        choices=readings.names(),
        default=readings.PROJECT.name,
        help="how the built-in models read the paper's ambiguous choices (gridplan.core.readings)",
    )
    p.add_argument(
        "--ties",
        choices=TIES,
        default=None,
        help="the planner's rule among tied best first actions: first (lowest action index) "
        "or random (uniform); default: the spec's (first; docs/PREREGISTERED.md, Rule 1), or "
        "the --reading's. Every report records it",
    )
    p.add_argument(
        "--tree",
        choices=TREES,
        default=None,
        help="the law of a stochastic model's draws in the search: independent (every leaf "
        "its own) or shared-prefix (one draw per tree node); default: the spec's "
        "(independent), or the --reading's",
    )
    p.add_argument(
        "--leaf-score",
        choices=LEAF_SCORES,
        default=None,
        help="how a latent model's leaves are scored: decoder (the true reward and V* of "
        "its decoded states, the paper's protocol) or heads (its own reward(z, action, "
        "z_next) and value(z) heads); default: the spec's (decoder). Every report records it",
    )
    p.add_argument("--task", choices=tasks.names(), default=unset, help="default: the spec's (A)")
    p.add_argument(
        "--world",
        default=None,
        help="the gridworld (gridplan.core.world: default, g16-k8, g32-k64, any g{N}-k{K}, or "
        "MiniGrid's DoorKey minigrid-doorkey-{N}x{N}[-t{T} with T floor tiles]); default: a "
        "checkpoint's own world, else default",
    )
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
    p.add_argument(
        "--planner",
        choices=PLANNERS,
        default=None,
        help="the planner measured (gridplan.planning.planners; default: the paper's "
        "full-width search with exact V*, unrecorded); recorded in the report",
    )
    p.add_argument(
        "--planner-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of --planner (cem/mppi: horizon, candidates, elites, iterations, "
        "value=exact|learned|none; mppi: temperature; mcts: budget, parallel, exploration, "
        "value); repeatable",
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    p.add_argument(
        "--threads",
        type=_positive_int,
        help="torch CPU threads (default: OMP_NUM_THREADS, else 1: the fastest setting "
        "measured for every workload, quiet or beside a busy process; "
        "gridplan.util.threads.default_threads)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    ladder.add_arguments(p)
    suite.add_arguments(p)
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="evaluate checkpoints of runs whose status.json is not 'complete' (--ckpt and "
        "--compare)",
    )
    p.add_argument(
        "--debug",
        action="store_true",
        help="on an error, show the full traceback (a plug-in's own frames included) instead "
        "of a one-line message, and show every warning (not once per place)",
    )
    return p


def fill_defaults(args: argparse.Namespace) -> None:
    """Resolve --model vs --ckpt and set ``args.spec`` (``eval.specs.command_line_spec``:
    the spec of ``--spec``/``--track`` or of that choice's default protocol, every option given
    overriding its field; ``--compare``: one spec for every model, its rule in
    ``args.protocol_rule``), then ``args.task`` and ``args.world`` from it."""
    args.ckpt = getattr(args, "ckpt", None)
    args.model = getattr(args, "model", None)
    compare = getattr(args, "compare", None)
    if args.ckpt and args.model:
        raise ValueError("give either --model or --ckpt, not both")
    if compare and (args.ckpt or args.model):
        raise ValueError("--compare names both models; drop --model/--ckpt")
    if getattr(args, "models", None) and not args.suite:
        raise ValueError("--models names the models of --suite; give --suite NAME")
    if args.suite:
        _check_suite_options(args)
    elif not args.ckpt and not compare:
        args.model = args.model or "oracle"
        if args.model not in BUILTIN_MODELS and not is_plugin_target(args.model):
            raise ValueError(
                f"--model {args.model!r} is neither a built-in model ({', '.join(BUILTIN_MODELS)})"
                " nor a plug-in factory pkg.module:factory / path/file.py:factory"
            )
    builtin = args.model in BUILTIN_MODELS or compare or args.suite
    if args.reading != readings.PROJECT.name and not builtin:
        raise ValueError(
            "--reading applies to the built-in models (oracle, noise), not to --ckpt or a plug-in"
        )
    if args.suite:
        return
    args.spec, args.protocol_rule = command_line_spec(args)
    args.task = args.spec.task
    if args.world is None and args.spec.world is not None:
        args.world = args.spec.world


#: Options that set a field of the spec: a suite runs each track's own spec.
_SPEC_FIELD_OPTIONS = {
    "spec": "--spec",
    "track": "--track",
    **SPEC_FLAGS,
    "planner": "--planner",
    "ties": "--ties",
    "tree": "--tree",
    "leaf_score": "--leaf-score",
    "ladder_sizes": "--ladder-sizes",
    "levels": "--levels",
    "compare": "--compare",
    "card": "--card",
    "json": "--json",
}


def _check_suite_options(args: argparse.Namespace) -> None:
    """Raises ValueError naming the options a ``--suite`` run cannot take: each track is its
    own spec, and the board holds the rows."""
    given = [flag for key, flag in _SPEC_FIELD_OPTIONS.items() if getattr(args, key, None)]
    if args.reading != readings.PROJECT.name:
        given.append("--reading (give it inline: noise,sigma_r=0.35,reading=paper)")
    if given:
        raise ValueError(
            f"--suite evaluates every track under its own spec and writes rows to --board; "
            f"drop {', '.join(given)} (a track's fields are changed in its file)"
        )


def checkpoint_json_path(ckpt: Path, spec: EvalSpec = LEARNED) -> Path:
    """Where a checkpoint's report goes by default: ``best.ckpt`` -> ``best.eval.json`` under
    the learned protocol (paper §5.4: Task A, depth 2, the default tie rule and tree, the
    paper's search), and a name holding every field that differs otherwise, so a smoke,
    other-task or other-planner evaluation never takes the protocol's file:
    ``best.eval.B-d4.json`` (task B, depth 4), ``best.eval.A-d2-s1x5.json`` (1 seed x 5
    episodes), ``-w100`` (held-out windows), ``-h5`` (rollout horizon), ``-ties-random``,
    ``-tree-shared-prefix``, ``-leaf-heads``, ``-cem`` or ``-cem-candidates=32`` (a planner
    other than ``search`` and its settings); a track or spec file of another content adds its
    name and the first 8 digits of its content hash (``best.eval.quick-a-1a2b3c4d.json``)."""
    learned = LEARNED.replace(world=spec.world, levels=spec.levels)
    if spec.content_hash() == learned.content_hash():
        return ckpt.with_suffix(".eval.json")
    if spec.name not in ("custom", LEARNED.name, "controlled"):
        return ckpt.with_suffix(f".eval.{spec.name}-{spec.content_hash()[:8]}.json")
    name = f"{spec.task}-d{spec.depth}"
    if (spec.seeds, spec.episodes) != (LEARNED.seeds, LEARNED.episodes):
        seeds = spec.seeds
        first = "" if seeds == tuple(range(len(seeds))) else f"from{seeds[0]}-"
        name += f"-s{first}{len(seeds)}x{spec.episodes}"
    if spec.n_windows != LEARNED.n_windows:
        name += f"-w{spec.n_windows}"
    if spec.horizon != LEARNED.horizon:
        name += f"-h{spec.horizon}"
    planner = spec.planner
    if planner.ties != LEARNED.planner.ties:
        name += f"-ties-{planner.ties}"
    if planner.tree != LEARNED.planner.tree:
        name += f"-tree-{planner.tree}"
    if planner.leaf_score != LEARNED.planner.leaf_score:
        name += f"-leaf-{planner.leaf_score}"
    if not planner.is_search or planner.settings:
        settings = [f"{k}={v}" for k, v in planner.settings.items()]
        name += "".join(f"-{part}" for part in (planner.name, *settings))
    return ckpt.with_suffix(f".eval.{name}.json")


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
        # A latent run (gridplan.models.latent) names its family and observations.
        **(
            {"family": model.metadata.get("family"), "obs": model.obs_kind}
            if model.metadata.get("kind") == "latent"
            else {}
        ),
    }


def _report(model, info: dict, args: argparse.Namespace) -> dict:
    """``paper_report`` under the command line's spec."""
    return paper_report(
        model,
        info,
        args.spec,
        device=args.device,
        progress=not args.no_progress,
        learned_value=ladder.learned_value(args, model, task_of(args, model)),
    )


def _ensemble_uncertainty(model, args: argparse.Namespace) -> dict:
    """An ensemble's disagreement against its rollout error on the report's held-out windows
    (``gridplan.metrics.calibration.uncertainty_vs_error``: Spearman with a seeded bootstrap 95% CI,
    AURC), printed with the report's tables; the card (``--card``) adds the ladder's
    risk–coverage figure."""
    from gridplan.data.datasets import eval_windows
    from gridplan.metrics.calibration import uncertainty_vs_error

    p = args.spec
    windows = eval_windows(p.n_windows, p.horizon, task=task_of(args, model), device=args.device)
    return uncertainty_vs_error(model, windows).to_dict()


def _evaluate_checkpoints(args: argparse.Namespace) -> None:
    from gridplan.evaluation.latent_eval import load_run_model
    from gridplan.training.module import log_report

    paths = expand_checkpoints(args.ckpt)
    if not args.allow_incomplete:
        for path in paths:
            check_complete(path)
    if args.json and len(paths) > 1:
        raise ValueError(
            f"--json names one file but {len(paths)} checkpoints were given; without --json "
            "each report goes beside its checkpoint"
        )
    outs = [
        Path(args.json)
        if args.json
        else checkpoint_json_path(p, args.spec)
        for p in paths
    ]
    # Every file is loaded (and validated) and its world checked against --world before an
    # existing report is refused, and both before the first, possibly long, evaluation.
    models = [load_run_model(p, args.device) for p in paths]
    for model in models:
        task_of(args, model)
    for out in outs:
        ladder.check_outputs(out, args.card, args.force)
    for path, model, out in zip(paths, models, outs, strict=True):
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        log_dir = Path(args.tensorboard) if args.tensorboard else run_dir
        step = int(model.metadata.get("global_step", 0))
        info = _checkpoint_info(path, model)
        if ladder.wants_ladder(args):
            report = ladder.run_one(model, info, args, out, log_dir, step)
            _log_hparams(path, model, report, args, log_dir, step)
            continue
        report = _report(model, info, args)
        if getattr(model, "members", 1) >= 2:
            report["uncertainty"] = _ensemble_uncertainty(model, args)
        print(format_table(report))
        write_report(report, out, overwrite=args.force)
        log_report(log_dir, report, step, "eval", task_of(args, model))
        print(f"json: {out}\ntensorboard: {log_dir} (eval/)", flush=True)
        _log_hparams(path, model, report, args, log_dir, step)


def _log_hparams(path: Path, model, report: dict, args, log_dir: Path | None, step: int) -> None:
    """Add the report to the run's HParams when it is the evaluation of the run's
    ``best.ckpt`` under Task A's learned protocol (``best.eval.json``'s); say why not
    otherwise, so a smoke evaluation never stands in for the protocol's in the HParams."""
    from gridplan.training.hparams_summary import eval_metrics, log_eval_metrics, trial_name

    if log_dir is None or not eval_metrics(report):
        return
    spec = args.spec
    learned = LEARNED.replace(world=spec.world, levels=spec.levels)
    differs = {
        "checkpoint": path.name != "best.ckpt",
        "task": spec.task != LEARNED.task,
        "protocol": spec.replace(task=LEARNED.task, planner=learned.planner).content_hash()
        != learned.content_hash(),
        "tie rule": spec.planner.ties != LEARNED.planner.ties,
        "tree": spec.planner.tree != LEARNED.planner.tree,
        "leaf score": spec.planner.leaf_score != LEARNED.planner.leaf_score,
        "planner": not spec.planner.is_search or bool(spec.planner.settings),
    }
    if any(differs.values()):
        print(
            "hparams: unchanged (they hold the Task A learned-protocol evaluation of "
            "best.ckpt under the default tie rule and the paper's search; this one has another "
            + ", ".join(k for k, v in differs.items() if v)
            + ")",
            flush=True,
        )
        return
    run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    values = log_eval_metrics(
        log_dir, model.metadata.get("config", {}), report, trial_name(run_dir), step
    )
    shown = ", ".join(f"{tag} {value:.4f}" for tag, value in values.items())
    print(f"hparams: {log_dir} ({shown})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug:
        import warnings

        warnings.simplefilter("always")
        print("debug: full tracebacks, every warning shown", file=sys.stderr, flush=True)
    try:
        check_device(args.device)
        print(describe(configure_threads(args.threads)), flush=True)
        fill_defaults(args)
        if args.suite:
            suite.run_suite(args)
            return 0
        if args.compare:
            ladder.run_compare(args)
            return 0
        if args.ckpt:
            _evaluate_checkpoints(args)
            return 0
        if ladder.wants_ladder(args):
            ladder.run_model(args)
            return 0
        if args.json:
            ladder.check_outputs(Path(args.json), False, args.force)
        model, info = ladder.command_line_model(args)
        report = _report(model, info, args)
        print(format_table(report))
        if args.json:
            path = write_report(report, args.json, overwrite=args.force)
            print(f"json: {path}")
        if args.tensorboard:
            ladder.log_tensorboard(Path(args.tensorboard), report, 0, task_of(args, model))
            print(f"tensorboard: {args.tensorboard} (eval/)")
    except (ValueError, FileExistsError, FileNotFoundError, RuntimeError) as err:
        if args.debug:
            raise
        hint = ""
        if isinstance(err, PluginError) or err.__cause__ is not None:
            hint = " (--debug shows the full traceback)"
        parser.exit(2, f"error: {err}{hint}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
