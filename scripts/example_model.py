"""A world model written by hand, outside the gridplan package, to evaluate with the ladder.

It knows the rules of the key-door gridworld as a user might write them down, with two
simplifications a real model makes too: the agent's moves "slip" (it stays in place) with
probability ``slip``, and the distractors are predicted to stay where they are. It predicts its
own reward and says how unsure it is, so every optional part of the contract is shown.

    python -m eval --model scripts/example_model.py:make --card
    python -m eval --model scripts/example_model.py:make --model-arg slip=0.3 --json out.json

State layout (12 floats in [0, 1], positions = cell / 7): agent_x agent_y key_x key_y carrying
door_open c1 c2 d1_x d1_y d2_x d2_y. Actions 0..3: up (y+1), down (y-1), left (x-1), right (x+1).
"""

from __future__ import annotations

import torch

MOVES = torch.tensor([[0, 1], [0, -1], [-1, 0], [1, 0]])
WALL_X, DOOR, GOAL = 5, (5, 4), (7, 4)


class SlipperyKeyDoorModel:
    """Hand-written dynamics with slipping moves (the factory ``make`` builds it).

    Args:
        slip: probability that a move leaves the agent in place, in ``[0, 1)``.
        device: where its constant tables live (given by the evaluator when omitted).
    """

    def __init__(self, slip: float = 0.1, device: torch.device | str = "cpu") -> None:
        if not 0.0 <= slip < 1.0:
            raise ValueError(f"slip must lie in [0, 1), got {slip}")
        self.slip = float(slip)
        self.moves = MOVES.to(device)

    def _cells(self, state: torch.Tensor, lo: int) -> torch.Tensor:
        return torch.round(state[:, lo : lo + 2] * 7).clamp(0, 7).long()

    def _step(self, state: torch.Tensor, action: torch.Tensor):
        """The deterministic rules: ``(agent, key, carrying, door_open)`` after the move."""
        agent, key = self._cells(state, 0), self._cells(state, 2)
        carrying, door = state[:, 4] > 0.5, state[:, 5] > 0.5
        target = agent + self.moves[action]
        tx, ty = target[:, 0], target[:, 1]
        on_grid = (tx >= 0) & (tx <= 7) & (ty >= 0) & (ty <= 7)
        at_door = (tx == DOOR[0]) & (ty == DOOR[1])
        wall = (tx == WALL_X) & ~at_door
        opens = at_door & ~door & carrying
        blocked = ~on_grid | wall | (at_door & ~door)
        agent = torch.where(blocked.unsqueeze(1), agent, target)
        carrying = carrying | (agent == key).all(dim=1)
        key = torch.where(carrying.unsqueeze(1), agent, key)
        return agent, key, carrying, door | opens, ~blocked

    def predict(self, state, action, generator):
        """One imagined step: ``(N, 12)`` float32 in [0, 1] -> ``(N, 12)``."""
        agent, key, carrying, door, moved = self._step(state, action.long())
        slipped = torch.rand(state.shape[0], generator=generator, device=state.device) < self.slip
        old = self._cells(state, 0)
        agent = torch.where((slipped & moved).unsqueeze(1), old, agent)
        carrying = carrying & ~(slipped & moved & (state[:, 4] <= 0.5))
        key = torch.where(carrying.unsqueeze(1), agent, self._cells(state, 2))
        out = state.clone()
        out[:, 0:2] = agent.to(state.dtype) / 7
        out[:, 2:4] = key.to(state.dtype) / 7
        out[:, 4] = carrying.to(state.dtype)
        out[:, 5] = door.to(state.dtype)
        out[:, 7] = 1.0 - (state[:, 7] > 0.5).to(state.dtype)
        return out

    def predict_reward(self, state, action, next_state):
        """+1 on arriving at the goal cell ``(7, 4)``, else 0: ``(N,)``."""
        at_goal = (self._cells(next_state, 0) == torch.tensor(GOAL, device=state.device)).all(1)
        return at_goal.to(state.dtype)

    def uncertainty(self, state, action):
        """The chance that this step differs from the rules' prediction: ``slip`` where the
        move goes through, 0 where the agent is blocked anyway. ``(N,)``."""
        moved = self._step(state, action.long())[4]
        return moved.to(state.dtype) * self.slip


def make(slip: float = 0.1, device: torch.device | str = "cpu") -> SlipperyKeyDoorModel:
    """Factory for ``python -m eval --model scripts/example_model.py:make``."""
    return SlipperyKeyDoorModel(slip=slip, device=device)
