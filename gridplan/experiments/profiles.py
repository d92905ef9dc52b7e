"""Reproduction profiles: the protocols every experiment group runs under, per profile.

A profile names two evaluation specs of ``configs/eval/protocols/`` (``gridplan.evaluation.spec``):
``full`` the paper's (``controlled``, paper §5.1; ``learned``, §5.4), ``quick`` minutes on 2
CPU cores (``quick-controlled``, ``quick-learned``), ``tiny`` seconds, for plumbing checks
(``tiny-controlled``, ``tiny-learned``). A group that deviates from its profile's protocol says
so in its settings file (``configs/experiments/``, composed by
``gridplan.experiments.settings``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gridplan.evaluation.spec import CONTROLLED, LEARNED, EvalSpec, load_spec
from gridplan.metrics.stats import BOOTSTRAP_RESAMPLES


@dataclass(frozen=True)
class Profile:
    """One reproduction profile of ``python -m gridplan.experiments``.

    Attributes:
        name: ``"full"``, ``"quick"`` or ``"tiny"``.
        summary: what it is for, in a few words (shown by ``--help``).
        controlled: spec of the controlled models.
        learned: spec of the learned models (training seeds = closed-loop seeds).
        n_resamples: bootstrap resamples of the Spearman CIs.
    """

    name: str
    summary: str
    controlled: EvalSpec
    learned: EvalSpec
    n_resamples: int = BOOTSTRAP_RESAMPLES


#: Profile name -> Profile, in the order ``--help`` lists them.
PROFILES: dict[str, Profile] = {
    "full": Profile("full", "the paper's protocol", CONTROLLED, LEARNED),
    "quick": Profile(
        "quick",
        "minutes on 2 CPU cores",
        load_spec("quick-controlled"),
        load_spec("quick-learned"),
    ),
    "tiny": Profile(
        "tiny",
        "seconds (plumbing checks)",
        load_spec("tiny-controlled"),
        load_spec("tiny-learned"),
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
