"""The shared-prefix tree: leaf scores with one prediction per tree node (paper §3 "Planner").

``gridplan.planning.scorers.GenericScorer`` rolls each of the ``L = 4^D`` leaves (``A^D`` in
a world of ``A`` actions) of an episode on
its own, ``D * 4^D`` predictions. Leaves that start with the same actions pass through the same
imagined states, so ``TreeScorer`` expands the search tree level by level instead: level
``t + 1`` is ``predict`` of every level-``t`` node under each of the 4 actions,
``4 + 16 + ... + 4^D`` predictions per episode (340 instead of 1,024 at ``D = 4``). A node's
score is its parent's plus ``gamma^t`` times its reward while alive, the leaves add
``gamma^D V*``: the same float32 operations on the same values as the generic scorer
(``gridplan.planning.scorers`` defines the score), so

* for a **deterministic** model (``deterministic = True``: the learned MLP's mean
  prediction) every leaf score is bit-identical to the generic scorer's, hence so is every
  decision; the planner picks this scorer for such a model by default
  (``gridplan.planning.registry``);
* for a **stochastic** model it is the planner's ``shared-prefix`` tree: one draw per tree
  node, so all leaves under a node share the noise of their common path (the generic
  scorer's independent leaves each draw their own). Blocks and calls, in order, decide which
  node gets which draw, not the law.

Work per level comes in blocks of ``BLOCK_ROWS`` child rows (the bookkeeping: reward, alive,
score) and each block in ``predict`` calls of ``cache_rows`` rows (the model's working memory
stays in cache; ``gridplan.planning.scorers.CACHE_BYTES``). Memory: a chunk of episodes holds the
deepest stored level (level ``D - 1``: state, score and alive per node) and the leaf scores,
``TREE_BYTES_PER_LEAF`` per leaf; one block and one call come on top.

Letter legend: ``M`` setting blocks, ``E`` episodes, ``L = 4^D`` leaves, ``D`` depth.
"""

from __future__ import annotations

import torch

from gridplan.core import dynamics
from gridplan.core.tasks import TaskKind
from gridplan.models.capabilities import capabilities_of
from gridplan.models.contract import keeps_memory
from gridplan.planning.scorers import (
    DEFAULT_MAX_MEMORY,
    LeafScorer,
    cache_rows,
    check_depth,
    episodes_per_setting,
    generic_bytes_per_row,
    model_bytes_per_row,
    predict_in_calls,
)

#: Child rows per bookkeeping block: large enough that the ~30 small ops of a block cost ~1%
#: of the MLP's predictions, small enough to stay in cache (2^14 rows: ~5 MB).
BLOCK_ROWS = 2**14


def tree_bytes_per_leaf(state_dim: int) -> int:
    """Bytes per leaf of a chunk: its float32 score plus the stored levels above it. A stored
    node is an ``(S,)`` float32 state, a float32 score and a bool alive; the levels above a
    leaf hold at most ``node * (1/4 + 1/16 + ...) < node / 3`` per leaf."""
    node = state_dim * 4 + 4 + 1
    return 4 + -(-node // 3)


class TreeScorer(LeafScorer):
    """Leaf scores of the search tree expanded level by level through ``model.predict``.

    Chunks hold whole episodes, the same number from every setting block (each level of a
    chunk stays setting-major, so every ``predict`` call is a valid multi-setting batch).

    Args:
        model: ``predict(state, action, generator)``; optional ``n_settings``,
            ``deterministic``, ``bytes_per_row`` (``gridplan.planning.scorers``).
        task: reward and V* of the leaf scores.
        depth: ``D >= 1``.
        device: where the V* table lives.
        max_memory: bytes for one chunk's stored levels and leaf scores
            (``tree_bytes_per_leaf`` per leaf) plus one block and one call (at most a
            quarter of it: budgets under ~20 MB shrink the blocks).
        max_rows: optional hard cap on the leaves of a chunk and on the rows of a block and
            of a ``predict`` call (overrides ``max_memory``).

    Attributes:
        call_rows: rows per ``predict`` call.
        block_rows: child rows per bookkeeping block.
        max_rows: leaves per chunk.

    Raises:
        ValueError: if the model keeps memory across imagined steps (a ``start_rollout`` of
            its own, e.g. AR(1) noise): its memory belongs to rows of one rollout, which a
            tree level reorders; if it declares an invalid ``bytes_per_row``; or if one chunk
            (one episode per setting block) exceeds ``max_memory`` (``check_depth``).
    """

    def __init__(
        self,
        model,
        task: TaskKind,
        depth: int,
        device: torch.device | str = "cpu",
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
    ) -> None:
        if keeps_memory(model):
            raise ValueError(
                f"the shared-prefix tree needs a model without memory across imagined steps; "
                f"{type(model).__name__} defines start_rollout (use the independent tree)"
            )
        self.n_settings = capabilities_of(model).n_settings
        s = task.world.state_dim
        leaf_bytes, row_bytes = tree_bytes_per_leaf(s), generic_bytes_per_row(s)
        a = task.world.n_actions
        check_depth(depth, max_memory, lambda d: leaf_bytes, self.n_settings, a)
        self.model = model
        self.task = task
        self.depth = depth
        self.values = dynamics.value_table(task, device)
        self.discounts = [task.gamma**t for t in range(depth + 1)]
        model_bytes = model_bytes_per_row(model, self.values.device, s)
        # A block and a call take at most a quarter of the budget (a small budget shrinks them).
        working = max(a, max_memory // 4 // (row_bytes + model_bytes))
        self.block_rows = min(BLOCK_ROWS, max_rows or BLOCK_ROWS, working)
        self.call_rows = min(cache_rows(model_bytes, s), self.block_rows)
        fixed = self.block_rows * row_bytes + self.call_rows * model_bytes
        self.max_rows = max_rows or max(1, (max_memory - fixed) // leaf_bytes)
        tile = self.block_rows + a * self.n_settings
        self._actions = torch.arange(a, device=self.values.device).repeat(-(-tile // a))

    def leaf_scores(self, root, generator):
        m = self.n_settings
        per_setting = episodes_per_setting(root.shape[0], m)
        cols = max(1, self.max_rows // (self.n_leaves * m))
        if cols >= per_setting:
            yield slice(None), self.scores(root, generator)
            return
        blocks = torch.arange(root.shape[0], device=root.device).view(m, per_setting)
        for lo in range(0, per_setting, cols):
            rows = blocks[:, lo : lo + cols].reshape(-1)
            yield rows, self.scores(root[rows], generator)

    def arrival(
        self, state: torch.Tensor, action: torch.Tensor, nxt: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(reward, goal, hazard)`` of the imagined steps ``state --action--> nxt`` (``(R,)``
        each): the task's true sparse reward of the predicted state, as
        ``GenericScorer.arrival``."""
        return dynamics.outcome(self.task, nxt)

    def scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Leaf scores ``(E, L)`` of ``E`` root episodes (setting-major), level by level.

        Raises:
            ValueError: if the model returns a misshapen or non-finite prediction
                (``gridplan.planning.scorers.check_prediction``).
        """
        m, width, a = self.n_settings, root.shape[1], self.task.world.n_actions
        e = episodes_per_setting(root.shape[0], m)
        state = root.reshape(m, e, width)
        score = root.new_zeros(m, e)
        alive = torch.ones(m, e, dtype=torch.bool, device=root.device)
        leaf = root.new_empty(m, e * self.n_leaves)
        parents = max(1, self.block_rows // (a * m))
        # One block's children and predictions live in buffers reused by every block: fresh
        # block-sized tensors cost page faults on each block, and a gather of the parents'
        # rows (index_select) copies them faster than an expanded copy of 12-float rows.
        rows = m * a * min(parents, e * a ** (self.depth - 1))
        children, predicted = root.new_empty(2, rows, width).unbind(0)
        # Child j of a block reads its parent's row j // A (all A actions of a parent).
        siblings = torch.arange(rows // m, device=root.device) // a
        for t in range(self.depth):
            last = t == self.depth - 1
            n = state.shape[1]
            if not last:
                nxt_state = root.new_empty(m, a * n, width)
                nxt_score = root.new_empty(m, a * n)
                nxt_alive = alive.new_empty(m, a * n)
            settings = torch.arange(0, m * n, n, device=root.device).unsqueeze(1)
            for lo in range(0, n, parents):
                hi = min(n, lo + parents)
                k = a * (hi - lo)
                # Row (setting s, child j) of the block: parent s * n + lo + j // A.
                index = (settings + (siblings[:k] + lo)).view(-1)
                nodes = torch.index_select(
                    state.view(m * n, width), 0, index, out=children[: m * k]
                )
                action = self._actions[: m * k]
                out = predict_in_calls(
                    self.model,
                    nodes,
                    action,
                    generator,
                    self.call_rows,
                    m,
                    t,
                    "tree nodes",
                    out=predicted[: m * k],
                )
                reward, goal, hazard = self.arrival(nodes, action, out)
                live = alive.view(-1).index_select(0, index)
                # The generic scorer's float32 operations, in its order: score += g^t r alive.
                s = score.view(-1).index_select(0, index)
                s = s + self.discounts[t] * reward * live
                live = live & ~(goal | hazard)
                span = slice(a * lo, a * hi)
                if last:
                    s = s + self.discounts[self.depth] * self.values.lookup(out) * live
                    leaf[:, span] = s.view(m, k)
                else:
                    nxt_state[:, span] = out.view(m, k, width)
                    nxt_score[:, span] = s.view(m, k)
                    nxt_alive[:, span] = live.view(m, k)
            if not last:
                state, score, alive = nxt_state, nxt_score, nxt_alive
        return leaf.view(m * e, self.n_leaves)
