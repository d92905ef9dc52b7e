"""Named constants of the factored gridworld: the state dims every world shares, actions.

Every index into the ``(B, S)`` state tensor goes through a name defined here or through the
world's layout (``gridplan.core.world.World``: grid size, colour bits, distractors), so a
reader never meets a bare ``state[:, 4]``. What differs between tasks (goal and hazard
cells, relevant dimensions, horizon, discount) lives in ``gridplan.core.tasks``. Paper §3 and
appendix D.
"""

from __future__ import annotations

import torch

#: Version of the state layout below; stored in checkpoints and datasets so a file written
#: against another layout is rejected instead of silently misread.
STATE_LAYOUT_VERSION = 1

# State dimensions shared by every world (``gridplan.core.world``: the rest of the layout,
# colour bits past the first and the distractors, is computed from the world).
AGENT_X, AGENT_Y, KEY_X, KEY_Y, CARRYING, DOOR_OPEN, C1 = range(7)

# Actions: up y+1, down y-1, left x-1, right x+1.
UP, DOWN, LEFT, RIGHT = range(4)
N_ACTIONS = 4
ACTION_NAMES = ("up", "down", "left", "right")
#: (4, 2) integer (dx, dy) per action.
MOVES = torch.tensor([[0, 1], [0, -1], [-1, 0], [1, 0]], dtype=torch.long)
#: (5, 2) moves of the d1 random walk: the four actions plus stay.
DISTRACTOR_MOVES = torch.cat([MOVES, torch.zeros(1, 2, dtype=torch.long)])

#: Discount of V* and of the planner's leaf scores in every world (our choice: the paper does
#: not state one).
DEFAULT_GAMMA = 0.95
#: Reward of arriving on the goal cell, and on the hazard cell (paper §3, §5.3).
GOAL_REWARD = 1.0
HAZARD_REWARD = -1.0
