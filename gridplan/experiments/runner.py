"""Runner of the paper-reproduction groups: registry entries, the context a group runs in,
and ``run_groups`` (paper §5; ``docs/DESIGN.md``).

A group is one function ``run(ctx: GroupContext) -> GroupReport`` plus its config per profile
(``gridplan.experiments.settings``), registered as a ``Group`` in
``gridplan.experiments.GROUPS``. ``run_groups``:

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
paper's, with verdicts), PNG figures and ``done.json``.

Readings (``gridplan.core.readings``): a run under a reading other than ``project`` writes its
groups under ``<out>/<reading>/`` so they never replace the default's; a group that no
reading switch can change (``Group.reading_free``: the learned models of e3) keeps one folder,
``<out>/<group>``, shared by every reading.

Training presets (``gridplan.experiments.presets``): a run under a preset trains the learned
groups' models with the preset's overrides and writes those groups under
``<reading root>/<preset>/<group>`` (``preset_folders``; e3's under ``<out>/<preset>/e3``),
never over the default's; the other groups keep their folders, so e4 under a preset reads
the default's e1 and e2 and the preset's e3.
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
from typing import TYPE_CHECKING, Any

import torch
from tqdm.auto import tqdm

import gridplan
from gridplan.core.readings import PROJECT, Reading
from gridplan.core.readings import check as check_reading
from gridplan.experiments.profiles import PROFILES
from gridplan.util.jsonio import dumps, to_jsonable
from gridplan.util.progress import bar
from gridplan.util.threads import available_cpus, chosen_threads

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gridplan.experiments.presets import Preset
    from gridplan.experiments.tables import GroupReport
    from gridplan.training.dispatch import Launcher

DONE_FILE = "done.json"
TABLE_FILE = "table.md"
RESULTS_FILE = "results.json"


def _csv_cell(v):
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    if isinstance(v, (list, tuple, dict)):
        return dumps(v)
    return v


def read_done(folder: Path) -> dict | None:
    """The ``done.json`` of a group folder, or None if the group is not finished."""
    path = Path(folder) / DONE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


@dataclass
class GroupContext:
    """What a group's ``run`` gets: where to write, its config, device and helpers.

    Attributes:
        name: group name, e.g. ``"e1"``.
        profile: ``"full"``, ``"quick"`` or ``"tiny"`` (``gridplan.experiments.profiles.PROFILES``).
        config: the group's config for the profile (``gridplan.experiments.settings``).
        out: the (temporary) folder the group writes into.
        root: the results root holding the other groups' finished folders.
        device: torch device of every tensor.
        progress: show tqdm bars.
        inputs: finished groups read so far, name -> their ``run_id`` (None: not available).
        notes: messages shown during the run and kept in ``done.json``.
        reading: the choices of §4.2 the controlled models and the planner follow.
        folders: group name -> the folder of its results under this run's reading (default
            ``root / name``); a reading-free group's folder is shared by every reading.
        launcher: the Hydra launcher the group's trainings go through (None: this machine,
            ``gridplan.training.runs.train_groups``).
        baseline: under a training preset, group name -> the folder of the group's results
            without it (the default's), for tables that show both; empty otherwise.
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
    reading: Reading = PROJECT
    folders: Mapping[str, Path] = field(default_factory=dict)
    launcher: Launcher | None = None
    baseline: Mapping[str, Path] = field(default_factory=dict)

    def log(self, message: str) -> None:
        """Show a message without breaking progress bars, and keep it for ``done.json``."""
        self.notes.append(message)
        tqdm.write(f"[{self.name}] {message}", file=sys.stderr)

    def bar(self, iterable: Iterable, desc: str, total: int | None = None):
        """Progress over ``iterable``: a tqdm bar in a terminal, a line per item in a log
        (``gridplan.util.progress.bar``); nothing when progress is off."""
        return bar(iterable, f"{self.name}: {desc}", total=total, enabled=self.progress)

    def generator(self, seed: int) -> torch.Generator:
        """A generator on the context's device seeded with ``seed``."""
        return torch.Generator(device=self.device).manual_seed(int(seed))

    def write_json(self, filename: str, obj) -> Path:
        """Write ``obj`` (converted by ``to_jsonable``) as indented JSON into the group folder."""
        path = self.out / filename
        path.write_text(dumps(obj, indent=2, ensure_ascii=False) + "\n")
        return path

    def write_csv(self, filename: str, rows: Sequence, columns=None) -> Path:
        """Write records (their ``to_dict`` rows) or dict rows as CSV; columns default to the
        union of keys in first-seen order.

        Raises:
            ValueError: if ``rows`` is empty and no ``columns`` are given.
        """
        rows = [r.to_dict() if hasattr(r, "to_dict") else r for r in rows]
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

        Reusable means: ``done.json`` exists, the run used the same profile and reading (a
        reading-free group's records none), and, when ``config`` is given, the same config.
        The answer (its ``run_id`` or None) is recorded in ``inputs`` and so in this group's
        ``done.json``.
        """
        folder = self.folders.get(name, self.root / name)
        done = read_done(folder)
        usable = done is not None and done.get("profile") == self.profile
        if usable and done.get("reading") is not None:
            usable = done["reading"] == reading_record(self.reading)
        if usable and config is not None:
            usable = done.get("config") == to_jsonable(config)
        if done is not None and not usable:
            self.log(
                f"{folder} holds a run with another profile or config "
                f"({done.get('profile')}); not reused"
            )
        self.inputs[name] = done["run_id"] if usable else None
        return folder if usable else None

    def launch(
        self,
        fn: Callable[..., Any],
        jobs: Sequence[Mapping[str, Any]],
        tag: str,
        workers: int | None = None,
    ) -> list:
        """``fn(**kwargs)`` of every ``kwargs`` of ``jobs``, in order, as jobs of the group's
        Hydra launcher (``gridplan.training.dispatch.launch``), the one way a group's work
        leaves this process, as its trainings do: ``launcher``, else this machine (this
        process for one job at a time, else ``joblib`` worker processes). On this machine
        ``workers`` jobs run at once (default: one per usable core on CPU, one on an
        accelerator; ``launcher.jobs`` caps it). ``fn`` is a module-level function whose jobs
        seed their own generators, so the values do not depend on where they ran. The jobs'
        files go to ``<out>/jobs/<tag>/`` and are removed once every value is back (``jobs/``
        too when empty).

        Raises:
            ValueError: on an unknown launcher or a ``tag`` that is not a word.
            Exception: the first error a job raised (its files stay for inspection).
        """
        from gridplan.training.dispatch import Job, Launcher, launch

        if workers is None:
            workers = available_cpus() if self.device.type == "cpu" else 1
        launcher = self.launcher or Launcher()
        parallel = max(1, min(workers, len(jobs), launcher.jobs or workers))
        folder = self.out / "jobs" / tag
        named = [Job(f"{tag}{i}", fn, dict(kwargs)) for i, kwargs in enumerate(jobs)]
        values = launch(named, folder, launcher, parallel)
        shutil.rmtree(folder, ignore_errors=True)
        if folder.parent.is_dir() and not any(folder.parent.iterdir()):
            folder.parent.rmdir()
        return values


@dataclass(frozen=True)
class Group:
    """One experiment group.

    Attributes:
        name: short name used on the command line, e.g. ``"e1"``.
        title: heading of its report.
        run: ``run(ctx) -> GroupReport``; writes its CSV/JSON/PNG files through ``ctx``.
        configs: profile name -> config for every name in
            ``gridplan.experiments.profiles.PROFILES``.
        reads: groups whose finished results it reuses when present; they run first.
        reading_free: no reading switch can change its results (it builds no controlled
            model), so one folder serves every reading.
    """

    name: str
    title: str
    run: Callable[[GroupContext], GroupReport]
    configs: Mapping[str, Any]
    reads: tuple[str, ...] = ()
    reading_free: bool = False


def reading_record(reading: Reading) -> dict:
    """How ``done.json`` records a reading: its name and switch values."""
    return {"name": reading.name, **reading.switches()}


def reading_root(out: str | os.PathLike, reading: Reading = PROJECT) -> Path:
    """The results root of ``reading``'s groups: ``out`` for ``project``, else
    ``out/<reading name>``."""
    out = Path(out)
    return out if reading.name == PROJECT.name else out / reading.name


def group_folders(
    registry: Mapping[str, Group], out: str | os.PathLike, reading: Reading = PROJECT
) -> dict[str, Path]:
    """Group name -> its folder under ``reading`` (``reading_root``; ``out`` for a
    reading-free group)."""
    root = reading_root(out, reading)
    return {n: (Path(out) if g.reading_free else root) / n for n, g in registry.items()}


def preset_registry(registry: Mapping[str, Group], preset: Preset) -> dict[str, Group]:
    """``registry`` with every group the preset applies to configured under it
    (``Preset.apply`` on each profile's config)."""
    out = dict(registry)
    for name in preset.groups:
        if name in out:
            g = out[name]
            configs = {p: preset.apply(name, c) for p, c in g.configs.items()}
            out[name] = dataclasses.replace(g, configs=configs)
    return out


def preset_folders(
    registry: Mapping[str, Group],
    out: str | os.PathLike,
    reading: Reading,
    preset: Preset,
) -> dict[str, Path]:
    """``group_folders`` with the preset's groups under ``<root>/<preset name>/<group>``
    (root: ``out`` for a reading-free group, else ``reading_root``)."""
    folders = group_folders(registry, out, reading)
    for name in preset.groups:
        if name in folders:
            folders[name] = folders[name].parent / preset.name / name
    return folders


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


def _done_record(
    group: Group, ctx: GroupContext, report: GroupReport, started: datetime, wall: float
) -> dict:
    """The ``done.json`` of a group run that finished."""
    return {
        "group": group.name,
        "title": group.title,
        "run_id": uuid.uuid4().hex[:12],
        "profile": ctx.profile,
        "reading": None if group.reading_free else reading_record(ctx.reading),
        "config": to_jsonable(ctx.config),
        "device": str(ctx.device),
        "threads": torch.get_num_threads(),
        "wall_time_s": round(wall, 2),
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "inputs": ctx.inputs,
        "verdict": report.overall(),
        "verdicts": [to_jsonable(v) for v in report.verdicts],
        "sanity_checks": [to_jsonable(c) for c in report.sanity_checks],
        "notes": ctx.notes,
        "versions": _versions(),
    }


def _install(tmp: Path, final: Path, old: Path) -> None:
    """Rename the complete ``tmp`` folder to ``final``; a finished ``final`` is moved to
    ``old`` first and removed only once the new folder is in place."""
    if not final.exists():
        tmp.rename(final)
        return
    final.rename(old)
    try:
        tmp.rename(final)
    except OSError:
        old.rename(final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def run_group(
    group: Group,
    out: Path,
    profile: str,
    device: torch.device,
    progress: bool,
    reading: Reading = PROJECT,
    folders: Mapping[str, Path] | None = None,
    launcher: Launcher | None = None,
    baseline: Mapping[str, Path] | None = None,
) -> dict:
    """Run one group into a temp folder and move it into ``out / group.name`` when complete.

    ``out`` is the group's results root under ``reading``; ``folders`` says where the other
    groups' results live (default: beside it). The caller decides whether to skip a
    finished group; this always recomputes. Returns the ``done.json`` dict. On any exception
    the temp folder is removed and the previous finished folder, if any, is left as it was.
    """
    tmp = out / f".{group.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = group.configs[profile]
    ctx = GroupContext(
        group.name,
        profile,
        config,
        tmp,
        out,
        device,
        progress,
        reading=reading,
        folders=dict(folders or {}),
        launcher=launcher,
        baseline=dict(baseline or {}),
    )
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    try:
        report = group.run(ctx)
        report.apply_profile(profile)  # docs/PREREGISTERED.md, Rule 5
        wall = time.perf_counter() - t0
        shown = (
            ""
            if reading.name == PROJECT.name or group.reading_free
            else (f"reading `{reading.name}`, ")
        )
        footer = (
            f"*Profile `{profile}`, {shown}device `{device}` ({torch.get_num_threads()} CPU "
            f"threads), wall time {wall:.1f} s; config: "
            f"`{dumps(config)}`.*"
        )
        (tmp / TABLE_FILE).write_text(report.markdown(footer))
        done = _done_record(group, ctx, report, started, wall)
        (tmp / DONE_FILE).write_text(dumps(done, indent=2, ensure_ascii=False) + "\n")
        _install(tmp, out / group.name, out / f".{group.name}.old-{os.getpid()}")
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
    reading: Reading = PROJECT,
    launcher: Launcher | None = None,
    preset: Preset | None = None,
) -> dict[str, str]:
    """Run the selected groups of ``registry`` into ``out``.

    Args:
        registry: name -> Group (``gridplan.experiments.GROUPS``).
        names: groups to run (None or empty: all), in any order.
        out: results root; each group writes ``out/<name>/`` (``out/<reading>/<name>/``
            under a reading other than ``project``, see ``group_folders``).
        profile: ``"full"`` (paper protocol), ``"quick"`` or ``"tiny"``.
        device: torch device.
        force: recompute groups that are already finished.
        progress: show progress bars.
        threads: torch CPU threads while the groups run, their training groups' included
            (``gridplan.util.threads.chosen_threads``; None: leave torch's setting, and
            training groups take the idle cores their step pays for). The planner's tensor
            work is memory-bound, and on a busy shared machine several threads spin at
            barriers (docs/PERFORMANCE.md §8); the results are the same.
        reading: the choices of §4.2 every controlled model and planner follows
            (``gridplan.core.readings``).
        launcher: send the training groups to this Hydra launcher
            (``gridplan.training.dispatch``; None: this machine). The models are
            the same either way, so a finished group is reused whatever launched it.
        preset: train the learned groups' models under this training preset
            (``gridplan.experiments.presets``) into its folders (``preset_folders``).

    Returns:
        name -> ``"ran"``, ``"skipped"`` (finished earlier) or ``"failed"`` (the error and
        traceback are printed; the other groups still run).

    Raises:
        ValueError: on unknown groups or profile, an unusable device, ``threads < 1`` or an
            unknown launcher, before anything runs.
        TypeError: if ``reading`` is not a ``Reading``.
        KeyboardInterrupt: passed through after the interrupted group's temp folder is removed.
    """
    check_reading(reading)
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    if threads is not None and (
        isinstance(threads, bool) or int(threads) != threads or threads < 1
    ):
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    order = select_groups(registry, names)
    if launcher is not None and launcher.name is not None:
        from gridplan.training.dispatch import check_launcher

        check_launcher(launcher.name)
    try:
        device = torch.device(device)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as err:
        raise ValueError(f"device {str(device)!r} is not usable: {err}") from err
    folders = group_folders(registry, out, reading)
    baseline: dict[str, Path] = {}
    if preset is not None:
        registry = preset_registry(registry, preset)
        baseline = {n: folders[n] for n in preset.groups if n in folders}
        folders = preset_folders(registry, out, reading, preset)
    for name in order:
        folders[name].parent.mkdir(parents=True, exist_ok=True)
    with chosen_threads(threads):
        return _run_all(
            registry,
            order,
            folders,
            profile,
            device,
            force,
            progress,
            reading,
            launcher,
            baseline,
        )


def _run_all(
    registry: Mapping[str, Group],
    order: list[str],
    folders: Mapping[str, Path],
    profile: str,
    device: torch.device,
    force: bool,
    progress: bool,
    reading: Reading,
    launcher: Launcher | None,
    baseline: Mapping[str, Path] | None = None,
) -> dict[str, str]:
    status: dict[str, str] = {}
    for name in bar(order, "groups", enabled=progress):
        group = registry[name]
        final = folders[name]
        out = final.parent
        _recover(out, name)
        done = read_done(final)
        if done is not None and not force:
            status[name] = "skipped"
            _say_skipped(folders, group, done, profile)
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
            done = run_group(
                group, out, profile, device, progress, reading, folders, launcher, baseline
            )
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


def _say_skipped(folders: Mapping[str, Path], group: Group, done: dict, profile: str) -> None:
    msg = f"[{group.name}] finished earlier ({done.get('profile')} profile, "
    msg += f"{done.get('wall_time_s')} s); skipped, --force recomputes"
    if done.get("profile") != profile:
        msg += f" (NOTE: asked for the {profile!r} profile)"
    recorded = done.get("inputs", {})
    for r in group.reads:
        if r not in recorded:
            continue
        current = read_done(folders[r])
        now = current.get("run_id") if current else None
        if now != recorded[r]:
            msg += f"; its input {r} has changed since (rerun with --only {group.name} --force)"
    tqdm.write(msg, file=sys.stderr)
