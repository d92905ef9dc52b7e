"""Settings of every experiment group, per reproduction profile (paper §5).

One public place for what groups share: the E1 grid that e2, e4 and e6 reuse, E2's
relevance sweep that e4 reuses, E3's training rows and overrides that e4 trains with, E7's
learned-model zoos (read from ``configs/zoo/``), E8's worlds. Each ``E<n>`` maps a profile name
(``gridplan.experiments.profiles.PROFILES``) to that group's config.

The values live in Hydra configs, ``configs/experiments/``: ``settings.yaml`` selects the
profile (its protocols, from ``gridplan.experiments.profiles``, in Hydra's ConfigStore as group
``profile``) and one file per experiment group of that profile, ``e<n>/<profile>.yaml``; a
``quick`` or ``tiny`` file takes ``full`` through its defaults list and sets only what the
profile changes, and the closed-loop and window counts are interpolations of the profile's
protocols (``${profile.controlled}``), so a group that deviates from them says so in its
file. ``load_settings`` composes them, types them by ``Settings`` and builds the dataclasses
below with ``OmegaConf.to_object``, each checking itself in ``__post_init__``.

A config is recorded in ``results.json`` / ``done.json`` by ``to_dict``: its fields in order,
the protocol's fields inline (those the group has always recorded, ``recorded``), so the
record keeps the form of earlier runs and their finished groups are still reused.
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gridplan.core import world as worlds
from gridplan.evaluation.spec import EvalSpec
from gridplan.experiments.profiles import PROFILES, Profile
from gridplan.metrics.relevance_estimation import FVIConfig
from gridplan.metrics.stats import ISO_TOLERANCE
from gridplan.training.config import CONFIGS_ROOT, compose_config


def _tuples(value):
    """``value`` with every list, nested ones too, made a tuple."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list | tuple) else value


class _TupleFields:
    """Tuple fields from lists: ``OmegaConf.to_object`` gives lists for tuple fields."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _tuples(getattr(self, f.name)))


class GroupConfig(_TupleFields):
    """Base of the group configs: the recorded form (see the module docstring)."""

    #: Keys written in place of the ``EvalSpec`` field, in this order: protocol fields, or
    #: (where a group has always recorded one among them) a field of the config itself.
    recorded: ClassVar[tuple[str, ...]] = ("depth", "seeds", "episodes", "n_windows", "horizon")

    def to_dict(self) -> dict:
        """Field name -> value, the ``EvalSpec`` field replaced by the ``recorded`` keys."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, EvalSpec):
                for key in self.recorded:
                    out[key] = getattr(value if hasattr(value, key) else self, key)
            elif f.name not in out:
                out[f.name] = value
        return out


# --------------------------------------------------------------------------- E1


@dataclass(frozen=True, kw_only=True)
class E1Config(GroupConfig):
    """The controlled grid of E1 (also what e2, e4 and e6 reuse).

    Attributes:
        sigma_r: relevant noise levels, grid cells.
        sigma_i: irrelevant noise levels, normalized units.
        protocol: planner depth, seeds x episodes, held-out windows (paper §5.1).
        iso_tolerance: relative E_tot tolerance of an iso-error pair.
        n_resamples: bootstrap resamples of the Spearman CIs.
    """

    sigma_r: tuple[float, ...]
    sigma_i: tuple[float, ...]
    protocol: EvalSpec
    iso_tolerance: float = ISO_TOLERANCE
    n_resamples: int


# --------------------------------------------------------------------------- E2


@dataclass(frozen=True, kw_only=True)
class E2Config(GroupConfig):
    """The relevance sweep of E2 and the statistics' settings.

    Attributes:
        sweep_sigma_r: relevant noise levels of the sweep, grid cells.
        sweep_sigma_i: irrelevant noise levels of the sweep, normalized units.
        protocol: the sweep's closed loop (its own seeds, so it replicates the grid rather
            than re-using its episodes) and E1's windows, so E_tot and DRPE are comparable.
        iso_tolerance: relative E_tot tolerance of an iso-error pair.
        n_resamples: bootstrap resamples.
    """

    sweep_sigma_r: tuple[float, ...]
    sweep_sigma_i: tuple[float, ...]
    protocol: EvalSpec
    iso_tolerance: float = ISO_TOLERANCE
    n_resamples: int


# --------------------------------------------------------------------------- E3


@dataclass(frozen=True, kw_only=True)
class LearnedRow:
    """One learned model of Table 3.

    Attributes:
        key: ``gridplan.experiments.paper.TABLE_3`` key, e.g. ``"uniform_20k"``.
        variant: ``configs/train/variant`` choice.
        data: ``configs/train/data`` choice (``"20k"``, ``"12k"``, ``"4k"``).
        policy: behaviour policy of the logged data (``"balanced"`` or ``"random"``).
        budget: transition budget overriding the data choice's (tiny test profile only).
    """

    key: str
    variant: str
    data: str
    policy: str = "balanced"
    budget: str | None = None

    @property
    def name(self) -> str:
        """Display name, e.g. ``"event-weighted 20k"`` or ``"uniform 12k (random data)"``."""
        name = f"{self.variant.replace('_', '-')} {self.data}"
        return name + (" (random data)" if self.policy == "random" else "")

    def overrides(self) -> list[str]:
        """``gridplan.training.config.compose`` overrides selecting this row."""
        out = [f"variant={self.variant}", f"data={self.data}", f"data.policy={self.policy}"]
        if self.budget is not None:
            out.append(f"data.budget={self.budget}")
        return out


#: The row whose models e4 estimates relevance on and Fig. 8 compares the random-data one to.
UNIFORM_20K = "uniform_20k"


@dataclass(frozen=True, kw_only=True)
class E3Config(GroupConfig):
    """E3 settings.

    Attributes:
        rows: the Table 3 models (the paper's seven in the full profile).
        random_row: the random-data model of §5.4 (i).
        protocol: depth-2 planner, one closed-loop seed per training seed (the model of
            training seed ``k`` plays closed-loop seed ``k``), E1's windows (paper §5.4).
        train_overrides: extra ``compose`` overrides of every training run (reduced
            profiles; the full profile trains with the default trainer).
        n_resamples: bootstrap resamples of the Spearman CIs.
    """

    recorded: ClassVar[tuple[str, ...]] = ("seeds", "episodes", "depth", "n_windows")

    rows: tuple[LearnedRow, ...]
    random_row: LearnedRow
    protocol: EvalSpec
    train_overrides: tuple[str, ...] = ()
    n_resamples: int

    @property
    def settings(self) -> tuple[LearnedRow, ...]:
        """Every trained row: the Table 3 rows, then the random-data one."""
        return (*self.rows, self.random_row)


# --------------------------------------------------------------------------- E4


@dataclass(frozen=True, kw_only=True)
class E4Config(GroupConfig):
    """E4 settings.

    Attributes:
        fvi: fitted value iteration settings.
        fvi_states: logged states the value function is fitted on.
        saliency_states: further logged states (disjoint) the saliency is averaged over.
        model_seeds: training seeds of the uniform-20k models the estimator is run on, one
            estimate each (e3's seeds, so their models are reused).
        n_resamples: bootstrap resamples of the Spearman CIs.
        train_overrides: extra overrides after e3's of the uniform-20k models (a training
            preset, ``gridplan.experiments.presets``; e3's models are reused only when e3
            trained with the same).
    """

    fvi: FVIConfig
    fvi_states: int
    saliency_states: int
    model_seeds: tuple[int, ...]
    n_resamples: int
    train_overrides: tuple[str, ...] = ()


# --------------------------------------------------------------------------- E5


@dataclass(frozen=True, kw_only=True)
class E5Config(GroupConfig):
    """E5 settings.

    Attributes:
        sigma: noise std on the one noisy bit, normalized units (paper 0.8).
        protocol: planner depth, seeds x episodes and held-out windows per task; the full
            profile plays the paper's 240 episodes (8 seeds x 30, appendix H).
    """

    sigma: float = 0.8
    protocol: EvalSpec


# --------------------------------------------------------------------------- E6


@dataclass(frozen=True, kw_only=True)
class E6Config(GroupConfig):
    """E6 settings. Models are ``(σR, σI)`` pairs of the controlled family.

    Attributes:
        models: depth- and horizon-sweep models; must include the oracle ``(0, 0)``.
        depths: planner depths of the depth sweep (ascending), up to ``protocol.depth``.
        protocol: seeds x episodes of every closed loop and the held-out windows; its depth,
            the deepest of ``depths``, is where the AR(1) comparison runs.
        horizons: rollout lengths of the horizon sweep.
        fan_models: ``(irrelevant, relevant)`` models of the fans.
        fan_depth: imagined depth of the fans.
        fan_seed: seed of the fans' start state and noise.
        ar1_rho: AR(1) correlation.
        ar1_models: AR(1) models; each must be in ``models``.
        n_resamples: bootstrap resamples of the VPE Spearman CIs.

    Raises:
        ValueError: if the oracle is missing, an AR(1) model is not in ``models``, or the
            deepest depth is not the protocol's.
    """

    recorded: ClassVar[tuple[str, ...]] = ("seeds", "episodes", "horizons", "n_windows")

    # The pairs are typed Any: OmegaConf has no fixed-length tuple type.
    models: tuple[Any, ...]
    depths: tuple[int, ...]
    protocol: EvalSpec
    horizons: tuple[int, ...]
    fan_models: tuple[Any, ...] = ((0.0, 1.2), (0.35, 0.0))
    fan_depth: int
    fan_seed: int = 3
    ar1_rho: float = 0.8
    ar1_models: tuple[Any, ...]
    n_resamples: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if (0.0, 0.0) not in self.models:
            raise ValueError("E6Config.models must include the oracle (0, 0)")
        missing = [m for m in self.ar1_models if m not in self.models]
        if missing:
            raise ValueError(f"E6Config.ar1_models {missing} are not in models")
        if max(self.depths) != self.protocol.depth:
            raise ValueError(
                f"E6Config.depths must end at the protocol's depth {self.protocol.depth}, "
                f"got {self.depths}"
            )


# --------------------------------------------------------------------------- E7: the zoo

#: The zoo definitions of E7: ``configs/zoo/<name>.yaml``.
ZOO_DIR = CONFIGS_ROOT / "zoo"


@dataclass(frozen=True)
class ZooModel(_TupleFields):
    """One configuration of a zoo.

    Attributes:
        key: its name in every table, e.g. ``"rel_only_20k"``.
        name: display name.
        settings: its ``python -m train`` overrides (the zoo's common ones merged in).
    """

    key: str
    name: str
    settings: tuple[str, ...]

    def overrides(self) -> list[str]:
        """``gridplan.training.config.compose`` overrides of this configuration."""
        return list(self.settings)


@dataclass(frozen=True)
class Zoo(_TupleFields):
    """A zoo: its configurations, training seeds and closed-loop seeds (``load_zoo``)."""

    name: str
    models: tuple[ZooModel, ...]
    seeds: tuple[int, ...]
    eval_seeds: tuple[int, ...]

    def jobs(self) -> list[tuple[ZooModel, int]]:
        """Every ``(configuration, training seed)``, seed-major."""
        return [(m, s) for s in self.seeds for m in self.models]

    def reduced(self, seeds: int | None, eval_seeds: int | None, max_epochs: int | None) -> Zoo:
        """The first ``seeds`` training and ``eval_seeds`` closed-loop seeds (None: all), and
        every configuration's ``trainer.max_epochs`` capped at ``max_epochs`` (reduced
        profiles)."""
        models = self.models
        if max_epochs is not None:
            models = tuple(
                ZooModel(
                    m.key,
                    m.name,
                    _merge(m.settings, (f"trainer.max_epochs={_cap(m, max_epochs)}",)),
                )
                for m in models
            )
        return Zoo(self.name, models, self.seeds[:seeds], self.eval_seeds[:eval_seeds])


def _key(override: str) -> str:
    return override.split("=", 1)[0].strip()


def _merge(*lists: Sequence[str]) -> tuple[str, ...]:
    """Overrides of several lists, a later one replacing an earlier one of the same key, in
    first-seen order: a model's settings (recorded with its results, read by ``_cap``) name
    each key once."""
    out: dict[str, str] = {}
    for overrides in lists:
        for o in overrides:
            out[_key(str(o))] = str(o)
    return tuple(out.values())


def _cap(model: ZooModel, cap: int) -> int:
    set_to = [int(o.split("=", 1)[1]) for o in model.settings if _key(o) == "trainer.max_epochs"]
    return min([cap, *set_to])


@dataclass
class ZooEntry:
    """A model of a zoo file: ``name`` (display name; None: its key) and its ``python -m train``
    overrides."""

    overrides: list[str] = MISSING
    name: str | None = None


@dataclass
class ZooFile:
    """The schema of a zoo file, ``configs/zoo/<name>.yaml``: training ``seeds``, closed-loop
    ``eval_seeds``, ``common`` overrides of every model and the ``models`` (key -> entry). A
    file takes another zoo's keys through its Hydra defaults list (``defaults: [default,
    _self_]``: that zoo's keys, then its own).

    Raises:
        ValueError: if it names no model, no seed or no evaluation seed.
    """

    seeds: list[int] = field(default_factory=list)
    eval_seeds: list[int] = field(default_factory=list)
    common: list[str] = field(default_factory=list)
    models: dict[str, ZooEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("names no model")
        if not self.seeds or not self.eval_seeds:
            raise ValueError("needs seeds and eval_seeds")


def load_zoo(name: str, folder: str | os.PathLike | None = None) -> Zoo:
    """The zoo of ``<folder>/<name>.yaml`` (default folder ``configs/zoo``), composed by Hydra
    (its defaults list applied) and checked against ``ZooFile``; each model's overrides are the
    zoo's ``common`` ones, then its own (``_merge``).

    Raises:
        ValueError: if the file is missing (listing the zoos of ``folder``), does not compose,
            names no model or no seed, or a model lacks ``overrides``.
    """
    folder = Path(folder or ZOO_DIR)
    path = folder / f"{name}.yaml"
    if not path.is_file():
        valid = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ValueError(f"no zoo {name!r} in {folder}; valid zoos: {', '.join(valid)}")
    try:
        composed = OmegaConf.merge(OmegaConf.structured(ZooFile), compose_config(folder, name))
        raw = OmegaConf.to_object(composed)
    except (ValueError, OmegaConfBaseException) as err:
        raise ValueError(f"zoo {name!r} ({path}): {str(err).splitlines()[0]}") from err
    models = tuple(
        ZooModel(str(key), entry.name or str(key), _merge(raw.common, entry.overrides))
        for key, entry in raw.models.items()
    )
    return Zoo(name, models, tuple(raw.seeds), tuple(raw.eval_seeds))


@dataclass(frozen=True, kw_only=True)
class E7Config(GroupConfig):
    """E7 settings.

    Attributes:
        zoo: the zoo the table is sorted on.
        replication: the independently seeded zoo evaluated at the end.
        depths: planner depths of the closed loops: the ladder's and the meta-evaluation's
            (the profile's learned protocol, paper §5.4: 2), then E1's grid's (its controlled
            protocol, §5.1: 4), which the grid and pooled columns use.
        episodes: closed-loop episodes per evaluation seed at the first depth.
        deep_episodes: the same at the second depth (its tree is 4^2 times larger).
        n_windows: held-out windows of the prediction metrics (E1's, so grid and zoo share
            them); horizon: their ``H``.
        ladder_sizes: the ladder's own sizes (``EvalSpec`` fields).
        n_resamples: bootstrap resamples of every meta-evaluation CI.
        train_overrides: extra overrides of every training run (``learned_runs.run_config``).
        heldout_episodes: episodes of the held-out success every ranking verdict uses
            (``docs/PREREGISTERED.md``, Rule 4: at least 100 in the full profile), from start
            states disjoint from the decision metrics' states and the training data's start
            configurations (``gridplan.experiments.e7.heldout_starts``).
        heldout_seed: closed-loop seed of the held-out success's candidate start states
            (apart from every evaluation, anchor and window seed).
        variant_depth: planner depth of the non-circular decision-metric variants (not the
            success target's, ``depths[0]``).
    """

    recorded: ClassVar[tuple[str, ...]] = ()

    zoo: Zoo
    replication: Zoo
    depths: tuple[int, ...] = (2, 4)
    episodes: int
    deep_episodes: int
    n_windows: int
    horizon: int = 10
    #: ``(field, size)`` pairs, typed Any as E6Config's pairs are.
    ladder_sizes: tuple[Any, ...]
    n_resamples: int
    train_overrides: tuple[str, ...] = ()
    heldout_episodes: int = 120
    heldout_seed: int = 30_000
    variant_depth: int = 3

    def closed_loop(self, zoo: Zoo, depth: int) -> EvalSpec:
        """The closed loop of ``zoo``'s models at ``depth``."""
        return EvalSpec(depth, zoo.eval_seeds, self.episodes, self.n_windows, self.horizon)

    def ladder(self, zoo: Zoo) -> EvalSpec:
        """The ladder protocol of ``zoo``'s models (its closed loop at the first depth)."""
        sizes = dict(self.ladder_sizes)
        windows = sizes.pop("n_windows")
        loop = EvalSpec(self.depths[0], zoo.eval_seeds, self.episodes, windows, self.horizon)
        return loop.replace(**sizes)


# --------------------------------------------------------------------------- E8


@dataclass(frozen=True, kw_only=True)
class E8Config(GroupConfig):
    """E8 settings: the controlled grid and a few learned models in larger worlds.

    Attributes:
        width_axis: worlds of the paper's grid size with more distractors (``g8-k<K>``),
            in ascending state width; the first is the paper's world.
        length_axis: worlds of two distractors on larger grids (``g<N>-k2``), ascending in
            ``N``; the first is the paper's world.
        extra_worlds: further worlds measured and tabled but on neither axis.
        sigma_r: relevant noise levels, grid cells (E1's).
        sigma_i: irrelevant noise levels, normalized units (E1's).
        protocol: the closed loop and held-out windows of every world (the windows come
            from each world's own behaviour episodes).
        learned_rows: learned MLPs trained in each world of ``learned_worlds`` at one data
            budget (``LearnedRow``: variant and data choice).
        learned_worlds: the worlds whose learned models are trained (a subset of the axes').
        learned_seeds: training seeds of each learned row.
        train_overrides: extra overrides of every training run (epochs, network size).
        n_resamples: bootstrap resamples of every Spearman CI and of the margin slopes.

    Raises:
        ValueError: if an axis is empty or does not start at the paper's world, or a
            learned world is not measured.
    """

    recorded: ClassVar[tuple[str, ...]] = ("depth", "seeds", "episodes", "n_windows", "horizon")

    width_axis: tuple[str, ...]
    length_axis: tuple[str, ...]
    extra_worlds: tuple[str, ...] = ()
    sigma_r: tuple[float, ...]
    sigma_i: tuple[float, ...]
    protocol: EvalSpec
    learned_rows: tuple[LearnedRow, ...] = ()
    learned_worlds: tuple[str, ...] = ()
    learned_seeds: tuple[int, ...] = (0,)
    train_overrides: tuple[str, ...] = ()
    n_resamples: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for axis in ("width_axis", "length_axis"):
            names = getattr(self, axis)
            if not names or worlds.get(names[0]) != worlds.DEFAULT:
                raise ValueError(f"E8Config.{axis} must start at the paper's world, got {names}")
        missing = [w for w in self.learned_worlds if w not in self.worlds]
        if missing:
            raise ValueError(f"E8Config.learned_worlds {missing} are not measured")

    @property
    def worlds(self) -> tuple[str, ...]:
        """Every measured world once, axes first."""
        return tuple(dict.fromkeys((*self.width_axis, *self.length_axis, *self.extra_worlds)))


# --------------------------------------------------------------------------- E12


@dataclass(frozen=True, kw_only=True)
class EgocentricZoo:
    """E12's learned models on MiniGrid's egocentric view: each latent family trained as
    ``python -m train world=<world> model=<family> obs=egocentric data.budget=<budget>
    seed=<seed>`` trains it, then planned and measured in ``world``.

    Attributes:
        world: the DoorKey world of the models (one of E12's ``worlds``: its grid is the pool
            they join).
        families: latent families (``configs/train/model`` choices); none: no egocentric
            models.
        budgets: logged-transition budgets (``"4k"``, ``"20k"``, ...).
        train_seeds: training seeds of every ``(family, budget)``.
        train_overrides: extra overrides of every training run.

    Raises:
        ValueError: if a zoo with families has an empty axis or no world, or a family is not
            a latent ``configs/train`` choice.
    """

    world: str = ""
    families: tuple[str, ...] = ()
    budgets: tuple[str, ...] = ()
    train_seeds: tuple[int, ...] = ()
    train_overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.families:
            return
        for axis in ("world", "budgets", "train_seeds"):
            if not getattr(self, axis):
                raise ValueError(f"EgocentricZoo.{axis} is empty")
        for family in self.families:
            if family in ("mlp", "ensemble5") or not (
                CONFIGS_ROOT / "train" / "model" / f"{family}.yaml"
            ).is_file():
                raise ValueError(
                    f"EgocentricZoo: {family!r} is not a latent family of configs/train/model"
                )

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every ``(family, "egocentric")`` of the zoo."""
        return tuple((f, "egocentric") for f in self.families)


@dataclass(frozen=True, kw_only=True)
class E12Config(GroupConfig):
    """E12 settings: E1's design on Farama MiniGrid DoorKey (``gridplan.core.doorkey_task``).

    Attributes:
        worlds: DoorKey worlds (``minigrid-doorkey-{N}x{N}-t{T}``), each with floor tiles so
            that irrelevant dims exist; the last has the most tiles.
        sigma_r: relevant noise levels, grid cells, on dims 0-8.
        sigma_i: irrelevant noise levels, normalized units, on the tiles.
        protocol: the closed loop and held-out windows of every world.
        learned_rows: learned MLPs trained on the factored state of each ``learned_worlds``.
        learned_worlds: the worlds whose learned models are trained (a subset of ``worlds``).
        learned_seeds: training seeds of each learned row.
        train_overrides: extra overrides of every training run of ``learned_rows``.
        egocentric: learned latent models on MiniGrid's egocentric view (``EgocentricZoo``;
            without families, none).
        n_resamples: bootstrap resamples of every Spearman CI and of the margin.

    Raises:
        ValueError: if a world is not a DoorKey world with tiles, or a learned or egocentric
            world is not measured.
    """

    recorded: ClassVar[tuple[str, ...]] = ("depth", "seeds", "episodes", "n_windows", "horizon")

    worlds: tuple[str, ...]
    sigma_r: tuple[float, ...]
    sigma_i: tuple[float, ...]
    protocol: EvalSpec
    learned_rows: tuple[LearnedRow, ...] = ()
    learned_worlds: tuple[str, ...] = ()
    learned_seeds: tuple[int, ...] = (0,)
    train_overrides: tuple[str, ...] = ()
    egocentric: EgocentricZoo = field(default_factory=EgocentricZoo)
    n_resamples: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in self.worlds:
            world = worlds.get(name)
            if not isinstance(world, worlds.DoorKey) or not world.tiles:
                raise ValueError(
                    f"E12Config.worlds must be DoorKey worlds with tiles "
                    f"(minigrid-doorkey-NxN-tT), got {name!r}"
                )
        missing = [w for w in self.learned_worlds if w not in self.worlds]
        if missing:
            raise ValueError(f"E12Config.learned_worlds {missing} are not measured")
        if self.egocentric.families and self.egocentric.world not in self.worlds:
            raise ValueError(
                f"E12Config.egocentric.world {self.egocentric.world!r} is not measured"
            )


# --------------------------------------------------------------------------- E10


@dataclass(frozen=True, kw_only=True)
class E10Config(GroupConfig):
    """E10 settings: the controlled grid and a small learned set under several planners.

    Attributes:
        sigma_r: relevant noise levels, grid cells (E1's, or a subsample).
        sigma_i: irrelevant noise levels, normalized units.
        protocol: depth, closed loop and held-out windows of every model and planner.
        planners: the planners (``gridplan.planning.planners.PLANNERS``), the paper's
            ``search`` first.
        regret_states: states of the optimal policy at which each planner's decision regret
            is measured.
        fvi_states: logged behaviour states the learned value is fitted on.
        fvi_iterations: its Bellman backups (``FVIConfig.iterations``).
        learned_rows: the learned set's rows (``LearnedRow``); empty for none.
        learned_seeds: training seeds of each learned row.
        train_overrides: extra overrides of every training run.
        n_resamples: bootstrap resamples of every Spearman CI.
        seed: seed of the bootstrap and of the regret decisions.

    Raises:
        ValueError: on an unknown planner or ``search`` not first, or a count below 1.
    """

    sigma_r: tuple[float, ...]
    sigma_i: tuple[float, ...]
    protocol: EvalSpec
    planners: tuple[str, ...]
    regret_states: int
    fvi_states: int
    fvi_iterations: int
    learned_rows: tuple[LearnedRow, ...] = ()
    learned_seeds: tuple[int, ...] = (0,)
    train_overrides: tuple[str, ...] = ()
    n_resamples: int
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        from gridplan.planning.planners import check_planner

        for name in self.planners:
            check_planner(name)
        if not self.planners or self.planners[0] != "search":
            raise ValueError(f"E10Config.planners must start with 'search', got {self.planners}")
        for key in ("regret_states", "fvi_states", "fvi_iterations", "n_resamples"):
            if getattr(self, key) < 1:
                raise ValueError(f"E10Config.{key} must be >= 1, got {getattr(self, key)}")


# --------------------------------------------------------------------------- E9


@dataclass(frozen=True, kw_only=True)
class E9Config(GroupConfig):
    """E9 settings: a zoo of latent world models and the metrics that may rank them.

    The zoo is the product ``families x observations x budgets x seeds``: one configuration
    per ``(family, observation, budget)``, trained once per seed with ``python -m train``'s
    config (``model=<family> obs=<observation> data.budget=<budget> seed=<seed>``).

    Attributes:
        families: latent families (``configs/train/model``: ``latent_recon``, ``jepa``).
        observations: observation kinds (``configs/train/obs``: ``state``, ``grid``, ``pixels``).
        budgets: logged-transition budgets (``"1k"``, ``"4k"``, ...).
        train_seeds: training seeds of every configuration.
        train_overrides: extra overrides of every training run (epochs).
        protocol: planner depth, closed-loop seeds x episodes and the held-out windows of the
            decoded E_tot and DRPE.
        branch_states: start states of the decision-regret measurement.
        n_resamples: bootstrap resamples of every Spearman CI.

    Raises:
        ValueError: if an axis is empty or the zoo has fewer than 3 models.
    """

    families: tuple[str, ...]
    observations: tuple[str, ...]
    budgets: tuple[str, ...]
    train_seeds: tuple[int, ...]
    train_overrides: tuple[str, ...] = ()
    protocol: EvalSpec
    branch_states: int
    n_resamples: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for axis in ("families", "observations", "budgets", "train_seeds"):
            if not getattr(self, axis):
                raise ValueError(f"E9Config.{axis} is empty")
        if self.n_models < 3:
            raise ValueError(f"E9Config's zoo has {self.n_models} models; ranking needs >= 3")

    @property
    def n_models(self) -> int:
        """Models in the zoo."""
        axes = (self.families, self.observations, self.budgets, self.train_seeds)
        return math.prod(len(a) for a in axes)

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every ``(family, observation)`` of the zoo: each family with each observation."""
        return tuple((f, o) for f in self.families for o in self.observations)


# --------------------------------------------------------------------------- E11


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """One family of E11's zoo and the observations it is trained on.

    Attributes:
        family: a ``configs/train/model`` choice (``mlp``, ``ensemble5``, ``latent_recon``,
            ``jepa``, ``rssm``, ``tdmpc``).
        observations: ``configs/train/obs`` choices it takes (the state models: ``state``
            only).
    """

    family: str
    observations: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class E11Config(GroupConfig):
    """E11 settings: a zoo of the field's world-model architectures (state MLPs, an ensemble
    and the latent families) and the metrics that may rank them by closed-loop success.

    The zoo is ``sum over architectures of (observations x budgets x seeds)``: one
    configuration per ``(family, observation, budget)``, trained once per seed with
    ``python -m train``'s config (``model=<family> obs=<observation> data.budget=<budget>
    seed=<seed>``).

    Attributes:
        architectures: the families and the observations each is trained on.
        budgets: logged-transition budgets (``"4k"``, ``"20k"``, ...).
        train_seeds: training seeds of every configuration.
        train_overrides: extra overrides of every training run (epochs).
        protocol: planner depth, closed-loop seeds x episodes and the held-out windows of
            E_tot and DRPE.
        branch_states: start states of the decision-regret measurement.
        n_resamples: bootstrap resamples of every Spearman CI and of the margins.

    Raises:
        ValueError: if an axis is empty, a family or observation is not a
            ``configs/train`` choice, a family appears twice, or the zoo has fewer than 3
            models.
    """

    architectures: tuple[Architecture, ...]
    budgets: tuple[str, ...]
    train_seeds: tuple[int, ...]
    train_overrides: tuple[str, ...] = ()
    protocol: EvalSpec
    branch_states: int
    n_resamples: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for axis in ("architectures", "budgets", "train_seeds"):
            if not getattr(self, axis):
                raise ValueError(f"E11Config.{axis} is empty")
        train = CONFIGS_ROOT / "train"
        for arch in self.architectures:
            if not (train / "model" / f"{arch.family}.yaml").is_file():
                raise ValueError(f"E11Config: no model choice {arch.family!r} in {train}/model")
            if not arch.observations:
                raise ValueError(f"E11Config: family {arch.family!r} has no observation")
            for obs in arch.observations:
                if not (train / "obs" / f"{obs}.yaml").is_file():
                    raise ValueError(f"E11Config: no obs choice {obs!r} in {train}/obs")
        if len(set(self.families)) < len(self.families):
            raise ValueError(f"E11Config: a family appears twice in {self.families}")
        if self.n_models < 3:
            raise ValueError(f"E11Config's zoo has {self.n_models} models; ranking needs >= 3")

    @property
    def families(self) -> tuple[str, ...]:
        """The families, in config order."""
        return tuple(a.family for a in self.architectures)

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every ``(family, observation)`` of the zoo."""
        return tuple((a.family, o) for a in self.architectures for o in a.observations)

    @property
    def n_models(self) -> int:
        """Models in the zoo."""
        return len(self.pairs) * len(self.budgets) * len(self.train_seeds)


#: The settings' config folder: ``settings.yaml``, one group per experiment group.
SETTINGS_DIR = CONFIGS_ROOT / "experiments"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The schema of ``configs/experiments/settings.yaml``: the profile and every group's
    settings under it."""

    profile: Profile
    e1: E1Config
    e2: E2Config
    e3: E3Config
    e4: E4Config
    e5: E5Config
    e6: E6Config
    e7: E7Config
    e8: E8Config
    e9: E9Config
    e10: E10Config
    e11: E11Config
    e12: E12Config


def _zoo(name: str, seeds=None, eval_seeds=None, max_epochs=None) -> DictConfig:
    """The ``zoo`` resolver, ``${zoo:NAME[,SEEDS,EVAL_SEEDS,MAX_EPOCHS]}``: ``load_zoo(NAME)``,
    ``Zoo.reduced`` where sizes are given."""
    zoo = load_zoo(name)
    if (seeds, eval_seeds, max_epochs) != (None, None, None):
        zoo = zoo.reduced(seeds, eval_seeds, max_epochs)
    return OmegaConf.structured(zoo)


def _writable(node: DictConfig) -> DictConfig:
    """``node`` (a structured schema) with every structured field present and none read-only:
    OmegaConf makes the nodes of frozen dataclasses read-only, which no merge can fill."""
    OmegaConf.set_readonly(node, None)
    kinds = typing.get_type_hints(OmegaConf.get_type(node))
    for key in node:
        if OmegaConf.is_missing(node, key) and dataclasses.is_dataclass(kinds[key]):
            node[key] = OmegaConf.structured(kinds[key])
        if not OmegaConf.is_missing(node, key) and isinstance(node[key], DictConfig):
            _writable(node[key])
    return node


def load_settings(profile: str, overrides: Sequence[str] = ()) -> Settings:
    """Every group's settings of ``profile``: ``configs/experiments/settings.yaml`` composed
    by Hydra with ``profile=<profile>`` and ``overrides`` (Hydra's grammar: ``e1.sigma_r=[0,0.2]``
    for a key the files set, ``+e6.fan_seed=4`` for one left at the dataclass's default),
    typed by ``Settings`` (an unknown key is refused there) and built by
    ``OmegaConf.to_object`` (each dataclass validating itself).

    Raises:
        ValueError: on an unknown profile, or settings that do not compose, do not fit the
            schema or fail a dataclass's check (naming the profile).
    """
    cfg = compose_config(SETTINGS_DIR, "settings", [f"profile={profile}", *overrides])
    try:
        # Resolved first: a typed node takes a merged value, not an interpolation of a node.
        OmegaConf.resolve(cfg)
        return OmegaConf.to_object(OmegaConf.merge(_writable(OmegaConf.structured(Settings)), cfg))
    except (ValueError, OmegaConfBaseException) as err:
        key = getattr(err, "full_key", None)
        where = f" at {key}" if key else ""
        message = f"settings of profile {profile!r}: {str(err).splitlines()[0]}{where}"
        raise ValueError(message) from err


OmegaConf.register_new_resolver("zoo", _zoo, replace=True)
for _name, _profile in PROFILES.items():
    # As plain values: the node of a frozen dataclass is read-only, and group files merge
    # over its interpolations.
    ConfigStore.instance().store(group="profile", name=_name, node=dataclasses.asdict(_profile))

_SETTINGS = {name: load_settings(name) for name in PROFILES}
E1: dict[str, E1Config] = {name: s.e1 for name, s in _SETTINGS.items()}
E2: dict[str, E2Config] = {name: s.e2 for name, s in _SETTINGS.items()}
E3: dict[str, E3Config] = {name: s.e3 for name, s in _SETTINGS.items()}
E4: dict[str, E4Config] = {name: s.e4 for name, s in _SETTINGS.items()}
E5: dict[str, E5Config] = {name: s.e5 for name, s in _SETTINGS.items()}
E6: dict[str, E6Config] = {name: s.e6 for name, s in _SETTINGS.items()}
E7: dict[str, E7Config] = {name: s.e7 for name, s in _SETTINGS.items()}
E8: dict[str, E8Config] = {name: s.e8 for name, s in _SETTINGS.items()}
E9: dict[str, E9Config] = {name: s.e9 for name, s in _SETTINGS.items()}
E10: dict[str, E10Config] = {name: s.e10 for name, s in _SETTINGS.items()}
E11: dict[str, E11Config] = {name: s.e11 for name, s in _SETTINGS.items()}
E12: dict[str, E12Config] = {name: s.e12 for name, s in _SETTINGS.items()}
#: The paper's Table 3 rows and its random-data one (the full profile's).
ROWS, RANDOM_ROW = E3["full"].rows, E3["full"].random_row
