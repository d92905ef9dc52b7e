"""gridplan: decision-aware evaluation of world models (the DRPE paper's laboratory).

Data flows one way: ``env`` -> ``models`` -> ``planner`` (over ``scorers``) -> ``metrics``
-> reports. Every function that depends on the task takes a ``gridplan.tasks.Task``; names
such as ``"A"`` are resolved once, at the boundary, with ``gridplan.tasks.get``.

Shape legend: ``B`` episodes, ``L`` leaves = 4^D, ``D`` depth, ``H`` horizon, ``S`` = 12 dims.

``gridplan.evaluate(model, task=..., depth=..., protocol=..., levels=...) -> Report`` evaluates
any world model for decisions (``gridplan.ladder.evaluate``); it is imported on first use, so
``import gridplan.env`` stays light.
"""

__version__ = "0.1.0"
__all__ = ["evaluate", "compare", "Report", "LadderProtocol"]


def __getattr__(name: str):
    if name in ("evaluate", "LadderProtocol"):
        from gridplan.ladder import evaluate as evaluation

        return getattr(evaluation, name)
    if name == "compare":
        from gridplan.ladder.compare import compare

        return compare
    if name == "Report":
        from gridplan.report import Report

        return Report
    raise AttributeError(f"module 'gridplan' has no attribute {name!r}")
