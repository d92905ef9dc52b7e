"""Batched Monte Carlo tree search over a world model (PUCT, Silver et al. 2017; paper §3
"Planner" for the reward and terminal value it shares with the full-width search), with
several simulations per round under virtual visits (Liu et al. 2020, "Watch the Unobserved").

One tree per root, all ``B`` trees grown in lockstep as tensors: flat node tables of
``A * (B * (1 + budget) + 1)`` rows, ``A = task.world.n_actions`` (4 in the paper's world, 7 in
MiniGrid DoorKey's), holding visits ``N``, value sums ``W``, rewards, terminal flags,
the children's family, the parent and states (``_Trees``). The ``budget`` simulations run in
rounds of ``L`` *lanes* (simulations at once; ``lane_schedule``): the first rounds grow
``A``-fold from 1 lane up to ``parallel``, the rest take at most ``parallel`` each. One round:

1. **Select**: the lanes descend as *groups* (the lanes at one node, consecutive lanes), one
   depth level per step, through expanded, non-terminal nodes. The ``m`` lanes at node ``s``
   split over its children as ``m`` selections one after another would, each by
   ``argmax_a Q(s, a) + c * P(a) * sqrt(N(s)) / (1 + N(s, a) + O(s, a))``, where ``O(s, a)``
   counts the earlier selections of ``a`` (virtual visits: in-flight simulations spread
   over the children; ``N(s)`` counts finished simulations only), the prior is uniform
   ``P(a) = 1/A`` (no policy network), ``Q(s, a) = r(s_a) + gamma * W(s_a) / N(s_a)``, and
   ties go to the lowest action; the lanes, in order, take the selected children in action
   order, so each child's lanes are again a group. The splits of one depth (``splits``)
   take the selections in turn while no group has more than 16 lanes, else by
   water-filling: each child's scores over ``O = 0, 1, ...`` fall, so the ``m`` selections
   are the ``m`` best of them all, counted at a water level and repaired exactly.
2. **Expand** the leaf each group reached (unless terminal): every lane's ``A`` children in
   one ``predict`` call of ``B * L * A`` rows, each child valued ``r(s_a) + gamma * V(s_a)``
   while alive (``V`` the terminal value: exact V*, learned or none;
   ``gridplan.planning.learned_value``; with exact V* in a small world, reward, termination
   and value are one row of ``gridplan.planning.arrival.ArrivalTable``); the leaf's
   estimate is the best of them (a one-step backup). The group's first lane's children
   enter the tree (only they are scored and valued), and every lane of the group backs up
   its estimate; a terminal leaf is worth 0.
3. **Back up** each lane's estimate up its parents: every node's ``N`` grows by 1 and its
   ``W`` by the lane's discounted return from there, lane after lane.

With ``parallel = 1`` this is plain sequential PUCT, one simulation per round. The decision
is the root's most visited action (ties to the larger ``Q``, then the lowest action). A
budget of ``b`` simulations costs ``A b`` predictions per decision; in the paper's world the
default 256 matches the depth-4 full-width search's 1,024, in 5 rounds of 1, 4, 16, 64 and
171 lanes (``parallel = 256``; docs/PERFORMANCE.md, "Batched MCTS"). A wide round chooses before its
own lanes' returns are known: with the exact V* as terminal value, wide rounds chose the
optimal first action at least as often as narrow ones in those runs; with an imperfect
value, less often, so a learned value wants a smaller ``parallel``. The statistics are
float64 and accumulate lane after lane, so that on CPU the tree equals, bit for bit, the
plain reference ``gridplan.planning.reference.ref_tree_search`` on the same predictions (on
CUDA, accumulating writes may add in another order: last-bit differences). The tree is
deterministic given the model's predictions: the only draws are the model's, from the
caller's generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gridplan.core import dynamics
from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, TaskKind, check
from gridplan.core.values import ValueTable
from gridplan.models.contract import check_model_world
from gridplan.planning.arrival import ArrivalTable
from gridplan.planning.learned_value import check_value
from gridplan.planning.scorers import check_prediction
from gridplan.planning.sequences import Plan


def lane_schedule(budget: int, parallel: int, n_actions: int = N_ACTIONS) -> list[int]:
    """Lanes of each round, summing to ``budget``: growing ``n_actions``-fold from 1 while
    below ``parallel`` (the leaves of a tree with few expanded nodes: the root, its ``A``
    children, their ``A^2``, ...; more lanes would pile onto them), then the rest in as few
    rounds of at most ``parallel`` as it takes, shared out evenly (earlier rounds one more)."""
    out, width = [], 1
    while width < parallel and sum(out) + width <= budget:
        out.append(width)
        width *= n_actions
    rest = budget - sum(out)
    rounds = -(-rest // parallel)
    return out + [rest // rounds + (k < rest % rounds) for k in range(rounds)]


def check_int(name: str, value, low: int) -> int:
    """``value`` if it is an integer ``>= low``. Raises ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def splits(
    q: torch.Tensor, n: torch.Tensor, beta: torch.Tensor, lanes: torch.Tensor, most: int
) -> torch.Tensor:
    """How many of ``lanes`` selections one after another take each child, at ``G`` nodes.

    Selection ``k`` takes the best child under the virtual visits ``O`` of selections
    ``0..k-1``, ``argmax_a q_a + beta / (1 + n_a + O_a)``, ties to the lowest action. Up to
    ``_ONE_BY_ONE`` lanes, the selections one after another (``most`` argmaxes over
    ``(G, A)``); more, water-filling and repair (``_fill``), whose operations do not grow
    with the lanes (docs/PERFORMANCE.md, "Batched MCTS").

    Args:
        q, n: ``(G, A)`` float64 the children's ``Q`` and visits, ``A`` actions.
        beta: ``(G,)`` float64 ``c * P * sqrt(N)`` of the nodes.
        lanes: ``(G,)`` long selections per node, ``1 <= lanes <= most``.
        most: the largest of ``lanes``.

    Returns:
        ``(G, A)`` long selections per child, summing to ``lanes``.
    """
    if most > _ONE_BY_ONE:
        return _fill(q, 1 + n, beta.unsqueeze(1), lanes.to(q.dtype).unsqueeze(1))
    visits, taken, beta = 1 + n, torch.zeros_like(q), beta.unsqueeze(1)
    for k in range(most):
        choice = (q + beta / (visits + taken)).argmax(dim=1, keepdim=True)
        taken.scatter_add_(1, choice, (lanes > k).to(q.dtype).unsqueeze(1))
    return taken.long()


#: ``splits`` takes the selections one after another up to this many lanes (cheaper than
#: water-filling there, on one CPU thread: docs/PERFORMANCE.md).
_ONE_BY_ONE = 16
#: Newton steps of ``_fill``'s water level.
_NEWTON = 4


def _fill(q: torch.Tensor, d: torch.Tensor, beta: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """``splits`` of ``m (G, 1)`` float lanes by water-filling (``d = 1 + n``).

    Child ``a``'s scores ``q_a + beta / (d_a + k)`` fall with ``k``, so the ``m`` selections
    are the ``m`` best scores of all children, ties to the lower action: about
    ``x_a = beta / (w - q_a) - d_a`` of child ``a`` at the water level ``w`` where these sum
    to ``m``. Newton steps find ``w`` from below (the sum is convex and falls in ``w``, so
    they stay below); each child takes its scores above it, the worst go back (short of
    ``m``, the best come in) one at a time; then, while a child's next score comes before
    another's last taken one in the order of selections, one selection moves. That repair
    stops on the order itself, so the counts are exact whatever the level's rounding."""
    w = (q + beta / (d + m)).amax(dim=1, keepdim=True)  # one child alone takes m here
    for _ in range(_NEWTON):
        gap = w - q
        x = (beta / gap - d).clamp(min=0)
        slope = ((x > 0) * beta / (gap * gap)).sum(dim=1, keepdim=True)
        w = w + (x.sum(dim=1, keepdim=True) - m) / slope
    # A non-finite level (w at some q) leaves the counts to the steps below.
    x = (beta / (w - q) - d).nan_to_num(0.0, 0.0, 0.0)
    taken = torch.minimum(x.clamp(min=0).ceil(), m)
    left = m - taken.sum(dim=1, keepdim=True)
    while bool((left < 0).any()):
        fewer = (left < 0).to(q.dtype)
        taken.scatter_add_(1, _worst(_last(q, d, beta, taken)), -fewer)
        left += fewer
    while bool((left > 0).any()):
        more = (left > 0).to(q.dtype)
        taken.scatter_add_(1, (q + beta / (d + taken)).argmax(dim=1, keepdim=True), more)
        left -= more
    while True:
        nxt, last = q + beta / (d + taken), _last(q, d, beta, taken)
        best, worst = nxt.argmax(dim=1, keepdim=True), _worst(last)
        b, w_ = nxt.gather(1, best), last.gather(1, worst)
        move = ((b > w_) | ((b == w_) & (best < worst))).to(q.dtype)
        if not bool(move.any()):
            return taken.long()
        taken.scatter_add_(1, best, move)
        taken.scatter_add_(1, worst, -move)


def _last(q: torch.Tensor, d: torch.Tensor, beta: torch.Tensor, taken: torch.Tensor):
    """Each child's last taken score, ``inf`` where none is taken."""
    return torch.where(taken > 0, q + beta / (d + taken - 1), math.inf)


def _worst(last: torch.Tensor) -> torch.Tensor:
    """``(G, 1)`` the child whose last taken selection comes last (``last``, ``_last``): the
    lowest score, ties to the higher action."""
    return last.shape[1] - 1 - last.flip(1).argmin(dim=1, keepdim=True)


@dataclass
class _Trees:
    """``B`` trees as flat tables of rows ``A * f + a``, child ``a`` of family ``f`` (``A``
    actions): the ``B`` roots are rows ``A * b`` (families ``0..B-1``), and every round appends
    a block of ``A`` rows per growing group (the first lane's ``A`` predictions), whose family
    becomes the children of the group's leaf. The last family is never read: above the roots,
    the backups walk into its last row. Rows are written before they are read."""

    state: torch.Tensor  # (rows, S) float
    stats: torch.Tensor  # (rows, 3) float64: visits N, value sum W, reward r
    terminal: torch.Tensor  # (rows,) bool
    first: torch.Tensor  # (rows,) long: the children's family, -1 while unexpanded
    parent: torch.Tensor  # (rows,) long: a root's, and its own, is the last row
    used: int  # rows in use: the next round's block starts here
    n_actions: int  # A: the rows of a family

    @classmethod
    def rooted(cls, root: torch.Tensor, budget: int, n_actions: int) -> _Trees:
        b, s = root.shape
        rows = n_actions * (b * (1 + budget) + 1)
        dev = root.device

        def table(dtype):
            return torch.empty(rows, dtype=dtype, device=dev)

        t = cls(
            state=root.new_empty(rows, s),
            stats=torch.empty(rows, 3, dtype=torch.float64, device=dev),
            terminal=table(torch.bool),
            first=table(torch.long),
            parent=table(torch.long),
            used=n_actions * b,
            n_actions=n_actions,
        )
        roots = slice(0, n_actions * b, n_actions)
        t.state[roots] = root
        t.stats[roots] = 0.0
        t.terminal[roots] = False
        t.first[roots] = -1
        t.parent[roots] = rows - 1
        t.parent[-1] = rows - 1
        t.stats[-1] = 0.0
        return t

    def children(self, fam: torch.Tensor, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N, Q)``, ``(G, A)`` each, of the families ``fam (G,)``: ``Q = r + gamma W / N``."""
        x = self.stats.view(-1, self.n_actions, 3).index_select(0, fam)
        n = x[..., 0]
        return n, x[..., 2] + gamma * x[..., 1] / n


@dataclass
class _Groups:
    """Groups of a round's lanes at one depth (the lanes at one node, consecutive lanes),
    ``(G,)`` each: the node, its children's family, the group's first lane (``b * L + l``)
    and its lanes."""

    node: torch.Tensor
    fam: torch.Tensor
    lane: torch.Tensor
    size: torch.Tensor

    def subset(self, index: torch.Tensor) -> _Groups:
        return _Groups(*(x.index_select(0, index) for x in vars(self).values()))


class _Leaves:
    """Where a round's ``B * L`` lanes stopped: ``first[l] = l`` at the first lane of a group
    at a leaf (an unexpanded or terminal node), else -1; ``leaf[l]`` that group's node
    (entry ``B * L`` takes the writes of the groups still moving)."""

    def __init__(self, lanes: int, device) -> None:
        self.lanes, self.depth = lanes, 0
        self.first = torch.full((lanes + 1,), -1, dtype=torch.long, device=device)
        self.leaf = torch.empty(lanes + 1, dtype=torch.long, device=device)

    def stop(self, g: _Groups) -> _Groups | None:
        """Record ``g``'s groups at leaves; the others, or None if none."""
        moving = g.fam >= 0
        if bool(moving.all()):
            return g
        at = torch.where(moving, self.lanes, g.lane)
        self.first.index_put_((at,), g.lane)
        self.leaf.index_put_((at,), g.node)
        keep = moving.nonzero().squeeze(1)
        return g.subset(keep) if keep.shape[0] else None


def _outside() -> torch.inference_mode:
    """Leave ``TreeSearchPlanner._grow``'s inference mode for a block."""
    return torch.inference_mode(False)


class TreeSearchPlanner:
    """Batched PUCT tree search (module docstring).

    Args:
        model: any world model.
        task: reward, termination, ``gamma`` and the ``A = task.world.n_actions`` actions
            (``gridplan.core.tasks.TaskKind``).
        value: terminal value (``gridplan.planning.learned_value``).
        budget: simulations per decision, ``>= 1`` (``A * budget`` predictions).
        exploration: the PUCT constant ``c > 0``.
        parallel: simulations per round (lanes), ``>= 1``; 1 is sequential PUCT. The
            default suits an exact terminal value; an imperfect one decides better with
            fewer (docs/PERFORMANCE.md, "Batched MCTS").

    Raises:
        ValueError: on a budget or parallel below 1, an exploration constant that is not
            finite and positive, a model or value of another world, or a value of another task.
    """

    name = "mcts"

    def __init__(
        self,
        model,
        task: TaskKind = TASK_A,
        value=None,
        budget: int = 256,
        exploration: float = 1.0,
        parallel: int = 256,
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
        self.n_actions = task.world.n_actions
        # The stated prior of every action (no policy network).
        self.prior = 1.0 / self.n_actions
        self.actions = torch.arange(self.n_actions)
        self.arrival = None
        if isinstance(value, ValueTable) and ArrivalTable.fits(task):
            self.arrival = ArrivalTable(task, value, value.device)

    @property
    def predictions_per_decision(self) -> int:
        return self.n_actions * self.budget

    def _children(self, t: _Trees, g: _Groups):
        """``(n, q)`` ``(G, A)`` of the children of ``g``'s nodes and ``beta (G,)``."""
        n, q = t.children(g.fam, self.task.gamma)
        visits = t.stats[:, 0].index_select(0, g.node)
        return n, q, (self.exploration * self.prior) * visits.sqrt()

    def _split(self, t: _Trees, g: _Groups) -> _Groups:
        """Groups one depth down: each group's lanes split over its node's children as that
        many selections one after another would, taking them in action order (step 1)."""
        n, q, beta = self._children(t, g)
        counts = splits(q, n, beta, g.size, int(g.size.max()))
        pick = counts.view(-1).nonzero().squeeze(1)
        node = (self.n_actions * g.fam.unsqueeze(1) + self.actions.to(n.device)).view(-1)
        node = node.index_select(0, pick)
        lane = (g.lane.unsqueeze(1) + counts.cumsum(dim=1) - counts).view(-1)
        return _Groups(
            node,
            t.first.index_select(0, node),
            lane.index_select(0, pick),
            counts.view(-1).index_select(0, pick),
        )

    def _descend(self, t: _Trees, roots: torch.Tensor, width: int) -> _Leaves:
        """Every lane of every tree from its root down to a leaf, depth by depth, each group
        split over its node's children (``splits``)."""
        b, dev = roots.shape[0], roots.device
        out = _Leaves(b * width, dev)
        g = _Groups(
            roots,
            t.first.index_select(0, roots),
            torch.arange(0, b * width, width, device=dev),
            torch.full_like(roots, width),
        )
        while (g := out.stop(g)) is not None:
            out.depth += 1
            g = self._split(t, g)
        return out

    def _expand(self, t: _Trees, at: _Leaves, generator, step: int):
        """Predict every lane's ``A`` children; the first lane's of each group at a leaf that is
        not terminal become the leaf's children in the round's block (only they are scored
        and valued). Each lane's leaf and estimate ``(B * L,)`` (step 2)."""
        lanes, dev, s, a = at.lanes, at.first.device, t.state.shape[1], self.n_actions
        owner = at.first[:lanes].cummax(dim=0).values  # the first lane of each lane's group
        leaf = at.leaf.index_select(0, owner)
        parent = t.state.index_select(0, leaf)
        # Each lane's state A times over: a cat copies rows, an expanded copy element by element.
        parent = torch.cat([parent] * a, dim=1).view(-1, s)
        action = self.actions.to(dev).repeat(lanes)
        with _outside():
            nxt = self.model.predict(parent, action, generator)
        check_prediction(nxt, self.model, step, a * lanes, "tree rows", s)
        lane = torch.arange(lanes, device=dev)
        ends = t.terminal.index_select(0, leaf)
        grow = ((owner == lane) & ~ends).nonzero().squeeze(1)
        block = slice(t.used, t.used + a * grow.shape[0])
        kids = t.state[block]  # the growing lanes' predictions go straight into the block
        torch.index_select(nxt.view(lanes, -1), 0, grow, out=kids.view(-1, a * s))
        estimate = self._arrive(t, block, kids)
        t.first[block] = -1
        grown = leaf.index_select(0, grow)
        t.parent[block].view(-1, a).copy_(grown.unsqueeze(1))
        fam = torch.arange(t.used // a, t.used // a + grow.shape[0], device=dev)
        t.first.index_copy_(0, grown, fam)
        t.used += kids.shape[0]
        # Each lane's estimate: its group's first lane's best child; 0 at a terminal leaf,
        # whose first lane does not grow.
        best = estimate.view(-1, a).amax(dim=1)
        return leaf, best.new_zeros(lanes).index_copy_(0, grow, best).index_select(0, owner)

    def _arrive(self, t: _Trees, block: slice, kids: torch.Tensor) -> torch.Tensor:
        """Write the new nodes ``kids (R, S)`` of ``block``: ``N = 1``, ``W = V`` (0 once
        terminal), the reward ``r`` and the terminal flag; their ``r + gamma * V`` ``(R,)``
        float64. Through the ``ArrivalTable`` with exact V* in a small world, else reward and
        value read one by one (the same values)."""
        if self.arrival is not None:
            row = self.arrival.index(kids)
            torch.index_select(self.arrival.rows, 0, row, out=t.stats[block])
            torch.index_select(self.arrival.terminal, 0, row, out=t.terminal[block])
            return self.arrival.estimate.index_select(0, row)
        with _outside():
            r, goal, hazard = dynamics.outcome(self.task, kids)
            v = self.value.lookup(kids)
        done = goal | hazard
        v = (v * ~done).double()
        r = r.double()
        t.stats[block, 0] = 1.0
        t.stats[block, 1] = v
        t.stats[block, 2] = r
        t.terminal[block] = done
        return r + self.task.gamma * v

    def _backup(self, t: _Trees, leaf: torch.Tensor, g: torch.Tensor, depth: int) -> None:
        """Add each lane's discounted return to every node on its path, lane after lane
        (one accumulating write: a node sits at one depth), walking up the parents; a lane
        that passed its root walks on in the last row, which is never read (step 3)."""
        gamma, reward = self.task.gamma, t.stats[:, 2]
        # Lane-major rows, each lane's path after the one before: the order of the adds.
        nodes = leaf.new_empty(leaf.shape[0], depth + 1)
        add = g.new_empty(leaf.shape[0], depth + 1, 2)
        add[:, :, 0] = 1.0
        nodes[:, 0], add[:, 0, 1] = leaf, g
        for k in range(1, depth + 1):
            g = reward.index_select(0, leaf) + gamma * g
            leaf = t.parent.index_select(0, leaf)
            nodes[:, k], add[:, k, 1] = leaf, g
        t.stats[:, :2].index_add_(0, nodes.view(-1), add.view(-1, 2))

    @torch.no_grad()
    def tree(self, root: torch.Tensor, generator: torch.Generator):
        """Grow the trees; ``(visits (B, A), q (B, A))`` float64 of the root's children."""
        check_state(root, "root state", self.task.world)
        visits, q = self._grow(root, generator)
        return visits.clone(), q.clone()  # ordinary tensors: a caller may write into them

    @torch.inference_mode()
    def _grow(self, root: torch.Tensor, generator: torch.Generator):
        """``tree``'s rounds. The tables and the tree's own work run in inference mode (each
        op dispatches faster: about 6% of a decision with the oracle); the model's predictions
        and a value or task read apart run outside it (``_outside``), so that what they make
        and cache stays an ordinary tensor."""
        a = self.n_actions
        t = _Trees.rooted(root, self.budget, a)
        roots = torch.arange(0, a * root.shape[0], a, device=root.device)
        for step, width in enumerate(lane_schedule(self.budget, self.parallel, a)):
            at = self._descend(t, roots, width)
            leaf, g = self._expand(t, at, generator, step)
            self._backup(t, leaf, g, at.depth)
        return t.children(t.first.index_select(0, roots), self.task.gamma)

    def search(self, root: torch.Tensor, generator: torch.Generator):
        """Grow the trees; returns ``(visits (B, A), q (B, A))`` float32 of the root's
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
