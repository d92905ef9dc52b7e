"""The world: state layout, tasks as data, the batched environment and exact values.

``constants`` (dims by name, geometry, actions), ``tasks`` (``Task``, frozen, with its registry),
``env`` (pure batched ``reset``/``step``), ``values`` (value iteration V*, Q*, Eq. 1 saliency),
``relevance`` (Eq. 1's weights), ``dynamics`` (the task protocol over both kinds of task: the
paper's world and Farama MiniGrid DoorKey, ``doorkey_world``/``doorkey_task``),
``readings`` (the paper's ambiguous choices as named data). Paper §3, appendix D. The evaluation
protocols are specs of ``gridplan.evaluation.spec``.

Its public names (``__all__``) are imported on first use: ``import gridplan.core``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "ACTION_NAMES": "constants",
    "N_ACTIONS": "constants",
    "STATE_LAYOUT_VERSION": "constants",
    "Task": "tasks",
    "TASK_KINDS": "tasks",
    "DoorKey": "doorkey_world",
    "DoorKeyTask": "doorkey_task",
    "TASK_A": "tasks",
    "TASK_B": "tasks",
    "World": "world",
    "Reading": "readings",
    "PROJECT": "readings",
    "reset": "env",
    "step": "env",
    "transition": "env",
    "state_outcome": "env",
    "check_state": "env",
    "check_action": "env",
    "ValueTable": "values",
    "value_table": "values",
    "relevance_weights": "relevance",
    "binary_weights": "relevance",
    "perturbation_saliency": "values",
    "observe": "render",
    "obs_shape": "render",
    "OBS_KINDS": "render",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
