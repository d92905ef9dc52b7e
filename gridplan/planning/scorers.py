"""Leaf scorers: the interface between the planner's search and a world model (paper §3
"Planner", appendix D).

The search (``gridplan.planning.planner.Planner``) expands all ``L = 4^D`` action sequences of every
episode and needs one number per leaf; a ``LeafScorer`` supplies them. Leaf ``l`` runs the
sequence ``action_sequences(D)[l]`` (digit ``t`` of ``l`` in base 4, most significant first,
so the leaves of first action ``a`` form the block ``[a * L/4, (a + 1) * L/4)``). Its score
is the true sparse reward of the imagined states, discounted, until the first goal or hazard
(terminal), plus ``gamma^D`` times V* of the last imagined state if none was reached::

    score(l) = sum_{t < D} gamma^t r(s_hat_{t+1}) [alive] + gamma^D V*(s_hat_D) [alive]

read through rounded cells and 0.5-thresholded flags (``gridplan.core.env``,
``gridplan.core.values``).

A scorer chooses everything the search need not know: how to chunk the batch for memory,
how and where it draws the model's randomness, whether leaves share prefixes. Which scorer
serves a model is the planner's decision (``gridplan.planning.registry``): ``GenericScorer``
serves any model through ``model.predict``; ``RewardScorer`` a plug-in that predicts its own
reward; ``gridplan.planning.fused.FusedNoiseScorer`` the built-in noise family;
``gridplan.planning.tree.TreeScorer`` expands the tree level by level, one prediction per tree
node (the planner's ``shared-prefix`` tree, chosen by default for deterministic models).

Model declarations read here (all optional):

* ``deterministic = True``: the leaf scores of the model's rollouts do not depend on the
  generator, and ``predict`` keeps no memory across calls (the learned MLP's mean prediction;
  the oracle's relevant dims). Its leaves can then share prefixes and its ``predict`` calls
  can be split anywhere without changing a single score.
* ``bytes_per_row``: the model's own working memory per row of a ``predict`` call, in bytes
  (its activations). A deterministic model that declares none is measured once on a probe
  batch (``measured_bytes_per_row``); a stochastic one counts as 0, because probing would run
  its ``predict``, draws and memory included, outside a rollout.

Multi-setting models: ``model.n_settings = M`` splits a batch into ``M`` equal contiguous
setting blocks (``gridplan.models.noise``); every scorer keeps each block on its own setting.

Non-finite predictions are an error, not a score: a NaN state would read as cell 0 and flag 0
(``to_cell``, ``to_flag``) and its leaf could win the search with a plausible V*. A scorer that
calls a model checks every imagined step with ``check_prediction`` and raises a ValueError
naming the model, the step and the number of bad rows. ``gridplan.planning.fused.FusedNoiseScorer``
needs no check: its built-in noise is finite by construction.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gridplan.core import dynamics
from gridplan.core.constants import N_ACTIONS
from gridplan.core.tasks import TaskKind
from gridplan.core.world import DEFAULT
from gridplan.models.capabilities import capabilities_of

#: Default memory budget for the leaf tensors of one chunk, in bytes.
DEFAULT_MAX_MEMORY = 2 * 1024**3
def generic_bytes_per_row(state_dim: int) -> int:
    """Working memory of one leaf row of the generic scorer: a few live ``(S,)`` float32
    state copies plus score and flags (a model's own activations come on top)."""
    return 6 * state_dim * 4 + 3 * 8 + 16

#: Working memory that one ``predict`` call of a deterministic model should fill: the
#: 16-256-256-12 SiLU MLP (2.2 kB per row in its reused buffers) then runs 3,307-row calls, on
#: the flat top of its rate per call size, below the sizes whose buffers leave the cache
#: (``scripts/bench_planner.py --call-sweep``, docs/PERFORMANCE.md §7).
CACHE_BYTES = 8 * 2**20
#: Fewest rows per split ``predict`` call: below this a call's fixed op overhead dominates.
MIN_CALL_ROWS = 256
#: Rows of the probe batch that ``measured_bytes_per_row`` runs through ``predict``.
PROBE_ROWS = 256

#: Rows of a batch handed out by a scorer: a slice or a ``(E,)`` long index.
Rows = slice | torch.Tensor


def action_sequences(
    depth: int, device: torch.device | str = "cpu", n_actions: int = N_ACTIONS
) -> torch.Tensor:
    """All ``A^D`` action sequences, ``(L, D)`` long, first action most significant (``A``
    actions: 4 in the paper's world, 7 in MiniGrid's)."""
    leaves = torch.arange(n_actions**depth, device=device)
    powers = n_actions ** torch.arange(depth - 1, -1, -1, device=device)
    return (leaves.unsqueeze(1) // powers) % n_actions


def is_deterministic(model) -> bool:
    """Whether ``model`` declares ``deterministic = True`` (module docstring)."""
    return capabilities_of(model).is_deterministic


class _OutputBytes(TorchDispatchMode):
    """Bytes of distinct memory that the ops inside it produce or write (views excluded):
    the union of their outputs' spans, so a buffer written in place many times counts once.
    Every output is kept alive until the mode exits, so no address is reused by a later
    tensor and fresh tensors never overlap."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[tuple[int, int]] = []
        self.keep: list[torch.Tensor] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.numel():
                    steps = zip(t.shape, t.stride(), strict=True)
                    extent = (1 + sum((n - 1) * st for n, st in steps)) * t.element_size()
                    self.spans.append((t.data_ptr(), t.data_ptr() + extent))
                    self.keep.append(t)
        return out

    @property
    def bytes(self) -> int:
        total, reach = 0, None
        for lo, hi in sorted(self.spans):
            if reach is None or lo >= reach:
                total, reach = total + hi - lo, hi
            elif hi > reach:
                total, reach = total + hi - reach, hi
        return total


def measured_bytes_per_row(
    model, device: torch.device | str = "cpu", state_dim: int = DEFAULT.state_dim
) -> int:
    """Working memory of one row of ``model.predict``, measured once on a probe batch.

    Runs ``predict`` on ``PROBE_ROWS`` fixed random states and counts the bytes of distinct
    memory its ops produce or write (an upper bound of what is live at once: nothing is freed
    early; a buffer the model reuses in place counts once), so the number depends only on the
    model's code and shapes, never on timing or on the allocator. Only for deterministic
    models (a probe would advance a stochastic one).

    Raises:
        ValueError: if the model is not declared deterministic.
    """
    if not is_deterministic(model):
        raise ValueError("only a model declared deterministic can be probed")
    gen = torch.Generator().manual_seed(0)
    rows = PROBE_ROWS * capabilities_of(model).n_settings
    state = torch.rand(rows, state_dim, generator=gen).to(device)
    action = torch.randint(0, N_ACTIONS, (rows,), generator=gen).to(device)
    with torch.no_grad(), _OutputBytes() as census:
        model.predict(state, action, torch.Generator(device=device).manual_seed(0))
    return -(-census.bytes // rows)


def model_bytes_per_row(
    model, device: torch.device | str = "cpu", state_dim: int = DEFAULT.state_dim
) -> int:
    """The model's working memory per ``predict`` row: its ``bytes_per_row`` declaration, the
    probe measurement on ``(R, state_dim)`` states for a deterministic model that declares
    none, else 0.

    Raises:
        ValueError: if a declared ``bytes_per_row`` is not a non-negative integer.
    """
    declared = capabilities_of(model).bytes_per_row
    if declared is None:
        if is_deterministic(model):
            return measured_bytes_per_row(model, device, state_dim)
        return 0
    if isinstance(declared, bool) or not isinstance(declared, int) or declared < 0:
        raise ValueError(f"model.bytes_per_row must be an integer >= 0, got {declared!r}")
    return declared


def cache_rows(model_bytes: int, state_dim: int = DEFAULT.state_dim) -> int:
    """Rows of one split ``predict`` call: ``CACHE_BYTES`` of working memory per call
    (``generic_bytes_per_row`` plus the model's own bytes per row), at least
    ``MIN_CALL_ROWS``."""
    return max(MIN_CALL_ROWS, CACHE_BYTES // (generic_bytes_per_row(state_dim) + model_bytes))


def predict_in_calls(
    model,
    state: torch.Tensor,
    action: torch.Tensor,
    generator: torch.Generator,
    call_rows: int | None,
    n_settings: int = 1,
    step: int = 0,
    what: str = "leaf rows",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``model.predict(state, action, generator)``, in calls of at most ``call_rows`` rows,
    checked (``check_prediction``).

    Each call takes the same slice of every setting block, so it is a valid batch of a
    multi-setting model. For a deterministic model the result equals one call's; for a
    stochastic one the split decides which row gets which draw (not their law).

    Args:
        state: ``(N, S)``, ``n_settings`` equal contiguous setting blocks.
        action: ``(N,)`` long.
        call_rows: rows per call, or ``None`` for one call.
        step: the imagined step, and ``what`` the rows are, for error messages.
        out: optional ``(N, S)`` contiguous buffer that split calls write into (a caller
            that consumes the result before its next call reuses it; no fresh tensor).

    Returns:
        ``(N, S)`` predicted states (as wide as ``state``): ``out`` when the calls were split
        into it, else a fresh tensor.

    Raises:
        ValueError: if a call returns a misshapen prediction, or the prediction holds NaN or
            inf (``check_prediction``).
    """
    rows, s = state.shape
    if call_rows is None or rows <= call_rows:
        out = model.predict(state, action, generator)
        check_prediction(out, model, step, rows, what, s)
        return out
    per_setting = rows // n_settings
    width = max(1, call_rows // n_settings)
    blocks = state.view(n_settings, per_setting, s)
    acts = action.view(n_settings, per_setting)
    if out is None:
        out = state.new_empty(n_settings, per_setting, s)
    out = out.view(n_settings, per_setting, s)
    for lo in range(0, per_setting, width):
        hi = min(per_setting, lo + width)
        n = n_settings * (hi - lo)
        part = model.predict(blocks[:, lo:hi].reshape(n, s), acts[:, lo:hi].reshape(n), generator)
        _check_shape(part, model, step, n, s)
        out[:, lo:hi] = part.view(n_settings, hi - lo, s)
    out = out.view(rows, s)
    check_prediction(out, model, step, rows, what, s)
    return out


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


def check_depth(
    depth: int,
    max_memory: int,
    bytes_per_leaf: Callable[[int], int],
    episodes: int = 1,
    n_actions: int = N_ACTIONS,
) -> None:
    """Check up front that the smallest chunk of the search, ``episodes`` whole episodes of
    ``A^D`` leaves (one per setting block; ``A = n_actions``), fits in the memory budget.

    Args:
        depth: search depth ``D``.
        max_memory: the scorer's memory budget, bytes.
        bytes_per_leaf: the scorer's working memory per leaf of one chunk at a depth, bytes
            (a model's own activations come on top).
        episodes: episodes in the smallest chunk (a multi-setting model's ``n_settings``).
        n_actions: the world's action count ``A``.

    Raises:
        ValueError: if that chunk needs more than ``max_memory``; the message names the
            depth, the budget and the largest depth that fits.
    """

    def need(d: int) -> int:
        return episodes * n_actions**d * bytes_per_leaf(d)

    if need(depth) <= max_memory:
        return
    fits = depth
    while fits > 0 and need(fits) > max_memory:
        fits -= 1
    hint = f"the largest depth that fits is {fits}" if fits else "no depth fits"
    raise ValueError(
        f"depth {depth} needs {need(depth) / 2**30:,.1f} GiB for one chunk ({episodes} x "
        f"{n_actions}^{depth} leaves x {bytes_per_leaf(depth)} bytes), over the planner's "
        f"memory budget max_memory = {max_memory / 2**30:,.2f} GiB; {hint}"
    )


def _check_shape(pred: torch.Tensor, model, step: int, rows: int, state_dim: int) -> None:
    if pred.shape != (rows, state_dim):
        raise ValueError(
            f"{type(model).__name__}.predict returned shape {tuple(pred.shape)} at imagined "
            f"step {step}, expected ({rows}, {state_dim})"
        )


def check_prediction(
    pred: torch.Tensor,
    model,
    step: int,
    rows: int,
    what: str = "leaf rows",
    state_dim: int = DEFAULT.state_dim,
) -> None:
    """Check one imagined step's prediction before it is scored.

    Args:
        pred: ``model.predict``'s output, expected ``(rows, state_dim)`` finite.
        model: the model that produced it (named in the error).
        step: imagined step ``t`` (0-based) of the rollout.
        rows: rows in the batch.
        what: what the rows are, for the message (``"tree nodes"`` in the shared-prefix tree).
        state_dim: the world's state width ``S``.

    Raises:
        ValueError: if ``pred`` is misshapen, or holds NaN or inf in some row (the message
            names the model, the step and the number of bad rows).
    """
    _check_shape(pred, model, step, rows, state_dim)
    # aminmax propagates NaN and costs a fraction of isfinite(pred): the row scan only runs
    # to count the bad rows of a prediction already known to be bad.
    if not pred.numel() or torch.isfinite(torch.stack(torch.aminmax(pred))).all():
        return
    bad = int((~torch.isfinite(pred)).any(dim=1).sum())
    raise ValueError(
        f"{type(model).__name__}.predict returned non-finite values (NaN or inf) at imagined "
        f"step {step} in {bad} of {rows} {what}; the planner cannot score such leaves"
    )


class LeafScorer(abc.ABC):
    """Scores of every leaf of the full-width search (the module docstring defines them).

    Attributes:
        task: the reward and the V* table applied to imagined states.
        depth: search depth ``D``; ``n_leaves = 4^D``.
    """

    task: TaskKind
    depth: int

    @property
    def n_leaves(self) -> int:
        return self.task.world.n_actions**self.depth

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
                model misbehaves (a misshapen or non-finite prediction, ``check_prediction``).
        """


class GenericScorer(LeafScorer):
    """Any world model: each leaf rolled ``D`` imagined steps through ``model.predict`` on
    full ``(R, S)`` states, with its own draws (no shared prefixes).

    Chunks hold whole episodes, the same number from every setting block, so a chunk is a
    valid batch for a multi-setting model. A chunk's rows cost ``generic_bytes_per_row`` each;
    the model's own working memory (``model_bytes_per_row``) is counted per ``predict`` call.
    A deterministic model's calls are split to ``cache_rows`` rows (its scores do not depend
    on the split). A stochastic model's chunk is one call per step, as large as the budget
    allows, because the chunking decides which leaf gets which draw (``max_memory`` and
    ``max_rows`` change noisy decisions, not their distribution).

    Args:
        model: ``predict(state, action, generator)``; optional ``start_rollout(rows,
            generator)``, called before each chunk; optional ``n_settings``,
            ``deterministic``, ``bytes_per_row`` (module docstring).
        task: reward and V* of the leaf scores.
        depth: ``D >= 1``.
        device: where the V* table lives.
        max_memory: bytes for one chunk's leaf rows plus one call's model working memory.
        max_rows: optional hard cap on leaf rows per chunk (overrides ``max_memory``).

    Attributes:
        call_rows: rows per ``predict`` call, or ``None`` for one call per chunk and step.
        max_rows: leaf rows per chunk.
        offers: the model's ``gridplan.models.capabilities.Capabilities``.

    Raises:
        ValueError: if one chunk (one episode per setting block) exceeds ``max_memory``
            (``check_depth``), or the model declares an invalid ``bytes_per_row``.
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
        row_bytes = generic_bytes_per_row(task.world.state_dim)
        self.offers = capabilities_of(model)
        # Per leaf: the chunk's rows plus the (L, D) action sequences and one step's actions.
        check_depth(
            depth,
            max_memory,
            lambda d: row_bytes + 8 * (d + 1),
            self.offers.n_settings,
            task.world.n_actions,
        )
        self.model = model
        self.task = task
        self.depth = depth
        self.values = dynamics.value_table(task, device)
        self.sequences = action_sequences(depth, device, task.world.n_actions)
        self.discounts = [task.gamma**t for t in range(depth + 1)]
        model_bytes = model_bytes_per_row(model, self.values.device, task.world.state_dim)
        if is_deterministic(model):
            self.call_rows: int | None = cache_rows(model_bytes, task.world.state_dim)
            leaf_memory = max_memory - self.call_rows * model_bytes
            self.max_rows = max_rows or max(1, leaf_memory // row_bytes)
        else:
            self.call_rows = None
            self.max_rows = max_rows or max(1, max_memory // (row_bytes + model_bytes))

    def leaf_scores(self, root, generator):
        m = self.offers.n_settings
        per_setting = episodes_per_setting(root.shape[0], m)
        cols = max(1, self.max_rows // (self.n_leaves * m))
        blocks = torch.arange(root.shape[0], device=root.device).view(m, per_setting)
        for lo in range(0, per_setting, cols):
            rows = blocks[:, lo : lo + cols].reshape(-1)
            yield rows, self.scores(root[rows], generator)

    def arrival(
        self, state: torch.Tensor, action: torch.Tensor, nxt: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(reward, goal, hazard)``, each ``(R,)``, of the imagined step ``state --action-->
        nxt``: the task's true sparse reward of the predicted state. A subclass may score the
        reward otherwise (``RewardScorer``: the model's own reward)."""
        return dynamics.outcome(self.task, nxt)

    def scores(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Leaf scores ``(E, L)`` of ``E`` root episodes in one batch of ``E * L`` rows.

        Raises:
            ValueError: if the model returns a misshapen or non-finite prediction
                (``check_prediction``).
        """
        b = root.shape[0]
        rows = b * self.n_leaves
        m = self.offers.n_settings
        state = root.repeat_interleave(self.n_leaves, dim=0)
        score = torch.zeros(rows, device=root.device)
        alive = torch.ones(rows, dtype=torch.bool, device=root.device)
        if self.offers.rollout_start:
            self.model.start_rollout(rows, generator)
        for t in range(self.depth):
            action = self.sequences[:, t].repeat(b)
            prev = state
            state = predict_in_calls(
                self.model, state, action, generator, self.call_rows, m, step=t
            )
            reward, goal, hazard = self.arrival(prev, action, state)
            score += self.discounts[t] * reward * alive
            alive &= ~(goal | hazard)
        score += self.discounts[self.depth] * self.values.lookup(state) * alive
        return score.view(b, self.n_leaves)


class RewardScorer(GenericScorer):
    """The generic leaf scorer with the model's own reward: ``model.predict_reward(state,
    action, next_state)`` ``(R,)`` replaces the true reward of the predicted state; termination
    is still read from the predicted state (agent on the goal or hazard cell). Served to a
    plug-in that predicts its reward (``gridplan.models.plugins``, ``gridplan.planning.registry``).
    """

    def arrival(self, state, action, nxt):
        _, goal, hazard = super().arrival(state, action, nxt)
        return self.model.predict_reward(state, action, nxt).float(), goal, hazard
