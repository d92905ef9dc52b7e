"""The planner an evaluation measures with: its name, settings and learned value, and how a
learned value is fitted (paper §3 "Planner"; appendix A "Relevance estimation" for the fit).

``PlannerChoice`` is a spec's planner (``gridplan.evaluation.spec.PlannerSpec``: what
``python -m eval --planner NAME --planner-setting KEY=VALUE`` sets) resolved at the depth, with
its learned value when it needs one; the report records it (``to_dict``). The default,
``search``, is the paper's full-width search with exact V*. Another planner's closed loops,
decisions and XGap are measured with that
planner (``gridplan.evaluation.levels``; ``gridplan.evaluation.decisions.decide_planner``).

A learned value (``search-learned-v``, or ``value=learned``) is fitted by fitted value
iteration through the evaluated model on logged states
(``gridplan.metrics.relevance_estimation.fitted_value_iteration``: the E4 machinery, backing
up over the task's actions), and bound to the task it was fitted for
(``gridplan.planning.learned_value.LearnedValue``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from gridplan.core.tasks import TaskKind
from gridplan.evaluation.spec import PlannerSpec
from gridplan.metrics.relevance_estimation import FVIConfig, fitted_value_iteration
from gridplan.planning.learned_value import LearnedValue
from gridplan.planning.planners import make_planner, needs_learned_value, planner_settings


def fit_learned_value(
    model,
    states: torch.Tensor,
    task: TaskKind,
    config: FVIConfig | None = None,
    generator: torch.Generator | None = None,
) -> LearnedValue:
    """Fitted value iteration through ``model`` on ``states``, as a planner's terminal value.

    Args:
        model: a one-setting world model (the one the planner plans with).
        states: ``(N, S)`` logged states in ``[0, 1]``.
        task: reward and discount of the fit; the value is bound to it.
        config: ``FVIConfig`` (default settings when None).
        generator: randomness of a stochastic model.

    Raises:
        ValueError: as ``fitted_value_iteration`` (malformed states, a multi-setting model).
    """
    fitted = fitted_value_iteration(model, states, task, config, generator)
    return LearnedValue(fitted, task, states.device)


@dataclass(frozen=True)
class PlannerChoice:
    """The planner of a spec, resolved at a depth: its complete settings and, when it uses
    one, its fitted learned value. Build one with ``PlannerChoice.of``.

    Attributes:
        spec: the spec's planner (name, settings given, tie rule, tree).
        settings: its complete, validated settings at the depth (``planner_settings``).
        learned: the learned value, when the planner uses one.
    """

    spec: PlannerSpec
    settings: dict = field(default_factory=dict)
    learned: LearnedValue | None = None

    @classmethod
    def of(
        cls, spec: PlannerSpec, depth: int, learned: LearnedValue | None = None
    ) -> PlannerChoice:
        """Complete ``spec``'s settings at ``depth``.

        Raises:
            ValueError: as ``planner_settings``; if the planner needs a learned value and
                none is given.
        """
        full = planner_settings(spec.name, depth, spec.settings)
        needed = needs_learned_value(spec.name, full)
        if needed and learned is None:
            raise ValueError(f"planner {spec.name} with these settings needs a learned value")
        return cls(spec, full, learned if needed else None)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_search(self) -> bool:
        """Whether this is the paper's planner (the exact-V* full-width search)."""
        return self.spec.is_search

    def build(self, model, task: TaskKind, depth: int, device: torch.device | str = "cpu"):
        """The planner for ``model`` (``gridplan.planning.planners.make_planner``) with the
        spec's tie rule and tree.

        Raises:
            ValueError: as ``make_planner`` (a learned value of another world or task).
        """
        return make_planner(
            self.name, model, task, depth, self.settings, self.learned, device,
            self.spec.ties, self.spec.tree_for(model),
        )

    def to_dict(self) -> dict:
        """JSON-ready record: ``name``, ``settings`` and, for a learned value, its task,
        world and FVI settings."""
        out: dict = {"name": self.name, "settings": dict(self.settings)}
        if self.learned is not None:
            config = getattr(self.learned.fn, "config", None)
            out["learned_value"] = {
                "task": self.learned.task.name,
                "world": self.learned.world.name,
                "fvi": asdict(config) if config is not None else None,
            }
        return out
