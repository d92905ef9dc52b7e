"""Anchor policies of the policy-ranking level (L6) and the outcome-fidelity level (L5).

A fixed set of policies spanning weak to strong, each a function of the *relevant state* read
through rounded cells and 0.5-thresholded flags (like the planner's V* lookup) plus explicit
randomness, so the same policy runs unchanged in the true environment and inside any world
model. Both kinds of task have them, with the same meaning: the paper's world (its discrete
relevant state: agent cell, key cell, carrying, door, and ``c1`` where the task reads it;
``TabulatedGreedy``) and MiniGrid DoorKey (agent cell and heading, key, carrying, door,
layout; ``DoorKeyGreedy``), each acting over the world's ``n_actions``.

The anchor set (``ANCHORS``), weakest first:

==================  =================================================================
``uniform_random``  a uniform random action every step
``key_ignoring``    greedy in Q* of the state read as if the key were already carried:
                    heads for the door and the goal. In the paper's world it succeeds
                    only if its path crosses the key (a step onto it picks it up); on
                    DoorKey it never picks the key up, so the locked door stays shut
``lookahead_4``     the full-width planner at depth d with the true model and *no* leaf
``lookahead_8``     heuristic (sparse reward only, ties at random): random until the goal
``lookahead_12``    is within d steps. Computed by finite-horizon value iteration, which
                    equals the depth-d search because the relevant dynamics are
                    deterministic (``tests/evaluation/test_anchors.py`` checks it by
                    enumeration; on DoorKey ``doorkey_values.horizon_values``)
``eps_greedy_0.75`` epsilon-greedy in Q*: a uniform random action with probability
``eps_greedy_0.5``  epsilon, else greedy (ties at random)
``eps_greedy_0.25``
``eps_greedy_0.1``
``greedy``          greedy in Q* (ties at random): the optimal policy, which is also what
                    the oracle planner does at every depth with the exact V* heuristic
==================  =================================================================

The oracle planner at depths 1/2/4 *with* the V* heuristic would be three copies of
``greedy`` (its depth-D first-action values equal Q*), so the depth anchors drop the heuristic.

Randomness: every step draws the same shapes from the policy generator for every row, alive
or not (``(M, A)`` tie-breaks, ``A = task.world.n_actions``, ``(M,)`` epsilon coins, ``(M,)``
random actions), so a policy run in the true environment and inside a model with the same
seed makes the same choices wherever the two runs see the same relevant state (common random
numbers).

Letter legend: ``M`` rows (anchor-major blocks), ``n`` discrete relevant states.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import torch

from gridplan.core import dynamics
from gridplan.core.constants import N_ACTIONS
from gridplan.core.doorkey_task import F_CARRYING, DoorKeyTask, DoorKeyValueTable, successors
from gridplan.core.env import outcome, relevant_step
from gridplan.core.tasks import Task, TaskKind, check
from gridplan.core.values import check_table_memory, discrete_index
from gridplan.planning.planner import TIE_TOLERANCE


@dataclass(frozen=True)
class DiscreteDynamics:
    """The true relevant dynamics of a task as lookup tables over its discrete states.

    Built from ``gridplan.core.env.relevant_step`` and ``gridplan.core.env.outcome`` over every
    discrete relevant state, indexed like the V* table (``gridplan.core.values.discrete_index``).

    Attributes:
        task: the task.
        next_index: ``(4, n)`` long, index of the state each action leads to.
        reward: ``(4, n)`` float, reward of arriving there (+1 goal, -1 hazard, else 0).
        terminal: ``(n,)`` bool, the state is a goal or hazard.
        as_carried: ``(n,)`` long, the index of the same state with the key carried.
    """

    task: Task
    next_index: torch.Tensor
    reward: torch.Tensor
    terminal: torch.Tensor
    as_carried: torch.Tensor

    @property
    def n_states(self) -> int:
        return self.reward.shape[1]

    def index(self, state: torch.Tensor) -> torch.Tensor:
        """``(N,)`` discrete indices of ``(N, S)`` float states (rounded cells, flags at 0.5):
        the V* table's (``ValueTable.index``)."""
        return dynamics.value_table(self.task, self.reward.device).index(state)


@functools.lru_cache(maxsize=8)
def discrete_dynamics(task: Task, device: str = "cpu") -> DiscreteDynamics:
    """The (cached) ``DiscreteDynamics`` of ``task`` on ``device``."""
    n_c1 = 2 if task.reads_c1 else 1
    check_table_memory(task)
    cells = [torch.arange(task.world.size)] * 4
    grid = torch.cartesian_prod(*cells, torch.arange(2), torch.arange(2), torch.arange(n_c1))
    agent, key = grid[:, 0:2], grid[:, 2:4]
    carrying, door, c1 = grid[:, 4].bool(), grid[:, 5].bool(), grid[:, 6].bool()
    own = discrete_index(agent, key, carrying, door, c1, task)
    n = grid.shape[0]
    next_index = torch.empty(N_ACTIONS, n, dtype=torch.long)
    reward = torch.empty(N_ACTIONS, n)
    for a in range(N_ACTIONS):
        rel = relevant_step(agent, key, carrying, door, torch.full((n,), a), task.world)
        r, _, _ = outcome(rel.agent, c1, task)
        next_index[a, own] = discrete_index(
            rel.agent, rel.key, rel.carrying, rel.door_open, c1, task
        )
        reward[a, own] = r
    _, goal, hazard = outcome(agent, c1, task)
    terminal = torch.empty(n, dtype=torch.bool)
    terminal[own] = goal | hazard
    as_carried = torch.empty(n, dtype=torch.long)
    as_carried[own] = discrete_index(agent, agent, torch.ones_like(carrying), door, c1, task)
    return DiscreteDynamics(
        task, *(t.to(device) for t in (next_index, reward, terminal, as_carried))
    )


def finite_horizon_values(dynamics: DiscreteDynamics, steps: int) -> torch.Tensor:
    """Optimal ``steps``-step values without a terminal heuristic: ``(n,)`` float.

    ``V_0 = 0``; ``V_k(s) = max_a r(s, a) + gamma * V_{k-1}(s')``, with ``V_k = 0`` at goal and
    hazard states (terminal). ``r + gamma * V_{d-1}(s')`` is then the depth-d full-width search
    value of first action ``a`` with a zero leaf value.

    Raises:
        ValueError: if ``steps < 0``.
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    gamma = dynamics.task.gamma
    v = torch.zeros(dynamics.n_states, device=dynamics.reward.device)
    for _ in range(steps):
        q = dynamics.reward + gamma * v[dynamics.next_index]
        v = torch.where(dynamics.terminal, torch.zeros_like(v), q.amax(dim=0))
    return v


@functools.lru_cache(maxsize=16)
def _lookahead_table(task: Task, device: str, steps: int) -> torch.Tensor:
    return finite_horizon_values(discrete_dynamics(task, device), steps)


@dataclass(frozen=True)
class Anchor:
    """One anchor policy (see the module docstring).

    Attributes:
        name: short name used in reports.
        description: one line for the evaluation card.
        epsilon: probability of a uniform random action each step.
        lookahead: ``0`` for Q* (the exact V* heuristic), ``d >= 1`` for the heuristic-free
            depth-d search.
        key_as_carried: read every state as if the key were carried.
    """

    name: str
    description: str
    epsilon: float = 0.0
    lookahead: int = 0
    key_as_carried: bool = False


ANCHORS: tuple[Anchor, ...] = (
    Anchor("uniform_random", "uniform random action", epsilon=1.0),
    Anchor("key_ignoring", "greedy in Q* as if the key were carried", key_as_carried=True),
    Anchor("lookahead_4", "depth-4 search, sparse reward only, no V* heuristic", lookahead=4),
    Anchor("lookahead_8", "depth-8 search, sparse reward only, no V* heuristic", lookahead=8),
    Anchor("lookahead_12", "depth-12 search, sparse reward only, no V* heuristic", lookahead=12),
    Anchor("eps_greedy_0.75", "epsilon-greedy in Q*, epsilon 0.75", epsilon=0.75),
    Anchor("eps_greedy_0.5", "epsilon-greedy in Q*, epsilon 0.5", epsilon=0.5),
    Anchor("eps_greedy_0.25", "epsilon-greedy in Q*, epsilon 0.25", epsilon=0.25),
    Anchor("eps_greedy_0.1", "epsilon-greedy in Q*, epsilon 0.1", epsilon=0.1),
    Anchor("greedy", "greedy in Q* (optimal; the oracle planner at any depth)"),
)
ANCHOR_NAMES = tuple(a.name for a in ANCHORS)


def get_anchors(names: tuple[str, ...] | None = None) -> tuple[Anchor, ...]:
    """Anchors by name (all of ``ANCHORS`` for ``None``).

    Raises:
        ValueError: on an unknown name (the message lists the valid ones).
    """
    if names is None:
        return ANCHORS
    by_name = {a.name: a for a in ANCHORS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown anchor policies {unknown}; valid: {', '.join(ANCHOR_NAMES)}")
    return tuple(by_name[n] for n in names)


class PolicyDraws(NamedTuple):
    """One step's policy randomness of ``M`` rows: ``tie`` ``(M, A)`` uniforms breaking ties
    between greedy actions (``A = task.world.n_actions``), ``coin`` ``(M,)`` uniforms against
    epsilon, ``random_action`` ``(M,)`` long uniform actions."""

    tie: torch.Tensor
    coin: torch.Tensor
    random_action: torch.Tensor


def _best_actions(q: torch.Tensor) -> torch.Tensor:
    """``(M, A)`` float 0/1 mask of the actions within ``TIE_TOLERANCE`` of the best of
    ``(M, A)`` action values."""
    return (q >= q.amax(dim=1, keepdim=True) - TIE_TOLERANCE).float()


class TabulatedGreedy:
    """The best actions of anchors in the paper's world, tabulated over its discrete states.

    The greedy choice depends only on (anchor, discrete state): each anchor's ``(n, 4)`` mask
    of its best actions, in the state it reads, is tabulated once, so a step is one gather.

    Args:
        anchors: the policies.
        task: a paper-world ``Task`` (``DiscreteDynamics``, the V* table).
        device: where the tables live.
    """

    def __init__(self, anchors: tuple[Anchor, ...], task: Task, device: str) -> None:
        self.dynamics = dyn = discrete_dynamics(task, device)
        v_star = dynamics.value_table(task, device).table
        gamma = torch.tensor(task.gamma, device=device)
        own = torch.arange(dyn.n_states, device=device)
        masks = []
        for a in anchors:
            # Q_d(s, a) = r + gamma * V_{d-1}(s'): the depth-d table is d - 1 steps deep.
            values = v_star if a.lookahead == 0 else _lookahead_table(task, device, a.lookahead - 1)
            read = dyn.as_carried if a.key_as_carried else own
            q = dyn.reward.T[read].addcmul_(values[dyn.next_index.T[read]], gamma)
            masks.append(_best_actions(q))
        self._greedy = torch.cat(masks)

    def __call__(self, state: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """``(M, 4)`` best-action masks of ``(M, S)`` float states, row ``i`` of anchor
        ``anchor[i]``."""
        return self._greedy[anchor * self.dynamics.n_states + self.dynamics.index(state)]


class DoorKeyGreedy:
    """The best actions of anchors on MiniGrid DoorKey, from the action values of the state
    each reads (``DoorKeyValueTable.q_values``: Q*, or for ``lookahead_d`` the depth-d search
    value ``r + gamma V_{d-1}(s')`` of ``doorkey_values.horizon_values``), computed per step
    (its tables are per layout, built as layouts are met), every table's from one step of
    the states (``doorkey_task.successors``). ``key_as_carried`` reads the state
    with its carrying flag set (``decode`` puts a carried key on the agent's cell).

    Args:
        anchors: the policies.
        task: a ``DoorKeyTask``.
        device: where the tables live.
    """

    def __init__(self, anchors: tuple[Anchor, ...], task: DoorKeyTask, device: str) -> None:
        tables: dict[int, DoorKeyValueTable] = {}
        for a in anchors:
            if a.lookahead not in tables:
                tables[a.lookahead] = (
                    dynamics.value_table(task, device)
                    if a.lookahead == 0
                    else task.value_table(device, steps=a.lookahead - 1)
                )
        self._tables = tuple(tables.values())
        depth = list(tables)
        self._which = torch.tensor([depth.index(a.lookahead) for a in anchors], device=device)
        self._carried = torch.tensor([a.key_as_carried for a in anchors], device=device)
        self.task = task

    def __call__(self, state: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """``(M, A)`` best-action masks of ``(M, S)`` float states, row ``i`` of anchor
        ``anchor[i]``."""
        read = state.clone()
        carried = self._carried[anchor]
        read[:, F_CARRYING] = torch.where(carried, 1.0, read[:, F_CARRYING])
        nxt, goal = successors(read, self.task.world)
        done = self.task.outcome(read)[1]
        which = self._which[anchor]
        q = torch.zeros(state.shape[0], self.task.world.n_actions, device=state.device)
        for i, table in enumerate(self._tables):
            rows = (which == i).nonzero().squeeze(1)
            if rows.numel():
                q[rows] = table.q_of(nxt[:, rows], goal[:, rows], done[rows])
        return _best_actions(q)


class AnchorSet:
    """Several anchor policies acting on one batch of float states, one anchor per row.

    Args:
        anchors: the policies (``ANCHORS`` by default).
        task: their task, of either kind: the paper's world (``TabulatedGreedy``) or
            MiniGrid DoorKey (``DoorKeyGreedy``).
        device: where the tables live.

    Raises:
        ValueError: on an empty anchor set.
    """

    def __init__(
        self, anchors: tuple[Anchor, ...], task: TaskKind, device: torch.device | str = "cpu"
    ) -> None:
        if not anchors:
            raise ValueError("an anchor set needs at least one policy")
        self.anchors = tuple(anchors)
        self.task = check(task)
        device = str(torch.device(device))
        self.n_actions = task.world.n_actions
        self.epsilon = torch.tensor([a.epsilon for a in self.anchors], device=device)
        greedy = TabulatedGreedy if isinstance(task, Task) else DoorKeyGreedy
        self._best = greedy(self.anchors, task, device)

    def __len__(self) -> int:
        return len(self.anchors)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.anchors)

    def draw(self, m: int, generator: torch.Generator) -> PolicyDraws:
        """One step's randomness of ``m`` rows, in the fixed shapes of the module docstring."""
        device, n = generator.device, self.n_actions
        return PolicyDraws(
            tie=torch.rand(m, n, generator=generator, device=device),
            coin=torch.rand(m, generator=generator, device=device),
            random_action=torch.randint(0, n, (m,), generator=generator, device=device),
        )

    def act(
        self,
        state: torch.Tensor,
        anchor: torch.Tensor,
        randomness: torch.Generator | PolicyDraws,
        alive: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Actions ``(M,)`` long of each row's anchor in ``state``.

        Args:
            state: ``(M, S)`` float states, true or imagined (read through rounded cells).
            anchor: ``(M,)`` long anchor of each row (position in ``anchors``).
            randomness: the policy stream (this step's ``draw`` is taken from it), or draws
                already taken, so that two runs can share one step's randomness.
            alive: ``(M,)`` bool rows whose action is used; the others get their random
                action and their greedy choice is not computed (default: every row).
        """
        if isinstance(randomness, torch.Generator):
            randomness = self.draw(state.shape[0], randomness)
        greedy = randomness.coin >= self.epsilon[anchor]
        if alive is not None:
            greedy &= alive
        rows = greedy.nonzero().squeeze(1)
        best = torch.zeros(state.shape[0], self.n_actions, device=state.device)
        best[rows] = self._best(state[rows], anchor[rows])
        chosen = (randomness.tie * best).argmax(dim=1)
        return torch.where(greedy, chosen, randomness.random_action)
