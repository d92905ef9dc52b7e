"""A plain-Python DoorKey, written from MiniGrid's rules (``minigrid/minigrid_env.py``,
``minigrid/core/world_object.py``) and independent of ``gridplan.core.doorkey_*``: one state
at a time as a tuple, a breadth-first search for shortest paths, and the exact reset
distribution by enumeration."""

from __future__ import annotations

from collections import deque

# A state: (ax, ay, heading, kx, ky, carrying, door, wall_x, door_y, step); door 0 open,
# 1 closed, 2 locked; headings east, south, west, north.
DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))


def cell(n: int, s: tuple, x: int, y: int) -> str:
    """What lies on cell (x, y): wall, door, goal, key or empty."""
    wall_x, door_y = s[7], s[8]
    if x in (0, n - 1) or y in (0, n - 1) or not (0 <= x < n and 0 <= y < n):
        return "wall"
    if x == wall_x:
        return "door" if y == door_y else "wall"
    if not s[5] and (x, y) == (s[3], s[4]):
        return "key"
    if (x, y) == (n - 2, n - 2):
        return "goal"
    return "empty"


def step(n: int, max_steps: int, s: tuple, a: int) -> tuple[tuple, float, bool, bool]:
    """One MiniGrid step: ``(next_state, reward, terminated, truncated)``."""
    ax, ay, h, kx, ky, carrying, door, wall_x, door_y, t = s
    fx, fy = ax + DIRS[h][0], ay + DIRS[h][1]
    ahead = cell(n, s, fx, fy)
    t += 1
    reward, done = 0.0, False
    if a == 0:
        h = (h - 1) % 4
    elif a == 1:
        h = (h + 1) % 4
    elif a == 2:
        if ahead in ("empty", "goal") or (ahead == "door" and door == 0):
            ax, ay = fx, fy
        if ahead == "goal":
            done, reward = True, 1 - 0.9 * (t / max_steps)
    elif a == 3 and ahead == "key" and not carrying:
        carrying = 1
    elif a == 4 and ahead == "empty" and carrying:
        carrying, kx, ky = 0, fx, fy
    elif a == 5 and ahead == "door":
        if door == 2:
            door = 0 if carrying else 2
        else:
            door = 1 - door
    if carrying:
        kx, ky = ax, ay
    return (ax, ay, h, kx, ky, carrying, door, wall_x, door_y, t), reward, done, t >= max_steps


def shortest(n: int, s: tuple) -> int | None:
    """Fewest steps from ``s`` to the goal by breadth-first search (``None``: unreachable;
    0 on the goal). The step count is ignored."""
    start = (*s[:9], 0)
    if (s[0], s[1]) == (n - 2, n - 2):
        return 0
    seen, queue = {start[:9]}, deque([(start, 0)])
    while queue:
        state, dist = queue.popleft()
        for a in range(7):
            nxt, _, done, _ = step(n, 10**9, state, a)
            if done:
                return dist + 1
            if nxt[:9] not in seen:
                seen.add(nxt[:9])
                queue.append(((*nxt[:9], 0), dist + 1))
    return None


def reset_distribution(n: int) -> dict[tuple, float]:
    """Exact probability of every reset ``(wall_x, door_y, agent, heading, key)`` of
    MiniGrid's ``DoorKeyEnv._gen_grid``."""
    walls, doors = range(2, n - 2), range(1, n - 2)
    probs = {}
    for w in walls:
        room = [(x, y) for x in range(1, w) for y in range(1, n - 1)]
        for d in doors:
            for agent in room:
                for h in range(4):
                    for key in room:
                        if key != agent:
                            p = 1 / (len(walls) * len(doors) * len(room) * 4 * (len(room) - 1))
                            probs[(w, d, agent, h, key)] = p
    return probs
