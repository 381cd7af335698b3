#!/usr/bin/env bash
# Create .venv in the repository root and install hicache-spec with its test extras.
#
# torch: a machine without a GPU should install the CPU build first. On machines
# with a local CPU wheel (`pip install torch==2.13.0`), that is the default here;
# set HICACHE_TORCH to another requirement (e.g. "torch" for a CUDA build) and
# HICACHE_TORCH_INDEX_URL to the index torch alone comes from (e.g. PyTorch's CPU
# index), or install torch into .venv beforehand.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if [ -n "${HICACHE_TORCH_INDEX_URL:-}" ]; then
    .venv/bin/pip install --quiet --index-url "$HICACHE_TORCH_INDEX_URL" "${HICACHE_TORCH:-torch==2.13.0}"
  else
    .venv/bin/pip install --quiet "${HICACHE_TORCH:-torch==2.13.0}"
  fi
fi
.venv/bin/pip install --quiet -e '.[test]'
