"""Named constants of the factored gridworld: state layout, actions, geometry.

Every index into the ``(B, S=12)`` state tensor goes through a name defined here, so a
reader never meets a bare ``state[:, 4]``. What differs between tasks (goal and hazard
cells, relevant dimensions, horizon, discount) lives in ``gridplan.core.tasks``. Paper §3 and
appendix D.
"""

from __future__ import annotations

import torch

#: Version of the state layout below; stored in checkpoints and datasets so a file written
#: against another layout is rejected instead of silently misread.
STATE_LAYOUT_VERSION = 1

GRID_SIZE = 8
#: Normalized position = cell / CELL_SCALE, so cells 0..7 map to [0, 1].
CELL_SCALE = float(GRID_SIZE - 1)
WALL_X = 5
DOOR_CELL = (5, 4)

# State dimensions, in order.
AGENT_X, AGENT_Y, KEY_X, KEY_Y, CARRYING, DOOR_OPEN, C1, C2, D1_X, D1_Y, D2_X, D2_Y = range(12)
STATE_DIM = 12
DIM_NAMES = (
    "agent_x",
    "agent_y",
    "key_x",
    "key_y",
    "carrying",
    "door_open",
    "c1",
    "c2",
    "d1_x",
    "d1_y",
    "d2_x",
    "d2_y",
)
#: Dimensions that hold a grid coordinate (normalized by CELL_SCALE); the rest are flags.
POSITION_DIMS = (AGENT_X, AGENT_Y, KEY_X, KEY_Y, D1_X, D1_Y, D2_X, D2_Y)
FLAG_DIMS = (CARRYING, DOOR_OPEN, C1, C2)

# Actions: up y+1, down y-1, left x-1, right x+1.
UP, DOWN, LEFT, RIGHT = range(4)
N_ACTIONS = 4
ACTION_NAMES = ("up", "down", "left", "right")
#: (4, 2) integer (dx, dy) per action.
MOVES = torch.tensor([[0, 1], [0, -1], [-1, 0], [1, 0]], dtype=torch.long)
#: (5, 2) moves of the d1 random walk: the four actions plus stay.
DISTRACTOR_MOVES = torch.cat([MOVES, torch.zeros(1, 2, dtype=torch.long)])
