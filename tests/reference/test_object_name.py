"""The structured object name (``ObjectName``) and the names each reference backend derives from it (NS-6, NS-7).

Scenario: names of arbitrary keys and pools under real namespaces, rendered
and parsed; the memory names, the file backend's relative paths and the Redis
(key, field) pairs compared with the layout users' data already has on disk
and in Redis (the formulas below, and literal examples).
Expected: ``parse`` inverts ``to_str``; every backend's names are byte for
byte what they were; ``storage_name`` is ``to_str``.
Planted: a parse that splits at the first '/', a name that leaves the pool
unescaped, a Redis layout that drops the key's escaping.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from hicache_contracts import HiCacheStorageConfig, HostPagePool
from hicache_reference.backends import FileBackend, MemoryBackend, ObjectName, RedisBackend, storage_name
from hicache_reference.backends.namespace import _safe, namespace_for

NAMESPACES = [
    namespace_for(HiCacheStorageConfig.single_rank(model_name="m")),
    namespace_for(HiCacheStorageConfig.single_rank(model_name="org/model é", tp_size=4, tp_rank=3)),
    namespace_for(HiCacheStorageConfig.single_rank(model_name="mla", tp_size=2, is_mla_model=True)),
]
POOLS = ["kv", "indexer", "swa", "a/b", "%", ".."]
keys = st.text(min_size=1, max_size=12)


# ---------------------------------------------------------------- the layout users' data has (written out)
def old_memory_name(namespace: str, key: str, pool: str) -> str:
    return f"{namespace}/{_safe(pool)}/{_safe(key)}"


def old_file_component(text: str) -> str:
    if text in (".", ".."):
        return text.replace(".", "%2e")
    return "%h" + hashlib.sha256(text.encode()).hexdigest() if len(text) > 200 else text


def old_file_name(namespace: str, key: str, pool: str) -> str:
    return f"{namespace}/{old_file_component(_safe(pool))}/{old_file_component(_safe(key))}"


def old_redis_location(prefix: str, namespace: str, key: str, pool: str) -> tuple[str, str]:
    return f"{prefix}{namespace}/{_safe(key)}", _safe(pool)


# ---------------------------------------------------------------- checks
def check_round_trip(parse: Callable[[str], ObjectName], name: ObjectName) -> None:
    parsed = parse(name.to_str())
    assert (parsed.namespace, parsed.pool, parsed.key) == (name.namespace, name.pool, name.key), name


def check_names_unchanged(memory: Any, files: Any, redis_backend: Any, key: str, pool: str) -> None:
    namespace = memory.namespace
    assert memory._name(key, pool) == old_memory_name(namespace, key, pool) == storage_name(namespace, key, pool)
    assert memory._names([key, key], pool) == [old_memory_name(namespace, key, pool)] * 2
    assert files._name(key, pool) == old_file_name(namespace, key, pool)
    assert files._names([key, key], pool) == [old_file_name(namespace, key, pool)] * 2
    expected = old_redis_location("hicache:", namespace, key, pool)
    assert redis_backend.storage_location(key, pool) == expected
    assert [redis_backend._locate(name) for name in redis_backend._names([key], pool)] == [expected]


@pytest.fixture(scope="module")
def backends(tmp_path_factory: Any) -> tuple[Any, Any, Any]:
    config = HiCacheStorageConfig.single_rank(model_name="org/model é", tp_size=2, tp_rank=1)
    path = str(tmp_path_factory.mktemp("pages"))
    # The Redis constructor contacts no server: names and locations need none.
    return MemoryBackend(config), FileBackend(config, {"path": path}), RedisBackend(config, {})


@pytest.mark.clause("NS-6")
@given(st.sampled_from(NAMESPACES), st.sampled_from(POOLS) | st.text(min_size=1, max_size=6), keys)
def test_parse_inverts_to_str(namespace: str, pool: str, key: str) -> None:
    check_round_trip(ObjectName.parse, ObjectName(namespace, pool, key))


@pytest.mark.clause("NS-6", "NS-7")
@given(st.sampled_from(POOLS), keys | st.sampled_from(["3fa9" * 16, ".", "..", "x" * 201, "é/%"]))
def test_every_backend_names_pages_as_before(backends: tuple[Any, Any, Any], pool: str, key: str) -> None:
    check_names_unchanged(*backends, key, pool)


@pytest.mark.clause("NS-6", "NS-7")
def test_names_match_the_stored_layout_literally(tmp_path: Any) -> None:
    config = HiCacheStorageConfig.single_rank(model_name="org/m", tp_size=2, tp_rank=1)
    pool = HostPagePool(2, 4, 1, 1, 2, dtype=torch.float16, pin_memory=False)
    files = FileBackend(config, {"path": str(tmp_path)})
    files.register_mem_pool_host(pool)
    assert files.batch_set_v1(["ab12", "a b"], torch.arange(8)) == [True, True]
    assert files.namespace == "org%2fm/pp0of1/cp0of1/tp1of2/fmt-layer_first.float16.p4.e16"  # NS-9
    folder = os.path.join(
        str(tmp_path), "org%2fm", "pp0of1", "cp0of1", "tp1of2", "fmt-layer_first.float16.p4.e16", "kv"
    )
    assert sorted(os.listdir(folder)) == ["a%20b", "ab12"]
    assert storage_name("org%2fm/pp0of1/cp0of1/tp1of2", "a b", "kv") == "org%2fm/pp0of1/cp0of1/tp1of2/kv/a%20b"
    redis_backend = RedisBackend(config, {"key_prefix": "hc:"})
    assert redis_backend.storage_location("a b", "indexer") == ("hc:org%2fm/pp0of1/cp0of1/tp1of2/a%20b", "indexer")
    assert redis_backend._locate("org%2fm/pp0of1/cp0of1/tp1of2/kv/a%20b") == redis_backend.storage_location("a b")


@pytest.mark.clause("NS-6")
@pytest.mark.parametrize("text", ["nokey", "/kv/k", "m/kv/%zz", "m/kv/%ff", "m/kv/a b", "m/kv/%2F"])
def test_text_no_name_gives_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not an"):
        ObjectName.parse(text)


# ---------------------------------------------------------------- planted bugs
def parse_at_first_slash(text: str) -> ObjectName:
    namespace, pool, key = text.split("/", 2)
    return ObjectName(namespace, pool, key)


class PoolLeftUnescaped(ObjectName):
    def to_str(self, component: Any = None) -> str:
        return f"{self.namespace}/{self.pool}/{_safe(self.key)}"


class KeyLeftUnescaped(RedisBackend):
    def _locate(self, name: Any) -> tuple[str, str]:
        return f"{self.settings.key_prefix}{name.namespace}/{name.key}", name.escaped_pool


@pytest.mark.clause("NS-6")
def test_round_trip_check_catches_planted_bugs() -> None:
    with pytest.raises(AssertionError):
        check_round_trip(parse_at_first_slash, ObjectName(NAMESPACES[0], "kv", "k"))
    check_round_trip(ObjectName.parse, PoolLeftUnescaped(NAMESPACES[0], "kv", "k"))  # a plain pool hides it
    with pytest.raises(AssertionError):
        check_round_trip(ObjectName.parse, PoolLeftUnescaped(NAMESPACES[0], "a/b", "k"))


@pytest.mark.clause("NS-6", "NS-7")
def test_layout_check_catches_a_redis_key_left_unescaped(backends: tuple[Any, Any, Any]) -> None:
    memory, files, redis_backend = backends
    planted = KeyLeftUnescaped(redis_backend.storage_config, {})
    check_names_unchanged(memory, files, planted, "3fa9", "kv")  # a plain key escapes to itself
    with pytest.raises(AssertionError):
        check_names_unchanged(memory, files, planted, "a b", "kv")
