#!/usr/bin/env bash
# The built wheel installed as a vendor installs it, in a fresh virtual environment: CPU torch first, then
# the wheel with its runtime dependencies (no extra), then
#   - `hicache-conform run` against the reference backends (the main job, smoke profile);
#   - a vendor's backend: `hicache-conform init` filled in with a dict, run through the suite;
#   - the pytest plugin (with the `pytest` extra) on a few checks of that backend;
#   - every name of every public module's __all__ imported (the Redis backend's modules must raise
#     MissingExtra naming the `redis` extra, since it is not installed);
#   - py.typed in each package;
# and prints the environment's size (the vendor's install must stay under 1.5 GB).
#
#   bash scripts/check_wheel_install.sh          builds with .venv's `build`; work in /tmp/hicache-wheel-check
#
# HICACHE_TORCH (default torch==2.13.0, the CPU build where a local wheel is configured) and
# HICACHE_TORCH_INDEX_URL (e.g. https://download.pytorch.org/whl/cpu) choose torch, as for scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=${HICACHE_WHEEL_DIR:-/tmp/hicache-wheel-check}
torch_requirement=${HICACHE_TORCH:-torch==2.13.0}
limit_mb=1536
started=$(date +%s)
step() { printf -- '--- %s (%ss)\n' "$1" "$(( $(date +%s) - started ))"; }

rm -rf "$work" && mkdir -p "$work/scratch"
step "build the wheel"
.venv/bin/python -m build --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/*.whl)
echo "$(basename "$wheel") ($(du -k "$wheel" | cut -f1) KB)"
.venv/bin/python - "$wheel" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
missing = [f"{package}/py.typed" for package in ("hicache_spec", "hicache_contracts", "hicache_reference")
           if f"{package}/py.typed" not in names]
assert not missing, f"the wheel lacks {missing}"
print("py.typed in hicache_spec, hicache_contracts, hicache_reference")
PY

step "fresh venv: $torch_requirement first, then the wheel with its runtime dependencies"
"${PYTHON:-python3}" -m venv "$work/venv"
pip=("$work/venv/bin/pip" install --disable-pip-version-check --progress-bar off)
if [ -n "${HICACHE_TORCH_INDEX_URL:-}" ]; then
  "${pip[@]}" --index-url "$HICACHE_TORCH_INDEX_URL" "$torch_requirement" >"$work/pip-torch.log" 2>&1 || { cat "$work/pip-torch.log"; exit 1; }
else
  "${pip[@]}" "$torch_requirement" >"$work/pip-torch.log" 2>&1 || { cat "$work/pip-torch.log"; exit 1; }
fi
"${pip[@]}" "$wheel" >"$work/pip-wheel.log" 2>&1 || { cat "$work/pip-wheel.log"; exit 1; }
"$work/venv/bin/python" -m pip list --disable-pip-version-check --format freeze | tr '\n' ' '; echo
for unwanted in redis hiredis pytest; do
  if "$work/venv/bin/python" -m pip show --disable-pip-version-check "$unwanted" >/dev/null 2>&1; then
    echo "$unwanted was installed without its extra" >&2; exit 1
  fi
done
size_mb=$(du -sm "$work/venv" | cut -f1)
echo "vendor install (torch, the wheel, its runtime dependencies): ${size_mb} MB"
[ "$size_mb" -lt "$limit_mb" ] || { echo "over ${limit_mb} MB" >&2; exit 1; }

cd "$work/scratch"   # nothing of the clone is importable from here
step "every public module's names import from the wheel"
"$work/venv/bin/python" - <<'PY'
import importlib, pkgutil
from hicache_contracts.errors import MissingExtra

NEEDS_REDIS = ("hicache_reference.backends.redis",)
imported, names = 0, 0
for package in ("hicache_spec", "hicache_contracts", "hicache_reference"):
    root = importlib.import_module(package)
    assert "/venv/" in root.__file__, f"{package} not from the wheel: {root.__file__}"
    modules = [package] + [info.name for info in pkgutil.walk_packages(root.__path__, package + ".")]
    for name in modules:
        if any(part.startswith("_") for part in name.split(".")) or name.endswith(("pytest_plugin", "pytest_items")):
            continue  # private modules; the plugins and their shared items are loaded by pytest (checked below)
        try:
            module = importlib.import_module(name)
        except MissingExtra as error:
            assert name.startswith(NEEDS_REDIS) and error.extra == "redis", f"{name}: {error}"
            continue
        imported += 1
        for attribute in getattr(module, "__all__", ()):
            if (name, attribute) in {("hicache_reference.backends", "RedisBackend"),
                                     ("hicache_reference.sglang_adapter", "SGLangRedisBackend")}:
                try:
                    getattr(module, attribute)
                except MissingExtra as error:
                    assert "pip install 'hicache-spec[redis]'" in str(error), error
                    continue
                raise AssertionError(f"{name}.{attribute} imported without the redis extra")
            getattr(module, attribute)
            names += 1
print(f"{imported} public modules, {names} names of their __all__; RedisBackend asks for the redis extra")
PY

step "hicache-conform run: the main job (reference backends and controller), smoke profile"
"$work/venv/bin/hicache-conform" run --profile smoke --seed 1 --quiet --no-color | tail -n 3

step "a vendor's backend: the init skeleton filled in with a dict, through the suite"
"$work/venv/bin/hicache-conform" init my_store >/dev/null
"$work/venv/bin/python" - <<'PY'
from pathlib import Path

path = Path("my_store.py")
text = path.read_text()
marker = "    # ---------------------------------------------------------------- storage calls: fill these in"
path.write_text(text[: text.index(marker)] + '''    def connect(self, extra_config):
        self.objects = OBJECTS

    def store(self, name, data):
        self.objects[name] = data
        return True

    def fetch(self, name):
        return self.objects.get(name)

    def contains(self, name):
        return name in self.objects

    def delete_namespace(self, prefix):
        for name in [name for name in self.objects if name.startswith(prefix)]:
            del self.objects[name]


OBJECTS: dict = {}
''')
PY
"$work/venv/bin/hicache-conform" run --backend my_store:MyStore --profile smoke --seed 1 --quiet --no-color | tail -n 3

step "the pytest plugin (extra pytest) on a few checks of that backend"
"${pip[@]}" "$wheel[pytest]" >"$work/pip-pytest.log" 2>&1 || { cat "$work/pip-pytest.log"; exit 1; }
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider --hicache-backend my_store:MyStore --hicache-profile smoke \
  -k "v1_" 2>&1 | tail -n 3
echo "with pytest: $(du -sm "$work/venv" | cut -f1) MB"
cd "$repo"
step "done"
