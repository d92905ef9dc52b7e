"""The branch set ``Q`` of the decision levels: true states to branch from.

Two parts, so that fidelity is measured both where the data came from and where a good policy
goes (the policy-shifted distribution):

- behaviour: the start states of held-out evaluation windows
  (``gridplan.data.datasets.eval_windows``, the logged behaviour policy), with their logged actions
  and true futures;
- oracle-visited: states at which the oracle planner decided during its closed-loop episodes
  (``gridplan.planning.closed_loop.run_closed_loop`` with ``record=True``), sampled uniformly
  without replacement.

Both parts are fixed by the protocol's seeds and never depend on the evaluated model, so every
model is measured on the same states (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gridplan.data.datasets import EvalWindows
from gridplan.planning.closed_loop import EpisodeResults


@dataclass
class BranchSet:
    """Attributes:
    states: ``(N, S)`` true states, behaviour part first.
    behaviour: ``(N,)`` bool, the row is a held-out behaviour state.
    logged_actions: ``(N_b, H)`` the behaviour rows' logged actions.
    logged_targets: ``(N_b, H, S)`` their true futures under those actions.
    """

    states: torch.Tensor
    behaviour: torch.Tensor
    logged_actions: torch.Tensor
    logged_targets: torch.Tensor

    def __len__(self) -> int:
        return self.states.shape[0]

    @property
    def n_behaviour(self) -> int:
        return int(self.behaviour.sum())


def decision_states(results: EpisodeResults) -> torch.Tensor:
    """``(K, S)`` the true states at which a recorded closed loop chose an action.

    Raises:
        ValueError: if the results were not recorded (``record=True``).
    """
    if results.trajectory is None or results.actions is None:
        raise ValueError("closed-loop results carry no trajectory: run with record=True")
    return results.trajectory[:-1][results.actions >= 0]


def sample_rows(states: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """Up to ``n`` rows of ``states`` drawn uniformly without replacement (all if fewer)."""
    perm = torch.randperm(states.shape[0], generator=generator, device=generator.device)
    return states[perm[:n].to(states.device)]


def branch_set(
    windows: EvalWindows, oracle: EpisodeResults, n_per_part: int, generator: torch.Generator
) -> BranchSet:
    """``Q`` with up to ``n_per_part`` states in each part (module docstring).

    Args:
        windows: held-out windows; their first ``n_per_part`` starts form the behaviour part.
        oracle: recorded closed-loop results of the oracle planner.
        n_per_part: states per part, >= 1.
        generator: draws the oracle-visited sample.

    Raises:
        ValueError: if ``n_per_part < 1`` or the oracle results were not recorded.
    """
    if n_per_part < 1:
        raise ValueError(f"n_per_part must be >= 1, got {n_per_part}")
    n_b = min(n_per_part, len(windows))
    shifted = sample_rows(decision_states(oracle), n_per_part, generator)
    states = torch.cat([windows.start[:n_b], shifted.to(windows.start.device)])
    behaviour = torch.zeros(states.shape[0], dtype=torch.bool, device=states.device)
    behaviour[:n_b] = True
    return BranchSet(
        states=states,
        behaviour=behaviour,
        logged_actions=windows.actions[:n_b].long(),
        logged_targets=windows.targets[:n_b],
    )
