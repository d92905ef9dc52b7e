#!/usr/bin/env bash
# Set up the venv, lint, then run the test suite. Extra arguments go to pytest.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
.venv/bin/ruff check gridplan train eval scripts tests
# The layers contract of pyproject.toml ([tool.importlinter]), drawn in docs/DESIGN.md.
.venv/bin/lint-imports
exec .venv/bin/python -m pytest "$@"
