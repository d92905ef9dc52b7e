"""Cycling and noise twins of §5.4 (ii) (``gridplan.experiments.bias_noise``) on hand-built
episodes and a known calibration."""

from __future__ import annotations

import pytest
import torch

from gridplan.core.constants import LEFT, RIGHT, UP
from gridplan.data.datasets import eval_windows
from gridplan.evaluation.spec import LEARNED
from gridplan.experiments.bias_noise import (
    calibrate_scale,
    cycling_of,
    episode_cycles,
    floor_profile,
)
from gridplan.planning.closed_loop import GOAL, TIMEOUT, EpisodeResults


def _episodes(make_state, paths, actions, outcome):
    """``EpisodeResults`` of hand-built paths: ``paths[b]`` the agent cells of episode ``b``
    (``T + 1`` each), ``actions[b]`` its ``T`` actions (-1 after its end)."""
    frames = [
        torch.cat([make_state(agent=path[t]) for path in paths]) for t in range(len(paths[0]))
    ]
    b = len(paths)
    return EpisodeResults(
        success=torch.tensor([o == GOAL for o in outcome]),
        returns=torch.zeros(b),
        steps=torch.zeros(b, dtype=torch.long),
        outcome=torch.tensor(outcome),
        trajectory=torch.stack(frames),
        actions=torch.tensor(actions).T,
    )


def test_revisited_state_action_pairs_are_cycles_with_their_shortest_period(make_state):
    paths = [
        [(1, 1), (2, 1), (1, 1), (2, 1), (1, 1)],  # right, left, right, left: period 2
        [(4, 1), (4, 1), (4, 1), (4, 2), (4, 3)],  # right into the wall twice: period 1
        [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)],  # straight up: no revisit
        [(1, 1), (2, 1), (1, 1), (1, 1), (1, 1)],  # right, left, then ended: not a cycle
    ]
    actions = [
        [RIGHT, LEFT, RIGHT, LEFT],
        [RIGHT, RIGHT, UP, UP],
        [UP, UP, UP, UP],
        [RIGHT, LEFT, -1, -1],
    ]
    results = _episodes(make_state, paths, actions, [TIMEOUT, TIMEOUT, GOAL, GOAL])
    cycles, period = episode_cycles(results)
    assert cycles.tolist() == [True, True, False, False]
    assert period.tolist() == [2, 1, 0, 0]
    c = cycling_of(results, slice(None))
    assert (c.episodes, c.failed, c.cycling, c.failed_cycling, c.failed_short, c.timeouts) == (
        4,
        2,
        2,
        2,
        2,
        2,
    )
    assert (c.failed_cycling_rate, c.cycling_rate) == (1.0, 0.5)


def test_cycling_needs_a_recorded_closed_loop(make_state):
    results = _episodes(make_state, [[(0, 0), (0, 1)]], [[UP]], [TIMEOUT])
    results.actions = None
    with pytest.raises(ValueError, match="recorded closed loop"):
        episode_cycles(results)


def test_the_twin_scale_meets_its_target_and_refuses_one_below_the_floor():
    windows = eval_windows(32, LEARNED.horizon)
    floor, floor_e = floor_profile(windows)
    direction = torch.zeros(12, dtype=torch.float64)
    direction[:6] = 0.05  # noise on the relevant dims only
    target = floor_e + 0.02
    scale, e_tot, matched = calibrate_scale(direction, target, windows)
    # The closest trial is within 2% (the curve jumps where a draw crosses half a cell).
    assert matched and 0 < scale < 16 and abs(e_tot - target) <= 0.02 * target
    assert calibrate_scale(direction, 0.5 * floor_e, windows)[2] is False
    assert floor.shape == (12,)
