#!/usr/bin/env bash
# Create .venv with linkscope and its dev extras.
# torch: an importable torch (the user's own CUDA build on a GPU cluster) is left alone and
# reused through --system-site-packages; only when none exists is the pinned CPU build installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
  if "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
    echo "setup: reusing the torch of $PYTHON ($("$PYTHON" -c 'import torch; print(torch.__version__)'))"
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi

if ! "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
  echo "setup: no torch found, installing the CPU build torch==2.13.0"
  "$VENV/bin/python" -m pip install --quiet torch==2.13.0
fi
"$VENV/bin/python" -m pip install --quiet -e '.[dev,html]'
touch "$VENV/.linkscope-installed"
