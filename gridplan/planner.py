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

Two rollouts compute the leaf scores:

* **generic**: any model, through ``model.predict`` on full ``(R, 12)`` states;
* **fused** (default for ``NoiseModel``, ``OracleModel``, ``AR1NoiseModel`` themselves):
  ``gridplan.fused.RelevantRollout`` rolls only the task's relevant dims with in-place float
  arithmetic and draws noise only where it can change a score. Its decisions have the same
  distribution as the generic rollout's and are identical given the same noise
  (``leaf_noise``); for the oracle they are identical outright. See ``docs/PERFORMANCE.md``.

Random draws of ``act``: first the ``(B, 4)`` tie-break uniforms, then the model's noise. The
generic rollout draws chunk by chunk through ``model.predict``, so for a noisy model the
chunking (``max_memory``) decides which leaf gets which draw. The fused rollout draws per
fixed unit of ``gridplan.fused.UNIT_ROWS`` leaf rows (``leaf_noise``), so ``max_rows`` never
changes its decisions, nor does ``max_memory`` while it holds twice a unit's noise (one unit's
noise is 13-22 MB on CPU at ``D <= 6``; smaller budgets shrink the unit).

Memory: a chunk of ``R`` leaf rows needs about ``R * bytes_per_row(D)`` bytes; episodes are
split into chunks that fit ``max_memory`` (setting-major blocks are kept intact, see
``gridplan.models``).
"""

from __future__ import annotations

import torch

from gridplan.constants import AGENT_X, AGENT_Y, C1, GAMMA, N_ACTIONS, STATE_DIM, check_task
from gridplan.env import check_state, outcome, to_cell, to_flag
from gridplan.fused import BUFFERS_PER_ROW, RelevantRollout, unit_rows
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


def bytes_per_row(depth: int, fused: bool = False) -> int:
    """Working memory of one leaf row of a chunk, in bytes.

    Generic rollout: a few live ``(12,)`` state copies plus score and flags (a model's own
    activations come on top). Fused rollout: its float32 buffers and int64 V* index;
    its chunks get half of ``max_memory`` and a draw unit's noise (``4 * D * K`` bytes per
    row) the other half, so the two together stay within it.
    """
    if fused:
        return BUFFERS_PER_ROW * 4 + 8
    return 6 * STATE_DIM * 4 + 3 * 8 + 16


class Planner:
    """Receding-horizon full-width planner.

    Args:
        model: any ``WorldModel`` (duck-typed ``predict``; optional ``start_rollout``).
        depth: search depth ``D >= 1``; ``4^D`` leaves per episode.
        task: ``"A"`` or ``"B"``: the reward applied to predicted states and the V* table.
        gamma: discount, default 0.95.
        max_memory: bytes allowed for the leaf tensors of one chunk (default 2 GiB).
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
        device: where the V* table lives (move it with the states).
        fused: roll the built-in noise family through the fused relevant-dims rollout
            (default); ``False`` forces ``model.predict`` for every model.

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
        fused: bool = True,
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
        self.discounts = [gamma**t for t in range(depth + 1)]
        self.rollout = None
        if fused:
            self.rollout = RelevantRollout.for_model(
                model, self.sequences, task, self.discounts, self.values.table
            )
        self.max_memory = max_memory
        fused_rollout = self.rollout is not None
        # The fused rollout gives half the budget to a draw unit's noise, half to the chunk.
        chunk_budget = max_memory // 2 if fused_rollout else max_memory
        self.max_rows = max_rows or max(1, chunk_budget // bytes_per_row(depth, fused_rollout))

    def _settings(self) -> int:
        return getattr(self.model, "n_settings", 1)

    def _check_batch(self, root: torch.Tensor) -> int:
        """Validate ``root`` and return the number of episodes per setting."""
        check_state(root, "root state")
        m = self._settings()
        if root.shape[0] % m:
            raise ValueError(
                f"batch of {root.shape[0]} episodes does not split into {m} setting blocks"
            )
        return root.shape[0] // m

    def _unit_episodes(self, device: torch.device | str) -> int:
        """Episodes per noise draw unit of the fused rollout: ``UNIT_ROWS`` leaf rows of the
        device, fewer if one unit's noise would take more than half of ``max_memory``."""
        rows = unit_rows(device)
        if self.rollout is not None:
            noise_per_row = 4 * self.depth * max(1, self.rollout.hi - self.rollout.lo)
            rows = min(rows, self.max_memory // (2 * noise_per_row))
        return max(1, rows // self.n_leaves)

    def _units(self, b: int, per_setting: int, device):
        """``(lo, hi, settings)`` of each draw unit of a ``b``-episode batch, in draw order."""
        settings = torch.arange(b) // per_setting
        unit = self._unit_episodes(device)
        for lo in range(0, b, unit):
            hi = min(b, lo + unit)
            yield lo, hi, settings[lo:hi]

    def leaf_noise(
        self, root: torch.Tensor, generator: torch.Generator, episodes: int | None = None
    ) -> torch.Tensor | None:
        """The noise the fused rollout adds to the leaves of ``root``, drawn exactly as
        ``action_values`` draws it from ``generator`` (and ``act`` after its tie draws).

        For replaying the fused rollout's draws elsewhere (the reference comparison of
        ``scripts/bench_planner.py``, ``tests/test_fast_paths.py``).

        Args:
            root: ``(B, 12)`` root states, as given to ``action_values``.
            generator: in the state ``action_values`` would find it.
            episodes: return only the first ``E`` episodes' noise, drawing only the units
                that hold them (default: all ``B``).

        Returns:
            ``(D, K, E, L)`` float32 noise in normalized units on the task's relevant dims
            ``RELEVANT_DIMS[task]`` (zeros where nothing is drawn), or ``None`` if the model is
            not rolled by the fused rollout or no noise is drawn.

        Raises:
            ValueError: as ``action_values``, or if ``episodes`` is not in ``1..B``.
        """
        per_setting = self._check_batch(root)
        b = root.shape[0]
        e = b if episodes is None else episodes
        if not 1 <= e <= b:
            raise ValueError(f"episodes must lie in 1..{b}, got {episodes}")
        if self.rollout is None or self.rollout.hi == self.rollout.lo:
            return None
        r = self.rollout
        out = root.new_zeros(self.depth, r.n_dims, e, self.n_leaves)
        for lo, hi, settings in self._units(b, per_setting, root.device):
            if lo >= e:
                break
            noise = r.draw_noise(settings, generator)
            if noise is not None:
                out[:, r.lo : r.hi, lo : min(hi, e)] = noise[:, :, : min(hi, e) - lo]
        return out

    def leaf_scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Scores of all leaves of ``root`` episodes, unchunked: ``(B, L)``.

        Args:
            root: ``(B, 12)`` true states, setting-major when the model has several settings.
            generator: source of the model's noise.

        Raises:
            ValueError: if the model returns a misshapen prediction (generic rollout).
        """
        if self.rollout is None:
            return self._generic_scores(root, generator)
        per_setting = self._check_batch(root)
        out = root.new_empty(root.shape[0], self.n_leaves)
        for lo, hi, settings in self._units(root.shape[0], per_setting, root.device):
            noise = self.rollout.draw_noise(settings, generator)
            out[lo:hi] = self.rollout.scores(root[lo:hi], noise)
            del noise
        return out

    def _generic_scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
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

    def _best_per_first_action(self, scores: torch.Tensor) -> torch.Tensor:
        return scores.view(-1, N_ACTIONS, self.n_leaves // N_ACTIONS).amax(dim=2)

    def action_values(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Best leaf score under each first action: ``(B, 4)``, chunked by ``max_rows``.

        Raises:
            ValueError: on a malformed root state or a batch that does not split into the
                model's setting blocks.
        """
        per_setting = self._check_batch(root)
        b = root.shape[0]
        q = root.new_empty(b, N_ACTIONS)
        if self.rollout is not None:
            chunk = max(1, self.max_rows // self.n_leaves)
            for lo, hi, settings in self._units(b, per_setting, root.device):
                noise = self.rollout.draw_noise(settings, generator)
                for c0 in range(lo, hi, chunk):
                    c1 = min(hi, c0 + chunk)
                    part = None if noise is None else noise[:, :, c0 - lo : c1 - lo]
                    scores = self.rollout.scores(root[c0:c1], part)
                    q[c0:c1] = self._best_per_first_action(scores)
                # max_memory counts one unit's noise: free it before the next is drawn.
                del noise, part
            return q
        m = self._settings()
        cols = max(1, self.max_rows // (self.n_leaves * m))
        blocks = root.view(m, per_setting, STATE_DIM)
        q = q.view(m, per_setting, N_ACTIONS)
        for lo in range(0, per_setting, cols):
            chunk = blocks[:, lo : lo + cols].reshape(-1, STATE_DIM)
            best = self._best_per_first_action(self._generic_scores(chunk, generator))
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
