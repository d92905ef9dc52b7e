"""Evaluation protocols (gridplan.core.protocols): the paper's presets, the profiles, validation."""

from __future__ import annotations

import pytest
from gridplan.core.protocols import CONTROLLED, LEARNED, PROFILES, Protocol, profile


def test_the_paper_protocols_are_the_ones_of_its_tables():
    # Paper §5.1 (Table 2): depth 4, 10 seeds x 30 episodes, 1000 held-out H = 10 windows.
    assert (CONTROLLED.depth, CONTROLLED.seeds, CONTROLLED.episodes) == (4, tuple(range(10)), 30)
    assert (CONTROLLED.n_windows, CONTROLLED.horizon, CONTROLLED.n_episodes) == (1000, 10, 300)
    # Paper §5.4 (Table 3): depth 2, 5 training seeds x 40 episodes, the same windows.
    assert (LEARNED.depth, LEARNED.seeds, LEARNED.episodes) == (2, tuple(range(5)), 40)
    assert (LEARNED.n_windows, LEARNED.horizon, LEARNED.n_episodes) == (1000, 10, 200)


def test_profiles_reduce_seeds_episodes_and_windows_but_keep_the_full_protocol_exact():
    assert list(PROFILES) == ["full", "quick", "tiny"]
    full, quick, tiny = (PROFILES[n] for n in PROFILES)
    assert (full.controlled, full.learned, full.n_resamples) == (CONTROLLED, LEARNED, 2000)
    assert quick.controlled == Protocol(depth=4, seeds=(0, 1), episodes=10, n_windows=500)
    assert quick.learned == Protocol(depth=2, seeds=(0, 1), episodes=20, n_windows=500)
    assert tiny.controlled == Protocol(depth=1, seeds=(0, 1), episodes=2, n_windows=32)
    assert tiny.learned == Protocol(depth=2, seeds=(0,), episodes=2, n_windows=32)
    assert tiny.n_resamples == 200


def test_replace_validates_again_and_seeds_become_a_tuple():
    p = CONTROLLED.replace(seeds=[3, 4], episodes=2)
    assert p.seeds == (3, 4) and p.n_episodes == 4 and p.depth == CONTROLLED.depth
    assert CONTROLLED.seeds == tuple(range(10))  # the preset is untouched
    with pytest.raises(ValueError, match="Protocol.depth must be an integer >= 1, got 0"):
        CONTROLLED.replace(depth=0)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"seeds": ()}, "seeds must be a non-empty tuple of ints"),
        ({"seeds": (0, True)}, "seeds must be a non-empty tuple of ints"),
        ({"episodes": 1.5}, "episodes must be an integer >= 1"),
        ({"n_windows": 0}, "n_windows must be an integer >= 1"),
        ({"horizon": -1}, "horizon must be an integer >= 1"),
    ],
)
def test_bad_protocols_are_errors_naming_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        CONTROLLED.replace(**changes)


def test_an_unknown_profile_lists_the_valid_ones():
    assert profile("quick") is PROFILES["quick"]
    with pytest.raises(
        ValueError, match="unknown profile 'fast'; valid profiles: full, quick, tiny"
    ):
        profile("fast")
