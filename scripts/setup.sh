#!/usr/bin/env bash
# Create .venv in the repository root and install hicache-spec with its test extras.
#
#   bash scripts/setup.sh            the project, torch, the test tools
#   bash scripts/setup.sh --sglang   also what importing the pinned SGLang releases' HiCache modules needs
#                                    (the release tier of the tests; see docs/releases.md)
#
# torch: a machine without a GPU should install the CPU build first. On machines
# with a local CPU wheel (`pip install torch==2.13.0`), that is the default here;
# set HICACHE_TORCH to another requirement (e.g. "torch" for a CUDA build) and
# HICACHE_TORCH_INDEX_URL to the index torch alone comes from (e.g. PyTorch's CPU
# index), or install torch into .venv beforehand.
#
# --sglang: SGLang's import chain reaches torchvision, whose wheels on the package
# index are CUDA builds that only import against the torch they were built for.
# Unless the installed torch already has a torchvision that imports, this installs
# the pair in HICACHE_SGLANG_TORCH (default "torch==2.14.1 torchvision==0.29.1",
# which imports and runs on a CPU-only machine), replacing the torch above.
#
# Redis: the tests start their own Redis servers and need redis-server and redis-cli;
# scripts/install_redis.sh installs them where it can (Debian, as root or with
# passwordless sudo) and otherwise prints how. HICACHE_NO_REDIS=1 skips that step.
set -euo pipefail
cd "$(dirname "$0")/.."
with_sglang=${HICACHE_SGLANG:-0}
for argument in "$@"; do
  case "$argument" in
    --sglang) with_sglang=1 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/!p;}' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $argument (known: --sglang)" >&2; exit 2 ;;
  esac
done
python_bin=${PYTHON:-python3}
# pip prints each download with its size and progress: the large ones take minutes on a small machine.
pip_install() { .venv/bin/pip install --disable-pip-version-check "$@"; }
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if [ "$with_sglang" = 1 ]; then
    : # the pair below brings torch
  elif [ -n "${HICACHE_TORCH_INDEX_URL:-}" ]; then
    pip_install --index-url "$HICACHE_TORCH_INDEX_URL" "${HICACHE_TORCH:-torch==2.13.0}"
  else
    pip_install "${HICACHE_TORCH:-torch==2.13.0}"
  fi
fi
if [ "$with_sglang" = 1 ]; then
  if ! .venv/bin/python -c "import torch, torchvision" 2>/dev/null; then
    echo "setup.sh: installing ${HICACHE_SGLANG_TORCH:-torch==2.14.1 torchvision==0.29.1} for the SGLang release tier" \
      "(a download of about 3 GB: 5 to 15 minutes on a 2-core machine, depending on the network)"
    # shellcheck disable=SC2086
    pip_install ${HICACHE_SGLANG_TORCH:-torch==2.14.1 torchvision==0.29.1}
  fi
  echo "setup.sh: installing the project with its test tools and the sglang extra"
  pip_install -e '.[test,sglang]'
  .venv/bin/python -c "import torch, torchvision" \
    || { echo "setup.sh: torchvision does not import with this torch; set HICACHE_SGLANG_TORCH to a matching pair" >&2; exit 1; }
else
  echo "setup.sh: installing the project with its test tools"
  pip_install -e '.[test]'
fi
if [ "${HICACHE_NO_REDIS:-0}" = 1 ]; then
  echo "setup.sh: HICACHE_NO_REDIS=1: not installing a Redis server (the Redis tests skip without one)"
else
  bash scripts/install_redis.sh
fi
