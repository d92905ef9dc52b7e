"""Lazy re-exports for a package's ``__init__``: a public name is imported on first use.

Every ``gridplan`` package lists its public names in ``__all__`` and maps each to the module
that defines it; importing the package imports none of them (``import gridplan.core`` stays
free of torch, ``import gridplan.adapters`` free of Gymnasium and TorchRL). Python calls a
module-level ``__getattr__`` only for names the module does not hold (PEP 562), so a resolved
name is stored in the package's namespace and the next access is a plain lookup.
"""

from __future__ import annotations

import sys
from importlib import import_module

# Not typing.TYPE_CHECKING: importing typing would take longer than the rest of `import gridplan`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for its lazily imported names.

    Args:
        package: the package's ``__name__``.
        exports: public name -> the module that defines it, relative to ``package``
            (``"tasks"`` for ``package + ".tasks"``) or absolute (``"gridplan.core.tasks"``).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's module level. ``__getattr__``
        raises ``AttributeError`` naming the package for a name it does not export;
        ``__dir__`` lists the module's own names and every export, sorted.
    """
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = target if target.startswith("gridplan.") else f"{package}.{target}"
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
