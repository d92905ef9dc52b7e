"""Hand-made windows and fake world models for the metric tests."""

from __future__ import annotations

import torch
from paper_layout import STATE_DIM

from gridplan.core.constants import CARRYING
from gridplan.data.datasets import EvalWindows
from gridplan.models.contract import WorldModel

#: A valid state: agent (2, 3), key (1, 1), door closed, c1 = 1, c2 = 0, d1 (4, 4), d2 (6, 0).
from gridplan.models.noise import OracleModel

#: A valid state: agent (2, 3), key (1, 1), door closed, c1 = 1, c2 = 0, d1 (4, 4), d2 (6, 0).
FIXED_STATE = torch.tensor(
    [2 / 7, 3 / 7, 1 / 7, 1 / 7, 0.0, 0.0, 1.0, 0.0, 4 / 7, 4 / 7, 6 / 7, 0.0]
)


def constant_windows(w: int = 3, h: int = 2, pickup_at=(), door_at=()) -> EvalWindows:
    """``w`` windows of ``h`` steps whose start, previous states and targets all equal
    ``FIXED_STATE``; ``pickup_at`` / ``door_at`` list ``(window, step)`` event positions."""
    state = FIXED_STATE.expand(w, h, STATE_DIM).clone()
    pickup = torch.zeros(w, h, dtype=torch.bool)
    door = torch.zeros(w, h, dtype=torch.bool)
    for i, t in pickup_at:
        pickup[i, t] = True
    for i, t in door_at:
        door[i, t] = True
    return EvalWindows(
        start=state[:, 0].clone(),
        actions=torch.zeros(w, h, dtype=torch.long),
        targets=state,
        pickup=pickup,
        door_opened=door,
        prev=state.clone(),
    )


class ConstantModel(WorldModel):
    """Predicts ``FIXED_STATE + offset`` whatever its input (deterministic)."""

    def __init__(self, offset: torch.Tensor) -> None:
        self.offset = offset

    def predict(self, state, action, generator):
        return (FIXED_STATE + self.offset).expand(state.shape[0], STATE_DIM).clone()


class OffsetOracle(OracleModel):
    """The oracle's next state plus a fixed offset ``(12,)`` (no clamping)."""

    def __init__(self, offset: torch.Tensor) -> None:
        super().__init__()
        self.offset = offset

    def predict(self, state, action, generator):
        return super().predict(state, action, generator) + self.offset


class ForgetfulCarryingModel(OracleModel):
    """The oracle, except that it predicts ``carrying = value`` on every pickup step: the
    random-data failure of paper §5.4 (carrying 0.19 at pickup)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def predict(self, state, action, generator):
        nxt = super().predict(state, action, generator)
        picked = (state[:, CARRYING] < 0.5) & (nxt[:, CARRYING] > 0.5)
        nxt[:, CARRYING] = torch.where(picked, torch.tensor(self.value), nxt[:, CARRYING])
        return nxt


class RecordingModel(OracleModel):
    """The oracle, recording every ``(state, action)`` it is asked to step and its output."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.rollouts: list[int] = []

    def start_rollout(self, batch, generator):
        self.rollouts.append(batch)

    def predict(self, state, action, generator):
        out = super().predict(state, action, generator)
        self.calls.append((state.clone(), action.clone(), out.clone()))
        return out


class BrokenModel(WorldModel):
    """Returns ``bad(state)``: used to feed malformed outputs to the metrics."""

    def __init__(self, bad) -> None:
        self.bad = bad

    def predict(self, state, action, generator):
        return self.bad(state)
