"""Checks of state and action batches at a public boundary, for every kind of world.

A state batch is ``(B, S)`` floating point and finite, ``S = world.state_dim``; an action batch
``(B,)`` integer in ``0..A-1``. ``gridplan.core.env`` (the paper's world) and
``gridplan.core.doorkey_task`` (MiniGrid DoorKey) add the rules of their own states on top.
"""

from __future__ import annotations

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.world import DEFAULT, World


def check_state(
    state: torch.Tensor, name: str = "state", world: World = DEFAULT
) -> torch.Tensor:
    """Validate a batch of states at a public boundary.

    Args:
        state: ``(B, S)`` floating tensor, ``S = world.state_dim``.
        name: what to call the tensor in error messages.
        world: the layout the states must have.

    Returns:
        ``state`` unchanged.

    Raises:
        ValueError: if ``state`` is not a tensor, not 2-D with ``S`` columns (the message
            names the world), not floating point, or holds NaN/inf values.
    """
    if not isinstance(state, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(state).__name__}")
    s = world.state_dim
    if state.dim() != 2 or state.shape[1] != s:
        raise ValueError(
            f"{name} must have shape (B, {s}), got {tuple(state.shape)} (the layout of world "
            f"{world.name!r})"
        )
    if not state.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {state.dtype}")
    # aminmax propagates NaN and costs far less than isfinite(state).all() on CPU.
    if state.numel() and not torch.isfinite(torch.stack(torch.aminmax(state))).all():
        bad = (~torch.isfinite(state)).any(dim=1).nonzero().flatten()[:5].tolist()
        raise ValueError(f"{name} holds non-finite values (NaN or inf) in rows {bad}")
    return state


def check_action(action: torch.Tensor, batch: int, n_actions: int = N_ACTIONS) -> torch.Tensor:
    """Validate a batch of actions.

    Args:
        action: ``(B,)`` integer tensor with values in ``0..n_actions - 1``.
        batch: expected ``B``.
        n_actions: the action count (4 here; MiniGrid's 7 in ``doorkey_env``).

    Raises:
        ValueError: on a wrong shape, a non-integer dtype or a value outside the range.
    """
    if not isinstance(action, torch.Tensor):
        raise ValueError(f"action must be a torch.Tensor, got {type(action).__name__}")
    if action.shape != (batch,):
        raise ValueError(f"action must have shape ({batch},), got {tuple(action.shape)}")
    if action.is_floating_point() or action.dtype == torch.bool:
        raise ValueError(f"action must be an integer tensor, got dtype {action.dtype}")
    if action.numel():
        low, high = (int(v) for v in torch.aminmax(action))
        if low < 0 or high >= n_actions:
            raise ValueError(
                f"action values must lie in 0..{n_actions - 1}, got range [{low}, {high}]"
            )
    return action
