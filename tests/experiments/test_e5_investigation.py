"""E5's investigation: episode lengths by outcome (``gridplan.experiments.e5.length_rows``)."""

from __future__ import annotations

import torch

from gridplan.experiments.e5 import NEAR_HORIZON, length_rows
from gridplan.planning.closed_loop import GOAL, HAZARD, TIMEOUT, EpisodeResults


def test_episode_lengths_are_counted_per_model_task_and_outcome():
    # Setting-major: the c1-noise model's 3 episodes, then the c2-noise model's 3.
    outcome = torch.tensor([GOAL, HAZARD, TIMEOUT, GOAL, GOAL, GOAL])
    steps = torch.tensor([11, 7, 60, 12, 14, 52])
    res = EpisodeResults(
        success=outcome == GOAL, returns=torch.zeros(6), steps=steps, outcome=outcome
    )
    rows = {(r.model, r.outcome): r for r in length_rows({"B": res}, 60)}
    assert len(rows) == 6 and {r.task for r in rows.values()} == {"B"}
    c1_timeout, c2_goal = rows[("c1-noise", "timeout")], rows[("c2-noise", "goal")]
    assert (c1_timeout.episodes, c1_timeout.steps_max, c1_timeout.near_horizon) == (1, 60, 1)
    assert (c2_goal.episodes, c2_goal.steps_min, c2_goal.steps_median, c2_goal.steps_max) == (
        3,
        12,
        14.0,
        52,
    )
    assert c2_goal.near_horizon == 1 and NEAR_HORIZON == 10  # 52 >= 60 - 10
    empty = rows[("c2-noise", "hazard")]
    assert (empty.episodes, empty.steps_min, empty.near_horizon) == (0, None, 0)
