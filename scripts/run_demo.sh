#!/usr/bin/env bash
# The README's main job: set up .venv, then show the paper's headline effect (Table 2):
# the oracle, M(0, 0.3) (irrelevant noise) and M(0.35, 0.1) (relevant noise) under the
# depth-4 planner, 10 seeds x 30 episodes each. Extra arguments go to every eval call.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
PY=.venv/bin/python
echo "== oracle =="
"$PY" -m eval --model oracle "$@"
echo "== M(0, 0.3): irrelevant noise =="
"$PY" -m eval --model noise --sigma-r 0 --sigma-i 0.3 "$@"
echo "== M(0.35, 0.1): relevant noise =="
"$PY" -m eval --model noise --sigma-r 0.35 --sigma-i 0.1 "$@"
