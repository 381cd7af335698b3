"""The Redis reference backend, standalone and Redis Cluster: the vendor suite, the reference checks,
Redis-only behaviour and planted bugs; its settings are ``test_redis_settings``, its faults
``test_redis_backend_faults``.

Shared servers come from ``tests.redis_support`` (the CI ones of ``.ci/services.sh``);
without them the tests skip, or fail when ``HICACHE_REQUIRE_REDIS=1``. Each test
works under its own key prefix and model name and deletes only its own keys.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from hicache_contracts import PoolName, PoolTransfer
from hicache_contracts.conformance import FAIL, SKIP, BackendFactory, SuiteOptions, level_clause_ids, run_suite
from hicache_reference.backdoors import RedisBackdoor
from hicache_reference.backends.redis_backend import RedisBackend, RedisNodes, RedisSettings
from tests.redis_support import (
    MODES,
    delete_prefix,
    free_port,
    raw_clients,
    require_mode,
    unique_key_prefix,
    unique_model_name,
)
from tests.reference.backend_checks import (
    Harness,
    assert_vendor_check_fails,
    clause_check,
    config,
    fill_pages,
    make_pool,
    page_bytes,
    page_keys,
    slots_of,
    write_pages,
)
from tests.reference.reference_checks import ReferenceBackendTests, check_storage_error_is_a_failure

pytestmark = pytest.mark.redis


def backend_clause_ids(levels: tuple) -> tuple:
    """Every clause ID of the given backend levels (what the vendor suite checks for them)."""
    return tuple(clause_id for level in levels for clause_id in level_clause_ids(level))


FAST_RECOVERY = {"reconnect_interval_seconds": 0.05, "socket_timeout": 2.0, "socket_connect_timeout": 1.0}
"""Extra config for fault tests: a failed node is tried again after 50 ms."""


# ================================================================== harness over a shared server
class RawRedis:
    """A backdoor to the servers of an extra config: plain HSET/HGET/HDEL routed by key, SCAN on every master."""

    def __init__(self, extra: dict) -> None:
        self.extra = extra
        if "redis_cluster_nodes" in extra:
            nodes = [node.rpartition(":") for node in extra["redis_cluster_nodes"]]
            self.client: Any = RedisCluster(
                startup_nodes=[ClusterNode(host, int(port)) for host, _, port in nodes],
                socket_timeout=5,
                require_full_coverage=False,
            )
        else:
            self.client = redis.Redis.from_url(extra["redis_url"], socket_timeout=5)

    def keys(self, prefix: str) -> list[bytes]:
        found = []
        for client in raw_clients(self.extra):
            found.extend(client.scan_iter(match=prefix + "*", count=1000))
            client.close()
        return found

    def close(self) -> None:
        self.client.close()


class RedisHarness(Harness):
    """Builds Redis backends under one fresh key prefix; backdoors go straight to the Redis hash of a page."""

    def __init__(self, server_extra: dict, backend_cls: type = RedisBackend, **extra: Any) -> None:
        self.server_extra = dict(server_extra)
        self.key_prefix = unique_key_prefix()
        super().__init__(backend_cls, {**server_extra, "key_prefix": self.key_prefix, **extra})
        self.raw = RawRedis(server_extra)
        self.backdoor = RedisBackdoor(self.raw.client)
        self.built: list[Any] = []

    def make(self, storage_config: Any = None, **arguments: Any) -> Any:
        backend = super().make(storage_config, **arguments)
        self.built.append(backend)
        return backend

    def plant(self, backend: Any, key: str, data: bytes, pool: str = "kv") -> None:
        self.raw.client.hset(*backend.storage_location(key, pool), bytes(data))

    def peek(self, backend: Any, key: str, pool: str = "kv") -> Optional[bytes]:
        return self.raw.client.hget(*backend.storage_location(key, pool))

    def remove(self, backend: Any, key: str, pool: str = "kv") -> None:
        self.raw.client.hdel(*backend.storage_location(key, pool))

    def object_count(self) -> int:
        return sum(self.raw.client.hlen(key) for key in self.raw.keys(self.key_prefix))

    def close(self) -> None:
        for backend in self.built:
            backend.close()
        delete_prefix(self.server_extra, self.key_prefix)
        self.raw.close()


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def server_extra(mode: str) -> dict:
    return require_mode(mode)


@pytest.fixture
def redis_harness(server_extra: dict) -> Any:
    harness = RedisHarness(server_extra)
    yield harness
    harness.close()


def dead_server_extra(mode: str) -> dict:
    """The ``extra_config`` of a server (``mode``) at a port nothing listens on, recovering fast."""
    port = free_port()
    extra = (
        {"redis_url": f"redis://127.0.0.1:{port}/0"}
        if mode == "standalone"
        else {"redis_cluster_nodes": [f"127.0.0.1:{port}"]}
    )
    return {**extra, **FAST_RECOVERY}


def dead_nodes(mode: str) -> RedisNodes:
    """Nodes that point at a port nothing listens on: every command fails, as with a dead server."""
    return RedisNodes(RedisSettings.from_extra_config(dead_server_extra(mode)))


class TestRedisBackend(ReferenceBackendTests):
    """The vendor suite and the reference checks, against Redis standalone and cluster."""

    @pytest.fixture
    def harness(self, redis_harness: RedisHarness) -> Harness:
        return redis_harness

    @pytest.mark.clause("BE-5")
    def test_dead_server_is_a_failure(self, harness: Harness, mode: str) -> None:
        """The backend pointed at a dead server: every round trip fails as it would in production."""

        def break_storage(backend: Any) -> None:
            backend.nodes = dead_nodes(mode)

        check_storage_error_is_a_failure(harness, break_storage)


# ================================================================== layout
def _v2_write(backend: Any, keys: list[str], pages: list[int], seed: int = 1) -> tuple[Any, dict]:
    """Write KV and a KV-derived indexer sidecar for ``keys`` from ``pages``; return (indexer pool, result)."""
    indexer = getattr(backend, "_test_indexer", None)
    if indexer is None:
        indexer = backend._test_indexer = make_pool(
            kind="mla", layer_num=1, head_dim=4, page_count=backend.mem_pool_host.page_count
        )
        backend.register_mem_host_pool_v2(indexer, PoolName.INDEXER)
    fill_pages(backend.mem_pool_host, pages, seed)
    fill_pages(indexer, pages, seed + 1)
    kv = PoolTransfer(name="kv", keys=keys, host_indices=slots_of(backend.mem_pool_host, pages))  # type: ignore[arg-type]
    derived = PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")  # type: ignore[arg-type]
    return indexer, backend.batch_set_v2([kv, derived])


@pytest.mark.clause("BE-22", "BE-7", "NS-6")
def test_one_hash_per_page_holds_every_pool(redis_harness: RedisHarness) -> None:
    backend = redis_harness.make(config(model_name=unique_model_name()))
    keys = page_keys(3, start=700)
    indexer, result = _v2_write(backend, keys, [0, 1, 2])
    assert result == {"kv": [True] * 3, "indexer": [True] * 3}
    stored = sorted(redis_harness.raw.keys(redis_harness.key_prefix))
    expected_keys = sorted(backend.storage_location(key)[0].encode() for key in keys)
    assert stored == expected_keys, "one Redis key per page, nothing else"
    for page, key in enumerate(keys):
        redis_key, _ = backend.storage_location(key)
        fields = redis_harness.raw.client.hgetall(redis_key)
        assert set(fields) == {b"kv", b"indexer"}
        assert fields[b"kv"] == page_bytes(backend.mem_pool_host, page)
        assert fields[b"indexer"] == page_bytes(indexer, page)
    assert backend.storage_location(keys[0]) == (f"{redis_harness.key_prefix}{backend.namespace}/{keys[0]}", "kv")


@pytest.mark.clause("BE-10")
def test_cluster_spreads_pages_over_every_master() -> None:
    extra = require_mode("cluster")
    harness = RedisHarness(extra)
    try:
        backend = harness.make(pool=make_pool(page_count=128))
        keys = page_keys(128, start=800)
        assert write_pages(backend, keys, list(range(128))) == [True] * 128
        per_master = []
        for client in raw_clients(extra):
            per_master.append(len(list(client.scan_iter(match=harness.key_prefix + "*", count=1000))))
            client.close()
        assert sum(per_master) == 128
        assert len(per_master) >= 3 and all(count > 0 for count in per_master), per_master
    finally:
        harness.close()


# ================================================================== TTL: expiry drops a page whole
@clause_check
def check_ttl_expiry(harness: RedisHarness, ttl: float = 0.3, wait: float = 5.0) -> None:
    """A page expires ttl after its last write, all its pools at once; meanwhile it is seen whole or not at all."""
    backend = harness.make(config(model_name=unique_model_name()), ttl_seconds=ttl)
    keys = page_keys(4, start=720)
    _, result = _v2_write(backend, keys, [0, 1, 2, 3])
    assert result == {"kv": [True] * 4, "indexer": [True] * 4}
    derived_query = [PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")]  # type: ignore[arg-type]
    assert backend.batch_exists(keys) == 4
    for key in keys:
        redis_key, _ = backend.storage_location(key)
        remaining = harness.raw.client.pttl(redis_key)
        assert 0 < remaining <= ttl * 1000, f"page key without the configured TTL (pttl {remaining})"
    deadline = time.monotonic() + wait
    while True:
        kv_hits = backend.batch_exists(keys)
        folded = backend.batch_exists_v2(keys, derived_query).kv_hit_pages
        assert folded <= kv_hits
        if kv_hits == 0:
            break
        assert time.monotonic() < deadline, f"pages still present {wait} s after a TTL of {ttl} s"
        time.sleep(0.05)
    leftovers = harness.raw.keys(harness.key_prefix)
    assert leftovers == [], f"a page's pools must expire together; left behind: {leftovers}"


@pytest.mark.clause("BE-22", "BE-17")
def test_ttl_expiry(redis_harness: RedisHarness) -> None:
    check_ttl_expiry(redis_harness)


# ================================================================== clear
@pytest.mark.clause("NS-8", "BE-11")
def test_clear_leaves_foreign_keys(redis_harness: RedisHarness) -> None:
    """clear() deletes this namespace's pages on every master, and nothing else on the server."""
    backend = redis_harness.make(config(model_name=unique_model_name()), pool=make_pool(page_count=64))
    sibling = redis_harness.make(config(model_name=backend.storage_config.model_name + "-2"))
    keys = page_keys(64, start=740)
    assert write_pages(backend, keys, list(range(64))) == [True] * 64
    assert write_pages(sibling, keys[:2], [0, 1]) == [True, True]
    foreign = [f"{redis_harness.key_prefix}not-a-page", f"{redis_harness.key_prefix}{backend.namespace}"]
    for name in foreign:
        redis_harness.raw.client.set(name, b"keep me")
    backend.clear()
    assert backend.batch_exists(keys) == 0
    assert sibling.batch_exists(keys[:2]) == 2
    for name in foreign:
        assert redis_harness.raw.client.get(name) == b"keep me"


class ClearByModelPattern(RedisBackend):
    """Clears with a pattern on the model name alone: every rank and every model sharing the stem goes too."""

    def namespace_pattern(self, namespace: Optional[str] = None) -> str:
        return f"{self.settings.key_prefix}{(namespace or self.namespace).split('/')[0]}*"


@pytest.mark.clause("NS-8")
def test_clear_check_catches_planted_bug(redis_harness: RedisHarness) -> None:
    assert_vendor_check_fails(redis_harness.using(ClearByModelPattern), "clear_removes_only_its_own_namespace")


# ================================================================== planted bugs for TTL and errors
class IgnoresTtl(RedisBackend):
    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self._ttl_milliseconds = None


class SidecarsInOwnKeysWithoutTtl(RedisBackend):
    """Keeps sidecars in keys of their own and applies the TTL to KV only: a sidecar outlives its page."""

    def _locate(self, name: str) -> tuple[str, str]:
        redis_key, pool = super()._locate(name)
        return (redis_key, pool) if pool == "kv" else (f"{redis_key}/{pool}", pool)

    def _write_objects(self, names: Any, datas: Any, groups: Any) -> list[bool]:
        if all(super(SidecarsInOwnKeysWithoutTtl, self)._locate(name)[1] == "kv" for name in names):
            return super()._write_objects(names, datas, groups)
        saved, self._ttl_milliseconds = self._ttl_milliseconds, None
        try:
            return super()._write_objects(names, datas, groups)
        finally:
            self._ttl_milliseconds = saved


class LetsRedisErrorsOut(RedisBackend):
    """Turns a failed round trip into an exception, as a backend without BE-5 handling would."""

    def _guarded(self, primitive: Any, on_error: Any, *arguments: Any) -> Any:
        return primitive(*arguments)

    def _execute(self, units: Any, sinks: Any = None) -> list[Any]:
        outcomes = super()._execute(units, sinks)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return outcomes


@pytest.mark.clause("BE-22")
@pytest.mark.parametrize("buggy_class", [IgnoresTtl, SidecarsInOwnKeysWithoutTtl])
def test_ttl_check_catches_planted_bug(redis_harness: RedisHarness, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check_ttl_expiry(redis_harness.using(buggy_class), wait=1.0)


@pytest.mark.clause("BE-5")
def test_storage_error_check_catches_planted_bug(redis_harness: RedisHarness, mode: str) -> None:
    def break_storage(backend: Any) -> None:
        backend.nodes = dead_nodes(mode)

    with pytest.raises(AssertionError):
        check_storage_error_is_a_failure(redis_harness.using(LetsRedisErrorsOut), break_storage)


# ================================================================== concurrency across instances
@pytest.mark.clause("BE-23", "BE-7", "BE-22")
def test_readers_never_see_a_page_in_part(redis_harness: RedisHarness) -> None:
    """While one instance writes KV and its sidecar, another never finds KV without the sidecar or wrong bytes."""
    model = unique_model_name()
    writer = redis_harness.make(config(model_name=model), pool=make_pool(page_count=64))
    reader = redis_harness.make(config(model_name=model), pool=make_pool(page_count=64))
    reader_indexer = make_pool(kind="mla", layer_num=1, head_dim=4, page_count=64)
    reader.register_mem_host_pool_v2(reader_indexer, PoolName.INDEXER)
    keys = page_keys(32, start=1100)
    done = threading.Event()
    problems: list[str] = []
    expected: dict[str, bytes] = {}

    def write() -> None:
        try:
            for start in range(0, 32, 4):
                batch = keys[start : start + 4]
                pages = list(range(start, start + 4))
                _, result = _v2_write(writer, batch, pages, seed=start)
                for key, page in zip(batch, pages):
                    expected[key] = page_bytes(writer.mem_pool_host, page)
                if result["kv"] != [True] * 4:
                    problems.append(f"write failed: {result}")
        finally:
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    derived = [PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")]  # type: ignore[arg-type]
    deadline = time.monotonic() + 30
    while True:
        finished = done.is_set()  # one more full check after the writer is done
        kv_hits = reader.batch_exists(keys)
        if reader.batch_exists_v2(keys, derived).kv_hit_pages < kv_hits:
            problems.append("a KV page was visible without its sidecar")
        got = reader.batch_get_v2(
            [
                PoolTransfer(
                    name="kv",  # type: ignore[arg-type]
                    keys=keys[:kv_hits],  # type: ignore[arg-type]
                    host_indices=slots_of(reader.mem_pool_host, list(range(kv_hits))),
                ),
                PoolTransfer(name="indexer", keys=keys[:kv_hits], indices_from_pool="kv"),  # type: ignore[arg-type]
            ]
        )
        if got["kv"] != [True] * kv_hits or got["indexer"] != [True] * kv_hits:
            problems.append(f"a page found by the hit query did not read whole: {got}")
        if finished or problems or time.monotonic() > deadline:
            break
    thread.join(30)
    assert not problems, problems[0]
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, list(range(32)))) == [True] * 32
    assert [page_bytes(reader.mem_pool_host, page) for page in range(32)] == [expected[key] for key in keys]


# ================================================================== the vendor conformance suite
def run_conformance(server_extra: dict, backend_cls: type, mode: str, checks: Optional[tuple] = None) -> Any:
    """Run the vendor suite (smoke profile) against ``backend_cls`` on the shared server of ``mode``."""
    factory = BackendFactory(
        backend_cls,
        {**server_extra, "key_prefix": unique_key_prefix()},
        name=f"{backend_cls.__module__}:{backend_cls.__qualname__}",
    )
    report = run_suite(factory, SuiteOptions(profile="smoke", checks=checks), title=f"{backend_cls.__name__} ({mode})")
    assert factory.extra_config is not None
    delete_prefix(server_extra, factory.extra_config["key_prefix"])
    return report


@pytest.mark.clause(*backend_clause_ids(RedisBackend.hicache_levels))
def test_conformance_suite_passes_every_claimed_level(server_extra: dict, mode: str) -> None:
    report = run_conformance(server_extra, RedisBackend, mode)
    (section,) = report.sections
    claimed = {verdict.level for verdict in section.levels if verdict.claimed}
    assert claimed == set(RedisBackend.hicache_levels), section.levels
    failing = [verdict.clause_id for verdict in section.clauses if verdict.status == FAIL]
    skipped = [verdict.clause_id for verdict in section.clauses if verdict.status == SKIP]
    # BE-13 is legacy-only (the backend claims v1); BE-5 needs a fault hook the backend does not offer; BE-32
    # binds only a backend that offers describe_l3_object_layout
    assert report.exit_code == 0 and not failing and set(skipped) <= {"BE-5", "BE-13", "BE-32"}, report.render_text()


@pytest.mark.clause("NS-8")
def test_conformance_suite_catches_planted_bug() -> None:
    report = run_conformance(
        require_mode("standalone"), ClearByModelPattern, "standalone", checks=("clear_removes_only_its_own_namespace",)
    )
    assert report.exit_code != 0
    (section,) = report.sections
    assert [verdict.status for verdict in section.clauses if verdict.clause_id == "NS-8"] == [FAIL]
