"""The default world's state layout under the names the tests use (``gridplan.core.world``).

The library reads every index and size from a ``World``; the tests build states of the paper's
12-dim world by hand, so they name its dims and geometry once, here.
"""

from __future__ import annotations

from gridplan.core.world import DEFAULT

STATE_DIM = DEFAULT.state_dim
GRID_SIZE = DEFAULT.size
CELL_SCALE = DEFAULT.cell_scale
WALL_X = DEFAULT.wall_x
DOOR_CELL = DEFAULT.door_cell
DIM_NAMES = DEFAULT.dim_names
POSITION_DIMS = DEFAULT.position_dims
FLAG_DIMS = DEFAULT.flag_dims
(C2,) = DEFAULT.c2_dims
D1_X, D1_Y = DEFAULT.d1_dims
D2_X, D2_Y = DEFAULT.d2_dims
