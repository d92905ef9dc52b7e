"""The fused leaf scorer of the built-in noise family: the relevant dims only, in place.

``gridplan.planning.scorers.GenericScorer`` rolls any world model through ``model.predict`` on full
``(R, S)`` states. The oracle and the controlled family ``M(sigma_r, sigma_i)`` (independent
or AR(1) noise; paper §4.2, appendix) are served by ``FusedNoiseScorer`` instead (this module
registers ``noise_scorer`` for ``NoiseModel``, ``OracleModel`` and ``AR1NoiseModel`` in
``gridplan.planning.registry``), which produces the same decisions with a fraction of the work
and randomness (``docs/PERFORMANCE.md``):

* **Only the dims V* reads are rolled** (``task.relevant_dims``: agent, key, carrying, door,
  and ``c1`` in a task that swaps its goal on it). The true transition computes them from
  relevant inputs only, the leaf score reads only them, and the noise is independent across
  dims, so ``c2``, ``d1``, ``d2`` and their noise cannot change a leaf score. Skipping them
  skips 5-6 of the 12 normal draws and both distractor draws per transition; on CPU the
  random draws are the bottleneck.
* **States are held in cells** (positions ``0..N-1``, flags ``0/1`` as float32) because the next
  imagined step reads a prediction only through its rounded cells and 0.5-thresholded flags.
  A noisy position is re-read as ``clamp(round((cell / 7 + noise) * 7), 0, 7)`` on the 8-grid
  (``N - 1`` in place of 7 on others) and a noisy flag
  as ``flag + noise > 0.5``: the same float32 operations ``NoiseModel.predict`` followed by
  ``to_cell`` / ``to_flag`` perform, so given the same noise the scores are bit-identical
  (``tests/test_fast_paths.py``).
* **Branch-free float arithmetic on dims-major buffers** ``(K, E, L)`` reused across steps and
  decisions: comparisons write 0/1 floats, ``where`` becomes ``lerp`` with a 0/1 weight, and a
  step is 25-45 in-place tensor ops with no indexing, no bool tensors and no host syncs.

Readings (``gridplan.core.readings``). The scorer honours every switch that can change a leaf
score. The flags' noise scale comes with ``sigma``. A carried dim is held twice, as the
belief (normalized units, one more buffer per row) and as the cell or bit read from it:
under ``transition="belief"`` the agent's and key's sub-cell offsets ride through the move;
under ``flags="carried"`` the carrying and door beliefs are kept unless their event sets
them to exactly 1; under ``bits="carried"`` in a task that reads ``c1`` its noisy value is
kept. The noise goes to the belief, ``clamp`` clamps it as ``NoiseModel.predict`` clamps
its predictions, and the cell or bit is re-read from it every step. With clean cells and
thresholded bits, clamping cannot change a rounded cell or a 0.5 threshold, so there it is
a no-op. ``distractors`` never reaches a leaf score. The tree is the planner's (the reading's
``tree`` unless the planner is given one). Under ``tree="shared-prefix"`` the noise
is drawn once per tree node, ``randn(K_n, E, 4^(t+1))`` at step ``t``, and every leaf under
a node gets that node's draw (leaf ``l`` the draw of its prefix ``l // 4^(D-1-t)``): the
leaves under a node share the noise of their common path, as ``gridplan.planning.tree.TreeScorer``
rolls them through ``predict``, with ``4 + 16 + ... + 4^D`` draws per dim and episode.

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

from gridplan.core.constants import CARRYING, MOVES, N_ACTIONS
from gridplan.core.readings import PROJECT, Reading, check
from gridplan.core.tasks import Task, TaskKind
from gridplan.core.values import table_size, value_table
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel
from gridplan.planning.registry import TREES, register_scorer, through_predict
from gridplan.planning.scorers import (
    DEFAULT_MAX_MEMORY,
    LeafScorer,
    action_sequences,
    check_depth,
    episodes_per_setting,
)

#: Leaf rows per noise draw unit, by device type. Part of the draw layout: changing it changes
#: which draw each leaf gets (not the distribution). CPU: a unit's noise and buffers (13-30 MB
#: at D <= 6) stay in a 32 MB last-level cache; 2^18 rows spill at D = 6 and run slower
#: (docs/PERFORMANCE.md). CUDA: large enough to fill the device.
UNIT_ROWS = {"cpu": 2**17, "cuda": 2**22}
#: Float32 buffers of one chunk row: K <= 7 state dims, 2 targets, 3 temporaries, score, alive
#: (one temporary takes the V* gather).
BUFFERS_PER_ROW = 14
#: Working memory of one leaf row of a chunk: the float32 buffers plus an int64 V* index
#: (a reading that carries beliefs adds one float32 per carried dim).
FUSED_BYTES_PER_ROW = BUFFERS_PER_ROW * 4 + 8
#: Largest V* table the scorer indexes: it computes the index in float32, exact below 2^24.
MAX_FUSED_TABLE = 2**24


def _at_least(buffer: torch.Tensor, numel: int) -> torch.Tensor:
    """``buffer`` if it holds ``numel`` elements, else a new one of that size (contents lost)."""
    if buffer.numel() >= numel:
        return buffer
    return torch.empty(numel, dtype=buffer.dtype, device=buffer.device)


def _runs(dims: list[int]) -> list[tuple[int, int]]:
    """Maximal runs ``[lo, hi)`` of consecutive integers in the ascending list ``dims``."""
    runs: list[tuple[int, int]] = []
    for d in dims:
        if runs and runs[-1][1] == d:
            runs[-1] = (runs[-1][0], d + 1)
        else:
            runs.append((d, d + 1))
    return runs


def unit_rows(device: torch.device | str) -> int:
    """Leaf rows per noise draw unit on ``device`` (``UNIT_ROWS``, CPU value for other types)."""
    return UNIT_ROWS.get(torch.device(device).type, UNIT_ROWS["cpu"])


class FusedNoiseScorer(LeafScorer):
    """Leaf scores of the noise family's imagined rollouts, on the task's relevant dims.

    Args:
        sigma: ``(M, S)`` per-setting noise std, normalized units (``NoiseModel.sigma``).
        rho: AR(1) correlation across imagined steps, or ``None`` for independent noise.
        task: reward, V* and relevant dims.
        depth: ``D >= 1``.
        device: where the V* table and the buffers live.
        max_memory: bytes for one unit's noise plus one chunk's buffers.
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).
        reading: the model's reading (the module docstring says how each switch is honoured).
        tree: the draws' tree, one of ``gridplan.planning.registry.TREES``; None: the
            reading's ``tree``.

    Raises:
        ValueError: if one episode's buffers, noise and action tables exceed ``max_memory``
            (``gridplan.planning.scorers.check_depth``), ``tree`` is unknown, ``sigma`` is not
            as wide as the task's world, or its V* table has ``MAX_FUSED_TABLE`` entries or
            more.
        TypeError: if ``reading`` is not a ``Reading``.
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
        reading: Reading = PROJECT,
        tree: str | None = None,
    ) -> None:
        self.reading = check(reading)
        self.tree = reading.tree if tree is None else tree
        if self.tree not in TREES:
            raise ValueError(f"tree must be one of {', '.join(TREES)}, got {tree!r}")
        world = task.world
        if sigma.shape[1] != world.state_dim:
            raise ValueError(
                f"noise model of {sigma.shape[1]} dims cannot plan in world {world.name!r} "
                f"({world.state_dim} dims)"
            )
        if table_size(task) >= MAX_FUSED_TABLE:
            raise ValueError(
                f"world {world.name!r}: the fused scorer indexes V* tables below "
                f"{MAX_FUSED_TABLE:,} entries, task {task.name!r} has {table_size(task):,}"
            )
        self.task = task
        self.world = world
        self.depth = depth
        self.rho = rho
        self.n_settings = sigma.shape[0]
        self.values = value_table(task, device)
        self.device = self.values.device
        # On the device: addcdiv(out=) refuses a CPU operand beside CUDA tensors, even 0-dim.
        self._cell_scale = torch.tensor(world.cell_scale, device=self.device)
        self.discounts = [task.gamma**t for t in range(depth + 1)]
        self.dims = list(task.relevant_dims)
        self.n_dims = len(self.dims)
        sig = sigma[:, self.dims].to(self.device)
        noisy = (sig > 0).any(dim=0).nonzero().flatten().tolist()
        #: Span ``[lo, hi)`` of relevant dims that receive noise (empty for the oracle).
        self.lo, self.hi = (noisy[0], noisy[-1] + 1) if noisy else (0, 0)
        #: Beliefs carried beside the cells: agent and key positions, the flags, the rolled
        #: ``c1``; indices into ``dims``, in buffer order (ascending).
        self.belief = reading.transition == "belief"
        self.carried = list(range(CARRYING)) if self.belief else []
        if reading.flags == "carried":
            self.carried += [CARRYING, CARRYING + 1]
        if reading.bits == "carried" and task.reads_c1:
            self.carried.append(self.n_dims - 1)
        self.n_buffers = BUFFERS_PER_ROW + len(self.carried)
        self.bytes_per_row = FUSED_BYTES_PER_ROW + 4 * len(self.carried)
        # Per leaf of one episode: chunk buffers, a unit's noise, the (D, L) moves being built.
        noisy_dims = self.hi - self.lo
        check_depth(depth, max_memory, lambda d: self.bytes_per_row + (4 * noisy_dims + 24) * d)
        self.scales = sig[:, self.lo : self.hi]
        self.quiet_settings = (self.scales == 0).all(dim=1).cpu()
        #: Per setting, the sigma shared by all its dims ``[lo, hi)``, or ``None``.
        self._shared_sigma = [
            float(row[0]) if row.numel() and bool((row == row[0]).all()) else None
            for row in self.scales.cpu()
        ]
        #: ``(D, 2, 1, L)`` x and y displacement of every leaf's step-``t`` action.
        moves = MOVES.to(self.device).float()[action_sequences(depth, self.device).T]
        self.moves = moves.permute(0, 2, 1).unsqueeze(2).contiguous()
        #: ``(2, 1, 1)`` the door cell, and the goal and hazard cells (``None`` without one).
        self.door_cell = self._cell(world.door_cell)
        self.goal_cell, self.hazard_cell = self._cell(task.goal), self._cell(task.hazard)
        self.max_memory = max_memory
        self.max_rows = max_rows or max(1, max_memory // 2 // self.bytes_per_row)
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
        z = self._noise[: math.prod(shape)].view(shape)
        shared = {self._shared_sigma[i] for i in settings.unique().tolist()}
        if self.tree == "independent" and len(shared) == 1 and None not in shared:
            # One sigma for the whole unit: the sampler writes x * sigma + 0, the same float32
            # product (and stream) as drawing x and multiplying after, one pass fewer.
            z.normal_(0.0, shared.pop(), generator=generator)
        else:
            if self.tree == "independent":
                torch.randn(shape, generator=generator, out=z)
            else:
                k, e = shape[1:3]
                for t in range(self.depth):
                    nodes = N_ACTIONS ** (t + 1)
                    draw = torch.randn((k, e, nodes, 1), generator=generator, device=self.device)
                    z[t].view(k, e, nodes, -1).copy_(
                        draw.expand(-1, -1, -1, self.n_leaves // nodes)
                    )
            z.mul_(self.scales[settings.to(self.device)].T.unsqueeze(2))
        if self.rho is not None:
            # Same float32 operations as AR1NoiseModel.predict: rho * e + c * fresh.
            keep = (1.0 - self.rho**2) ** 0.5
            for t in range(1, self.depth):
                z[t].mul_(keep).add_(z[t - 1] * self.rho)
        return z

    def scores(self, root: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        """Leaf scores ``(E, L)`` of ``root`` episodes (``gridplan.planning.scorers`` defines them).

        Args:
            root: ``(E, S)`` float states (read through rounded cells and thresholded flags).
            noise: ``(D, K_n, E, L)`` from ``draw_noise`` (any slice of it along ``E``), or None.

        Returns:
            ``(E, L)`` float32, a view of a reused buffer: consume it before the next call.
        """
        e = root.shape[0]
        rows = e * self.n_leaves
        self._work = _at_least(self._work, self.n_buffers * rows)
        self._index = _at_least(self._index, rows)
        work = self._work[: self.n_buffers * rows].view(self.n_buffers, e, self.n_leaves)
        state = work[: self.n_dims]
        agent, key, (carry, door) = state[0:2], state[2:4], state[CARRYING : CARRYING + 2]
        target, pair, (t1, t2, t3, score, alive) = work[7:9], work[9:11], work[9:14]
        nx = target[0]
        #: Four consecutive temporaries (target, t1, t2), free before and after the move.
        spare = work[7:11]
        beliefs = work[14:] if self.n_buffers > BUFFERS_PER_ROW else None
        positions, flags = self.dims[:CARRYING], self.dims[CARRYING:]
        n, scale = self.world.size, self.world.cell_scale
        cells = torch.round(root[:, positions] * scale).clamp_(0, n - 1)
        bits = (root[:, flags] > 0.5).to(root.dtype)
        state.copy_(torch.cat([cells, bits], dim=1).T.unsqueeze(2).expand_as(state))
        carry_belief = door_belief = None
        if beliefs is not None:
            columns = [self.dims[k] for k in self.carried]
            beliefs.copy_(root[:, columns].T.unsqueeze(2).expand_as(beliefs))
            if CARRYING in self.carried:
                k = self.carried.index(CARRYING)
                carry_belief, door_belief = beliefs[k], beliefs[k + 1]
        score.zero_()
        alive.fill_(1.0)
        for t in range(self.depth):
            if self.belief:
                # The sub-cell offset, belief - cell / (N - 1), rides through the move.
                beliefs[:CARRYING].sub_(torch.div(state[:CARRYING], scale, out=spare))
            # Agent, door and key (gridplan.core.env.relevant_step): a target off the grid clamps
            # back onto the agent's own cell; in the wall column only the open door admits.
            # t1..t3 are 0/1 masks: t1 target is the door cell, t2 ... and the door is open;
            # then t1 opens it (closed, carrying) and t3 moves (not the wall column, or t2).
            # Both coordinates go through one op where they can (agent, target, key and
            # (t1, t2) are adjacent rows): every op is a parallel region and a dispatch.
            torch.add(agent, self.moves[t], out=target).clamp_(0, n - 1)
            torch.eq(target, self.door_cell, out=pair)
            t1.mul_(t2)
            torch.mul(t1, door, out=t2)
            t1.sub_(t2).mul_(carry)
            door.add_(t1)
            if door_belief is not None:
                # A carried flag becomes exactly 1 where its event fires (0/1 weight).
                door_belief.addcmul_(door_belief, t1, value=-1.0).add_(t1)
            torch.ne(nx, self.world.wall_x, out=t3).add_(t2)
            agent.lerp_(target, t3)
            # Picking up: the agent ends on the key; a carried key follows the agent.
            torch.eq(agent, key, out=pair)
            t1.mul_(t2)
            if carry_belief is not None:
                torch.mul(carry, -1.0, out=t2).add_(1.0).mul_(t1)
                carry_belief.addcmul_(carry_belief, t2, value=-1.0).add_(t2)
            torch.maximum(carry, t1, out=carry)
            key.lerp_(agent, carry)
            if self.belief:
                beliefs[:CARRYING].add_(torch.div(state[:CARRYING], scale, out=spare))
            step_noise = None if noise is None else noise[t]
            if beliefs is None:
                if step_noise is not None:
                    self._add_noise(state, step_noise)
            else:
                self._add_noise_to_beliefs(state, beliefs, step_noise)
            self._score_arrival(t, state, score, alive, work[9:12])
        index = self._index[:rows]
        index.copy_(self._value_index(state, t1).view(-1))
        leaf_value = self.values.values_at(index, out=t2.view(-1)).view_as(score)
        score.add_(leaf_value.mul_(self.discounts[self.depth]).mul_(alive))
        return score

    def _add_noise(self, state: torch.Tensor, noise: torch.Tensor) -> None:
        """Add one step's noise to dims ``[lo, hi)`` and re-read them as the next step would."""
        self._add_noise_span(state, noise, self.lo, self.hi)

    def _add_noise_span(self, state: torch.Tensor, noise: torch.Tensor, lo: int, hi: int) -> None:
        """Add ``noise`` ``(hi - lo, E, L)`` to the clean cells and bits of dims ``[lo, hi)``
        and re-read them: positions through rounded, clamped cells, flags at 0.5."""
        split = min(max(CARRYING, lo), hi)
        if split > lo:
            pos = state[lo:split]
            # noise + cell / (N - 1) in one pass: addcdiv divides, then adds (no fused
            # multiply-add), the same two roundings as a division followed by an addition.
            torch.addcdiv(noise[: split - lo], pos, self._cell_scale, out=pos)
            pos.mul_(self.world.cell_scale).round_().clamp_(0, self.world.size - 1)
        if hi > split:
            flags = state[split:hi]
            torch.gt(flags.add_(noise[split - lo :]), 0.5, out=flags)

    def _add_noise_to_beliefs(
        self, state: torch.Tensor, beliefs: torch.Tensor, noise: torch.Tensor | None
    ) -> None:
        """``_add_noise`` for a reading that carries beliefs: noise on a carried dim goes to
        its belief, clamped to ``[0, 1]`` under ``clamp``, and the cell or bit is re-read
        from it (every step, noisy or not, as ``predict``'s next step reads it)."""
        if noise is not None:
            for k, d in enumerate(self.carried):
                if self.lo <= d < self.hi:
                    beliefs[k].add_(noise[d - self.lo])
            clean = [d for d in range(self.lo, self.hi) if d not in self.carried]
            for lo, hi in _runs(clean):
                self._add_noise_span(state, noise[lo - self.lo : hi - self.lo], lo, hi)
        if self.reading.clamp:
            beliefs.clamp_(0.0, 1.0)
        for k, d in enumerate(self.carried):
            if d < CARRYING:
                torch.mul(beliefs[k], self.world.cell_scale, out=state[d]).round_()
                state[d].clamp_(0, self.world.size - 1)
            else:
                torch.gt(beliefs[k], 0.5, out=state[d])

    def _c1(self, state: torch.Tensor) -> torch.Tensor | None:
        """The rolled ``c1`` flag (last relevant dim) where the goal swaps on it, else None."""
        return state[self.n_dims - 1] if self.task.reads_c1 else None

    def _cell(self, cell: tuple[int, int] | None) -> torch.Tensor | None:
        """``cell`` as a ``(2, 1, 1)`` float tensor on the scorer's device (``None`` for
        ``None``): both coordinates of ``(2, E, L)`` positions compared in one op."""
        if cell is None:
            return None
        return torch.tensor(cell, dtype=torch.float32, device=self.device).view(2, 1, 1)

    def _on_cell(self, state, cell, cells, swapped, c1, pair) -> torch.Tensor:
        """0/1 mask of leaves whose agent stands on ``cell`` (``cells``: it as ``_cell``), or on
        ``swapped`` where the rolled ``c1`` is 1 (``c1`` None: never swapped). Written into
        ``pair[0]``; uses ``pair[1]``."""
        out, tmp = pair
        if c1 is None or cell == swapped:
            torch.eq(state[0:2], cells, out=pair)
            return out.mul_(tmp)
        torch.eq(state[0], self._coordinate(cell[0], swapped[0], c1, tmp), out=out)
        return out.mul_(torch.eq(state[1], self._coordinate(cell[1], swapped[1], c1, tmp), out=tmp))

    @staticmethod
    def _coordinate(value: int, swapped: int, c1, out: torch.Tensor):
        """``value``, or ``value + c1 * (swapped - value)`` per leaf when it swaps on ``c1``
        (exact in float32: small integers)."""
        if c1 is None or value == swapped:
            return value
        return torch.mul(c1, swapped - value, out=out).add_(value)

    def _score_arrival(self, t, state, score, alive, temps) -> None:
        """Add ``gamma^t`` times the reward of arriving in the predicted state and retire leaves
        that reached a goal or hazard (``gridplan.core.env.outcome``, ``task.goal_cells``).
        ``temps``: three ``(E, L)`` temporaries, adjacent rows."""
        goal, hazard, c1 = self.task.goal, self.task.hazard, self._c1(state)
        at_goal = self._on_cell(state, goal, self.goal_cell, hazard or goal, c1, temps[0:2])
        score.addcmul_(alive, at_goal, value=self.discounts[t])
        if hazard is not None:
            at_hazard = self._on_cell(state, hazard, self.hazard_cell, goal, c1, temps[1:3])
            score.addcmul_(alive, at_hazard, value=-self.discounts[t])
            at_goal.add_(at_hazard)
        alive.addcmul_(alive, at_goal, value=-1.0)

    def _value_index(self, state: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Flat V* index (``gridplan.core.values.discrete_index`` order) computed in float32:
        exact, as every table is below ``MAX_FUSED_TABLE`` entries (2^15 in the default world)."""
        ax, ay, kx, ky, carry, door = state[:6]
        n = self.world.size
        # Each digit in one op, digit + radix * out (exact: integers below 2^24).
        torch.add(ay, ax, alpha=n, out=out)
        for digit, radix in ((kx, n), (ky, n), (carry, 2), (door, 2)):
            torch.add(digit, out, alpha=radix, out=out)
        c1 = self._c1(state)
        if c1 is not None:
            torch.add(c1, out, alpha=2, out=out)
        return out


def noise_scorer(
    model: NoiseModel,
    task: TaskKind,
    depth: int,
    device: torch.device | str = "cpu",
    max_memory: int = DEFAULT_MAX_MEMORY,
    max_rows: int | None = None,
    tree: str = "independent",
) -> LeafScorer:
    """``FusedNoiseScorer`` with the model's sigma, its AR(1) ``rho`` (None for independent
    noise) and its reading, drawing on ``tree`` (a ``gridplan.planning.registry.ScorerFactory``).

    A task of another kind than the paper's (MiniGrid DoorKey) rolls the model through its
    ``predict`` (``through_predict``): the fused arithmetic is the paper's world's.

    Raises:
        ValueError: if the model predicts another world than the task's (naming both).
    """
    if not isinstance(task, Task):
        return through_predict(model, task, depth, device, max_memory, max_rows, tree)
    if model.world != task.world:
        raise ValueError(
            f"the model predicts world {model.world.name!r}, task {task.name!r} is played on "
            f"{task.world.name!r}"
        )
    rho = model.rho if isinstance(model, AR1NoiseModel) else None
    return FusedNoiseScorer(
        model.sigma, rho, task, depth, device, max_memory, max_rows, model.reading, tree
    )


register_scorer(NoiseModel, noise_scorer)
register_scorer(OracleModel, noise_scorer)
register_scorer(AR1NoiseModel, noise_scorer)
