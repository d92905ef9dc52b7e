"""Settings of every experiment group, per reproduction profile (paper §5).

One public place for what groups share: the E1 grid that e2, e4 and e6 reuse, E2's
relevance sweep that e4 reuses, E3's training rows and overrides that e4 trains with, E7's
learned-model zoos (read from ``configs/zoo/``). Each
``E<n>`` maps a profile name (``gridplan.core.protocols.PROFILES``) to that group's config; the
closed-loop and window counts come from the profile's protocols (``gridplan.core.protocols``),
and a group that deviates from them says so here with ``Protocol.replace``.

A config is recorded in ``results.json`` / ``done.json`` by ``to_dict``: its fields in order,
the protocol's fields inline (those the group has always recorded, ``recorded``), so the
record keeps the form of earlier runs and their finished groups are still reused.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from omegaconf import OmegaConf

from gridplan.core.protocols import PROFILES, Profile, Protocol
from gridplan.evaluation.ladder_protocol import LadderProtocol
from gridplan.metrics.relevance_estimation import FVIConfig
from gridplan.metrics.stats import ISO_TOLERANCE
from gridplan.training.config import DEFAULT_CONFIG_DIR

FULL, QUICK, TINY = PROFILES["full"], PROFILES["quick"], PROFILES["tiny"]


class GroupConfig:
    """Base of the group configs: the recorded form (see the module docstring)."""

    #: Keys written in place of the ``Protocol`` field, in this order: protocol fields, or
    #: (where a group has always recorded one among them) a field of the config itself.
    recorded: ClassVar[tuple[str, ...]] = ("depth", "seeds", "episodes", "n_windows", "horizon")

    def to_dict(self) -> dict:
        """Field name -> value, the ``Protocol`` field replaced by the ``recorded`` keys."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Protocol):
                for key in self.recorded:
                    out[key] = getattr(value if hasattr(value, key) else self, key)
            elif f.name not in out:
                out[f.name] = value
        return out


# --------------------------------------------------------------------------- E1


SIGMA_R = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35)
SIGMA_I = (0.0, 0.1, 0.2, 0.3, 0.6, 1.2)
#: The tiny profile's 2 x 2 grid ``(σR levels, σI levels)``, for E1 and E2 alike.
TINY_SIGMAS = ((0.0, 0.35), (0.0, 1.2))


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
    protocol: Protocol
    iso_tolerance: float = ISO_TOLERANCE
    n_resamples: int


def _e1(p: Profile) -> E1Config:
    sigma_r, sigma_i = TINY_SIGMAS if p is TINY else (SIGMA_R, SIGMA_I)
    return E1Config(
        sigma_r=sigma_r, sigma_i=sigma_i, protocol=p.controlled, n_resamples=p.n_resamples
    )


# --------------------------------------------------------------------------- E2


SWEEP_R = (0.0, 0.1, 0.2, 0.25, 0.3, 0.35)
SWEEP_I = (0.0, 0.3, 0.6, 1.2)


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
    protocol: Protocol
    iso_tolerance: float = ISO_TOLERANCE
    n_resamples: int


#: The sweep's seeds per profile, and its episodes where they differ from the profile's.
_SWEEP = {
    "full": {"seeds": (100, 101, 102, 103)},
    "quick": {"seeds": (100, 101), "episodes": 6},
    "tiny": {"seeds": (100,)},
}


def _e2(p: Profile) -> E2Config:
    sigma_r, sigma_i = TINY_SIGMAS if p is TINY else (SWEEP_R, SWEEP_I)
    return E2Config(
        sweep_sigma_r=sigma_r,
        sweep_sigma_i=sigma_i,
        protocol=p.controlled.replace(**_SWEEP[p.name]),
        n_resamples=p.n_resamples,
    )


# --------------------------------------------------------------------------- E3


@dataclass(frozen=True, kw_only=True)
class LearnedRow:
    """One learned model of Table 3.

    Attributes:
        key: ``gridplan.experiments.paper.TABLE_3`` key, e.g. ``"uniform_20k"``.
        variant: ``configs/variant`` choice.
        data: ``configs/data`` choice (``"20k"``, ``"12k"``, ``"4k"``).
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


ROWS = (
    LearnedRow(key="uniform_20k", variant="uniform", data="20k"),
    LearnedRow(key="event_weighted_20k", variant="event_weighted", data="20k"),
    LearnedRow(key="anti_weighted_20k", variant="anti_weighted", data="20k"),
    LearnedRow(key="rel_heavy_20k", variant="rel_heavy", data="20k"),
    LearnedRow(key="rel_only_20k", variant="rel_only", data="20k"),
    LearnedRow(key="uniform_12k", variant="uniform", data="12k"),
    LearnedRow(key="uniform_4k", variant="uniform", data="4k"),
)
RANDOM_ROW = LearnedRow(key="random_12k", variant="uniform", data="12k", policy="random")
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
    protocol: Protocol
    train_overrides: tuple[str, ...] = ()
    n_resamples: int

    @property
    def settings(self) -> tuple[LearnedRow, ...]:
        """Every trained row: the Table 3 rows, then the random-data one."""
        return (*self.rows, self.random_row)


_TINY_TRAINER = (
    "trainer=debug",
    "trainer.max_epochs=1",
    "data.windows=16",
    "data.batch_size=64",
    "model.hidden=[32,32]",
)


def _e3(p: Profile) -> E3Config:
    if p is TINY:
        return E3Config(
            rows=(
                dataclasses.replace(ROWS[0], budget="600"),
                dataclasses.replace(ROWS[4], budget="600"),
                dataclasses.replace(ROWS[6], budget="200"),
            ),
            random_row=dataclasses.replace(RANDOM_ROW, budget="400"),
            protocol=p.learned,
            train_overrides=_TINY_TRAINER,
            n_resamples=p.n_resamples,
        )
    quick = ("trainer.max_epochs=15", "trainer.patience=5")
    return E3Config(
        rows=ROWS,
        random_row=RANDOM_ROW,
        protocol=p.learned,
        train_overrides=quick if p is QUICK else (),
        n_resamples=p.n_resamples,
    )


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
    """

    fvi: FVIConfig
    fvi_states: int
    saliency_states: int
    model_seeds: tuple[int, ...]
    n_resamples: int


_FVI = {
    "full": (FVIConfig(iterations=60, epochs=4), 8192, 4096),
    "quick": (FVIConfig(iterations=40, epochs=3), 4096, 2048),
    "tiny": (FVIConfig(iterations=3, epochs=1, hidden=(32, 32)), 256, 128),
}


def _e4(p: Profile) -> E4Config:
    fvi, fvi_states, saliency_states = _FVI[p.name]
    return E4Config(
        fvi=fvi,
        fvi_states=fvi_states,
        saliency_states=saliency_states,
        model_seeds=p.learned.seeds,
        n_resamples=p.n_resamples,
    )


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
    protocol: Protocol


#: The paper's Task B episodes per model (appendix H: 35 hazards and 8 timeouts in 240).
E5_PAPER_SEEDS = tuple(range(8))


def _e5(p: Profile) -> E5Config:
    if p is FULL:
        return E5Config(protocol=p.controlled.replace(seeds=E5_PAPER_SEEDS))
    return E5Config(protocol=p.controlled.replace(episodes=15) if p is QUICK else p.controlled)


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

    models: tuple[tuple[float, float], ...]
    depths: tuple[int, ...]
    protocol: Protocol
    horizons: tuple[int, ...]
    fan_models: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 1.2), (0.35, 0.0))
    fan_depth: int
    fan_seed: int = 3
    ar1_rho: float = 0.8
    ar1_models: tuple[tuple[float, float], ...]
    n_resamples: int

    def __post_init__(self) -> None:
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


_E6_MODELS = ((0.0, 0.0), (0.0, 0.3), (0.0, 1.2), (0.15, 0.0), (0.25, 0.0), (0.35, 0.0))


def _e6(p: Profile) -> E6Config:
    if p is TINY:
        models = ((0.0, 0.0), (0.0, 1.2), (0.35, 0.0))
        return E6Config(
            models=models,
            depths=(1, 2),
            protocol=p.controlled.replace(depth=2),
            horizons=(1, 2),
            fan_depth=2,
            ar1_models=models[1:],
            n_resamples=p.n_resamples,
        )
    return E6Config(
        models=_E6_MODELS,
        depths=(1, 2, p.controlled.depth),
        protocol=p.controlled.replace(episodes=8) if p is QUICK else p.controlled,
        horizons=(1, 2, 5, 10, 20),
        fan_depth=p.controlled.depth,
        ar1_models=_E6_MODELS[1:],
        n_resamples=p.n_resamples,
    )


# --------------------------------------------------------------------------- E7: the zoo

#: The zoo definitions of E7: ``configs/zoo/<name>.yaml``.
ZOO_DIR = DEFAULT_CONFIG_DIR / "zoo"


@dataclass(frozen=True)
class ZooModel:
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
class Zoo:
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
    """Overrides of several lists, a later one replacing an earlier one of the same key
    (``compose`` refuses a key given twice), in first-seen order."""
    out: dict[str, str] = {}
    for overrides in lists:
        for o in overrides:
            out[_key(str(o))] = str(o)
    return tuple(out.values())


def _cap(model: ZooModel, cap: int) -> int:
    set_to = [int(o.split("=", 1)[1]) for o in model.settings if _key(o) == "trainer.max_epochs"]
    return min([cap, *set_to])


def load_zoo(name: str, folder: str | os.PathLike | None = None) -> Zoo:
    """The zoo of ``<folder>/<name>.yaml`` (default folder ``configs/zoo``).

    The file holds ``seeds`` (training seeds), ``eval_seeds`` (closed-loop seeds),
    ``common`` (overrides of every model) and ``models`` (key -> ``name``, ``overrides``); or
    ``base: <zoo>`` to take another zoo's ``common`` and ``models`` and set its own seeds.

    Raises:
        ValueError: if the file is missing, names no model or no seed, or a model lacks
            ``overrides``.
    """
    folder = Path(folder or ZOO_DIR)
    path = folder / f"{name}.yaml"
    if not path.is_file():
        valid = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ValueError(f"no zoo {name!r} in {folder}; valid zoos: {', '.join(valid)}")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    base = raw.pop("base", None)
    if base is not None:
        parent = load_zoo(base, folder)
        seeds = tuple(raw.get("seeds", parent.seeds))
        eval_seeds = tuple(raw.get("eval_seeds", parent.eval_seeds))
        return Zoo(name, parent.models, seeds, eval_seeds)
    entries = raw.get("models") or {}
    if not entries:
        raise ValueError(f"zoo {name!r} ({path}) names no model")
    models = []
    for key, entry in entries.items():
        if not isinstance(entry, dict) or "overrides" not in entry:
            raise ValueError(f"zoo {name!r}: model {key!r} needs a list of overrides")
        settings = _merge(raw.get("common", []), entry["overrides"])
        models.append(ZooModel(str(key), str(entry.get("name", key)), settings))
    seeds, eval_seeds = tuple(raw.get("seeds", ())), tuple(raw.get("eval_seeds", ()))
    if not seeds or not eval_seeds:
        raise ValueError(f"zoo {name!r} ({path}) needs seeds and eval_seeds")
    return Zoo(name, tuple(models), seeds, eval_seeds)


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
        ladder_sizes: the ladder's own sizes (``LadderProtocol`` fields).
        n_resamples: bootstrap resamples of every meta-evaluation CI.
        train_overrides: extra overrides of every training run (``learned_runs.run_config``).
    """

    recorded: ClassVar[tuple[str, ...]] = ()

    zoo: Zoo
    replication: Zoo
    depths: tuple[int, int] = (2, 4)
    episodes: int
    deep_episodes: int
    n_windows: int
    horizon: int = 10
    ladder_sizes: tuple[tuple[str, int], ...]
    n_resamples: int
    train_overrides: tuple[str, ...] = ()

    def closed_loop(self, zoo: Zoo, depth: int) -> Protocol:
        """The closed loop of ``zoo``'s models at ``depth``."""
        return Protocol(depth, zoo.eval_seeds, self.episodes, self.n_windows, self.horizon)

    def ladder(self, zoo: Zoo) -> LadderProtocol:
        """The ladder protocol of ``zoo``'s models (its closed loop at the first depth)."""
        sizes = dict(self.ladder_sizes)
        windows = sizes.pop("n_windows")
        loop = Protocol(self.depths[0], zoo.eval_seeds, self.episodes, windows, self.horizon)
        return LadderProtocol.of(loop, **sizes)


_LADDER = {
    "full": (
        ("n_windows", 256),
        ("branch_states", 128),
        ("anchor_starts", 32),
        ("anchor_rollouts", 4),
        ("probe_questions", 64),
        ("xgap_states", 128),
        ("n_resamples", 200),
    ),
    "quick": (
        ("n_windows", 128),
        ("branch_states", 64),
        ("anchor_starts", 32),
        ("anchor_rollouts", 2),
        ("probe_questions", 32),
        ("xgap_states", 64),
        ("n_resamples", 100),
    ),
    "tiny": (
        ("n_windows", 32),
        ("branch_states", 16),
        ("anchor_starts", 8),
        ("anchor_rollouts", 2),
        ("probe_questions", 8),
        ("xgap_states", 16),
        ("n_resamples", 50),
    ),
}


#: Closed-loop episodes per model of E7: (at the learned depth, at the controlled depth).
_E7_EPISODES = {"full": (20, 10), "quick": (10, 5), "tiny": (2, 2)}


def _e7(p: Profile) -> E7Config:
    if p is TINY:
        zoo, rep = load_zoo("tiny"), load_zoo("tiny_replication")
    else:
        zoo, rep = load_zoo("default"), load_zoo("replication")
    if p is QUICK:
        zoo, rep = (z.reduced(seeds=1, eval_seeds=1, max_epochs=5) for z in (zoo, rep))
    episodes, deep_episodes = _E7_EPISODES[p.name]
    return E7Config(
        zoo=zoo,
        replication=rep,
        depths=(p.learned.depth, p.controlled.depth),
        episodes=episodes,
        deep_episodes=deep_episodes,
        n_windows=p.controlled.n_windows,
        ladder_sizes=_LADDER[p.name],
        n_resamples=p.n_resamples,
    )


def _per_profile(make) -> dict:
    return {name: make(p) for name, p in PROFILES.items()}


E1: dict[str, E1Config] = _per_profile(_e1)
E2: dict[str, E2Config] = _per_profile(_e2)
E3: dict[str, E3Config] = _per_profile(_e3)
E4: dict[str, E4Config] = _per_profile(_e4)
E5: dict[str, E5Config] = _per_profile(_e5)
E6: dict[str, E6Config] = _per_profile(_e6)
E7: dict[str, E7Config] = _per_profile(_e7)
