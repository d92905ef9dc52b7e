"""Typed records of the experiment groups, and the model-record files groups exchange.

Every record is a frozen dataclass (built with keywords) whose ``to_dict()`` is its row: one
key per field, in field order (the CSV column order), except fields declared with
``columns(...)``: a mapping or a sequence written as one column per item (the 12
``err_<dim>`` profile columns, the ``goal`` / ``hazard`` / ``timeout`` outcome counts).
``from_dict`` reads such a row back.

Model records, the exchange format between groups (paper §5.2 pools models of several
groups): ``write_models`` writes them as ``models.json`` + ``models.csv`` into the producing
group's folder, ``read_models`` reads them back from a finished group's folder. Every model
record has the fields ``MODEL_FIELDS``: name, family (``"controlled"`` for the noise grid,
``"learned"`` for the seven learned variants that e2 pools, ``"learned_extra"`` for the
random-data model), ``E_tot``, ``DRPE_graded``, ``DRPE_binary``, ``success``, ``success_se``,
``n_episodes``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from gridplan.core.world import DEFAULT as PAPER_WORLD
from gridplan.planning.closed_loop import OUTCOMES

if TYPE_CHECKING:
    from gridplan.experiments.runner import GroupContext
    from gridplan.metrics.stats import EpisodeSummary

MODELS_FILE = "models.json"
MODEL_FIELDS = (
    "name",
    "family",
    "E_tot",
    "DRPE_graded",
    "DRPE_binary",
    "success",
    "success_se",
    "n_episodes",
)


def columns(template: str, names: Sequence[str] | None = None, mapping: bool = True):
    """A dataclass field written as one column per item, named ``template.format(item)``.

    Args:
        template: column name pattern with one ``{}``, e.g. ``"err_{}"``.
        names: the items, in column order; None: a mapping's own keys (read back as every
            column that matches the pattern).
        mapping: the field holds a ``{item: value}`` dict; else a sequence zipped with
            ``names``.
    """
    return field(metadata={"columns": (template, names, mapping)})


#: The per-dimension error profile as ``err_<dim>`` columns.
PROFILE_COLUMNS = ("err_{}", PAPER_WORLD.dim_names, False)
#: Outcome counts as ``goal``, ``hazard``, ``timeout`` columns.
OUTCOME_COLUMNS = ("{}", OUTCOMES, True)


def profile_field():
    """The ``(12,)`` per-dimension error profile, as 12 ``err_<dim>`` columns."""
    return columns(*PROFILE_COLUMNS)


def outcomes_field():
    """Episodes ending at the goal, on the hazard and by timeout, as 3 columns."""
    return columns(*OUTCOME_COLUMNS)


class Record:
    """Base of the typed records (see the module docstring)."""

    def to_dict(self) -> dict[str, Any]:
        """The row: field name -> value, ``columns`` fields spread over their columns."""
        row: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            spec = f.metadata.get("columns")
            if spec is None:
                row[f.name] = value
                continue
            template, names, mapping = spec
            items = value.items() if mapping else zip(names, value, strict=True)
            row.update((template.format(k), v) for k, v in items)
        return row

    @classmethod
    def header(cls) -> list[str]:
        """The column names, in order (for a CSV that may have no rows).

        Raises:
            TypeError: if a ``columns`` field takes its column names from its values.
        """
        out = []
        for f in dataclasses.fields(cls):
            spec = f.metadata.get("columns")
            if spec is None:
                out.append(f.name)
            elif spec[1] is None:
                raise TypeError(f"{cls.__name__}.{f.name} has no fixed columns")
            else:
                out += [spec[0].format(n) for n in spec[1]]
        return out

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> Self:
        """The record of a row written by ``to_dict``.

        Raises:
            ValueError: naming the missing columns.
        """
        values, missing = {}, []
        for f in dataclasses.fields(cls):
            spec = f.metadata.get("columns")
            if spec is None:
                if f.name in row:
                    values[f.name] = row[f.name]
                else:
                    missing.append(f.name)
                continue
            template, names, mapping = spec
            if names is None:
                prefix, _, suffix = template.partition("{}")
                values[f.name] = {
                    k[len(prefix) : len(k) - len(suffix)]: v
                    for k, v in row.items()
                    if k.startswith(prefix) and k.endswith(suffix)
                }
                continue
            keys = [template.format(n) for n in names]
            missing += [k for k in keys if k not in row]
            got = [row.get(k) for k in keys]
            values[f.name] = dict(zip(names, got, strict=True)) if mapping else tuple(got)
        if missing:
            raise ValueError(f"{cls.__name__} row lacks {missing}")
        return cls(**values)


def model_name(sigma_r: float, sigma_i: float) -> str:
    """The paper's name of a controlled model, ``M(0.35, 0.1)``."""
    return f"M({float(sigma_r):g}, {float(sigma_i):g})"


def noise_kind(sigma: tuple[float, float]) -> str:
    """``"oracle"`` for ``M(0, 0)``, else ``"relevant"`` when ``σR > 0``, else
    ``"irrelevant"``."""
    if sigma == (0.0, 0.0):
        return "oracle"
    return "relevant" if sigma[0] > 0 else "irrelevant"


@dataclass(frozen=True, kw_only=True)
class ControlledRecord(Record):
    """One model ``M(σR, σI)`` of the controlled grid (E1; pooled by e2, e4, e6).

    ``E_tot``, DRPE, VPE and ``profile`` on the held-out windows (``gridplan.metrics.prediction``);
    success, its SE, outcomes and ``per_seed`` success from the closed loop.
    """

    name: str
    family: str
    sigma_r: float
    sigma_i: float
    E_tot: float
    DRPE_graded: float
    DRPE_binary: float
    VPE: float
    success: float
    success_se: float
    n_episodes: int
    outcomes: dict[str, int] = outcomes_field()
    per_seed: tuple[float, ...]
    profile: tuple[float, ...] = profile_field()

    @classmethod
    def measured(cls, sigma: tuple[float, float], metrics, summary: EpisodeSummary) -> Self:
        """The record of setting ``sigma = (σR, σI)`` from its ``PredictionMetrics`` and its
        closed-loop ``EpisodeSummary``."""
        sr, si = sigma
        return cls(
            name=model_name(sr, si),
            family="controlled",
            sigma_r=sr,
            sigma_i=si,
            E_tot=metrics.E_tot,
            DRPE_graded=metrics.DRPE["graded"],
            DRPE_binary=metrics.DRPE["binary"],
            VPE=metrics.VPE,
            success=summary.success,
            success_se=summary.success_se,
            n_episodes=summary.n_episodes,
            outcomes=summary.outcomes,
            per_seed=summary.per_seed,
            profile=tuple(metrics.profile.tolist()),
        )


@dataclass(frozen=True, kw_only=True)
class SweepRecord(Record):
    """One model of E2's relevance sweep (read back by e4): a ``ControlledRecord`` without
    VPE, per-seed success and profile."""

    name: str
    family: str
    sigma_r: float
    sigma_i: float
    E_tot: float
    DRPE_graded: float
    DRPE_binary: float
    success: float
    success_se: float
    n_episodes: int
    outcomes: dict[str, int] = outcomes_field()

    @classmethod
    def of(cls, record: ControlledRecord) -> Self:
        """The sweep fields of a controlled record."""
        return cls(**{f.name: getattr(record, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True, kw_only=True)
class LearnedRecord(Record):
    """One learned world model of Table 3 (E3; pooled by e2), aggregated over training seeds.

    Success is the mean of the seeds' success rates, ``success_se`` over those rates
    (``success_se_over == "seeds"``) or, with one seed, over its episodes; the prediction
    metrics, the event audit and the closed-loop milestones are means over the seeds' models.
    ``checkpoints``: one per seed, relative to the e3 folder.
    """

    name: str
    family: str
    key: str
    variant: str
    data: str
    policy: str
    E_tot: float
    E_tot_se: float | None
    DRPE_graded: float
    DRPE_binary: float
    VPE: float
    success: float
    success_se: float
    success_se_over: str
    n_seeds: int
    n_episodes: int
    per_seed: tuple[float, ...]
    outcomes: dict[str, int] = outcomes_field()
    picked_up_key: float
    opened_door: float
    carrying_at_pickup: float
    pickup_mse: float
    door_open_at_opening: float
    door_mse: float
    profile: tuple[float, ...] = profile_field()
    checkpoints: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TrainingRun(Record):
    """One training run of E3 (``runs.csv``): the trainer settings, timing, the best
    checkpoint's validation metrics and the training data's event counts (``data_<name>``)."""

    key: str
    name: str
    seed: int
    checkpoint: str
    epochs: int
    max_epochs: int
    patience: int
    monitor: str
    hidden: list[int]
    lr: float
    batch_size: int
    train_seconds: float
    wall_seconds: float
    val_E_tot: float
    val_DRPE_graded: float
    transitions: int
    data_events: dict[str, int] = columns("data_{}")


R = TypeVar("R", bound=Record)


def write_models(ctx: GroupContext, records: Sequence[Record]) -> Path:
    """Write model records as ``models.json`` and ``models.csv`` into the group folder."""
    ctx.write_csv("models.csv", records)
    return ctx.write_json(MODELS_FILE, {"models": list(records)})


def read_models(folder: Path, kind: type[R]) -> list[R]:
    """The model records of a finished group folder, as records of type ``kind``.

    Raises:
        ValueError: if ``models.json`` is missing or malformed, naming the record and the
            missing fields.
    """
    path = Path(folder) / MODELS_FILE
    if not path.is_file():
        raise ValueError(f"{path} not found: the group wrote no model records")
    try:
        rows = json.loads(path.read_text())["models"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a model-record file: {err}") from err
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(kind.from_dict(row))
        except (ValueError, TypeError, AttributeError) as err:
            raise ValueError(f"{path}: model record {i} ({row.get('name', '?')}): {err}") from err
    return out
