"""Shared runner of the paper-reproduction groups (paper §5; SPEC §7; issue 5).

A group is one function ``run(ctx: GroupContext) -> Report`` plus its configs per profile
(``full`` = the paper's protocol, ``quick`` = minutes on 2 CPU cores, ``tiny`` = seconds, for
tests), registered as a ``Group`` in ``gridplan.experiments.GROUPS``. ``run_groups``:

- writes group ``g`` into a private temp folder ``<out>/.g.tmp-<pid>`` and renames it to
  ``<out>/g`` only after ``table.md`` and, last, ``done.json`` are written: an interrupted run
  loses no finished group and leaves no half-written one (stale temp folders of dead
  processes are removed at the next run);
- skips a group whose ``<out>/g/done.json`` exists unless ``force``; with ``force`` the old
  folder is swapped out only once the new one is complete;
- runs a group after the selected groups it ``reads`` (e2 after e1 and e3) and records in
  ``done.json`` which finished inputs it used (their ``run_id``), so a later run can say
  that a skipped group's inputs have changed since.

Every group folder holds ``results.json`` (every number), CSVs, ``table.md`` (ours beside the
paper's, with verdicts), PNG figures (Matplotlib, Agg, no pyplot state) and ``done.json``.

Model records, the exchange format between groups (``models.json`` + ``models.csv``, written
by ``write_models``, read by ``read_models``): one dict per model with at least
``RECORD_KEYS`` = name, family (``"controlled"`` for the noise grid, ``"learned"`` for the
seven learned variants that e2 pools), ``E_tot``, ``DRPE_graded``, ``DRPE_binary``,
``success``, ``success_se``, ``n_episodes``; groups may add keys (sigmas, VPE, ...).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import platform
import shutil
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from tqdm.auto import tqdm

import gridplan
from gridplan import tasks
from gridplan.closed_loop import OUTCOMES, EpisodeResults, evaluate
from gridplan.constants import AGENT_X, AGENT_Y, CELL_SCALE, DOOR_CELL, GRID_SIZE, WALL_X
from gridplan.data import EvalWindows, eval_windows
from gridplan.stats import SpearmanResult, mean_se

PROFILES = ("full", "quick", "tiny")
DONE_FILE = "done.json"
TABLE_FILE = "table.md"
RESULTS_FILE = "results.json"
MODELS_FILE = "models.json"
RECORD_KEYS = (
    "name",
    "family",
    "E_tot",
    "DRPE_graded",
    "DRPE_binary",
    "success",
    "success_se",
    "n_episodes",
)


# --------------------------------------------------------------------------- formatting


def fmt(x, digits: int = 3) -> str:
    """A number for a markdown cell; ``None``/NaN print as ``n/a``."""
    if x is None:
        return "n/a"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "n/a"
    return f"{x:.{digits}f}"


def fmt_se(mean, se, digits: int = 2) -> str:
    """``mean ± se`` (the paper's style for success rates)."""
    if se is None or (isinstance(se, float) and math.isnan(se)):
        return fmt(mean, digits)
    return f"{fmt(mean, digits)} ± {fmt(se, digits)}"


def fmt_rho(result: SpearmanResult | Mapping | None, digits: int = 2) -> str:
    """Spearman ρ with its bootstrap CI: ``-0.97 [-0.99, -0.93]``."""
    if result is None:
        return "n/a"
    if isinstance(result, Mapping):
        rho, low, high = result.get("rho"), result.get("low"), result.get("high")
    else:
        rho, low, high = result.rho, result.low, result.high
    if rho is None or (isinstance(rho, float) and math.isnan(rho)):
        return "n/a"
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return fmt(rho, digits)
    return f"{fmt(rho, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


def model_name(sigma_r: float, sigma_i: float) -> str:
    """The paper's name of a controlled model, ``M(0.35, 0.1)``."""
    return f"M({float(sigma_r):g}, {float(sigma_i):g})"


def md_table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A GitHub markdown table; cells are converted with ``str``."""
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, the table {len(headers)} columns")
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines)


def to_jsonable(obj):
    """Convert tensors, arrays, dataclasses, paths and NaN/inf floats (-> None) for JSON."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, torch.Tensor):
        return to_jsonable(obj.detach().cpu().tolist())
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


# --------------------------------------------------------------------------- reports


@dataclass
class Verdict:
    """Whether one effect of the paper reproduces.

    Attributes:
        claim: the paper's effect in words, with its source.
        reproduced: True/False, or None when it could not be checked (an input is missing).
        detail: our numbers beside the paper's, and the criterion used.
    """

    claim: str
    reproduced: bool | None
    detail: str

    @property
    def label(self) -> str:
        """``reproduces``, ``does not reproduce`` or ``not checked``."""
        return {True: "reproduces", False: "does not reproduce", None: "not checked"}[
            self.reproduced
        ]

    def line(self) -> str:
        """One markdown bullet."""
        return f"- **{self.label}** — {self.claim}. {self.detail}"


class Report:
    """The markdown report (``table.md``) of one group: verdicts first, then tables.

    Args:
        title: heading, e.g. ``"E1 — controlled 8×6 grid (paper §5.1, Fig. 2, Table 2)"``.
    """

    def __init__(self, title: str) -> None:
        self.title = title
        self.verdicts: list[Verdict] = []
        self.blocks: list[str] = []

    def verdict(self, claim: str, reproduced: bool | None, detail: str) -> Verdict:
        """Add a verdict; ``reproduced`` None means it could not be checked."""
        v = Verdict(claim, None if reproduced is None else bool(reproduced), detail)
        self.verdicts.append(v)
        return v

    def table(self, title: str, headers: Sequence[str], rows, note: str = "") -> None:
        """Add a titled markdown table and an optional note below it."""
        block = f"### {title}\n\n{md_table(headers, rows)}"
        if note:
            block += f"\n\n{note}"
        self.blocks.append(block)

    def text(self, markdown: str) -> None:
        """Add a paragraph."""
        self.blocks.append(markdown)

    def figure(self, filename: str, caption: str) -> None:
        """Reference a PNG written into the group folder."""
        self.blocks.append(f"![{caption}]({filename})\n\n*{caption}*")

    def overall(self) -> str:
        """The one-line verdict over all checked effects."""
        checked = [v for v in self.verdicts if v.reproduced is not None]
        ok = sum(v.reproduced for v in checked)
        if not checked:
            word = "not checked"
        elif ok == len(checked):
            word = "reproduces"
        elif ok == 0:
            word = "does not reproduce"
        else:
            word = "partly reproduces"
        unchecked = len(self.verdicts) - len(checked)
        extra = f"; {unchecked} not checked" if unchecked else ""
        return f"**Verdict: {word}** ({ok} of {len(checked)} effects reproduce{extra})."

    def markdown(self, footer: str = "") -> str:
        """The full ``table.md`` text."""
        parts = [f"# {self.title}", self.overall()]
        if self.verdicts:
            parts.append("\n".join(v.line() for v in self.verdicts))
        parts.extend(self.blocks)
        if footer:
            parts.append(footer)
        return "\n\n".join(parts) + "\n"


# --------------------------------------------------------------------------- context


@dataclass
class GroupContext:
    """What a group's ``run`` gets: where to write, its config, device and helpers.

    Attributes:
        name: group name, e.g. ``"e1"``.
        profile: ``"full"``, ``"quick"`` or ``"tiny"``.
        config: the group's config for the profile (a frozen dataclass).
        out: the (temporary) folder the group writes into.
        root: the results root holding the other groups' finished folders.
        device: torch device of every tensor.
        progress: show tqdm bars.
        inputs: finished groups read so far, name -> their ``run_id`` (None: not available).
        notes: messages shown during the run and kept in ``done.json``.
    """

    name: str
    profile: str
    config: Any
    out: Path
    root: Path
    device: torch.device
    progress: bool = True
    inputs: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def log(self, message: str) -> None:
        """Show a message without breaking progress bars, and keep it for ``done.json``."""
        self.notes.append(message)
        tqdm.write(f"[{self.name}] {message}", file=sys.stderr)

    def bar(self, iterable: Iterable, desc: str, total: int | None = None):
        """A tqdm bar over ``iterable`` (hidden when progress is off)."""
        return tqdm(
            iterable,
            desc=f"{self.name}: {desc}",
            total=total,
            leave=False,
            disable=not self.progress,
        )

    def generator(self, seed: int) -> torch.Generator:
        """A generator on the context's device seeded with ``seed``."""
        return torch.Generator(device=self.device).manual_seed(int(seed))

    def write_json(self, filename: str, obj) -> Path:
        """Write ``obj`` (converted by ``to_jsonable``) as indented JSON into the group folder."""
        path = self.out / filename
        path.write_text(
            json.dumps(to_jsonable(obj), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        )
        return path

    def write_csv(self, filename: str, rows: Sequence[Mapping], columns=None) -> Path:
        """Write dict rows as CSV; columns default to the union of keys in first-seen order.

        Raises:
            ValueError: if ``rows`` is empty and no ``columns`` are given.
        """
        if columns is None:
            if not rows:
                raise ValueError(f"{filename}: no rows and no columns")
            columns = list(dict.fromkeys(k for row in rows for k in row))
        path = self.out / filename
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="raise")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: _csv_cell(v) for k, v in row.items()})
        return path

    def save_figure(self, fig: Figure, filename: str) -> Path:
        """Save a Matplotlib figure as PNG into the group folder."""
        path = self.out / filename
        fig.savefig(path, dpi=120, bbox_inches="tight")
        return path

    def finished_group(self, name: str, config: Any = None) -> Path | None:
        """The folder of finished group ``name`` under ``root`` if it can be reused.

        Reusable means: ``done.json`` exists, the run used the same profile, and, when
        ``config`` is given, the same config. The answer (its ``run_id`` or None) is recorded
        in ``inputs`` and so in this group's ``done.json``.
        """
        folder = self.root / name
        done = read_done(folder)
        usable = done is not None and done.get("profile") == self.profile
        if usable and config is not None:
            usable = done.get("config") == to_jsonable(config)
        if done is not None and not usable:
            self.log(
                f"{folder} holds a run with another profile or config "
                f"({done.get('profile')}); not reused"
            )
        self.inputs[name] = done["run_id"] if usable else None
        return folder if usable else None


def _csv_cell(v):
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(to_jsonable(v))
    return v


def new_figure(width: float = 6.0, height: float = 4.0) -> Figure:
    """A Matplotlib figure with the Agg canvas, independent of pyplot's global state."""
    return Figure(figsize=(width, height), layout="constrained")


def draw_gridworld(ax, task: str = "A", c1: bool = False) -> None:
    """Draw the 8x8 world on a Matplotlib axis in cell coordinates: the wall column, the door,
    and the active goal (green) and, in Task B, the hazard (red) selected by ``c1``."""
    goal, hazard = tasks.get(task).goal_cells(torch.tensor([bool(c1)]))
    ax.set_xlim(-0.5, GRID_SIZE - 0.5)
    ax.set_ylim(-0.5, GRID_SIZE - 0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(GRID_SIZE))
    ax.set_yticks(range(GRID_SIZE))
    ax.grid(color="0.85", linewidth=0.5)
    for y in range(GRID_SIZE):
        if (WALL_X, y) != DOOR_CELL:
            ax.add_patch(Rectangle((WALL_X - 0.5, y - 0.5), 1, 1, color="0.35"))
    ax.add_patch(Rectangle((DOOR_CELL[0] - 0.5, DOOR_CELL[1] - 0.5), 1, 1, color="peru"))
    gx, gy = goal[0].tolist()
    ax.add_patch(Rectangle((gx - 0.5, gy - 0.5), 1, 1, color="limegreen", alpha=0.6))
    ax.text(gx, gy, "goal", ha="center", va="center", fontsize=7)
    if hazard is not None:
        hx, hy = hazard[0].tolist()
        ax.add_patch(Rectangle((hx - 0.5, hy - 0.5), 1, 1, color="red", alpha=0.5))
        ax.text(hx, hy, "hazard", ha="center", va="center", fontsize=6)


def plot_episode_path(
    ax, trajectory, steps, outcome, row: int, name: str, color: str, offset: float, **style
) -> np.ndarray:
    """Plot the true agent path of episode ``row`` of a recorded closed loop, shifted by
    ``offset`` cells so two paths stay apart; the label gives its outcome and length.

    Args:
        trajectory: ``(T + 1, B, 12)`` recorded states; ``steps``, ``outcome``: ``(B,)``.

    Returns:
        ``(t + 1, 2)`` agent cells of the path (unshifted).
    """
    t = int(steps[row])
    path = (trajectory[: t + 1, row][:, [AGENT_X, AGENT_Y]] * CELL_SCALE).cpu().numpy()
    end = OUTCOMES[int(outcome[row])]
    ax.plot(
        path[:, 0] + offset,
        path[:, 1] + offset,
        "-o",
        color=color,
        markersize=3,
        label=f"{name} ({end}, {t} steps)",
        **style,
    )
    return path


_WINDOWS_CACHE: dict[tuple, EvalWindows] = {}


def standard_windows(
    ctx: GroupContext, n_windows: int, horizon: int = 10, task: str = "A"
) -> EvalWindows:
    """The held-out evaluation windows every group shares (default seed of ``eval_windows``),
    cached per process so groups of one run score models on identical windows."""
    key = (n_windows, horizon, task, str(ctx.device))
    if key not in _WINDOWS_CACHE:
        _WINDOWS_CACHE[key] = eval_windows(
            n_windows, horizon, task=tasks.get(task), device=ctx.device
        )
    return _WINDOWS_CACHE[key]


def closed_loop(
    ctx: GroupContext,
    model,
    task: str,
    depth: int,
    seeds: Sequence[int],
    episodes: int,
    record: bool = False,
) -> tuple[list[dict], EpisodeResults]:
    """Closed-loop success of every setting of ``model`` (one batched ``evaluate`` call).

    Returns:
        ``(per_setting, results)``: one dict per setting with ``success``, ``success_se``,
        ``n_episodes``, ``per_seed`` (success of each seed) and ``outcomes`` (goal / hazard /
        timeout counts); and the raw setting-major ``EpisodeResults``.
    """
    results = evaluate(
        model,
        task=tasks.get(task),
        depth=depth,
        seeds=list(seeds),
        episodes=episodes,
        device=ctx.device,
        record=record,
        progress=ctx.progress,
    )
    m = getattr(model, "n_settings", 1)
    success = results.success.view(m, len(seeds), episodes).float().cpu()
    outcome = results.outcome.view(m, -1).cpu()
    out = []
    for k in range(m):
        mean, se, n = mean_se(success[k])
        counts = {name: int((outcome[k] == i).sum()) for i, name in enumerate(OUTCOMES)}
        out.append(
            {
                "success": mean,
                "success_se": se,
                "n_episodes": n,
                "per_seed": success[k].mean(dim=1).tolist(),
                "outcomes": counts,
            }
        )
    return out, results


# --------------------------------------------------------------------------- model records


def check_records(records: Sequence[Mapping]) -> list[dict]:
    """Validate model records (see the module docstring).

    Raises:
        ValueError: naming the record and the missing keys.
    """
    out = []
    for i, rec in enumerate(records):
        missing = [k for k in RECORD_KEYS if k not in rec]
        if missing:
            raise ValueError(f"model record {i} ({rec.get('name', '?')}) lacks {missing}")
        out.append(dict(rec))
    return out


def write_models(ctx: GroupContext, records: Sequence[Mapping]) -> Path:
    """Write model records as ``models.json`` and ``models.csv`` into the group folder."""
    records = check_records(records)
    ctx.write_csv("models.csv", records)
    return ctx.write_json(MODELS_FILE, {"models": records})


def read_models(folder: Path) -> list[dict]:
    """Model records of a finished group folder.

    Raises:
        ValueError: if ``models.json`` is missing or malformed.
    """
    path = Path(folder) / MODELS_FILE
    if not path.is_file():
        raise ValueError(f"{path} not found: the group wrote no model records")
    try:
        data = json.loads(path.read_text())
        return check_records(data["models"])
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a model-record file: {err}") from err


# --------------------------------------------------------------------------- registry & runner


@dataclass(frozen=True)
class Group:
    """One experiment group.

    Attributes:
        name: short name used on the command line, e.g. ``"e1"``.
        title: heading of its report.
        run: ``run(ctx) -> Report``; writes its CSV/JSON/PNG files through ``ctx``.
        configs: profile name -> config (a frozen dataclass) for every name in ``PROFILES``.
        reads: groups whose finished results it reuses when present; they run first.
    """

    name: str
    title: str
    run: Callable[[GroupContext], Report]
    configs: Mapping[str, Any]
    reads: tuple[str, ...] = ()


def read_done(folder: Path) -> dict | None:
    """The ``done.json`` of a group folder, or None if the group is not finished."""
    path = Path(folder) / DONE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def select_groups(registry: Mapping[str, Group], names: Sequence[str] | None) -> list[str]:
    """Validate ``names`` (None or empty: all) and order them so each group runs after the
    selected groups it reads; otherwise registry order.

    Raises:
        ValueError: on unknown names, listing the valid ones.
    """
    names = list(registry) if not names else [n.strip().lower() for n in names]
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(
            f"unknown group(s) {', '.join(unknown)}; valid groups: {', '.join(registry)}"
        )
    chosen = [n for n in registry if n in names]
    ordered: list[str] = []
    while chosen:
        for n in chosen:
            if all(r not in chosen or r in ordered for r in registry[n].reads if r != n):
                ordered.append(n)
                chosen.remove(n)
                break
        else:
            raise ValueError(f"groups read each other in a cycle: {chosen}")
    return ordered


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recover(out: Path, name: str) -> None:
    """Clean up after a run of group ``name`` that died: remove its temp folders; restore a
    finished folder that was moved aside for a --force swap but not yet replaced."""
    final = out / name
    for path in sorted(out.glob(f".{name}.*-*")):
        kind, _, pid = path.name.rpartition("-")
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        if kind.endswith(".old") and not final.exists() and read_done(path) is not None:
            path.rename(final)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _versions() -> dict:
    return {
        "gridplan": getattr(gridplan, "__version__", "unknown"),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def run_group(
    group: Group,
    out: Path,
    profile: str,
    device: torch.device,
    progress: bool,
) -> dict:
    """Run one group into a temp folder and move it into ``out / group.name`` when complete.

    The caller decides whether to skip a finished group; this always recomputes. Returns
    the ``done.json`` dict. On any exception the temp folder is removed and the previous
    finished folder, if any, is left as it was.
    """
    final = out / group.name
    tmp = out / f".{group.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = group.configs[profile]
    ctx = GroupContext(group.name, profile, config, tmp, out, device, progress)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    try:
        report = group.run(ctx)
        wall = time.perf_counter() - t0
        footer = (
            f"*Profile `{profile}`, device `{device}` ({torch.get_num_threads()} CPU threads), "
            f"wall time {wall:.1f} s; config: "
            f"`{json.dumps(to_jsonable(config))}`.*"
        )
        (tmp / TABLE_FILE).write_text(report.markdown(footer))
        done = {
            "group": group.name,
            "title": group.title,
            "run_id": uuid.uuid4().hex[:12],
            "profile": profile,
            "config": to_jsonable(config),
            "device": str(device),
            "threads": torch.get_num_threads(),
            "wall_time_s": round(wall, 2),
            "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "inputs": ctx.inputs,
            "verdict": report.overall(),
            "verdicts": [to_jsonable(v) for v in report.verdicts],
            "notes": ctx.notes,
            "versions": _versions(),
        }
        (tmp / DONE_FILE).write_text(
            json.dumps(to_jsonable(done), indent=2, ensure_ascii=False) + "\n"
        )
        if final.exists():
            old = out / f".{group.name}.old-{os.getpid()}"
            final.rename(old)
            try:
                tmp.rename(final)
            except OSError:
                old.rename(final)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
        return done
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def run_groups(
    registry: Mapping[str, Group],
    names: Sequence[str] | None = None,
    out: str | os.PathLike = "results",
    profile: str = "full",
    device: str | torch.device = "cpu",
    force: bool = False,
    progress: bool = True,
    threads: int | None = None,
) -> dict[str, str]:
    """Run the selected groups of ``registry`` into ``out``.

    Args:
        registry: name -> Group (``gridplan.experiments.GROUPS``).
        names: groups to run (None or empty: all), in any order.
        out: results root; each group writes ``out/<name>/``.
        profile: ``"full"`` (paper protocol), ``"quick"`` or ``"tiny"``.
        device: torch device.
        force: recompute groups that are already finished.
        progress: show progress bars.
        threads: torch CPU threads while the groups run (None: leave torch's setting). The
            planner's tensor work is memory-bound, and on a busy shared machine several
            threads spin at barriers: an E1-sized closed loop ran 20x slower with 2 threads
            than with 1 on 2 loaded cores (same results).

    Returns:
        name -> ``"ran"``, ``"skipped"`` (finished earlier) or ``"failed"`` (the error and
        traceback are printed; the other groups still run).

    Raises:
        ValueError: on unknown groups or profile, an unusable device or ``threads < 1``,
            before anything runs.
        KeyboardInterrupt: passed through after the interrupted group's temp folder is removed.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    if threads is not None and (
        isinstance(threads, bool) or int(threads) != threads or threads < 1
    ):
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    order = select_groups(registry, names)
    try:
        device = torch.device(device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as err:
        raise ValueError(f"device {str(device)!r} is not usable: {err}") from err
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        return _run_all(registry, order, out, profile, device, force, progress)
    finally:
        torch.set_num_threads(previous_threads)


def _run_all(
    registry: Mapping[str, Group],
    order: list[str],
    out: Path,
    profile: str,
    device: torch.device,
    force: bool,
    progress: bool,
) -> dict[str, str]:
    status: dict[str, str] = {}
    for name in tqdm(order, desc="groups", disable=not progress):
        group = registry[name]
        _recover(out, name)
        final = out / name
        done = read_done(final)
        if done is not None and not force:
            status[name] = "skipped"
            _say_skipped(out, group, done, profile)
            continue
        if final.exists() and done is None:
            status[name] = "failed"
            tqdm.write(
                f"[{name}] {final} exists but holds no {DONE_FILE} (not a finished group); "
                "move it away or pass --force to replace it",
                file=sys.stderr,
            )
            continue
        try:
            done = run_group(group, out, profile, device, progress)
        except Exception:
            status[name] = "failed"
            tqdm.write(f"[{name}] failed:\n{traceback.format_exc()}", file=sys.stderr)
            continue
        status[name] = "ran"
        tqdm.write(
            f"[{name}] done in {done['wall_time_s']:.1f} s -> {final}: {done['verdict']}",
            file=sys.stderr,
        )
    return status


def _say_skipped(out: Path, group: Group, done: dict, profile: str) -> None:
    msg = f"[{group.name}] finished earlier ({done.get('profile')} profile, "
    msg += f"{done.get('wall_time_s')} s); skipped, --force recomputes"
    if done.get("profile") != profile:
        msg += f" (NOTE: asked for the {profile!r} profile)"
    recorded = done.get("inputs", {})
    for r in group.reads:
        if r not in recorded:
            continue
        current = read_done(out / r)
        now = current.get("run_id") if current else None
        if now != recorded[r]:
            msg += f"; its input {r} has changed since (rerun with --only {group.name} --force)"
    tqdm.write(msg, file=sys.stderr)
