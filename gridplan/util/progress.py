"""Progress output that reads well in a terminal and in a log file.

A tqdm bar redraws itself with carriage returns: fine in a terminal, but piped into a file (as
``scripts/run_demo.sh`` does through ``tee``) every redraw becomes file content, megabytes
of it for one training run. So progress depends on where it goes:

- a terminal: tqdm bars;
- a pipe or a file: one line per finished unit of work (an experiment item) and no bar at
  all for short inner loops (``bar(..., piped=False)``, e.g. the closed loop's steps).

Training's output (a line per epoch off a terminal, Lightning's chatter dropped) is
``gridplan.training.lightning_output``; this module imports no Lightning.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO

from tqdm.auto import tqdm


def is_terminal(stream: IO | None = None) -> bool:
    """Whether ``stream`` (default ``sys.stdout``) is an interactive terminal."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def bar(
    iterable: Iterable,
    desc: str,
    total: int | None = None,
    enabled: bool = True,
    piped: bool = True,
    file: IO | None = None,
) -> Iterator:
    """Iterate ``iterable`` with progress shown on ``file`` (default ``sys.stderr``).

    Args:
        iterable: the work items.
        desc: what is being done, e.g. ``"e1: models"``.
        total: item count, if ``iterable`` has no ``len``.
        enabled: False hides all progress.
        piped: off a terminal, print ``desc: i/total (elapsed s)`` after each item (True) or
            nothing (False, for short inner loops).
        file: where progress goes.

    Returns:
        An iterator over the items of ``iterable``.
    """
    file = sys.stderr if file is None else file
    if enabled and is_terminal(file):
        return iter(tqdm(iterable, desc=desc, total=total, leave=False, file=file))
    if not (enabled and piped):
        return iter(iterable)
    return _lines(iterable, desc, total, file)


def _lines(iterable: Iterable, desc: str, total: int | None, file: IO) -> Iterator:
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    of = f"/{total}" if total is not None else ""
    start = time.perf_counter()
    for i, item in enumerate(iterable, 1):
        yield item
        print(f"{desc}: {i}{of} ({time.perf_counter() - start:.1f} s)", file=file, flush=True)
