"""``gridplan-eval --suite NAME --models SPEC ... --board DIR``: models on every track of a
suite, one board row per (model, track).

A track is a named, versioned ``EvalSpec`` file (``configs/eval/tracks/``); a suite lists tracks
(``configs/eval/suites/``). Each (model, track) pair is one job: the model is built for the
track (a built-in model on the track's world, a plug-in with the track's task, a checkpoint as
trained), held to the track's world and observation kind (a pair that does not apply is
skipped with its reason), evaluated under the track's spec, and written to the board folder as
a row (``gridplan.board``: the spec hash, the model's fingerprint, every metric with its CI,
wall time) beside its full report (``reports/``).

Incremental: a pair whose (model fingerprint, track hash) row exists is not recomputed, and
changing a track's content changes its hash, so only that track is computed again; ``--force``
recomputes. The jobs run through a Hydra launcher (``gridplan.training.dispatch.launch``:
``basic`` here by default, ``joblib`` for local workers, ``submitit_slurm`` for a cluster), one
job per (model, track).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from eval.specs import BUILTIN_MODELS, check_complete, expand_checkpoints, spec_arm, spec_kind
from eval.specs import label as spec_label
from gridplan.core import readings
from gridplan.evaluation.spec import EvalSpec, fitted_to, load_suite, model_obs
from gridplan.models.plugins import split_spec

#: The metrics a row carries, from the report: (row key, level, report path).
ROW_METRICS = (
    ("regret", "L4", ("ladder", "L4", "decision_regret")),
    ("decision_agreement", "L4", ("ladder", "L4", "decision_agreement")),
    ("optimality_regret", "L7", ("ladder", "L7", "optimality_regret")),
    ("policy_gain", "L7", ("ladder", "L7", "policy_gain")),
    ("xgap", "L7", ("ladder", "L7", "xgap")),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The suite options of ``python -m eval``."""
    p.add_argument(
        "--suite",
        metavar="NAME",
        help="evaluate --models (or --model/--ckpt) on every track of a suite "
        "(configs/eval/suites) into --board",
    )
    p.add_argument(
        "--models",
        nargs="+",
        metavar="SPEC",
        help="with --suite: the models, as --compare names them (built-ins with inline "
        "options, plug-ins file.py:factory, checkpoints, run folders, quoted globs)",
    )
    p.add_argument("--board", metavar="DIR", help="with --suite: the board folder of the rows")
    p.add_argument(
        "--baselines",
        action="store_true",
        help="with --suite: add every built-in model family (the oracle, points of the "
        "controlled family, MLP variants, an ensemble, latent families; eval.baselines), the "
        "learned ones trained once into <board>/baselines",
    )
    p.add_argument(
        "--baseline-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --baselines: a python -m train override of every learned baseline "
        "(data=4k, trainer.max_epochs=3); repeatable",
    )
    p.add_argument(
        "--launcher",
        default=None,
        metavar="NAME",
        help="with --suite: the Hydra launcher of the jobs (basic, joblib, submitit_local, "
        "submitit_slurm, ...); default: basic (one after another here)",
    )
    p.add_argument(
        "--launcher-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --suite: a Hydra override of the launch (hydra.launcher.n_jobs=4, "
        "hydra.launcher.partition=gpu); repeatable",
    )


@dataclass(frozen=True)
class SuiteModel:
    """One model of a suite run: the spec naming it, its label and fingerprint."""

    spec: str
    label: str
    fingerprint: str


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(spec: str) -> str:
    """SHA-256 (hex) that names what a model spec evaluates: a built-in model's name, options
    and reading; a plug-in's source file (or module file), factory and options; a checkpoint's
    bytes. Equal fingerprints evaluate the same model.

    Raises:
        ValueError: if a plug-in's module or a checkpoint cannot be found.
    """
    target, options = split_spec(spec)
    kind = spec_kind(spec)
    if kind == "builtin":
        options = {"sigma_r": 0.0, "sigma_i": 0.0, "reading": readings.PROJECT.name, **options}
        options = {k: (float(v) if k.startswith("sigma") else v) for k, v in options.items()}
        text = json.dumps({"builtin": target, **options}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()
    if kind == "plugin":
        module, _, factory = target.rpartition(":")
        if module.endswith(".py"):
            source = Path(module)
        else:
            found = importlib.util.find_spec(module)
            if found is None or found.origin is None:
                raise ValueError(f"plug-in module {module!r} cannot be found")
            source = Path(found.origin)
        if not source.is_file():
            raise ValueError(f"plug-in file {source} does not exist")
        text = json.dumps({"factory": factory, "options": options}, sort_keys=True)
        return hashlib.sha256(_sha256_file(source).encode() + text.encode()).hexdigest()
    (path,) = expand_checkpoints([target], "--models")
    return _sha256_file(path)


def _expanded(spec: str, allow_incomplete: bool) -> list[str]:
    """A model spec as one spec per model: a built-in or plug-in as it is; a checkpoint, run
    folder or glob as its checkpoint files (``best.ckpt`` of a run folder), each of a complete
    run unless ``allow_incomplete``."""
    if spec_kind(spec) != "checkpoint":
        return [spec]
    paths = expand_checkpoints([spec.split(",")[0]], "--models")
    if not allow_incomplete:
        for path in paths:
            check_complete(path)
    return [str(p) for p in paths]


def suite_models(
    args: argparse.Namespace, labelled: list[tuple[str, str]] = ()
) -> list[SuiteModel]:
    """The models of a suite run: ``--models`` specs, ``--model`` (with
    ``--sigma-r``/``--sigma-i``/``--model-arg`` folded in), every ``--ckpt`` path, then the
    ``(spec, label)`` pairs of ``labelled`` (the baselines).

    Raises:
        ValueError: on no model, a glob or checkpoint that matches nothing, or a checkpoint of
            an incomplete run (without ``--allow-incomplete``).
    """
    specs = list(args.models or [])
    if args.model:
        extra = [f"sigma_r={args.sigma_r}", f"sigma_i={args.sigma_i}"] if (
            args.model in BUILTIN_MODELS and (args.sigma_r or args.sigma_i)) else []
        specs.append(",".join([args.model, *extra, *args.model_arg]))
    pairs = [
        (model, spec_label(model))
        for spec in specs + list(args.ckpt or [])
        for model in _expanded(spec, args.allow_incomplete)
    ]
    pairs += [(model, label) for spec, label in labelled for model in _expanded(spec, False)]
    if not pairs:
        raise ValueError(
            "--suite needs models: --models SPEC ..., --model, --ckpt or --baselines"
        )
    unique = dict(pairs)
    return [SuiteModel(s, label, fingerprint(s)) for s, label in unique.items()]


def _at(report: dict, path: tuple[str, ...]):
    for key in path:
        if not isinstance(report, dict) or key not in report:
            return None
        report = report[key]
    return report


def _metric(value) -> dict:
    """A report number as a row metric: ``{"value", "ci"}`` (and ``se`` where known)."""
    if isinstance(value, dict):
        out = {"value": value.get("mean"), "ci": None}
        if value.get("low") is not None and value.get("high") is not None:
            out["ci"] = [value["low"], value["high"]]
        if value.get("se") is not None:
            out["se"] = value["se"]
        return out
    return {"value": value, "ci": None}


def metrics_of(report: dict) -> dict:
    """Every row metric of a report (``Report.to_dict``): closed-loop success with its normal
    95% interval (mean +- 1.96 SE, clipped to [0, 1]), E_tot and graded DRPE (L1), and the
    ``ROW_METRICS`` of the levels measured."""
    success = report["success"]
    half = 1.96 * success["se"]
    out = {
        "success": {
            "value": success["mean"],
            "ci": [max(0.0, success["mean"] - half), min(1.0, success["mean"] + half)],
            "se": success["se"],
        }
    }
    if "E_tot" in report:
        out["e_tot"] = {"value": report["E_tot"], "ci": None}
        out["drpe"] = {"value": report["DRPE"]["graded"], "ci": None}
    for key, level, path in ROW_METRICS:
        if level in report["levels"]:
            value = _at(report, path)
            if value is not None:
                out[key] = _metric(value)
    return out


def row_of(
    report: dict, suite: str, track: EvalSpec, model: SuiteModel, wall_s: float, path: str
) -> dict:
    """The board row of one (model, track) report (``gridplan.board.schema``)."""
    from gridplan import __version__
    from gridplan.board.row_schema import SCHEMA_VERSION

    return {
        "schema_version": SCHEMA_VERSION,
        "gridplan_version": __version__,
        "suite": suite,
        "track": {
            "name": track.name,
            "version": track.version,
            "hash": track.content_hash(),
            "spec": track.to_dict(),
        },
        "model": {
            "name": model.label,
            "fingerprint": model.fingerprint,
            "kind": _kind(report),
            "info": report["model"],
        },
        "metrics": metrics_of(report),
        "wall_s": round(wall_s, 3),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "report": path,
    }


def _kind(report: dict) -> str:
    info = report["model"]
    if report.get("latent") is not None or "E_repr" in report:
        return "latent"
    if "checkpoint" in info:
        return "checkpoint"
    if info.get("name") == "oracle":
        return "oracle"
    if info.get("name") == "noise":
        return "controlled"
    return "plugin"


def run_job(
    suite: str, track: EvalSpec, model: SuiteModel, board: str, device: str, threads: int
) -> dict:
    """One (model, track) job: build, check, evaluate, write the row. Returns ``{"status":
    "computed" | "skipped", "row" | "reason"}``; a pair that does not apply (another world or
    observation kind) is skipped with its reason."""
    from gridplan.board.store import Board
    from gridplan.evaluation.ladder import evaluate
    from gridplan.evaluation.schema import write_report

    torch.set_num_threads(threads)
    # One model per spec here: a checkpoint spec is one file, checked by ``_expanded``.
    arm = spec_arm(model.spec, track.resolved_task(), device, allow_incomplete=True)
    built, info = arm.models[0], arm.infos[0]
    own = getattr(built, "world", None)
    if own is not None and own != track.resolved_task().world:
        return {"status": "skipped", "reason": f"the model predicts world {own.name}, the track "
                f"is on {track.world}"}
    if model_obs(built) != track.obs:
        return {"status": "skipped", "reason": f"the model reads {model_obs(built)} "
                f"observations, the track {track.obs}"}
    spec = fitted_to(track, built)
    start = time.perf_counter()
    report = evaluate(built, spec, device=device, model_info=info).to_dict()
    wall = time.perf_counter() - start
    store = Board(board)
    rel = f"reports/{model.fingerprint[:16]}-{track.name}-{track.content_hash()[:12]}.json"
    write_report(report, Path(board) / rel, overwrite=True)
    row = row_of(report, suite, track, model, wall, rel)
    store.write(row, force=True)
    print(_line(track, model, _row_text(row)), flush=True)
    return {"status": "computed", "row": row}


def _line(track: EvalSpec, model: SuiteModel, text: str) -> str:
    return f"  {track.name:<18} {model.label:<40} {text}"


def _row_text(row: dict) -> str:
    m = row["metrics"]
    parts = [f"success {m['success']['value']:.3f} ± {m['success']['se']:.3f}"]
    for key, name in (("regret", "regret"), ("drpe", "DRPE"), ("e_tot", "E_tot")):
        if key in m and m[key]["value"] is not None:
            parts.append(f"{name} {m[key]['value']:.4f}")
    return ", ".join(parts) + f" ({row['wall_s']:.1f} s)"


def run_suite(args: argparse.Namespace) -> None:
    """``--suite``: every (model, track) pair not yet on the board, through the launcher;
    prints one line per pair and a summary.

    Raises:
        ValueError: without ``--board``, on an unknown suite (listing the valid ones), or as
            ``suite_models``; a job's error as it raised it (``launch``).
    """
    from gridplan.board.store import Board
    from gridplan.training.dispatch import Job, Launcher, launch

    if not args.board:
        raise ValueError("--suite needs --board DIR (the folder of the rows)")
    from eval.baselines import baseline_specs

    suite = load_suite(args.suite)
    if args.baseline_override and not args.baselines:
        raise ValueError("--baseline-override changes the training of --baselines; add it")
    labelled = baseline_specs(args.board, args.baseline_override, args.device) if (
        args.baselines) else []
    models = suite_models(args, labelled)
    board = Board(args.board)
    todo, lines = [], []
    for model in models:
        for track in suite.tracks:
            if not args.force and board.has(model.fingerprint, track.content_hash()):
                lines.append(_line(track, model, "on the board (hash unchanged): not recomputed"))
                continue
            todo.append((track, model))
    parallel = 1 if args.launcher in (None, "basic") else max(1, len(todo))
    threads = 1 if parallel > 1 else torch.get_num_threads()
    jobs = [
        Job(f"{i:03d}-{track.name}", run_job,
            {"suite": suite.name, "track": track, "model": model, "board": str(board.folder),
             "device": str(args.device), "threads": threads})
        for i, (track, model) in enumerate(todo)
    ]
    print(f"suite {suite.name}: {len(models)} model(s) x {len(suite.tracks)} track(s); "
          f"{len(jobs)} to compute, {len(models) * len(suite.tracks) - len(jobs)} on the board",
          flush=True)
    if lines:
        print("\n".join(lines), flush=True)
    start = time.perf_counter()
    folder = board.folder / "jobs" / datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    results = launch(jobs, folder, Launcher(args.launcher, None, tuple(args.launcher_override)),
                     parallel) if jobs else []
    skipped = [
        _line(track, model, f"skipped: {result['reason']}")
        for (track, model), result in zip(todo, results, strict=True)
        if result["status"] == "skipped"
    ]
    if skipped:
        print("\n".join(skipped))
    print(f"board: {board.folder} ({len(jobs) - len(skipped)} computed, {len(skipped)} skipped, "
          f"{len(models) * len(suite.tracks) - len(jobs)} unchanged) in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
