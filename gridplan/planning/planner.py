"""Full-width depth-D tree search over a world model (paper §3 "Planner", appendix D).

For every episode all ``L = A^D`` action sequences are expanded (``A`` actions: the paper's
four moves, or MiniGrid DoorKey's seven); each leaf gets a score, the
discounted true reward of its imagined states plus ``gamma^D V*`` of the last one
(``gridplan.planning.scorers`` defines it exactly). The value of a first action is its best leaf;
the chosen action is the best first action, ties broken by the planner's tie rule
(``Planner(ties=...)``, ``TIES``: the lowest action index, or uniformly at random from the
explicit generator). The search is the same for every model; the ``LeafScorer`` that rolls its
leaves is chosen by ``gridplan.planning.registry.leaf_scorer`` (the noise family's fused scorer,
``GenericScorer`` through ``model.predict``, ...), and the scorer decides chunking, memory and
noise draws.

The tree (``Planner(tree=...)``, ``TREES``), the one knob of the draws' law: ``"independent"``
leaves, each rolled with its own draws, or ``"shared-prefix"``, one draw per tree node, all
leaves under a node sharing its path. ``tree=None`` takes the model's default
(``gridplan.planning.registry.default_tree``: its reading's tree, else shared prefixes for a
model declared ``deterministic``, for which both trees give bit-identical scores); an
explicit tree always wins over it.

The tie rule (``Planner(ties=...)``, ``TIES``, paper §3 "Planner", §5.4 (ii)): ``"first"``,
the lowest-index action among the tied best (in ``gridplan.core.constants``' action order), or
``"random"``, one of them uniformly at random. ``ties=None`` takes the model's reading's rule
(``gridplan.core.readings``; a model without a reading gets ``PROJECT``'s, ``"first"``); an
explicit rule always wins. Actions tie when their values lie within ``TIE_TOLERANCE``.

Random draws of ``act``: first the ``(B, A)`` tie-break uniforms, then the model's noise
(through the scorer), so the tie-breaks never depend on chunking or on the model. The uniforms
are drawn under both tie rules, so the model's noise stream, and every decision that is not an
exact tie, is the same under ``"first"`` and ``"random"``.
"""

from __future__ import annotations

import torch

from gridplan.core.env import check_state
from gridplan.core.readings import CHOICES, PROJECT, Reading
from gridplan.core.tasks import TASK_A, TaskKind, check
from gridplan.models.capabilities import capabilities_of
from gridplan.models.contract import check_model_world

# Imported for their side effects: they register the noise family's fused scorer and the
# latent models' scorer.
from gridplan.planning import fused, latent_scorer  # noqa: F401
from gridplan.planning.registry import TREES, ScorerFactory, leaf_scorer, resolve_tree
from gridplan.planning.scorers import DEFAULT_MAX_MEMORY, LeafScorer, action_sequences

__all__ = [
    "DEFAULT_MAX_MEMORY",
    "TIES",
    "TIE_TOLERANCE",
    "TREES",
    "Planner",
    "action_sequences",
    "break_ties",
    "default_ties",
    "resolve_ties",
]

#: Tie tolerance between first-action values: equal paths give bit-identical scores, so this
#: only absorbs float32 rounding of different paths with the same true value.
TIE_TOLERANCE = 1e-6
#: The planner's tie rules: the lowest-index tied action, or a uniform one among them.
TIES: tuple[str, ...] = CHOICES["ties"]


def default_ties(model) -> str:
    """The tie rule a planner uses for ``model`` when it is given none: its reading's, else
    the default reading's (``gridplan.core.readings.PROJECT``)."""
    reading = capabilities_of(model).reading
    return reading.ties if isinstance(reading, Reading) else PROJECT.ties


def resolve_ties(model, ties: str | None) -> str:
    """``ties``, or ``default_ties(model)`` for None.

    Raises:
        ValueError: if ``ties`` is neither None nor one of ``TIES``.
    """
    if ties is None:
        return default_ties(model)
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(TIES)} or None, got {ties!r}")
    return ties


def break_ties(q: torch.Tensor, tie: torch.Tensor, ties: str) -> torch.Tensor:
    """The chosen first actions ``(B,)`` long of first-action values ``q`` ``(B, A)``.

    Actions within ``TIE_TOLERANCE`` of the row's best are tied; ``"first"`` takes the
    lowest-index one, ``"random"`` the one with the largest uniform of ``tie`` ``(B, A)``
    (uniform among the tied, since the draws are i.i.d.). ``tie`` is read only by ``"random"``
    but is drawn by the caller under both rules (module docstring).

    Raises:
        ValueError: if ``ties`` is not one of ``TIES``.
    """
    best = q >= q.amax(dim=1, keepdim=True) - TIE_TOLERANCE
    if ties == "first":
        # argmax returns the first of equal maxima.
        return best.to(torch.uint8).argmax(dim=1)
    if ties == "random":
        return (tie * best).argmax(dim=1)
    raise ValueError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")


class Planner:
    """Receding-horizon full-width planner.

    Args:
        model: any ``WorldModel`` (duck-typed ``predict``; optional ``start_rollout``,
            ``n_settings``, ``deterministic``, ``bytes_per_row``; ``gridplan.models.contract``).
        depth: search depth ``D >= 1``; ``A^D`` leaves per episode (``A = task.world.n_actions``).
        task: the reward applied to imagined states, the V* table, ``gamma`` and the action
            count (a ``gridplan.core.tasks.TaskKind``: the paper's world or MiniGrid DoorKey).
        max_memory: bytes the scorer may use for the leaf tensors of one chunk (default 2 GiB).
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
        device: where the V* table lives (move it with the states).
        tree: ``"independent"``, ``"shared-prefix"`` or ``None`` (the model's default; module
            docstring).
        ties: ``"first"``, ``"random"`` or ``None`` (the model's reading's rule; module
            docstring).
        factory: optional ``gridplan.planning.registry.ScorerFactory`` that replaces the
            registered one, e.g. ``through_predict`` to roll a model with a fast scorer
            through its ``predict`` (for comparisons and benchmarks).

    Attributes:
        scorer: the ``LeafScorer`` in use.
        tree: the tree its draws follow.
        ties: the tie rule of ``act``.

    Raises:
        ValueError: if ``depth < 1``, the budgets are not positive, ``tree`` is not one of
            ``TREES``, ``ties`` is not one of ``TIES``, the shared-prefix tree is asked of a
            model with memory across imagined steps through its ``predict``, or the model
            declares another world than the task's
            (``gridplan.models.contract.check_model_world``).
        TypeError: if ``task`` is not a ``Task``.
    """

    def __init__(
        self,
        model,
        depth: int,
        task: TaskKind = TASK_A,
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
        device: torch.device | str = "cpu",
        tree: str | None = None,
        factory: ScorerFactory | None = None,
        ties: str | None = None,
    ) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
        check(task)
        check_model_world(model, task.world)
        if max_memory <= 0 or (max_rows is not None and max_rows <= 0):
            raise ValueError("max_memory and max_rows must be positive")
        self.model = model
        self.depth = depth
        self.task = task
        self.n_leaves = task.world.n_actions**depth
        self.tree = resolve_tree(model, tree)
        self.ties = resolve_ties(model, ties)
        self.scorer: LeafScorer = leaf_scorer(
            model, task, depth, device, max_memory, max_rows, self.tree, factory
        )

    @property
    def gamma(self) -> float:
        """The discount of the leaf scores, ``task.gamma``."""
        return self.task.gamma

    @property
    def n_actions(self) -> int:
        """The task's action count ``A`` (4 in the paper's world, 7 in MiniGrid's)."""
        return self.task.world.n_actions

    def action_values(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Best leaf score under each first action: ``(B, A)``.

        Args:
            root: ``(B, S)`` true states, setting-major for a multi-setting model.
            generator: source of the model's noise.

        Raises:
            ValueError: on a malformed root state, a batch that does not split into the
                model's setting blocks, or a misbehaving model.
        """
        check_state(root, "root state", self.task.world)
        a = self.n_actions
        q = root.new_empty(root.shape[0], a)
        per_action = self.n_leaves // a
        for rows, scores in self.scorer.leaf_scores(root, generator):
            # Leaves of first action a are the contiguous block a of the L leaves.
            q[rows] = scores.view(-1, a, per_action).amax(dim=2)
        return q

    def act(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Chosen first actions ``(B,)`` long; ties broken by ``self.ties`` (``break_ties``).

        The tie-break draws come from ``generator`` before any model noise, under both tie
        rules, so they do not depend on chunking and the noise stream not on the rule.

        Raises:
            ValueError: as ``action_values``; the root is checked before any draw.
        """
        check_state(root, "root state", self.task.world)
        tie = torch.rand(root.shape[0], self.n_actions, generator=generator, device=root.device)
        q = self.action_values(root, generator)
        return break_ties(q, tie, self.ties)
