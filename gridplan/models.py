"""World-model interface, the oracle and the controlled noise family M(sigma_r, sigma_i).

Paper §4.2. Every model is one imagined step
``predict(state (N, 12), action (N,), generator) -> (N, 12)``; every metric uses only this,
plus ``start_rollout`` before each imagined rollout (models with memory across imagined
steps, such as AR(1) noise, reset it there). The planner asks the model for its leaf scorer
(``leaf_scorer``, ``gridplan.scorers``): by default the generic one, through ``predict``;
the noise family declares ``gridplan.fused.FusedNoiseScorer``, the same arithmetic on the
decision-relevant dims only. A subclass of ``NoiseModel`` is scored through its ``predict``
unless it declares ``leaf_scorer`` itself, so changing ``predict`` never leaves a stale fast
path behind.

Several noise settings can share one batch: a model built from ``M`` settings treats the
``N`` rows as ``M`` equal contiguous blocks, block ``m`` belonging to setting ``m``. The
planner and the metrics keep rows of one episode or window inside its block, so a batch laid
out setting-major (``B = M * b``) evaluates all ``M`` models at once.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import torch

from gridplan.constants import CELL_SCALE, STATE_DIM
from gridplan.env import check_action, check_state, transition
from gridplan.fused import FusedNoiseScorer
from gridplan.scorers import DEFAULT_MAX_MEMORY, GenericScorer, LeafScorer
from gridplan.tasks import TASK_A, Task


class WorldModel(abc.ABC):
    """A one-step world model. Subclass it (or duck-type ``predict``) to plug a model in."""

    #: Number of settings sharing a batch (rows are split into this many contiguous blocks).
    n_settings: int = 1

    @abc.abstractmethod
    def predict(
        self, state: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        """One imagined step.

        Args:
            state: ``(N, 12)`` float, normalized ``[0, 1]`` (possibly the model's own output).
            action: ``(N,)`` long in ``0..3``.
            generator: the only source of randomness a stochastic model may use.

        Returns:
            ``(N, 12)`` predicted next states.
        """

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:  # noqa: B027
        """Called before each imagined rollout of ``batch`` rows; stateless models ignore it."""

    def leaf_scorer(
        self,
        task: Task,
        depth: int,
        device: torch.device | str = "cpu",
        max_memory: int = DEFAULT_MAX_MEMORY,
        max_rows: int | None = None,
    ) -> LeafScorer:
        """The scorer the planner's search uses for this model (``gridplan.scorers``).

        The default rolls every leaf through ``predict`` (``GenericScorer``); a model that can
        score leaves faster, with the same decisions, returns its own ``LeafScorer``.

        Args:
            task: reward and V* of the leaf scores.
            depth: search depth ``D >= 1``.
            device: where the V* table (and any buffers) live.
            max_memory: bytes for the leaf tensors of one chunk.
            max_rows: optional hard cap on leaf rows per chunk.
        """
        return GenericScorer(self, task, depth, device, max_memory, max_rows)


def _sigma_block(sigma_r, sigma_i, dims: tuple[int, ...]) -> torch.Tensor:
    """``(M, 12)`` per-dimension noise scales (normalized units) from sigma_r (grid cells) on
    ``dims`` and sigma_i (normalized units) on the others, each a float or a length-M
    sequence."""
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
    sigma = si.unsqueeze(1).repeat(1, STATE_DIM)
    sigma[:, list(dims)] = (sr / CELL_SCALE).unsqueeze(1)
    return sigma


def check_sigma(sigma: torch.Tensor) -> torch.Tensor:
    """Validate ``(M, 12)`` noise scales. Raises ValueError if negative, non-finite or misshapen."""
    sigma = torch.as_tensor(sigma, dtype=torch.float32)
    if sigma.dim() == 1:
        sigma = sigma.unsqueeze(0)
    if sigma.dim() != 2 or sigma.shape[1] != STATE_DIM or sigma.shape[0] < 1:
        raise ValueError(f"sigma must have shape (M, {STATE_DIM}), got {tuple(sigma.shape)}")
    if not torch.isfinite(sigma).all():
        raise ValueError("sigma must be finite")
    if (sigma < 0).any():
        raise ValueError(f"sigma must be non-negative, got minimum {float(sigma.min())}")
    return sigma


class NoiseModel(WorldModel):
    """The controlled family (paper §4.2): the true transition applied to the belief state,
    then independent Gaussian noise, clamped to ``[0, 1]``. Noise compounds because the next
    imagined step reads the noisy state through rounded cells and thresholded flags.

    Args:
        sigma: ``(M, 12)`` or ``(12,)`` per-dimension noise std, normalized units.
            Use ``NoiseModel.controlled`` for the paper's ``M(sigma_r, sigma_i)``.
        noise_dims: the dims ``settings`` reports as ``sigma_r`` (the rest as ``sigma_i``).

    Raises:
        ValueError: if ``sigma`` is negative, non-finite or of the wrong shape.
    """

    def __init__(
        self, sigma: torch.Tensor, noise_dims: tuple[int, ...] = TASK_A.noise_relevant_dims
    ) -> None:
        self.sigma = check_sigma(sigma)
        self.noise_dims = tuple(noise_dims)
        self.n_settings = self.sigma.shape[0]
        self._deterministic = bool((self.sigma == 0).all())

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # The fused scorer re-derives this family's predict; a subclass opts in explicitly.
        if "leaf_scorer" not in cls.__dict__:
            cls.leaf_scorer = WorldModel.leaf_scorer

    @classmethod
    def controlled(cls, sigma_r, sigma_i, task: Task = TASK_A) -> NoiseModel:
        """``M(sigma_r, sigma_i)``: ``sigma_r`` in grid cells on ``task.noise_relevant_dims``
        (the paper's dims 0-5 in every task), ``sigma_i`` in normalized units on the others.
        Floats or length-M sequences.

        Raises:
            ValueError: if any sigma is negative or not finite, or the lengths differ.
        """
        dims = task.noise_relevant_dims
        return cls(_sigma_block(sigma_r, sigma_i, dims), noise_dims=dims)

    def leaf_scorer(self, task, depth, device="cpu", max_memory=DEFAULT_MAX_MEMORY, max_rows=None):
        """``FusedNoiseScorer`` with this model's sigma (see ``WorldModel.leaf_scorer``)."""
        return FusedNoiseScorer(self.sigma, None, task, depth, device, max_memory, max_rows)

    def settings(self) -> list[dict]:
        """One dict per setting, for reports: ``sigma_r`` (cells) on ``noise_dims`` and
        ``sigma_i`` on the others where each is uniform, else the whole ``sigma``."""
        out = []
        for row in self.sigma:
            rel = row[list(self.noise_dims)]
            irr = row[[d for d in range(STATE_DIM) if d not in self.noise_dims]]
            item = {"sigma": [round(float(v), 6) for v in row]}
            if (rel == rel[0]).all() and (irr == irr[0]).all():
                item = {
                    "sigma_r": round(float(rel[0]) * CELL_SCALE, 6),
                    "sigma_i": round(float(irr[0]), 6),
                }
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
        """Draw ``(n, 12)`` independent noise with the block's scales."""
        scales = self._scales(n, generator.device)
        z = torch.randn(
            (self.n_settings, n // self.n_settings, STATE_DIM),
            generator=generator,
            device=generator.device,
        )
        return (z * scales).reshape(n, STATE_DIM)

    def predict(self, state, action, generator):
        """Validated imagined step; Raises ValueError on a malformed state or action."""
        check_state(state)
        check_action(action, state.shape[0])
        nxt = transition(state, action.long(), generator)[0]
        if self._deterministic:
            return nxt
        return (nxt + self.noise(state.shape[0], generator)).clamp_(0.0, 1.0)


class OracleModel(NoiseModel):
    """The true transition (stochastic distractors included): ``M(0, 0)``."""

    leaf_scorer = NoiseModel.leaf_scorer

    def __init__(self) -> None:
        super().__init__(torch.zeros(1, STATE_DIM))


class AR1NoiseModel(NoiseModel):
    """Controlled family with AR(1)-correlated noise across imagined steps (paper appendix).

    ``e_t = rho * e_{t-1} + sqrt(1 - rho^2) * sigma * z_t`` with stationary start
    ``e_1 ~ N(0, sigma^2)``, so each step's marginal noise equals ``NoiseModel``'s.

    Args:
        sigma: ``(M, 12)`` or ``(12,)`` noise std, normalized units.
        rho: correlation in ``[0, 1)``.
        noise_dims: as in ``NoiseModel``.

    Raises:
        ValueError: on bad ``sigma`` or ``rho`` outside ``[0, 1)``.
    """

    def __init__(
        self,
        sigma: torch.Tensor,
        rho: float = 0.8,
        noise_dims: tuple[int, ...] = TASK_A.noise_relevant_dims,
    ) -> None:
        super().__init__(sigma, noise_dims)
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"rho must lie in [0, 1), got {rho}")
        self.rho = float(rho)
        self._state: torch.Tensor | None = None

    @classmethod
    def controlled(cls, sigma_r, sigma_i, rho: float = 0.8, task: Task = TASK_A) -> AR1NoiseModel:
        """AR(1) version of ``M(sigma_r, sigma_i)``; units and dims as in
        ``NoiseModel.controlled``."""
        dims = task.noise_relevant_dims
        return cls(_sigma_block(sigma_r, sigma_i, dims), rho, noise_dims=dims)

    def leaf_scorer(self, task, depth, device="cpu", max_memory=DEFAULT_MAX_MEMORY, max_rows=None):
        """``FusedNoiseScorer`` with this model's sigma and ``rho``."""
        return FusedNoiseScorer(self.sigma, self.rho, task, depth, device, max_memory, max_rows)

    def start_rollout(self, batch, generator):
        self._state = None

    def predict(self, state, action, generator):
        check_state(state)
        check_action(action, state.shape[0])
        nxt = transition(state, action.long(), generator)[0]
        fresh = self.noise(state.shape[0], generator)
        if self._state is None or self._state.shape[0] != state.shape[0]:
            self._state = fresh
        else:
            self._state = self.rho * self._state + (1.0 - self.rho**2) ** 0.5 * fresh
        return (nxt + self._state).clamp_(0.0, 1.0)


def noise_grid(
    sigma_r: Sequence[float], sigma_i: Sequence[float], task: Task = TASK_A
) -> NoiseModel:
    """All ``len(sigma_r) * len(sigma_i)`` settings of ``M(sigma_r, sigma_i)`` as one model,
    ``sigma_r``-major (the paper's 8x6 grid, §5.1); dims as in ``NoiseModel.controlled``."""
    sr = [r for r in sigma_r for _ in sigma_i]
    si = [i for _ in sigma_r for i in sigma_i]
    return NoiseModel.controlled(sr, si, task)
