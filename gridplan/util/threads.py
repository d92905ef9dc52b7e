"""CPU threads of the command lines: a passive OpenMP wait policy and one intra-op thread
unless told otherwise (docs/PERFORMANCE.md §8 and "Threads and allocations").

torch's intra-op threads meet at a barrier after every parallel op. With OpenMP's default
(active) wait policy a thread that arrives first spins there, so when another process holds
one of the cores, its partner is descheduled and every op waits a scheduler slice (the
planner's rates beside a busy neighbour: docs/PERFORMANCE.md §8).
``OMP_WAIT_POLICY=PASSIVE`` makes waiting threads sleep instead. OpenMP reads the variable
once, when torch loads it, so the entry points call ``set_wait_policy`` before anything
imports torch, and ``configure_threads`` after::

    from gridplan.util.threads import set_wait_policy
    set_wait_policy()  # before torch is imported
    ...
    threads = configure_threads(args.threads)
    print(describe(threads))

This module imports torch only inside ``configure_threads`` and ``intra_op_threads``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings
from collections.abc import MutableMapping

#: The OpenMP variable and the policy the entry points set unless the user chose one.
WAIT_POLICY_VARIABLE = "OMP_WAIT_POLICY"
#: The OpenMP variable that chooses the intra-op threads (``default_threads``).
THREADS_VARIABLE = "OMP_NUM_THREADS"
PASSIVE = "PASSIVE"
#: cgroup files with a CPU quota: v2 ``cpu.max`` ("quota period" or "max period"), v1 CFS.
CGROUP_V2_CPU_MAX = "/sys/fs/cgroup/cpu.max"
CGROUP_V1_QUOTA = "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"
CGROUP_V1_PERIOD = "/sys/fs/cgroup/cpu/cpu.cfs_period_us"


def set_wait_policy(environ: MutableMapping[str, str] | None = None) -> str:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless a policy is already set; returns the policy in
    effect. Call it before torch is imported (it warns if torch already is and the policy
    was not set: OpenMP has then read its settings and this one cannot take effect)."""
    env = os.environ if environ is None else environ
    if WAIT_POLICY_VARIABLE not in env and environ is None and "torch" in sys.modules:
        warnings.warn(
            f"{WAIT_POLICY_VARIABLE} set after torch was imported: OpenMP ignores it",
            RuntimeWarning,
            stacklevel=2,
        )
    return env.setdefault(WAIT_POLICY_VARIABLE, PASSIVE)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_quota() -> float | None:
    """CPUs granted by a cgroup CPU quota (e.g. a container's ``--cpus``), or ``None``."""
    v2 = _read(CGROUP_V2_CPU_MAX)
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota, period = _read(CGROUP_V1_QUOTA), _read(CGROUP_V1_PERIOD)
    if quota and period and int(quota) > 0:
        return int(quota) / int(period)
    return None


def available_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    quota = cpu_quota()
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


def default_threads() -> int:
    """The intra-op threads the command lines take unless told: ``OMP_NUM_THREADS``, else 1.

    One thread per process for every workload they run (docs/PERFORMANCE.md §16, "Threads
    and allocations"; ``scripts/bench_threads.py`` measures it): in fresh processes one
    thread planned the noise models (bound by their serial random stream) 1.4-1.6x faster
    than two passive threads on a quiet machine and as fast as two spinning ones, which
    collapse beside a busy process; the MLP's tree ran 1.2x faster on one thread (§8). A
    training step is too small for a second thread (docs/PERFORMANCE.md §12); a vectorized
    sweep or an experiment's model zoo takes the cores as worker processes instead
    (``available_cpus``), and a group whose stacked step pays for threads takes the cores
    its launch leaves idle as threads (``gridplan.training.vectorized.group_threads``).

    Raises:
        ValueError: if ``OMP_NUM_THREADS`` is set but not an integer >= 1.
    """
    value = os.environ.get(THREADS_VARIABLE, "1")
    try:
        return check_threads(int(value))
    except ValueError:
        raise ValueError(f"OMP_NUM_THREADS must be an integer >= 1, got {value!r}") from None


def training_threads(requested: int | None = None) -> int:
    """Intra-op threads of a training process: ``requested``, else ``default_threads()``.

    Raises:
        ValueError: if ``requested`` or ``OMP_NUM_THREADS`` is not an integer >= 1.
    """
    return check_threads(requested) or default_threads()


def check_threads(requested: int | None) -> int | None:
    """``requested`` if it is ``None`` or an integer >= 1.

    Raises:
        ValueError: otherwise, naming the value.
    """
    if requested is not None and (
        isinstance(requested, bool) or not isinstance(requested, int) or requested < 1
    ):
        raise ValueError(f"threads must be an integer >= 1, got {requested!r}")
    return requested


def configure_threads(requested: int | None = None) -> int:
    """Set torch's intra-op threads to ``requested`` or ``default_threads()``; returns it.

    Raises:
        ValueError: if ``requested`` is not an integer >= 1 (``None`` picks the default).
    """
    import torch

    threads = check_threads(requested) or default_threads()
    torch.set_num_threads(threads)
    return threads


def threads_chosen(requested: int | None) -> bool:
    """Whether the intra-op threads were chosen rather than defaulted: ``requested`` (a
    config's ``threads``) is set, or ``OMP_NUM_THREADS`` is."""
    return requested is not None or THREADS_VARIABLE in os.environ


@contextlib.contextmanager
def intra_op_threads(n: int):
    """Run the block with ``n`` torch intra-op threads, restoring the setting after.

    For loops of small ops (fits of small MLPs): a second thread costs more in
    synchronisation than it saves, and far more on a shared, oversubscribed CPU
    (docs/PERFORMANCE.md §8). Also for a job run in this process with its own threads.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def chosen_threads(n: int | None):
    """Run the block with ``n`` torch intra-op threads as a choice: ``OMP_NUM_THREADS=n`` for
    the block too, so ``threads_chosen`` holds inside it (a training group launched there keeps
    the count, ``gridplan.training.vectorized.group_threads`` does not apply) and processes
    started inside inherit it. ``None`` changes nothing. Both are restored after."""
    if n is None:
        yield
        return
    before = os.environ.get(THREADS_VARIABLE)
    os.environ[THREADS_VARIABLE] = str(check_threads(int(n)))
    try:
        with intra_op_threads(int(n)):
            yield
    finally:
        if before is None:
            os.environ.pop(THREADS_VARIABLE, None)
        else:
            os.environ[THREADS_VARIABLE] = before


def describe(threads: int) -> str:
    """One line for the logs: ``threads: 2 (OMP_WAIT_POLICY=PASSIVE)``."""
    policy = os.environ.get(WAIT_POLICY_VARIABLE, "unset")
    return f"threads: {threads} ({WAIT_POLICY_VARIABLE}={policy})"
