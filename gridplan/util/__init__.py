"""Helpers every layer may use: atomic file writes, JSON of tensors, progress lines, threads.

Nothing here knows the gridworld. ``files`` (atomic writes), ``jsonio`` (tensors and dataclasses
to JSON), ``progress`` (a tqdm bar in a terminal, plain lines in a log), ``threads`` (OpenMP wait
policy and thread counts, set before torch starts its pool), ``allocator`` (glibc keeps freed
memory for the next request).

Its public names (``__all__``) are imported on first use: ``import gridplan.util``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "write_atomic": "files",
    "write_text_atomic": "files",
    "to_jsonable": "jsonio",
    "dumps": "jsonio",
    "Progress": "progress",
    "as_progress": "progress",
    "configure_threads": "threads",
    "set_wait_policy": "threads",
    "training_threads": "threads",
    "available_cpus": "threads",
    "describe": "threads",
    "retain_freed_memory": "allocator",
    "read_fragments": "fragments",
    "EXTRAS": "extras",
    "MissingExtraError": "extras",
    "install_command": "extras",
    "require": "extras",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
