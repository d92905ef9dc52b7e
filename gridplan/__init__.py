"""gridplan: decision-aware evaluation of world models (the DRPE paper's laboratory).

Data flows one way: ``env`` -> ``models`` -> ``planner`` (over ``scorers``) -> ``metrics``
-> reports. Every function that depends on the task takes a ``gridplan.tasks.Task``; names
such as ``"A"`` are resolved once, at the boundary, with ``gridplan.tasks.get``.

Shape legend: ``B`` episodes, ``L`` leaves = 4^D, ``D`` depth, ``H`` horizon, ``S`` = 12 dims.
"""

__version__ = "0.1.0"
