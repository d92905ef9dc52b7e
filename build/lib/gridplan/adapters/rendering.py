"""Pictures of a (true or predicted) state for the adapters' ``render()``.

A state is read as the planner reads it (``gridplan.core.env``: cells rounded and clamped,
flags thresholded at 0.5) into a grid of one-character ``SYMBOLS``; ``ansi`` joins that grid
into text. ``rgb_array`` (Gymnasium's pixel mode) is the pixel observation of
``gridplan.core.render`` in height-width-channel order, the same reading of the state
(without the task's goal and hazard cells, which the text marks).
"""

from __future__ import annotations

import torch

from gridplan.core import env, render
from gridplan.core.constants import AGENT_X, AGENT_Y, C1, CARRYING, DOOR_OPEN, KEY_X, KEY_Y
from gridplan.core.tasks import Task

#: Symbol of each thing a cell can show, in drawing order (later ones cover earlier ones).
SYMBOLS = {
    "floor": ".",
    "wall": "#",
    "door_closed": "D",
    "door_open": "/",
    "goal": "G",
    "hazard": "H",
    "distractor": "x",
    "key": "k",
    "agent": "A",
    "agent_with_key": "a",
}
#: Render modes every adapter supports.
RENDER_MODES = ("ansi", "rgb_array")


def check_render_mode(render_mode: str | None) -> str | None:
    """``render_mode`` if it is ``None`` or one of ``RENDER_MODES``.

    Raises:
        ValueError: naming the supported modes.
    """
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(
            f"render_mode must be None or one of {list(RENDER_MODES)}, got {render_mode!r}"
        )
    return render_mode


def symbol_grid(state: torch.Tensor, task: Task) -> list[list[str]]:
    """The ``(S,)`` state of the task's world as ``N`` rows of ``N`` symbols, top row
    ``y = N - 1`` (``up`` is ``y + 1``), column ``x``.

    The key shows where it lies unless carried (then the agent is ``a``); the door is ``D``
    closed, ``/`` open; goal and hazard are the task's active cells for the state's ``c1``.

    Raises:
        ValueError: if ``state`` is not a ``(S,)`` tensor.
    """
    world = task.world
    s, n = world.state_dim, world.size
    if not isinstance(state, torch.Tensor) or tuple(state.shape) != (s,):
        got = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
        raise ValueError(f"state must be a ({s},) tensor, got {got}")
    row = state.detach().reshape(1, s).float().cpu()
    positions = [AGENT_X, AGENT_Y, KEY_X, KEY_Y, *world.d1_dims, *world.d2_dims]
    cells = env.to_cell(row[:, positions], world)[0]
    flags = env.to_flag(row[0, [CARRYING, DOOR_OPEN, C1]]).tolist()
    carrying, door_open, c1 = flags
    grid = [[SYMBOLS["floor"]] * n for _ in range(n)]

    def put(x: int, y: int, what: str) -> None:
        grid[n - 1 - int(y)][int(x)] = SYMBOLS[what]

    for y in range(n):
        put(world.wall_x, y, "wall")
    put(*world.door_cell, "door_open" if door_open else "door_closed")
    goal, hazard = task.goal_cells(torch.tensor([c1]))
    put(*goal[0].tolist(), "goal")
    if hazard is not None:
        put(*hazard[0].tolist(), "hazard")
    for k in range(world.n_distractors):
        put(*cells[4 + 2 * k : 6 + 2 * k].tolist(), "distractor")
    if not carrying:
        put(*cells[2:4].tolist(), "key")
    put(*cells[0:2].tolist(), "agent_with_key" if carrying else "agent")
    return grid


def ansi(state: torch.Tensor, task: Task) -> str:
    """``symbol_grid`` as text: ``N`` lines of ``N`` characters, each ending
    in a newline (Gymnasium's ``ansi`` render mode)."""
    return "".join("".join(row) + "\n" for row in symbol_grid(state, task))


def rgb_array(state: torch.Tensor, task: Task, pixels_per_cell: int = render.PIXELS_PER_CELL):
    """The ``(S,)`` state as a ``(N P, N P, 3)`` uint8 numpy image (Gymnasium's ``rgb_array``
    render mode): ``gridplan.core.render.observe(..., "pixels")`` moved to channels last.

    Raises:
        ValueError: if ``state`` is not a finite ``(S,)`` tensor of the task's world.
    """
    world = task.world
    s = world.state_dim
    if not isinstance(state, torch.Tensor) or tuple(state.shape) != (s,):
        got = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
        raise ValueError(f"state must be a ({s},) tensor, got {got}")
    row = state.detach().reshape(1, s).float().cpu()
    image = render.observe(row, world, "pixels", pixels_per_cell)[0]
    return image.permute(1, 2, 0).numpy().copy()
