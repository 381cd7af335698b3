#!/usr/bin/env bash
# mypy --strict over hicache_spec and hicache_contracts; mypy with --check-untyped-defs over hicache_reference;
# plain mypy over the whole test tree.
# The packages live in folders named otherwise (spec/ → hicache_spec) and the editable install maps them with
# an import hook mypy does not follow, so mypy runs in a temporary folder holding links under the packages'
# own names. The configuration ([tool.mypy]: the pydantic plugin, untyped third-party modules) is pyproject's.
# The tests' run reports only the tests (--follow-imports=silent): the packages have their own runs. scripts/ is
# on its path (the tests import scripts/mutation.py). Every run always runs; the script fails if any finds an error.
set -uo pipefail
cd "$(dirname "$0")/.."
project=$PWD
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ln -s "$project/spec" "$root/hicache_spec"
ln -s "$project/contracts" "$root/hicache_contracts"
ln -s "$project/reference" "$root/hicache_reference"
ln -s "$project/tests" "$root/tests"
mypy=("$project/.venv/bin/mypy" --config-file "$project/pyproject.toml" --no-incremental)
status=0
(cd "$root" && "${mypy[@]}" --strict -p hicache_spec -p hicache_contracts) || status=1
(cd "$root" && "${mypy[@]}" --check-untyped-defs -p hicache_reference) || status=1
(cd "$root" && MYPYPATH="$project/scripts" "${mypy[@]}" --follow-imports=silent -p tests) || status=1
exit $status
