"""The ``expert`` behaviour policy: transitions of the exact optimal policy only
(gridplan.data.datasets)."""

from __future__ import annotations

import math

import pytest
import torch

from gridplan.core.tasks import TASK_A
from gridplan.core.values import value_table
from gridplan.data.datasets import collect, eval_windows


@pytest.fixture(scope="module")
def expert_4k():
    return collect("expert", 4_000, seed=5)


def test_every_expert_action_is_optimal_under_q_star(expert_4k):
    d = expert_4k
    q = value_table(TASK_A).q_values(d.states)
    chosen = q.gather(1, d.actions.unsqueeze(1)).squeeze(1)
    assert (chosen >= q.max(dim=1).values - 1e-6).all()


def test_balanced_data_do_contain_suboptimal_actions():
    d = collect("balanced", 4_000, seed=5)
    q = value_table(TASK_A).q_values(d.states)
    chosen = q.gather(1, d.actions.unsqueeze(1)).squeeze(1)
    assert (chosen < q.max(dim=1).values - 1e-6).float().mean() > 0.1


def test_every_finished_expert_episode_picks_up_the_key_opens_the_door_and_reaches_the_goal(
    expert_4k,
):
    d = expert_4k
    last = torch.ones(len(d), dtype=torch.bool)
    last[:-1] = d.episode[1:] != d.episode[:-1]
    # The budget cuts the last episode of each of the 128 slots short; every other one ends.
    finished = d.episode[last & d.terminated]
    assert finished.numel() >= 128
    for name in ("pickup", "door_opened", "goal"):
        flag = getattr(d, name)
        per_episode = torch.zeros(int(d.episode.max()) + 1, dtype=torch.long)
        per_episode.index_add_(0, d.episode, flag.long())
        assert (per_episode[finished] == 1).all(), name
    # Shortest paths: V*(s_0) = gamma^(L - 1) for an episode of L steps; never a timeout.
    lengths = d.t[last & d.terminated] + 1
    first = torch.full((int(d.episode.max()) + 1,), -1)
    first[d.episode[d.t == 0]] = torch.nonzero(d.t == 0).flatten()
    v0 = value_table(TASK_A).lookup(d.states[first[finished]])
    steps = 1 + torch.round(torch.log(v0) / math.log(TASK_A.gamma)).long()
    assert torch.equal(steps, lengths)
    assert not (last & ~d.terminated & (d.t == TASK_A.horizon - 1)).any()
    assert d.meta["policy"] == "expert" and "no exploration" in d.meta["mixture"]


def test_expert_collection_is_seeded_and_ties_break_at_random():
    a, b = collect("expert", 600, seed=1), collect("expert", 600, seed=1)
    assert torch.equal(a.actions, b.actions) and torch.equal(a.states, b.states)
    c = collect("expert", 600, seed=2)
    assert not torch.equal(a.states, c.states)


def test_expert_windows_can_be_cut_for_evaluation():
    w = eval_windows(32, horizon=5, policy="expert").check()
    assert w.meta["policy"] == "expert" and len(w) == 32
