"""Planners by name: the one place that maps ``--planner NAME`` and its settings to a planner
object (paper §3 "Planner"; the paper's limitation that its exact-V* search "may weight errors
differently" from other planners).

``PLANNERS``:

* ``"search"``: the paper's full-width depth-``D`` search with exact V* at the leaves
  (``gridplan.planning.planner.Planner``, unchanged: every existing number is its);
* ``"search-learned-v"``: the same search with a learned value at the leaves
  (``gridplan.planning.value_search``; the value, a ``LearnedValue``, is passed in);
* ``"search-no-heuristic"``: the same search with no terminal value (depth-limited return);
* ``"cem"``, ``"mppi"``: sampling MPC over action sequences (``gridplan.planning.cem``,
  ``gridplan.planning.mppi``), with terminal value ``value`` = ``"exact"`` (V*),
  ``"learned"`` or ``"none"``;
* ``"mcts"``: a batched PUCT tree search with a uniform prior (``gridplan.planning.mcts``),
  ``budget`` simulations per decision, ``parallel`` of them per round, the same terminal
  values.

Every planner offers ``act(root, generator) -> (B,)``, ``plan(root, generator) -> Plan``
(except ``"search"``, whose decisions the ladder measures through
``gridplan.evaluation.decisions.decide``), ``model`` and ``task``, and runs in the closed loop
(``gridplan.planning.closed_loop.run_closed_loop``). Every planner plans over the task's
``task.world.n_actions`` actions (4 in the paper's world, 7 in MiniGrid DoorKey's,
``gridplan.core.tasks.TaskKind``), and a learned value is fitted over the same actions.

Settings (``planner_settings``; ``SETTINGS`` holds the defaults): ``horizon`` (default: the
depth ``D``), ``candidates``, ``elites``, ``iterations``, ``value`` for CEM and MPPI, and
``temperature`` for MPPI; ``budget``, ``exploration``, ``parallel`` and ``value`` for MCTS.
In the paper's world the defaults match the search's compute at ``D = 4``: 4 rounds x 64
candidates x 4 steps = 1,024 predictions per decision, the ``4^4 * 4`` of its independent
leaves (MCTS: 256 simulations x 4 children in 5 rounds of 1, 4, 16, 64 and 171 with exact V*;
rounds of at most 16 with a learned or no terminal value, ``MCTS_PARALLEL``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gridplan.core.tasks import TaskKind
from gridplan.planning.cem import CrossEntropyPlanner
from gridplan.planning.learned_value import VALUE_KINDS, ZeroValue, terminal_value
from gridplan.planning.mcts import TreeSearchPlanner
from gridplan.planning.mppi import PathIntegralPlanner
from gridplan.planning.planner import Planner
from gridplan.planning.value_search import ValueSearchPlanner

#: Planner names accepted by ``make_planner`` and ``python -m eval --planner``.
PLANNERS: tuple[str, ...] = (
    "search",
    "search-learned-v",
    "search-no-heuristic",
    "cem",
    "mppi",
    "mcts",
)

_SAMPLING = {"horizon": None, "candidates": 64, "elites": 8, "iterations": 4, "value": "exact"}

#: Each planner's settings and their defaults (``None``: the depth).
SETTINGS: dict[str, dict[str, object]] = {
    "search": {},
    "search-learned-v": {},
    "search-no-heuristic": {},
    "cem": dict(_SAMPLING),
    "mppi": {**_SAMPLING, "temperature": 10.0},
    "mcts": {"budget": 256, "exploration": 1.0, "parallel": None, "value": "exact"},
}
#: MCTS's simulations per round unless ``parallel`` says: wide rounds with exact V* (as good
#: decisions as one at a time, docs/PERFORMANCE.md §17), narrow ones with a learned or no
#: terminal value, whose errors wide rounds follow further before the backups correct them.
MCTS_PARALLEL = {"exact": 256, "learned": 16, "none": 16}

_INTS = ("horizon", "candidates", "elites", "iterations", "budget", "parallel")


def check_planner(name: str) -> str:
    """``name`` if it is one of ``PLANNERS``.

    Raises:
        ValueError: on an unknown planner; the message lists the known ones.
    """
    if name not in PLANNERS:
        raise ValueError(f"unknown planner {name!r}; choose one of {', '.join(PLANNERS)}")
    return name


def _convert(name: str, key: str, raw):
    if key in _INTS:
        if isinstance(raw, str):
            try:
                raw = int(raw)
            except ValueError:
                raise ValueError(f"planner {name}: {key} must be an integer, got {raw!r}") from None
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError(f"planner {name}: {key} must be an integer, got {raw!r}")
        return raw
    if key in ("temperature", "exploration"):
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"planner {name}: {key} must be a number, got {raw!r}") from None
    if raw not in VALUE_KINDS:
        raise ValueError(
            f"planner {name}: value must be one of {', '.join(VALUE_KINDS)}, got {raw!r}"
        )
    return raw


def planner_settings(name: str, depth: int, settings: Mapping[str, object] | None = None) -> dict:
    """The complete settings of planner ``name``: ``settings`` over the defaults, converted
    (CLI strings accepted) and range-checked; ``horizon`` defaults to ``depth``.

    Raises:
        ValueError: on an unknown planner, an unknown setting, or a value of the wrong type
            or out of range (``horizon``, ``iterations`` >= 1; ``candidates`` >= 2;
            ``2 <= elites <= candidates``; ``budget``, ``parallel`` >= 1; ``temperature`` and
            ``exploration`` finite and > 0; ``value`` one of
            ``VALUE_KINDS``).
    """
    check_planner(name)
    known = SETTINGS[name]
    given = dict(settings or {})
    unknown = sorted(set(given) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise ValueError(
            f"planner {name} has no setting {', '.join(unknown)} (settings: {allowed})"
        )
    out = {
        key: _convert(name, key, given[key]) if key in given else default
        for key, default in known.items()
    }
    if "horizon" in out and out["horizon"] is None:
        out["horizon"] = depth
    if "parallel" in out and out["parallel"] is None:
        out["parallel"] = MCTS_PARALLEL[out["value"]]
    for key, low in (
        ("horizon", 1),
        ("iterations", 1),
        ("candidates", 2),
        ("elites", 2),
        ("budget", 1),
        ("parallel", 1),
    ):
        if key in out and out[key] < low:
            raise ValueError(f"planner {name}: {key} must be >= {low}, got {out[key]}")
    if "elites" in out and out["elites"] > out["candidates"]:
        raise ValueError(
            f"planner {name}: elites ({out['elites']}) must not exceed candidates "
            f"({out['candidates']})"
        )
    for key in ("temperature", "exploration"):
        if key in out and not (0 < out[key] < float("inf")):
            raise ValueError(f"planner {name}: {key} must be finite and > 0, got {out[key]}")
    return out


def needs_learned_value(name: str, settings: Mapping[str, object] | None = None) -> bool:
    """Whether planner ``name`` with ``settings`` plans with a learned value."""
    return name == "search-learned-v" or dict(settings or {}).get("value") == "learned"


def make_planner(
    name: str,
    model,
    task: TaskKind,
    depth: int,
    settings: Mapping[str, object] | None = None,
    learned=None,
    device: torch.device | str = "cpu",
    ties: str | None = None,
    tree: str | None = None,
):
    """Planner ``name`` for ``model`` on ``task`` (module docstring).

    Args:
        name: one of ``PLANNERS``.
        model: any world model.
        task: the task planned.
        depth: the search depth ``D`` (the sampling planners' default horizon).
        settings: the planner's settings (``planner_settings``).
        learned: the ``LearnedValue`` of ``"search-learned-v"`` or ``value="learned"``.
        device: where the terminal value lives.
        ties: the tie rule of the full-width searches (``gridplan.planning.planner.TIES``;
            None: the model's reading's); the sampling planners have no tied first actions
            to break (they commit to one sampled sequence).
        tree: the full-width searches' law of a stochastic model's draws
            (``gridplan.planning.registry.TREES``; None: the model's reading's).

    Returns:
        The planner; ``"search"`` is the plain ``Planner(model, depth, task, device=device)``.

    Raises:
        ValueError: as ``planner_settings``; if a learned value is needed and missing, or was
            fitted for another world or task; as the planner's constructor.
    """
    full = planner_settings(name, depth, settings)
    if name == "search":
        return Planner(model, depth, task, device=device, ties=ties, tree=tree)
    if name in ("search-learned-v", "search-no-heuristic"):
        value = (
            terminal_value("learned", task, device, learned)
            if name == "search-learned-v"
            else ZeroValue(task, device)
        )
        return ValueSearchPlanner(
            model, depth, task, value, device=device, tree=tree, name=name, ties=ties
        )
    value = terminal_value(full.pop("value"), task, device, learned)
    if name == "mcts":
        return TreeSearchPlanner(
            model, task, value, full["budget"], full["exploration"], full["parallel"]
        )
    cls = CrossEntropyPlanner if name == "cem" else PathIntegralPlanner
    return cls(model, task, value, **full)
