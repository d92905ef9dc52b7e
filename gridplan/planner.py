"""Full-width depth-D tree search over a world model (paper §3 "Planner", appendix D; SPEC §4).

For every episode all ``L = 4^D`` action sequences are expanded as one batched tensor
``(B * L, 12)``; each leaf is rolled ``D`` imagined steps through ``model.predict`` with its
own noise draws (no shared prefixes), scored by the true sparse reward on the predicted
states (terminal at a goal or hazard) plus ``gamma^D * V*`` of the last predicted state read
through its rounded relevant projection. The first action of the best leaf is returned; ties
between first actions are broken at random from the explicit generator.

Leaf ``l`` runs the sequence whose step-``t`` action is digit ``t`` of ``l`` in base 4, most
significant first, so the leaves of first action ``a`` form the contiguous block
``[a * L/4, (a + 1) * L/4)``.

Memory: a chunk of ``R`` leaf rows needs about ``R * bytes_per_row(D)`` bytes; episodes are
split into chunks that fit ``max_memory`` (setting-major blocks are kept intact, see
``gridplan.models``). Chunking never changes the result for a model that is deterministic on
the relevant dims (the oracle, learned MLPs); for a noisy model it changes which noise draw
each leaf receives, not the distribution.
"""

from __future__ import annotations

import torch

from gridplan.constants import AGENT_X, AGENT_Y, C1, GAMMA, N_ACTIONS, STATE_DIM, check_task
from gridplan.env import check_state, outcome, to_cell, to_flag
from gridplan.models import WorldModel
from gridplan.values import ValueTable

#: Default chunk budget for the leaf tensors of one decision.
DEFAULT_MAX_MEMORY = 2 * 1024**3
#: Tie tolerance between first-action values: equal paths give bit-identical scores, so this
#: only absorbs float32 rounding of different paths with the same true value.
TIE_TOLERANCE = 1e-6


def action_sequences(depth: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """All ``4^D`` action sequences, ``(L, D)`` long, first action most significant."""
    leaves = torch.arange(N_ACTIONS**depth, device=device)
    powers = N_ACTIONS ** torch.arange(depth - 1, -1, -1, device=device)
    return (leaves.unsqueeze(1) // powers) % N_ACTIONS


def bytes_per_row(depth: int) -> int:
    """Working memory of one leaf row: a few live state copies plus score and flags."""
    return 6 * STATE_DIM * 4 + 3 * 8 + 16


class Planner:
    """Receding-horizon full-width planner.

    Args:
        model: any ``WorldModel`` (duck-typed ``predict``; optional ``start_rollout``).
        depth: search depth ``D >= 1``; ``4^D`` leaves per episode.
        task: ``"A"`` or ``"B"``: the reward applied to predicted states and the V* table.
        gamma: discount, default 0.95.
        max_memory: bytes allowed for one chunk of leaf rows (default 2 GiB).
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
        device: where the V* table lives (move it with the states).

    Raises:
        ValueError: if ``depth < 1``, the task is unknown or the budgets are not positive.
    """

    def __init__(
        self,
        model: WorldModel,
        depth: int,
        task: str = "A",
        gamma: float = GAMMA,
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
        check_task(task)
        if max_memory <= 0 or (max_rows is not None and max_rows <= 0):
            raise ValueError("max_memory and max_rows must be positive")
        self.model = model
        self.depth = depth
        self.task = task
        self.gamma = gamma
        self.n_leaves = N_ACTIONS**depth
        self.values = ValueTable(task, gamma, device)
        self.sequences = action_sequences(depth, device)
        self.max_rows = max_rows or max(1, max_memory // bytes_per_row(depth))
        self.discounts = [gamma**t for t in range(depth + 1)]

    def _settings(self) -> int:
        return getattr(self.model, "n_settings", 1)

    def leaf_scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Scores of all leaves of ``root`` episodes, unchunked: ``(B, L)``.

        Args:
            root: ``(B, 12)`` true states, setting-major when the model has several settings.
            generator: source of the model's noise.
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

    def action_values(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Best leaf score under each first action: ``(B, 4)``, chunked by ``max_rows``.

        Raises:
            ValueError: on a malformed root state or a batch that does not split into the
                model's setting blocks.
        """
        check_state(root, "root state")
        m = self._settings()
        b = root.shape[0]
        if b % m:
            raise ValueError(f"batch of {b} episodes does not split into {m} setting blocks")
        per_setting = b // m
        cols = max(1, self.max_rows // (self.n_leaves * m))
        blocks = root.view(m, per_setting, STATE_DIM)
        q = torch.empty(m, per_setting, N_ACTIONS, device=root.device)
        for lo in range(0, per_setting, cols):
            chunk = blocks[:, lo : lo + cols].reshape(-1, STATE_DIM)
            scores = self.leaf_scores(chunk, generator)
            best = scores.view(-1, N_ACTIONS, self.n_leaves // N_ACTIONS).amax(dim=2)
            q[:, lo : lo + cols] = best.view(m, -1, N_ACTIONS)
        return q.view(b, N_ACTIONS)

    def act(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Chosen first actions ``(B,)`` long; ties broken uniformly at random.

        The tie-break draws come from ``generator`` before any model noise, so they do not
        depend on chunking.

        Raises:
            ValueError: as ``action_values``; the root is checked before any draw.
        """
        check_state(root, "root state")
        tie = torch.rand(root.shape[0], N_ACTIONS, generator=generator, device=root.device)
        q = self.action_values(root, generator)
        best = q >= q.amax(dim=1, keepdim=True) - TIE_TOLERANCE
        return (tie * best).argmax(dim=1)
