#!/usr/bin/env bash
# Set up the venv, lint, then run the default tier of the tests (not `slow`). Extra arguments
# go to pytest: `-m slow` runs the heavier tier, `-m ''` every test.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
.venv/bin/ruff check gridplan train eval scripts tests
# The layers contract of pyproject.toml ([tool.importlinter]), drawn in docs/DESIGN.md.
.venv/bin/lint-imports
exec .venv/bin/python -m pytest "$@"
