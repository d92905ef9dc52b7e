"""Any benchmark of ``scripts/`` timed against a git ref: fresh processes, interleaved, ours / ref.

The mechanism behind every benchmark's ``--against REF`` (docs/PERFORMANCE.md §13). ``REF``
(any commit-ish) is checked out as a detached worktree in a temporary folder (``ref_worktree``,
removed afterwards, also on an error). Then the benchmark's own script of this checkout runs
``--pairs`` times on each tree, alternating (this checkout, ``REF``, this checkout, ...), each
run a fresh process (one OpenMP thread unless ``OMP_NUM_THREADS`` is set) whose ``gridplan``
(and ``gridplan_cli``, ``train``, ``eval``, and ``gridplan.conf``, the ``configs/`` folder)
is imported from its tree alone, it and every Python process it starts: a ``sitecustomize``
on ``PYTHONPATH`` puts ``TreeFinder`` first on ``sys.meta_path``, so a module the tree lacks
is an error rather than this checkout's copy filled in by the editable install. Each run
prints its headline rate as the last line of its stdout, one JSON object ``{"rate": ...,
"unit": ..., "what": ...}`` (``emit``); the ratio of a pair is ours over ref's rate. Printed:
every pair (ours, ref, ratio), then the median ratio, its range, the load average before and
after, and the floor the rate is measured against.

A ref that lacks a module the benchmark imports ends the comparison with one line naming the
module and the ref (``RefError``, exit status 2), not a traceback.

    python scripts/bench_env.py --against main --pairs 8    # each benchmark's option
    python scripts/against.py main scripts/bench_env.py --pairs 4 -- --headline --quick
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: This checkout: its scripts run on both trees.
ROOT = Path(__file__).resolve().parents[1]
#: The tree's packages and the folder of each (pyproject.toml's package-dir maps gridplan.conf).
PACKAGES = {
    "gridplan": "gridplan",
    "gridplan.conf": "configs",
    "gridplan_cli": "gridplan_cli",
    "train": "train",
    "eval": "eval",
}
#: The environment variable naming the tree a run imports from.
TREE_VARIABLE = "GRIDPLAN_AGAINST_TREE"
#: Exit status and stderr tag of a run whose tree lacks a module.
MISSING, MISSING_TAG = 3, "against: missing module:"
#: Run at start-up by every Python process of a run (through ``PYTHONPATH``).
SITECUSTOMIZE = f"""\
import importlib.util, os
_spec = importlib.util.spec_from_file_location("_gridplan_against", {str(Path(__file__))!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_module.guard(os.environ[{TREE_VARIABLE!r}])
"""


class RefError(RuntimeError):
    """The ref lacks what the benchmark needs (a module, a name in one)."""


def git(repo: Path, *argv: str) -> str:
    """Run ``git -C repo argv`` and return its stdout; a failure raises naming git's reason."""
    done = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"git {' '.join(argv)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def ref_worktree(ref: str, repo: Path = ROOT):
    """A detached git worktree of ``ref`` (any commit-ish of ``repo``'s repository, by default
    this checkout's) in a temporary folder, removed afterwards; yields ``(path, short commit)``.

    Raises:
        RuntimeError: if ``ref`` names no commit or the worktree cannot be made.
    """
    commit = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="bench-against-") as tmp:
        tree = Path(tmp) / "tree"
        git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        try:
            yield tree, commit[:9]
        finally:
            git(repo, "worktree", "remove", "--force", str(tree))


def _guarded(name: str | None) -> bool:
    return bool(name) and any(name == p or name.startswith(p + ".") for p in PACKAGES)


class TreeFinder(importlib.abc.MetaPathFinder):
    """Finds ``PACKAGES`` and their submodules in ``tree`` only; a module the tree lacks raises
    ``ModuleNotFoundError`` naming it and the tree."""

    def __init__(self, tree: str | Path) -> None:
        self.tree = Path(tree)

    def find_spec(self, name, path=None, target=None):
        if not _guarded(name):
            return None
        if name in PACKAGES:
            folder = self.tree / PACKAGES[name]
            init = folder / "__init__.py"
            if init.is_file():
                return importlib.util.spec_from_file_location(
                    name, init, submodule_search_locations=[str(folder)]
                )
        else:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None:
                return spec
        raise ModuleNotFoundError(f"No module named {name!r} in {self.tree}", name=name)


def guard(tree: str | Path) -> None:
    """Make this process import ``PACKAGES`` from ``tree`` alone, and end it with exit status
    ``MISSING`` and one ``MISSING_TAG`` line on stderr if an import from them fails.

    Raises:
        RuntimeError: if one of ``PACKAGES`` is imported already (from wherever it was).
    """
    loaded = sorted(name for name in sys.modules if _guarded(name))
    if loaded:
        raise RuntimeError(f"{loaded} imported before the guard of {tree}")
    sys.meta_path.insert(0, TreeFinder(tree))
    default = sys.excepthook

    def hook(kind, error, trace):
        if isinstance(error, ImportError) and _guarded(error.name):
            sys.stdout.flush()
            print(f"{MISSING_TAG} {error}", file=sys.stderr, flush=True)
            os._exit(MISSING)
        default(kind, error, trace)

    sys.excepthook = hook


def emit(rate: float, unit: str, what: str, **extra) -> int:
    """Print a run's headline, the JSON line ``run`` reads; exit status 0 for ``main``."""
    print(json.dumps({"rate": rate, "unit": unit, "what": what, **extra}), flush=True)
    return 0


def run(tree: Path, script: Path, argv: list[str], hook: Path, env: dict | None = None) -> dict:
    """One run of ``script argv`` in a fresh process importing from ``tree`` (``hook``: the
    folder of the ``sitecustomize`` that guards it); its headline ``{"rate", "unit", ...}``.

    Raises:
        RefError: if the tree lacks a module the script (or a process it starts) imports.
        RuntimeError: if the run fails otherwise or prints no headline.
    """
    variables = dict(os.environ, **(env or {}))
    variables.setdefault("OMP_NUM_THREADS", "1")  # one thread per run unless told otherwise
    variables.update(PYTHONPATH=f"{hook}{os.pathsep}{tree}", **{TREE_VARIABLE: str(tree)})
    command = [sys.executable, str(script), *argv]
    done = subprocess.run(command, capture_output=True, text=True, env=variables, cwd=tree)
    missing = [ln for ln in done.stderr.splitlines() if ln.startswith(MISSING_TAG)]
    if missing:
        raise RefError(missing[-1].removeprefix(MISSING_TAG).strip())
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        raise RuntimeError(
            f"{script.name} {' '.join(argv)} on {tree} failed (exit status "
            f"{done.returncode}):\n{done.stderr.strip()[-3000:]}"
        )
    try:
        result = json.loads(lines[-1])
        float(result["rate"])
    except (ValueError, KeyError, TypeError) as err:
        raise RuntimeError(f"{script.name} printed no headline JSON line: {lines[-1]!r}") from err
    return result


def interleave(trees: dict, script: Path, argv: list[str], pairs: int, env=None) -> list[dict]:
    """``pairs`` rounds of ``run`` on each of ``trees`` (``{"ours": path, "ref": path}``) in that
    order; per pair both headlines and ``ratio`` = ours / ref of their rates. Prints each pair.

    Raises:
        ValueError: if ``pairs`` is below 1 or ``trees`` is not ``ours`` and ``ref``.
        RefError: if the ref's tree lacks a module the benchmark imports.
        RuntimeError: if a run fails otherwise (an import of this checkout's included).
    """
    if pairs < 1 or list(trees) != ["ours", "ref"]:
        raise ValueError(f"need pairs >= 1 and trees ours, ref; got {pairs}, {list(trees)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-against-hook-") as hook:
        (Path(hook) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        for i in range(pairs):
            row = {}
            for side, tree in trees.items():
                try:
                    row[side] = run(Path(tree), script, argv, Path(hook), env)
                except RefError as err:
                    if side == "ref":
                        raise
                    raise RuntimeError(f"this checkout fails an import: {err}") from None
            row["ratio"] = row["ours"]["rate"] / row["ref"]["rate"]
            rows.append(row)
            unit = row["ours"]["unit"]
            print(
                f"pair {i + 1:>2}: ours {fmt(row['ours']['rate'])} ref "
                f"{fmt(row['ref']['rate'])} {unit}, ratio {row['ratio']:.3f}",
                flush=True,
            )
    return rows


def summary(rows: list[dict]) -> dict:
    """Median, lowest and highest ratio of ``interleave``'s pairs and ours' median rate."""
    ratios = [r["ratio"] for r in rows]
    return {
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "ours_median_rate": statistics.median(r["ours"]["rate"] for r in rows),
    }


def fmt(x: float) -> str:
    """``x`` with an SI prefix: ``4.56 M``."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:#.3g} {prefix}"
    return f"{x:#.3g}"


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def compare(
    script: Path,
    argv: list[str],
    ref: str,
    pairs: int,
    floor=None,
    env: dict | None = None,
    ours: Path = ROOT,
) -> dict:
    """``script argv`` of checkout ``ours`` (uncommitted edits included) against git ``ref`` of
    its repository, ``pairs`` interleaved pairs of fresh processes; ``floor(headlines)`` (of
    ours' runs) gives ``(rate, what it is)`` or ``None``, measured after the pairs. ``env``:
    variables set in every run. Prints the pairs, the median ratio, the range, the load
    average before and after and the floor.

    Returns:
        ``{"script", "ref", "commit", "what", "unit", "pairs": [...], "median_ratio",
        "min_ratio", "max_ratio", "ours_median_rate", "floor", "floor_is", "load_average",
        "load_average_after"}``.

    Raises:
        RefError: if ``ref``'s tree lacks a module the benchmark imports.
        RuntimeError: if ``ref`` names no commit or a run fails.
    """
    before = load_average()
    with ref_worktree(ref, ours) as (tree, commit):
        print(f"{script.name}: this checkout against {ref} ({commit}), {pairs} interleaved pairs")
        try:
            rows = interleave({"ours": ours, "ref": tree}, script, argv, pairs, env)
        except RefError as err:
            raise RefError(f"{ref} ({commit}) lacks what {script.name} needs: {err}") from None
    after = load_average()
    head = rows[0]["ours"]
    out = {"script": script.name, "ref": ref, "commit": commit, "what": head["what"]}
    out.update(unit=head["unit"], pairs=rows, **summary(rows))
    print(
        f"median ratio {out['median_ratio']:.3f} (range {out['min_ratio']:.3f}-"
        f"{out['max_ratio']:.3f}) over {pairs} pairs, ours / ref of {head['what']} "
        f"({head['unit']}); load average {before} -> {after}"
    )
    measured = floor([r["ours"] for r in rows]) if floor else None
    out["floor"], out["floor_is"] = measured or (None, None)
    if measured:
        print(
            f"floor: {fmt(measured[0])} {head['unit']} ({measured[1]}); ours at "
            f"{100 * out['ours_median_rate'] / measured[0]:.3g}% of it"
        )
    out.update(load_average=before, load_average_after=after)
    return out


def add_arguments(parser: argparse.ArgumentParser, pairs: int = 8) -> None:
    """``--against REF``, ``--pairs N`` and the hidden ``--headline`` of a run of ``compare``."""
    parser.add_argument(
        "--against",
        metavar="REF",
        help="time this script's headline rate against git REF (a temporary worktree), "
        "interleaved in fresh processes; prints every pair, the median ratio ours / ref and "
        "the floor (docs/PERFORMANCE.md §13)",
    )
    parser.add_argument(
        "--pairs", type=int, default=pairs, help=f"interleaved pairs of --against ({pairs})"
    )
    parser.add_argument("--headline", action="store_true", help=argparse.SUPPRESS)


def child_argv(argv: list[str], drop=("--against", "--pairs", "--json")) -> list[str]:
    """``argv`` without the options ``drop`` (each with its value), plus ``--headline``."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in drop:
            skip = True
        elif not arg.startswith(tuple(f"{d}=" for d in drop)):
            out.append(arg)
    return [*out, "--headline"]


def main_against(args, script: str, argv: list[str], floor=None, env=None) -> int:
    """A benchmark's ``--against``: ``compare`` of ``script`` with ``argv`` (``child_argv`` of
    the command line unless given); writes ``args.json`` if set. Exit status 2 with one line
    on stderr if the ref lacks what it needs or a run fails, else 0."""
    if args.pairs < 1:
        print(f"error: --pairs must be >= 1, got {args.pairs}", file=sys.stderr)
        return 2
    try:
        result = compare(Path(script).resolve(), argv, args.against, args.pairs, floor, env)
    except (RefError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if getattr(args, "json", None):
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``REF SCRIPT [--pairs N] -- SCRIPT'S ARGUMENTS``: ``compare`` of any script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", help="git ref to time against")
    parser.add_argument("script", type=Path, help="a script printing a headline JSON line")
    parser.add_argument("--pairs", type=int, default=8, help="interleaved pairs (8)")
    args = parser.parse_args(argv[:cut])
    args.against = args.ref
    return main_against(args, str(args.script), argv[cut + 1 :])


if __name__ == "__main__":
    raise SystemExit(main())
