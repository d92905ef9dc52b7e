"""MiniGrid's DoorKey as a batched, factored world with exact values.

Farama MiniGrid's ``MiniGrid-DoorKey-{N}x{N}-v0`` (``minigrid.envs.doorkey``) is the paper's
problem, fetch a key, open a door, reach a goal, as the field plays it: an agent heading with
turn and forward actions, pickup and toggle acting on the cell in front, a locked door, a
layout drawn per episode and an egocentric, occluded ``7x7x3`` observation. Here it is data
and pure batched functions, equal to MiniGrid transition for transition
(``tests/core/test_minigrid_doorkey.py``, ``scripts/check_minigrid.py``):

* ``constants``: the state dims, actions, door states and MiniGrid's object and colour codes;
* ``world``: ``DoorKey``, the size settings as a frozen dataclass, and the names
  ``minigrid-doorkey-{N}x{N}``;
* ``env``: ``reset(batch, generator, world)``, ``step(state, action, world)``,
  ``from_layout`` and ``check_state``;
* ``observe``: the egocentric encoding with MiniGrid's occlusion and the fully observed grid;
* ``values``: exact V*, Q* and shortest remaining steps per layout by value iteration, and
  MiniGrid's own step-dependent return.

``docs/DESIGN.md`` ("MiniGrid DoorKey") describes the state and the choices.
"""
