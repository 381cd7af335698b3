#!/usr/bin/env bash
# mypy --strict over hicache_spec and hicache_contracts; mypy with --check-untyped-defs over hicache_reference.
# The packages live in folders named otherwise (spec/ → hicache_spec) and the editable install maps them with
# an import hook mypy does not follow, so mypy runs in a temporary folder holding links under the packages'
# own names. The configuration ([tool.mypy]: the pydantic plugin, untyped third-party modules) is pyproject's.
# Both runs always run; the script fails if either finds an error.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ln -s "$PWD/spec" "$root/hicache_spec"
ln -s "$PWD/contracts" "$root/hicache_contracts"
ln -s "$PWD/reference" "$root/hicache_reference"
mypy=("$PWD/.venv/bin/mypy" --config-file "$PWD/pyproject.toml" --no-incremental)
status=0
(cd "$root" && "${mypy[@]}" --strict -p hicache_spec -p hicache_contracts) || status=1
(cd "$root" && "${mypy[@]}" --check-untyped-defs -p hicache_reference) || status=1
exit $status
