"""What the planner decides with a model, against the exact values: decision agreement and
decision regret (L4), and the exploitability gap XGap (L7).

From each true root state ``s`` the depth-``D`` planner scores every leaf (action sequence)
with the model (``leaf_scores``, through the leaf scorer the planner picks, ``Planner.scorer``),
takes the best leaf under each first action as that action's value, and picks the best first
action by the planner's tie rule (``ties``: ``"first"`` or ``"random"``, from tie-break
uniforms drawn before any model noise under both rules; as ``Planner.act``). The same leaves scored
with the oracle give each sequence's *true* return: true rewards along the true path plus
``gamma^D V*`` at its end (the relevant dynamics are deterministic, so the oracle's score is
the return of executing the sequence), and their best under each first action is exactly
``Q*(s, a)``. Then, per root:

- ``optimal``: ``Q*(s, chosen) >= max_a Q*(s, a) - TIE_TOLERANCE``; decision agreement is its
  mean;
- ``regret = max_a Q*(s, a) - Q*(s, chosen) = V*(s) - Q*(s, chosen)``; decision regret is its
  mean, a predictor of closed-loop success that needs no closed loop;
- ``xgap = predicted - achieved``: the model's score of the leaf it chose minus the true return
  of executing that sequence from ``s``. Positive: the model promised more than it delivers.

Definitions: "How Should World Models Be Evaluated for Embodied Decision-Making?"
(arXiv 2606.15032), §5 (decision agreement as action-level fidelity; exploitability gap).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from gridplan.core import dynamics
from gridplan.core.env import check_state
from gridplan.core.tasks import Task
from gridplan.evaluation.common import NON_NEGATIVE, RATE, Estimate
from gridplan.models.capabilities import capabilities_of
from gridplan.models.noise import OracleModel
from gridplan.planning.planner import TIE_TOLERANCE, Planner, break_ties, resolve_ties
from gridplan.planning.sequences import sequence_returns
from gridplan.planning.value_search import full_width_plan

#: A decision whose exploitability gap exceeds this (return units) counts as exploited.
XGAP_THRESHOLD = 0.1


@dataclass
class Decisions:
    """Per-root decisions of a model's planner and their true consequences, ``(B,)`` each.

    Attributes:
        action: chosen first action.
        leaf: chosen leaf (the best leaf under the chosen first action).
        q_model: ``(B, A)`` the model's first-action values (``A = task.world.n_actions``).
        q_true: ``(B, A)`` exact ``Q*(s, a)``.
        predicted: the model's score of the chosen leaf.
        achieved: the true return of the chosen leaf's action sequence.
        model_scores: ``(B, L)`` every leaf's model score, if kept.
        true_scores: ``(B, L)`` every leaf's true return, if kept.
    """

    action: torch.Tensor
    leaf: torch.Tensor
    q_model: torch.Tensor
    q_true: torch.Tensor
    predicted: torch.Tensor
    achieved: torch.Tensor
    model_scores: torch.Tensor | None = None
    true_scores: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.action.shape[0]

    @property
    def regret(self) -> torch.Tensor:
        """``(B,)`` ``V*(s) - Q*(s, chosen)``, >= 0."""
        chosen = self.q_true.gather(1, self.action.unsqueeze(1)).squeeze(1)
        return self.q_true.amax(dim=1) - chosen

    @property
    def optimal(self) -> torch.Tensor:
        """``(B,)`` bool: the chosen action is optimal under the exact values."""
        return self.regret <= TIE_TOLERANCE

    @property
    def xgap(self) -> torch.Tensor:
        """``(B,)`` predicted minus achieved return of the chosen sequence."""
        return self.predicted - self.achieved

    def subset(self, rows: torch.Tensor) -> Decisions:
        """The decisions of ``rows`` (index or bool mask)."""

        def pick(x):
            return None if x is None else x[rows]

        return Decisions(**{f.name: pick(getattr(self, f.name)) for f in fields(self)})


@torch.no_grad()
def leaf_scores(
    model, roots: torch.Tensor, task: Task, depth: int, generator: torch.Generator, **planner_kwargs
) -> torch.Tensor:
    """``(B, A^D)`` the depth-``D`` planner's score of every leaf of every root with ``model``,
    from the leaf scorer the planner uses for it (``gridplan.planning.scorers``; chunked by the
    scorer to its memory budget). With the oracle, a leaf's score is the true return of its action
    sequence.

    Raises:
        ValueError: as ``Planner``, or if the model has several settings.
    """
    if capabilities_of(model).n_settings != 1:
        raise ValueError("leaf scores are measured for single-setting models")
    planner = Planner(model, depth, task, device=roots.device, **planner_kwargs)
    out = roots.new_empty(roots.shape[0], planner.n_leaves)
    for rows, scores in planner.scorer.leaf_scores(
        check_state(roots, "root state", task.world), generator
    ):
        out[rows] = scores
    return out


@torch.no_grad()
def decide(
    model,
    roots: torch.Tensor,
    task: Task,
    depth: int,
    generator: torch.Generator,
    keep_scores: bool = False,
    **planner_kwargs,
) -> Decisions:
    """The model's planner decisions at true ``roots`` and their true consequences.

    Args:
        model: a single-setting world model.
        roots: ``(B, S)`` true, non-terminal states.
        task: the task (reward, V* and termination of the leaves).
        depth: planner depth ``D``.
        generator: tie-breaks first, then the model's noise.
        keep_scores: keep every leaf's model and true score (``(B, A^D)`` each).
        **planner_kwargs: passed to both ``Planner``s (``max_memory``, ``tree``, ...);
            ``ties`` (``"first"``, ``"random"``, or None: the model's reading's,
            ``gridplan.planning.planner.resolve_ties``) picks among tied first actions as the
            planner does.

    Returns:
        Decisions.

    Raises:
        ValueError: on a malformed root batch, a model with several settings, a bad ``ties``,
            or a model output the planner rejects.
    """
    ties = resolve_ties(model, planner_kwargs.pop("ties", None))
    device = roots.device
    b, n_actions = roots.shape[0], task.world.n_actions
    tie = torch.rand(b, n_actions, generator=generator, device=device)
    scores = leaf_scores(model, roots, task, depth, generator, **planner_kwargs)
    oracle = OracleModel(world=task.world)
    true_scores = leaf_scores(oracle, roots, task, depth, generator, **planner_kwargs)
    per_action = scores.shape[1] // n_actions
    q_model = scores.view(b, n_actions, per_action).amax(dim=2)
    q_true = true_scores.view(b, n_actions, per_action).amax(dim=2)
    action = break_ties(q_model, tie, ties)
    block = scores.view(b, n_actions, per_action)[torch.arange(b, device=device), action]
    leaf = action * per_action + block.argmax(dim=1)
    rows = torch.arange(b, device=device)
    return Decisions(
        action=action,
        leaf=leaf,
        q_model=q_model,
        q_true=q_true,
        predicted=scores[rows, leaf],
        achieved=true_scores[rows, leaf],
        model_scores=scores if keep_scores else None,
        true_scores=true_scores if keep_scores else None,
    )


@dataclass(frozen=True)
class DecisionQuality:
    """Decision agreement and decision regret over a set of roots (L4)."""

    agreement: Estimate
    regret: Estimate

    def to_dict(self) -> dict:
        return {
            "decision_agreement": self.agreement.to_dict(),
            "decision_regret": self.regret.to_dict(),
        }


def decision_quality(decisions: Decisions) -> DecisionQuality:
    """Agreement (mean of ``optimal``) and regret (mean of ``regret``) with 95% intervals."""
    return DecisionQuality(
        agreement=Estimate.of(decisions.optimal.double(), RATE),
        regret=Estimate.of(decisions.regret.double(), NON_NEGATIVE),
    )


@dataclass(frozen=True)
class Exploitability:
    """The exploitability gap over a set of decisions (L7).

    Attributes:
        xgap: mean of ``predicted - achieved`` (return units).
        exceed: fraction of decisions whose gap exceeds ``threshold``.
        predicted: mean predicted score of the chosen sequences.
        achieved: mean true return of the chosen sequences.
        threshold: the stated threshold (``XGAP_THRESHOLD`` by default).
    """

    xgap: Estimate
    exceed: Estimate
    predicted: float
    achieved: float
    threshold: float

    def to_dict(self) -> dict:
        return {
            "xgap": self.xgap.to_dict(),
            "xgap_exceed": self.exceed.to_dict(),
            "xgap_threshold": self.threshold,
            "predicted_return": self.predicted,
            "achieved_return": self.achieved,
        }


def exploitability(decisions: Decisions, threshold: float = XGAP_THRESHOLD) -> Exploitability:
    """XGap statistics of ``decisions``.

    Raises:
        ValueError: if ``threshold`` is negative or not finite, or there are no decisions.
    """
    if not 0.0 <= threshold < float("inf"):
        raise ValueError(f"XGap threshold must be a finite number >= 0, got {threshold}")
    gap = decisions.xgap.double()
    return Exploitability(
        xgap=Estimate.of(gap),
        exceed=Estimate.of((gap > threshold).double(), RATE),
        predicted=float(decisions.predicted.double().mean()),
        achieved=float(decisions.achieved.double().mean()),
        threshold=float(threshold),
    )


@torch.no_grad()
def decide_planner(planner, roots: torch.Tensor, generator: torch.Generator) -> Decisions:
    """Decisions of any named planner (``gridplan.planning.planners``) at true ``roots``, and
    their true consequences: the ladder's L4 and XGap measured for that planner.

    ``planner.plan`` gives the chosen action, the committed sequence and the planner's own
    return of it (``predicted``); ``q_true`` is the exact ``Q*(s, a)``
    (``ValueTable.q_values``), and ``achieved`` the true return of the committed sequence
    (the oracle's rollout with ``gamma^H V*`` at its end, the full-width search's true leaf
    score). A planner without first-action values has ``q_model`` NaN; ``leaf`` is the
    sequence read as base-``A`` digits, first action most significant (``action_sequences``).
    The paper's planner (a plain ``Planner``) is measured through ``full_width_plan``, the
    same decisions as ``decide``; the ladder keeps ``decide`` for it.

    Raises:
        ValueError: on a malformed root batch, or as the planner.
    """
    task = planner.task
    check_state(roots, "root state", task.world)
    plan = (
        planner.plan(roots, generator)
        if hasattr(planner, "plan")
        else full_width_plan(planner, roots, generator)
    )
    table = dynamics.value_table(task, roots.device)
    oracle = OracleModel(world=task.world)
    achieved = sequence_returns(
        oracle, task, roots, plan.sequence.unsqueeze(1), table, generator
    ).squeeze(1)
    h, n_actions = plan.sequence.shape[1], task.world.n_actions
    powers = n_actions ** torch.arange(h - 1, -1, -1, device=roots.device)
    return Decisions(
        action=plan.action,
        leaf=(plan.sequence * powers).sum(dim=1),
        q_model=torch.full((roots.shape[0], n_actions), float("nan"), device=roots.device),
        q_true=table.q_values(roots),
        predicted=plan.predicted,
        achieved=achieved,
    )
