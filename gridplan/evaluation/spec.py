"""The evaluation spec: every setting of one evaluation besides the model, as one recorded
object (``docs/DESIGN.md``, "Evaluation").

An ``EvalSpec`` says what is measured and how: the task and world, the observation kind the
model reads, the planner (name, settings, tie rule, tree: ``PlannerSpec``), the protocol (depth,
closed-loop seeds x episodes, held-out windows and their horizon ``H``, the ladder's sample
sizes, bootstrap resamples, the seed of the ladder's random streams) and the levels. It is
frozen, validated on construction, hashable, and serialises to a dict (``to_dict``) whose
content hash (``content_hash``) every report records, so two numbers computed under different
specs are never mixed.

Named specs are YAML files shipped in the package (``configs/eval/``, package
``gridplan.conf.eval``):

- ``protocols/``: the paper's two protocols, ``controlled`` (paper §5.1, Table 2: depth 4,
  10 seeds x 30 episodes, 1000 windows, H = 10) and ``learned`` (paper §5.4, Table 3: depth 2,
  5 seeds x 40 episodes), and the reproduction profiles' smaller ones (``quick-*``, ``tiny-*``);
- ``tracks/``: benchmark tracks, each a spec with a name and a version;
- ``suites/``: lists of tracks.

A spec file may start from another with ``base: <protocol name>``; its own keys win. Unknown
keys are refused by name with the valid ones listed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.core.render import ALL_OBS_KINDS
from gridplan.evaluation.anchors import ANCHORS, get_anchors
from gridplan.evaluation.decisions import XGAP_THRESHOLD
from gridplan.evaluation.schema import LEVELS
from gridplan.metrics.stats import BOOTSTRAP_RESAMPLES
from gridplan.models.capabilities import capabilities_of
from gridplan.planning.planner import TIES
from gridplan.planning.planners import check_planner, planner_settings
from gridplan.planning.registry import TREES
from gridplan.planning.scorers import is_deterministic
from gridplan.training.config import CONFIGS_ROOT

#: Version of the spec's dict layout (``to_dict``); a file of another version is refused.
SPEC_FORMAT = 1
#: Where the named specs live (the package ``gridplan.conf.eval``).
SPEC_ROOT = CONFIGS_ROOT / "eval"
#: Observation kinds a spec can name: the physical state, the symbolic grid, pixels, and on
#: MiniGrid DoorKey the egocentric view and the full grid (``gridplan.core.render``).
OBS_KINDS = ALL_OBS_KINDS
#: Levels a spec can name: the ladder's (``gridplan.evaluation.schema.LEVELS``) and
#: ``success`` (the closed loop alone, without the rest of L7).
SPEC_LEVELS = (*LEVELS, "success")
#: The levels of the paper's report (paper §4 metrics and §3 closed-loop success).
PAPER_LEVELS = ("L1", "success")
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
#: Keys of a spec file that describe it but are not part of its content (or its hash).
_LABELS = ("name", "version", "description")


def _positive(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}.{name} must be an integer >= 1, got {value!r}")


#: How a latent model's leaves are scored: the true reward and V* of decoded states (the
#: paper's protocol, the default), or the model's own reward and value heads.
LEAF_SCORES = ("decoder", "heads")


@dataclass(frozen=True)
class PlannerSpec:
    """The planner of an evaluation (``gridplan.planning.planners``; paper §3 "Planner").

    Attributes:
        name: one of ``gridplan.planning.planners.PLANNERS`` (``search``: the paper's
            full-width search with exact V*).
        settings: the settings given (``gridplan.planning.planners.planner_settings``: e.g.
            ``candidates``, ``iterations`` for CEM); its defaults fill the rest at the
            evaluation's depth.
        ties: the rule among first actions tied for the best value: ``"first"`` (lowest index
            of ``gridplan.core.constants``' action order; ``docs/PREREGISTERED.md``, Rule 1)
            or ``"random"``.
        tree: the law of a stochastic model's draws in the search: ``"independent"`` (every
            leaf its own draws) or ``"shared-prefix"`` (one draw per tree node).
        leaf_score: how a latent model's leaves are scored (``LEAF_SCORES``;
            ``gridplan.planning.latent_scorer``): ``"decoder"`` (the paper's protocol: the
            true reward and V* of decoded states) or ``"heads"`` (the model's own reward and
            value heads; refused for a model without a reward head). A state model's leaves
            are always scored by the true reward and V*.

    Raises:
        ValueError: on an unknown planner, tie rule, tree or leaf score, or a setting the
            planner does not take (``planner_settings``).
    """

    name: str = "search"
    settings: dict[str, Any] = field(default_factory=dict)
    ties: str = "first"
    tree: str = "independent"
    leaf_score: str = "decoder"

    def __post_init__(self) -> None:
        check_planner(self.name)
        if not isinstance(self.settings, Mapping):
            raise ValueError(f"planner.settings must be a mapping of KEY: VALUE, got "
                             f"{self.settings!r}")
        if self.ties not in TIES:
            raise ValueError(f"planner.ties must be one of {TIES}, got {self.ties!r}")
        if self.tree not in TREES:
            raise ValueError(f"planner.tree must be one of {TREES}, got {self.tree!r}")
        if self.leaf_score not in LEAF_SCORES:
            raise ValueError(
                f"planner.leaf_score must be one of {LEAF_SCORES}, got {self.leaf_score!r}"
            )
        # Only the settings given are kept (converted: a command line gives strings); the
        # planner's defaults fill the rest at the evaluation's depth.
        given = {str(k): v for k, v in self.settings.items()}
        full = planner_settings(self.name, 1, given)
        object.__setattr__(self, "settings", {k: full[k] for k in sorted(given)})

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    @property
    def is_search(self) -> bool:
        """Whether this is the paper's planner (the exact-V* full-width search)."""
        return self.name == "search"

    def tree_for(self, model) -> str | None:
        """The tree a search plans ``model`` with: ``tree`` for a stochastic model; None (the
        planner's default, ``gridplan.planning.registry.default_tree``) for a model declared
        deterministic, which has no draws: its leaves then share prefixes, whose scores are
        bit-identical to independent leaves' at fewer predictions."""
        return None if is_deterministic(model) else self.tree

    def to_dict(self) -> dict:
        """The planner's fields; ``leaf_score`` only where it is not ``"decoder"``, so a spec
        written before the field existed keeps its content hash."""
        out = {"name": self.name, "settings": dict(self.settings), "ties": self.ties,
               "tree": self.tree}
        if self.leaf_score != LEAF_SCORES[0]:
            out["leaf_score"] = self.leaf_score
        return out


@dataclass(frozen=True)
class EvalSpec:
    """Every setting of one evaluation besides the model (module docstring).

    The defaults are the paper's controlled protocol (§5.1; ``configs/eval/protocols/
    controlled.yaml`` states them), Task A on the default world, the paper's search.

    Attributes:
        depth: planner depth ``D`` (a full-width search looks at ``4^D`` action sequences).
        seeds: closed-loop evaluation seeds (seed ``s`` always yields the same start states).
        episodes: closed-loop episodes per seed.
        n_windows: held-out open-loop windows of the prediction metrics (L1).
        horizon: rollout length ``H`` of those windows and of L4's interventional rollouts.
        task: task name (``gridplan.core.tasks``: ``"A"``, ``"B"``).
        world: world name (``gridplan.core.world``: ``default``, ``g16-k8``, ``g{N}-k{K}``), or
            None for the model's own world (the default world for a model without one).
        obs: the observation kind the model reads (``OBS_KINDS``; a state model reads
            ``state``), or None for the model's own. A track states both; ``fitted_to``
            fills None from the model and refuses a model of another world or kind.
        planner: the planner (``PlannerSpec``).
        levels: levels measured (``SPEC_LEVELS``), or None for every level that applies.
        branch_states: states per part of the branch set ``Q`` (L4).
        anchor_starts: start states of the anchor runs (L5, L6).
        anchor_rollouts: rollouts ``K`` per anchor and start.
        anchor_seed: reset seed of the anchor runs' start states.
        probe_questions: probe questions (states sampled from ``Q``).
        xgap_states: decision states sampled from the model's own episodes for XGap.
        xgap_threshold: the stated XGap threshold (return units).
        n_resamples: bootstrap resamples of every bootstrap interval.
        seed: seed of the ladder's own random streams
            (``gridplan.evaluation.levels.STREAMS``).
        anchors: anchor policy names (``gridplan.evaluation.anchors``).
        name: the spec's name (a track's or protocol's file name; ``custom`` otherwise).
        version: the track's version (raised by hand when its content changes on purpose).
        description: what it is for, in a few words.

    ``name``, ``version`` and ``description`` label the spec; they are not part of its
    content (``content_hash``).

    Raises:
        ValueError: on a count below 1, empty or non-integer seeds, an unknown task, world,
            observation kind, level or anchor, fewer than 2 anchors, or a negative or
            infinite XGap threshold.
    """

    depth: int = 4
    seeds: tuple[int, ...] = tuple(range(10))
    episodes: int = 30
    n_windows: int = 1000
    horizon: int = 10
    task: str = "A"
    world: str | None = None
    obs: str | None = None
    planner: PlannerSpec = field(default_factory=PlannerSpec)
    levels: tuple[str, ...] | None = None
    branch_states: int = 512
    anchor_starts: int = 128
    anchor_rollouts: int = 8
    anchor_seed: int = 20_000
    probe_questions: int = 256
    xgap_states: int = 512
    xgap_threshold: float = XGAP_THRESHOLD
    n_resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = 0
    anchors: tuple[str, ...] = tuple(a.name for a in ANCHORS)
    name: str = "custom"
    version: int = 1
    description: str = ""

    def __post_init__(self) -> None:
        for key in ("depth", "episodes", "n_windows", "horizon", "branch_states",
                    "anchor_starts", "anchor_rollouts", "probe_questions", "xgap_states",
                    "n_resamples", "version"):
            _positive("EvalSpec", key, getattr(self, key))
        seeds = tuple(self.seeds)
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise ValueError(f"EvalSpec.seeds must be a non-empty list of ints, got {self.seeds!r}")
        object.__setattr__(self, "seeds", seeds)
        object.__setattr__(self, "anchors", tuple(self.anchors))
        if isinstance(self.planner, Mapping):
            object.__setattr__(self, "planner", PlannerSpec(**self.planner))
        if self.levels is not None:
            levels = tuple(self.levels)
            unknown = [lv for lv in levels if lv not in SPEC_LEVELS]
            if unknown or not levels:
                raise ValueError(
                    f"EvalSpec.levels: unknown {unknown or 'empty list'}; valid: "
                    f"{', '.join(SPEC_LEVELS)}"
                )
            object.__setattr__(self, "levels", levels)
        tasks.get(self.task)
        if self.world is not None:
            worlds.get(self.world)
        if self.obs is not None and self.obs not in OBS_KINDS:
            raise ValueError(f"EvalSpec.obs must be one of {OBS_KINDS}, got {self.obs!r}")
        if not (isinstance(self.xgap_threshold, (int, float)) and
                0.0 <= self.xgap_threshold < math.inf):
            raise ValueError(
                f"EvalSpec.xgap_threshold must be finite and >= 0, got {self.xgap_threshold!r}"
            )
        if len(self.anchors) < 2:
            raise ValueError("EvalSpec.anchors: policy ranking needs at least 2 anchor policies")
        get_anchors(self.anchors)
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(
                f"EvalSpec.name must be lower-case letters, digits and dashes, got {self.name!r}"
            )

    @property
    def n_episodes(self) -> int:
        """Closed-loop episodes per model setting: ``len(seeds) * episodes``."""
        return len(self.seeds) * self.episodes

    def resolved_task(self) -> tasks.Task:
        """The ``Task`` this spec names, on its world (None: the default world)."""
        return tasks.get(self.task, world=worlds.get(self.world or "default"))

    def replace(self, **changes) -> EvalSpec:
        """A copy with ``changes`` (field names; ``planner`` may be a dict of
        ``PlannerSpec`` fields, merged into this spec's planner), validated again.

        Raises:
            ValueError: on an unknown field, listing the valid ones, or a bad value.
        """
        unknown = set(changes) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown spec keys {sorted(unknown)}; valid: {', '.join(FIELDS)}")
        planner = changes.get("planner")
        if isinstance(planner, Mapping):
            changes["planner"] = _planner_of({**self.planner.to_dict(), **planner})
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The spec as JSON-ready data (``SPEC_FORMAT``); ``from_dict`` reads it back."""
        out: dict[str, Any] = {"format": SPEC_FORMAT}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "planner":
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def content(self) -> dict:
        """``to_dict`` without the labels (name, version, description): what is measured."""
        return {k: v for k, v in self.to_dict().items() if k not in _LABELS}

    def content_hash(self) -> str:
        """SHA-256 (hex) of the canonical JSON of ``content``: equal for equal content,
        whatever the spec is called."""
        text = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "spec") -> EvalSpec:
        """A spec from ``to_dict``'s layout (``format`` optional).

        Raises:
            ValueError: naming ``source`` and the key: an unknown key (the valid ones
                listed), another format, a bad value.
        """
        data = dict(data)
        fmt = data.pop("format", SPEC_FORMAT)
        if fmt != SPEC_FORMAT:
            raise ValueError(f"{source}: spec format {fmt!r}, this gridplan reads {SPEC_FORMAT}")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise ValueError(
                f"{source}: unknown keys {unknown}; valid keys: {', '.join(FIELDS)}"
            )
        if isinstance(data.get("planner"), Mapping):
            try:
                data["planner"] = _planner_of(data["planner"])
            except (TypeError, ValueError) as err:
                raise ValueError(f"{source}: {err}") from None
        try:
            return cls(**data)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{source}: {err}") from None


FIELDS = tuple(f.name for f in dataclasses.fields(EvalSpec))
PLANNER_FIELDS = tuple(f.name for f in dataclasses.fields(PlannerSpec))


def _planner_of(data: Mapping[str, Any]) -> PlannerSpec:
    unknown = sorted(set(data) - set(PLANNER_FIELDS))
    if unknown:
        raise ValueError(
            f"unknown planner keys {unknown}; valid planner keys: {', '.join(PLANNER_FIELDS)}"
        )
    return PlannerSpec(**data)


def model_obs(model) -> str:
    """The observation kind ``model`` reads: a latent model's ``obs_kind``, else ``state``."""
    offers = capabilities_of(model)
    return offers.obs_kind if offers.latent else "state"


def fitted_to(spec: EvalSpec, model) -> EvalSpec:
    """``spec`` for ``model``, its world and observation kind filled in: where the spec
    leaves them None, the model's own (a model predicts its own world from its own
    observations only), so the recorded spec says what was measured.

    Raises:
        ValueError: if the spec names another world or observation kind than the model's,
            naming both.
    """
    own = capabilities_of(model).world
    own = own if isinstance(own, worlds.WORLD_KINDS) else worlds.get("default")
    if spec.world is not None and worlds.get(spec.world) != own:
        raise ValueError(
            f"spec {spec.name!r} is on world {spec.world}, but the model predicts "
            f"{own.describe()}; evaluate it under a spec of its world (world: {own.name}) or "
            "one that leaves the world to the model (world: null)"
        )
    obs = model_obs(model)
    if spec.obs is not None and spec.obs != obs:
        raise ValueError(
            f"spec {spec.name!r} evaluates {spec.obs} observations, but the model reads {obs} "
            "(its obs_kind)"
        )
    return spec.replace(world=spec.world or own.name, obs=obs)


def _names(folder: str) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in (SPEC_ROOT / folder).glob("*.yaml")))


def protocol_names() -> tuple[str, ...]:
    """Names of the protocol files (``configs/eval/protocols/``)."""
    return _names("protocols")


def track_names() -> tuple[str, ...]:
    """Names of the track files (``configs/eval/tracks/``)."""
    return _names("tracks")


def suite_names() -> tuple[str, ...]:
    """Names of the suite files (``configs/eval/suites/``)."""
    return _names("suites")


def _read(path: Path) -> dict:
    try:
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception as err:  # OmegaConf's YAML and interpolation errors, named by file
        raise ValueError(f"{path}: not a valid spec file ({err})") from None
    if not isinstance(node, dict):
        raise ValueError(f"{path}: a spec file holds a mapping of keys, got {type(node).__name__}")
    return node


def _merged(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A spec file's keys over those of its ``base`` protocol (recursively)."""
    if path in seen:
        raise ValueError(f"{path}: its base chain loops ({' -> '.join(p.stem for p in seen)})")
    node = _read(path)
    base = node.pop("base", None)
    if base is None:
        return node
    if base not in protocol_names():
        raise ValueError(
            f"{path}: unknown base {base!r}; valid protocols: {', '.join(protocol_names())}"
        )
    merged = _merged(SPEC_ROOT / "protocols" / f"{base}.yaml", (*seen, path))
    planner = {**merged.get("planner", {}), **node.pop("planner", {})}
    merged.update(node)
    if planner:
        merged["planner"] = planner
    return merged


def load_spec(source: str | Path) -> EvalSpec:
    """The spec a file names: a path to a YAML file, or the name of a protocol or track
    (``protocol_names``, ``track_names``; a track wins over a protocol of the same name).
    The spec's ``name`` defaults to the file's stem.

    Raises:
        ValueError: on an unknown name (listing the valid ones), a missing file, or a file
            with an unknown key or a bad value (naming the file and the key).
    """
    path = Path(source)
    if path.suffix not in (".yaml", ".yml"):
        for folder in ("tracks", "protocols"):
            candidate = SPEC_ROOT / folder / f"{source}.yaml"
            if candidate.is_file():
                path = candidate
                break
        else:
            raise ValueError(
                f"unknown spec {str(source)!r}; valid tracks: {', '.join(track_names())}; "
                f"protocols: {', '.join(protocol_names())}; or give a .yaml file"
            )
    if not path.is_file():
        raise ValueError(f"spec file {path} does not exist")
    data = _merged(path)
    data.setdefault("name", path.stem)
    return EvalSpec.from_dict(data, str(path))


def load_track(name: str) -> EvalSpec:
    """The track ``name`` (``configs/eval/tracks/<name>.yaml``).

    Raises:
        ValueError: on an unknown track, listing the valid ones.
    """
    if name not in track_names():
        raise ValueError(f"unknown track {name!r}; valid tracks: {', '.join(track_names())}")
    return load_spec(SPEC_ROOT / "tracks" / f"{name}.yaml")


@dataclass(frozen=True)
class Suite:
    """A named list of tracks (``configs/eval/suites/<name>.yaml``).

    Attributes:
        name: the suite's name.
        description: what it is for.
        tracks: its tracks, loaded.
    """

    name: str
    description: str
    tracks: tuple[EvalSpec, ...]


def load_suite(name: str) -> Suite:
    """The suite ``name`` with its tracks loaded.

    Raises:
        ValueError: on an unknown suite or track (listing the valid names), or a suite file
            with keys other than ``description`` and ``tracks``.
    """
    if name not in suite_names():
        raise ValueError(f"unknown suite {name!r}; valid suites: {', '.join(suite_names())}")
    path = SPEC_ROOT / "suites" / f"{name}.yaml"
    node = _read(path)
    unknown = sorted(set(node) - {"description", "tracks"})
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; valid keys: description, tracks")
    names: Sequence[str] = node.get("tracks") or []
    if not names:
        raise ValueError(f"{path}: a suite lists at least one track")
    return Suite(name, node.get("description", ""), tuple(load_track(t) for t in names))


def resolve_spec(spec: str | Path | EvalSpec | None) -> EvalSpec:
    """A spec from a name or file (``load_spec``), passed through, or None -> the paper's
    controlled protocol with every level that applies (``levels=None``; the file itself names
    the paper's report's levels, L1 and success)."""
    if spec is None:
        return load_spec("controlled").replace(levels=None)
    if isinstance(spec, EvalSpec):
        return spec
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    raise TypeError(f"spec must be an EvalSpec, a spec name or a .yaml path, got "
                    f"{type(spec).__name__}")


#: Paper §5.1: the controlled models' protocol (``configs/eval/protocols/controlled.yaml``).
CONTROLLED = load_spec("controlled")
#: Paper §5.4: the learned models' protocol (``configs/eval/protocols/learned.yaml``).
LEARNED = load_spec("learned")
