#!/usr/bin/env bash
# Create/refresh the project virtualenv in .venv (idempotent; safe to run from any cwd).
#
# Environment overrides:
#   GRIDPLAN_TORCH_PIN   pip version pin for torch (default "==2.13.0", the local CPU wheel).
#                         GPU users, e.g.: GRIDPLAN_TORCH_PIN='==2.5.1'
#   GRIDPLAN_TORCH_INDEX  optional --index-url for torch,
#                         e.g.: GRIDPLAN_TORCH_INDEX=https://download.pytorch.org/whl/cu124
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=.venv
PY="$VENV/bin/python"
STAMP="$VENV/.gridplan-installed"
TORCH_PIN="${GRIDPLAN_TORCH_PIN:-==2.13.0}"
TORCH_INDEX="${GRIDPLAN_TORCH_INDEX:-}"

if [ ! -x "$PY" ]; then
    echo "[setup] creating $VENV"
    python3 -m venv "$VENV"
else
    echo "[setup] $VENV exists"
fi

# Install torch first, pinned, so the dependency resolver never pulls an unpinned (CUDA) build.
# Only (re)install when torch is missing or does not satisfy the requested spec.
if "$PY" - "$TORCH_PIN" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version

import torch  # noqa: F401

try:
    from packaging.specifiers import SpecifierSet
except ImportError:  # fresh venv: fall back to pip's vendored copy
    from pip._vendor.packaging.specifiers import SpecifierSet

installed = version("torch")
spec = SpecifierSet(sys.argv[1])
# PEP 440: a local label (e.g. 2.13.0+cpu) still satisfies ==2.13.0.
sys.exit(0 if spec.contains(installed, prereleases=True) else 1)
PYEOF
then
    echo "[setup] torch already satisfies '$TORCH_PIN'"
else
    echo "[setup] installing torch$TORCH_PIN"
    torch_args=()
    if [ -n "$TORCH_INDEX" ]; then
        torch_args+=(--index-url "$TORCH_INDEX")
    fi
    "$PY" -m pip install -q ${torch_args[@]+"${torch_args[@]}"} "torch${TORCH_PIN}"
    rm -f "$STAMP"
fi

HASH="$(sha256sum pyproject.toml | cut -d' ' -f1)"
# The console scripts (pyproject.toml [project.scripts]) come with the editable install.
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ] && [ -x "$VENV/bin/gridplan-data" ]; then
    echo "[setup] gridplan[dev,gymnasium,torchrl] up to date"
else
    echo "[setup] installing gridplan[dev,gymnasium,torchrl] (editable)"
    # torch is named again (already installed, so nothing is fetched) so that the resolver
    # keeps the pinned build while it adds the extras' packages.
    "$PY" -m pip install -q -e '.[dev,gymnasium,torchrl]' "torch${TORCH_PIN}"
    echo "$HASH" > "$STAMP"
fi

# The slow tier's browser test (tests/docs/test_site.py) drives Debian's headless Chromium; CI
# (CI=true) and GRIDPLAN_BROWSER=1 install it where it is missing. No browser is downloaded
# any other way.
if [ "${CI:-}" = "true" ] || [ "${GRIDPLAN_BROWSER:-}" = "1" ]; then
    if apt-cache policy chromium chromium-driver 2>/dev/null | grep -q 'Installed: (none)' \
        || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
        echo "[setup] installing Debian's chromium and chromium-driver (browser tests)"
        SUDO=()
        if [ "$(id -u)" -ne 0 ]; then
            SUDO=(sudo)
        fi
        "${SUDO[@]}" apt-get update -q
        DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q chromium chromium-driver
    else
        echo "[setup] chromium and chromium-driver installed"
    fi
fi
