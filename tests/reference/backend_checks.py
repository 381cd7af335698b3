"""Clause checks for the reference backends, shared by the memory and file backend tests.

Each ``check_*`` function builds backends through a ``Harness`` and raises
AssertionError when the backend breaks its clause. The test files run every
check on the real backend and on planted-bug subclasses (``pytest.raises``),
so each check is seen to fail. ``BackendClauseTests`` runs every generic check
for the backend a subclass's ``harness`` fixture builds.

A ``Harness`` builds instances of one backend class that share one store (a
named memory store, or one directory), and has backdoors that bypass the API
under test: ``plant`` writes a raw object, ``peek`` reads one, ``remove``
deletes one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import threading
import weakref
from typing import Any, Callable, Optional

import pytest
import torch

from hicache_contracts import (
    ContractViolation,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
)
from hicache_contracts.capabilities import detect_capabilities
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import MemoryBackend, storage_name
from hicache_spec import STORAGE_BATCH_SIZE
from tests.oracles import plain_fold

PAGE_SIZE = 4
"""Tokens per page in every test pool."""


# ================================================================== data helpers
def page_key(number: int) -> str:
    """Return a distinct 64-hex page key."""
    return hashlib.sha256(f"page-{number}".encode()).hexdigest()


def page_keys(count: int, start: int = 0) -> list[str]:
    return [page_key(number) for number in range(start, start + count)]


def make_pool(page_count: int = 16, kind: str = "mha", layout: str = "page_first", **overrides: Any) -> HostPagePool:
    arguments = dict(
        page_count=page_count,
        page_size=PAGE_SIZE,
        layer_num=2,
        head_num=1 if kind == "mla" else 2,
        head_dim=8,
        kind=kind,
        layout=layout,
        dtype=torch.float16,
    )
    arguments.update(overrides)
    return HostPagePool(**arguments)


def slots_of(pool: HostPagePool, pages: list[int]) -> torch.Tensor:
    """Return the host_indices of the given pool pages, page by page."""
    return (
        torch.cat([torch.arange(page * pool.page_size, (page + 1) * pool.page_size) for page in pages])
        if pages
        else torch.empty(0, dtype=torch.int64)
    )


def fill_pages(pool: HostPagePool, pages: list[int], seed: int) -> None:
    """Write distinct random data into each page."""
    for offset, page in enumerate(pages):
        generator = torch.Generator().manual_seed(seed * 1000 + offset)
        data = torch.randn(pool.page_element_count, generator=generator).to(pool.dtype)
        pool.set_from_flat_data_page(page * pool.page_size, data)


def page_bytes(pool: HostPagePool, page: int) -> bytes:
    return bytes(pool.get_data_page(page * pool.page_size).view(torch.uint8).tolist())


def sentinel_fill(pool: HostPagePool, value: float = 7.0) -> None:
    pool.kv_buffer.fill_(value)


def config(**overrides: Any) -> HiCacheStorageConfig:
    return HiCacheStorageConfig.single_rank(model_name=overrides.pop("model_name", "test-model"), **overrides)


def extra_info_shapes() -> list[Any]:
    """Every shape of extra_info a backend must accept (BE-8)."""
    return [
        None,
        HiCacheStorageExtraInfo(),
        HiCacheStorageExtraInfo(prefix_keys=None),
        HiCacheStorageExtraInfo(prefix_keys=[]),
        HiCacheStorageExtraInfo(prefix_keys=page_keys(3, start=900)),
        HiCacheStorageExtraInfo(prefix_keys=page_keys(2, start=900), extra_info={"unknown": 1, "other": [1]}),
    ]


# ================================================================== check plumbing
def clause_check(function: Callable[..., None]) -> Callable[..., None]:
    """Mark ``function`` as a check: any exception other than AssertionError becomes one.

    A backend must never raise into the engine, so an exception escaping a
    call under check is itself a failed check (BE-4, BE-5).
    """

    @functools.wraps(function)
    def run(*arguments: Any, **keywords: Any) -> None:
        try:
            function(*arguments, **keywords)
        except AssertionError:
            raise
        except Exception as error:
            raise AssertionError(f"{function.__name__}: the backend raised {error!r}") from error

    return run


def expect_violation(call: Callable[[], Any]) -> ContractViolation:
    """Return the ContractViolation ``call`` raises; fail the check if it raises none."""
    try:
        call()
    except ContractViolation as violation:
        return violation
    raise AssertionError("expected a ContractViolation for bad caller input, got none")


# ================================================================== harness
class ForeignPool:
    """A host pool that is not a ``HostPagePool``, as SGLang's would be: backends see only its attributes.

    Everything is delegated to a real pool, so tests can still inspect the bytes.
    """

    def __init__(self, inner: HostPagePool) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Harness:
    """Builds instances of one backend class over one shared store; backdoors bypass the API."""

    def __init__(self, backend_cls: type, extra: dict) -> None:
        self.backend_cls = backend_cls
        self.extra = dict(extra)
        self.pool_wrapper: Optional[Callable[[HostPagePool], Any]] = None

    def using(self, backend_cls: type) -> "Harness":
        """Return a harness for ``backend_cls`` over the same store (for planted bugs)."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.backend_cls = backend_cls
        return clone

    def with_foreign_pools(self) -> "Harness":
        """Return a harness whose backends get host pools that are not ``HostPagePool`` instances."""
        clone = self.using(self.backend_cls)
        clone.pool_wrapper = ForeignPool
        return clone

    def make(
        self, storage_config: Any = None, *, pool: Optional[HostPagePool] = None, register: bool = True, **extra: Any
    ) -> Any:
        """Build a backend (config ``single_rank`` by default) and register a fresh host pool."""
        backend = self.backend_cls(storage_config or config(), {**self.extra, **extra})
        if register:
            pool = pool or make_pool()
            if self.pool_wrapper is not None:
                pool = self.pool_wrapper(pool)
            backend.register_mem_pool_host(pool)
            backend.register_mem_host_pool_v2(pool, PoolName.KV)
        return backend

    def plant(self, backend: Any, key: str, data: bytes, pool: str = "kv") -> None:
        raise NotImplementedError

    def peek(self, backend: Any, key: str, pool: str = "kv") -> Optional[bytes]:
        raise NotImplementedError

    def remove(self, backend: Any, key: str, pool: str = "kv") -> None:
        raise NotImplementedError

    def object_count(self) -> int:
        """Return how many page objects the shared store holds, every namespace together."""
        raise NotImplementedError


class MemoryHarness(Harness):
    def __init__(self, store_name: str, backend_cls: type = MemoryBackend, **extra: Any) -> None:
        super().__init__(backend_cls, {"store": store_name, **extra})

    def _store(self, backend: Any) -> Any:
        return backend.store

    def plant(self, backend: Any, key: str, data: bytes, pool: str = "kv") -> None:
        self._store(backend).put(storage_name(backend.namespace, key, pool), bytes(data))

    def peek(self, backend: Any, key: str, pool: str = "kv") -> Optional[bytes]:
        return self._store(backend).get(storage_name(backend.namespace, key, pool))

    def remove(self, backend: Any, key: str, pool: str = "kv") -> None:
        self._store(backend).delete(storage_name(backend.namespace, key, pool))

    def object_count(self) -> int:
        return len(self.make(register=False).store)


class FileHarness(Harness):
    def __init__(self, path: str, backend_cls: Optional[type] = None, **extra: Any) -> None:
        from hicache_reference.backends import FileBackend

        super().__init__(backend_cls or FileBackend, {"path": path, **extra})
        self.path = path

    def file_of(self, backend: Any, key: str, pool: str = "kv") -> str:
        return os.path.join(self.path, storage_name(backend.namespace, key, pool))

    def plant(self, backend: Any, key: str, data: bytes, pool: str = "kv") -> None:
        target = self.file_of(backend, key, pool)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)

    def peek(self, backend: Any, key: str, pool: str = "kv") -> Optional[bytes]:
        try:
            with open(self.file_of(backend, key, pool), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def remove(self, backend: Any, key: str, pool: str = "kv") -> None:
        os.unlink(self.file_of(backend, key, pool))

    def object_count(self) -> int:
        return sum(len([name for name in files if "%tmp" not in name]) for _, _, files in os.walk(self.path))


# ================================================================== core checks
def write_pages(backend: Any, keys: list[str], pages: list[int], seed: int = 1) -> list[bool]:
    pool = backend.mem_pool_host
    fill_pages(pool, pages, seed)
    return backend.batch_set_v1(keys, slots_of(pool, pages))


@clause_check
def check_accepts_extra_config(harness: Harness) -> None:
    """BE-1: unknown extra keys are ignored; None falls back to the config's extra_config."""
    backend = harness.make(unknown_key="x", backend_name="vendor", interface_v1=1)
    assert write_pages(backend, page_keys(1), [0]) == [True]
    # SGLang's way: the keys in storage_config.extra_config, an empty dict beside it.
    for beside in ({}, None):
        from_config = harness.backend_cls(config(extra_config={**harness.extra, "unknown": 1}), beside)
        assert from_config.batch_exists(page_keys(1)) == 1, (
            "an instance built from config.extra_config must see the page"
        )


@clause_check
def check_leading_run(harness: Harness) -> None:
    """BE-2, BE-3: batch_exists is the leading run of present pages, 0 for [], and changes nothing."""
    backend = harness.make()
    keys = page_keys(5)
    assert write_pages(backend, [keys[0], keys[1], keys[3]], [0, 1, 3]) == [True] * 3
    assert backend.batch_exists([]) == 0
    assert backend.batch_exists(keys) == 2
    assert backend.batch_exists(keys[3:]) == 1
    assert backend.batch_exists(keys[2:]) == 0
    before = harness.object_count()
    assert backend.batch_exists(keys) == 2, "a repeated hit query must give the same answer"
    assert harness.object_count() == before
    result = backend.batch_exists(keys)
    assert type(result) is int


@clause_check
def check_missing_is_a_miss(harness: Harness) -> None:
    """BE-4: a missing key gives None or False in every generation, never an exception."""
    backend = harness.make()
    pool = backend.mem_pool_host
    missing = page_keys(2, start=500)
    assert backend.exists(missing[0]) is False
    assert backend.get(missing[0]) is None
    assert backend.batch_get(missing) == [None, None]
    assert backend.batch_exists(missing) == 0
    assert backend.batch_get_v1(missing, slots_of(pool, [0, 1])) == [False, False]
    result = backend.batch_get_v2([PoolTransfer(name="kv", keys=missing, host_indices=slots_of(pool, [0, 1]))])
    assert result["kv"] == [False, False]
    assert backend.batch_exists_v2(missing).kv_hit_pages == 0


@clause_check
def check_storage_error_is_a_failure(harness: Harness, break_storage: Callable[[Any], None]) -> None:
    """BE-5: with storage failing, every call returns False, 0 or None instead of raising."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(2)
    assert write_pages(backend, keys, [0, 1]) == [True, True]
    break_storage(backend)
    slots = slots_of(pool, [2, 3])
    assert backend.batch_set_v1(page_keys(2, start=10), slots) == [False, False]
    assert backend.batch_get_v1(keys, slots) == [False, False]
    assert backend.batch_exists(keys) == 0
    assert backend.exists(keys[0]) is False
    assert backend.get(keys[0]) is None
    assert backend.set(keys[0], pool.get_data_page(0)) is False
    assert backend.batch_exists_v2(keys).kv_hit_pages == 0
    assert backend.batch_get_v2([PoolTransfer(name="kv", keys=keys, host_indices=slots)])["kv"] == [False, False]
    backend.clear()


@clause_check
def check_idempotent_set(harness: Harness) -> None:
    """BE-6: writing an existing key returns True and leaves the right bytes."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(2)
    assert write_pages(backend, keys, [0, 1], seed=3) == [True, True]
    expected = [page_bytes(pool, 0), page_bytes(pool, 1)]
    assert backend.batch_set_v1(keys, slots_of(pool, [0, 1])) == [True, True], "a second write must succeed"
    assert backend.set(keys[0], pool.get_data_page(0)) is True
    assert backend.batch_set(keys, [pool.get_data_page(0), pool.get_data_page(PAGE_SIZE)]) is True
    reader = harness.make()
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, [4, 5])) == [True, True]
    assert [page_bytes(reader.mem_pool_host, 4), page_bytes(reader.mem_pool_host, 5)] == expected


@clause_check
def check_extra_info_shapes(harness: Harness) -> None:
    """BE-8: every method takes extra_info positionally and by keyword, in every shape."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(2)
    slots = slots_of(pool, [0, 1])
    fill_pages(pool, [0, 1], seed=2)
    for info in extra_info_shapes():
        assert backend.batch_set_v1(keys, slots, info) == [True, True]
        assert backend.batch_set_v1(keys, slots, extra_info=info) == [True, True]
        assert backend.batch_exists(keys, info) == 2
        assert backend.batch_exists(keys, extra_info=info) == 2
        assert backend.batch_get_v1(keys, slots, info) == [True, True]
        assert backend.batch_get_v1(keys, slots, extra_info=info) == [True, True]
        transfer = PoolTransfer(name="kv", keys=keys, host_indices=slots)
        assert backend.batch_exists_v2(keys, None, info).kv_hit_pages == 2
        assert backend.batch_exists_v2(keys, [], extra_info=info).kv_hit_pages == 2
        assert backend.batch_get_v2([transfer], info)["kv"] == [True, True]
        assert backend.batch_get_v2([transfer], extra_info=info)["kv"] == [True, True]
        assert backend.batch_set_v2([transfer], info)["kv"] == [True, True]
        assert backend.batch_set_v2([transfer], extra_info=info)["kv"] == [True, True]


@clause_check
def check_legacy_shapes(harness: Harness) -> None:
    """BE-9: get gives a tensor or None, batch_get one per key, set and batch_set a bool; bytes round trip."""
    backend = harness.make()
    pool = backend.mem_pool_host
    fill_pages(pool, [0, 1], seed=4)
    keys = page_keys(3)
    assert backend.set(keys[0], pool.get_data_page(0)) is True
    assert backend.batch_set(keys[1:2], [pool.get_data_page(PAGE_SIZE)]) is True
    assert backend.set(keys[2], None) is False, "no value: nothing to store"
    got = backend.get(keys[0])
    assert isinstance(got, torch.Tensor) and torch.equal(got, pool.get_data_page(0))
    batch = backend.batch_get(keys)
    assert len(batch) == 3 and batch[2] is None and torch.equal(batch[1], pool.get_data_page(PAGE_SIZE))
    target = torch.empty(pool.page_element_count, dtype=pool.dtype)
    assert backend.get(keys[0], target) is target and torch.equal(target, pool.get_data_page(0))
    short = torch.zeros(3, dtype=pool.dtype)
    assert backend.set(page_key(77), short) is False, "a value shorter than a page must be refused"
    assert backend.exists(page_key(77)) is False


@clause_check
def check_full_batch(harness: Harness) -> None:
    """BE-10: a batch of STORAGE_BATCH_SIZE pages round trips through v1 and v2."""
    count = STORAGE_BATCH_SIZE
    backend = harness.make(pool=make_pool(page_count=count))
    pool = backend.mem_pool_host
    pages = list(range(count))
    keys = page_keys(count)
    assert write_pages(backend, keys, pages, seed=5) == [True] * count
    expected = [page_bytes(pool, page) for page in (0, count // 2, count - 1)]
    assert backend.batch_exists(keys) == count
    reader = harness.make(pool=make_pool(page_count=count))
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, pages)) == [True] * count
    assert [page_bytes(reader.mem_pool_host, page) for page in (0, count // 2, count - 1)] == expected
    result = reader.batch_get_v2(
        [PoolTransfer(name="kv", keys=keys, host_indices=slots_of(reader.mem_pool_host, pages))]
    )
    assert result["kv"] == [True] * count


@clause_check
def check_clear(harness: Harness) -> None:
    """BE-11: clear() never raises and leaves batch_exists 0 for every earlier key; writes work after it."""
    backend = harness.make()
    keys = page_keys(3)
    assert write_pages(backend, keys, [0, 1, 2]) == [True] * 3
    backend.clear()
    assert backend.batch_exists(keys) == 0
    assert backend.exists(keys[0]) is False
    backend.clear()  # clearing an empty namespace is fine too
    assert write_pages(backend, keys[:1], [0]) == [True]
    assert backend.batch_exists(keys) == 1


@clause_check
def check_stats(harness: Harness) -> None:
    """BE-12: get_stats is None or a metrics object with attributes, never a dict."""
    quiet = harness.make()
    stats = quiet.get_stats()
    assert stats is None or (not isinstance(stats, dict) and dataclasses.is_dataclass(stats))
    counted = harness.make(config(enable_storage_metrics=True))
    assert write_pages(counted, page_keys(2), [0, 1]) == [True, True]
    counted.batch_get_v1(page_keys(3), slots_of(counted.mem_pool_host, [2, 3, 4]))
    stats = counted.get_stats()
    assert stats is not None and not isinstance(stats, dict)
    assert stats.pages_written == 2 and stats.pages_read == 2 and stats.read_misses == 1


@clause_check
def check_short_objects_are_misses(harness: Harness) -> None:
    """BE-13: an empty, short or long stored object is a miss everywhere, and a read of it writes nothing."""
    backend = harness.make()
    pool = backend.mem_pool_host
    size = pool.page_bytes
    keys = page_keys(4, start=40)
    harness.plant(backend, keys[0], b"")
    harness.plant(backend, keys[1], b"\x01" * (size // 2))
    harness.plant(backend, keys[2], b"\x01" * (size + 1))
    harness.plant(backend, keys[3], b"\x01" * size)  # the one whole page
    for key in keys[:3]:
        assert backend.exists(key) is False, "a page of the wrong size must not exist"
        assert backend.batch_exists([key]) == 0
        assert backend.get(key) is None
        assert backend.batch_exists_v2([key]).kv_hit_pages == 0
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    assert backend.batch_get_v1(keys[:3], slots_of(pool, [0, 1, 2])) == [False] * 3
    assert torch.equal(pool.kv_buffer, before), "a failed read must not touch the host slots"
    assert backend.batch_get_v1(keys[3:], slots_of(pool, [5])) == [True]


@clause_check
def check_v1_cardinality(harness: Harness) -> None:
    """BE-14: v1 results are lists of exactly len(keys) bools, for hits, misses, mixes and []."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(3)
    for count in (0, 1, 3):
        result = backend.batch_set_v1(keys[:count], slots_of(pool, list(range(count))))
        assert type(result) is list and len(result) == count and all(type(flag) is bool for flag in result)
    mixed = keys[:2] + page_keys(2, start=300)
    result = backend.batch_get_v1(mixed, slots_of(pool, [4, 5, 6, 7]))
    assert result == [True, True, False, False]
    assert backend.batch_get_v1([], torch.empty(0, dtype=torch.int64)) == []


@clause_check
def check_round_trip_between_pools(harness: Harness, kind: str, layout: str) -> None:
    """BE-15, BE-17: bytes written from one pool's slots land exactly in another pool's slots."""
    writer = harness.make(pool=make_pool(kind=kind, layout=layout))
    reader = harness.make(pool=make_pool(kind=kind, layout=layout))
    keys = page_keys(3, start=60)
    assert write_pages(writer, keys, [2, 7, 11], seed=6) == [True] * 3
    expected = [page_bytes(writer.mem_pool_host, page) for page in (2, 7, 11)]
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, [9, 0, 4])) == [True] * 3
    assert [page_bytes(reader.mem_pool_host, page) for page in (9, 0, 4)] == expected
    transfer = PoolTransfer(name="kv", keys=keys, host_indices=slots_of(reader.mem_pool_host, [1, 3, 5]))
    assert reader.batch_get_v2([transfer])["kv"] == [True] * 3
    assert [page_bytes(reader.mem_pool_host, page) for page in (1, 3, 5)] == expected


@clause_check
def check_reads_stay_in_their_slots(harness: Harness) -> None:
    """BE-16: a read writes only the addressed slots of pages that arrived; guards around them stay."""
    writer = harness.make()
    keys = page_keys(4, start=70)
    assert write_pages(writer, [keys[0], keys[2]], [0, 1], seed=7) == [True, True]
    harness.plant(writer, keys[3], b"\x02" * (writer.mem_pool_host.page_bytes - 2))  # short: arrives incomplete
    reader = harness.make()
    pool = reader.mem_pool_host
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    result = reader.batch_get_v1(keys, slots_of(pool, [3, 5, 7, 9]))
    assert result == [True, False, True, False]
    changed = {
        page for page in range(pool.page_count) if page_bytes(pool, page) != bytes(before_page(before, pool, page))
    }
    assert changed == {3, 7}, f"only the slots of pages that arrived may change, changed {sorted(changed)}"
    # Bad host_indices are a caller error: ContractViolation, and nothing written.
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    expect_violation(lambda: reader.batch_get_v1(keys[:1], torch.arange(1, 1 + PAGE_SIZE)))
    expect_violation(lambda: reader.batch_get_v1(keys[:2], slots_of(pool, [0])))
    expect_violation(lambda: reader.batch_get_v1(keys[:1], slots_of(pool, [pool.page_count])))
    assert torch.equal(pool.kv_buffer, before)


def before_page(buffer: torch.Tensor, pool: HostPagePool, page: int) -> list[int]:
    """The bytes a page held in a saved copy of the pool buffer."""
    start = page * pool.page_size
    view = (
        buffer[:, :, start : start + pool.page_size]
        if pool.layout == "layer_first"
        else buffer[:, start : start + pool.page_size]
    )
    return view.contiguous().view(torch.uint8).reshape(-1).tolist()


@clause_check
def check_set_means_readable(harness: Harness) -> None:
    """BE-17: a True from set means a later reader (another instance) gets the page."""
    writer = harness.make()
    keys = page_keys(3, start=80)
    results = write_pages(writer, keys, [0, 1, 2], seed=8)
    reader = harness.make()
    for key, written in zip(keys, results):
        if written:
            assert reader.exists(key), "a page reported written must be readable"
            assert reader.batch_get_v1([key], slots_of(reader.mem_pool_host, [4])) == [True]


@clause_check
def check_every_generation_implemented(harness: Harness) -> None:
    """BE-18: every generation is implemented; no probe returns None; the declared levels hold."""
    backend = harness.make(register=False)
    capabilities = detect_capabilities(backend)
    assert capabilities.legacy and capabilities.v1 and capabilities.v2 and capabilities.prefix
    assert capabilities.returning_none == ()
    assert set(capabilities.declared) >= {"core", "v1", "v2", "prefix", "namespacing", "concurrency"}


@clause_check
def check_v2_cardinality(harness: Harness) -> None:
    """BE-19: v2 get/set give one entry per transfer name with len(keys) bools."""
    backend = harness.make()
    pool = backend.mem_pool_host
    swa = make_pool(layer_num=1)
    backend.register_mem_host_pool_v2(swa, PoolName.SWA)
    keys = page_keys(3, start=90)
    fill_pages(pool, [0, 1, 2], seed=9)
    transfers = [
        PoolTransfer(name="kv", keys=keys, host_indices=slots_of(pool, [0, 1, 2])),
        PoolTransfer(name="swa", keys=keys[1:], host_indices=slots_of(swa, [4, 5])),
    ]
    for call in (backend.batch_set_v2, backend.batch_get_v2):
        result = call(transfers)
        assert set(result) == {"kv", "swa"}
        assert result["kv"] == [True] * 3 and result[PoolName.SWA] == [True] * 2
    assert backend.batch_get_v2([]) == {}
    assert backend.batch_get_v2([PoolTransfer(name="kv", keys=[], host_indices=slots_of(pool, []))])["kv"] == []


@clause_check
def check_unregistered_pool(harness: Harness) -> None:
    """BE-20: a transfer for an unregistered pool gives all False, never an exception."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(2)
    fill_pages(pool, [0, 1], seed=10)
    transfers = [
        PoolTransfer(name="kv", keys=keys, host_indices=slots_of(pool, [0, 1])),
        PoolTransfer(name="mamba", keys=keys, host_indices=slots_of(pool, [2, 3])),
    ]
    assert backend.batch_set_v2(transfers) == {"kv": [True, True], "mamba": [False, False]}
    assert backend.batch_get_v2(transfers) == {"kv": [True, True], "mamba": [False, False]}
    result = backend.batch_exists_v2(keys, [transfers[1]])
    assert result.kv_hit_pages == 0 and "mamba" not in result.extra_pool_hit_pages


@clause_check
def check_v2_exists_folds(harness: Harness, kv_present: tuple, pools: tuple) -> None:
    """BE-21: batch_exists_v2 equals SGLang 0.5.23's fold over KV and every requested pool.

    ``pools`` holds (name, policy, window, presence) as in ``fold_pool_query``; the expected answer is
    ``tests.oracles.plain_fold``, not the spec function the reference backends fold with.
    """
    backend = harness.make()
    backend.clear()
    size = backend.mem_pool_host.page_bytes
    keys = page_keys(len(kv_present), start=100)
    for key, present in zip(keys, kv_present):
        if present:
            harness.plant(backend, key, b"\x03" * size)
    transfers = []
    for name, policy, window, presence in pools:
        sidecar = make_pool(layer_num=1)
        backend.register_mem_host_pool_v2(sidecar, name)
        for key, present in zip(keys, presence):
            if present:
                harness.plant(backend, key, b"\x04" * sidecar.page_bytes, pool=name)
        transfers.append(
            PoolTransfer(name=name, keys=keys[len(keys) - window :] if window else None, hit_policy=policy)
        )
    folded, entries, restorable = plain_fold(kv_present, pools)
    expected = PoolTransferResult(
        kv_hit_pages=folded, extra_pool_hit_pages=dict(entries), restorable_prefix_pages=list(restorable)
    )
    assert backend.batch_exists_v2(keys, transfers) == expected


@clause_check
def check_fold_measures_pools_against_kv(harness: Harness) -> None:
    """BE-21, BE-22: a missing KV-derived sidecar caps kv_hit_pages, but pools are still measured against KV alone."""
    backend = harness.make()
    pool = backend.mem_pool_host
    indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    swa = make_pool(layer_num=1)
    backend.register_mem_host_pool_v2(indexer, PoolName.INDEXER)
    backend.register_mem_host_pool_v2(swa, PoolName.SWA)
    keys = page_keys(3, start=140)
    fill_pages(pool, [0, 1, 2], seed=17)
    first = [
        PoolTransfer(name="kv", keys=keys[:1], host_indices=slots_of(pool, [0])),
        PoolTransfer(name="indexer", keys=keys[:1], indices_from_pool="kv"),
    ]
    assert backend.batch_set_v2(first) == {"kv": [True], "indexer": [True]}
    rest = [
        PoolTransfer(name="kv", keys=keys[1:], host_indices=slots_of(pool, [1, 2])),
        PoolTransfer(name="swa", keys=keys, host_indices=slots_of(swa, [0, 1, 2])),
    ]
    assert backend.batch_set_v2(rest) == {"kv": [True, True], "swa": [True, True, True]}
    query = [PoolTransfer(name="swa", keys=keys[-1:], hit_policy="trailing_pages")]
    result = backend.batch_exists_v2(keys, query)
    assert result.extra_pool_hit_pages == {"kv": 3, "swa": 3}, f"swa must be measured against the KV run of 3: {result}"
    assert result.kv_hit_pages == 1, f"the indexer, derived from KV, holds page 0 only: {result}"


@clause_check
def check_derived_sidecars_travel_with_kv(harness: Harness) -> None:
    """BE-22: a KV-derived sidecar is written with its KV page, and a KV page without it is reported missing."""
    backend = harness.make()
    pool = backend.mem_pool_host
    indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    keys = page_keys(3, start=120)
    slots = slots_of(pool, [0, 1, 2])
    fill_pages(pool, [0, 1, 2], seed=11)
    fill_pages(indexer, [0, 1, 2], seed=12)
    kv = PoolTransfer(name="kv", keys=keys, host_indices=slots)
    derived = PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")
    # The sidecar pool is not registered yet: its pages fail, so KV must not be written either.
    result = backend.batch_set_v2([kv, derived])
    assert result["indexer"] == [False] * 3
    assert result["kv"] == [False] * 3, "KV written without its derived sidecar"
    assert backend.batch_exists(keys) == 0, "a KV page without its derived sidecar became visible"
    backend.register_mem_host_pool_v2(indexer, PoolName.INDEXER)
    assert backend.batch_set_v2([kv, derived]) == {"kv": [True] * 3, "indexer": [True] * 3}
    reader = harness.make()
    reader_indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    reader.register_mem_host_pool_v2(reader_indexer, PoolName.INDEXER)
    read_slots = slots_of(reader.mem_pool_host, [4, 5, 6])
    got = reader.batch_get_v2(
        [
            PoolTransfer(name="kv", keys=keys, host_indices=read_slots),
            PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv"),
        ]
    )
    assert got == {"kv": [True] * 3, "indexer": [True] * 3}
    assert [page_bytes(reader_indexer, page) for page in (4, 5, 6)] == [
        page_bytes(indexer, page) for page in (0, 1, 2)
    ], "sidecar bytes must land in the sidecar pool"
    # The sidecar of page 1 disappears: KV page 1 is reported missing with it.
    harness.remove(backend, keys[1], pool="indexer")
    got = reader.batch_get_v2(
        [
            PoolTransfer(name="kv", keys=keys, host_indices=read_slots),
            PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv"),
        ]
    )
    assert got["kv"][1] is False and got["indexer"][1] is False
    exists = reader.batch_exists_v2(keys, [PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")])
    assert exists.kv_hit_pages == 1
    # The writer learned that indexer derives from KV: a KV-only v2 read also reports page 1 missing.
    kv_only = backend.batch_get_v2([PoolTransfer(name="kv", keys=keys, host_indices=slots)])
    assert kv_only["kv"] == [True, False, True]
    assert backend.batch_exists_v2(keys).kv_hit_pages == 1


@clause_check
def check_concurrent_threads(harness: Harness, rounds: int = 20) -> None:
    """BE-23: hit query, IO, backup and get_stats threads together: no exception, no wrong byte."""
    backend = harness.make(config(enable_storage_metrics=True), pool=make_pool(page_count=32))
    pool = backend.mem_pool_host
    stored = page_keys(4, start=200)
    assert write_pages(backend, stored, [0, 1, 2, 3], seed=13) == [True] * 4
    expected = [page_bytes(pool, page) for page in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(5)

    def run(body: Callable[[int], None]) -> Callable[[], None]:
        def target() -> None:
            try:
                start.wait(timeout=10)
                for round_number in range(rounds):
                    body(round_number)
            except BaseException as error:  # reported below, in the main thread
                errors.append(error)

        return target

    def hit_query(round_number: int) -> None:
        assert backend.batch_exists(stored) == 4

    def reader(first_page: int, order: list[int]) -> Callable[[int], None]:
        keys = [stored[index] for index in order]
        wanted = [expected[index] for index in order]

        def body(round_number: int) -> None:
            pages = [first_page + index for index in range(4)]
            assert backend.batch_get_v1(keys, slots_of(pool, pages)) == [True] * 4
            assert [page_bytes(pool, page) for page in pages] == wanted, "a read returned wrong bytes"

        return body

    def backup(round_number: int) -> None:
        keys = page_keys(2, start=1000 + 2 * round_number)
        assert backend.batch_set_v1(keys, slots_of(pool, [0, 1])) == [True, True]

    def stats(round_number: int) -> None:
        assert not isinstance(backend.get_stats(), dict)

    threads = [
        threading.Thread(target=run(body))
        for body in (hit_query, reader(8, [0, 1, 2, 3]), reader(16, [3, 2, 1, 0]), backup, stats)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, f"concurrent calls failed: {errors[0]!r}"


@clause_check
def check_registration(harness: Harness) -> None:
    """BE-24: IO before registration fails softly; an object without the page helpers is refused."""
    backend = harness.make(register=False)
    keys = page_keys(1)
    assert backend.batch_set_v1(keys, torch.arange(PAGE_SIZE)) == [False]
    assert backend.batch_get_v1(keys, torch.arange(PAGE_SIZE)) == [False]
    violation = expect_violation(lambda: backend.register_mem_pool_host(object()))
    assert str(violation) == (
        f"{harness.backend_cls.__name__}.host_pool: must provide get_data_page() (got 'object') [BE-24]"
    )
    backend.register_mem_pool_host(make_pool())
    assert write_pages(backend, keys, [0]) == [True]


@clause_check
def check_prefix_untouched(harness: Harness) -> None:
    """PFX-6: the backend never mutates prefix_keys nor keeps it (or the info) after the call."""

    class TrackedList(list):
        pass

    class TrackedInfo:
        def __init__(self, prefix: list) -> None:
            self.prefix_keys = prefix
            self.extra_info = None

    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(2)
    slots = slots_of(pool, [0, 1])
    prefix = TrackedList(page_keys(3, start=950))
    original = list(prefix)
    info = TrackedInfo(prefix)
    references = [weakref.ref(prefix), weakref.ref(info)]
    backend.batch_set_v1(keys, slots, info)
    backend.batch_get_v1(keys, slots, info)
    backend.batch_exists(keys, info)
    backend.batch_exists_v2(keys, None, info)
    transfer = PoolTransfer(name="kv", keys=keys, host_indices=slots)
    backend.batch_get_v2([transfer], info)
    backend.batch_set_v2([transfer], info)
    assert prefix == original, "prefix_keys was mutated"
    del prefix, info
    assert all(reference() is None for reference in references), "the backend kept prefix_keys after the call"


@clause_check
def check_bad_keys(harness: Harness) -> None:
    """KEY-2: a non-str or empty key is a caller error, raised before any IO with the field named."""
    backend = harness.make()
    name = harness.backend_cls.__name__
    violation = expect_violation(lambda: backend.batch_exists(["a", 7]))
    assert str(violation) == f"{name}.keys[1]: page key must be a non-empty str (got 7) [KEY-2]"
    violation = expect_violation(lambda: backend.batch_set_v1([""], torch.arange(PAGE_SIZE)))
    assert str(violation) == f"{name}.keys[0]: page key must be a non-empty str (got '') [KEY-2]"
    assert harness.object_count() == 0


# ================================================================== namespacing checks
def _separated(harness: Harness, writer_config: HiCacheStorageConfig, reader_config: HiCacheStorageConfig) -> None:
    writer = harness.make(writer_config)
    reader = harness.make(reader_config)
    keys = page_keys(2, start=400)
    assert write_pages(writer, keys, [0, 1]) == [True, True]
    assert writer.batch_exists(keys) == 2
    assert reader.batch_exists(keys) == 0, "an instance saw another namespace's pages"
    assert reader.exists(keys[0]) is False
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, [0, 1])) == [False, False]
    assert reader.batch_exists_v2(keys).kv_hit_pages == 0


@clause_check
def check_tp_ranks_apart(harness: Harness) -> None:
    """NS-1: tp_rank 0 and 1 (same tp_size) never see each other's pages."""
    _separated(harness, config(tp_rank=0, tp_size=2), config(tp_rank=1, tp_size=2))


@clause_check
def check_pp_ranks_apart(harness: Harness) -> None:
    """NS-2: pp_rank 0 and 1 never see each other's pages."""
    _separated(harness, config(pp_rank=0, pp_size=2), config(pp_rank=1, pp_size=2))


@clause_check
def check_cp_ranks_apart(harness: Harness) -> None:
    """NS-3: attn_cp_rank 0 and 1 never see each other's pages."""
    _separated(harness, config(attn_cp_rank=0, attn_cp_size=2), config(attn_cp_rank=1, attn_cp_size=2))


@clause_check
def check_models_apart(harness: Harness) -> None:
    """NS-4: two models never see each other's pages."""
    _separated(harness, config(model_name="model-a"), config(model_name="model-b"))


@clause_check
def check_replicated_kv_shared(harness: Harness) -> None:
    """NS-5: with is_mla_model, a page written by tp_rank 0 is seen by every TP rank of the same PP/CP."""
    writer = harness.make(config(tp_rank=0, tp_size=4, is_mla_model=True))
    keys = page_keys(2, start=420)
    assert write_pages(writer, keys, [0, 1], seed=14) == [True, True]
    expected = page_bytes(writer.mem_pool_host, 1)
    for rank in (1, 2, 3):
        reader = harness.make(config(tp_rank=rank, tp_size=4, is_mla_model=True))
        assert reader.batch_exists(keys) == 2, f"tp_rank {rank} must see replicated KV"
        assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, [5, 6])) == [True, True]
        assert page_bytes(reader.mem_pool_host, 6) == expected
    other_stage = harness.make(config(tp_rank=1, tp_size=4, pp_rank=1, pp_size=2, is_mla_model=True))
    assert other_stage.batch_exists(keys) == 0, "replicated KV is shared across TP ranks only"


@clause_check
def check_one_key_scheme(harness: Harness) -> None:
    """NS-6: exists, get and set of every generation agree on where a page is."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(4, start=440)
    fill_pages(pool, [0, 1, 2, 3], seed=15)
    assert backend.batch_set_v1(keys[:1], slots_of(pool, [0])) == [True]
    assert backend.set(keys[1], pool.get_data_page(PAGE_SIZE)) is True
    assert backend.batch_set(keys[2:3], [pool.get_data_page(2 * PAGE_SIZE)]) is True
    assert backend.batch_set_v2([PoolTransfer(name="kv", keys=keys[3:], host_indices=slots_of(pool, [3]))]) == {
        "kv": [True]
    }
    assert backend.batch_exists(keys) == 4
    assert all(backend.exists(key) for key in keys)
    assert backend.batch_exists_v2(keys).kv_hit_pages == 4
    assert backend.batch_get_v1(keys, slots_of(pool, [4, 5, 6, 7])) == [True] * 4
    assert [page_bytes(pool, page) for page in (4, 5, 6, 7)] == [page_bytes(pool, page) for page in (0, 1, 2, 3)]
    assert all(backend.get(key) is not None for key in keys)
    assert all(harness.peek(backend, key) is not None for key in keys), "pages must sit under the namespaced name"


@clause_check
def check_restart(harness: Harness) -> None:
    """NS-7: a new instance with the same configuration finds the pages written before."""
    first = harness.make(config(tp_rank=1, tp_size=2))
    keys = page_keys(3, start=460)
    assert write_pages(first, keys, [0, 1, 2], seed=16) == [True] * 3
    expected = page_bytes(first.mem_pool_host, 2)
    first.close()
    del first
    second = harness.make(config(tp_rank=1, tp_size=2))
    assert second.batch_exists(keys) == 3
    assert second.batch_get_v1(keys, slots_of(second.mem_pool_host, [7, 8, 9])) == [True] * 3
    assert page_bytes(second.mem_pool_host, 9) == expected


@clause_check
def check_clear_keeps_other_namespaces(harness: Harness) -> None:
    """NS-8: clear() removes this namespace's pages only."""
    configs = [
        config(),
        config(tp_rank=1, tp_size=2),
        config(pp_rank=1, pp_size=2),
        config(model_name="other"),
        config(model_name="test-model-2"),
    ]
    backends = [harness.make(each) for each in configs]
    keys = page_keys(2, start=480)
    for backend in backends:
        assert write_pages(backend, keys, [0, 1]) == [True, True]
    backends[0].clear()
    assert backends[0].batch_exists(keys) == 0
    for backend in backends[1:]:
        assert backend.batch_exists(keys) == 2, f"clear() removed the pages of {backend.namespace}"


# ================================================================== the generic test class
def fold_cases() -> list[tuple[tuple, tuple]]:
    """(kv presence, pools) cases for BE-21, LT/EQ/GT around each policy's window."""
    all_pages, trailing = PoolHitPolicy.ALL_PAGES.value, PoolHitPolicy.TRAILING_PAGES.value
    return [
        ((True, True, True, True), ()),
        ((True, True, False, True), ()),
        ((True, True, True, True), (("indexer", all_pages, 4, (True, True, False, True)),)),
        ((True, True, True, True), (("swa", trailing, 2, (False, True, True, False)),)),
        ((True, True, True, False), (("swa", trailing, 2, (False, False, False, True)),)),
        (
            (True, True, True, True),
            (("swa", trailing, 1, (True, False, False, False)), ("mamba", all_pages, 4, (True, True, True, True))),
        ),
        ((False, True, True, True), (("mamba", all_pages, 4, (True, True, True, True)),)),
        ((True, True, True, True), (("swa", trailing, 0, (False, False, True, True)),)),
    ]


class BackendClauseTests:
    """Every generic clause check, run for the backend the ``harness`` fixture builds."""

    @pytest.fixture
    def harness(self) -> Harness:
        raise NotImplementedError

    def break_storage(self, backend: Any) -> None:
        """Make every primitive of ``backend`` raise, as a dead storage would."""

        def fail(*arguments: Any) -> Any:
            raise OSError("storage is down")

        for primitive in ("_object_size", "_read_object_into", "_write_object", "_clear_namespace"):
            setattr(backend, primitive, fail)

    @pytest.mark.clause("BE-1")
    def test_accepts_extra_config(self, harness: Harness) -> None:
        check_accepts_extra_config(harness)

    @pytest.mark.clause("BE-2", "BE-3")
    def test_leading_run(self, harness: Harness) -> None:
        check_leading_run(harness)

    @pytest.mark.clause("BE-4")
    def test_missing_is_a_miss(self, harness: Harness) -> None:
        check_missing_is_a_miss(harness)

    @pytest.mark.clause("BE-5")
    def test_storage_error_is_a_failure(self, harness: Harness) -> None:
        check_storage_error_is_a_failure(harness, self.break_storage)

    @pytest.mark.clause("BE-6")
    def test_idempotent_set(self, harness: Harness) -> None:
        check_idempotent_set(harness)

    @pytest.mark.clause("BE-8")
    def test_extra_info_shapes(self, harness: Harness) -> None:
        check_extra_info_shapes(harness)

    @pytest.mark.clause("BE-9")
    def test_legacy_shapes(self, harness: Harness) -> None:
        check_legacy_shapes(harness)

    @pytest.mark.clause("BE-10")
    def test_full_batch(self, harness: Harness) -> None:
        check_full_batch(harness)

    @pytest.mark.clause("BE-11")
    def test_clear(self, harness: Harness) -> None:
        check_clear(harness)

    @pytest.mark.clause("BE-12")
    def test_stats(self, harness: Harness) -> None:
        check_stats(harness)

    @pytest.mark.clause("BE-13")
    def test_short_objects_are_misses(self, harness: Harness) -> None:
        check_short_objects_are_misses(harness)

    @pytest.mark.clause("BE-14")
    def test_v1_cardinality(self, harness: Harness) -> None:
        check_v1_cardinality(harness)

    @pytest.mark.clause("BE-15", "BE-17")
    @pytest.mark.parametrize("kind", ["mha", "mla"])
    @pytest.mark.parametrize("layout", ["layer_first", "page_first"])
    def test_round_trip_between_pools(self, harness: Harness, kind: str, layout: str) -> None:
        check_round_trip_between_pools(harness, kind, layout)

    @pytest.mark.clause("BE-16", "BE-15")
    def test_reads_stay_in_their_slots(self, harness: Harness) -> None:
        check_reads_stay_in_their_slots(harness)

    @pytest.mark.clause("BE-15", "BE-16", "BE-24")
    @pytest.mark.parametrize("layout", ["layer_first", "page_first"])
    def test_foreign_host_pool(self, harness: Harness, layout: str) -> None:
        """Any object with the page helpers serves as the host pool (pages copied through set_from_flat_data_page)."""
        foreign = harness.with_foreign_pools()
        check_round_trip_between_pools(foreign, "mha", layout)
        check_reads_stay_in_their_slots(foreign)
        check_short_objects_are_misses(foreign)

    @pytest.mark.clause("BE-17")
    def test_set_means_readable(self, harness: Harness) -> None:
        check_set_means_readable(harness)

    @pytest.mark.clause("BE-18")
    def test_every_generation_implemented(self, harness: Harness) -> None:
        check_every_generation_implemented(harness)

    @pytest.mark.clause("BE-19")
    def test_v2_cardinality(self, harness: Harness) -> None:
        check_v2_cardinality(harness)

    @pytest.mark.clause("BE-20")
    def test_unregistered_pool(self, harness: Harness) -> None:
        check_unregistered_pool(harness)

    @pytest.mark.clause("BE-21", "HYB-6", "HYB-7")
    @pytest.mark.parametrize("kv_present, pools", fold_cases())
    def test_v2_exists_folds(self, harness: Harness, kv_present: tuple, pools: tuple) -> None:
        check_v2_exists_folds(harness, kv_present, pools)

    @pytest.mark.clause("BE-21", "BE-22")
    def test_fold_measures_pools_against_kv(self, harness: Harness) -> None:
        check_fold_measures_pools_against_kv(harness)

    @pytest.mark.clause("BE-22")
    def test_derived_sidecars_travel_with_kv(self, harness: Harness) -> None:
        check_derived_sidecars_travel_with_kv(harness)

    @pytest.mark.clause("BE-23")
    def test_concurrent_threads(self, harness: Harness) -> None:
        check_concurrent_threads(harness)

    @pytest.mark.clause("BE-24")
    def test_registration(self, harness: Harness) -> None:
        check_registration(harness)

    @pytest.mark.clause("PFX-6", "BE-8")
    def test_prefix_untouched(self, harness: Harness) -> None:
        check_prefix_untouched(harness)

    @pytest.mark.clause("KEY-2")
    def test_bad_keys(self, harness: Harness) -> None:
        check_bad_keys(harness)

    @pytest.mark.clause("NS-1")
    def test_tp_ranks_apart(self, harness: Harness) -> None:
        check_tp_ranks_apart(harness)

    @pytest.mark.clause("NS-2")
    def test_pp_ranks_apart(self, harness: Harness) -> None:
        check_pp_ranks_apart(harness)

    @pytest.mark.clause("NS-3")
    def test_cp_ranks_apart(self, harness: Harness) -> None:
        check_cp_ranks_apart(harness)

    @pytest.mark.clause("NS-4")
    def test_models_apart(self, harness: Harness) -> None:
        check_models_apart(harness)

    @pytest.mark.clause("NS-5")
    def test_replicated_kv_shared(self, harness: Harness) -> None:
        check_replicated_kv_shared(harness)

    @pytest.mark.clause("NS-6")
    def test_one_key_scheme(self, harness: Harness) -> None:
        check_one_key_scheme(harness)

    @pytest.mark.clause("NS-8", "BE-11")
    def test_clear_keeps_other_namespaces(self, harness: Harness) -> None:
        check_clear_keeps_other_namespaces(harness)
