"""Adapters that expose the batched gridworld to other RL libraries, on either kind of world
(the paper's, or MiniGrid DoorKey with its seven actions and its state observation;
``gridplan.adapters.minigrid`` also reads Farama's own ``minigrid`` environments).

Each adapter lives in its own module and imports its library only when that module is
imported, so ``import gridplan`` and ``import gridplan.adapters`` need neither; the names
below are exported here and imported on first use (``from gridplan.adapters import GridEnv``
imports TorchRL then; a missing library raises ``gridplan.util.extras.MissingExtraError``
naming its install command):

* ``gridplan.adapters.gymnasium``: ``GridPlanEnv`` (one episode), ``GridPlanVectorEnv``
  (``B`` episodes as one batch) and ``ImaginedEnv`` (one episode inside a world model),
  registered as ``gridplan/KeyDoor-A-v0``, ``gridplan/KeyDoor-B-v0``, ``gridplan/Imagined-A-v0``
  and ``gridplan/Imagined-B-v0``. Needs ``pip install "gridplan[gymnasium]"``.
* ``gridplan.adapters.torchrl``: ``GridEnv`` (an ``EnvBase`` of batch size ``[B]``) and
  ``WorldModelEnv`` (a ``ModelBasedEnvBase`` over any ``gridplan.models.WorldModel``, for
  TorchRL's ``CEMPlanner`` / ``MPPIPlanner``). Needs ``pip install "gridplan[torchrl]"``.

``backend`` is their one door into the core (and ``backend.Imagination`` holds a world model to
the plug-in contract of ``python -m eval``); ``rendering`` draws states for ``render()``.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "GridPlanEnv": "gymnasium",
    "GridPlanVectorEnv": "gymnasium",
    "ImaginedEnv": "gymnasium",
    "register_envs": "gymnasium",
    "GridEnv": "torchrl",
    "WorldModelEnv": "torchrl",
    "planning_policy": "torchrl",
    "value_operator": "torchrl",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
