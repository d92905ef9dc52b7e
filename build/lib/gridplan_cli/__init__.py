"""Console scripts ``gridplan-train`` and ``gridplan-eval`` (``pyproject.toml``
``[project.scripts]``): ``python -m train`` and ``python -m eval`` from any folder.

``train`` and ``eval`` are generic top-level names: from a folder that holds a ``train.py`` or
``eval.py`` of its own, ``python -m train`` runs that file, since Python puts the working folder
first on ``sys.path``. These entry points load gridplan's own ``train`` and ``eval`` packages
from the folder that holds this package (the repository root of an editable install, or
``site-packages``), whatever the working folder and ``sys.path`` hold::

    gridplan-train variant=rel_only data=12k      # python -m train variant=rel_only data=12k
    gridplan-eval --model oracle                  # python -m eval --model oracle
    python -c 'from gridplan_cli import train_main; train_main()' --help   # the same, by hand
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: The folder holding gridplan's ``train`` and ``eval`` packages beside this one.
ROOT = Path(__file__).resolve().parent.parent


def _is_ours(module: ModuleType) -> bool:
    origin = getattr(module, "__file__", None)
    return origin is not None and Path(origin).resolve().parent.parent == ROOT


def own_package(name: str) -> ModuleType:
    """gridplan's top-level package ``name`` (``"train"`` or ``"eval"``) from ``ROOT``.

    A module of that name imported from elsewhere (a user's ``train.py``) is dropped from
    ``sys.modules`` with its submodules first, so later ``import train.x`` statements resolve
    inside gridplan's package.

    Raises:
        ImportError: if ``ROOT`` holds no package ``name`` (a broken installation).
    """
    loaded = sys.modules.get(name)
    if loaded is not None and _is_ours(loaded):
        return loaded
    for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
        del sys.modules[key]
    spec = importlib.machinery.PathFinder.find_spec(name, [str(ROOT)])
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"gridplan's {name!r} package is not in {ROOT}; reinstall gridplan")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _prepare_process() -> None:
    # Before torch is imported: OpenMP reads its wait policy once (gridplan.util.threads);
    # large temporaries stay mapped (gridplan.util.allocator).
    from gridplan.util.allocator import retain_freed_memory
    from gridplan.util.threads import set_wait_policy

    set_wait_policy()
    retain_freed_memory()


def train_main(argv: list[str] | None = None) -> int:
    """``gridplan-train``: ``python -m train`` (``train/__main__.py``) on ``argv`` (default
    ``sys.argv[1:]``); returns its exit status."""
    _prepare_process()
    own_package("train")
    return importlib.import_module("train.__main__").main(argv)


def eval_main(argv: list[str] | None = None) -> int:
    """``gridplan-eval``: ``python -m eval`` (``eval/cli.py``) on ``argv`` (default
    ``sys.argv[1:]``); returns its exit status."""
    _prepare_process()
    own_package("eval")
    return importlib.import_module("eval.cli").main(argv)
