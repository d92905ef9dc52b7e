#!/usr/bin/env bash
# Set up the venv, then run the main job (python -m eval). Extra arguments are passed through.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
exec .venv/bin/python -m eval "$@"
