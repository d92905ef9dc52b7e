"""Which leaf scorer serves a model: the planner's one decision (paper §3 "Planner").

The search (``gridplan.planning.planner.Planner``) is the same for every model; the scorer
that rolls its leaves (``gridplan.planning.scorers``) is not. ``leaf_scorer`` makes the choice,
and nothing else does:

1. **The tree.** ``tree`` is the law of the noise draws: ``"independent"``, every leaf rolled
   with its own draws, or ``"shared-prefix"``, one draw per tree node, so the leaves under a
   node share the noise of their common path. An explicit tree always wins; ``tree=None`` is
   the model's default (``default_tree``): the tree of its ``Reading``
   (``gridplan.core.readings``: the noise family follows one), else ``"shared-prefix"`` for a
   model declared ``deterministic`` (both trees give it bit-identical scores, the shared one
   with ``4 + 16 + ... + 4^D`` predictions per episode instead of ``D * 4^D``), else
   ``"independent"``.
2. **The scorer.** The factory registered for the model's class (``register_scorer``), called
   with the tree; else ``through_predict``: every prediction through ``model.predict``,
   ``GenericScorer`` for independent leaves, ``TreeScorer`` for shared prefixes. Registered
   here: a plug-in behind ``CheckedModel`` that predicts its own reward gets ``RewardScorer``;
   ``gridplan.planning.fused`` registers ``FusedNoiseScorer`` for the noise family when it is
   imported (``gridplan.planning.planner`` imports it, so every planner sees it).

A registration holds for its class only, not for subclasses: a subclass that changes
``predict`` would otherwise keep a fast path that no longer rolls its predictions, so a
subclass that keeps the arithmetic registers the factory again. ``Planner(factory=...)``
replaces the registered factory for one planner; ``through_predict`` there rolls a
registered model through its ``predict``, which is how the tests and
``scripts/bench_planner.py`` compare a fast scorer with the generic one.
"""

from __future__ import annotations

from typing import Protocol

import torch

from gridplan.core.readings import CHOICES, Reading
from gridplan.core.tasks import TaskKind
from gridplan.models.capabilities import capabilities_of
from gridplan.models.plugins import CheckedModel
from gridplan.planning.scorers import (
    DEFAULT_MAX_MEMORY,
    GenericScorer,
    LeafScorer,
    RewardScorer,
    is_deterministic,
)
from gridplan.planning.tree import TreeScorer

#: The planner's trees: independent leaves, or leaves sharing their prefixes' draws.
TREES: tuple[str, ...] = CHOICES["tree"]


class ScorerFactory(Protocol):
    """Builds the leaf scorer of one model for one planner.

    Called as ``factory(model, task, depth, device, max_memory, max_rows, tree)`` with the
    planner's budgets (``GenericScorer`` documents them) and a resolved tree (one of
    ``TREES``); returns a ``LeafScorer`` whose draws follow that tree.
    """

    def __call__(
        self,
        model,
        task: TaskKind,
        depth: int,
        device: torch.device | str,
        max_memory: int,
        max_rows: int | None,
        tree: str,
    ) -> LeafScorer: ...


_FACTORIES: dict[type, ScorerFactory] = {}


def register_scorer(model_type: type, factory: ScorerFactory) -> None:
    """Serve every model whose class is exactly ``model_type`` with ``factory``.

    Registering the same factory again is a no-op.

    Raises:
        TypeError: if ``model_type`` is not a class or ``factory`` is not callable.
        ValueError: if ``model_type`` is registered with another factory.
    """
    if not isinstance(model_type, type):
        raise TypeError(f"model_type must be a class, got {model_type!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable, got {type(factory).__name__}")
    known = _FACTORIES.setdefault(model_type, factory)
    if known is not factory:
        raise ValueError(
            f"{model_type.__qualname__} already has a leaf scorer ({known.__qualname__}); "
            f"cannot register {factory.__qualname__} as well"
        )


def registered_scorer(model_type: type) -> ScorerFactory | None:
    """The factory registered for exactly ``model_type``, or None."""
    return _FACTORIES.get(model_type)


def default_tree(model) -> str:
    """The tree a planner uses for ``model`` when it is given none (module docstring)."""
    reading = capabilities_of(model).reading
    if isinstance(reading, Reading):
        return reading.tree
    return "shared-prefix" if is_deterministic(model) else "independent"


def resolve_tree(model, tree: str | None) -> str:
    """``tree``, or ``default_tree(model)`` for None.

    Raises:
        ValueError: if ``tree`` is neither None nor one of ``TREES``.
    """
    if tree is None:
        return default_tree(model)
    if tree not in TREES:
        raise ValueError(f"tree must be one of {', '.join(TREES)} or None, got {tree!r}")
    return tree


def through_predict(
    model,
    task: TaskKind,
    depth: int,
    device: torch.device | str = "cpu",
    max_memory: int = DEFAULT_MAX_MEMORY,
    max_rows: int | None = None,
    tree: str = "independent",
) -> LeafScorer:
    """Every prediction through ``model.predict``: ``GenericScorer`` for independent leaves,
    ``TreeScorer`` for shared prefixes (``ScorerFactory``).

    Raises:
        ValueError: as the scorer's constructor (a budget too small for one episode; the
            shared-prefix tree for a model with memory across imagined steps).
    """
    scorer = TreeScorer if tree == "shared-prefix" else GenericScorer
    return scorer(model, task, depth, device, max_memory, max_rows)


def _plugin_scorer(model, task, depth, device, max_memory, max_rows, tree) -> LeafScorer:
    """``RewardScorer`` for independent leaves of a plug-in that predicts its own reward, else
    ``through_predict``."""
    if tree == "independent" and capabilities_of(model).reward:
        return RewardScorer(model, task, depth, device, max_memory, max_rows)
    return through_predict(model, task, depth, device, max_memory, max_rows, tree)


register_scorer(CheckedModel, _plugin_scorer)


def leaf_scorer(
    model,
    task: TaskKind,
    depth: int,
    device: torch.device | str = "cpu",
    max_memory: int = DEFAULT_MAX_MEMORY,
    max_rows: int | None = None,
    tree: str | None = None,
    factory: ScorerFactory | None = None,
) -> LeafScorer:
    """The leaf scorer that serves ``model`` (the module docstring gives the rules).

    Args:
        model: any world model (``gridplan.models.contract``).
        task, depth, device, max_memory, max_rows: the planner's (``GenericScorer``).
        tree: one of ``TREES``, or None for ``default_tree(model)``.
        factory: replaces the registered factory (``through_predict``: the generic scorers).

    Raises:
        ValueError: on an unknown ``tree``, or as the chosen scorer's constructor.
    """
    tree = resolve_tree(model, tree)
    build = factory or registered_scorer(type(model)) or through_predict
    return build(model, task, depth, device, max_memory, max_rows, tree)
