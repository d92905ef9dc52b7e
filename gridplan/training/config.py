"""Typed training configuration, composed by Hydra from ``configs/`` (``docs/DESIGN.md``).

The schema is a tree of dataclasses stored in Hydra's ``ConfigStore`` as ``gridplan_schema``
and named first in the defaults list of ``configs/train/config.yaml``, so every group file and
override merges into a typed, struct-mode config: unknown keys and ill-typed values are
Hydra's errors. The dataclasses hold every default; a group file sets only what its choice
changes, and its ``name``. Each dataclass checks its own ranges in ``__post_init__``, run by
``validate`` (``OmegaConf.to_object``). ``python -m train`` composes through ``hydra.main``;
``compose`` builds the same config through Hydra's Compose API for library callers::

    configs/train/config.yaml             defaults list: one choice per group
    configs/train/<group>/<choice>.yaml   merged into cfg.<group> (variant data model trainer
                                          logger)
    configs/train/experiment/<name>.yaml  optional preset (``@package _global_``): group
                                          choices and any values
    key=value                        dotted overrides of any key, e.g. trainer.max_epochs=50

Precedence is Hydra's: the primary config's defaults, then the experiment's ``override``
entries, then command-line choices; values merge in defaults-list order and dotted overrides
last (a key given twice: the last wins). More config folders join Hydra's search path with
``--config-dir`` or ``hydra.searchpath`` (a group choice found there composes like one of
``configs/``). A value with top-level commas is a sweep (``seed=0,1,2``), run with Hydra's
multirun (``python -m train -m ...``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from importlib import resources
from pathlib import Path

import torch
from hydra import compose as hydra_compose
from hydra import initialize_config_dir, initialize_config_module
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import II, MISSING, DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.core.render import ALL_OBS_KINDS, obs_shape
from gridplan.data.datasets import BEHAVIOUR_POLICIES, parse_budget
from gridplan.models.latent import LATENT_FAMILIES
from gridplan.models.learned import ACTIVATIONS
from gridplan.util.threads import check_threads

#: Metrics a run may select its best checkpoint and early stopping by (lower is better).
MONITORS = ("val/loss", "val/E_tot", "val/DRPE_graded", "val/DRPE_binary")
#: Lightning accelerators accepted by ``trainer.accelerator``.
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")
#: The package that ships ``configs/`` (the repository's top-level folder, mapped to this
#: package by ``pyproject.toml``'s ``package-dir``): ``train/`` is ``python -m train``'s, beside
#: the experiments' own (``experiments/``, ``zoo/``), which no training run can select. Hydra
#: reads its folders through the package (``pkg://gridplan.conf.train``), so an installed
#: gridplan finds them from any working folder.
CONFIG_PACKAGE = "gridplan.conf"


def _configs_root() -> Path:
    """The installed ``CONFIG_PACKAGE``'s folder.

    Raises:
        ImportError: if gridplan runs from a source tree that was never installed (only an
            install maps ``configs/`` to the package).
    """
    try:
        return Path(str(resources.files(CONFIG_PACKAGE))).resolve()
    except ModuleNotFoundError as err:
        raise ImportError(
            f"{CONFIG_PACKAGE} (gridplan's configs/) is not installed: install gridplan "
            "(pip install gridplan-*.whl, or pip install -e . in a checkout; "
            "scripts/setup.sh does) rather than putting its source folder on PYTHONPATH"
        ) from err


CONFIGS_ROOT = _configs_root()
DEFAULT_CONFIG_DIR = CONFIGS_ROOT / "train"


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _one_of(key: str, value: str, valid: Sequence[str]) -> None:
    _require(value in valid, f"unknown {key} {value!r}; valid: {', '.join(valid)}")


def _at_least(key: str, value: int | None, low: int, optional: bool = False) -> None:
    """``value >= low`` (or None where ``optional``)."""
    ok = (optional and value is None) or (value is not None and value >= low)
    _require(ok, f"{key} must be >= {low}{' or null' if optional else ''}, got {value}")


@dataclass
class VariantConfig:
    """Loss variant (paper Table 3) as weights of a per-dimension weighted MSE.

    A transition's loss is ``sample_weight * sum_d dim_weight_d * err_d^2 / 12`` (averaged over
    the ``rollout_horizon`` open-loop steps from it) with
    ``dim_weight`` = ``relevant_weight`` on the task's relevant dims and ``irrelevant_weight``
    elsewhere, and ``sample_weight`` = ``event_weight`` on key-pickup or door-opening
    transitions, 1 otherwise.

    Raises:
        ValueError: on a negative or non-finite weight, ``event_weight`` 0, both dimension
            weights 0, or ``rollout_horizon`` below 1.
    """

    #: The ``configs/train/variant`` choice (each choice's file sets it).
    name: str = MISSING
    relevant_weight: float = 1.0
    irrelevant_weight: float = 1.0
    event_weight: float = 1.0
    #: Steps ``H`` of the open-loop rollout loss: from each sampled transition the model
    #: predicts the next ``H`` logged steps of its episode from its own clamped predictions,
    #: and the loss averages the ``H`` weighted step errors
    #: (``gridplan.training.engine``); 1 is the one-step loss.
    rollout_horizon: int = 1

    def __post_init__(self) -> None:
        for key in ("relevant_weight", "irrelevant_weight", "event_weight"):
            value = getattr(self, key)
            _require(
                math.isfinite(value) and value >= 0,
                f"variant.{key} must be a finite number >= 0, got {value}",
            )
        _require(self.event_weight > 0, "variant.event_weight must be > 0")
        _require(
            self.relevant_weight + self.irrelevant_weight > 0,
            "variant.relevant_weight and variant.irrelevant_weight cannot both be 0",
        )
        _at_least("variant.rollout_horizon", self.rollout_horizon, 1)


@dataclass
class DataConfig:
    """Logged training transitions and the held-out evaluation windows used in validation.

    Raises:
        ValueError: on a budget that is not a count, an unknown policy or task, a
            ``val_fraction`` outside (0, 1), or a size below 1.
    """

    #: The ``configs/train/data`` choice (each choice's file sets it).
    name: str = MISSING
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

    def __post_init__(self) -> None:
        parse_budget(self.budget)
        for key in ("policy", "window_policy"):
            _one_of(f"data.{key}", getattr(self, key), BEHAVIOUR_POLICIES)
        _one_of("data.task", self.task, tasks.names())
        _require(
            0 < self.val_fraction < 1,
            f"data.val_fraction must lie in (0, 1): {self.val_fraction}",
        )
        for key in ("batch_size", "windows", "window_horizon"):
            _at_least(f"data.{key}", getattr(self, key), 1)


#: Model families ``model.family`` trains: the state MLP and the latent families
#: (``gridplan.models.latent``, ``gridplan.training.latent_module``).
FAMILIES = ("mlp", *LATENT_FAMILIES)


@dataclass
class ModelConfig:
    """World model and its optimiser: the state MLP (``family: mlp``) or a latent model
    (``latent_recon``, ``jepa``, ``tdmpc``, ``rssm``: ``gridplan.models.latent``).

    Raises:
        ValueError: on an empty or non-positive ``hidden``, ``members`` below 1, an unknown
            family, activation or sampling, ``lr`` <= 0 or a negative ``weight_decay``, a
            latent size below 1, an EMA decay outside ``[0, 1]``, a negative latent loss
            weight, or a stochastic ``jepa``.
    """

    #: The ``configs/train/model`` choice (each choice's file sets it).
    name: str = MISSING
    #: ``mlp`` (state in, state out) or a latent family (observation in, latent out).
    family: str = "mlp"
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
    #: Latent families: latent width ``Z``.
    latent_dim: int = 32
    #: Latent families: channels of the stride-2 convolutions encoding grid and pixels.
    channels: list[int] = field(default_factory=lambda: [16, 32])
    #: ``latent_recon``: Gaussian latent transition (reparameterised sample) instead of a
    #: deterministic one.
    stochastic: bool = False
    #: Latent families: weight of the latent prediction loss (beside the reconstructions of
    #: ``latent_recon``, the VICReg terms of ``jepa`` and ``tdmpc``).
    latent_weight: float = 1.0
    #: ``jepa``, ``tdmpc``: decay of the target encoder's (and ``tdmpc``'s target value
    #: head's) exponential moving average per step.
    ema_decay: float = 0.95
    #: ``jepa``, ``tdmpc``: weights of the VICReg variance and covariance terms
    #: (anti-collapse).
    var_weight: float = 1.0
    cov_weight: float = 0.04
    #: ``tdmpc``: weights of the reward and termination heads' loss and of the value head's
    #: temporal-difference loss (``gridplan.training.latent_module``).
    reward_weight: float = 0.5
    value_weight: float = 0.1
    #: ``rssm``: the deterministic belief's share of ``latent_dim`` (0 for the other
    #: families), the weight of the KL of the posterior from the prior, and the free nats
    #: below which the KL of a step is not minimised (Dreamer's).
    belief_dim: int = 0
    kl_weight: float = 1.0
    free_nats: float = 1.0

    def __post_init__(self) -> None:
        _one_of("model.family", self.family, FAMILIES)
        _at_least("model.latent_dim", self.latent_dim, 1)
        _require(
            bool(self.channels) and min(self.channels) >= 1,
            f"model.channels must be a non-empty list of positive widths, got {self.channels}",
        )
        _require(
            0 <= self.ema_decay <= 1, f"model.ema_decay must lie in [0, 1], got {self.ema_decay}"
        )
        weights = ("latent_weight", "var_weight", "cov_weight", "reward_weight", "value_weight")
        for key in (*weights, "kl_weight", "free_nats"):
            value = getattr(self, key)
            _require(
                math.isfinite(value) and value >= 0,
                f"model.{key} must be a finite number >= 0, got {value}",
            )
        _require(
            (self.family == "rssm") == (0 < self.belief_dim < self.latent_dim)
            and (self.family != "rssm" or self.stochastic),
            f"model.belief_dim (the belief's share of latent_dim) and model.stochastic=true "
            f"belong to model=rssm, whose belief_dim lies in 1..latent_dim - 1; got family "
            f"{self.family}, belief_dim {self.belief_dim}, latent_dim {self.latent_dim}, "
            f"stochastic {self.stochastic}",
        )
        _require(
            not (self.family in ("jepa", "tdmpc") and self.stochastic),
            f"model.stochastic=true needs model=latent_recon (a {self.family} predicts a "
            "deterministic latent)",
        )
        _require(
            bool(self.hidden) and min(self.hidden) >= 1,
            f"model.hidden must be a non-empty list of positive widths, got {self.hidden}",
        )
        _at_least("model.members", self.members, 1)
        _one_of("model.activation", self.activation, sorted(ACTIVATIONS))
        _require(self.lr > 0, f"model.lr must be > 0, got {self.lr}")
        _require(
            self.weight_decay >= 0, f"model.weight_decay must be >= 0, got {self.weight_decay}"
        )
        _one_of("model.sampling", self.sampling, ("mean", "ts"))


@dataclass
class ObsConfig:
    """What a latent model observes (``gridplan.core.render``): the ``state``, the symbolic
    ``grid`` or RGB ``pixels`` (the paper's world), MiniGrid's ``egocentric`` view or ``full``
    grid (DoorKey), drawn from the logged states on demand.

    Raises:
        ValueError: on an unknown kind or a bad ``pixels_per_cell``.
    """

    #: The ``configs/train/obs`` choice: one of ``gridplan.core.render.ALL_OBS_KINDS`` (a
    #: config saved before observations reads the state); the world must draw it.
    name: str = "state"
    #: Tile side of the pixel observation (even; 4: 32x32 pixels for the default world).
    pixels_per_cell: int = 4

    def __post_init__(self) -> None:
        _one_of("obs.name", self.name, ALL_OBS_KINDS)
        _require(
            self.pixels_per_cell >= 2 and self.pixels_per_cell % 2 == 0,
            f"obs.pixels_per_cell must be an even int >= 2, got {self.pixels_per_cell}",
        )


@dataclass
class TrainerConfig:
    """Lightning trainer, checkpointing, early stopping and dashboards.

    Raises:
        ValueError: on an unknown monitor or accelerator, a GPU accelerator without a CUDA
            GPU, a count out of range (``max_steps`` below 1), or a monitor other than
            ``val/loss`` with the window metrics less often than every epoch.
    """

    #: The ``configs/train/trainer`` choice (each choice's file sets it).
    name: str = MISSING
    max_epochs: int = 100
    min_epochs: int = 1
    #: Cap on optimizer steps (Lightning's ``max_steps``; None: no cap). A run that reaches it
    #: stops there, even inside an epoch and before ``min_epochs``, and is validated at that
    #: step, so its best checkpoint and held-out metrics exist even when it stops before its
    #: first epoch ends (``gridplan.training.runs.StopAtMaxSteps``; a vectorized group's
    #: member stops the same way, ``gridplan.training.vectorized``). The learning-rate
    #: schedule still runs over ``max_epochs``.
    max_steps: int | None = None
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

    def __post_init__(self) -> None:
        _one_of("trainer.monitor", self.monitor, MONITORS)
        for key, low in (("figures_every_n_epochs", 0), ("metrics_every_n_epochs", 0)):
            _at_least(f"trainer.{key}", getattr(self, key), low)
        _require(
            self.metrics_every_n_epochs == 1 or self.monitor == "val/loss",
            f"trainer.monitor {self.monitor!r} needs the window metrics every epoch "
            f"(trainer.metrics_every_n_epochs=1), got {self.metrics_every_n_epochs}",
        )
        for key in ("max_epochs", "min_epochs", "patience"):
            _at_least(f"trainer.{key}", getattr(self, key), 1)
        _at_least("trainer.max_steps", self.max_steps, 1, optional=True)
        _at_least("trainer.limit_train_batches", self.limit_train_batches, 1, optional=True)
        _one_of("trainer.accelerator", self.accelerator, ACCELERATORS)
        _require(
            self.accelerator not in ("gpu", "cuda") or torch.cuda.is_available(),
            f"trainer.accelerator={self.accelerator} but torch sees no CUDA GPU "
            f"(torch {torch.__version__}); use trainer.accelerator=auto or cpu",
        )


@dataclass
class TrainConfig:
    """How ``python -m train`` runs several runs (a sweep, or an ensemble's members).

    Raises:
        ValueError: if ``workers`` is below 1.
    """

    #: Runs that share an architecture train as one vectorized group
    #: (``gridplan.training.vectorized``); False trains them one after another.
    vectorize: bool = True
    #: Worker processes for vectorized groups (one thread each); the runs are dealt into
    #: this many groups. None: as many as pay for a worker's start, at most one per CPU
    #: core the process may use and one per run (``gridplan.training.vectorized.auto_workers``;
    #: 1 on a GPU).
    workers: int | None = None

    def __post_init__(self) -> None:
        _at_least("train.workers", self.workers, 1, optional=True)


#: Lightning loggers a run can write to (``configs/train/logger/``); the optional ones name
#: the ``pyproject.toml`` extra that installs them (``gridplan.training.loggers``).
LOGGERS = ("tensorboard", "csv", "mlflow", "wandb")


@dataclass
class LoggerConfig:
    """Where a run's scalars, hparams and figures go (``gridplan.training.loggers``).

    ``tensorboard`` (events in the run folder: scalars, images, the config as text, the
    HParams session, custom-scalar charts), ``csv`` (``metrics.csv`` and ``hparams.yaml`` in
    the run folder), ``mlflow`` (a local file store, no server: ``tracking_uri`` or
    ``file:<run folder>/mlruns``) or ``wandb`` (offline by default: ``<run folder>/wandb``;
    one run per process, so not in a vectorized group of several runs).

    Raises:
        ValueError: on an unknown ``name`` or an empty ``experiment_name`` or ``project``.
    """

    #: The ``configs/train/logger`` choice (one of ``LOGGERS``).
    name: str = "tensorboard"
    #: MLflow experiment of the run.
    experiment_name: str = "gridplan"
    #: MLflow tracking URI; None: ``file:<run folder>/mlruns``.
    tracking_uri: str | None = None
    #: W&B project of the run.
    project: str = "gridplan"
    #: W&B offline mode (nothing leaves the machine; ``wandb sync`` uploads later).
    offline: bool = True

    def __post_init__(self) -> None:
        _one_of("logger.name", self.name, LOGGERS)
        _require(bool(self.experiment_name), "logger.experiment_name must not be empty")
        _require(bool(self.project), "logger.project must not be empty")


@dataclass
class Config:
    """Everything one training run needs; saved resolved into the run folder and checkpoint.

    Raises:
        ValueError: on a seed outside ``0..2**32-1``, an empty ``out_dir``, a ``name`` that
            is not a plain folder name, ``threads`` below 1 or an unknown ``world``.
    """

    variant: VariantConfig = field(default_factory=VariantConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    obs: ObsConfig = field(default_factory=ObsConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    #: Preset applied from ``configs/train/experiment/`` (each preset's file sets it).
    experiment: str | None = None
    #: The gridworld (``gridplan.core.world``): ``default``, ``g16-k8``, ``g32-k64`` or any
    #: ``g{N}-k{K}``; the network's input and output widths follow its state layout.
    world: str = "default"
    seed: int = 0
    #: Runs go to ``out_dir/<run name>/version_N``; existing versions are never touched.
    out_dir: str = "runs"
    #: Folder name of the run under ``out_dir``; derived from variant, data and seed if unset.
    name: str | None = None
    #: torch CPU threads of the run's training job, on this machine or a cluster's (None:
    #: ``OMP_NUM_THREADS``, else 1 for a run alone; a vectorized group on this machine takes
    #: the cores its launch leaves it, as many as its stacked step pays for:
    #: ``gridplan.training.runs.job_threads``). Runs of different ``threads`` train apart.
    threads: int | None = None

    def __post_init__(self) -> None:
        worlds.get(self.world)
        _require(0 <= self.seed < 2**32, f"seed must lie in 0..2**32-1, got {self.seed}")
        _require(bool(self.out_dir), "out_dir must not be empty")
        _require(
            self.name is None or (self.name not in ("", ".", "..") and "/" not in self.name),
            f"name must be a plain folder name, got {self.name!r}",
        )
        check_threads(self.threads)
        self._check_family()

    def _check_family(self) -> None:
        """A latent family trains one network on observations and selects by ``val/loss``; a
        jepa or tdmpc has no state loss for a dimension weighting; the state MLP reads
        states."""
        family, obs = self.model.family, self.obs.name
        if family == "mlp":
            _require(
                obs == "state",
                f"obs={obs} needs a latent model: model={self.model.name} (model.family mlp) "
                "reads the state; the models that accept grid, pixels, egocentric or full "
                "observations are model=latent_recon, model=jepa, model=tdmpc and model=rssm",
            )
            return
        _require(
            self.model.members == 1,
            f"model.family {family} trains one network: model.members=1, got {self.model.members}",
        )
        _require(
            self.trainer.monitor == "val/loss",
            f"model.family {family} selects its best checkpoint by val/loss (no state "
            f"windows to score), got trainer.monitor={self.trainer.monitor}",
        )
        _require(
            family not in ("jepa", "tdmpc")
            or (self.variant.relevant_weight, self.variant.irrelevant_weight) == (1.0, 1.0),
            f"variant={self.variant.name} weights state dimensions, and model.family {family} has "
            "no state loss to weight (it predicts in latent space): use model=latent_recon, "
            "or a variant that weights events or rollouts",
        )
        obs_shape(worlds.get(self.world), obs, self.obs.pixels_per_cell)


#: Name of the schema node in Hydra's ConfigStore (first entry of ``config.yaml``'s defaults).
SCHEMA_NAME = "gridplan_schema"
ConfigStore.instance().store(name=SCHEMA_NAME, node=Config)


def schema() -> DictConfig:
    """The structured default config (unknown keys rejected; group names missing)."""
    return OmegaConf.structured(Config)


def _valid_keys(dotted: str) -> str:
    """``"; valid keys of <parent>: ..."`` for a dotted key the schema does not have."""
    parent = dotted.rpartition(".")[0]
    node = OmegaConf.select(schema(), parent) if parent else schema()
    if not isinstance(node, DictConfig):
        return ""
    return f"; valid keys of {parent or 'the config'}: {', '.join(str(k) for k in node)}"


def _extra_keys(cfg: DictConfig, kind: type, where: str = "") -> list[str]:
    """Dotted keys of ``cfg`` that are no field of the dataclass ``kind`` (Hydra adds them for
    ``+key=value``; ``OmegaConf.to_object`` would keep them as stray attributes)."""
    names = {f.name for f in fields(kind)}
    out = []
    for key in cfg:
        dotted = f"{where}{key}"
        if key not in names:
            out.append(dotted)
        elif not OmegaConf.is_missing(cfg, key) and isinstance(cfg[key], DictConfig):
            sub = OmegaConf.get_type(cfg[key])
            out += _extra_keys(cfg[key], sub, f"{dotted}.") if is_dataclass(sub) else []
    return out


def validate(cfg: DictConfig) -> DictConfig:
    """Check a composed config: every key in the schema, every value in range (each
    dataclass's ``__post_init__``, run by ``OmegaConf.to_object``); returns ``cfg``.

    Raises:
        ValueError: naming the first offending key and the valid keys, values or range.
    """
    extra = _extra_keys(cfg, Config)
    if extra:
        raise ValueError(f"unknown config key {extra[0]!r}{_valid_keys(extra[0])}")
    try:
        OmegaConf.to_object(cfg)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        where = f" at {key}" if key else ""
        raise ValueError(f"invalid config{where}: {_first_line(err)}") from err
    return cfg


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _compose_error(err: HydraException | OmegaConfBaseException) -> str:
    """Hydra's message of a failed composition, with the valid keys where a key is unknown
    (Hydra names the key only)."""
    # Hydra suggests ``+key=value`` for an unknown key; the schema refuses that too.
    lines = str(err).strip().splitlines()
    message = "\n".join(line for line in lines if not line.startswith("To append to your config"))
    cause = err.__cause__
    if isinstance(cause, OmegaConfBaseException):
        message += f"\n{_first_line(cause)}"
        full_key = getattr(cause, "full_key", None)
        if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and full_key:
            message += _valid_keys(str(full_key))
    return message


def compose_config(
    config_dir: Path | str,
    config_name: str,
    overrides: Sequence[str] = (),
    chosen_groups: Sequence[str] = (),
) -> DictConfig:
    """``config_name`` of ``config_dir`` composed by Hydra's Compose API with ``overrides``
    (its defaults list applied, Hydra's own node dropped), unvalidated.

    Args:
        chosen_groups: groups whose ``name`` key must be their composed choice
            (``check_choices``; ``compose`` passes ``CHOSEN_GROUPS``).

    Raises:
        ValueError: if the folder has no ``<config_name>.yaml``, Hydra cannot compose it
            (Hydra's message), or a group's name is not its choice.
    """
    config_dir = Path(config_dir).resolve()
    if not (config_dir / f"{config_name}.yaml").is_file():
        raise ValueError(f"no {config_name}.yaml in config folder {config_dir}")
    try:
        with global_hydra_aside(), hydra_initialized(config_dir, job_name="train"):
            cfg = hydra_compose(config_name, list(overrides), return_hydra_config=True)
            loader = GlobalHydra.instance().config_loader()
            options = {
                group: loader.get_group_options(
                    group, config_name=config_name, overrides=list(overrides)
                )
                for group in chosen_groups
            }
    except (HydraException, OmegaConfBaseException) as err:
        raise ValueError(_compose_error(err)) from err
    check_choices(cfg, cfg.hydra.runtime.choices, options)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


#: Config groups whose choice's file sets ``<group>.name`` (``experiment`` sets the top-level
#: ``experiment`` key).
CHOSEN_GROUPS = ("variant", "data", "model", "obs", "trainer", "experiment")


def check_choices(cfg: DictConfig, choices, options: dict[str, Sequence[str]]) -> None:
    """Check that each group's recorded name is the choice Hydra composed.

    ``variant.name=rel_only`` alone would keep the uniform weights under a ``rel_only`` folder
    name, and ``variant.name=bogus`` would train a uniform run named ``bogus``: a name is set by
    the chosen group file, never by itself.

    Args:
        cfg: the composed config.
        choices: Hydra's ``hydra.runtime.choices`` (group -> chosen option or None).
        options: per group to check, the options on the search path.

    Raises:
        ValueError: naming the key, the group's choice and the valid choices.
    """
    for group in options:
        chosen = choices.get(group)
        node, leaf = (cfg, group) if group == "experiment" else (cfg[group], "name")
        key = group if group == "experiment" else f"{group}.name"
        if OmegaConf.is_missing(node, leaf):
            continue  # validate names the missing value
        value = node[leaf]
        if value == chosen or (group == "experiment" and value is None):
            continue
        valid = ", ".join(options.get(group, ())) or "none found"
        pick = f"{group}=NAME" + (" (or experiment=null)" if group == "experiment" else "")
        raise ValueError(
            f"{key}={value!r} does not match the chosen {group} {chosen!r}: {key} is set by "
            f"the chosen file, pick one with {pick}; valid {group} choices: {valid}"
        )


def hydra_config_path(config_dir: Path | str) -> str:
    """Hydra's name of a config folder: ``pkg://gridplan.conf.<sub>`` for a folder shipped
    in ``CONFIG_PACKAGE`` (found through the package, from any working folder), else the
    folder's absolute path (a user's own)."""
    config_dir = Path(config_dir).resolve()
    if config_dir == CONFIGS_ROOT or CONFIGS_ROOT in config_dir.parents:
        parts = config_dir.relative_to(CONFIGS_ROOT).parts
        return "pkg://" + ".".join((CONFIG_PACKAGE, *parts))
    return str(config_dir)


def hydra_initialized(config_dir: Path | str, job_name: str | None = None):
    """Hydra's Compose API initialized on ``config_dir`` (``hydra_config_path``): the
    package's config module for a shipped folder, the folder itself otherwise."""
    path = hydra_config_path(config_dir)
    named = {} if job_name is None else {"job_name": job_name}
    if path.startswith("pkg://"):
        return initialize_config_module(path.removeprefix("pkg://"), version_base="1.3", **named)
    return initialize_config_dir(path, version_base="1.3", **named)


@contextlib.contextmanager
def global_hydra_aside() -> Iterator[None]:
    """Set a running Hydra app's global state (its ``GlobalHydra`` and job config) aside for
    the block and give it back after: the Compose API and a launched multirun each need the
    global Hydra to themselves, and may run inside ``python -m train``'s own app."""
    held = GlobalHydra.instance().hydra, HydraConfig.instance().cfg
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        GlobalHydra.instance().clear()
        if held[0] is not None:
            GlobalHydra.instance().initialize(held[0])
        HydraConfig.instance().cfg = held[1]


def compose(
    overrides: Sequence[str] = (),
    config_dir: Path | str | None = None,
    config_name: str = "config",
) -> DictConfig:
    """Compose and validate one run's config with Hydra's Compose API.

    Args:
        overrides: ``group=choice`` selections (``variant=rel_only``, ``data=12k``,
            ``experiment=NAME``) and dotted ``key=value`` overrides (``data.policy=random``,
            ``model.hidden=[128,128]``), in Hydra's override grammar; ``hydra.searchpath``
            adds config folders. No sweeps (Hydra's multirun runs them).
        config_dir: folder with the primary config and the group folders (default:
            ``DEFAULT_CONFIG_DIR``, the packaged ``configs/train/``).
        config_name: the primary config's name in ``config_dir``.

    Returns:
        A structured ``DictConfig`` following ``Config`` (interpolations unresolved).

    Raises:
        ValueError: on an unknown group choice or key (Hydra's message, with the valid
            keys), a group's ``name`` that is not its choice (``check_choices``), a value of the
            wrong type, a sweep, or a value that fails ``validate``.
    """
    cfg = compose_config(config_dir or DEFAULT_CONFIG_DIR, config_name, overrides, CHOSEN_GROUPS)
    return validate(cfg)


def run_name(cfg: DictConfig) -> str:
    """Folder name of a run: ``cfg.name`` or ``<variant>-<policy>-<budget>-seed<seed>``,
    prefixed ``<family>-<obs>-`` for a latent family (``jepa-pixels-uniform-...``) and
    ``<world>-`` outside the default world."""
    if cfg.name:
        return str(cfg.name)
    n = parse_budget(cfg.data.budget)
    budget = f"{n // 1000}k" if n % 1000 == 0 else str(n)
    prefix = worlds.get(cfg.world).file_prefix
    family = cfg.model.get("family", "mlp")
    if family != "mlp":
        prefix += f"{family}-{cfg.obs.name}-"
    return f"{prefix}{cfg.variant.name}-{cfg.data.policy}-{budget}-seed{cfg.seed}"


def to_yaml(cfg: DictConfig) -> str:
    """The resolved config as YAML text."""
    return OmegaConf.to_yaml(cfg, resolve=True)


def config_task(config) -> tasks.Task:
    """The task a run config trains for: ``data.task`` on ``world`` (a config saved before
    worlds has no ``world`` and is the default world's).

    Raises:
        ValueError: on an unknown task or world.
    """
    return tasks.get(config["data"]["task"], world=config.get("world", "default"))
