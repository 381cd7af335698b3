"""The memory backend's fast path (whole batches through a ``HostPagePool``'s buffer) and its store's reads.

The fast path must lay pages out exactly as the page helpers do, keep its
own copies, and fall back to the helpers for layouts it does not know; a
read never sees a row a concurrent write is reusing. Each check is caught by
a planted ``MemoryBackend`` (or ``MemoryStore``) with one bug.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from hicache_contracts.conformance.session.pools import ConformancePool
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import MemoryBackend, MemoryStore, storage_name
from hicache_reference.backends.memory import _HostPages, buffer_pages
from hicache_spec import STORAGE_BATCH_SIZE
from tests.reference.backend_checks import (
    ForeignPool,
    Harness,
    MemoryHarness,
    before_page,
    config,
    fill_pages,
    make_pool,
    page_bytes,
    page_keys,
    sentinel_fill,
    slots_of,
    write_pages,
)


# ================================================================== the fast path
def pool_pages_bytes(pool: Any, pages: list[int]) -> list[bytes]:
    return [page_bytes(pool, page) for page in pages]


def check_fast_path_matches_helpers(harness: Harness) -> None:
    """BE-15, BE-17: pages written on the fast path read back byte for byte through the helpers, and the other way.

    A round trip on one path alone cannot see a fast path that lays the bytes
    of a page out in another order than ``get_data_page``: both directions
    would agree with each other.
    """
    for kind in ("mha", "mla"):
        for layout in ("layer_first", "page_first"):
            fast = harness.make(pool=make_pool(page_count=160, kind=kind, layout=layout))
            slow = harness.with_foreign_pools().make(pool=make_pool(page_count=160, kind=kind, layout=layout))
            for start, (writer, reader) in ((0, (fast, slow)), (200, (slow, fast))):
                keys = page_keys(STORAGE_BATCH_SIZE, start=3000 + start + 1000 * len(kind) + 100 * len(layout))
                sources = list(range(STORAGE_BATCH_SIZE))[::-1]  # scattered the other way round
                targets = [(3 * index) % 160 for index in range(STORAGE_BATCH_SIZE)]
                assert write_pages(writer, keys, sources, seed=40) == [True] * STORAGE_BATCH_SIZE
                expected = pool_pages_bytes(writer.mem_pool_host, sources)
                assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, targets)) == [True] * len(keys)
                got = pool_pages_bytes(reader.mem_pool_host, targets)
                wrong = [index for index, (mine, theirs) in enumerate(zip(got, expected)) if mine != theirs]
                assert not wrong, f"{kind}/{layout}: pages {wrong[:5]} differ between the fast path and the helpers"


def check_batch_with_misses(harness: Harness) -> None:
    """BE-13, BE-15, BE-16: in a full batch of found, missing, short and long pages, only the found ones land.

    Each found page lands in its own slots, every other slot keeps its bytes.
    """
    writer = harness.make(pool=make_pool(page_count=300))
    keys = page_keys(STORAGE_BATCH_SIZE, start=5000)
    kinds = ["found", "missing", "found", "short", "found", "long", "found", "found"]
    kind_of = [kinds[index % len(kinds)] for index in range(STORAGE_BATCH_SIZE)]
    found = [index for index, kind in enumerate(kind_of) if kind == "found"]
    assert write_pages(writer, [keys[i] for i in found], list(range(len(found))), seed=41) == [True] * len(found)
    expected = dict(zip(found, pool_pages_bytes(writer.mem_pool_host, list(range(len(found))))))
    size = writer.mem_pool_host.page_bytes
    for index, kind in enumerate(kind_of):
        if kind in ("short", "long"):
            harness.plant(writer, keys[index], b"\x05" * (size - 2 if kind == "short" else size + 2))
    reader = harness.make(pool=make_pool(page_count=300))
    pool = reader.mem_pool_host
    targets = [299 - 2 * index for index in range(STORAGE_BATCH_SIZE)]
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    result = reader.batch_get_v1(keys, slots_of(pool, targets))
    assert result == [kind == "found" for kind in kind_of], f"results {result}"
    for index, target in enumerate(targets):
        now = page_bytes(pool, target)
        if index in expected:
            assert now == expected[index], f"page {index} did not land whole in its own slots"
        else:
            assert now == bytes(before_page(before, pool, target)), (
                f"the slots of {kind_of[index]} page {index} changed"
            )
    untouched = set(range(pool.page_count)) - set(targets)
    changed = [page for page in untouched if page_bytes(pool, page) != bytes(before_page(before, pool, page))]
    assert not changed, f"pages outside the call changed: {changed[:5]}"


def check_stored_pages_are_own_copies(harness: MemoryHarness) -> None:
    """BE-17: a stored page keeps its bytes when the host page is rewritten; the store stays within its memory bound.

    A stored page lives outside the host pool's memory. Rewriting the same
    keys and clearing then writing again reuse freed slab rows: each slab
    holds at most ``max(64, 2 x the most pages live at once)`` rows
    (docs: the memory backend's bound), whatever the number of writes.
    """
    backend = harness.make(pool=make_pool(page_count=STORAGE_BATCH_SIZE * 2), store=MemoryStore())
    pool = backend.mem_pool_host
    keys = page_keys(STORAGE_BATCH_SIZE, start=7000)
    assert write_pages(backend, keys, list(range(STORAGE_BATCH_SIZE)), seed=42) == [True] * len(keys)
    expected = pool_pages_bytes(pool, list(range(STORAGE_BATCH_SIZE)))
    sentinel_fill(pool, 3.0)  # the engine reuses the host pages
    targets = list(range(STORAGE_BATCH_SIZE, 2 * STORAGE_BATCH_SIZE))
    assert backend.batch_get_v1(keys, slots_of(pool, targets)) == [True] * len(keys)
    assert pool_pages_bytes(pool, targets) == expected, "a stored page changed when its host page was rewritten"
    host_start = pool.kv_buffer.untyped_storage().data_ptr()
    host_end = host_start + pool.kv_buffer.untyped_storage().nbytes()
    for key in keys[:4]:
        address = harness.peek(backend, key).untyped_storage().data_ptr()
        assert not host_start <= address < host_end, f"page {key[:8]} is stored in the host pool's memory"
    store = backend.store
    for round_index in range(8):  # six rewrites of the same keys, then a clear and new keys twice
        if round_index == 6:
            backend.clear()
        sources = list(range(STORAGE_BATCH_SIZE)) if round_index % 2 else targets
        round_keys = keys if round_index < 6 else page_keys(STORAGE_BATCH_SIZE, start=8000 + round_index)
        assert write_pages(backend, round_keys, sources, seed=50 + round_index) == [True] * len(keys)
    live = len(store) + STORAGE_BATCH_SIZE  # the pages stored and one batch in flight
    bound = max(64, 2 * live) * pool.page_bytes
    assert store.held_bytes() <= bound, f"the store holds {store.held_bytes()} bytes for {len(store)} pages"


def check_names_follow_the_scheme(backend_cls: type) -> None:
    """NS-6: every name the backend gives an object is ``storage_name`` of its key and pool, escaping included."""
    backend = backend_cls(config(), {})
    keys = [page_keys(1)[0], "PlainKey42", "a/b", "50%", "space key", "caf\u00e9", "..", "-_."]
    for pool in ("kv", "indexer", "odd/pool"):
        expected = [storage_name(backend.namespace, key, pool) for key in keys]
        assert [backend._name(key, pool) for key in keys] == expected
        assert backend._names(keys, pool) == expected
        assert backend._names(keys[:2], pool) == expected[:2]
    backend.namespace = "other/namespace"  # set after construction, as a subclass may
    assert backend._name(keys[0], "kv") == storage_name("other/namespace", keys[0], "kv")


def check_fast_path_only_for_known_layouts(select: Any) -> None:
    """The fast path serves a ``HostPagePool`` with its own helpers, page ``n`` in flat-page order, and nothing else.

    A pool whose helpers are hooked (the conformance suite's) or foreign
    (SGLang's) must be served through its helpers, or the hooks never run.
    """
    for kind in ("mha", "mla"):
        for layout in ("layer_first", "page_first"):
            pool = make_pool(page_count=6, kind=kind, layout=layout)
            fill_pages(pool, list(range(6)), seed=43)
            pages = select(pool)
            assert pages is not None and pages.shape[0] == pool.page_count
            for number in (0, 5):
                assert torch.equal(pages[number].reshape(-1), pool.get_data_page(number * pool.page_size)), (
                    f"{kind}/{layout}: page {number} is not in flat-page order"
                )
    hooked = ConformancePool(4, 4, 2, 2, 8, pin_memory=False)
    assert select(hooked) is None, "a pool with its own page helpers must be served through them"
    assert select(ForeignPool(make_pool())) is None


class TransposedPageViews(MemoryBackend):
    """Sees a layer_first page as [layer, component, ...]: self-consistent, but not the flat-page order."""

    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        host = self._page_views.get(name)
        if host is not None and getattr(pool, "layout", None) == "layer_first":
            self._page_views[name] = _HostPages(host.pages.transpose(1, 2))


class StoreLosesPositions(MemoryBackend):
    """The store answers the found pages first and the misses after them: pages land in others' slots."""

    def _load_pages(self, names: Any, host: Any, numbers: Any) -> list:
        sizes = self.store.sizes(names)
        found = [name for name, size in zip(names, sizes) if size is not None]
        missing = [name for name, size in zip(names, sizes) if size is None]
        return super()._load_pages(found + missing, host, numbers)


class StoresHostViews(MemoryBackend):
    """Stores views of the host pages instead of copies: the engine's next use of those slots rewrites them."""

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        return self.store.put_many(names, [host.views[number] for number in numbers], groups)


class RewriteLeaksRows(MemoryBackend):
    """Forgets a rewritten page's old slab row instead of freeing it: memory grows with every rewrite."""

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        with self.store._lock:
            for name in names:
                self.store._objects.pop(name, None)  # the row it held is never given back
        return super()._store_pages(names, groups, host, numbers)


class SkipsEscaping(MemoryBackend):
    """Puts every key after the pool's prefix as it is, escaping nothing."""

    def _name(self, key: str, pool: str = "kv") -> str:
        return self._name_prefix(pool) + key

    def _names(self, keys: Any, pool: str) -> list:
        return [self._name(key, pool) for key in keys]


def select_ignoring_helpers(pool: Any) -> Any:
    """``buffer_pages`` that never asks whose page helpers the pool has."""
    if not isinstance(pool, HostPagePool):
        return None
    if pool.layout == "layer_first":
        return pool.kv_buffer.view(pool.component_count, pool.layer_num, pool.page_count, -1).permute(2, 0, 1, 3)
    return pool.kv_buffer.view(pool.component_count, pool.page_count, -1).permute(1, 0, 2)


@pytest.mark.clause("BE-15", "BE-17")
def test_fast_path_matches_helpers(memory_harness: MemoryHarness) -> None:
    check_fast_path_matches_helpers(memory_harness)


@pytest.mark.clause("BE-13", "BE-15", "BE-16")
def test_batch_with_misses(either_path: MemoryHarness) -> None:
    check_batch_with_misses(either_path)


@pytest.mark.clause("BE-17")
def test_stored_pages_are_own_copies(memory_harness: MemoryHarness) -> None:
    check_stored_pages_are_own_copies(memory_harness)


@pytest.mark.clause("NS-6")
def test_names_follow_the_scheme() -> None:
    check_names_follow_the_scheme(MemoryBackend)


def test_fast_path_only_for_known_layouts() -> None:
    check_fast_path_only_for_known_layouts(buffer_pages)


def test_layout_check_catches_planted_bug() -> None:
    with pytest.raises(AssertionError):
        check_fast_path_only_for_known_layouts(select_ignoring_helpers)


@pytest.mark.clause("BE-15", "BE-17")
def test_without_foreach_functions(memory_harness: MemoryHarness, monkeypatch: Any) -> None:
    """Where torch lacks the foreach functions, the fast path copies page by page, with the same bytes."""
    monkeypatch.delattr(torch, "_foreach_copy_")
    monkeypatch.delattr(torch, "_foreach_clone")
    check_fast_path_matches_helpers(memory_harness)
    check_stored_pages_are_own_copies(memory_harness)


FAST_PATH_PLANTED = [
    pytest.param(
        check_fast_path_matches_helpers, TransposedPageViews, marks=pytest.mark.clause("BE-15"), id="transposed-views"
    ),
    pytest.param(
        check_batch_with_misses, StoreLosesPositions, marks=pytest.mark.clause("BE-15", "BE-16"), id="lost-positions"
    ),
    pytest.param(
        check_stored_pages_are_own_copies, StoresHostViews, marks=pytest.mark.clause("BE-17"), id="host-views"
    ),
    pytest.param(check_stored_pages_are_own_copies, RewriteLeaksRows, id="rewrite-leaks-rows"),
]


@pytest.mark.parametrize("check, buggy_class", FAST_PATH_PLANTED)
def test_fast_path_check_catches_planted_bug(memory_harness: MemoryHarness, check: Any, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check(memory_harness.using(buggy_class))


@pytest.mark.clause("NS-6")
def test_names_check_catches_planted_bug() -> None:
    with pytest.raises(AssertionError):
        check_names_follow_the_scheme(SkipsEscaping)


# ================================================================== reads never see a reused row
class StoreCopiesAfterUnlock(MemoryStore):
    """Looks pages up under the lock but copies them after releasing it; ``between`` runs in that gap."""

    between: Any = None

    def read_pages(self, names: Any, pages: Any, numbers: Any, views: Any = None) -> list[bool]:
        from hicache_reference.backends.slabs import ROW_BITS, ROW_MASK

        with self._lock:
            entries = [self._objects.get(name) for name in names]
        if self.between is not None:
            self.between()
        results = []
        for entry, number in zip(entries, numbers):
            if not isinstance(entry, int):
                results.append(False)
                continue
            views[number].copy_(self._slab_list[entry >> ROW_BITS].row(entry & ROW_MASK))
            results.append(True)
        return results


def uniform_pages(pool: Any, pages: list[int]) -> list[float]:
    """The one value each page holds (pages are written uniform); NaN for a page holding two values."""
    values = []
    for page in pages:
        data = pool.get_data_page(page * pool.page_size).float()
        values.append(float(data[0]) if bool((data == data[0]).all()) else float("nan"))
    return values


def check_read_gets_one_stored_version(store: MemoryStore, interleave: bool) -> None:
    """BE-23: a page read while its key is deleted and its row reused by another write is one stored version.

    Pages are uniform (value 1.0 for the key read, 2.0 for the other key);
    the read must return 1.0 (the version it found) or miss, never the other
    key's bytes. ``interleave`` runs the delete and the other write inside
    the store's read where the store offers that gap (the planted store);
    the real store is also hammered from two threads.
    """
    writer = MemoryBackend(config(), {"store": store})
    writer.register_mem_pool_host(make_pool(page_count=4))
    reader = MemoryBackend(config(), {"store": store})
    reader.register_mem_pool_host(make_pool(page_count=4))
    pool = writer.mem_pool_host
    key, other = page_keys(2, start=9100)

    def put(which: str, value: float, page: int) -> None:
        pool.set_from_flat_data_page(
            page * pool.page_size, torch.full((pool.page_element_count,), value, dtype=pool.dtype)
        )
        assert writer.batch_set_v1([which], slots_of(pool, [page])) == [True]

    def replace() -> None:
        store.delete(writer._name(key))
        put(other, 2.0, 1)  # takes the row just freed

    for _ in range(20 if not interleave else 1):
        put(key, 1.0, 0)
        if interleave:
            assert isinstance(store, StoreCopiesAfterUnlock), "only the planted store offers the gap"
            store.between = replace
            found = reader.batch_get_v1([key], slots_of(reader.mem_pool_host, [2]))
            store.between = None
        else:
            thread = threading.Thread(target=replace)
            thread.start()
            found = reader.batch_get_v1([key], slots_of(reader.mem_pool_host, [2]))
            thread.join()
        if found == [True]:
            assert uniform_pages(reader.mem_pool_host, [2]) == [1.0], "a read returned bytes of another key's page"
        store.delete(writer._name(other))


@pytest.mark.clause("BE-23")
def test_read_gets_one_stored_version() -> None:
    check_read_gets_one_stored_version(MemoryStore(), interleave=False)


@pytest.mark.clause("BE-23")
def test_read_version_check_catches_planted_bug() -> None:
    with pytest.raises(AssertionError):
        check_read_gets_one_stored_version(StoreCopiesAfterUnlock(), interleave=True)
