"""``python -m eval``: see ``eval.cli`` for usage."""

import sys

from eval.cli import main

sys.exit(main())
