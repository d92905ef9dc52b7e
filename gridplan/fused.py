"""The fused leaf scorer of the built-in noise family: the relevant dims only, in place.

``gridplan.scorers.GenericScorer`` rolls any world model through ``model.predict`` on full
``(R, 12)`` states. The oracle and the controlled family ``M(sigma_r, sigma_i)`` (independent
or AR(1) noise; paper §4.2, appendix) declare ``FusedNoiseScorer`` instead
(``NoiseModel.leaf_scorer``), which produces the same decisions with a fraction of the work
and randomness (``docs/PERFORMANCE.md``):

* **Only the dims V* reads are rolled** (``task.relevant_dims``: agent, key, carrying, door,
  and ``c1`` in a task that swaps its goal on it). The true transition computes them from
  relevant inputs only, the leaf score reads only them, and the noise is independent across
  dims, so ``c2``, ``d1``, ``d2`` and their noise cannot change a leaf score. Skipping them
  skips 5-6 of the 12 normal draws and both distractor draws per transition; on CPU the
  random draws are the bottleneck.
* **States are held in cells** (positions ``0..7``, flags ``0/1`` as float32) because the next
  imagined step reads a prediction only through its rounded cells and 0.5-thresholded flags.
  A noisy position is re-read as ``clamp(round((cell / 7 + noise) * 7), 0, 7)`` and a noisy flag
  as ``flag + noise > 0.5``: the same float32 operations ``NoiseModel.predict`` followed by
  ``to_cell`` / ``to_flag`` perform, so given the same noise the scores are bit-identical
  (``tests/test_fast_paths.py``).
* **Branch-free float arithmetic on dims-major buffers** ``(K, E, L)`` reused across steps and
  decisions: comparisons write 0/1 floats, ``where`` becomes ``lerp`` with a 0/1 weight, and a
  step is 30-50 in-place tensor ops with no indexing, no bool tensors and no host syncs.

Draw units and memory. Noise is drawn per *draw unit* of ``UNIT_ROWS`` leaf rows (whole
episodes), all ``D`` steps at once, as ``randn(D, K_n, E_u, L)`` on the contiguous span of
relevant dims whose sigma is non-zero in some setting; a unit whose settings are all
noise-free draws nothing. Units depend only on the batch and the device, so ``max_rows``
never changes a decision, nor does ``max_memory`` while it holds twice a unit's noise (one
unit's noise is 13-22 MB on CPU at ``D <= 6``; a smaller budget shrinks the unit). Half of
``max_memory`` goes to one unit's noise, half to the chunk buffers
(``FUSED_BYTES_PER_ROW`` per leaf row).

Letter legend: ``E`` episodes, ``L = 4^D`` leaves, ``D`` depth, ``K`` relevant dims.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from gridplan.constants import CARRYING, CELL_SCALE, DOOR_CELL, GRID_SIZE, MOVES, WALL_X
from gridplan.scorers import (
    DEFAULT_MAX_MEMORY,
    LeafScorer,
    action_sequences,
    episodes_per_setting,
)
from gridplan.tasks import Task

#: Leaf rows per noise draw unit, by device type. Part of the draw layout: changing it changes
#: which draw each leaf gets (not the distribution). CPU: a unit's noise and buffers (13-30 MB
#: at D <= 6) stay in a 32 MB last-level cache; 2^18 rows spill at D = 6 and run 25% slower
#: (docs/PERFORMANCE.md). CUDA: large enough to fill the device.
UNIT_ROWS = {"cpu": 2**17, "cuda": 2**22}
#: Float32 buffers of one chunk row: K <= 7 state dims, 2 targets, 3 temporaries, score, alive
#: (one temporary takes the V* gather).
BUFFERS_PER_ROW = 14
#: Working memory of one leaf row of a chunk: the float32 buffers plus an int64 V* index.
FUSED_BYTES_PER_ROW = BUFFERS_PER_ROW * 4 + 8


def _at_least(buffer: torch.Tensor, numel: int) -> torch.Tensor:
    """``buffer`` if it holds ``numel`` elements, else a new one of that size (contents lost)."""
    if buffer.numel() >= numel:
        return buffer
    return torch.empty(numel, dtype=buffer.dtype, device=buffer.device)


def unit_rows(device: torch.device | str) -> int:
    """Leaf rows per noise draw unit on ``device`` (``UNIT_ROWS``, CPU value for other types)."""
    return UNIT_ROWS.get(torch.device(device).type, UNIT_ROWS["cpu"])


class FusedNoiseScorer(LeafScorer):
    """Leaf scores of the noise family's imagined rollouts, on the task's relevant dims.

    Args:
        sigma: ``(M, 12)`` per-setting noise std, normalized units (``NoiseModel.sigma``).
        rho: AR(1) correlation across imagined steps, or ``None`` for independent noise.
        task: reward, V* and relevant dims.
        depth: ``D >= 1``.
        device: where the V* table and the buffers live.
        max_memory: bytes for one unit's noise plus one chunk's buffers.
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
    """

    def __init__(
        self,
        sigma: torch.Tensor,
        rho: float | None,
        task: Task,
        depth: int,
        device: torch.device | str = "cpu",
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
    ) -> None:
        self.task = task
        self.depth = depth
        self.rho = rho
        self.n_settings = sigma.shape[0]
        self.values = task.value_table(device)
        self.device = self.values.device
        self.discounts = [task.gamma**t for t in range(depth + 1)]
        self.dims = list(task.relevant_dims)
        self.n_dims = len(self.dims)
        sig = sigma[:, self.dims].to(self.device)
        noisy = (sig > 0).any(dim=0).nonzero().flatten().tolist()
        #: Span ``[lo, hi)`` of relevant dims that receive noise (empty for the oracle).
        self.lo, self.hi = (noisy[0], noisy[-1] + 1) if noisy else (0, 0)
        self.scales = sig[:, self.lo : self.hi]
        self.quiet_settings = (self.scales == 0).all(dim=1).cpu()
        #: ``(D, L)`` x and y displacement of every leaf's step-``t`` action.
        moves = MOVES.to(self.device).float()[action_sequences(depth, self.device).T]
        self.dx, self.dy = (m.contiguous() for m in moves.unbind(dim=2))
        self.max_memory = max_memory
        self.max_rows = max_rows or max(1, max_memory // 2 // FUSED_BYTES_PER_ROW)
        self._work = torch.empty(0, device=self.device)
        self._index = torch.empty(0, dtype=torch.long, device=self.device)
        self._noise = torch.empty(0, device=self.device)

    def unit_episodes(self) -> int:
        """Episodes per draw unit: ``UNIT_ROWS`` leaf rows of the device, fewer if one unit's
        noise would take more than half of ``max_memory``."""
        noise_per_row = 4 * self.depth * max(1, self.hi - self.lo)
        rows = min(unit_rows(self.device), self.max_memory // (2 * noise_per_row))
        return max(1, rows // self.n_leaves)

    def units(self, batch: int) -> Iterator[tuple[int, int, torch.Tensor]]:
        """``(lo, hi, settings)`` of each draw unit of a ``batch``-episode batch, in draw
        order: episodes ``[lo, hi)`` and their ``(hi - lo,)`` long setting index (CPU).

        Raises:
            ValueError: if the batch does not split into the setting blocks.
        """
        settings = torch.arange(batch) // episodes_per_setting(batch, self.n_settings)
        unit = self.unit_episodes()
        for lo in range(0, batch, unit):
            hi = min(batch, lo + unit)
            yield lo, hi, settings[lo:hi]

    def leaf_scores(self, root, generator):
        chunk = max(1, self.max_rows // self.n_leaves)
        for lo, hi, settings in self.units(root.shape[0]):
            noise = self.draw_noise(settings, generator)
            for c0 in range(lo, hi, chunk):
                c1 = min(hi, c0 + chunk)
                part = None if noise is None else noise[:, :, c0 - lo : c1 - lo]
                yield slice(c0, c1), self.scores(root[c0:c1], part)

    def draw_noise(self, settings: torch.Tensor, generator: torch.Generator) -> torch.Tensor | None:
        """Noise of one draw unit: ``(D, K_n, E, L)`` normalized units on the relevant dims
        ``[lo, hi)``, or ``None`` if the unit's settings are all noise-free there.

        Args:
            settings: ``(E,)`` long setting index of each episode of the unit (on CPU).
            generator: the planner's stream, on the scorer's device.

        Returns:
            A view of a reused buffer: the next call overwrites it.
        """
        if self.hi == self.lo or bool(self.quiet_settings[settings].all()):
            return None
        shape = (self.depth, self.hi - self.lo, settings.shape[0], self.n_leaves)
        self._noise = _at_least(self._noise, math.prod(shape))
        z = torch.randn(shape, generator=generator, out=self._noise[: math.prod(shape)].view(shape))
        scale = self.scales[settings.to(self.device)].T.unsqueeze(2)
        z.mul_(scale)
        if self.rho is not None:
            # Same float32 operations as AR1NoiseModel.predict: rho * e + c * fresh.
            keep = (1.0 - self.rho**2) ** 0.5
            for t in range(1, self.depth):
                z[t].mul_(keep).add_(z[t - 1] * self.rho)
        return z

    def scores(self, root: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        """Leaf scores ``(E, L)`` of ``root`` episodes (``gridplan.scorers`` defines them).

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
        state = work[: self.n_dims]
        ax, ay, kx, ky, carry, door = state[:6]
        nx, ny, t1, t2, t3, score, alive = work[7:14]
        positions, flags = self.dims[:CARRYING], self.dims[CARRYING:]
        cells = torch.round(root[:, positions] * CELL_SCALE).clamp_(0, GRID_SIZE - 1)
        bits = (root[:, flags] > 0.5).to(root.dtype)
        state.copy_(torch.cat([cells, bits], dim=1).T.unsqueeze(2).expand_as(state))
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
            self._score_arrival(t, state, score, alive, t1, t2, t3)
        index = self._index[:rows]
        index.copy_(self._value_index(state, t1).view(-1))
        leaf_value = self.values.values_at(index, out=t2.view(-1)).view_as(score)
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

    def _c1(self, state: torch.Tensor) -> torch.Tensor | None:
        """The rolled ``c1`` flag (last relevant dim) where the goal swaps on it, else None."""
        return state[self.n_dims - 1] if self.task.reads_c1 else None

    def _on_cell(self, state, cell, swapped, c1, out, tmp) -> torch.Tensor:
        """0/1 mask of leaves whose agent stands on ``cell``, or on ``swapped`` where the
        rolled ``c1`` is 1 (``c1`` None: never swapped). Written into ``out``; uses ``tmp``."""
        torch.eq(state[0], self._coordinate(cell[0], swapped[0], c1, tmp), out=out)
        return out.mul_(torch.eq(state[1], self._coordinate(cell[1], swapped[1], c1, tmp), out=tmp))

    @staticmethod
    def _coordinate(value: int, swapped: int, c1, out: torch.Tensor):
        """``value``, or ``value + c1 * (swapped - value)`` per leaf when it swaps on ``c1``
        (exact in float32: small integers)."""
        if c1 is None or value == swapped:
            return value
        return torch.mul(c1, swapped - value, out=out).add_(value)

    def _score_arrival(self, t, state, score, alive, t1, t2, t3) -> None:
        """Add ``gamma^t`` times the reward of arriving in the predicted state and retire leaves
        that reached a goal or hazard (``gridplan.env.outcome``, ``task.goal_cells``)."""
        goal, hazard, c1 = self.task.goal, self.task.hazard, self._c1(state)
        at_goal = self._on_cell(state, goal, hazard or goal, c1, t1, t3)
        score.addcmul_(alive, at_goal, value=self.discounts[t])
        if hazard is not None:
            at_hazard = self._on_cell(state, hazard, goal, c1, t2, t3)
            score.addcmul_(alive, at_hazard, value=-self.discounts[t])
            at_goal.add_(at_hazard)
        alive.addcmul_(alive, at_goal, value=-1.0)

    def _value_index(self, state: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Flat V* index (``gridplan.values.discrete_index`` order) computed in float32: the
        largest index, 2^15 - 1, is exact."""
        ax, ay, kx, ky, carry, door = state[:6]
        torch.mul(ax, GRID_SIZE, out=out).add_(ay).mul_(GRID_SIZE).add_(kx)
        out.mul_(GRID_SIZE).add_(ky).mul_(2).add_(carry).mul_(2).add_(door)
        c1 = self._c1(state)
        if c1 is not None:
            out.mul_(2).add_(c1)
        return out
