"""``python -m eval``: see ``eval.cli`` for usage."""

import sys

from gridplan.util.allocator import retain_freed_memory
from gridplan.util.threads import set_wait_policy

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)
retain_freed_memory()  # large temporaries stay mapped (gridplan.util.allocator)

from eval.cli import main  # noqa: E402

sys.exit(main())
