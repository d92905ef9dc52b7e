"""gridplan: decision-aware evaluation of world models (the DRPE paper's laboratory).

The packages are the layers, and data flows one way (``docs/DESIGN.md``; ``lint-imports``
enforces it): ``util`` -> ``core`` (tasks, env, exact values) -> ``data`` and ``models`` ->
``planning`` -> ``metrics`` -> ``training`` -> ``evaluation`` and ``adapters`` ->
``experiments``. Every function that depends on the task takes a ``gridplan.Task``; names such
as ``"A"`` are resolved once, at the boundary, with ``gridplan.core.tasks.get``.

Shape legend: ``B`` episodes, ``L`` leaves = 4^D, ``D`` depth, ``H`` horizon, ``S`` = 12 dims.

The public API is re-exported here and imported on first use, so ``import gridplan.core.env``
stays light:

- ``evaluate(model, task=..., depth=..., protocol=..., levels=...) -> Report``: any world
  model, evaluated for decisions (``gridplan.evaluation.ladder``);
- ``compare(a, b, ...)``: a paired comparison of two models (``gridplan.evaluation.compare``);
- ``Report``, ``LadderProtocol``: the versioned report and the ladder's protocol;
- ``Task``: the task as data (``gridplan.core.tasks``);
- ``WorldModel``: the model contract (``gridplan.models.contract``).
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate": "gridplan.evaluation.ladder",
    "LadderProtocol": "gridplan.evaluation.ladder_protocol",
    "compare": "gridplan.evaluation.compare",
    "Report": "gridplan.evaluation.schema",
    "Task": "gridplan.core.tasks",
    "WorldModel": "gridplan.models.contract",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gridplan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
