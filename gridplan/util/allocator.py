"""The C allocator of the command lines: keep freed memory in the process (docs/PERFORMANCE.md,
"Threads and allocations").

torch's CPU tensors come from glibc's ``malloc``. glibc serves a request above its mmap
threshold (128 KiB, raised on each free up to 32 MiB) with a fresh ``mmap`` and hands it back
to the kernel on ``free``; it also returns the top of its heap once more than the trim
threshold lies free there. A planner that rolls a learned model through ``predict`` makes
large temporaries on every call (a plug-in MLP's activations: 75 MiB per layer at 76,800 leaf
rows), so every call mapped fresh pages and faulted each one in again: 41% of an
evaluation's time went to the kernel. Raising both thresholds keeps freed memory for the next
request; the process's peak memory is what it was, it is only kept until the process ends.

Training makes the same-sized activations on every step (about 3,500 page faults a step of
a 20-member stack without the setting, a quarter of its time; 51 with it).

The entry points (``python -m eval``, ``python -m train``, ``scripts/reproduce.py``, the
benchmarks) call ``retain_freed_memory()`` at start-up, and the training engine before it
trains (``gridplan.training.runs.train``, ``gridplan.training.vectorized.train_group``), so a
run trained from Python keeps its activations too. The setting is process-wide, takes effect
for every later allocation, and leaves every result unchanged; this is the one place that sets
it, so nothing that runs later in the process lowers it again.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: ``mallopt`` parameters of glibc's ``malloc.h``.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Requests up to this size come from the heap, and this much may lie free at its top: above
#: any single temporary of the planner within its default 2 GiB budget. glibc's ``mallopt``
#: takes an ``int``.
RETAIN_BYTES = 2**31 - 1


def retain_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds to ``RETAIN_BYTES`` (module docstring).

    Returns:
        True if both were set; False where the C library is not glibc (macOS, Windows,
        musl: nothing is changed there).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, RETAIN_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, RETAIN_BYTES)
    )
