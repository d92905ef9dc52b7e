"""The full-width search with another terminal value at its leaves (paper §3 "Planner",
appendix D): a learned value (fitted value iteration, ``gridplan.planning.learned_value``)
or none (the depth-limited return only) in place of ``gamma^D V*``.

``ValueSearchPlanner`` is ``gridplan.planning.planner.Planner`` with a scorer factory that
builds the generic scorers (``gridplan.planning.registry.through_predict``: every prediction
through ``model.predict``) and gives them the chosen value: both read their terminal value
only through ``values.lookup`` (``gridplan.planning.scorers``, ``gridplan.planning.tree``), so
the search, its tie-breaks and its draws are the plain planner's. With the exact V* as the
"learned" value its decisions are the plain planner's (``tests/planning/test_planners.py``).
"""

from __future__ import annotations

import torch

from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, TaskKind
from gridplan.planning.learned_value import check_value
from gridplan.planning.planner import Planner, break_ties
from gridplan.planning.registry import through_predict
from gridplan.planning.scorers import DEFAULT_MAX_MEMORY, action_sequences
from gridplan.planning.sequences import Plan


def valued_factory(value):
    """A ``gridplan.planning.registry.ScorerFactory``: the generic scorer of the tree with
    ``value`` as its terminal value."""

    def build(model, task, depth, device, max_memory, max_rows, tree):
        scorer = through_predict(model, task, depth, device, max_memory, max_rows, tree)
        scorer.values = value
        return scorer

    return build


@torch.no_grad()
def full_width_plan(planner: Planner, root: torch.Tensor, generator: torch.Generator) -> Plan:
    """The full-width search's decision as a ``Plan``: the best leaf under the chosen first
    action, its action sequence and its score.

    Draws and tie rule as ``Planner.act``: the ``(B, A)`` tie-break uniforms first (``A =
    planner.n_actions``), then the
    model's noise, ties broken by ``planner.ties``, so ``plan(...).action`` equals ``act``
    under the same generator state.

    Raises:
        ValueError: as ``Planner.action_values``.
    """
    check_state(root, "root state", planner.task.world)
    b, a = root.shape[0], planner.n_actions
    tie = torch.rand(b, a, generator=generator, device=root.device)
    scores = root.new_empty(b, planner.n_leaves)
    for rows, part in planner.scorer.leaf_scores(root, generator):
        scores[rows] = part
    per_action = planner.n_leaves // a
    q = scores.view(b, a, per_action).amax(dim=2)
    action = break_ties(q, tie, planner.ties)
    rows = torch.arange(b, device=root.device)
    leaf = action * per_action + scores.view(b, a, per_action)[rows, action].argmax(1)
    sequences = action_sequences(planner.depth, root.device, a)
    return Plan(action=action, sequence=sequences[leaf], predicted=scores[rows, leaf])


class ValueSearchPlanner(Planner):
    """The full-width depth-``D`` search with ``value`` at its leaves (module docstring).

    Args:
        model, depth, task, max_memory, max_rows, device, tree, ties: as ``Planner``.
        value: the terminal value (``gridplan.planning.learned_value``: ``LearnedValue``,
            ``ZeroValue``, or a ``ValueTable``).
        name: the registry name it is reported under.

    Raises:
        ValueError: as ``Planner``, or if ``value`` was made for another world or task.
    """

    def __init__(
        self,
        model,
        depth: int,
        task: TaskKind = TASK_A,
        value=None,
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
        device: torch.device | str = "cpu",
        tree: str | None = None,
        name: str = "search-learned-v",
        ties: str | None = None,
    ) -> None:
        if value is None:
            raise ValueError("ValueSearchPlanner needs a terminal value")
        check_value(value, task)
        super().__init__(
            model, depth, task, max_memory, max_rows, device, tree, valued_factory(value), ties
        )
        self.value = value
        self.name = name

    def plan(self, root: torch.Tensor, generator: torch.Generator) -> Plan:
        """``full_width_plan`` of this planner."""
        return full_width_plan(self, root, generator)
