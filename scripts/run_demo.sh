#!/usr/bin/env bash
# The README's main job: set up .venv, train the default learned world model (uniform loss,
# 20k balanced transitions, Lightning, TensorBoard logs under runs/), then evaluate its best
# checkpoint: E_tot, DRPE, error profile, event audit and closed-loop success at depth 2.
# Extra arguments go to `python -m train` (e.g. variant=event_weighted data=12k).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
PY=.venv/bin/python
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
"$PY" -m train "$@" | tee "$LOG"
CKPT=$(tail -n 1 "$LOG" | sed -n 's/^checkpoint: //p')
if [ -z "$CKPT" ]; then
    echo "error: python -m train did not end with a 'checkpoint: PATH' line" >&2
    exit 1
fi
"$PY" -m eval --ckpt "$CKPT"
echo "dashboards: tensorboard --logdir runs"
