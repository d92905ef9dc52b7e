"""Train a DoorKey world model outside gridplan, on MiniGrid's own environment.

Collects transitions of ``gymnasium.make("MiniGrid-DoorKey-{N}x{N}-v0")`` (a scripted policy
that fetches the key, opens the door and walks to the goal, with a uniform action at rate
``--epsilon``), recorded in gridplan's float state (``gridplan.adapters.minigrid.collect``);
fits the plain-PyTorch MLP of ``docs/how-to/minigrid_model.py`` with its own loop; saves its
weights; prints the held-out one-step accuracy and the command that evaluates it::

    python scripts/minigrid_outside_model.py --out minigrid_mlp.pt

Needs ``pip install gridplan[minigrid]``. ``docs/how-to/minigrid-model.md`` walks through it.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch

from gridplan.adapters import minigrid as mg

PLUGIN = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "minigrid_model.py"
#: MiniGrid's actions: turn left, turn right, forward, pickup, toggle.
LEFT, RIGHT, FORWARD, PICKUP, TOGGLE = 0, 1, 2, 3, 5
#: MiniGrid's headings as steps: east, south, west, north.
HEADINGS = ((1, 0), (0, 1), (-1, 0), (0, -1))


def plugin_module():
    """The plug-in file ``docs/how-to/minigrid_model.py`` as a module."""
    spec = importlib.util.spec_from_file_location("minigrid_model", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _subgoal(e) -> tuple[tuple[int, int], int | None]:
    """The cell to reach (or face, when an action follows) and that action: the key, then
    the door, then the goal."""
    cells = [(x, y, e.grid.get(x, y)) for x in range(e.width) for y in range(e.height)]
    found = {obj.type: (x, y, obj) for x, y, obj in cells if obj is not None}
    door = found["door"]
    if not door[2].is_open:
        if door[2].is_locked and e.carrying is None:
            return found["key"][:2], PICKUP
        return door[:2], TOGGLE
    return found["goal"][:2], None


def _passable(e, x: int, y: int) -> bool:
    obj = e.grid.get(x, y)
    return obj is None or obj.can_overlap()


def toward_subgoal(env) -> int | None:
    """First action of a shortest path (breadth first over cell and heading) to the subgoal,
    or None when it cannot be reached."""
    e = env.unwrapped
    target, final = _subgoal(e)
    start = (*(int(v) for v in e.agent_pos), int(e.agent_dir))
    first, queue = {start: None}, deque([start])
    while queue:
        x, y, h = queue.popleft()
        fx, fy = x + HEADINGS[h][0], y + HEADINGS[h][1]
        if final is None and (x, y) == target:
            return first[(x, y, h)]
        if final is not None and (fx, fy) == target:
            return final if first[(x, y, h)] is None else first[(x, y, h)]
        moves = [(LEFT, (x, y, (h - 1) % 4)), (RIGHT, (x, y, (h + 1) % 4))]
        if _passable(e, fx, fy):
            moves.append((FORWARD, (fx, fy, h)))
        for action, nxt in moves:
            if nxt not in first:
                first[nxt] = action if first[(x, y, h)] is None else first[(x, y, h)]
                queue.append(nxt)
    return None


def scripted(epsilon: float):
    """``policy(env, rng)``: ``toward_subgoal``, or a uniform action at rate ``epsilon``
    (and where the subgoal is out of reach)."""

    def policy(env, rng) -> int:
        action = None if rng.random() < epsilon else toward_subgoal(env)
        return int(rng.integers(mg.N_ACTIONS)) if action is None else action

    return policy


def train(net, states, actions, nexts, epochs: int, seed: int, batch: int = 256):
    """Fit ``net`` to the next states by mean squared error (Adam, one cosine-decayed run)."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    steps = epochs * -(-states.shape[0] // batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    net.train()
    for _ in range(epochs):
        for rows in torch.randperm(states.shape[0]).split(batch):
            loss = torch.nn.functional.mse_loss(net(states[rows], actions[rows]), nexts[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return net.eval()


@torch.no_grad()
def exact_rate(net, states, actions, nexts, size: int) -> float:
    """Share of transitions whose predicted next state rounds to the true one on every dim."""
    scale = torch.tensor([size - 1] * 2 + [3] + [size - 1] * 2 + [1, 2] + [size - 1] * 2)
    pred = torch.round(net(states, actions) * scale)
    return float((pred == torch.round(nexts * scale)).all(dim=1).float().mean())


def main(argv=None) -> None:
    import gymnasium

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=8, choices=(5, 6, 8, 16))
    p.add_argument("--transitions", type=int, default=80_000)
    p.add_argument("--epsilon", type=float, default=0.6)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="minigrid_mlp.pt")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    mg.require_pinned()
    env = gymnasium.make(f"MiniGrid-DoorKey-{args.size}x{args.size}-v0")
    t0 = time.perf_counter()
    data = mg.collect(env, args.transitions, scripted(args.epsilon), seed=args.seed)
    held = np.random.default_rng(args.seed).random(args.transitions) < 0.1
    fit = [t[torch.from_numpy(~held)] for t in data]
    test = [t[torch.from_numpy(held)] for t in data]
    print(f"collected {args.transitions} transitions in {time.perf_counter() - t0:.0f} s")
    plugin = plugin_module()
    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    net = plugin.DoorKeyMLP(data[0].shape[1], args.hidden)
    train(net, *fit, args.epochs, args.seed)
    print(
        f"trained {args.epochs} epochs in {time.perf_counter() - t0:.0f} s; exact next state "
        f"on {exact_rate(net, *test, args.size):.4f} of {len(test[0])} held-out transitions"
    )
    world = f"minigrid-doorkey-{args.size}x{args.size}"
    plugin.save(net, args.out, world)
    print(
        f"saved {args.out}; evaluate it with\n  python -m eval --world {world} --model "
        f"docs/how-to/minigrid_model.py:make --model-arg path={args.out} --depth 2 "
        "--json out.json"
    )


if __name__ == "__main__":
    main()
