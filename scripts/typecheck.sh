#!/usr/bin/env bash
# mypy --strict over hicache_spec. The packages live in folders named otherwise (spec/ → hicache_spec)
# and the editable install maps them with an import hook mypy does not follow, so mypy runs in a
# temporary folder holding a link under the package's own name.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ln -s "$PWD/spec" "$root/hicache_spec"
mypy="$PWD/.venv/bin/mypy"
(cd "$root" && "$mypy" --strict --no-incremental -p hicache_spec)
