"""Planner-aware relevance: Eq. 1 with the value the planner itself judges states by (paper
§4.1 Eq. 1; the paper's limitation that its exact-V* weights "may weight errors differently"
from another planner's).

The paper's graded weights are the perturbation saliency of the exact V*
(``gridplan.core.relevance.relevance_weights``). A planner that ends its imagined rollouts with
another value cares about other dims: ``planner_value`` is the value a planner's choices
depend on, by its terminal value (``gridplan.planning.learned_value``):

* ``exact``: V* (the saliency is the graded weights);
* ``learned``: the learned value itself, which may read any dim (the fitted value of
  ``gridplan.metrics.relevance_estimation`` reads all 12);
* ``none``: the depth-limited optimal return ``V_H(s) = max_{a_0..a_{H-1}} sum_t gamma^t r``
  under the true dynamics (the no-heuristic search's value with the oracle; ``H`` the
  planner's depth or horizon).

``planner_weights`` is Eq. 1 on that value over the optimal policy's states (the graded
weights' distribution ``rho``), and ``planner_drpe`` the DRPE of a model's rollout errors
under those weights (``gridplan.metrics.prediction.drpe``).
"""

from __future__ import annotations

import torch

from gridplan.core import dynamics
from gridplan.core.readings import PROJECT
from gridplan.core.relevance import optimal_state_distribution, relevance_weights
from gridplan.core.tasks import Task
from gridplan.core.values import perturbation_saliency
from gridplan.evaluation.planner_choice import PlannerChoice
from gridplan.metrics.prediction import drpe
from gridplan.models.noise import OracleModel
from gridplan.planning.learned_value import ZeroValue
from gridplan.planning.value_search import ValueSearchPlanner

#: The oracle behind the depth-limited return: distractors at their expected positions, so
#: the value of a state is a function of the state (no draws).
EXPECTED = PROJECT.replace("project-expected-distractors", distractors="expected")


def value_kind(choice: PlannerChoice) -> str:
    """The terminal value kind of ``choice``: ``exact``, ``learned`` or ``none``."""
    if choice.name == "search":
        return "exact"
    if choice.name == "search-learned-v":
        return "learned"
    if choice.name == "search-no-heuristic":
        return "none"
    return str(choice.settings["value"])


def planner_value(choice: PlannerChoice, task: Task, depth: int, device="cpu"):
    """The value ``(N, S) -> (N,)`` the planner judges states by (module docstring).

    Raises:
        ValueError: as the planner's constructor.
    """
    kind = value_kind(choice)
    if kind == "exact":
        return dynamics.value_table(task, device).lookup
    if kind == "learned":
        return choice.learned.lookup
    horizon = int(choice.settings.get("horizon", depth))
    search = ValueSearchPlanner(
        OracleModel(EXPECTED, task.world), horizon, task, ZeroValue(task, device), device=device
    )

    def depth_limited(state: torch.Tensor) -> torch.Tensor:
        return search.action_values(state, torch.Generator(device=state.device)).amax(dim=1)

    return depth_limited


#: Rows of the optimal policy's states that the default planner-aware saliency averages over.
SALIENCY_STATES = 1024


def saliency_states(task: Task, n: int = SALIENCY_STATES) -> torch.Tensor:
    """``n`` evenly spaced rows of ``optimal_state_distribution(task)`` (all if fewer)."""
    states = optimal_state_distribution(task)
    step = max(1, states.shape[0] // n)
    return states[::step][:n]


def planner_weights(
    choice: PlannerChoice,
    task: Task,
    depth: int,
    states: torch.Tensor | None = None,
    device="cpu",
) -> torch.Tensor:
    """Eq. 1 saliency of ``planner_value`` over ``states``, normalized to sum 1: ``(S,)``
    float32. Default states: for the exact V*, the graded weights themselves
    (``relevance_weights``, over all the optimal policy's states); otherwise
    ``saliency_states`` (an even subsample of them, so a depth-limited search per perturbed
    state stays cheap).

    The exact and depth-limited values read the relevant dims only, so only those are
    perturbed (the rest get exactly 0); a learned value has every dim perturbed.

    Raises:
        ValueError: if no perturbation changes the value (a no-heuristic planner whose horizon
            reaches no goal from any of the states), or as ``perturbation_saliency``.
    """
    kind = value_kind(choice)
    if states is None:
        if kind == "exact":
            return relevance_weights(task)
        states = saliency_states(task).to(device)
    dims = None if kind == "learned" else task.relevant_dims
    fn = planner_value(choice, task, depth, device)
    return perturbation_saliency(fn, states, world=task.world, dims=dims)


def planner_drpe(sq: torch.Tensor, weights: torch.Tensor) -> float:
    """DRPE of rollout squared errors ``sq`` (``gridplan.metrics.prediction.squared_errors``)
    under planner-aware ``weights``."""
    return drpe(sq, weights)
