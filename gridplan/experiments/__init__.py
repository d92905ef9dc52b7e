"""The paper's experiment groups (paper §5: E1-E6; SPEC §7) and their registry.

``python scripts/reproduce.py`` runs them through ``run_groups`` (see ``common``). To add a
group: write a module with ``run(ctx) -> Report`` and ``CONFIGS`` (one config per profile in
``PROFILES``), then add one ``Group`` entry below; ``reads`` names the groups whose finished
results it reuses (they then run first).
"""

from __future__ import annotations

from gridplan.experiments import e1, e2, e3, e4, e5, e6
from gridplan.experiments.common import PROFILES, Group, run_groups, select_groups

GROUPS: dict[str, Group] = {
    "e1": Group("e1", "Controlled 8x6 grid, Table 2, iso-error pairs", e1.run, e1.CONFIGS),
    "e2": Group(
        "e2", "Spearman table, iso-pair correlation, scatter", e2.run, e2.CONFIGS, ("e1", "e3")
    ),
    "e3": Group("e3", "Learned world models, Table 3, random-data failure", e3.run, e3.CONFIGS),
    "e4": Group(
        "e4",
        "Relevance weights: exact, estimated, approximate masks",
        e4.run,
        e4.CONFIGS,
        ("e1", "e2", "e3"),
    ),
    "e5": Group("e5", "Task B: c1 vs c2 noise", e5.run, e5.CONFIGS),
    "e6": Group("e6", "Depth, horizon, fans, AR(1) noise, VPE", e6.run, e6.CONFIGS, ("e1",)),
}

__all__ = ["GROUPS", "PROFILES", "Group", "run_groups", "select_groups"]
