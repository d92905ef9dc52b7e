"""Full-width depth-D tree search over a world model (paper §3 "Planner", appendix D).

For every episode all ``L = 4^D`` action sequences are expanded; each leaf gets a score, the
discounted true reward of its imagined states plus ``gamma^D V*`` of the last one
(``gridplan.planning.scorers`` defines it exactly). The value of a first action is its best leaf;
the chosen action is the best first action, ties broken uniformly at random from the explicit
generator. The search is the same for every model; the ``LeafScorer`` that rolls its leaves
is chosen by ``gridplan.planning.registry.leaf_scorer`` (the noise family's fused scorer,
``GenericScorer`` through ``model.predict``, ...), and the scorer decides chunking, memory and
noise draws.

The tree (``Planner(tree=...)``, ``TREES``), the one knob of the draws' law: ``"independent"``
leaves, each rolled with its own draws, or ``"shared-prefix"``, one draw per tree node, all
leaves under a node sharing its path. ``tree=None`` takes the model's default
(``gridplan.planning.registry.default_tree``: its reading's tree, else shared prefixes for a
model declared ``deterministic``, for which both trees give bit-identical scores); an
explicit tree always wins over it.

Random draws of ``act``: first the ``(B, 4)`` tie-break uniforms, then the model's noise
(through the scorer), so the tie-breaks never depend on chunking or on the model.
"""

from __future__ import annotations

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.models.contract import check_model_world

# Imported for their side effects: they register the noise family's fused scorer and the
# latent models' scorer.
from gridplan.planning import fused, latent_scorer  # noqa: F401
from gridplan.planning.registry import TREES, ScorerFactory, leaf_scorer, resolve_tree
from gridplan.planning.scorers import DEFAULT_MAX_MEMORY, LeafScorer, action_sequences

__all__ = ["DEFAULT_MAX_MEMORY", "TIE_TOLERANCE", "TREES", "Planner", "action_sequences"]

#: Tie tolerance between first-action values: equal paths give bit-identical scores, so this
#: only absorbs float32 rounding of different paths with the same true value.
TIE_TOLERANCE = 1e-6


class Planner:
    """Receding-horizon full-width planner.

    Args:
        model: any ``WorldModel`` (duck-typed ``predict``; optional ``start_rollout``,
            ``n_settings``, ``deterministic``, ``bytes_per_row``; ``gridplan.models.contract``).
        depth: search depth ``D >= 1``; ``4^D`` leaves per episode.
        task: the reward applied to imagined states, the V* table and ``gamma``.
        max_memory: bytes the scorer may use for the leaf tensors of one chunk (default 2 GiB).
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
        device: where the V* table lives (move it with the states).
        tree: ``"independent"``, ``"shared-prefix"`` or ``None`` (the model's default; module
            docstring).
        factory: optional ``gridplan.planning.registry.ScorerFactory`` that replaces the
            registered one, e.g. ``through_predict`` to roll a model with a fast scorer
            through its ``predict`` (for comparisons and benchmarks).

    Attributes:
        scorer: the ``LeafScorer`` in use.
        tree: the tree its draws follow.

    Raises:
        ValueError: if ``depth < 1``, the budgets are not positive, ``tree`` is not one of
            ``TREES``, the shared-prefix tree is asked of a model with memory across
            imagined steps through its ``predict``, or the model declares another world than
            the task's (``gridplan.models.contract.check_model_world``).
        TypeError: if ``task`` is not a ``Task``.
    """

    def __init__(
        self,
        model,
        depth: int,
        task: Task = TASK_A,
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
        device: torch.device | str = "cpu",
        tree: str | None = None,
        factory: ScorerFactory | None = None,
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
        self.n_leaves = N_ACTIONS**depth
        self.tree = resolve_tree(model, tree)
        self.scorer: LeafScorer = leaf_scorer(
            model, task, depth, device, max_memory, max_rows, self.tree, factory
        )

    @property
    def gamma(self) -> float:
        """The discount of the leaf scores, ``task.gamma``."""
        return self.task.gamma

    def action_values(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Best leaf score under each first action: ``(B, 4)``.

        Args:
            root: ``(B, S)`` true states, setting-major for a multi-setting model.
            generator: source of the model's noise.

        Raises:
            ValueError: on a malformed root state, a batch that does not split into the
                model's setting blocks, or a misbehaving model.
        """
        check_state(root, "root state", self.task.world)
        q = root.new_empty(root.shape[0], N_ACTIONS)
        per_action = self.n_leaves // N_ACTIONS
        for rows, scores in self.scorer.leaf_scores(root, generator):
            # Leaves of first action a are the contiguous block a of the L leaves.
            q[rows] = scores.view(-1, N_ACTIONS, per_action).amax(dim=2)
        return q

    def act(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Chosen first actions ``(B,)`` long; ties broken uniformly at random.

        The tie-break draws come from ``generator`` before any model noise, so they do not
        depend on chunking.

        Raises:
            ValueError: as ``action_values``; the root is checked before any draw.
        """
        check_state(root, "root state", self.task.world)
        tie = torch.rand(root.shape[0], N_ACTIONS, generator=generator, device=root.device)
        q = self.action_values(root, generator)
        best = q >= q.amax(dim=1, keepdim=True) - TIE_TOLERANCE
        return (tie * best).argmax(dim=1)
