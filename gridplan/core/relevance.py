"""Relevance of the state dims to a task: the graded weights of Eq. 1 and the binary mask.

Paper §3 Eq. 1: ``w_j = E_{s~rho} |V*(s ⊕ j) - V*(s)|``, the ``perturbation_saliency``
(``gridplan.core.values``) of the exact V* over ``rho``, the states the optimal policy visits
(our choice: the paper leaves ``rho`` open). Any task of either kind
(``gridplan.core.dynamics``): the paper's gridworld or MiniGrid DoorKey, where a dim's one-step
perturbation is one step of its lattice (``world.dim_scales``).
"""

from __future__ import annotations

import functools

import torch

from gridplan.core import dynamics
from gridplan.core.tasks import TASK_A, TaskKind, check
from gridplan.core.values import perturbation_saliency


def optimal_state_distribution(
    task: TaskKind = TASK_A, episodes: int = 2048, seed: int = 0
) -> torch.Tensor:
    """States visited by the optimal (greedy-in-Q*) policy from reset states: ``(N, S)``.

    This is the distribution ``rho`` of Eq. 1 (our choice: the paper leaves it open). Episodes
    run for at most ``task.horizon`` steps; ties between optimal actions are broken at random
    with ``seed``.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    table = dynamics.value_table(task)
    gen = torch.Generator().manual_seed(seed)
    state = dynamics.reset(task, episodes, gen)
    visited = []
    alive = torch.ones(episodes, dtype=torch.bool)
    for _ in range(task.horizon):
        visited.append(state[alive])
        q = table.q_values(state)
        best = q >= q.max(dim=1, keepdim=True).values - 1e-9
        action = (torch.rand(q.shape, generator=gen) * best).argmax(dim=1)
        state, _, done, _ = dynamics.step(task, state, action, gen)
        alive &= ~done
        if not alive.any():
            break
    return torch.cat(visited)


@functools.lru_cache(maxsize=8)
def _graded_weights(task: TaskKind) -> torch.Tensor:
    states = optimal_state_distribution(task)
    # V* reads the relevant dims only: the others' saliency is exactly 0 unscored.
    lookup = dynamics.value_table(task).lookup
    return perturbation_saliency(lookup, states, world=task.world, dims=task.relevant_dims)


def relevance_weights(task: TaskKind = TASK_A) -> torch.Tensor:
    """Graded relevance weights (paper Eq. 1): the ``perturbation_saliency`` of the exact V*
    over the optimal policy's states (``optimal_state_distribution``); computed once per task.

    Returns:
        ``(S,)`` float32 weights, non-negative, summing to 1, exactly 0 on the dimensions
        V* does not read (a fresh copy: callers may modify it).

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    return _graded_weights(check(task)).clone()


def binary_weights(task: TaskKind = TASK_A) -> torch.Tensor:
    """Binary relevance weights ``(S,)``: ``1/d_R`` on ``task.relevant_dims``, else 0.

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    dims = check(task).relevant_dims
    w = torch.zeros(task.world.state_dim)
    w[list(dims)] = 1.0 / len(dims)
    return w
