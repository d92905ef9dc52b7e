"""Batched Monte Carlo tree search over a world model (PUCT, Silver et al. 2017; paper §3
"Planner" for the reward and terminal value it shares with the full-width search).

One tree per root, all ``B`` trees grown in lockstep. Each of ``budget`` simulations:

1. **Select**: from the root, descend through expanded, non-terminal nodes by
   ``argmax_a Q(s, a) + c * P(a) * sqrt(N(s)) / (1 + N(s, a))`` with the stated prior
   ``P(a) = 1/4`` (uniform: no policy network) and ``Q(s, a) = r(s_a) + gamma * W(s_a) / N(s_a)``;
   ties go to the lowest action.
2. **Expand** the node reached (unless terminal): all 4 children in one ``predict`` call of
   ``B * 4`` rows, each child valued ``r(s_a) + gamma * V(s_a)`` while alive (``V`` the terminal
   value: exact V*, learned or none; ``gridplan.planning.learned_value``); the node's new
   estimate is the best of them (a one-step backup).
3. **Back up** that estimate along the path: every node's ``N`` grows by 1 and its ``W`` by its
   discounted return from there.

The decision is the root's most visited action (ties to the larger ``Q``, then the lowest
action). A budget of ``b`` simulations costs ``4 b`` predictions per decision; the default
256 matches the depth-4 full-width search's 1,024. The tree is deterministic given the
model's predictions: the only draws are the model's, from the caller's generator.
"""

from __future__ import annotations

import math

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import check_state, state_outcome
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.models.contract import check_model_world
from gridplan.planning.learned_value import check_value
from gridplan.planning.scorers import check_prediction
from gridplan.planning.sequences import Plan


class TreeSearchPlanner:
    """Batched PUCT tree search (module docstring).

    Args:
        model: any world model.
        task: reward, termination and ``gamma``.
        value: terminal value (``gridplan.planning.learned_value``).
        budget: simulations per decision, ``>= 1`` (``4 * budget`` predictions).
        exploration: the PUCT constant ``c > 0``.

    Raises:
        ValueError: on a budget below 1, an exploration constant that is not finite and
            positive, a model or value of another world, or a value of another task.
    """

    name = "mcts"

    def __init__(
        self,
        model,
        task: Task = TASK_A,
        value=None,
        budget: int = 256,
        exploration: float = 1.0,
    ) -> None:
        check(task)
        check_model_world(model, task.world)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
        if not (math.isfinite(exploration) and exploration > 0):
            raise ValueError(f"exploration must be finite and > 0, got {exploration!r}")
        if value is None:
            raise ValueError("a tree search needs a terminal value (learned_value)")
        check_value(value, task)
        self.model, self.task, self.value = model, task, value
        self.budget, self.exploration = budget, float(exploration)

    @property
    def predictions_per_decision(self) -> int:
        return N_ACTIONS * self.budget

    @torch.no_grad()
    def search(self, root: torch.Tensor, generator: torch.Generator):
        """Grow the trees; returns ``(visits (B, 4), q (B, 4))`` of the root's children."""
        check_state(root, "root state", self.task.world)
        b, s = root.shape
        dev = root.device
        size = 1 + N_ACTIONS * self.budget
        gamma = self.task.gamma
        state = root.new_zeros(b, size, s)
        state[:, 0] = root
        visits = root.new_zeros(b, size)
        total = root.new_zeros(b, size)
        reward = root.new_zeros(b, size)
        terminal = torch.zeros(b, size, dtype=torch.bool, device=dev)
        children = torch.full((b, size, N_ACTIONS), -1, dtype=torch.long, device=dev)
        used = torch.ones(b, dtype=torch.long, device=dev)
        rows = torch.arange(b, device=dev)
        prior = 1.0 / N_ACTIONS
        for sim in range(self.budget):
            node = torch.zeros(b, dtype=torch.long, device=dev)
            path = [node]
            moving = (children[rows, node, 0] >= 0) & ~terminal[rows, node]
            while moving.any():
                kids = children[rows, node]
                n_kid = visits.gather(1, kids.clamp(min=0))
                q = reward.gather(1, kids.clamp(min=0)) + gamma * total.gather(
                    1, kids.clamp(min=0)
                ) / n_kid.clamp(min=1)
                bonus = self.exploration * prior * visits[rows, node].sqrt().unsqueeze(1)
                choice = (q + bonus / (1 + n_kid)).argmax(dim=1)
                node = torch.where(moving, kids[rows, choice], node)
                path.append(node)
                moving &= (children[rows, node, 0] >= 0) & ~terminal[rows, node]
            leaf = node
            grow = ~terminal[rows, leaf] & (children[rows, leaf, 0] < 0)
            parent = state[rows, leaf].repeat_interleave(N_ACTIONS, dim=0)
            actions = torch.arange(N_ACTIONS, device=dev).repeat(b)
            nxt = self.model.predict(parent, actions, generator)
            check_prediction(nxt, self.model, sim, b * N_ACTIONS, "tree rows", s)
            r, goal, hazard = state_outcome(nxt, self.task)
            done = goal | hazard
            v = self.value.lookup(nxt) * ~done
            qa = (r + gamma * v).view(b, N_ACTIONS)
            slots = used.unsqueeze(1) + torch.arange(N_ACTIONS, device=dev)
            target = torch.where(grow.unsqueeze(1), slots, 0)
            ok = grow.unsqueeze(1).expand(-1, N_ACTIONS)
            flat = (rows.unsqueeze(1) * size + target)[ok]
            state.view(-1, s)[flat] = nxt.view(b, N_ACTIONS, s)[ok]
            reward.view(-1)[flat] = r.view(b, N_ACTIONS)[ok]
            terminal.view(-1)[flat] = done.view(b, N_ACTIONS)[ok]
            visits.view(-1)[flat] = 1.0
            total.view(-1)[flat] = v.view(b, N_ACTIONS)[ok]
            children[rows[grow], leaf[grow]] = slots[grow]
            used += grow.long() * N_ACTIONS
            # A terminal leaf is worth 0; an expanded one its best child's one-step value.
            g = torch.where(grow, qa.amax(dim=1), root.new_zeros(b))
            visits[rows, leaf] += 1
            total[rows, leaf] += g
            # Up the path: a tree that stopped early repeats its node; count each node once.
            for depth in range(len(path) - 2, -1, -1):
                here, below = path[depth], path[depth + 1]
                stepped = below != here
                g = torch.where(stepped, reward[rows, below] + gamma * g, g)
                visits[rows, here] += stepped
                total[rows, here] += g * stepped
        kids = children[:, 0]
        n_root = visits.gather(1, kids)
        q_root = reward.gather(1, kids) + gamma * total.gather(1, kids) / n_root
        return n_root, q_root

    def _choose(self, visits: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        most = visits >= visits.amax(dim=1, keepdim=True)
        return torch.where(most, q, torch.full_like(q, -math.inf)).argmax(dim=1)

    def act(self, root: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Chosen first actions ``(B,)`` long (module docstring)."""
        return self._choose(*self.search(root, generator))

    def plan(self, root: torch.Tensor, generator: torch.Generator) -> Plan:
        """The chosen action as a one-step ``Plan``; ``predicted`` is its ``Q`` in the tree."""
        visits, q = self.search(root, generator)
        action = self._choose(visits, q)
        predicted = q.gather(1, action.unsqueeze(1)).squeeze(1)
        return Plan(action=action, sequence=action.unsqueeze(1), predicted=predicted)
