"""The registry of the paper's experiment groups: name -> ``Group`` (``gridplan.experiments``).

``reads`` names the groups whose finished results a group reuses (they run first; it reads
their result files, never their modules).
"""

from __future__ import annotations

from gridplan.experiments import e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, settings
from gridplan.experiments.runner import Group

GROUPS: dict[str, Group] = {
    "e1": Group("e1", "Controlled 8x6 grid, Table 2, iso-error pairs", e1.run, settings.E1),
    "e2": Group(
        "e2", "Spearman table, iso-pair correlation, scatter", e2.run, settings.E2, ("e1", "e3")
    ),
    "e3": Group(
        "e3",
        "Learned world models, Table 3, random-data failure",
        e3.run,
        settings.E3,
        reading_free=True,
    ),
    "e4": Group(
        "e4",
        "Relevance weights: exact, estimated, approximate masks",
        e4.run,
        settings.E4,
        ("e1", "e2", "e3"),
    ),
    "e5": Group("e5", "Task B: c1 vs c2 noise", e5.run, settings.E5),
    "e6": Group("e6", "Depth, horizon, fans, AR(1) noise, VPE", e6.run, settings.E6, ("e1",)),
    "e7": Group(
        "e7", "Learned-model zoo: which metric ranks learned models", e7.run, settings.E7, ("e1",)
    ),
    "e8": Group(
        "e8", "Scale: DRPE vs E_tot as the state widens and the grid grows", e8.run, settings.E8
    ),
    "e9": Group(
        "e9",
        "Latent zoo: which metric ranks latent world models",
        e9.run,
        settings.E9,
    ),
    "e10": Group(
        "e10", "Beyond the exact-V* planner: CEM, MPPI, learned value", e10.run, settings.E10
    ),
    "e11": Group(
        "e11",
        "Architecture zoo: which metric ranks the field's world models",
        e11.run,
        settings.E11,
    ),
    "e12": Group(
        "e12", "MiniGrid DoorKey: DRPE vs E_tot on the field's gridworld", e12.run, settings.E12
    ),
}
