"""L5 outcome fidelity: rewards, policy values and success probabilities inside the model.

Policies of the anchor set (``gridplan.evaluation.anchors``) are run twice from the same true start
states, ``K`` times each: in the true environment, and inside the model, where the policy acts
on the imagined state, the model steps, and reward and termination are read from the
predicted state (or the model's own ``predict_reward``, ``gridplan.evaluation.common``). The runs
step in lockstep and share each step's policy draws, so they make the same random choices
wherever they see the same relevant state (read through rounded cells). Returns are discounted,
``J = sum_{t < T} gamma^t r_{t+1}`` over the task's horizon ``T``, so ``J`` of the greedy policy
from ``s`` is ``V*(s)``.

- Reward-prediction error: ``mean |r_hat(s, a) - r(s, a)|`` over the one-step branches of the
  branch set ``Q`` (every action from every state), and the same over the branches where
  either reward is non-zero (the decision-critical arrivals).
- Value error ``|J_E(pi) - J_hat(pi)|`` per policy, and its mean over the anchor set.
- Success calibration: the model's imagined success probability ``p_hat(s)`` (the fraction of
  the ``K`` imagined rollouts that reach the goal) scored against each true outcome ``y``:
  ``Brier = mean (p_hat - y)^2``. ``brier_floor`` is the same score of the true success
  probability (the fraction of the ``K`` true rollouts that succeed): what a perfect model
  gets, since the policies are stochastic.

Definitions: "How Should World Models Be Evaluated for Embodied Decision-Making?"
(arXiv 2606.15032), §5 (full-horizon value error, success-probability calibration);
WorldModelGym (reward-prediction error).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gridplan.core import dynamics
from gridplan.core.tasks import TaskKind
from gridplan.evaluation.anchors import AnchorSet
from gridplan.evaluation.common import NON_NEGATIVE, Estimate, predicted_outcome
from gridplan.evaluation.fidelity import Branches
from gridplan.metrics.bootstrap import resample_means
from gridplan.models.capabilities import capabilities_of


@dataclass
class PolicyRuns:
    """Returns and outcomes of every anchor from every start, ``(A, N, K)`` each.

    Attributes:
        names: the anchors' names (``A``).
        true_return, model_return: discounted returns in the environment / inside the model.
        true_success, model_success: bool, the goal was reached (inside the model: the
            predicted state reached it).
    """

    names: tuple[str, ...]
    true_return: torch.Tensor
    model_return: torch.Tensor
    true_success: torch.Tensor
    model_success: torch.Tensor

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-start policy values ``(A, N)`` (mean over the ``K`` rollouts): true, model."""
        return (
            self.true_return.double().mean(dim=2).cpu().numpy(),
            self.model_return.double().mean(dim=2).cpu().numpy(),
        )


def _tile(x: torch.Tensor, anchors: int, rollouts: int) -> torch.Tensor:
    """``(N, ...)`` -> ``(A * N * K, ...)`` laid out anchor-major, then start, then rollout."""
    return x.repeat_interleave(rollouts, dim=0).repeat(anchors, *([1] * (x.dim() - 1)))


@torch.no_grad()
def run_anchor_policies(
    model,
    anchors: AnchorSet,
    starts: torch.Tensor,
    rollouts: int,
    task: TaskKind,
    policy_seed: int,
    model_generator: torch.Generator,
    env_generator: torch.Generator,
    horizon: int | None = None,
) -> PolicyRuns:
    """Run every anchor ``rollouts`` times from every start, in the world and in the model.

    Both runs are stepped on float states: the true one by ``gridplan.core.dynamics.transition``
    (any task kind), the imagined one by ``model.predict``.

    Args:
        model: a single-setting world model, or ``None`` to run the true environment only
            (then ``model_return``/``model_success`` are empty).
        anchors: the policies.
        starts: ``(N, S)`` true start states.
        rollouts: ``K >= 1`` rollouts per (anchor, start).
        task: reward, termination and the policies' tables.
        policy_seed: seed of the policy streams (the same for both runs).
        model_generator: the model's randomness.
        env_generator: the true environment's randomness (its irrelevant dims).
        horizon: steps per rollout (default: the task's horizon).

    Raises:
        ValueError: if ``rollouts < 1`` or ``horizon < 1``.
    """
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, got {rollouts}")
    horizon = task.horizon if horizon is None else horizon
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    device = starts.device
    a, n = len(anchors), starts.shape[0]
    rows = a * n * rollouts
    anchor = torch.arange(a, device=device).repeat_interleave(n * rollouts)
    discounts = [task.gamma**t for t in range(horizon)]
    gen = torch.Generator(device=device).manual_seed(int(policy_seed))
    imagine = model is not None

    def zeros(dtype=torch.float32):
        return torch.zeros(rows, dtype=dtype, device=device)

    # Both runs step in lockstep and share each step's policy draws (common random numbers).
    state = _tile(starts, a, rollouts)
    ret, success, alive = zeros(), zeros(torch.bool), ~zeros(torch.bool)
    if imagine:
        imagined = state
        m_ret, m_success, m_alive = zeros(), zeros(torch.bool), ~zeros(torch.bool)
        if capabilities_of(model).rollout_start:
            model.start_rollout(rows, model_generator)
    for t in range(horizon):
        world, inside = bool(alive.any()), imagine and bool(m_alive.any())
        if not (world or inside):
            break
        draws = anchors.draw(rows, gen)
        if world:
            action = anchors.act(state, anchor, draws, alive)
            state, reward, done, info = dynamics.transition(task, state, action, env_generator)
            ret += discounts[t] * reward * alive
            success |= info["goal"] & alive
            alive &= ~done
        if inside:
            action = anchors.act(imagined, anchor, draws, m_alive)
            nxt = model.predict(imagined, action, model_generator)
            reward, goal, hazard = predicted_outcome(model, imagined, action, nxt, task)
            m_ret += discounts[t] * reward * m_alive
            m_success |= goal & m_alive
            m_alive &= ~(goal | hazard)
            imagined = nxt
    shape = (a, n, rollouts)
    if not imagine:
        empty = torch.empty(0, device=device)
        return PolicyRuns(anchors.names, ret.view(shape), empty, success.view(shape), empty.bool())
    return PolicyRuns(
        anchors.names,
        ret.view(shape),
        m_ret.view(shape),
        success.view(shape),
        m_success.view(shape),
    )


@torch.no_grad()
def random_policy_success(
    task, starts: torch.Tensor, generator: torch.Generator, horizon: int | None = None
) -> torch.Tensor:
    """``(N,)`` bool: the uniform random policy over ``task.world.n_actions`` reached the goal
    from each of the ``(N, S)`` true ``starts`` within ``horizon`` steps (default: the task's),
    stepped through ``gridplan.core.dynamics``; any task kind (the anchor set's
    ``uniform_random`` is the same policy, on draws shared with the other anchors).

    Raises:
        ValueError: if ``horizon < 1``.
    """
    horizon = task.horizon if horizon is None else horizon
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    n, device = starts.shape[0], starts.device
    state, alive = starts, torch.ones(n, dtype=torch.bool, device=device)
    success = torch.zeros(n, dtype=torch.bool, device=device)
    for _ in range(horizon):
        # One action per row every step, alive or not, so the draws do not depend on outcomes.
        action = torch.randint(0, task.world.n_actions, (n,), generator=generator, device=device)
        rows = alive.nonzero().squeeze(1)
        if rows.numel() == 0:
            break
        nxt, _, terminated, info = dynamics.transition(task, state[rows], action[rows], generator)
        state = state.index_copy(0, rows, nxt)
        success[rows] = info["goal"]
        alive[rows] = ~terminated
    return success


@dataclass(frozen=True)
class OutcomeFidelity:
    """L5 numbers (module docstring).

    Attributes:
        reward_error: over all one-step branches of ``Q``.
        reward_error_events: over the branches where either reward is non-zero (``None`` if
            there is none).
        value_error: mean over anchors of ``|J_E - J_hat|``, bootstrap interval over starts.
        value_error_per_policy: anchor name -> ``|J_E - J_hat|``.
        brier: success calibration of the imagined success probability.
        brier_floor: the same score of the true success probability.
    """

    reward_error: Estimate
    reward_error_events: Estimate | None
    value_error: Estimate
    value_error_per_policy: dict[str, float]
    brier: Estimate
    brier_floor: Estimate

    def to_dict(self) -> dict:
        return {
            "reward_error": self.reward_error.to_dict(),
            "reward_error_events": (
                None if self.reward_error_events is None else self.reward_error_events.to_dict()
            ),
            "value_error": self.value_error.to_dict(),
            "value_error_per_policy": dict(self.value_error_per_policy),
            "brier": self.brier.to_dict(),
            "brier_floor": self.brier_floor.to_dict(),
        }


def _value_error(j_true: np.ndarray, j_model: np.ndarray) -> np.ndarray:
    """Mean over anchors (last axis) of ``|J_E - J_hat|``."""
    return np.abs(j_true - j_model).mean(axis=-1)


def outcome_fidelity(
    runs: PolicyRuns, branches: Branches, n_resamples: int = 2000, seed: int = 0
) -> OutcomeFidelity:
    """L5 summaries of anchor runs and one-step branches.

    Args:
        runs: anchor runs with a model part.
        branches: the one-step branches of ``Q``.
        n_resamples: bootstrap resamples of the value-error interval (over start states).
        seed: bootstrap seed.

    Raises:
        ValueError: if ``runs`` has no model part.
    """
    if runs.model_return.numel() == 0:
        raise ValueError("outcome fidelity needs anchor runs inside the model")
    gap = (branches.reward_model - branches.reward_true).abs().double()
    events = (branches.reward_model != 0) | (branches.reward_true != 0)
    j_true, j_model = runs.values()
    replicates = _value_error(*resample_means((j_true, j_model), n_resamples, seed))
    per_policy = np.abs(j_true.mean(axis=1) - j_model.mean(axis=1))
    y = runs.true_success.double()
    p_hat = runs.model_success.double().mean(dim=2, keepdim=True)
    p_true = y.mean(dim=2, keepdim=True)
    # One Brier value per start state (mean over anchors and rollouts) for the interval.
    brier = (p_hat - y).square().mean(dim=(0, 2))
    floor = (p_true - y).square().mean(dim=(0, 2))
    return OutcomeFidelity(
        reward_error=Estimate.of(gap, NON_NEGATIVE),
        reward_error_events=Estimate.of(gap[events], NON_NEGATIVE) if events.any() else None,
        value_error=Estimate.bootstrap(float(per_policy.mean()), replicates, j_true.shape[1]),
        value_error_per_policy={
            name: float(v) for name, v in zip(runs.names, per_policy, strict=True)
        },
        brier=Estimate.of(brier, NON_NEGATIVE),
        brier_floor=Estimate.of(floor, NON_NEGATIVE),
    )
