"""Model specs of ``python -m eval``: what ``--model``, ``--ckpt`` and each ``--compare`` spec
name, and the protocol a comparison of different kinds of models runs under.

A spec is one of:

- ``oracle``; ``noise`` (inline options ``noise,sigma_r=0.35,sigma_i=0.1``);
- a plug-in factory ``pkg.module:factory`` or ``path/file.py:factory`` (inline keyword
  arguments ``file.py:make,slip=0.3``);
- a checkpoint of ``python -m train``, a run folder (read as its ``checkpoints/best.ckpt``, as
  ``--ckpt`` reads it), or a quoted glob of either: several checkpoints are one arm of several
  training seeds, paired with the other arms by sorted position.

Checkpoints of runs whose ``status.json`` is not ``complete`` are refused (``check_complete``)
unless ``--allow-incomplete`` is given, by ``--ckpt`` and ``--compare`` alike.

Protocol of a comparison (``comparison_protocol``): every model is evaluated under ONE
protocol. Each kind of model has its default (built-in models and plug-ins: the controlled
grid's, ``CONTROLLED``, depth 4, 10 seeds x 30 episodes, paper §5.1; checkpoints: the learned
models', ``LEARNED``, depth 2, 5 seeds x 40 episodes, paper §5.4). The comparison takes the
baseline's (the first spec's) default; the protocol options given on the command line
override any field. When the specs' defaults differ, the rule and what each other kind would
have used are printed and recorded with the table.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

from gridplan.core import readings, tasks
from gridplan.core import world as worlds
from gridplan.core.readings import PROJECT, Reading
from gridplan.core.tasks import TASK_A, Task
from gridplan.evaluation.ladder import check_levels
from gridplan.evaluation.spec import (
    CONTROLLED,
    LEARNED,
    PAPER_LEVELS,
    EvalSpec,
    load_spec,
    load_track,
)
from gridplan.models.plugins import (
    build,
    check_plugin,
    display_path,
    is_plugin_target,
    split_spec,
)
from gridplan.training.run_status import STATUS_FILE, read_status

BUILTIN_MODELS = ("oracle", "noise")


def expand_checkpoints(patterns: list[str], option: str = "--ckpt") -> list[Path]:
    """Checkpoint paths from ``--ckpt`` values (or a ``--compare`` spec): globs expanded
    (sorted), a run folder read as its ``checkpoints/best.ckpt``, duplicates dropped.

    Raises:
        ValueError: if a glob matches nothing, a path does not exist, or a folder has no
            ``checkpoints/best.ckpt``.
    """
    paths: list[str] = []
    for pattern in patterns:
        found = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not found:
            raise ValueError(f"{option} {pattern!r} matches no file")
        for path in found:
            if Path(path).is_dir():
                best = Path(path) / "checkpoints" / "best.ckpt"
                if not best.is_file():
                    raise ValueError(
                        f"{option} {path} is a folder without checkpoints/best.ckpt (a run "
                        "folder of python -m train holds one)"
                    )
                path = str(best)
            elif not Path(path).exists():
                raise ValueError(
                    f"{option} {path} does not exist (give a checkpoint, a run folder or a "
                    "quoted glob of them)"
                )
            if path not in paths:
                paths.append(path)
    return [Path(p) for p in paths]


def check_complete(ckpt: Path) -> None:
    """Refuse a checkpoint whose run folder (``<run>/checkpoints/*.ckpt``) records a status
    other than ``complete`` (``gridplan.training.run_status``); folders without a status pass.

    Raises:
        ValueError: naming the run's status and ``--allow-incomplete``.
    """
    if ckpt.parent.name != "checkpoints":
        return
    record = read_status(ckpt.parent.parent)
    if record is not None and record["status"] != "complete":
        raise ValueError(
            f"{ckpt} belongs to a run that is {record['status']} ({ckpt.parent.parent}/"
            f"{STATUS_FILE}); resume it (python -m train resume={ckpt.parent.parent}) or pass "
            "--allow-incomplete to evaluate it anyway"
        )


def spec_kind(spec: str) -> str:
    """``"builtin"``, ``"plugin"`` or ``"checkpoint"`` (a file, run folder or glob)."""
    target = spec.split(",")[0].strip()
    if target in BUILTIN_MODELS:
        return "builtin"
    if is_plugin_target(target) and not target.endswith(".ckpt") and not Path(target).exists():
        return "plugin"
    return "checkpoint"


def default_protocol(kind: str) -> EvalSpec:
    """The default protocol of a kind of model (module docstring)."""
    return LEARNED if kind == "checkpoint" else CONTROLLED


#: The command-line option of each spec field it overrides.
SPEC_FLAGS = {
    "task": "--task",
    "world": "--world",
    "depth": "--depth",
    "seeds": "--seeds",
    "episodes": "--episodes",
    "horizon": "--horizon",
    "n_windows": "--eval-windows",
}


def _describe(p: EvalSpec) -> str:
    return f"depth {p.depth}, {len(p.seeds)} seeds x {p.episodes} episodes"


def parse_levels(text: str | None) -> tuple[str, ...] | None:
    """``--levels`` -> level names (``None``: every level that applies).

    Raises:
        ValueError: on an unknown level.
    """
    if text is None or text.strip() == "all":
        return None
    return check_levels([part.strip() for part in text.split(",") if part.strip()])


def parse_planner_settings(items: list[str]) -> dict[str, str]:
    """``--planner-setting KEY=VALUE`` items -> ``{KEY: VALUE}`` (values converted and
    checked by ``gridplan.planning.planners.planner_settings``).

    Raises:
        ValueError: on an item without ``=`` or a key given twice.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--planner-setting takes KEY=VALUE, got {item!r}")
        if key.strip() in out:
            raise ValueError(f"--planner-setting {key.strip()} given twice")
        out[key.strip()] = value.strip()
    return out


#: ``--ladder-sizes`` -> the protocol file whose ladder sizes it takes.
LADDER_SIZES = {"default": "controlled", "quick": "quick-controlled", "tiny": "tiny-controlled"}
#: The spec fields ``--ladder-sizes`` sets.
SIZE_FIELDS = (
    "branch_states",
    "anchor_starts",
    "anchor_rollouts",
    "probe_questions",
    "xgap_states",
    "n_resamples",
)


def _planner_changes(args, base: EvalSpec) -> dict:
    """The spec's planner fields that ``--planner``, ``--planner-setting``, ``--ties``,
    ``--tree``, ``--leaf-score`` and ``--reading`` set: a reading other than the default names
    the planner's tie rule and tree too (``gridplan.core.readings``), unless
    ``--ties``/``--tree`` say."""
    changes: dict = {}
    name = getattr(args, "planner", None)
    items = getattr(args, "planner_setting", None) or []
    if name is not None:
        changes["name"] = name
        changes["settings"] = parse_planner_settings(items)
    elif items:
        if base.planner.is_search:
            raise ValueError("--planner-setting needs --planner NAME")
        changes["settings"] = {**base.planner.settings, **parse_planner_settings(items)}
    reading = readings.get(getattr(args, "reading", PROJECT.name))
    if reading.name != PROJECT.name:
        changes.update(ties=reading.ties, tree=reading.tree)
    if getattr(args, "ties", None) is not None:
        changes["ties"] = args.ties
    if getattr(args, "tree", None) is not None:
        changes["tree"] = args.tree
    if getattr(args, "leaf_score", None) is not None:
        changes["leaf_score"] = args.leaf_score
    return changes


def command_line_spec(args) -> tuple[EvalSpec, str]:
    """The one spec of a ``python -m eval`` command and the rule that chose its base (empty
    unless ``--compare`` needed one).

    The base is ``--spec FILE`` or ``--track NAME``; else the default protocol of the kind of
    model (``default_protocol``; ``--compare``: ``comparison_protocol``). Every option given
    overrides its field: ``--task``, ``--world``, ``--depth``, ``--seeds`` (``0..N-1``),
    ``--episodes``, ``--horizon``, ``--eval-windows``, the planner's (``_planner_changes``),
    ``--ladder-sizes`` and ``--levels`` (``all``: every level). ``--card`` and ``--compare``
    without ``--levels`` measure every level, unless a spec file or track names its own.

    Raises:
        ValueError: on both ``--spec`` and ``--track``, an unknown track or spec file, or an
            override the spec refuses (naming the field).
    """
    if getattr(args, "spec", None) and getattr(args, "track", None):
        raise ValueError("give --spec FILE or --track NAME, not both")
    named = getattr(args, "spec", None) or getattr(args, "track", None)
    given = {k: getattr(args, k) for k in SPEC_FLAGS if getattr(args, k, None) is not None}
    if "seeds" in given:
        given["seeds"] = tuple(range(given["seeds"]))
    rule = ""
    if named:
        base = load_spec(args.spec) if getattr(args, "spec", None) else load_track(args.track)
    elif getattr(args, "compare", None):
        # One protocol for every model, chosen by a stated rule.
        base, rule = comparison_protocol(args.compare, given)
    else:
        base = default_protocol("checkpoint" if getattr(args, "ckpt", None) else "builtin")
    changes: dict = dict(given)
    planner = _planner_changes(args, base)
    if planner:
        changes["planner"] = planner
    sizes = getattr(args, "ladder_sizes", None)
    if sizes is not None:
        sized = load_spec(LADDER_SIZES[sizes])
        changes.update({k: getattr(sized, k) for k in SIZE_FIELDS})
    if getattr(args, "levels", None):
        changes["levels"] = parse_levels(args.levels)
    elif (getattr(args, "card", False) or getattr(args, "compare", None)) and not named:
        changes["levels"] = None
    elif not named:
        changes["levels"] = PAPER_LEVELS
    return base.replace(**changes), rule


def comparison_protocol(specs: list[str], given: dict) -> tuple[EvalSpec, str]:
    """The base protocol of a comparison and the rule that chose it (module docstring).

    Args:
        specs: the specs, the baseline first.
        given: spec fields set on the command line (named in the rule; ``command_line_spec``
            applies them).

    Returns:
        ``(protocol, rule)``; ``rule`` is empty when every spec defaults to the same protocol
        and nothing was overridden.
    """
    kinds = [spec_kind(s) for s in specs]
    base = default_protocol(kinds[0])
    others = {k: default_protocol(k) for k in kinds if default_protocol(k) != base}
    name = {CONTROLLED: "the controlled grid's", LEARNED: "the learned models'"}
    rule = ""
    if others or given:
        rule = f"the baseline's default ({kinds[0]}: {name[base]}, {_describe(base)})" + (
            f", overridden by {', '.join(SPEC_FLAGS[k] for k in given)}" if given else ""
        )
        for kind, p in others.items():
            rule += f"; a {kind} alone would default to {name[p]} ({_describe(p)})"
        rule += (
            "; every model runs under the protocol above (set --depth/--seeds/--episodes to "
            "choose another)"
        )
    return base, rule


@dataclass
class Arm:
    """One side of a comparison: its label, models (one per training seed) and their
    descriptions."""

    label: str
    models: list = field(default_factory=list)
    infos: list[dict] = field(default_factory=list)


def task_of(args, model=None) -> Task:
    """The task of a command line: ``--task`` on ``--world``; without ``--world``, on the
    world ``model`` declares (a checkpoint's), else the default world.

    Raises:
        ValueError: on an unknown world, or a ``--world`` other than the model's (naming
            both: a model predicts the states of its own world only).
    """
    own = getattr(model, "world", None)
    own = own if isinstance(own, worlds.WORLD_KINDS) else None
    if args.world is None:
        return tasks.get(args.task, world=own)
    world = worlds.get(args.world)
    if own is not None and own != world:
        raise ValueError(
            f"--world {args.world} asks for {world.describe()}, but the model predicts "
            f"{own.describe()}; drop --world or pass --world {own.name}"
        )
    return tasks.get(args.task, world=world)


def builtin(
    name: str, options: dict, reading: Reading = PROJECT, task: Task = TASK_A
) -> tuple[object, dict]:
    """A built-in model of ``task``'s world and its description from ``sigma_r``/``sigma_i``
    options, under ``reading`` (or the reading an inline ``reading=NAME`` option names). The
    description names the reading unless it is the default.

    Raises:
        ValueError: on unknown options or readings, or sigmas given to the oracle.
    """
    from gridplan.core import readings
    from gridplan.models.noise import NoiseModel, OracleModel

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
        oracle = OracleModel(reading, task.world)
        return oracle, {"name": "oracle", "sigma_r": 0.0, "sigma_i": 0.0, **shown}
    info = {"name": "noise", "sigma_r": sigma_r, "sigma_i": sigma_i, **shown}
    return NoiseModel.controlled(sigma_r, sigma_i, task, reading), info


def plugin(target: str, options: dict, task, device) -> tuple[object, dict]:
    """A plug-in model, checked against the contract, and its description: its options
    (``--model-arg``), and ``path``, the file it comes from (relative to the working directory
    when inside it) unless an option of that name records the model's own file (the file is
    in ``factory`` as well).

    Raises:
        PluginError: if it cannot be built or breaks the contract.
    """
    module, _, factory = target.rpartition(":")
    is_file = module.endswith(".py")
    name = f"{Path(module).stem if is_file else module}.{factory}"
    source = display_path(module) if is_file else None
    model = check_plugin(build(target, options, task, device), task, device, name, source)
    info = {"name": name, "factory": target}
    if source is not None:
        info["path"] = source
    return model, {**info, **options}


def label(spec: str) -> str:
    """How a spec is named in tables: a plug-in file or checkpoint path relative to the
    working directory when inside it, the rest as given."""
    target, sep, rest = spec.partition(",")
    kind = spec_kind(spec)
    if kind == "plugin":
        module, _, factory = target.rpartition(":")
        if module.endswith(".py"):
            target = f"{display_path(module)}:{factory}"
    elif kind == "checkpoint" and not glob.has_magic(target) and Path(target).exists():
        target = display_path(target)
    return target + (sep + rest if sep else "")


def spec_arm(
    spec: str, task, device, reading: Reading = PROJECT, allow_incomplete: bool = False
) -> Arm:
    """The arm one spec names (module docstring).

    Raises:
        ValueError: if the spec names nothing loadable (``PluginError`` for plug-ins), or a
            checkpoint of an incomplete run without ``allow_incomplete``.
    """
    from gridplan.evaluation.latent_eval import load_run_model

    target, options = split_spec(spec)
    kind = spec_kind(spec)
    if kind == "builtin":
        model, info = builtin(target, options, reading, task)
        return Arm(label(spec), [model], [info])
    if kind == "plugin":
        model, info = plugin(target, options, task, device)
        return Arm(label(spec), [model], [info])
    if options:
        raise ValueError(f"checkpoints take no options, got {options} in {spec!r}")
    paths = expand_checkpoints([target], "--compare")
    if not allow_incomplete:
        for path in paths:
            check_complete(path)
    models = [load_run_model(p, device) for p in paths]
    infos = [{"name": "learned", "checkpoint": display_path(p)} for p in paths]
    return Arm(label(spec), models, infos)


def unique_labels(labels: list[str]) -> list[str]:
    """``labels`` with repeats numbered (``oracle``, ``oracle #2``)."""
    seen: dict[str, int] = {}
    out = []
    for text in labels:
        seen[text] = seen.get(text, 0) + 1
        out.append(text if seen[text] == 1 else f"{text} #{seen[text]}")
    return out
