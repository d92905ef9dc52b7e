"""Typed training configuration, composed by Hydra from ``configs/`` (``docs/DESIGN.md``).

The schema is a tree of dataclasses stored in Hydra's ``ConfigStore`` as ``gridplan_schema``
and named first in the defaults list of ``configs/config.yaml``, so every group file and
override merges into a typed, struct-mode config: unknown keys and ill-typed values are
rejected. ``python -m train`` composes through ``hydra.main``; ``compose`` builds the same
config through Hydra's Compose API for library callers and tests::

    configs/config.yaml              defaults list: one choice per group, plus top-level values
    configs/<group>/<choice>.yaml    merged into cfg.<group>  (groups: variant data model trainer)
    configs/experiment/<name>.yaml   optional preset (``@package _global_``): group choices and
                                     any values
    key=value                        dotted overrides of any key, e.g. trainer.max_epochs=50

Precedence is Hydra's: the primary config's defaults, then the experiment's ``override``
entries, then command-line choices; values merge in defaults-list order, the experiment's over
``config.yaml``'s, and dotted overrides last. A value with top-level commas is a sweep
(``seed=0,1,2``), run with Hydra's multirun (``python -m train -m ...``); ``expand_sweeps``
lists the runs of a sweep so all of them can be checked before the first one starts.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import II, DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gridplan.core import tasks

#: Config groups, in composition order.
GROUPS = ("variant", "data", "model", "trainer")
#: Optional preset group: may select group choices and override any key.
EXPERIMENT = "experiment"
#: Metrics a run may select its best checkpoint and early stopping by (lower is better).
MONITORS = ("val/loss", "val/E_tot", "val/DRPE_graded", "val/DRPE_binary")
#: ``configs/`` at the repository root (it is read from the source tree, not packaged).
DEFAULT_CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


@dataclass
class VariantConfig:
    """Loss variant (paper Table 3) as weights of a per-dimension weighted MSE.

    A transition's loss is ``sample_weight * sum_d dim_weight_d * err_d^2 / 12`` (averaged over
    the ``rollout_horizon`` open-loop steps from it) with
    ``dim_weight`` = ``relevant_weight`` on the task's relevant dims and ``irrelevant_weight``
    elsewhere, and ``sample_weight`` = ``event_weight`` on key-pickup or door-opening
    transitions, 1 otherwise.
    """

    name: str = "uniform"
    relevant_weight: float = 1.0
    irrelevant_weight: float = 1.0
    event_weight: float = 1.0
    #: Steps ``H`` of the open-loop rollout loss: from each sampled transition the model
    #: predicts the next ``H`` logged steps of its episode from its own clamped predictions,
    #: and the loss averages the ``H`` weighted step errors
    #: (``gridplan.training.module.rollout_mse``); 1 is the one-step loss.
    rollout_horizon: int = 1


@dataclass
class DataConfig:
    """Logged training transitions and the held-out evaluation windows used in validation."""

    name: str = "20k"
    #: Transition budget, e.g. ``12k`` or ``12000`` (``gridplan.data.datasets.parse_budget``).
    budget: str = "20k"
    #: Behaviour policy: ``random``, ``balanced`` or ``expert``
    #: (``gridplan.data.datasets.BEHAVIOUR_POLICIES``).
    policy: str = "balanced"
    task: str = "A"
    #: Seed of the collected data; follows the run's seed unless set.
    seed: int = II("seed")
    #: Fraction of episodes held out for ``val/loss``.
    val_fraction: float = 0.1
    batch_size: int = 256
    #: Generated datasets are cached here, keyed by (task, policy, budget, seed).
    cache_dir: str = "data_cache"
    #: Held-out open-loop windows for ``val/E_tot``, DRPE, profiles and the event audit.
    windows: int = 256
    window_horizon: int = 10
    window_seed: int = 10_000
    window_policy: str = "balanced"


@dataclass
class ModelConfig:
    """MLP world model and its optimiser."""

    name: str = "mlp"
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    activation: str = "silu"
    #: Ensemble members K: K > 1 trains K networks as one vectorized group and stacks them
    #: into one checkpoint (``gridplan.models.ensemble``).
    members: int = 1
    #: Each ensemble member trains on its own bootstrap resample of the training split
    #: (False: on the split itself; members still differ by seed).
    bootstrap: bool = True
    #: How an ensemble plans: ``mean`` of the members, or ``ts`` (one drawn member per
    #: imagined rollout, trajectory sampling).
    sampling: str = "mean"
    predict_delta: bool = True
    lr: float = 3e-3
    weight_decay: float = 0.0


@dataclass
class TrainerConfig:
    """Lightning trainer, checkpointing, early stopping and dashboards."""

    name: str = "default"
    max_epochs: int = 100
    min_epochs: int = 1
    #: Lightning accelerator: ``auto`` uses a GPU when present.
    accelerator: str = "auto"
    #: Best checkpoint and early stopping follow this metric (one of ``MONITORS``).
    monitor: str = "val/loss"
    patience: int = 20
    #: Cap on training batches per epoch (None: all), for tiny debug runs.
    limit_train_batches: int | None = None
    #: Profile bar chart and per-step heatmap images every this many epochs (and the best);
    #: 0 draws none.
    figures_every_n_epochs: int = 5
    #: Held-out window metrics (E_tot, DRPE, profile) logged every this many epochs (and at
    #: max_epochs); 0 scores only the best checkpoint, at the end. Below 1 per epoch the
    #: monitor must be val/loss (early stopping needs it every epoch).
    metrics_every_n_epochs: int = 1
    deterministic: bool = True
    progress_bar: bool = True
    log_every_n_steps: int = 10


@dataclass
class TrainConfig:
    """How ``python -m train`` runs several runs (a sweep, or an ensemble's members)."""

    #: Runs that share an architecture train as one vectorized group
    #: (``gridplan.training.vectorized``); False trains them one after another.
    vectorize: bool = True
    #: Worker processes for vectorized groups (one thread each); the runs are dealt into
    #: this many groups. None: one per CPU core the process may use, at most one per run
    #: (``gridplan.training.vectorized.auto_workers``; 1 on a GPU).
    workers: int | None = None


@dataclass
class Config:
    """Everything one training run needs; saved resolved into the run folder and checkpoint."""

    variant: VariantConfig = field(default_factory=VariantConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    #: Preset applied from ``configs/experiment/`` (recorded for reference).
    experiment: str | None = None
    seed: int = 0
    #: Runs go to ``out_dir/<run name>/version_N``; existing versions are never touched.
    out_dir: str = "runs"
    #: Folder name of the run under ``out_dir``; derived from variant, data and seed if unset.
    name: str | None = None
    #: torch CPU threads of the run (None: ``gridplan.util.threads.default_threads``).
    threads: int | None = None


#: Name of the schema node in Hydra's ConfigStore (first entry of ``config.yaml``'s defaults).
SCHEMA_NAME = "gridplan_schema"
ConfigStore.instance().store(name=SCHEMA_NAME, node=Config)


def schema() -> DictConfig:
    """The structured default config (unknown keys rejected)."""
    return OmegaConf.structured(Config)


def choices(group: str, config_dir: Path | str | None = None) -> list[str]:
    """Available choices of a config group (its YAML file names), sorted."""
    folder = Path(config_dir or DEFAULT_CONFIG_DIR) / group
    return sorted(p.stem for p in folder.glob("*.yaml"))


def parse_overrides(args: Iterable[str]) -> list[Override]:
    """Command-line overrides read with Hydra's override grammar.

    Raises:
        ValueError: on an argument Hydra cannot read (it names the argument).
    """
    parser = OverridesParser.create()
    parsed = []
    for arg in args:
        try:
            parsed += parser.parse_overrides([arg])
        except HydraException as err:
            raise ValueError(
                f"cannot read argument {arg!r} (expected key=value): {_first_line(err)}"
            ) from err
    return parsed


def expand_sweeps(args: Sequence[str]) -> list[list[str]]:
    """One override list per run of a multirun sweep (the cartesian product, in command-line
    order, as Hydra's basic sweeper orders it).

    Example: ``["seed=0,1", "variant=uniform,rel_only"]`` -> 4 lists, seed-major.

    Raises:
        ValueError: on an argument that is not ``key=value``.
    """
    options = []
    for override in parse_overrides(args):
        key = override.get_key_element()
        if override.is_sweep_override():
            options.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        else:
            options.append([override.input_line])
    return [list(combo) for combo in itertools.product(*options)]


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _check_key(base: DictConfig, dotted: str) -> None:
    """Raise a ValueError listing the valid keys if ``dotted`` is not in the schema."""
    node = base
    walked = []
    for part in dotted.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            where = ".".join(walked) or "the config"
            valid = sorted(node.keys()) if isinstance(node, DictConfig) else []
            raise ValueError(
                f"unknown config key {dotted!r}: no {part!r} in {where}; valid keys: "
                f"{', '.join(str(k) for k in valid) or '(none, it is a value)'}"
            )
        walked.append(part)
        node = node[part]


def check_overrides(args: Sequence[str], config_dir: Path | str | None = None) -> None:
    """Check one run's overrides against the groups and the schema before Hydra composes.

    Hydra would reject the same arguments; this names the valid choices and keys.
    ``hydra/...`` and ``hydra.*`` arguments are Hydra's own and pass through.

    Raises:
        ValueError: on a sweep, a key given twice, an unknown group choice or key.
    """
    base = schema()
    seen: set[str] = set()
    for override in parse_overrides(args):
        key = override.key_or_group
        if override.is_sweep_override():
            raise ValueError(
                f"{override.input_line!r} is a sweep; run sweeps with Hydra's multirun: "
                f"python -m train -m {' '.join(args)}"
            )
        if key in seen:
            raise ValueError(f"config key {key!r} is given twice")
        seen.add(key)
        if key == "hydra" or key.startswith(("hydra/", "hydra.")):
            continue
        if key in (*GROUPS, EXPERIMENT):
            value = override.value()
            valid = choices(key, config_dir)
            if value is not None and str(value) not in valid:
                raise ValueError(
                    f"unknown {key} {value!r}; valid choices: {', '.join(valid) or '(none found)'}"
                )
        elif not override.is_delete():
            _check_key(base, key)


def finish(cfg: DictConfig, picked: Mapping[str, str | None]) -> DictConfig:
    """Record the group choices Hydra made (``hydra.runtime.choices``) as ``<group>.name``
    and ``experiment``, drop Hydra's own node, and ``validate``; returns ``cfg``.

    Raises:
        ValueError: if a group has no choice or the config fails ``validate``.
    """
    with open_dict(cfg):
        cfg.pop("hydra", None)
    for group in GROUPS:
        if picked.get(group) is None:
            raise ValueError(f"no choice for config group {group!r}; add one to config.yaml")
        cfg[group].name = picked[group]
    cfg.experiment = picked.get(EXPERIMENT)
    return validate(cfg)


def compose(overrides: Sequence[str] = (), config_dir: Path | str | None = None) -> DictConfig:
    """Compose and validate one run's config with Hydra's Compose API.

    Args:
        overrides: ``group=choice`` selections (``variant=rel_only``, ``data=12k``,
            ``experiment=NAME``) and dotted ``key=value`` overrides (``data.policy=random``,
            ``model.hidden=[128,128]``), in Hydra's override grammar. No sweeps: see
            ``expand_sweeps``.
        config_dir: folder with ``config.yaml`` and the group folders (default: the
            repository's ``configs/``).

    Returns:
        A structured ``DictConfig`` following ``Config`` (interpolations unresolved).

    Raises:
        ValueError: on an unknown group choice or key (listing the valid ones), a value of
            the wrong type, a repeated key, a sweep, or a value that fails ``validate``.
    """
    config_dir = Path(config_dir or DEFAULT_CONFIG_DIR).resolve()
    if not (config_dir / "config.yaml").is_file():
        raise ValueError(f"no config.yaml in config folder {config_dir}")
    check_overrides(overrides, config_dir)
    # A Hydra app (python -m train) holds the global Hydra; compose beside it, then hand it back.
    held = GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(config_dir), version_base="1.3", job_name="train"):
            cfg = hydra_compose("config", list(overrides), return_hydra_config=True)
            picked = dict(cfg.hydra.runtime.choices)
    except (HydraException, OmegaConfBaseException) as err:
        cause = f": {_first_line(err.__cause__)}" if err.__cause__ else ""
        raise ValueError(f"{_first_line(err)}{cause}") from err
    finally:
        GlobalHydra.instance().clear()
        if held is not None:
            GlobalHydra.instance().initialize(held)
    return finish(cfg, picked)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


#: Lightning accelerators accepted by ``trainer.accelerator``.
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")


def validate(cfg: DictConfig) -> DictConfig:
    """Check value ranges the type system cannot; returns ``cfg``.

    Raises:
        ValueError: naming the first offending key and the valid values or range.
    """
    from gridplan.data.datasets import BEHAVIOUR_POLICIES, parse_budget
    from gridplan.models.learned import ACTIVATIONS

    try:
        c = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        raise ValueError(f"config does not resolve: {err}") from err
    v, d, m, t = c["variant"], c["data"], c["model"], c["trainer"]
    for key in ("relevant_weight", "irrelevant_weight", "event_weight"):
        _require(
            math.isfinite(v[key]) and v[key] >= 0,
            f"variant.{key} must be a finite number >= 0, got {v[key]}",
        )
    _require(v["event_weight"] > 0, "variant.event_weight must be > 0")
    _require(
        v["relevant_weight"] + v["irrelevant_weight"] > 0,
        "variant.relevant_weight and variant.irrelevant_weight cannot both be 0",
    )
    _require(
        v["rollout_horizon"] >= 1,
        f"variant.rollout_horizon must be >= 1, got {v['rollout_horizon']}",
    )
    parse_budget(d["budget"])
    for key in ("policy", "window_policy"):
        _require(
            d[key] in BEHAVIOUR_POLICIES,
            f"unknown data.{key} {d[key]!r}; valid choices: {', '.join(BEHAVIOUR_POLICIES)}",
        )
    _require(
        d["task"] in tasks.names(),
        f"unknown data.task {d['task']!r}; valid: {', '.join(tasks.names())}",
    )
    _require(
        0 < d["val_fraction"] < 1, f"data.val_fraction must lie in (0, 1): {d['val_fraction']}"
    )
    for key in ("batch_size", "windows", "window_horizon"):
        _require(d[key] >= 1, f"data.{key} must be >= 1, got {d[key]}")
    _require(
        bool(m["hidden"]) and min(m["hidden"]) >= 1,
        f"model.hidden must be a non-empty list of positive widths, got {m['hidden']}",
    )
    _require(m["members"] >= 1, f"model.members must be >= 1, got {m['members']}")
    _require(
        m["activation"] in ACTIVATIONS,
        f"unknown model.activation {m['activation']!r}; valid: {', '.join(sorted(ACTIVATIONS))}",
    )
    _require(m["lr"] > 0, f"model.lr must be > 0, got {m['lr']}")
    _require(m["weight_decay"] >= 0, f"model.weight_decay must be >= 0, got {m['weight_decay']}")
    _require(
        t["monitor"] in MONITORS,
        f"unknown trainer.monitor {t['monitor']!r}; valid: {', '.join(MONITORS)}",
    )
    _require(
        m["sampling"] in ("mean", "ts"),
        f"unknown model.sampling {m['sampling']!r}; valid: mean, ts",
    )
    _require(
        t["figures_every_n_epochs"] >= 0,
        f"trainer.figures_every_n_epochs must be >= 0 (0: no images), got "
        f"{t['figures_every_n_epochs']}",
    )
    every = t["metrics_every_n_epochs"]
    _require(
        every >= 0, f"trainer.metrics_every_n_epochs must be >= 0 (0: the best only), got {every}"
    )
    _require(
        every == 1 or t["monitor"] == "val/loss",
        f"trainer.monitor {t['monitor']!r} needs the window metrics every epoch "
        f"(trainer.metrics_every_n_epochs=1), got {every}",
    )
    workers = c["train"]["workers"]
    _require(workers is None or workers >= 1, f"train.workers must be >= 1 or null, got {workers}")
    for key in ("max_epochs", "min_epochs", "patience"):
        _require(t[key] >= 1, f"trainer.{key} must be >= 1, got {t[key]}")
    _require(
        t["limit_train_batches"] is None or t["limit_train_batches"] >= 1,
        f"trainer.limit_train_batches must be >= 1 or null, got {t['limit_train_batches']}",
    )
    _require(
        t["accelerator"] in ACCELERATORS,
        f"unknown trainer.accelerator {t['accelerator']!r}; valid: {', '.join(ACCELERATORS)}",
    )
    _require(
        t["accelerator"] not in ("gpu", "cuda") or torch.cuda.is_available(),
        f"trainer.accelerator={t['accelerator']} but torch sees no CUDA GPU "
        f"(torch {torch.__version__}); use trainer.accelerator=auto or cpu",
    )
    _require(0 <= c["seed"] < 2**32, f"seed must lie in 0..2**32-1, got {c['seed']}")
    _require(bool(c["out_dir"]), "out_dir must not be empty")
    name = c["name"]
    _require(
        name is None or (name not in ("", ".", "..") and "/" not in name),
        f"name must be a plain folder name, got {name!r}",
    )
    return cfg


def run_name(cfg: DictConfig) -> str:
    """Folder name of a run: ``cfg.name`` or ``<variant>-<policy>-<budget>-seed<seed>``."""
    from gridplan.data.datasets import parse_budget

    if cfg.name:
        return str(cfg.name)
    n = parse_budget(cfg.data.budget)
    budget = f"{n // 1000}k" if n % 1000 == 0 else str(n)
    return f"{cfg.variant.name}-{cfg.data.policy}-{budget}-seed{cfg.seed}"


def to_yaml(cfg: DictConfig) -> str:
    """The resolved config as YAML text."""
    return OmegaConf.to_yaml(cfg, resolve=True)
