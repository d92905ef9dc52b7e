"""Adapters that expose the batched gridworld to other RL libraries.

Each adapter lives in its own module and imports its library only when that module is
imported, so ``import gridplan`` needs neither:

* ``gridplan.adapters.gymnasium``: ``GridPlanEnv`` (one episode), ``GridPlanVectorEnv``
  (``B`` episodes as one batch) and ``ImaginedEnv`` (one episode inside a world model),
  registered as ``gridplan/KeyDoor-A-v0``, ``gridplan/KeyDoor-B-v0``, ``gridplan/Imagined-A-v0``
  and ``gridplan/Imagined-B-v0``. Needs ``pip install gridplan[gymnasium]``.
* ``gridplan.adapters.torchrl``: ``GridEnv`` (an ``EnvBase`` of batch size ``[B]``) and
  ``WorldModelEnv`` (a ``ModelBasedEnvBase`` over any ``gridplan.models.noise.WorldModel``, for
  TorchRL's ``CEMPlanner`` / ``MPPIPlanner``). Needs ``pip install gridplan[torchrl]``.

``backend`` is their one door into the core (and ``backend.Imagination`` holds a world model to
the plug-in contract of ``python -m eval``); ``rendering`` draws states for ``render()``.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency of an adapter.

    Args:
        module: the top-level module to import, e.g. ``"gymnasium"``.
        extra: the ``gridplan`` extra that installs it, e.g. ``"gymnasium"``.

    Raises:
        ImportError: naming the extra to install when ``module`` is missing.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"this gridplan adapter needs {module!r}, which is not installed: "
            f"pip install gridplan[{extra}]"
        ) from err
