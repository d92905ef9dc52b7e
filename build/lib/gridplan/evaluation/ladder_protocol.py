"""The ladder's protocol: every setting of one ``gridplan.evaluate`` call besides the model,
the task and the depth, and its named presets.

``LadderProtocol`` extends the closed loop and held-out windows of a
``gridplan.core.protocols.Protocol`` (which says how the paper scores a model: depth, seeds x
episodes, windows) with the sizes of the ladder's own samples (branch set, anchor runs, probe,
XGap states), its bootstrap resamples and the seed of its random streams. It carries no depth:
the depth is an argument of ``evaluate``, so one protocol serves every depth of a sweep.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gridplan.core.protocols import BOOTSTRAP_RESAMPLES, CONTROLLED, LEARNED, PROFILES, Protocol
from gridplan.evaluation.anchors import ANCHORS, get_anchors
from gridplan.evaluation.decisions import XGAP_THRESHOLD


@dataclass(frozen=True)
class LadderProtocol:
    """Every setting of one evaluation besides the model, the task and the depth.

    The closed-loop and window fields mirror ``gridplan.core.protocols.Protocol`` (their defaults
    are ``CONTROLLED``'s, paper §5.1); ``LadderProtocol.of`` builds one from any ``Protocol``.

    Attributes:
        seeds: closed-loop evaluation seeds (each seeds its own start states).
        episodes: closed-loop episodes per seed.
        horizon: ``H`` of the L1 windows and of the L4 interventional rollouts.
        n_windows: held-out windows of L1.
        branch_states: states per part of the branch set ``Q`` (behaviour, oracle-visited).
        anchor_starts: start states of the anchor runs (L5, L6).
        anchor_rollouts: rollouts ``K`` per anchor and start.
        anchor_seed: reset seed of the anchor runs' start states.
        probe_questions: probe questions (states sampled from ``Q``).
        xgap_states: decision states sampled from the model's own episodes for XGap.
        xgap_threshold: the stated XGap threshold (return units).
        n_resamples: bootstrap resamples of every bootstrap interval.
        seed: seed of the ladder's own random streams (``gridplan.evaluation.levels.STREAMS``).
        anchors: anchor policy names (``gridplan.evaluation.anchors.ANCHOR_NAMES``).

    Raises:
        ValueError: on empty seeds, a size below 1, a negative or infinite XGap threshold,
            fewer than 2 anchors or an unknown anchor.
    """

    seeds: tuple[int, ...] = CONTROLLED.seeds
    episodes: int = CONTROLLED.episodes
    horizon: int = CONTROLLED.horizon
    n_windows: int = CONTROLLED.n_windows
    branch_states: int = 512
    anchor_starts: int = 128
    anchor_rollouts: int = 8
    anchor_seed: int = 20_000
    probe_questions: int = 256
    xgap_states: int = 512
    xgap_threshold: float = XGAP_THRESHOLD
    n_resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = 0
    anchors: tuple[str, ...] = tuple(a.name for a in ANCHORS)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("protocol seeds must not be empty")
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "anchors", tuple(self.anchors))
        positive = (
            "episodes",
            "horizon",
            "n_windows",
            "branch_states",
            "anchor_starts",
            "anchor_rollouts",
            "probe_questions",
            "xgap_states",
            "n_resamples",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"protocol {name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.xgap_threshold < float("inf"):
            raise ValueError(f"xgap_threshold must be finite and >= 0, got {self.xgap_threshold}")
        if len(self.anchors) < 2:
            raise ValueError("policy ranking needs at least 2 anchor policies")
        get_anchors(self.anchors)

    @classmethod
    def of(cls, protocol: Protocol, **sizes) -> LadderProtocol:
        """The ladder protocol with ``protocol``'s seeds, episodes, windows and horizon, and
        the ladder's own sizes from ``sizes`` (defaults otherwise); ``protocol.depth`` is the
        caller's to pass to ``evaluate``."""
        return cls(
            seeds=protocol.seeds,
            episodes=protocol.episodes,
            horizon=protocol.horizon,
            n_windows=protocol.n_windows,
            **sizes,
        )

    def replace(self, **changes) -> LadderProtocol:
        """A copy with ``changes``, validated again."""
        return dataclasses.replace(self, **changes)

    def closed_loop(self, depth: int) -> Protocol:
        """The ``gridplan.core.protocols.Protocol`` of this protocol's closed loop at ``depth``."""
        return Protocol(depth, self.seeds, self.episodes, self.n_windows, self.horizon)

    def to_dict(self) -> dict:
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()
        }


#: Sizes of the smaller presets (the rest as ``LadderProtocol``'s defaults).
_QUICK_SIZES = {
    "branch_states": 128,
    "anchor_starts": 64,
    "anchor_rollouts": 4,
    "probe_questions": 64,
    "xgap_states": 256,
    "n_resamples": 500,
}
_TINY_SIZES = {
    "branch_states": 16,
    "anchor_starts": 8,
    "anchor_rollouts": 2,
    "probe_questions": 8,
    "xgap_states": 16,
    "n_resamples": PROFILES["tiny"].n_resamples,
}
#: Named protocols, their closed loop and windows from ``gridplan.core.protocols``: ``default``
#: (``CONTROLLED``, the paper's controlled grid, 10 seeds x 30 episodes), ``checkpoint``
#: (``LEARNED``, 5 seeds x 40 episodes), ``quick`` and ``tiny`` (the reproduction profiles'
#: controlled protocols with smaller ladder sizes, for trials and tests).
PROTOCOLS = {
    "default": LadderProtocol.of(CONTROLLED),
    "checkpoint": LadderProtocol.of(LEARNED),
    "quick": LadderProtocol.of(PROFILES["quick"].controlled, **_QUICK_SIZES),
    "tiny": LadderProtocol.of(PROFILES["tiny"].controlled, **_TINY_SIZES),
}


def get_protocol(protocol: str | LadderProtocol | Protocol | None) -> LadderProtocol:
    """Resolve a protocol name (``PROTOCOLS``), pass a ``LadderProtocol`` through, wrap a
    ``gridplan.core.protocols.Protocol`` (``LadderProtocol.of``), ``None`` -> ``default``.

    Raises:
        ValueError: on an unknown name.
    """
    if protocol is None:
        return PROTOCOLS["default"]
    if isinstance(protocol, LadderProtocol):
        return protocol
    if isinstance(protocol, Protocol):
        return LadderProtocol.of(protocol)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; valid: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[protocol]
