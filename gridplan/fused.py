"""Fused leaf rollout of the built-in noise family on the decision-relevant dims (fast path).

``gridplan.planner.Planner`` rolls any world model through ``model.predict`` on full ``(R, 12)``
states. For the oracle and the controlled family ``M(sigma_r, sigma_i)`` (independent or AR(1)
noise; paper §4.2, appendix) it uses this module instead, which produces the same decisions
with a fraction of the work and randomness:

* **Only the task's relevant dims are rolled** (``RELEVANT_DIMS[task]``: agent, key, carrying,
  door, and ``c1`` in Task B). The true transition computes them from relevant inputs only,
  the leaf score reads only them, and the noise is independent across dims, so ``c2``, ``d1``,
  ``d2`` and their noise cannot change a leaf score. Skipping them skips 5-6 of the 12 normal
  draws and both distractor draws per transition; on CPU the random draws are the bottleneck.
* **States are held in cells** (positions ``0..7``, flags ``0/1`` as float32) because the next
  imagined step reads a prediction only through its rounded cells and 0.5-thresholded flags.
  A noisy position is re-read as ``clamp(round((cell / 7 + noise) * 7), 0, 7)`` and a noisy flag
  as ``flag + noise > 0.5``: the same float32 operations ``NoiseModel.predict`` followed by
  ``to_cell`` / ``to_flag`` perform, so given the same noise the scores are bit-identical
  (``tests/test_fast_paths.py``).
* **Branch-free float arithmetic on dims-major buffers** ``(K, E, L)`` reused across steps and
  decisions: comparisons write 0/1 floats, ``where`` becomes ``lerp`` with a 0/1 weight, and a
  step is 30-47 in-place tensor ops with no indexing, no bool tensors and no host syncs.

Noise is drawn per *draw unit* of ``UNIT_ROWS`` leaf rows (whole episodes), all ``D`` steps at
once, as ``randn(D, K_n, E_u, L)`` on the contiguous span of relevant dims whose sigma is
non-zero in some setting; a unit whose settings are all noise-free draws nothing. Units depend
only on the batch and the device, so chunking for memory never changes a decision (see
``gridplan.planner`` for the one exception, a budget too small for one unit's noise).

Letter legend: ``E`` episodes, ``L = 4^D`` leaves, ``D`` depth, ``K`` relevant dims.
"""

from __future__ import annotations

import math

import torch

from gridplan.constants import (
    CARRYING,
    CELL_SCALE,
    DOOR_CELL,
    GOAL_A,
    GOAL_B_C1_FALSE,
    GOAL_B_C1_TRUE,
    GRID_SIZE,
    MOVES,
    RELEVANT_DIMS,
    WALL_X,
)
from gridplan.models import AR1NoiseModel, NoiseModel, OracleModel

#: Leaf rows per noise draw unit, by device type. Part of the draw layout: changing it changes
#: which draw each leaf gets (not the distribution). CPU: a unit's noise and buffers (13-30 MB
#: at D <= 6) stay in a 32 MB last-level cache; 2^18 rows spill at D = 6 and run 25% slower
#: (docs/PERFORMANCE.md). CUDA: large enough to fill the device.
UNIT_ROWS = {"cpu": 2**17, "cuda": 2**22}
#: Float32 buffers of one chunk row: K <= 7 state dims, 2 targets, 3 temporaries, score, alive
#: (one temporary takes the V* gather); an int64 index comes on top.
BUFFERS_PER_ROW = 14
#: Models whose ``predict`` is exactly the noise family's. Subclasses (which may change
#: ``predict``) are rolled through ``predict`` like any other model.
FUSED_MODELS = (NoiseModel, OracleModel, AR1NoiseModel)


def _at_least(buffer: torch.Tensor, numel: int) -> torch.Tensor:
    """``buffer`` if it holds ``numel`` elements, else a new one of that size (contents lost)."""
    if buffer.numel() >= numel:
        return buffer
    return torch.empty(numel, dtype=buffer.dtype, device=buffer.device)


def unit_rows(device: torch.device) -> int:
    """Leaf rows per noise draw unit on ``device`` (``UNIT_ROWS``, CPU value for other types)."""
    return UNIT_ROWS.get(torch.device(device).type, UNIT_ROWS["cpu"])


class RelevantRollout:
    """Leaf scores of the noise family's imagined rollouts, on the task's relevant dims.

    Args:
        sigma: ``(M, 12)`` per-setting noise std, normalized units (``NoiseModel.sigma``).
        rho: AR(1) correlation across imagined steps, or ``None`` for independent noise.
        sequences: ``(L, D)`` long action sequences of the leaves
            (``gridplan.planner.action_sequences``).
        task: ``"A"`` or ``"B"``.
        discounts: ``D + 1`` floats ``gamma^t``.
        values: the task's flat V* table (``ValueTable.table``), on the rollout's device.
    """

    def __init__(self, sigma, rho, sequences, task, discounts, values) -> None:
        device = values.device
        self.n_leaves, self.depth = sequences.shape
        self.task = task
        self.rho = rho
        self.discounts = discounts
        self.values = values
        self.dims = RELEVANT_DIMS[task]
        self.n_dims = len(self.dims)
        sig = sigma[:, list(self.dims)].to(device)
        noisy = (sig > 0).any(dim=0).nonzero().flatten().tolist()
        #: Span ``[lo, hi)`` of relevant dims that receive noise (empty for the oracle).
        self.lo, self.hi = (noisy[0], noisy[-1] + 1) if noisy else (0, 0)
        self.scales = sig[:, self.lo : self.hi]
        self.quiet_settings = (self.scales == 0).all(dim=1).cpu()
        #: ``(D, L)`` x and y displacement of every leaf's step-``t`` action.
        moves = MOVES.to(device).float()[sequences.T.to(device)]
        self.dx, self.dy = (m.contiguous() for m in moves.unbind(dim=2))
        self._work = torch.empty(0, device=device)
        self._index = torch.empty(0, dtype=torch.long, device=device)
        self._noise = torch.empty(0, device=device)

    @classmethod
    def for_model(cls, model, sequences, task, discounts, values) -> RelevantRollout | None:
        """A rollout for ``model`` if it is exactly a built-in noise-family model, else None."""
        if type(model) not in FUSED_MODELS:
            return None
        rho = model.rho if isinstance(model, AR1NoiseModel) else None
        return cls(model.sigma, rho, sequences, task, discounts, values)

    def draw_noise(self, settings: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        """Noise of one draw unit: ``(D, K_n, E, L)`` normalized units, or ``None`` if the unit's
        settings are all noise-free on the relevant dims.

        Args:
            settings: ``(E,)`` long setting index of each episode of the unit (on CPU).
            generator: the planner's stream, on the rollout's device.
        """
        if self.hi == self.lo or bool(self.quiet_settings[settings].all()):
            return None
        device = self.values.device
        shape = (self.depth, self.hi - self.lo, settings.shape[0], self.n_leaves)
        self._noise = _at_least(self._noise, math.prod(shape))
        z = torch.randn(shape, generator=generator, out=self._noise[: math.prod(shape)].view(shape))
        scale = self.scales[settings.to(device)].T.unsqueeze(2)
        z.mul_(scale)
        if self.rho is not None:
            # Same float32 operations as AR1NoiseModel.predict: rho * e + c * fresh.
            keep = (1.0 - self.rho**2) ** 0.5
            for t in range(1, self.depth):
                z[t].mul_(keep).add_(z[t - 1] * self.rho)
        return z

    def scores(self, root: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        """Leaf scores ``(E, L)`` of ``root`` episodes, as ``Planner.leaf_scores`` defines them.

        Args:
            root: ``(E, 12)`` float states (read through rounded cells and thresholded flags).
            noise: ``(D, K_n, E, L)`` from ``draw_noise`` (any slice of it along ``E``), or None.

        Returns:
            ``(E, L)`` float32, a view of a reused buffer: consume it before the next call.
        """
        e = root.shape[0]
        rows = e * self.n_leaves
        self._work = _at_least(self._work, BUFFERS_PER_ROW * rows)
        self._index = _at_least(self._index, rows)
        work = self._work[: BUFFERS_PER_ROW * rows].view(BUFFERS_PER_ROW, e, self.n_leaves)
        k = self.n_dims
        state = work[:k]
        ax, ay, kx, ky, carry, door = state[:6]
        nx, ny, t1, t2, t3, score, alive = work[7:14]
        cells = torch.round(root[:, :CARRYING] * CELL_SCALE).clamp_(0, GRID_SIZE - 1)
        flags = (root[:, CARRYING:k] > 0.5).to(root.dtype)
        state.copy_(torch.cat([cells, flags], dim=1).T.unsqueeze(2).expand_as(state))
        score.zero_()
        alive.fill_(1.0)
        for t in range(self.depth):
            # Agent, door and key (gridplan.env.relevant_step): a target off the grid clamps
            # back onto the agent's own cell; in the wall column only the open door admits.
            # t1..t3 are 0/1 masks: t3 target in the wall column, t1 target is the door cell,
            # t2 ... and the door is open; then t1 opens it (closed, carrying) and t3 moves.
            torch.add(ax, self.dx[t], out=nx).clamp_(0, GRID_SIZE - 1)
            torch.add(ay, self.dy[t], out=ny).clamp_(0, GRID_SIZE - 1)
            torch.eq(nx, WALL_X, out=t3)
            torch.eq(ny, DOOR_CELL[1], out=t1).mul_(t3)
            torch.mul(t1, door, out=t2)
            t1.sub_(t2).mul_(carry)
            door.add_(t1)
            torch.sub(t2, t3, out=t3).add_(1.0)
            ax.lerp_(nx, t3)
            ay.lerp_(ny, t3)
            # Picking up: the agent ends on the key; a carried key follows the agent.
            torch.eq(ax, kx, out=t1)
            torch.eq(ay, ky, out=t2)
            torch.maximum(carry, t1.mul_(t2), out=carry)
            kx.lerp_(ax, carry)
            ky.lerp_(ay, carry)
            if noise is not None:
                self._add_noise(state, noise[t])
            self._score_arrival(t, ax, ay, state, score, alive, t1, t2, t3)
        index = self._index[:rows]
        index.copy_(self._value_index(state, t1).view(-1))
        leaf_value = torch.index_select(self.values, 0, index, out=t2.view(-1)).view_as(score)
        score.add_(leaf_value.mul_(self.discounts[self.depth]).mul_(alive))
        return score

    def _add_noise(self, state: torch.Tensor, noise: torch.Tensor) -> None:
        """Add one step's noise to dims ``[lo, hi)`` and re-read them as the next step would."""
        split = min(max(CARRYING, self.lo), self.hi)
        if split > self.lo:
            pos = state[self.lo : split]
            pos.div_(CELL_SCALE).add_(noise[: split - self.lo]).mul_(CELL_SCALE)
            pos.round_().clamp_(0, GRID_SIZE - 1)
        if self.hi > split:
            flags = state[split : self.hi]
            torch.gt(flags.add_(noise[split - self.lo :]), 0.5, out=flags)

    def _score_arrival(self, t, ax, ay, state, score, alive, t1, t2, t3) -> None:
        """Add ``gamma^t`` times the reward of arriving in the predicted state and retire leaves
        that reached a goal or hazard (``gridplan.env.outcome``)."""
        if self.task == "A":
            torch.eq(ax, GOAL_A[0], out=t1)
            t1.mul_(torch.eq(ay, GOAL_A[1], out=t2))
            score.addcmul_(alive, t1, value=self.discounts[t])
            alive.addcmul_(alive, t1, value=-1.0)
            return
        c1 = state[self.n_dims - 1]
        low, high = GOAL_B_C1_FALSE[1], GOAL_B_C1_TRUE[1]
        # Both Task B cells lie in the same column; c1 picks which row is the goal.
        torch.eq(ax, GOAL_B_C1_TRUE[0], out=t1)
        goal_y = torch.mul(c1, high - low, out=t3).add_(low)
        torch.eq(ay, goal_y, out=t2).mul_(t1)
        hazard_y = goal_y.neg_().add_(low + high)
        torch.eq(ay, hazard_y, out=t3).mul_(t1)
        score.addcmul_(alive, t2, value=self.discounts[t])
        score.addcmul_(alive, t3, value=-self.discounts[t])
        alive.addcmul_(alive, t2.add_(t3), value=-1.0)

    def _value_index(self, state: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Flat V* index (``gridplan.values.discrete_index`` order) computed in float32: the
        largest index, 2^15 - 1, is exact."""
        ax, ay, kx, ky, carry, door = state[:6]
        torch.mul(ax, GRID_SIZE, out=out).add_(ay).mul_(GRID_SIZE).add_(kx)
        out.mul_(GRID_SIZE).add_(ky).mul_(2).add_(carry).mul_(2).add_(door)
        if self.task == "B":
            out.mul_(2).add_(state[self.n_dims - 1])
        return out
