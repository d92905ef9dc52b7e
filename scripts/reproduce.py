"""Reproduce the DRPE paper's experiment groups from a checkout: the same command line as
``python -m gridplan.experiments`` (``gridplan/experiments/__main__.py``, whose docstring
lists the options), run against this checkout whether gridplan is installed or not::

    python scripts/reproduce.py --quick
    python scripts/reproduce.py --only e1,e5 --out results/ --device cuda
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridplan.util.allocator import retain_freed_memory  # noqa: E402
from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)
retain_freed_memory()  # large temporaries stay mapped (gridplan.util.allocator)

from gridplan.experiments.__main__ import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
