#!/usr/bin/env bash
# Create .venv in the repository root and install hicache-spec with its test extras.
#
# torch: a machine without a GPU should install the CPU build first. On machines
# with a local CPU wheel (`pip install torch==2.13.0`), that is the default here;
# set HICACHE_TORCH to another requirement (e.g. "torch" for a CUDA build, or a
# --index-url of your choice through PIP_INDEX_URL) or install torch beforehand.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install --quiet "${HICACHE_TORCH:-torch==2.13.0}"
fi
.venv/bin/pip install --quiet -e '.[test]'
