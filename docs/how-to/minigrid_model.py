"""A MiniGrid DoorKey world model trained outside gridplan, and the plug-in that evaluates it
(``docs/how-to/minigrid-model.md``).

The network is plain PyTorch: ``next = state + MLP([state, one_hot(action)])``. It is trained
by ``scripts/minigrid_outside_model.py`` on transitions of MiniGrid's own
``MiniGrid-DoorKey-8x8-v0``; ``make`` loads its weights and hands gridplan the model::

    python scripts/minigrid_outside_model.py --out minigrid_mlp.pt
    python -m eval --world minigrid-doorkey-8x8 --model docs/how-to/minigrid_model.py:make \\
        --model-arg path=minigrid_mlp.pt --depth 2 --json out.json

State (9 floats in [0, 1], ``gridplan.adapters.minigrid.state_vector``): agent_x agent_y
heading key_x key_y carrying door wall_x door_y; cells / (N - 1), heading / 3, door / 2
(0 open, 0.5 closed, 1 locked). Actions 0..6 are MiniGrid's: left, right, forward, pickup,
drop, toggle, done.
"""

from __future__ import annotations

import torch
from torch import nn

from gridplan.core.world import get

#: MiniGrid's action count.
N_ACTIONS = 7


class DoorKeyMLP(nn.Module):
    """``state + MLP([state, one_hot(action)])``: ``(N, S)`` float, ``(N,)`` int -> ``(N, S)``."""

    def __init__(self, state_dim: int = 9, hidden: int = 256, layers: int = 3) -> None:
        super().__init__()
        self.config = {"state_dim": state_dim, "hidden": hidden, "layers": layers}
        sizes = [state_dim + N_ACTIONS] + [hidden] * (layers - 1)
        blocks = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
            blocks += [nn.Linear(n_in, n_out), nn.ReLU()]
        self.net = nn.Sequential(*blocks, nn.Linear(sizes[-1], state_dim))

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        onehot = nn.functional.one_hot(action.long(), N_ACTIONS).to(state.dtype)
        return state + self.net(torch.cat([state, onehot], dim=1))


def save(net: DoorKeyMLP, path: str, world: str) -> None:
    """Write ``net``'s weights, its sizes and its world's name to ``path``."""
    torch.save({"config": net.config, "weights": net.state_dict(), "world": world}, path)


class MLPWorldModel:
    """gridplan's state contract around a trained ``DoorKeyMLP``: ``predict(state (N, S),
    action (N,), generator) -> (N, S)`` in ``[0, 1]`` (the state is normalized; gridplan would
    clamp it too, with a warning); deterministic, so the generator is unused."""

    deterministic = True

    def __init__(self, net: DoorKeyMLP, world: str) -> None:
        self.net = net.eval()
        self.world = get(world)

    @torch.no_grad()
    def predict(self, state, action, generator):
        return self.net(state.float(), action).clamp(0.0, 1.0).to(state.dtype)


def make(path: str = "minigrid_mlp.pt", device="cpu", task=None) -> MLPWorldModel:
    """Load the weights ``scripts/minigrid_outside_model.py`` saved at ``path``. gridplan
    passes its ``task``: a model of another world is refused, naming the ``--world`` to pass."""
    saved = torch.load(path, map_location=device, weights_only=True)
    net = DoorKeyMLP(**saved["config"]).to(device)
    net.load_state_dict(saved["weights"])
    model = MLPWorldModel(net, saved["world"])
    if task is not None and task.world != model.world:
        raise ValueError(
            f"{path} predicts {model.world.name}, not {task.world.name}: pass "
            f"--world {model.world.name}"
        )
    return model
