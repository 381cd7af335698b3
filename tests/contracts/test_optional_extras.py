"""What needs an extra says so: the reference Redis backend without the ``redis`` extra.

Scenario: a process where the Redis client library cannot be imported (as in
a vendor's environment that installed the project without the ``redis``
extra) imports the project, the reference backends and the SGLang adapter,
then asks for ``RedisBackend`` and ``SGLangRedisBackend``.
Expected: everything else imports; each Redis name raises ``MissingExtra``
(an ImportError) naming what needs it, the missing package and the command
that installs the extra. The runtime dependencies hold no Redis client, no
pytest.
Why it matters: a vendor installs what their backend needs, and a missing
piece names its own fix.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from hicache_contracts.errors import MissingExtra

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

PROJECT = Path(__file__).resolve().parents[2]

WITHOUT_REDIS = """
import sys
sys.modules["redis"] = None  # import redis raises ImportError, as where the extra is not installed
import hicache_spec, hicache_contracts, hicache_reference
from hicache_contracts.errors import MissingExtra
from hicache_reference.backends import FileBackend, MemoryBackend
from hicache_reference import sglang_adapter
from hicache_reference.sglang_adapter import SGLangFileBackend, SGLangMemoryBackend
for module, name in ((__import__("hicache_reference.backends").backends, "RedisBackend"), (sglang_adapter, "SGLangRedisBackend")):
    try:
        getattr(module, name)
    except MissingExtra as error:
        print(name, "|", error.extra, "|", error.name, "|", error)
"""


def test_without_the_redis_extra_the_redis_backend_names_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_REDIS], capture_output=True, text=True, cwd=PROJECT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    message = (
        "the reference Redis backend (RedisBackend, SGLangRedisBackend) needs the 'redis' package, which the "
        "'redis' extra installs: pip install 'hicache-spec[redis]' (or pip install -e '.[redis]' in a clone)"
    )
    assert done.stdout.splitlines() == [
        f"RedisBackend | redis | redis | {message}",
        f"SGLangRedisBackend | redis | redis | {message}",
    ]


def test_a_missing_extra_is_an_import_error_that_pickles() -> None:
    error = MissingExtra("redis", "the reference Redis backend", "redis")
    assert isinstance(error, ImportError) and error.name == "redis" and error.extra == "redis"
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.name, copy.extra) == (MissingExtra, str(error), "redis", "redis")


def test_the_runtime_dependencies_leave_redis_and_pytest_to_extras() -> None:
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    names = {requirement.split(">")[0].split("=")[0].split("<")[0] for requirement in project["dependencies"]}
    assert names == {"pydantic", "torch", "numpy", "hypothesis", "pyyaml"}
    extras = project["optional-dependencies"]
    assert extras["redis"] == ["redis>=5", "hiredis>=2"] and extras["pytest"] == ["pytest>=7.4"]
    assert {"pytest>=7.4", "redis>=5", "hiredis>=2"} <= set(extras["test"])  # scripts/setup.sh installs test
