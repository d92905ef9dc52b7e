"""The planner an evaluation measures with: its name, settings and learned value, and how a
learned value is fitted (paper §3 "Planner"; appendix A "Relevance estimation" for the fit).

``PlannerChoice`` is what ``python -m eval --planner NAME --planner-setting KEY=VALUE``
builds and what the report records (``to_dict``). The default, ``search``, is the paper's
full-width search with exact V* and changes nothing: every level measures exactly as
without a choice. Another planner's closed loops, decisions and XGap are measured with that
planner (``gridplan.evaluation.levels``; ``gridplan.evaluation.decisions.decide_planner``).

A learned value (``search-learned-v``, or ``value=learned``) is fitted by fitted value
iteration through the evaluated model on logged states
(``gridplan.metrics.relevance_estimation.fitted_value_iteration``: the E4 machinery), and
bound to the task it was fitted for (``gridplan.planning.learned_value.LearnedValue``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from gridplan.core.tasks import Task
from gridplan.metrics.relevance_estimation import FVIConfig, fitted_value_iteration
from gridplan.planning.learned_value import LearnedValue
from gridplan.planning.planners import (
    check_planner,
    make_planner,
    needs_learned_value,
    planner_settings,
)


def fit_learned_value(
    model,
    states: torch.Tensor,
    task: Task,
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
    """A planner by name with complete settings (``gridplan.planning.planners``).

    Build one with ``PlannerChoice.of``.

    Attributes:
        name: one of ``gridplan.planning.planners.PLANNERS``.
        settings: its complete, validated settings (``planner_settings``).
        learned: the learned value, when the planner uses one.
    """

    name: str = "search"
    settings: dict = field(default_factory=dict)
    learned: LearnedValue | None = None

    @classmethod
    def of(
        cls,
        name: str,
        depth: int,
        settings: dict | None = None,
        learned: LearnedValue | None = None,
    ) -> PlannerChoice:
        """Validate ``name`` and ``settings`` at ``depth``.

        Raises:
            ValueError: as ``planner_settings``; if the planner needs a learned value and
                none is given.
        """
        full = planner_settings(check_planner(name), depth, settings)
        if needs_learned_value(name, full) and learned is None:
            raise ValueError(f"planner {name} with these settings needs a learned value")
        return cls(name, full, learned if needs_learned_value(name, full) else None)

    @property
    def is_search(self) -> bool:
        """Whether this is the paper's planner (the exact-V* full-width search)."""
        return self.name == "search"

    def build(
        self,
        model,
        task: Task,
        depth: int,
        device: torch.device | str = "cpu",
        ties: str | None = None,
    ):
        """The planner for ``model`` (``gridplan.planning.planners.make_planner``); ``ties``
        is the full-width searches' tie rule (None: the model's reading's).

        Raises:
            ValueError: as ``make_planner`` (a learned value of another world or task).
        """
        return make_planner(
            self.name, model, task, depth, self.settings, self.learned, device, ties
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
