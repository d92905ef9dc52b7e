"""Progress output that reads well in a terminal and in a log file.

A tqdm bar redraws itself with carriage returns: fine in a terminal, but piped into a file (as
``scripts/run_demo.sh`` does through ``tee``) every redraw becomes file content, megabytes
of it for one training run. So progress depends on where it goes:

- a terminal: labelled tqdm bars;
- a pipe or a file: plain lines, one per finished unit of work (an experiment item), and for
  long loops (``Progress.loop``) a line at most every ``interval`` seconds and one when the
  loop ends; no bar at all for short inner loops (``bar(..., piped=False)``).

``Progress`` labels the stages of one evaluation (``gridplan.evaluation.levels.measure``: one
stage per ladder level) and the loops inside them (the closed loops), so piped output says
which level is running, how far its episodes are and when it ends::

    [oracle] L7 planning utility: started
    [oracle] L7 planning utility / closed loop (model): step 20/60, 212/300 episodes done (4.1 s)
    [oracle] L7 planning utility: done (9.8 s)

Training's output (a line per epoch off a terminal, Lightning's chatter dropped) is
``gridplan.training.lightning_output``; this module imports no Lightning.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO

from tqdm.auto import tqdm

#: Seconds between two piped progress lines of one loop.
PIPED_INTERVAL = 5.0


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


class LoopTracker:
    """Progress of one loop over ``total`` steps of ``episodes`` lockstep episodes
    (``Progress.loop``); ``update(finished)`` after each step, ``close()`` at the end."""

    def __init__(self, owner: Progress, desc: str, total: int, episodes: int) -> None:
        self.owner, self.desc, self.total, self.episodes = owner, desc, total, episodes
        self.step = 0
        self.finished = 0
        self._start = self._last = time.perf_counter()
        self._bar = None
        if owner.terminal:
            self._bar = tqdm(total=total, desc=desc, leave=False, file=owner.file, unit="step")

    def _status(self) -> str:
        elapsed = time.perf_counter() - self._start
        return (
            f"{self.desc}: step {self.step}/{self.total}, {self.finished}/{self.episodes} "
            f"episodes done ({elapsed:.1f} s)"
        )

    def update(self, finished: int) -> None:
        """One step more; ``finished`` episodes have ended so far."""
        self.step += 1
        self.finished = finished
        if self._bar is not None:
            self._bar.set_postfix_str(f"{finished}/{self.episodes} episodes done", refresh=False)
            self._bar.update(1)
            return
        now = time.perf_counter()
        if now - self._last >= self.owner.interval:
            self._last = now
            self.owner.write(self._status())

    def close(self) -> None:
        """End the loop: the bar goes, a piped run gets its final line."""
        if self._bar is not None:
            self._bar.close()
        else:
            self.owner.write(self._status())


class Progress:
    """Labelled progress of one job: stages (``stage``) and the loops inside them (``loop``).

    Args:
        enabled: False shows nothing (every method is then a no-op).
        prefix: put before every label, e.g. ``"[2/3 oracle] "`` in a comparison.
        file: where progress goes (default ``sys.stderr``).
        interval: seconds between two piped lines of one loop.
    """

    def __init__(
        self,
        enabled: bool = True,
        prefix: str = "",
        file: IO | None = None,
        interval: float = PIPED_INTERVAL,
    ) -> None:
        self.enabled = enabled
        self.prefix = prefix
        self.file = sys.stderr if file is None else file
        self.interval = interval
        self.terminal = is_terminal(self.file)
        self.label = ""

    def write(self, text: str) -> None:
        """One line of progress (above the bars in a terminal)."""
        if not self.enabled:
            return
        line = f"{self.prefix}{text}"
        if self.terminal:
            tqdm.write(line, file=self.file)
        else:
            print(line, file=self.file, flush=True)

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """A named stage: a line when it starts and one when it ends (with its seconds);
        loops inside it carry its label."""
        outer, self.label = self.label, label
        start = time.perf_counter()
        self.write(f"{label}: started")
        try:
            yield
        finally:
            self.label = outer
        self.write(f"{label}: done ({time.perf_counter() - start:.1f} s)")

    def loop(self, what: str, total: int, episodes: int) -> LoopTracker | None:
        """A tracker of a loop of ``total`` steps over ``episodes`` episodes, labelled with
        the current stage and ``what`` (None when progress is off, so the loop skips it)."""
        if not self.enabled:
            return None
        desc = f"{self.label} / {what}" if self.label else what
        return LoopTracker(self, desc, total, episodes)


def as_progress(progress: bool | Progress | None, prefix: str = "") -> Progress:
    """``progress`` itself if it is a ``Progress``, else one that is enabled when it is true."""
    if isinstance(progress, Progress):
        return progress
    return Progress(enabled=bool(progress), prefix=prefix)
