"""Training presets of the learned-model groups (``docs/PREREGISTERED.md``, Rule 2).

A preset is a ``configs/train/experiment/<experiment>.yaml`` file (``python -m train
experiment=<experiment>`` composes it) whose values every training run of the learned groups
takes: ``apply`` appends them, as dotted ``key=value`` overrides, to the ``train_overrides``
of e3, e4 and e7 (``gridplan.experiments.learned_runs.run_config`` composes them last, so they
win over a group's own). ``scripts/reproduce.py --preset NAME`` runs those groups under it
into ``<out>/<NAME>/<group>`` (``gridplan.experiments.runner.preset_folders``), never over the
default's results; the other groups are the default's.

- ``paper-error-scale``: the training budget (``trainer.max_steps``) that brings the
  uniform-20k model's ``E_tot`` to the paper's Table 3 value, chosen by Rule 2's stated
  procedure (``scripts/error_scale_preset.py``; its table: ``docs/error_scale_selection.md``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from gridplan.training.config import DEFAULT_CONFIG_DIR

#: The groups whose models a preset trains.
LEARNED_GROUPS = ("e3", "e4", "e7")


def _dotted(node: DictConfig, prefix: str = "") -> list[str]:
    """``key=value`` overrides of every leaf of ``node``, in file order."""
    out = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, DictConfig):
            out += _dotted(value, f"{dotted}.")
        else:
            out.append(f"{dotted}={'null' if value is None else value}")
    return out


@dataclass(frozen=True)
class Preset:
    """A training preset.

    Attributes:
        name: its name on the command line and its results folder, e.g.
            ``"paper-error-scale"``.
        experiment: the ``configs/train/experiment`` file holding its values.
        rule: where the rule that chose its values is written.
        selection: the repository file holding the table of the procedure that chose them,
            or None.
        groups: the groups it applies to.
    """

    name: str
    experiment: str
    rule: str
    selection: str | None = None
    groups: tuple[str, ...] = LEARNED_GROUPS

    def overrides(self) -> tuple[str, ...]:
        """The file's values as dotted overrides (its ``experiment`` key and defaults list
        left out: they name the file, and group choices would replace a row's own).

        Raises:
            ValueError: if the file is missing or sets no value.
        """
        path = DEFAULT_CONFIG_DIR / "experiment" / f"{self.experiment}.yaml"
        if not path.is_file():
            raise ValueError(f"preset {self.name!r}: no config file {path}")
        node = OmegaConf.load(path)
        values = {k: v for k, v in node.items() if k not in ("experiment", "defaults")}
        out = tuple(_dotted(OmegaConf.create(values)))
        if not out:
            raise ValueError(f"preset {self.name!r}: {path} sets no value")
        return out

    def apply(self, group: str, config: Any) -> Any:
        """``config`` of ``group`` with the preset's overrides after its ``train_overrides``
        (unchanged for a group the preset does not apply to)."""
        if group not in self.groups:
            return config
        return dataclasses.replace(
            config, train_overrides=(*config.train_overrides, *self.overrides())
        )


PAPER_ERROR_SCALE = Preset(
    "paper-error-scale",
    "paper_error_scale",
    "docs/PREREGISTERED.md, Rule 2 (pre-registered): the learned-error-scale preset",
    "docs/error_scale_selection.md",
)
PRESETS: dict[str, Preset] = {p.name: p for p in (PAPER_ERROR_SCALE,)}


def get(name: str) -> Preset:
    """The preset called ``name``.

    Raises:
        ValueError: on an unknown name, listing the presets.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return PRESETS[name]
