"""L4 interventional fidelity: does the model respond to *chosen* actions like the world?

On a branch set ``Q`` of true states (``gridplan.evaluation.branch``), with ``Phi`` the task's
relevant projection and errors in normalized units averaged over its dims:

- IPE (interventional prediction error): from each state of ``Q`` an ``H``-step uniform random
  action sequence is executed open loop in the true environment and inside the model (fed its
  own predictions); ``IPE = mean_{Q, t <= H} |Phi(s_hat_t) - Phi(s_t)|^2``. Reported over all of
  ``Q`` and per part (behaviour states, oracle-visited states), beside the teacher-forced error
  of the same behaviour states under their *logged* actions (the binary DRPE of the task's
  relevant set, on the same starts).
- Action-effect consistency: from each state, one step under every action;
  for every pair ``a < a'`` the predicted difference ``Phi(s_hat_a) - Phi(s_hat_a')`` against the
  true ``Phi(s_a) - Phi(s_a')``; ``mean |.|^2`` over the ``A (A - 1) / 2`` pairs (6 in the
  paper's world, 21 over MiniGrid's seven actions) and ``Q``.

The one-step branches also give the reward-prediction error of L5
(``gridplan.evaluation.outcome``). Definitions: "How Should World Models Be Evaluated for Embodied
Decision-Making?" (arXiv 2606.15032), §5 (interventional prediction error, action-effect
consistency).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import torch

from gridplan.core import dynamics
from gridplan.core.tasks import Task
from gridplan.evaluation.common import NON_NEGATIVE, Estimate, predicted_outcome, relevant_sq_error
from gridplan.models.capabilities import capabilities_of

UncertaintyFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@torch.no_grad()
def imagined_rollout(
    model,
    start: torch.Tensor,
    actions: torch.Tensor,
    generator: torch.Generator,
    uncertainty: UncertaintyFn | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Open-loop rollout inside the model.

    Args:
        model: a world model (``start_rollout`` is called once first, if it has one).
        start: ``(N, S)`` true start states.
        actions: ``(N, H)`` long actions.
        generator: the model's randomness.
        uncertainty: optional ``(state, action) -> (N,)`` score of each imagined step's input.

    Returns:
        ``(pred, u)``: ``(N, H, S)`` predictions ``s_hat_1 .. s_hat_H`` and ``(N, H)``
        uncertainty scores (``None`` without ``uncertainty``).
    """
    n, h = actions.shape
    if capabilities_of(model).rollout_start:
        model.start_rollout(n, generator)
    state, preds, scores = start, [], []
    for t in range(h):
        if uncertainty is not None:
            scores.append(uncertainty(state, actions[:, t]))
        state = model.predict(state, actions[:, t], generator)
        preds.append(state)
    u = torch.stack(scores, dim=1) if uncertainty is not None else None
    return torch.stack(preds, dim=1), u


@torch.no_grad()
def true_rollout(
    start: torch.Tensor, actions: torch.Tensor, task: Task, generator: torch.Generator
) -> torch.Tensor:
    """``(N, H, S)`` true states under ``(N, H)`` actions from ``(N, S)`` ``start`` (states
    after termination are those the transition gives; the relevant dims stay exact)."""
    state, out = start, []
    for t in range(actions.shape[1]):
        state = dynamics.transition(task, state, actions[:, t], generator)[0]
        out.append(state)
    return torch.stack(out, dim=1)


@dataclass
class Branches:
    """One step from each of ``N`` states under each of the ``A = task.world.n_actions``
    actions, action-major.

    Attributes:
        pred: ``(A, N, S)`` the model's next states.
        true: ``(A, N, S)`` the true next states.
        reward_model: ``(A, N)`` reward inside the model (``gridplan.evaluation.common``).
        reward_true: ``(A, N)`` true reward.
    """

    pred: torch.Tensor
    true: torch.Tensor
    reward_model: torch.Tensor
    reward_true: torch.Tensor


@torch.no_grad()
def branch_predictions(
    model,
    states: torch.Tensor,
    task: Task,
    model_generator: torch.Generator,
    env_generator: torch.Generator,
) -> Branches:
    """The model's and the environment's one-step branches from ``(N, S)`` true ``states``,
    all ``A N`` rows in one ``predict`` call."""
    n, n_actions = states.shape[0], task.world.n_actions
    rows = states.repeat(n_actions, 1)
    action = torch.arange(n_actions, device=states.device).repeat_interleave(n)
    if capabilities_of(model).rollout_start:
        model.start_rollout(rows.shape[0], model_generator)
    pred = model.predict(rows, action, model_generator)
    true, reward_true, _, _ = dynamics.transition(task, rows, action, env_generator)
    reward_model, _, _ = predicted_outcome(model, rows, action, pred, task)
    shape = (n_actions, n, states.shape[1])
    return Branches(
        pred=pred.view(shape),
        true=true.view(shape),
        reward_model=reward_model.view(n_actions, n).float(),
        reward_true=reward_true.view(n_actions, n).float(),
    )


def action_effect_error(branches: Branches, task: Task) -> torch.Tensor:
    """``(N,)`` action-effect error per state: the mean over the ``A (A - 1) / 2`` action pairs
    of the relevant-projection squared error of the predicted effect difference."""
    errors = [
        relevant_sq_error(
            branches.pred[a] - branches.pred[b], branches.true[a] - branches.true[b], task
        )
        for a, b in combinations(range(branches.pred.shape[0]), 2)
    ]
    return torch.stack(errors).mean(dim=0)


@dataclass(frozen=True)
class InterventionalFidelity:
    """L4 fidelity numbers (module docstring); ``per_row`` holds each ``Q`` row's IPE."""

    ipe: Estimate
    ipe_behaviour: Estimate
    ipe_shifted: Estimate
    teacher_forced: Estimate
    action_effect: Estimate
    horizon: int
    per_row: torch.Tensor

    def to_dict(self) -> dict:
        return {
            "ipe": self.ipe.to_dict(),
            "ipe_behaviour": self.ipe_behaviour.to_dict(),
            "ipe_shifted": self.ipe_shifted.to_dict(),
            "teacher_forced": self.teacher_forced.to_dict(),
            "action_effect": self.action_effect.to_dict(),
            "horizon": self.horizon,
        }


def interventional_fidelity(
    pred: torch.Tensor,
    true: torch.Tensor,
    behaviour: torch.Tensor,
    teacher_pred: torch.Tensor,
    teacher_true: torch.Tensor,
    branches: Branches,
    task: Task,
) -> InterventionalFidelity:
    """Summaries of L4 fidelity from rollouts already made.

    Args:
        pred: ``(N, H, S)`` model rollouts of ``Q`` under random actions.
        true: ``(N, H, S)`` true rollouts under the same actions.
        behaviour: ``(N,)`` bool, the row is a held-out behaviour state (else oracle-visited).
        teacher_pred: ``(n_b, H, S)`` model rollouts of the behaviour starts under their
            logged actions; ``teacher_true`` the logged true states.
        branches: one-step branches of ``Q``.
        task: the relevant projection.

    Raises:
        ValueError: if either part of ``Q`` is empty.
    """
    per_row = relevant_sq_error(pred, true, task).mean(dim=1)
    if not behaviour.any() or behaviour.all():
        raise ValueError("the branch set needs both behaviour and oracle-visited states")
    return InterventionalFidelity(
        ipe=Estimate.of(per_row, NON_NEGATIVE),
        ipe_behaviour=Estimate.of(per_row[behaviour], NON_NEGATIVE),
        ipe_shifted=Estimate.of(per_row[~behaviour], NON_NEGATIVE),
        teacher_forced=Estimate.of(
            relevant_sq_error(teacher_pred, teacher_true, task).mean(dim=1), NON_NEGATIVE
        ),
        action_effect=Estimate.of(action_effect_error(branches, task), NON_NEGATIVE),
        horizon=int(pred.shape[1]),
        per_row=per_row,
    )
