"""gridplan: decision-aware evaluation of world models (the DRPE paper's laboratory).

The packages are the layers, and data flows one way (``docs/DESIGN.md``; ``lint-imports``
enforces it): ``util`` -> ``core`` (tasks, env, exact values) -> ``data`` and ``models`` ->
``planning`` -> ``metrics`` -> ``training`` -> ``evaluation`` and ``adapters`` ->
``experiments``. Every function that depends on the task takes a ``gridplan.Task``; names such
as ``"A"`` are resolved once, at the boundary, with ``gridplan.core.tasks.get``.

Shape legend: ``B`` episodes, ``L`` leaves = 4^D, ``D`` depth, ``H`` horizon, ``S`` = 12 dims.

The public API is re-exported here and imported on first use, so ``import gridplan.core.env``
stays light:

- ``evaluate(model, spec, **changes) -> Report``: any world model, evaluated for decisions
  under one ``EvalSpec`` (``gridplan.evaluation.ladder``);
- ``compare(a, b, ...)``: a paired comparison of two models (``gridplan.evaluation.compare``);
- ``EvalSpec``, ``load_spec``: every setting of an evaluation as one recorded object, and the
  named specs, tracks and suites shipped in ``configs/eval/`` (``gridplan.evaluation.spec``);
- ``Report``: the versioned report;
- ``Task``: the task as data (``gridplan.core.tasks``);
- ``WorldModel``: the model contract (``gridplan.models.contract``).

Each subpackage exports its own public names the same way (``__all__``, e.g. ``from
gridplan.models import OracleModel``); ``tests/test_public_api.py`` holds every list, and a
removed or renamed public name is a deliberate change recorded in ``CHANGELOG.md``.
``__version__`` is the installed distribution's version (``importlib.metadata``), or
``"0+unknown"`` for a source tree that was never installed.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "evaluate": "gridplan.evaluation.ladder",
    "EvalSpec": "gridplan.evaluation.spec",
    "load_spec": "gridplan.evaluation.spec",
    "compare": "gridplan.evaluation.compare",
    "Report": "gridplan.evaluation.schema",
    "Task": "gridplan.core.tasks",
    "WorldModel": "gridplan.models.contract",
}
__all__ = sorted(_EXPORTS)
_export, _dir = lazy_exports(__name__, _EXPORTS)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("gridplan")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never pip-installed
        return "0+unknown"


def __getattr__(name: str):
    # importlib.metadata takes longer to import than the rest of `import gridplan` together,
    # so the version is read on first use.
    if name == "__version__":
        globals()[name] = version = _version()
        return version
    return _export(name)


def __dir__() -> list[str]:
    return sorted({*_dir(), "__version__"})
