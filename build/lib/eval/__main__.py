"""``python -m eval``: see ``eval.cli`` for usage."""

import sys

from gridplan.util.threads import set_wait_policy

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)

from eval.cli import main  # noqa: E402

sys.exit(main())
