"""Named constants of the factored gridworld: state layout, actions, geometry, tasks.

Every index into the ``(B, S=12)`` state tensor goes through a name defined here, so a
reader never meets a bare ``state[:, 4]``. Paper §3 and appendix D; SPEC §1.
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
HORIZON = 60
GAMMA = 0.95

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

TASKS = ("A", "B")
#: Task A: single goal, reward +1, terminal.
GOAL_A = (7, 4)
#: Task B: c1 < 0.5 makes (7, 2) the goal and (7, 5) the hazard; c1 >= 0.5 swaps them.
GOAL_B_C1_FALSE = (7, 2)
GOAL_B_C1_TRUE = (7, 5)
GOAL_REWARD = 1.0
HAZARD_REWARD = -1.0

#: Decision-relevant dimensions per task (paper §3, §5.3).
RELEVANT_DIMS = {
    "A": (AGENT_X, AGENT_Y, KEY_X, KEY_Y, CARRYING, DOOR_OPEN),
    "B": (AGENT_X, AGENT_Y, KEY_X, KEY_Y, CARRYING, DOOR_OPEN, C1),
}
#: The controlled family M(sigma_r, sigma_i) splits noise by the Task A relevant set.
NOISE_RELEVANT_DIMS = RELEVANT_DIMS["A"]


def check_task(task: str) -> str:
    """Return ``task`` if it is a known task name.

    Raises:
        ValueError: if ``task`` is not one of ``TASKS``.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid tasks are {', '.join(TASKS)}")
    return task


def relevant_mask(task: str, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(S,)`` mask of the task's relevant dimensions."""
    mask = torch.zeros(STATE_DIM, dtype=torch.bool, device=device)
    mask[list(RELEVANT_DIMS[check_task(task)])] = True
    return mask
