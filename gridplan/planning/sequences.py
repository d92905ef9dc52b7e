"""Returns of sampled action sequences: the objective of the sampling planners (paper §3
"Planner"; the CEM and MPPI planners of ``gridplan.planning.cem`` and ``gridplan.planning.mppi``).

A candidate is an action sequence ``a_0 .. a_{H-1}`` from a true root state. Its return is the
full-width search's leaf score (``gridplan.planning.scorers``) with a chosen terminal value
``V`` in place of V*::

    G = sum_{t < H} gamma^t r(s_hat_{t+1}) [alive] + gamma^H V(s_hat_H) [alive]

read on the model's predicted states through rounded cells and thresholded flags, ``alive``
until the first imagined goal or hazard. ``sequence_returns`` also gives the per-step terms
(the last one holding the terminal value), whose sum over the horizon is the return: the
per-step reward an MPC library sums (``scripts/bench_planners.py`` hands these to TorchRL's
planners).

Letter legend: ``B`` root episodes, ``P`` candidates per root, ``H`` horizon, ``S`` state dims.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gridplan.core import dynamics
from gridplan.core.tasks import TaskKind
from gridplan.models.capabilities import capabilities_of
from gridplan.models.latent_contract import LatentThroughDecoder
from gridplan.planning.scorers import check_prediction, episodes_per_setting


def root_latents(model, root: torch.Tensor) -> torch.Tensor | None:
    """``(B, Z)`` latents of the roots when ``model`` is a latent model seen through its
    decoder (``LatentThroughDecoder``: its observations rendered and encoded once), else
    ``None``. A sampling planner computes them once per decision and hands them to every
    ``sequence_terms`` call of that decision.

    Raises:
        ValueError: on a malformed root; ``LatentContractError`` on a bad latent.
    """
    return model.encode_states(root) if isinstance(model, LatentThroughDecoder) else None


@torch.no_grad()
def sequence_terms(
    model,
    task: TaskKind,
    root: torch.Tensor,
    actions: torch.Tensor,
    value,
    generator: torch.Generator,
    latent: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-step discounted terms ``(B, P, H)`` of the candidates' returns (module docstring).

    Term ``t`` is ``gamma^t r(s_hat_{t+1}) [alive]``; the last one adds
    ``gamma^H V(s_hat_H) [alive]``. All ``B * P`` rows are rolled in one ``predict`` call per
    step, root-major (candidate ``p`` of root ``b`` is row ``b * P + p``), so a setting-major
    batch of a multi-setting model stays setting-major.

    A latent model seen through its decoder (``LatentThroughDecoder``) is rolled as its
    ``predict`` rolls it, ``z_{t+1} = predict_latent(z_t, a_t)``, ``s_hat_{t+1} =
    decode(z_{t+1})``, but from the roots' latents ``latent`` (``root_latents``; encoded here
    when not given) repeated over the candidates: one encoding of ``B`` observations per
    decision instead of ``B * P`` per call (docs/PERFORMANCE.md, "Threads and allocations").

    Args:
        model: any world model (``predict(state, action, generator)``; optional
            ``start_rollout(rows, generator)``, ``n_settings``).
        task: the reward, termination, ``gamma`` and action count ``task.world.n_actions``.
        root: ``(B, S)`` validated true states.
        actions: ``(B, P, H)`` long candidate sequences, values in ``0..task.world.n_actions - 1``.
        value: terminal value with ``lookup((N, S)) -> (N,)`` (``ValueTable``,
            ``gridplan.planning.learned_value``).
        generator: the model's noise.
        latent: optional ``(B, Z)`` latents of the roots (``root_latents``), for a latent
            model only.

    Raises:
        ValueError: if ``actions`` is misshapen or out of range, the batch does not split into
            the model's setting blocks, or the model returns a misshapen or non-finite
            prediction (``check_prediction``).
    """
    b, s = root.shape
    if actions.dim() != 3 or actions.shape[0] != b or actions.shape[2] < 1:
        raise ValueError(
            f"actions must be (B, P, H) with B = {b} roots and H >= 1, got {tuple(actions.shape)}"
        )
    a = task.world.n_actions
    if actions.numel() and (int(actions.min()) < 0 or int(actions.max()) >= a):
        raise ValueError(f"actions must lie in 0..{a - 1} (the {a} actions of task {task.name})")
    offers = capabilities_of(model)
    episodes_per_setting(b, offers.n_settings)
    p, h = actions.shape[1], actions.shape[2]
    rows = b * p
    z = root_latents(model, root) if latent is None else latent
    state = root.repeat_interleave(p, dim=0) if z is None else None
    z = None if z is None else z.repeat_interleave(p, dim=0)
    flat = actions.reshape(rows, h)
    alive = torch.ones(rows, dtype=torch.bool, device=root.device)
    terms = root.new_zeros(rows, h)
    if offers.rollout_start:
        model.start_rollout(rows, generator)
    for t in range(h):
        if z is None:
            state = model.predict(state, flat[:, t], generator)
        else:
            z = model.step_latent(z, flat[:, t], generator)
            state = model.decode_latent(z).to(root.device)
        check_prediction(state, model, t, rows, "candidate rows", s)
        reward, goal, hazard = dynamics.outcome(task, state)
        terms[:, t] = task.gamma**t * reward * alive
        alive &= ~(goal | hazard)
    terms[:, h - 1] += task.gamma**h * value.lookup(state) * alive
    return terms.view(b, p, h)


def sequence_returns(
    model,
    task: TaskKind,
    root: torch.Tensor,
    actions: torch.Tensor,
    value,
    generator: torch.Generator,
    latent: torch.Tensor | None = None,
) -> torch.Tensor:
    """Returns ``(B, P)`` of the candidates: ``sequence_terms`` summed over the horizon
    (``latent`` as there).

    Raises:
        ValueError: as ``sequence_terms``.
    """
    return sequence_terms(model, task, root, actions, value, generator, latent).sum(dim=2)


@dataclass
class Plan:
    """What a planner decided at ``B`` roots, for the ladder's decision metrics
    (``gridplan.evaluation.decisions.decide_planner``).

    Attributes:
        action: ``(B,)`` long first actions (what ``act`` returns).
        sequence: ``(B, H)`` long, the action sequence the planner committed to (its first
            column is ``action``).
        predicted: ``(B,)`` float, the planner's own return of ``sequence`` (the model's
            prediction scored with the planner's terminal value).
    """

    action: torch.Tensor
    sequence: torch.Tensor
    predicted: torch.Tensor


def own_generator(generator: torch.Generator, device: torch.device) -> torch.Generator:
    """A planner's private stream of candidate draws, seeded by one draw from ``generator``.

    The sampling planners take this one draw first and all their candidate noise from the
    private stream, so their candidates never depend on how much noise the model drew
    (a model whose relevant predictions match another's gives identical decisions; the
    ``M(0, sigma_I)`` test of ``tests/planning/test_planners.py``).
    """
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return torch.Generator(device=device).manual_seed(seed)
