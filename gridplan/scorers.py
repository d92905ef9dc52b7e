"""Leaf scorers: the interface between the planner's search and a world model (paper §3
"Planner", appendix D).

The search (``gridplan.planner.Planner``) expands all ``L = 4^D`` action sequences of every
episode and needs one number per leaf; a ``LeafScorer`` supplies them. Leaf ``l`` runs the
sequence ``action_sequences(D)[l]`` (digit ``t`` of ``l`` in base 4, most significant first,
so the leaves of first action ``a`` form the block ``[a * L/4, (a + 1) * L/4)``). Its score
is the true sparse reward of the imagined states, discounted, until the first goal or hazard
(terminal), plus ``gamma^D`` times V* of the last imagined state if none was reached::

    score(l) = sum_{t < D} gamma^t r(s_hat_{t+1}) [alive] + gamma^D V*(s_hat_D) [alive]

read through rounded cells and 0.5-thresholded flags (``gridplan.env``, ``gridplan.values``).

A scorer chooses everything the search need not know: how to chunk the batch for memory,
how and where it draws the model's randomness, whether leaves share prefixes. The model
declares its scorer (``model.leaf_scorer``); ``GenericScorer`` serves any model through
``model.predict``; ``gridplan.fused.FusedNoiseScorer`` serves the built-in noise family.
A scorer for deterministic models that expands the tree level by level (one prediction per
tree node) would be a third ``LeafScorer``, with no change to the search.

Multi-setting models: ``model.n_settings = M`` splits a batch into ``M`` equal contiguous
setting blocks (``gridplan.models``); every scorer keeps each block on its own setting.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator

import torch

from gridplan.constants import AGENT_X, AGENT_Y, C1, N_ACTIONS, STATE_DIM
from gridplan.env import outcome, to_cell, to_flag
from gridplan.tasks import Task

#: Default memory budget for the leaf tensors of one chunk, in bytes.
DEFAULT_MAX_MEMORY = 2 * 1024**3
#: Working memory of one leaf row of the generic scorer: a few live ``(12,)`` float32 state
#: copies plus score and flags (a model's own activations come on top).
GENERIC_BYTES_PER_ROW = 6 * STATE_DIM * 4 + 3 * 8 + 16

#: Rows of a batch handed out by a scorer: a slice or a ``(E,)`` long index.
Rows = slice | torch.Tensor


def action_sequences(depth: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """All ``4^D`` action sequences, ``(L, D)`` long, first action most significant."""
    leaves = torch.arange(N_ACTIONS**depth, device=device)
    powers = N_ACTIONS ** torch.arange(depth - 1, -1, -1, device=device)
    return (leaves.unsqueeze(1) // powers) % N_ACTIONS


def episodes_per_setting(batch: int, n_settings: int) -> int:
    """Episodes of each setting block in a batch of ``batch`` episodes.

    Raises:
        ValueError: if the batch does not split into ``n_settings`` equal blocks.
    """
    if batch % n_settings:
        raise ValueError(
            f"batch of {batch} episodes does not split into {n_settings} setting blocks"
        )
    return batch // n_settings


class LeafScorer(abc.ABC):
    """Scores of every leaf of the full-width search (the module docstring defines them).

    Attributes:
        task: the reward and the V* table applied to imagined states.
        depth: search depth ``D``; ``n_leaves = 4^D``.
    """

    task: Task
    depth: int

    @property
    def n_leaves(self) -> int:
        return N_ACTIONS**self.depth

    @abc.abstractmethod
    def leaf_scores(
        self, root: torch.Tensor, generator: torch.Generator
    ) -> Iterator[tuple[Rows, torch.Tensor]]:
        """Leaf scores of all ``B`` root episodes, chunk by chunk.

        Args:
            root: ``(B, 12)`` validated true states, setting-major for a multi-setting model.
            generator: the model's only source of randomness (drawn in chunk order).

        Yields:
            ``(rows, scores)``: ``scores`` ``(E, L)`` float of the episodes ``root[rows]``;
            every episode exactly once. ``scores`` may be a reused buffer: consume it before
            asking for the next chunk.

        Raises:
            ValueError: if the batch does not split into the model's setting blocks, or the
                model misbehaves (e.g. a misshapen prediction).
        """


class GenericScorer(LeafScorer):
    """Any world model: each leaf rolled ``D`` imagined steps through ``model.predict`` on
    full ``(R, 12)`` states, with its own draws (no shared prefixes).

    Chunks hold whole episodes, the same number from every setting block, so a chunk is a
    valid batch for a multi-setting model. For a stochastic model the chunking decides which
    leaf gets which draw (``max_memory`` and ``max_rows`` change noisy decisions, not their
    distribution).

    Args:
        model: ``predict(state, action, generator)``; optional ``start_rollout(rows,
            generator)``, called before each chunk; optional ``n_settings``.
        task: reward and V* of the leaf scores.
        depth: ``D >= 1``.
        device: where the V* table lives.
        max_memory: bytes for the leaf tensors of one chunk (``GENERIC_BYTES_PER_ROW`` each).
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
    """

    def __init__(
        self,
        model,
        task: Task,
        depth: int,
        device: torch.device | str = "cpu",
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
    ) -> None:
        self.model = model
        self.task = task
        self.depth = depth
        self.values = task.value_table(device)
        self.sequences = action_sequences(depth, device)
        self.discounts = [task.gamma**t for t in range(depth + 1)]
        self.max_rows = max_rows or max(1, max_memory // GENERIC_BYTES_PER_ROW)

    def leaf_scores(self, root, generator):
        m = getattr(self.model, "n_settings", 1)
        per_setting = episodes_per_setting(root.shape[0], m)
        cols = max(1, self.max_rows // (self.n_leaves * m))
        blocks = torch.arange(root.shape[0], device=root.device).view(m, per_setting)
        for lo in range(0, per_setting, cols):
            rows = blocks[:, lo : lo + cols].reshape(-1)
            yield rows, self.scores(root[rows], generator)

    def scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Leaf scores ``(E, L)`` of ``E`` root episodes in one batch of ``E * L`` rows.

        Raises:
            ValueError: if the model returns a misshapen prediction.
        """
        b = root.shape[0]
        rows = b * self.n_leaves
        state = root.repeat_interleave(self.n_leaves, dim=0)
        score = torch.zeros(rows, device=root.device)
        alive = torch.ones(rows, dtype=torch.bool, device=root.device)
        start = getattr(self.model, "start_rollout", None)
        if start is not None:
            start(rows, generator)
        for t in range(self.depth):
            action = self.sequences[:, t].repeat(b)
            state = self.model.predict(state, action, generator)
            if state.shape != (rows, STATE_DIM):
                raise ValueError(
                    f"model.predict returned shape {tuple(state.shape)}, expected ({rows}, 12)"
                )
            reward, goal, hazard = outcome(
                to_cell(state[:, AGENT_X : AGENT_Y + 1]), to_flag(state[:, C1]), self.task
            )
            score += self.discounts[t] * reward * alive
            alive &= ~(goal | hazard)
        score += self.discounts[self.depth] * self.values.lookup(state) * alive
        return score.view(b, self.n_leaves)
