"""Evaluation protocols: planner depth, closed-loop seeds x episodes, held-out windows.

A ``Protocol`` says how a model is scored: the planner depth ``D``, the closed-loop seeds and
episodes per seed, and the held-out windows (count and rollout horizon ``H``) of the
prediction metrics. The paper uses two, defined here once and read by ``python -m eval``,
``scripts/reproduce.py`` and the experiment groups:

- ``CONTROLLED`` (paper §5.1, Table 2): depth 4, 10 seeds x 30 episodes, 1000 windows, H = 10;
- ``LEARNED`` (paper §5.4, Table 3): depth 2, 5 seeds x 40 episodes, the same windows.

``PROFILES`` holds them per reproduction profile (``full`` = the paper's, ``quick`` =
minutes on 2 CPU cores, ``tiny`` = seconds, for plumbing tests); a group that deviates from
its profile's protocol says so in its settings file (``configs/experiments/``, composed by
``gridplan.experiments.settings``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


def _positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Protocol.{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class Protocol:
    """How a model is evaluated.

    Attributes:
        depth: planner depth ``D`` (full-width search over ``4^D`` action sequences).
        seeds: closed-loop seeds; seed ``s`` always yields the same start states.
        episodes: episodes per seed.
        n_windows: held-out open-loop windows of the prediction metrics.
        horizon: rollout length ``H`` of those windows, in steps.

    Raises:
        ValueError: on a count below 1, or empty or non-integer seeds.
    """

    depth: int
    seeds: tuple[int, ...]
    episodes: int
    n_windows: int
    horizon: int = 10

    def __post_init__(self) -> None:
        for name in ("depth", "episodes", "n_windows", "horizon"):
            _positive(name, getattr(self, name))
        seeds = tuple(self.seeds)
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise ValueError(
                f"Protocol.seeds must be a non-empty tuple of ints, got {self.seeds!r}"
            )
        object.__setattr__(self, "seeds", seeds)

    @property
    def n_episodes(self) -> int:
        """Closed-loop episodes per model setting: ``len(seeds) * episodes``."""
        return len(self.seeds) * self.episodes

    def replace(self, **changes) -> Protocol:
        """A copy with ``changes`` (keywords of the fields), validated again."""
        return dataclasses.replace(self, **changes)


#: Bootstrap resamples of every Spearman CI (paper §5: 2,000).
BOOTSTRAP_RESAMPLES = 2000

#: Paper §5.1: the controlled models (E1, E2, E5, E6 and ``python -m eval --model``).
CONTROLLED = Protocol(depth=4, seeds=tuple(range(10)), episodes=30, n_windows=1000)
#: Paper §5.4: the learned models of Table 3 (E3 and ``python -m eval --ckpt``).
LEARNED = CONTROLLED.replace(depth=2, seeds=tuple(range(5)), episodes=40)


@dataclass(frozen=True)
class Profile:
    """One reproduction profile of ``scripts/reproduce.py``.

    Attributes:
        name: ``"full"``, ``"quick"`` or ``"tiny"``.
        summary: what it is for, in a few words (shown by ``--help``).
        controlled: protocol of the controlled models.
        learned: protocol of the learned models (training seeds = closed-loop seeds).
        n_resamples: bootstrap resamples of the Spearman CIs.
    """

    name: str
    summary: str
    controlled: Protocol
    learned: Protocol
    n_resamples: int = BOOTSTRAP_RESAMPLES


_QUICK = CONTROLLED.replace(seeds=(0, 1), episodes=10, n_windows=500)
_TINY = CONTROLLED.replace(depth=1, seeds=(0, 1), episodes=2, n_windows=32)

#: Profile name -> Profile, in the order ``--help`` lists them.
PROFILES: dict[str, Profile] = {
    "full": Profile("full", "the paper's protocol", CONTROLLED, LEARNED),
    "quick": Profile(
        "quick",
        "minutes on 2 CPU cores",
        _QUICK,
        LEARNED.replace(seeds=_QUICK.seeds, episodes=20, n_windows=_QUICK.n_windows),
    ),
    "tiny": Profile(
        "tiny",
        "seconds (plumbing checks)",
        _TINY,
        LEARNED.replace(seeds=_TINY.seeds[:1], episodes=_TINY.episodes, n_windows=_TINY.n_windows),
        n_resamples=200,
    ),
}


def profile(name: str) -> Profile:
    """The profile called ``name``.

    Raises:
        ValueError: on an unknown name, listing the valid ones.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}; valid profiles: {', '.join(PROFILES)}"
        ) from None
