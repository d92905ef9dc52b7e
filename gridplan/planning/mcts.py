"""Batched Monte Carlo tree search over a world model (PUCT, Silver et al. 2017; paper §3
"Planner" for the reward and terminal value it shares with the full-width search), with
several simulations per round under virtual visits (Liu et al. 2020, "Watch the Unobserved").

One tree per root, all ``B`` trees grown in lockstep as tensors: flat node tables of
``B * (1 + 4 * budget)`` rows (visits ``N``, value sums ``W``, rewards, terminal flags, the
first child's index, states). The ``budget`` simulations run in rounds of ``L`` *lanes*
(simulations at once; ``lane_schedule``): the first rounds double from 1 lane up to
``parallel``, the rest take at most ``parallel`` each. One round:

1. **Select**: every lane of every tree descends at once, one depth level per step, through
   expanded, non-terminal nodes. The ``m`` lanes at node ``s`` (consecutive lanes: a group)
   split over its children as ``m`` selections one after another would, each by
   ``argmax_a Q(s, a) + c * P(a) * sqrt(N(s)) / (1 + N(s, a) + O(s, a))``, where ``O(s, a)``
   counts the earlier selections of ``a`` (virtual visits: in-flight simulations spread
   over the children; ``N(s)`` counts finished simulations only), the prior is uniform
   ``P(a) = 1/4`` (no policy network), ``Q(s, a) = r(s_a) + gamma * W(s_a) / N(s_a)``, and
   ties go to the lowest action; the lanes, in order, take the selected children in action
   order, so each child's lanes are again a group. The ``m`` selections cost one stable
   sort (``turns``): each child's scores over ``O = 0, 1, ...`` fall, so the selections
   are all of them merged in descending order.
2. **Expand** the leaf each group reached (unless terminal): every lane's 4 children in one
   ``predict`` call of ``B * L * 4`` rows, each child valued ``r(s_a) + gamma * V(s_a)``
   while alive (``V`` the terminal value: exact V*, learned or none;
   ``gridplan.planning.learned_value``); the leaf's estimate is the best of them (a one-step
   backup). The group's first lane's children enter the tree, and every lane of the group
   backs up its estimate; a terminal leaf is worth 0.
3. **Back up** each lane's estimate along its path: every node's ``N`` grows by 1 and its
   ``W`` by the lane's discounted return from there, lane after lane.

With ``parallel = 1`` this is plain sequential PUCT, one simulation per round (main's search
before rounds, up to its float32 rounding). The decision is the root's most visited action
(ties to the larger ``Q``, then the lowest action). A budget of ``b`` simulations costs
``4 b`` predictions per decision; the default 256 matches the depth-4 full-width search's
1,024. The statistics are float64 and accumulate lane after lane, so that on CPU the tree
equals, bit for bit, the plain reference ``gridplan.planning.reference.ref_tree_search`` on
the same predictions (on CUDA, accumulating writes may add in another order: last-bit
differences). The tree is deterministic given the model's predictions: the only draws are
the model's, from the caller's generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import check_state, state_outcome
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.models.contract import check_model_world
from gridplan.planning.learned_value import check_value
from gridplan.planning.scorers import check_prediction
from gridplan.planning.sequences import Plan

#: The stated prior of every action (no policy network).
PRIOR = 1.0 / N_ACTIONS


def lane_schedule(budget: int, parallel: int) -> list[int]:
    """Lanes of each round, summing to ``budget``: doubling from 1 while below ``parallel``
    (the first rounds' lanes would pile onto a root with few children), then the rest in as
    few rounds of at most ``parallel`` as it takes, shared out evenly (earlier rounds one
    more)."""
    out, width = [], 1
    while width < parallel and sum(out) + width <= budget:
        out.append(width)
        width *= 2
    rest = budget - sum(out)
    rounds = -(-rest // parallel)
    return out + [rest // rounds + (k < rest % rounds) for k in range(rounds)]


def check_int(name: str, value, low: int) -> int:
    """``value`` if it is an integer ``>= low``. Raises ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def _at(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for a flat table: ``index_select``, twice as fast on CPU."""
    return table.index_select(0, index.reshape(-1)).view(*index.shape, *table.shape[1:])


def turns(q: torch.Tensor, n: torch.Tensor, beta: torch.Tensor, lanes: int) -> torch.Tensor:
    """The children that ``lanes`` selections one after another take at each of ``G`` nodes.

    Selection ``k`` takes the best child under the virtual visits ``O`` of selections
    ``0..k-1``, ``argmax_a q_a + beta / (1 + n_a + O_a)``, ties to the lowest action. A
    child's score falls as ``O`` grows, so the selections are every child's scores over
    ``O = 0, 1, ...`` merged in descending order, ties to the lower action: one stable sort
    (a tie with a later score of the same child cannot precede its earlier one).

    Args:
        q, n: ``(G, 4)`` float64 the children's ``Q`` and visits.
        beta: ``(G, 1)`` float64 ``c * P * sqrt(N)`` of the nodes.
        lanes: selections per node ``L``.

    Returns:
        ``(G, 4 * L)`` long actions; entry ``k < L`` is selection ``k``'s.
    """
    ahead = torch.arange(lanes, device=q.device, dtype=q.dtype)
    score = q.unsqueeze(-1) + beta.unsqueeze(-1) / (1 + n.unsqueeze(-1) + ahead)
    order = (-score).flatten(1).sort(dim=1, stable=True).indices
    return order // lanes


@dataclass
class _Trees:
    """``B`` trees of ``size`` nodes each as flat tables; node ``n`` of tree ``b`` is row
    ``b * size + n``, and ``4 * B * L`` scratch rows after them take the children of lanes
    that grow nothing, so every write goes to distinct rows. ``q`` caches
    ``r + gamma * W / N``, the node's value as a child."""

    size: int
    scratch: int  # the first scratch row
    state: torch.Tensor  # (rows, S) float
    visits: torch.Tensor  # (rows,) float64
    total: torch.Tensor  # (rows,) float64
    reward: torch.Tensor  # (rows,) float64
    q: torch.Tensor  # (rows,) float64
    terminal: torch.Tensor  # (rows,) bool
    first: torch.Tensor  # (rows,) long: first child's row, -1 while unexpanded or terminal
    used: torch.Tensor  # (B,) long: nodes in use per tree

    @classmethod
    def rooted(cls, root: torch.Tensor, size: int, lanes: int) -> _Trees:
        b, s = root.shape
        scratch = b * size
        rows = scratch + b * lanes * N_ACTIONS
        state = root.new_zeros(rows, s)
        state[:scratch:size] = root
        zeros = torch.zeros(rows, dtype=torch.float64, device=root.device)
        flags = torch.zeros(rows, dtype=torch.bool, device=root.device)
        return cls(
            size=size,
            scratch=scratch,
            state=state,
            visits=zeros,
            total=zeros.clone(),
            reward=zeros.clone(),
            q=zeros.clone(),
            terminal=flags,
            first=torch.full((rows,), -1, dtype=torch.long, device=root.device),
            used=torch.ones(b, dtype=torch.long, device=root.device),
        )


@dataclass
class _Lanes:
    """A round's lanes ``(B, L)``: their nodes, and their groups (the lanes at one node,
    consecutive lanes): each lane's group's first lane and size (0 once it stopped)."""

    node: torch.Tensor
    start: torch.Tensor
    size: torch.Tensor


class TreeSearchPlanner:
    """Batched PUCT tree search (module docstring).

    Args:
        model: any world model.
        task: reward, termination and ``gamma``.
        value: terminal value (``gridplan.planning.learned_value``).
        budget: simulations per decision, ``>= 1`` (``4 * budget`` predictions).
        exploration: the PUCT constant ``c > 0``.
        parallel: simulations per round (lanes), ``>= 1``; 1 is sequential PUCT.

    Raises:
        ValueError: on a budget or parallel below 1, an exploration constant that is not
            finite and positive, a model or value of another world, or a value of another task.
    """

    name = "mcts"

    def __init__(
        self,
        model,
        task: Task = TASK_A,
        value=None,
        budget: int = 256,
        exploration: float = 1.0,
        parallel: int = 16,
    ) -> None:
        check(task)
        check_model_world(model, task.world)
        check_int("budget", budget, 1)
        check_int("parallel", parallel, 1)
        if not (math.isfinite(exploration) and exploration > 0):
            raise ValueError(f"exploration must be finite and > 0, got {exploration!r}")
        if value is None:
            raise ValueError("a tree search needs a terminal value (learned_value)")
        check_value(value, task)
        self.model, self.task, self.value = model, task, value
        self.budget, self.exploration, self.parallel = budget, float(exploration), parallel

    @property
    def predictions_per_decision(self) -> int:
        return N_ACTIONS * self.budget

    def _select(
        self, t: _Trees, lanes: _Lanes, first: torch.Tensor, visits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The child each moving lane takes at its expanded node (first child ``first``,
        visits ``visits``, both ``(B, L)``), and that child's visits; the lanes' groups move
        to the children (step 1)."""
        node, dev = lanes.node, lanes.node.device
        kids = first.clamp(min=0).unsqueeze(-1) + torch.arange(N_ACTIONS, device=dev)
        n_kid, q = _at(t.visits, kids), _at(t.q, kids)
        beta = ((self.exploration * PRIOR) * visits.sqrt()).unsqueeze(-1)
        choice = (q + beta / (1 + n_kid)).argmax(dim=-1)
        most = int(lanes.size.max())
        if most == 1:
            return choice, n_kid.gather(2, choice.unsqueeze(-1)).squeeze(-1)
        # One split per node that several lanes share, computed at its group's first lane.
        b, width = node.shape
        rank = torch.arange(width, device=dev) - lanes.start
        lead = ((rank == 0) & (lanes.size > 1)).view(-1).nonzero().squeeze(1)
        picks = turns(
            _at(q.view(-1, N_ACTIONS), lead),
            _at(n_kid.view(-1, N_ACTIONS), lead),
            _at(beta.view(-1, 1), lead),
            most,
        )[:, :most]
        taken = torch.arange(most, device=dev) < _at(lanes.size.view(-1), lead).unsqueeze(1)
        counts = torch.zeros(lead.shape[0], N_ACTIONS, dtype=torch.long, device=dev)
        counts.scatter_add_(1, picks, taken.long())
        row = torch.full((b * width,), -1, dtype=torch.long, device=dev)
        row[lead] = torch.arange(lead.shape[0], device=dev)
        row = _at(row, torch.arange(b, device=dev).unsqueeze(1) * width + lanes.start)
        shared = row >= 0
        ends = _at(counts.cumsum(dim=1), row.clamp(min=0))  # (B, L, 4)
        split = (rank.unsqueeze(-1) >= ends).sum(dim=-1).clamp(max=N_ACTIONS - 1)
        choice = torch.where(shared, split, choice)
        end = ends.gather(2, choice.unsqueeze(-1)).squeeze(-1)
        size = _at(counts.view(-1), row.clamp(min=0) * N_ACTIONS + choice)
        lanes.start = torch.where(shared, lanes.start + end - size, lanes.start)
        lanes.size = torch.where(shared, size, lanes.size)
        return choice, n_kid.gather(2, choice.unsqueeze(-1)).squeeze(-1)

    def _descend(self, t: _Trees, roots: torch.Tensor, width: int) -> tuple[list, _Lanes]:
        """Every lane's path from the root, one ``(B, L)`` row tensor per depth (a lane
        that stopped repeats its leaf), and the lanes' groups at their leaves."""
        dev = roots.device
        lanes = _Lanes(
            node=roots.unsqueeze(1).expand(-1, width).contiguous(),
            start=torch.zeros(roots.shape[0], width, dtype=torch.long, device=dev),
            size=torch.full((roots.shape[0], width), width, dtype=torch.long, device=dev),
        )
        path = [lanes.node]
        first, visits = _at(t.first, lanes.node), _at(t.visits, lanes.node)
        moving = first >= 0
        while moving.any():
            lanes.size = lanes.size * moving  # stopped lanes need no split
            choice, visits = self._select(t, lanes, first, visits)
            lanes.node = torch.where(moving, first + choice, lanes.node)
            path.append(lanes.node)
            first = _at(t.first, lanes.node)
            moving = first >= 0
        return path, lanes

    def _expand(self, t: _Trees, at: _Lanes, generator, step: int) -> torch.Tensor:
        """Predict every lane's 4 children, enter the first lane's per new leaf into the
        tree; each lane's leaf estimate ``(B, L)`` float64 (step 2)."""
        leaf, owner = at.node, at.start  # the lanes at a leaf are one group
        b, lanes = leaf.shape
        dev, s = leaf.device, t.state.shape[1]
        grow = ~_at(t.terminal, leaf) & (owner == torch.arange(lanes, device=dev))
        parent = _at(t.state, leaf).unsqueeze(2).expand(-1, -1, N_ACTIONS, -1).reshape(-1, s)
        actions = torch.arange(N_ACTIONS, device=dev).repeat(b * lanes)
        nxt = self.model.predict(parent, actions, generator)
        check_prediction(nxt, self.model, step, b * lanes * N_ACTIONS, "tree rows", s)
        r, goal, hazard = state_outcome(nxt, self.task)
        done = goal | hazard
        v = (self.value.lookup(nxt) * ~done).double()
        r = r.double()
        qa = r + self.task.gamma * v
        best = torch.where(grow, qa.view(b, lanes, N_ACTIONS).amax(dim=2), 0.0)
        # New children take consecutive slots, tree by tree, in lane order; the others go
        # to their lane's scratch rows.
        taken = grow.long()
        slot = t.used.unsqueeze(1) + N_ACTIONS * (taken.cumsum(dim=1) - taken)
        t.used += N_ACTIONS * taken.sum(dim=1)
        lane = torch.arange(b * lanes, device=dev).view(b, lanes)
        scratch = t.scratch + N_ACTIONS * lane
        base = torch.where(grow, torch.arange(b, device=dev).unsqueeze(1) * t.size + slot, scratch)
        rows = (base.unsqueeze(2) + torch.arange(N_ACTIONS, device=dev)).view(-1)
        t.state.index_copy_(0, rows, nxt)
        t.reward.index_copy_(0, rows, r)
        t.terminal.index_copy_(0, rows, done)
        t.visits.index_fill_(0, rows, 1.0)
        t.total.index_copy_(0, rows, v)
        t.q.index_copy_(0, rows, qa)  # r + gamma * W / N with N = 1
        t.first.index_copy_(0, torch.where(grow, leaf, scratch).view(-1), base.view(-1))
        return best.gather(1, owner)

    def _backup(self, t: _Trees, path: list[torch.Tensor], g: torch.Tensor) -> None:
        """Add each lane's discounted return to every node on its path (step 3). A node
        sits at one depth, so one accumulating write of every level adds its lanes' returns
        in lane order, as the reference does."""
        gamma = self.task.gamma
        nodes, counts, returns = [path[-1]], [torch.ones_like(g)], [g]
        for here, below in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
            stepped = below != here
            g = torch.where(stepped, _at(t.reward, below) + gamma * g, g)
            nodes.append(here)
            counts.append(stepped.double())
            returns.append(g * stepped)
        index = torch.cat([n.reshape(-1) for n in nodes])
        t.visits.index_put_((index,), torch.cat([c.reshape(-1) for c in counts]), accumulate=True)
        t.total.index_put_((index,), torch.cat([x.reshape(-1) for x in returns]), accumulate=True)
        q = _at(t.reward, index) + gamma * _at(t.total, index) / _at(t.visits, index)
        t.q.index_put_((index,), q)

    @torch.no_grad()
    def tree(self, root: torch.Tensor, generator: torch.Generator):
        """Grow the trees; ``(visits (B, 4), q (B, 4))`` float64 of the root's children."""
        check_state(root, "root state", self.task.world)
        b = root.shape[0]
        schedule = lane_schedule(self.budget, self.parallel)
        t = _Trees.rooted(root, 1 + N_ACTIONS * self.budget, max(schedule))
        roots = torch.arange(b, device=root.device) * t.size
        for step, width in enumerate(schedule):
            path, lanes = self._descend(t, roots, width)
            g = self._expand(t, lanes, generator, step)
            self._backup(t, path, g)
        kids = _at(t.first, roots).unsqueeze(1) + torch.arange(N_ACTIONS, device=root.device)
        return _at(t.visits, kids), _at(t.q, kids)

    def search(self, root: torch.Tensor, generator: torch.Generator):
        """Grow the trees; returns ``(visits (B, 4), q (B, 4))`` float32 of the root's
        children (``tree`` rounded)."""
        visits, q = self.tree(root, generator)
        return visits.float(), q.float()

    @staticmethod
    def choose(visits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The most visited action ``(B,)``; ties to the larger ``q``, then the lowest."""
        most = visits >= visits.amax(dim=1, keepdim=True)
        return torch.where(most, q, torch.full_like(q, -math.inf)).argmax(dim=1)

    def act(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Chosen first actions ``(B,)`` long (module docstring)."""
        return self.choose(*self.tree(root, generator))

    def plan(self, root: torch.Tensor, generator: torch.Generator) -> Plan:
        """The chosen action as a one-step ``Plan``; ``predicted`` is its ``Q`` in the tree."""
        visits, q = self.tree(root, generator)
        action = self.choose(visits, q)
        predicted = q.gather(1, action.unsqueeze(1)).squeeze(1).float()
        return Plan(action=action, sequence=action.unsqueeze(1), predicted=predicted)
