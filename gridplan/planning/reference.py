"""Plain-Python reference of the environment and the planner, one episode at a time.

The batched code in ``gridplan.core.env`` and ``gridplan.planning.planner`` is checked against this
module on random seeds (``tests/core/test_reference.py``), and benchmarks use ``ref_plan`` as the
per-episode, leaf-by-leaf baseline. It is written from the rules of paper §3 and appendix D
on ints, bools and tuples, without calling the batched functions, so that agreement between
the two is evidence that both follow the rules. The shared inputs are the task's data (its
goal and hazard cells, ``gamma``: ``gridplan.core.tasks.Task``) and the exact V* table
(``gridplan.core.values``), read here as a plain Python list; V* itself is checked on hand-worked
cells by the tests.

The reference covers worlds with the paper's state layout (one colour bit and one distractor
of each kind: 12 dims) on any grid (``gridplan.core.world.World``); ``ref_relevant_step`` covers
every world, and ``ref_tree_search`` any task's actions (MiniGrid DoorKey's seven) given the
task's reward and value of one state.

Conventions shared with the batched code (they are the specification, not code reuse):
state layout and normalization (position = cell / (N - 1)), action order up/down/left/right, the
d1 walk's five moves (the four actions, then stay), the V* table's flat index order, and the
planner's tie rules (``TIE_TOLERANCE``; ``"first"``: the lowest tied index, ``"random"``: the
largest of four uniform tie draws). To match ``gridplan.core.env.to_cell``
bit for bit on noisy predictions, ``ref_decode`` rounds ``value * (N - 1)`` in float32
arithmetic (half to even), as torch does.
"""

from __future__ import annotations

import functools
import itertools
import math
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from gridplan.core.constants import GOAL_REWARD, HAZARD_REWARD
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.core.values import value_table
from gridplan.core.world import DEFAULT, World
from gridplan.planning.mcts import lane_schedule
from gridplan.planning.planner import TIE_TOLERANCE

#: (dx, dy) of up, down, left, right (paper appendix D).
REF_MOVES = ((0, 1), (0, -1), (-1, 0), (1, 0))
#: Moves of the d1 random walk: the four actions, then stay (index 4).
REF_DISTRACTOR_MOVES = (*REF_MOVES, (0, 0))
_FLAG_FIELDS = ("carrying", "door_open", "c1", "c2")

PredictFn = Callable[[list, int], list]
#: ``vector -> (reward, terminal)``: the reward of arriving in one state.
OutcomeFn = Callable[[list], tuple[float, bool]]


class RefState(NamedTuple):
    """One discrete state: integer cells ``0..N-1`` and bool flags, in the 12-dim layout order."""

    agent_x: int
    agent_y: int
    key_x: int
    key_y: int
    carrying: bool
    door_open: bool
    c1: bool
    c2: bool
    d1_x: int
    d1_y: int
    d2_x: int
    d2_y: int


def _f32(value: float) -> float:
    """Round a Python float to the nearest float32 value."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _check_layout(world: World) -> World:
    """``world`` if it has the paper's 12-dim layout. Raises ValueError otherwise."""
    if world.state_dim != len(RefState._fields) or world.dim_names != RefState._fields:
        raise ValueError(
            f"the reference covers worlds with the paper's 12-dim layout; world "
            f"{world.name!r} has {world.state_dim} dims"
        )
    return world


def _cell(value: float, world: World) -> int:
    """Normalized coordinate -> cell: ``round(value * (N - 1))`` in float32, half to even,
    clamped."""
    scale = world.size - 1
    scaled = _f32(_f32(value) * float(scale))
    return min(max(round(scaled), 0), scale)


def ref_encode(state: RefState, world: World = DEFAULT) -> list[float]:
    """A ``RefState`` as a normalized 12-vector: positions ``cell / (N - 1)``, flags 0.0 or 1.0.

    Raises:
        ValueError: if ``world`` lacks the paper's layout.
    """
    scale = _check_layout(world).size - 1
    return [
        float(bool(v)) if name in _FLAG_FIELDS else v / scale
        for name, v in zip(RefState._fields, state, strict=True)
    ]


def ref_decode(vector: Sequence[float], world: World = DEFAULT) -> RefState:
    """A (possibly noisy) normalized 12-vector read as the ``RefState`` it rounds to:
    positions to the nearest cell clamped to the grid, flags thresholded at 0.5.

    Raises:
        ValueError: if ``vector`` does not have 12 finite entries, or ``world`` lacks the
            paper's layout.
    """
    _check_layout(world)
    if len(vector) != len(RefState._fields):
        raise ValueError(f"state vector must have 12 entries, got {len(vector)}")
    if not all(math.isfinite(v) for v in vector):
        raise ValueError("state vector holds non-finite values (NaN or inf)")
    fields = []
    for name, value in zip(RefState._fields, vector, strict=True):
        if name in _FLAG_FIELDS:
            fields.append(_f32(value) > 0.5)
        else:
            fields.append(_cell(value, world))
    return RefState(*fields)


def ref_outcome(cell: tuple[int, int], c1: bool, task: Task) -> tuple[float, bool, bool]:
    """Reward of arriving at ``cell``: ``(reward, goal, hazard)`` (paper §3, §5.3)."""
    goal, hazard = task.goal, task.hazard
    if task.swap_on_c1 and c1:
        goal, hazard = hazard, goal
    if cell == goal:
        return GOAL_REWARD, True, False
    if cell == hazard:
        return HAZARD_REWARD, False, True
    return 0.0, False, False


def ref_relevant_step(
    agent: tuple[int, int],
    key: tuple[int, int],
    carrying: bool,
    door_open: bool,
    action: int,
    world: World,
) -> tuple[tuple[int, int], tuple[int, int], bool, bool, bool, bool]:
    """Agent, key and door of one step on any world (paper §3, appendix D): ``(agent, key,
    carrying, door_open, pickup, door_opened)``. A move off the grid or into the wall stays;
    the closed door opens for a carrying agent, who stays that step."""
    dx, dy = REF_MOVES[action]
    ax, ay = agent
    tx, ty = ax + dx, ay + dy
    door_opened = False
    if not (0 <= tx < world.size and 0 <= ty < world.size):
        pass
    elif (tx, ty) == world.door_cell:
        if door_open:
            ax, ay = tx, ty
        elif carrying:
            door_open = door_opened = True
    elif tx != world.wall_x:
        ax, ay = tx, ty
    pickup = not carrying and (ax, ay) == key
    carrying = carrying or pickup
    key = (ax, ay) if carrying else key
    return (ax, ay), key, carrying, door_open, pickup, door_opened


def ref_step(
    state: RefState, action: int, d1_move: int, d2_cell: tuple[int, int], task: Task = TASK_A
) -> tuple[RefState, float, bool, dict[str, bool]]:
    """One true environment step of one episode, with the distractor draws given (paper §3).

    Args:
        state: the current discrete state.
        action: ``0..3`` (up, down, left, right).
        d1_move: ``0..4``, index into ``REF_DISTRACTOR_MOVES`` (4 = stay); clipped to the grid.
        d2_cell: the freshly drawn d2 cell ``(x, y)``.
        task: the goal and hazard cells, and the world (the paper's layout on any grid).

    Returns:
        ``(next_state, reward, terminated, info)`` with ``info`` the bool events ``pickup``,
        ``door_opened``, ``goal``, ``hazard``.

    Raises:
        ValueError: on an action outside ``0..3``, a d1 move outside ``0..4`` or a world
            without the paper's layout.
        TypeError: if ``task`` is not a ``Task``.
    """
    check(task)
    if not isinstance(action, int) or not 0 <= action < len(REF_MOVES):
        raise ValueError(f"action must be an int in 0..3, got {action!r}")
    if not isinstance(d1_move, int) or not 0 <= d1_move < len(REF_DISTRACTOR_MOVES):
        raise ValueError(f"d1_move must be an int in 0..4, got {d1_move!r}")
    world = _check_layout(task.world)
    (ax, ay), key, carrying, door_open, pickup, door_opened = ref_relevant_step(
        (state.agent_x, state.agent_y), (state.key_x, state.key_y), state.carrying,
        state.door_open, action, world,
    )
    mx, my = REF_DISTRACTOR_MOVES[d1_move]
    top = world.size - 1
    d1 = (min(max(state.d1_x + mx, 0), top), min(max(state.d1_y + my, 0), top))
    reward, goal, hazard = ref_outcome((ax, ay), state.c1, task)
    nxt = RefState(ax, ay, *key, carrying, door_open, state.c1, not state.c2, *d1, *d2_cell)
    info = {"pickup": pickup, "door_opened": door_opened, "goal": goal, "hazard": hazard}
    return nxt, reward, goal or hazard, info


def ref_value(table: Sequence[float], state: RefState, task: Task = TASK_A) -> float:
    """V* of a discrete state read from the flat table of ``gridplan.core.values.ValueTable``.

    The table is ordered agent x, agent y, key x, key y, carrying, door open (, c1 when
    ``task.reads_c1``), last index fastest.
    """
    n = task.world.size
    idx = (state.agent_x * n + state.agent_y) * n**2
    idx += state.key_x * n + state.key_y
    idx = (idx * 2 + state.carrying) * 2 + state.door_open
    if task.reads_c1:
        idx = idx * 2 + state.c1
    return table[idx]


@functools.lru_cache(maxsize=8)
def value_table_list(task: Task = TASK_A) -> tuple[float, ...]:
    """The exact V* table of ``task`` as a plain tuple (computed once, then cached).

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    return tuple(value_table(task).table.tolist())


def ref_oracle_predict(vector: Sequence[float], action: int, task: Task = TASK_A) -> list[float]:
    """Per-state oracle for ``ref_plan``: the true step of the rounded state (bind ``task``
    with ``functools.partial`` for another world).

    The distractor draws are fixed (d1 stays, d2 stays); leaf scores never read them.
    """
    state = ref_decode(vector, task.world)
    stay = len(REF_DISTRACTOR_MOVES) - 1
    nxt = ref_step(state, action, stay, (state.d2_x, state.d2_y), task)[0]
    return ref_encode(nxt, task.world)


def _root_vector(state: RefState | Sequence[float], world: World) -> list[float]:
    if isinstance(state, RefState):
        return ref_encode(state, world)
    vector = [float(v) for v in state]
    ref_decode(vector, world)
    return vector


def ref_action_values(
    state: RefState | Sequence[float],
    depth: int,
    task: Task,
    predict_fn: PredictFn,
    table: Sequence[float] | None = None,
) -> list[float]:
    """Best leaf score under each first action, enumerating all ``4^D`` sequences one by one.

    Each leaf is rolled from the root by ``predict_fn`` (no shared prefixes, as in the batched
    planner); its score is ``sum_t gamma^t r_t`` over the predicted states until the first
    goal or hazard, plus ``gamma^D V*`` of the last predicted state if none was reached.
    A leaf stops calling ``predict_fn`` once it is terminal.

    Args:
        state: root as a ``RefState`` or a normalized 12-vector.
        depth: ``D >= 1``.
        task: the reward, the discount ``task.gamma`` and the V* table.
        predict_fn: ``(vector12, action) -> vector12``, one imagined step of one state.
        table: the flat V* table (default: ``value_table_list(task)``).

    Returns:
        Four floats, indexed by first action.

    Raises:
        ValueError: on ``depth < 1`` or a malformed root.
        TypeError: if ``task`` is not a ``Task``.
    """
    check(task)
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    table = value_table_list(task) if table is None else table
    gamma = task.gamma
    root = _root_vector(state, task.world)
    best = [-math.inf] * len(REF_MOVES)
    for sequence in itertools.product(range(len(REF_MOVES)), repeat=depth):
        vector, score, alive = root, 0.0, True
        for t, action in enumerate(sequence):
            vector = predict_fn(vector, action)
            decoded = ref_decode(vector, task.world)
            reward, goal, hazard = ref_outcome((decoded.agent_x, decoded.agent_y), decoded.c1, task)
            score += gamma**t * reward
            if goal or hazard:
                alive = False
                break
        if alive:
            score += gamma**depth * ref_value(table, decoded, task)
        best[sequence[0]] = max(best[sequence[0]], score)
    return best


def ref_plan(
    state: RefState | Sequence[float],
    depth: int,
    task: Task,
    predict_fn: PredictFn,
    tie_draws: Sequence[float],
    table: Sequence[float] | None = None,
    ties: str = "first",
) -> int:
    """The planner's first action for one episode (paper §3 "Planner"; ``Planner.act``).

    Among first actions whose value is within ``TIE_TOLERANCE`` of the best: under
    ``ties="first"`` the lowest-index one wins; under ``ties="random"`` the one with the largest
    tie draw (the first such action if draws are equal). The draws are taken by the caller
    under both rules, as the batched planner draws them.

    Args:
        state, depth, task, predict_fn, table: as in ``ref_action_values``.
        tie_draws: four uniform ``[0, 1)`` draws, one per action.
        ties: ``"first"`` (the default reading's rule) or ``"random"``.

    Returns:
        The chosen action ``0..3``.

    Raises:
        ValueError: as ``ref_action_values``, if ``tie_draws`` does not hold 4 values, or if
            ``ties`` is neither ``"first"`` nor ``"random"``.
    """
    if len(tie_draws) != len(REF_MOVES):
        raise ValueError(f"tie_draws must hold {len(REF_MOVES)} values, got {len(tie_draws)}")
    if ties not in ("first", "random"):
        raise ValueError(f"ties must be 'first' or 'random', got {ties!r}")
    values = ref_action_values(state, depth, task, predict_fn, table)
    top = max(values)
    tied = [v >= top - TIE_TOLERANCE for v in values]
    if ties == "first":
        return tied.index(True)
    keys = [d if t else 0.0 for t, d in zip(tied, tie_draws, strict=True)]
    return keys.index(max(keys))


def ref_tree_search(
    state: RefState | Sequence[float],
    task: Task,
    predict_fn: PredictFn,
    budget: int,
    exploration: float = 1.0,
    parallel: int = 1,
    value_fn: Callable[[list], float] | None = None,
    outcome_fn: OutcomeFn | None = None,
) -> tuple[list[float], list[float], int]:
    """PUCT tree search of one root, one simulation at a time (``gridplan.planning.mcts``),
    over the task's ``A = task.world.n_actions`` actions.

    The simulations run in rounds of lanes (``gridplan.planning.mcts.lane_schedule``, a
    convention shared with the batched search). In a round, the lanes descend from the root through
    expanded, non-terminal nodes. The ``m`` lanes at node ``s`` split over its children as
    ``m`` selections one after another would: each takes the first action maximising
    ``Q(s, a) + exploration / A * sqrt(N(s)) / (1 + N(s, a) + O(s, a))`` with
    ``Q = r + gamma * W / N`` and ``O(s, a)`` the earlier selections of ``a``; the lanes, in
    order, take the selected children in action order. Then each leaf reached, once, is
    expanded (its ``A`` children predicted, each with
    ``N = 1`` and ``W = V`` of the child, 0 once terminal) or, if terminal, valued 0; an
    expanded leaf's estimate is ``max_a r + gamma * V``. Then lane after lane backs its
    leaf's estimate up its path, discounting by each step's reward. Rewards and values are
    read as float32, as the batched tables hold them; the statistics are Python floats.

    Args:
        state: root as a ``RefState`` or a normalized 12-vector; with ``outcome_fn``, any
            state vector of the task.
        task: reward, termination, ``gamma``, the actions and the V* table.
        predict_fn: ``(vector, action) -> vector``, one imagined step of one state.
        budget: simulations, ``>= 1``.
        exploration: the PUCT constant.
        parallel: lanes per round, ``>= 1``.
        value_fn: ``vector -> float`` terminal value (default: exact V* of the paper's
            layout; needed with ``outcome_fn``).
        outcome_fn: ``vector -> (reward, terminal)`` (default: the paper's rules,
            ``ref_outcome``); given, the root is not decoded, so any task's states serve.

    Returns:
        ``(visits, q, action)``: the root children's visit counts and ``Q``, and the most
        visited action (ties to the larger ``Q``, then the lowest action).

    Raises:
        ValueError: on a malformed root, a budget or parallel below 1, or ``outcome_fn``
            without ``value_fn``.
        TypeError: if ``task`` is not a task (``TaskKind``).
    """
    check(task)
    if budget < 1 or parallel < 1:
        raise ValueError(f"budget and parallel must be >= 1, got {budget}, {parallel}")
    if outcome_fn is not None:
        if value_fn is None:
            raise ValueError("ref_tree_search with an outcome_fn needs its value_fn")
        root = [float(v) for v in state]
    else:
        outcome_fn = functools.partial(_ref_arrival, task=task)
        root = _root_vector(state, task.world)
    if value_fn is None:
        table = value_table_list(task)

        def value_fn(vector):
            return ref_value(table, ref_decode(vector, task.world), task)

    tree = _RefTree(task, root)
    for lanes in lane_schedule(budget, parallel, task.world.n_actions):
        paths = tree.descend(lanes, exploration)
        estimate: dict[int, float] = {}
        for path in paths:
            if path[-1] not in estimate:
                estimate[path[-1]] = tree.expand(path[-1], predict_fn, value_fn, outcome_fn)
        for path in paths:
            tree.backup(path, estimate[path[-1]])
    kids = tree.children[0]
    n_root = [tree.visits[k] for k in kids]
    q_root = [tree.q(k) for k in kids]
    best = [q_root[a] if n_root[a] == max(n_root) else -math.inf for a in range(len(kids))]
    return n_root, q_root, best.index(max(best))


def _ref_arrival(vector: list[float], task: Task) -> tuple[float, bool]:
    """``(reward, terminal)`` of arriving in a state of the paper's layout (``ref_outcome``)."""
    decoded = ref_decode(vector, task.world)
    reward, goal, hazard = ref_outcome((decoded.agent_x, decoded.agent_y), decoded.c1, task)
    return reward, goal or hazard


class _RefTree:
    """One search tree of ``ref_tree_search`` as plain lists, node 0 the root."""

    def __init__(self, task, root: list[float]) -> None:
        self.task, self.n_actions = task, task.world.n_actions
        self.vectors = [root]
        self.visits, self.total, self.reward, self.terminal = [0.0], [0.0], [0.0], [False]
        self.children: list[list[int] | None] = [None]

    def q(self, n: int) -> float:
        return self.reward[n] + self.task.gamma * self.total[n] / self.visits[n]

    def descend(self, lanes: int, exploration: float) -> list[list[int]]:
        """Each lane's path from the root; the lanes at a node split as selections one
        after another would, taking the selected children in action order."""
        paths = [[0] for _ in range(lanes)]
        groups = [(0, list(range(lanes)))]
        while groups:
            node, members = groups.pop()
            kids = self.children[node]
            if kids is None or self.terminal[node]:
                continue
            beta = exploration * (1 / self.n_actions) * math.sqrt(self.visits[node])
            taken = [0] * self.n_actions
            for _ in members:
                scores = [
                    self.q(k) + beta / (1 + self.visits[k] + taken[a]) for a, k in enumerate(kids)
                ]
                taken[scores.index(max(scores))] += 1
            for a, kid in enumerate(kids):
                share, members = members[: taken[a]], members[taken[a] :]
                for lane in share:
                    paths[lane].append(kid)
                if share:
                    groups.append((kid, share))
        return paths

    def expand(self, leaf: int, predict_fn: PredictFn, value_fn, outcome_fn: OutcomeFn) -> float:
        """The leaf's estimate: 0 if terminal, else the best ``r + gamma * V`` of its ``A``
        children, which join the tree with ``N = 1`` and ``W = V``."""
        if self.terminal[leaf]:
            return 0.0
        gamma, a = self.task.gamma, self.n_actions
        self.children[leaf] = list(range(len(self.vectors), len(self.vectors) + a))
        values = []
        for action in range(a):
            nxt = predict_fn(self.vectors[leaf], action)
            r, done = outcome_fn(nxt)
            v = 0.0 if done else _f32(value_fn(nxt))
            self.vectors.append(nxt)
            self.visits.append(1.0)
            self.total.append(v)
            self.reward.append(_f32(r))
            self.terminal.append(done)
            self.children.append(None)
            values.append(self.reward[-1] + gamma * v)
        return max(values)

    def backup(self, path: list[int], g: float) -> None:
        """Add the leaf's estimate ``g``, discounted step by step, to every node of ``path``."""
        self.visits[path[-1]] += 1
        self.total[path[-1]] += g
        for here, below in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
            g = self.reward[below] + self.task.gamma * g
            self.visits[here] += 1
            self.total[here] += g
