"""Named constants of the MiniGrid DoorKey world: state dims, actions, door states, codes.

The state of a batch is one ``(B, 10)`` int64 tensor; every index into it goes through a name
here. Actions, headings, door states and the object and colour codes of the observation are
MiniGrid's own (``minigrid.core.actions.Actions``, ``minigrid.core.constants``), so an action
or an observation means the same in both.
"""

from __future__ import annotations

import torch

#: State dims: agent cell and heading, key cell (the agent's cell while carried), carrying,
#: door state, the layout (wall column, door row) and the steps taken in the episode.
AGENT_X, AGENT_Y, HEADING, KEY_X, KEY_Y, CARRYING, DOOR, WALL_X, DOOR_Y, STEP = range(10)
STATE_DIM = 10
DIM_NAMES = (
    "agent_x", "agent_y", "heading", "key_x", "key_y", "carrying", "door", "wall_x", "door_y",
    "step",
)

#: MiniGrid's seven actions (``Actions``): pickup and toggle act on the cell in front; drop
#: puts the carried key on an empty cell in front; done does nothing.
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
N_ACTIONS = 7
ACTION_NAMES = ("left", "right", "forward", "pickup", "drop", "toggle", "done")

#: Headings (``agent_dir``): 0 east (+x), 1 south (+y), 2 west, 3 north; ``(4, 2)`` vectors.
N_HEADINGS = 4
DIR_VECTORS = torch.tensor([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=torch.long)

#: Door states, MiniGrid's ``STATE_TO_IDX`` (the third channel of a door's encoding).
OPEN, CLOSED, LOCKED = 0, 1, 2
N_DOOR_STATES = 3

#: Object codes (``OBJECT_TO_IDX``) of the cells DoorKey holds, and the agent's.
UNSEEN, EMPTY, WALL, DOOR_OBJECT, KEY_OBJECT, GOAL, AGENT = 0, 1, 2, 4, 5, 8, 10
#: MiniGrid's ``Floor``: the object code of a floor tile, a distractor drawn on empty cells
#: that nothing reads (``gridplan.core.doorkey_tiles``).
FLOOR = 3
#: Colour codes (``COLOR_TO_IDX``): the agent is red, the goal green, door and key yellow,
#: walls grey; blue and purple are the two DoorKey never draws.
RED, GREEN, BLUE, PURPLE, YELLOW, GREY = range(6)
N_COLOURS = 6
#: Colour of floor tile ``t``: ``TILE_COLOURS[t % 2]``, the colours DoorKey leaves free.
TILE_COLOURS = (BLUE, PURPLE)
#: Colour of each object code DoorKey draws (0 for empty and unseen cells).
OBJECT_COLOURS = {EMPTY: 0, WALL: GREY, DOOR_OBJECT: YELLOW, KEY_OBJECT: YELLOW, GOAL: GREEN}

#: MiniGrid's reward on reaching the goal: ``1 - SUCCESS_PENALTY * steps / max_steps``.
SUCCESS_PENALTY = 0.9
