"""Prediction-error metrics of any world model (paper §3 "Metrics", §4.1, §5.4, appendix).

Every metric is computed from ``H``-step open-loop rollouts on held-out windows
(``gridplan.data.datasets.eval_windows``): the model starts from the true window start, is driven by
the logged behaviour actions (teacher-forced actions) and is fed its own predictions. With
``sq = (pred - target)^2`` of shape ``(W, H, S)`` in normalized units (``S`` dims of the
task's world, ``gridplan.core.world``; 12 in the default world):

- ``E_tot = mean(sq)`` over windows, steps and all ``S`` dims. The oracle is not 0: ``d1`` and
  ``d2`` are stochastic.
- ``DRPE(w) = sum_j w_j * mean_{W,H}(sq[..., j])`` (Eq. of §4.1) with ``w`` validated and
  normalized to sum 1, so DRPE is a weighted mean of per-dim errors on the same scale as E_tot.
- ``profile = mean_{W,H}(sq)``: ``(S,)``, so ``profile.sum() == S * E_tot``;
  ``step_profile = mean_W(sq)``: ``(H, S)``.
- Event audit (§5.4): one-step, teacher-forced predictions from the TRUE pre-event state on
  every logged key pickup and door opening (e.g. the mean predicted ``carrying`` at pickup).
- ``VPE = mean_{W,H}(V*(pred_t) - V*(target_t))^2`` with the task's exact value table.

Standard DRPE weights (``standard_weights``): ``binary`` and ``graded`` are the paper's
weightings, those of Task A (``paper_task``: dims 0-5, on the task's world), in every task,
so they are comparable
across tasks; a task whose own relevant set differs adds ``task``, its binary weights (Task B:
``c1`` relevant too), which is what separates noise on ``c1`` from noise on ``c2`` (paper §5.3).

Multi-setting models (``model.n_settings = M > 1``): the windows are tiled ``M`` times
setting-major (row ``m * W + i`` is window ``i`` under setting ``m``), rollouts come back as
``(M, W, H, S)`` and ``prediction_metrics`` returns one result per setting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gridplan.core import dynamics, tasks
from gridplan.core.relevance import binary_weights, relevance_weights
from gridplan.core.tasks import TASK_A, Task, check
from gridplan.core.world import DEFAULT
from gridplan.data.datasets import EvalWindows
from gridplan.models.capabilities import capabilities_of
from gridplan.models.contract import check_model_world

#: Names of the built-in DRPE weightings; user weights may not reuse them.
STANDARD_WEIGHTS = ("binary", "graded", "task")
#: The task whose relevance defines the paper's ``binary`` and ``graded`` weightings (§4.1),
#: in the default world (``paper_task`` places it on others).
PAPER_TASK = TASK_A


def paper_task(task: Task) -> Task:
    """Task A on ``task``'s world: the relevance of the paper's weightings there."""
    return tasks.get(PAPER_TASK.name, world=task.world)


def _n_settings(model) -> int:
    m = capabilities_of(model).n_settings
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"model.n_settings must be an integer >= 1, got {m!r}")
    return m


def _check_output(out, rows: int, width: int, what: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"model output {what} must be a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != (rows, width):
        raise ValueError(
            f"model output {what} must have shape ({rows}, {width}), got {tuple(out.shape)}"
        )
    if not torch.isfinite(out).all():
        raise ValueError(f"model output {what} holds non-finite values (NaN or inf)")
    return out


def _default_generator(device: torch.device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(0)


@torch.no_grad()
def _predict_steps(model, start, actions, generator) -> torch.Tensor:
    """Open-loop rollout of ``(N, S)`` starts under ``(N, H)`` actions -> ``(N, H, S)``."""
    n, h = actions.shape
    if capabilities_of(model).rollout_start:
        model.start_rollout(n, generator)
    state, preds = start, []
    for t in range(h):
        out = model.predict(state, actions[:, t], generator)
        state = _check_output(out, n, start.shape[1], f"at step {t + 1}")
        preds.append(state)
    return torch.stack(preds, dim=1)


def rollout_predictions(
    model, windows: EvalWindows, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Open-loop ``H``-step predictions from the window starts under the logged actions.

    One batched rollout of ``M * W`` rows; ``model.start_rollout`` is called once before it.

    Args:
        model: a ``WorldModel`` (or anything with ``predict``; optional ``n_settings``,
            ``start_rollout``).
        windows: held-out windows (validated).
        generator: the model's randomness; default ``Generator(device).manual_seed(0)``,
            so models evaluated one by one share common random numbers.

    Returns:
        ``(W, H, S)`` predictions ``s_hat_1 .. s_hat_H`` for an ordinary model, or
        ``(M, W, H, S)`` for a model with ``n_settings = M > 1``.

    Raises:
        ValueError: on malformed windows, or a model output of the wrong shape or non-finite.
    """
    windows.check()
    m = _n_settings(model)
    if generator is None:
        generator = _default_generator(windows.start.device)
    start = windows.start.repeat(m, 1)
    actions = windows.actions.long().repeat(m, 1)
    pred = _predict_steps(model, start, actions, generator)
    if m == 1:
        return pred
    return pred.view(m, len(windows), windows.horizon, windows.start.shape[1])


def squared_errors(pred: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Element-wise squared errors ``(pred - targets)^2``.

    Args:
        pred: ``(..., W, H, S)`` predictions (leading setting dims allowed).
        targets: ``(W, H, S)`` true states.

    Returns:
        Tensor shaped like ``pred``.

    Raises:
        ValueError: if the trailing shapes differ.
    """
    if tuple(pred.shape[-targets.dim() :]) != tuple(targets.shape):
        raise ValueError(
            f"predictions {tuple(pred.shape)} do not match targets {tuple(targets.shape)}"
        )
    return (pred.float() - targets.float()).square()


def _check_sq(sq: torch.Tensor) -> torch.Tensor:
    if not isinstance(sq, torch.Tensor) or sq.dim() < 2:
        shape = tuple(sq.shape) if isinstance(sq, torch.Tensor) else type(sq).__name__
        raise ValueError(f"squared errors must have shape (..., H, S), got {shape}")
    if sq.numel() == 0:
        raise ValueError("squared errors are empty")
    return sq


def profile(sq: torch.Tensor) -> torch.Tensor:
    """Per-dimension error profile: ``(S,)`` mean over all leading dims (windows, steps)."""
    sq = _check_sq(sq)
    return sq.reshape(-1, sq.shape[-1]).mean(dim=0)


def step_profile(sq: torch.Tensor) -> torch.Tensor:
    """Per-step, per-dimension profile ``(H, S)``: mean over the windows of ``(W, H, S)``."""
    sq = _check_sq(sq)
    return sq.reshape(-1, *sq.shape[-2:]).mean(dim=0)


def e_tot(sq: torch.Tensor) -> float:
    """Total prediction error: mean of ``(W, H, S)`` squared errors over everything."""
    return float(_check_sq(sq).mean())


def check_weights(weights, name: str = "weights", width: int = DEFAULT.state_dim) -> torch.Tensor:
    """Validate DRPE weights and normalize them to sum 1.

    Args:
        weights: ``(S,)`` finite, non-negative, not all zero (tensor or sequence).
        name: what to call them in error messages.
        width: ``S``, the world's state width.

    Returns:
        ``(S,)`` float32 weights summing to 1.

    Raises:
        ValueError: on a wrong length, non-finite or negative entries, or all zeros.
    """
    try:
        w = torch.as_tensor(weights, dtype=torch.float32).detach().cpu()
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a sequence of {width} numbers: {err}") from err
    if w.shape != (width,):
        raise ValueError(f"{name} must have shape ({width},), got {tuple(w.shape)}")
    if not torch.isfinite(w).all():
        raise ValueError(f"{name} must be finite, got {w.tolist()}")
    if (w < 0).any():
        raise ValueError(f"{name} must be non-negative, got minimum {float(w.min())}")
    if w.sum() <= 0:
        raise ValueError(f"{name} must not be all zero")
    return w / w.sum()


def drpe(sq: torch.Tensor, weights) -> float:
    """Decision-relevant prediction error ``sum_j w_j * profile_j`` (paper §4.1).

    Args:
        sq: ``(W, H, S)`` squared errors.
        weights: ``(S,)`` relevance weights; validated and normalized to sum 1.

    Raises:
        ValueError: on malformed errors or weights.
    """
    w = check_weights(weights, width=_check_sq(sq).shape[-1])
    return float((profile(sq).cpu() * w).sum())


def standard_weights(task: Task = TASK_A) -> dict[str, torch.Tensor]:
    """The built-in DRPE weightings: ``binary`` and ``graded`` of Task A (``paper_task``) in
    every task, plus ``task`` (``binary_weights(task)``) when the task's relevant set differs
    from the paper's (Task B: ``c1`` included).

    Raises:
        TypeError: if ``task`` is not a ``Task``.
    """
    paper = paper_task(check(task))
    out = {"binary": binary_weights(paper), "graded": relevance_weights(paper)}
    if set(task.relevant_dims) != set(paper.relevant_dims):
        out["task"] = binary_weights(task)
    return out


@torch.no_grad()
def event_audit(
    model, windows: EvalWindows, generator: torch.Generator | None = None
) -> list[dict[str, float | int]]:
    """Errors at decision-critical events, per model setting (paper §5.4).

    For every logged key pickup and door opening in the windows, the model predicts one step
    from the TRUE pre-event state (``windows.prev``) under the logged action, in one batch
    (``M`` settings tiled setting-major).

    Args:
        model: a ``WorldModel``.
        windows: held-out windows (validated).
        generator: the model's randomness; default ``Generator(device).manual_seed(0)``.

    Returns:
        One dict per setting with ``n_pickup``, ``n_door``; ``carrying_at_pickup`` (mean
        predicted ``carrying`` where the true step picks the key up; truth is 1),
        ``pickup_mse`` (squared error of ``carrying`` there), ``door_open_at_opening`` and
        ``door_mse`` (the same for ``door_open`` at door openings), ``pickup_state_mse`` and
        ``door_state_mse`` (mean over all ``S`` dims), and ``event_mse`` (the event flag's squared
        error over both kinds of event). Values are NaN where there is no such event.

    Raises:
        ValueError: on malformed windows, or a model output of the wrong shape or non-finite.
    """
    windows.check()
    m = _n_settings(model)
    if generator is None:
        generator = _default_generator(windows.start.device)
    pick, door = windows.pickup, windows.door_opened
    prev = torch.cat([windows.prev[pick], windows.prev[door]])
    act = torch.cat([windows.actions[pick], windows.actions[door]]).long()
    target = torch.cat([windows.targets[pick], windows.targets[door]])
    n_pick, n_door = int(pick.sum()), int(door.sum())
    nan = float("nan")
    width = prev.shape[1]
    if n_pick + n_door == 0:
        pred = torch.empty(m, 0, width, device=prev.device)
    else:
        pred = _predict_steps(model, prev.repeat(m, 1), act.repeat(m).unsqueeze(1), generator)
        pred = pred.view(m, n_pick + n_door, width)
    sq = (pred - target).square()
    results = []
    world = windows.world
    carrying, door = world.carrying_dim, world.door_dim
    for k in range(m):
        p_pick, p_door = pred[k, :n_pick], pred[k, n_pick:]
        s_pick, s_door = sq[k, :n_pick], sq[k, n_pick:]
        flag_err = torch.cat([s_pick[:, carrying], s_door[:, door]])

        def mean(x: torch.Tensor) -> float:
            return float(x.mean()) if x.numel() else nan

        results.append(
            {
                "n_pickup": n_pick,
                "n_door": n_door,
                "carrying_at_pickup": mean(p_pick[:, carrying]),
                "pickup_mse": mean(s_pick[:, carrying]),
                "pickup_state_mse": mean(s_pick),
                "door_open_at_opening": mean(world.door_openness(p_door)),
                "door_mse": mean(s_door[:, door]),
                "door_state_mse": mean(s_door),
                "event_mse": mean(flag_err),
            }
        )
    return results


def _json_float(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


@dataclass
class PredictionMetrics:
    """All prediction-error metrics of one model setting on one set of windows.

    Attributes:
        E_tot: mean squared error over windows, ``H`` steps and ``S`` dims (normalized units).
        DRPE: weighting name -> DRPE: ``binary``, ``graded`` (dims 0-5), ``task`` where the
            task's relevant set differs (Task B), plus user weightings by name.
        profile: ``(S,)`` per-dimension mean squared error (sums to ``S * E_tot``).
        step_profile: ``(H, S)`` per-step, per-dimension mean squared error.
        event_audit: see ``event_audit``.
        VPE: mean squared V* error of the predicted states.
        horizon: ``H``.
        n_windows: ``W``.
        window_profile: ``(W, S)`` per-window, per-dimension mean squared error over the
            ``H`` steps (the units that paired comparisons and profile intervals resample);
            not serialized.
        dim_names: the world's dim names (``profile``'s keys in ``to_dict``).
    """

    E_tot: float
    DRPE: dict[str, float]
    profile: torch.Tensor
    step_profile: torch.Tensor
    event_audit: dict[str, float | int]
    VPE: float
    horizon: int
    n_windows: int
    window_profile: torch.Tensor | None = None
    dim_names: tuple[str, ...] = DEFAULT.dim_names

    def to_dict(self) -> dict:
        """JSON-serializable dict: ``profile`` as ``{dim_name: value}``, ``step_profile`` as
        a list of ``H`` lists of ``S``, NaN event values as ``None``."""
        audit = {
            k: (v if isinstance(v, int) else _json_float(v)) for k, v in self.event_audit.items()
        }
        return {
            "E_tot": float(self.E_tot),
            "DRPE": {k: float(v) for k, v in self.DRPE.items()},
            "profile": dict(zip(self.dim_names, self.profile.tolist(), strict=True)),
            "step_profile": [[float(v) for v in row] for row in self.step_profile.tolist()],
            "event_audit": audit,
            "VPE": float(self.VPE),
            "horizon": int(self.horizon),
            "n_windows": int(self.n_windows),
        }


def prediction_metrics(
    model,
    windows: EvalWindows,
    task: Task = TASK_A,
    weights: dict[str, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> list[PredictionMetrics]:
    """E_tot, DRPE, profiles, event audit and VPE of every setting of ``model``.

    Args:
        model: a ``WorldModel`` with ``M = n_settings`` (1 for ordinary models).
        windows: held-out windows, ``W`` of ``H`` steps (``gridplan.data.datasets.eval_windows``).
        task: the standard weightings (``standard_weights``) and the V* table of the VPE.
        weights: extra DRPE weightings by name, each ``(S,)`` (normalized to sum 1).
        generator: the model's randomness; default ``Generator(device).manual_seed(0)``,
            giving models evaluated one by one common random numbers.

    Returns:
        ``M`` PredictionMetrics, setting order.

    Raises:
        ValueError: on malformed windows, bad weights (wrong length, negative, non-finite,
            all zero, or a built-in name), a model output of the wrong shape or non-finite
            (the message names the model output), or windows or a model of another world
            than the task's.
        TypeError: if ``task`` is not a ``Task``.
    """
    windows.check()
    world = check(task).world
    if windows.world != world:
        raise ValueError(
            f"the windows were logged in world {windows.world.name!r}, the task is played "
            f"in {world.name!r}"
        )
    check_model_world(model, world)
    all_weights = standard_weights(task)
    for name, w in (weights or {}).items():
        if name in STANDARD_WEIGHTS:
            raise ValueError(f"user weights may not be called {name!r} (a built-in weighting)")
        all_weights[name] = w
    width = world.state_dim
    all_weights = {
        k: check_weights(w, f"weights {k!r}", width) for k, w in all_weights.items()
    }
    device = windows.start.device
    if generator is None:
        generator = _default_generator(device)
    m = _n_settings(model)
    pred = rollout_predictions(model, windows, generator).reshape(
        m, len(windows), windows.horizon, width
    )
    sq = squared_errors(pred, windows.targets)
    table = dynamics.value_table(task, device)
    v_pred = table.lookup(pred.reshape(-1, width)).view(m, -1)
    v_true = table.lookup(windows.targets.reshape(-1, width)).view(1, -1)
    vpe = (v_pred - v_true).square().mean(dim=1)
    audits = event_audit(model, windows, generator)
    out = []
    for k in range(m):
        prof = profile(sq[k]).cpu()
        out.append(
            PredictionMetrics(
                E_tot=e_tot(sq[k]),
                DRPE={name: float((prof * w).sum()) for name, w in all_weights.items()},
                profile=prof,
                step_profile=step_profile(sq[k]).cpu(),
                event_audit=audits[k],
                VPE=float(vpe[k]),
                horizon=windows.horizon,
                n_windows=len(windows),
                window_profile=sq[k].mean(dim=1).cpu(),
                dim_names=world.dim_names,
            )
        )
    return out
