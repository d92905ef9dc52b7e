"""Start states are common random numbers: episode i of seed s whatever the run size."""

from __future__ import annotations

import pytest
import torch

from gridplan.core.env import check_state
from gridplan.core.tasks import TASK_A, TASK_B
from gridplan.models.noise import OracleModel
from gridplan.planning import closed_loop
from gridplan.planning.closed_loop import START_BLOCK, start_block, start_states


@pytest.mark.parametrize("task", [TASK_A, TASK_B], ids=["A", "B"])
def test_episode_i_of_seed_s_is_the_same_for_10_30_and_40_episodes(task):
    runs = {n: start_states([0, 3], n, task) for n in (10, 30, 40)}
    for n, states in runs.items():
        assert states.shape == (2 * n, 12)
        check_state(states, "start")
    for n in (10, 30):
        for k in range(2):  # seed 0, then seed 3 (seed-major)
            longer = runs[40][k * 40 : k * 40 + n]
            assert torch.equal(runs[n][k * n : (k + 1) * n], longer)


def test_a_seed_starts_alike_whatever_the_other_seeds_and_across_block_boundaries():
    big = start_states(range(5), 2 * START_BLOCK + 7)  # 3 blocks per seed, 695 episodes
    for seed in range(5):
        alone = start_states([seed], START_BLOCK + 1)
        row = seed * (2 * START_BLOCK + 7)
        assert torch.equal(big[row : row + START_BLOCK + 1], alone)
        assert torch.equal(alone[:START_BLOCK], start_block(seed, 0))
        assert torch.equal(alone[START_BLOCK], start_block(seed, 1)[0])
    # Blocks and seeds are different draws, not copies of one another.
    assert not torch.equal(start_block(0, 0), start_block(0, 1))
    assert not torch.equal(start_block(0, 1), start_block(1, 0))
    assert big.unique(dim=0).shape[0] > 0.95 * big.shape[0]


def test_the_first_resets_of_a_big_batch_are_those_of_a_small_one():
    assert torch.equal(start_states([7], 1000)[:10], start_states([7], 10))
    assert torch.equal(start_states([7], 1)[0], start_states([7], 1000)[0])


def test_a_closed_loop_of_any_size_plays_the_shared_start_states():
    small = closed_loop.run_episodes(OracleModel(), depth=1, seeds=[0], episodes=3, record=True)
    large = closed_loop.run_episodes(OracleModel(), depth=1, seeds=[0, 1], episodes=5, record=True)
    assert torch.equal(small.trajectory[0], large.trajectory[0, :3])
    assert torch.equal(large.trajectory[0, 5:], start_states([1], 5))


def test_a_negative_seed_is_refused():
    with pytest.raises(ValueError, match="seed and block must be >= 0"):
        start_states([-1], 3)
