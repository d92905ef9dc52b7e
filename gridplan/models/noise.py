"""The oracle and the controlled noise family M(sigma_r, sigma_i), independent or AR(1).

Paper §4.2. Every model here is a ``WorldModel`` (``gridplan.models.contract``): one imagined
step ``predict(state (N, 12), action (N,), generator) -> (N, 12)``, plus ``start_rollout``
for AR(1) noise, which keeps memory across imagined steps. The planner scores this family's
leaves with ``gridplan.planning.fused.FusedNoiseScorer``, the same arithmetic on the
decision-relevant dims only; it is registered for ``NoiseModel``, ``OracleModel`` and
``AR1NoiseModel`` themselves (``gridplan.planning.registry``), so a subclass is scored
through its ``predict`` unless it registers the fused scorer itself, and changing
``predict`` never leaves a stale fast path behind.

Every model of the family, the oracle included, follows a ``Reading`` (``gridplan.core.readings``)
of the choices §4.2 leaves open: whether predictions are clamped, whether the transition
outputs clean cells or carries the belief's sub-cell offset, whether ``c1``/``c2`` and the
carrying and door flags are thresholded or carried noisy, the flags' noise scale, whether the
distractors are sampled or predicted at their expected position, and the planner's default
tree (``Planner(tree=None)`` reads it). The default, ``PROJECT``, is what this repository
started from.

Several noise settings can share one batch: a model built from ``M`` settings treats the
``N`` rows as ``M`` equal contiguous blocks, block ``m`` belonging to setting ``m``. The
planner and the metrics keep rows of one episode or window inside its block, so a batch laid
out setting-major (``B = M * b``) evaluates all ``M`` models at once.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from gridplan.core import dynamics
from gridplan.core.constants import (
    AGENT_X,
    AGENT_Y,
    CARRYING,
    DISTRACTOR_MOVES,
    DOOR_OPEN,
    KEY_X,
    KEY_Y,
)
from gridplan.core.doorkey_task import DoorKeyTask
from gridplan.core.env import (
    check_action,
    check_state,
    encode,
    relevant_step,
    to_cell,
    to_flag,
    transition,
)
from gridplan.core.readings import PROJECT, Reading, check
from gridplan.core.tasks import TASK_A, Task, task_a
from gridplan.core.world import DEFAULT, DoorKey, World
from gridplan.models.capabilities import Declared
from gridplan.models.contract import WorldModel


def moving_dims(world: World) -> list[int]:
    """Position dims the ``belief`` transition moves from the belief: agent, key and the
    ``d1`` distractors (``d2`` is redrawn instead)."""
    return [AGENT_X, AGENT_Y, KEY_X, KEY_Y, *world.d1_dims]


def _expected_distractor_step(
    state: torch.Tensor, action: torch.Tensor, world: World
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The true transition with the distractors at their expected next position: the mean
    of the five clipped walk moves from each ``d1`` cell, and the grid's centre for each
    ``d2``. Draws nothing. Returns the next state and the ``pickup`` / ``door_opened``
    events."""
    b = state.shape[0]
    agent = to_cell(state[:, AGENT_X : AGENT_Y + 1], world)
    key = to_cell(state[:, KEY_X : KEY_Y + 1], world)
    carrying, door = to_flag(state[:, CARRYING]), to_flag(state[:, DOOR_OPEN])
    rel = relevant_step(agent, key, carrying, door, action, world)
    d1 = to_cell(state[:, list(world.d1_dims)], world).view(b, world.d1, 1, 2)
    d1 = (d1 + DISTRACTOR_MOVES.to(state.device)).clamp_(0, world.size - 1).float().mean(dim=2)
    d2 = torch.full((b, world.d2, 2), world.cell_scale / 2, device=state.device)
    c1 = to_flag(state[:, list(world.c1_dims)])
    c2 = ~to_flag(state[:, list(world.c2_dims)])
    nxt = encode(rel.agent, rel.key, rel.carrying, rel.door_open, c1, c2, d1, d2, world)
    return nxt, {"pickup": rel.pickup, "door_opened": rel.door_opened}


def imagined_transition(
    state: torch.Tensor,
    action: torch.Tensor,
    generator: torch.Generator,
    reading: Reading = PROJECT,
    world: World = DEFAULT,
) -> torch.Tensor:
    """The true transition as ``reading`` applies it to a belief state, before any noise.

    ``PROJECT`` is ``gridplan.core.env.transition`` exactly (same draws). ``distractors="expected"``
    draws nothing; ``transition="belief"`` adds the belief's sub-cell offset,
    ``state - cell / (N - 1)``, to the next clean position of agent, key and ``d1``;
    ``bits="carried"`` passes the ``c1`` bits through and outputs ``1 - c2``, unthresholded;
    ``flags="carried"`` passes the carrying and door flags through unless a pickup or a door
    opening (read from the rounded belief) sets them to 1. On a MiniGrid DoorKey world it is
    ``DoorKeyTask.transition`` (tiles sampled), under the one reading DoorKey has
    (``check_world_reading``).

    Args:
        state: ``(N, S)`` float belief states (not validated).
        action: ``(N,)`` long in ``0..A-1`` (``A = world.n_actions``).
        generator: the distractor draws of a ``sampled`` reading.
        reading: the choices of §4.2 (``gridplan.core.readings``).
        world: the states' world.

    Returns:
        ``(N, S)`` float next states, not clamped.
    """
    if isinstance(world, DoorKey):
        return dynamics.transition(DoorKeyTask(world=world), state, action, generator)[0]
    if reading.distractors == "sampled":
        # The next state does not depend on the task: any task of the world steps it.
        nxt, _, _, events = transition(state, action, generator, task_a(world))
    else:
        nxt, events = _expected_distractor_step(state, action, world)
    if reading.transition == "belief":
        moving = moving_dims(world)
        cells = to_cell(state[:, moving], world).to(state.dtype) / world.cell_scale
        nxt[:, moving] = nxt[:, moving] + (state[:, moving] - cells)
    if reading.bits == "carried":
        c1, c2 = list(world.c1_dims), list(world.c2_dims)
        nxt[:, c1] = state[:, c1]
        nxt[:, c2] = 1.0 - state[:, c2]
    if reading.flags == "carried":
        for dim, event in ((CARRYING, "pickup"), (DOOR_OPEN, "door_opened")):
            nxt[:, dim] = torch.where(events[event], nxt[:, dim], state[:, dim])
    return nxt


def check_world_reading(reading: Reading, world) -> Reading:
    """Return ``reading`` if ``world`` gives meaning to it. MiniGrid DoorKey has no colour
    bits and no expected distractor position: its transition is on rounded cells, with the
    tiles sampled and the carrying flag thresholded.

    Raises:
        ValueError: naming the switches a DoorKey world cannot apply.
    """
    if not isinstance(world, DoorKey):
        return reading
    fixed = {"transition": "cells", "bits": "thresholded", "flags": "thresholded",
             "distractors": "sampled"}
    wrong = {k: v for k, v in fixed.items() if getattr(reading, k) != v}
    if wrong:
        raise ValueError(
            f"reading {reading.name!r} sets {wrong}, which {world.name} cannot apply: its "
            f"models read rounded cells with sampled tiles ({fixed})"
        )
    return reading


def unit_flags(
    noise_dims: tuple[int, ...], reading: Reading = PROJECT, world: World = DEFAULT
) -> list[int]:
    """The flags of ``noise_dims`` whose noise is ``sigma_r`` itself rather than
    ``sigma_r / (N - 1)`` (all of them under ``flag_noise="sigma_r"``, none otherwise)."""
    if reading.flag_noise == "sigma_r/7":
        return []
    return [d for d in noise_dims if d in world.flag_dims]


def _sigma_block(
    sigma_r, sigma_i, dims: tuple[int, ...], reading: Reading, world: World
) -> torch.Tensor:
    """``(M, S)`` per-dimension noise scales (normalized units) from sigma_r (grid cells:
    ``sigma_r / (N - 1)``; ``sigma_r`` on ``unit_flags``) on ``dims`` and sigma_i (normalized
    units) on the others, each a float or a length-M sequence."""
    check(reading)
    sr = torch.as_tensor(sigma_r, dtype=torch.float32).reshape(-1)
    si = torch.as_tensor(sigma_i, dtype=torch.float32).reshape(-1)
    if sr.numel() != si.numel():
        if sr.numel() == 1:
            sr = sr.expand(si.numel())
        elif si.numel() == 1:
            si = si.expand(sr.numel())
        else:
            raise ValueError(
                f"sigma_r and sigma_i must have the same length, got {sr.numel()} and {si.numel()}"
            )
    sigma = si.unsqueeze(1).repeat(1, world.state_dim)
    sigma[:, list(dims)] = (sr / world.cell_scale).unsqueeze(1)
    sigma[:, unit_flags(dims, reading, world)] = sr.unsqueeze(1)
    return sigma


def check_sigma(sigma: torch.Tensor, world: World = DEFAULT) -> torch.Tensor:
    """Validate ``(M, S)`` noise scales of ``world``. Raises ValueError if negative,
    non-finite or misshapen."""
    sigma = torch.as_tensor(sigma, dtype=torch.float32)
    if sigma.dim() == 1:
        sigma = sigma.unsqueeze(0)
    s = world.state_dim
    if sigma.dim() != 2 or sigma.shape[1] != s or sigma.shape[0] < 1:
        raise ValueError(
            f"sigma must have shape (M, {s}) (world {world.name!r}), got {tuple(sigma.shape)}"
        )
    if not torch.isfinite(sigma).all():
        raise ValueError("sigma must be finite")
    if (sigma < 0).any():
        raise ValueError(f"sigma must be non-negative, got minimum {float(sigma.min())}")
    return sigma


class NoiseModel(Declared, WorldModel):
    """The controlled family (paper §4.2): the true transition applied to the belief state,
    then independent Gaussian noise. Noise compounds because the next imagined step reads the
    noisy state through rounded cells and thresholded flags (and, under a reading that carries
    the belief, through its carried offsets and bits).

    Args:
        sigma: ``(M, S)`` or ``(S,)`` per-dimension noise std, normalized units.
            Use ``NoiseModel.controlled`` for the paper's ``M(sigma_r, sigma_i)``.
        noise_dims: the dims ``settings`` reports as ``sigma_r`` (the rest as ``sigma_i``).
        reading: the choices of §4.2 (``gridplan.core.readings``; default ``PROJECT``: clean cells,
            thresholded bits, sampled distractors, predictions clamped to ``[0, 1]``).
        world: the world the model predicts (``S = world.state_dim``).

    Raises:
        ValueError: if ``sigma`` is negative, non-finite or of the wrong shape.
        TypeError: if ``reading`` is not a ``Reading``.
    """

    def __init__(
        self,
        sigma: torch.Tensor,
        noise_dims: tuple[int, ...] = TASK_A.noise_relevant_dims,
        reading: Reading = PROJECT,
        world: World = DEFAULT,
    ) -> None:
        self.world = world
        self.sigma = check_sigma(sigma, world)
        self.noise_dims = tuple(noise_dims)
        self.reading = check_world_reading(check(reading), world)
        self.n_settings = self.sigma.shape[0]
        self._deterministic = bool((self.sigma == 0).all())

    @classmethod
    def controlled(
        cls, sigma_r, sigma_i, task: Task = TASK_A, reading: Reading = PROJECT
    ) -> NoiseModel:
        """``M(sigma_r, sigma_i)``: ``sigma_r`` in grid cells on ``task.noise_relevant_dims``
        (the paper's dims 0-5 in every task; on their flags ``sigma_r`` itself under
        ``reading.flag_noise="sigma_r"``), ``sigma_i`` in normalized units on the others.
        Floats or length-M sequences.

        Raises:
            ValueError: if any sigma is negative or not finite, or the lengths differ.
        """
        dims = task.noise_relevant_dims
        sigma = _sigma_block(sigma_r, sigma_i, dims, reading, task.world)
        return cls(sigma, dims, reading, task.world)

    def settings(self) -> list[dict]:
        """One dict per setting, for reports: ``sigma_r`` (cells) on ``noise_dims`` and
        ``sigma_i`` on the others where each is uniform, else the whole ``sigma``."""
        s = self.world.state_dim
        per_cell = torch.full((s,), self.world.cell_scale, dtype=torch.float64)
        per_cell[unit_flags(self.noise_dims, self.reading, self.world)] = 1.0
        out = []
        for row in self.sigma.cpu().double():
            rel = row[list(self.noise_dims)] * per_cell[list(self.noise_dims)]
            irr = row[[d for d in range(s) if d not in self.noise_dims]]
            item = {"sigma": [round(float(v), 6) for v in row]}
            if torch.allclose(rel, rel[0].expand_as(rel)) and (irr == irr[0]).all():
                item = {"sigma_r": round(float(rel[0]), 6), "sigma_i": round(float(irr[0]), 6)}
            out.append(item)
        return out

    def _scales(self, n: int, device: torch.device) -> torch.Tensor:
        if n % self.n_settings:
            raise ValueError(
                f"batch of {n} rows does not split into {self.n_settings} equal setting blocks"
            )
        if self.sigma.device != device:
            self.sigma = self.sigma.to(device)
        return self.sigma.unsqueeze(1)

    def noise(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Draw ``(n, S)`` independent noise with the block's scales."""
        scales = self._scales(n, generator.device)
        s = self.world.state_dim
        z = torch.randn(
            (self.n_settings, n // self.n_settings, s),
            generator=generator,
            device=generator.device,
        )
        return (z * scales).reshape(n, s)

    def _finish(self, nxt: torch.Tensor) -> torch.Tensor:
        """A noisy prediction as the reading returns it: clamped to ``[0, 1]`` or not."""
        return nxt.clamp_(0.0, 1.0) if self.reading.clamp else nxt

    def predict(self, state, action, generator):
        """Validated imagined step; Raises ValueError on a malformed state or action."""
        check_state(state, world=self.world)
        check_action(action, state.shape[0], self.world.n_actions)
        nxt = imagined_transition(state, action.long(), generator, self.reading, self.world)
        if not self._deterministic:
            nxt = nxt + self.noise(state.shape[0], generator)
        return self._finish(nxt)


class OracleModel(NoiseModel):
    """The true transition, ``M(0, 0)``: distractors sampled as the environment draws them,
    or, under ``reading.distractors="expected"``, predicted at their expected position.

    Args:
        reading: as in ``NoiseModel`` (only ``distractors``, ``transition``, ``bits`` and
            ``clamp`` act on a noise-free model).
        world: the world the model predicts.
    """

    def __init__(self, reading: Reading = PROJECT, world: World = DEFAULT) -> None:
        super().__init__(torch.zeros(1, world.state_dim), reading=reading, world=world)


class AR1NoiseModel(NoiseModel):
    """Controlled family with AR(1)-correlated noise across imagined steps (paper appendix).

    ``e_t = rho * e_{t-1} + sqrt(1 - rho^2) * sigma * z_t`` with stationary start
    ``e_1 ~ N(0, sigma^2)``, so each step's marginal noise equals ``NoiseModel``'s.

    Args:
        sigma: ``(M, S)`` or ``(S,)`` noise std, normalized units.
        rho: correlation in ``[0, 1)``.
        noise_dims: as in ``NoiseModel``.
        reading: as in ``NoiseModel``.
        world: as in ``NoiseModel``.

    Raises:
        ValueError: on bad ``sigma`` or ``rho`` outside ``[0, 1)``.
    """

    def __init__(
        self,
        sigma: torch.Tensor,
        rho: float = 0.8,
        noise_dims: tuple[int, ...] = TASK_A.noise_relevant_dims,
        reading: Reading = PROJECT,
        world: World = DEFAULT,
    ) -> None:
        super().__init__(sigma, noise_dims, reading, world)
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"rho must lie in [0, 1), got {rho}")
        self.rho = float(rho)
        self._state: torch.Tensor | None = None

    @classmethod
    def controlled(
        cls,
        sigma_r,
        sigma_i,
        rho: float = 0.8,
        task: Task = TASK_A,
        reading: Reading = PROJECT,
    ) -> AR1NoiseModel:
        """AR(1) version of ``M(sigma_r, sigma_i)``; units and dims as in
        ``NoiseModel.controlled``."""
        dims = task.noise_relevant_dims
        sigma = _sigma_block(sigma_r, sigma_i, dims, reading, task.world)
        return cls(sigma, rho, dims, reading, task.world)

    def start_rollout(self, batch, generator):
        self._state = None

    def predict(self, state, action, generator):
        check_state(state, world=self.world)
        check_action(action, state.shape[0], self.world.n_actions)
        nxt = imagined_transition(state, action.long(), generator, self.reading, self.world)
        fresh = self.noise(state.shape[0], generator)
        if self._state is None or self._state.shape[0] != state.shape[0]:
            self._state = fresh
        else:
            self._state = self.rho * self._state + (1.0 - self.rho**2) ** 0.5 * fresh
        return self._finish(nxt + self._state)


def noise_grid(
    sigma_r: Sequence[float],
    sigma_i: Sequence[float],
    task: Task = TASK_A,
    reading: Reading = PROJECT,
) -> NoiseModel:
    """All ``len(sigma_r) * len(sigma_i)`` settings of ``M(sigma_r, sigma_i)`` as one model,
    ``sigma_r``-major (the paper's 8x6 grid, §5.1); dims and reading as in
    ``NoiseModel.controlled``."""
    sr = [r for r in sigma_r for _ in sigma_i]
    si = [i for _ in sigma_r for i in sigma_i]
    return NoiseModel.controlled(sr, si, task, reading)
