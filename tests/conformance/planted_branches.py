"""Planted bugs that reach the branches of the vendor checks no other planted bug reaches.

Each backend differs from ``CorrectBackend`` in one realistic bug; ``planted_catalog.CATALOG`` names
the check that must fail it, the clause that check must report, and the suite options of the run. The
correct variants in ``CORRECT_VARIANTS`` honour every clause in ways the plain correct backend does
not exercise (evicting pages it may drop), so that a check made stricter than the contract fails them.
Over 450 lines: a family of small classes, one per bug or variant, read as a list.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace
from typing import Any, Iterator, Optional

import numpy
import torch

from hicache_contracts.models import PoolTransferResult
from hicache_spec import count_leading_run
from hicache_reference.backends.memory import MemoryBackend
from tests.conformance.correct_backend import CorrectBackend, pool_name, tensor_bytes
from tests.conformance.helpers import ALL_LEVELS, UnimplementedV2
from tests.conformance.planted_backends import HexOnlyKeys, VisibleBeforeWritten
from tests.conformance.planted_single import ExistsRaisesBesideItsOwnLookup, OneReplicaForEveryDcpRank
from tests.oracles import plain_fold, plain_pool_boundary


# ================================================================ BE-5: storage errors
class ClaimsWritesWhileTheStoreFails(CorrectBackend):
    """While the store fails, writes report True and store nothing (BE-5): a write-behind queue that drops."""

    def write_pages(self, pool, keys, host_indices):
        if self.store_failing:
            return [True] * len(keys)
        return super().write_pages(pool, keys, host_indices)

    def set(self, key, value=None, target_location=None, target_sizes=None):
        if self.store_failing:
            return True
        return super().set(key, value, target_location, target_sizes)


class WritesClaimedWhileThePageHelpersFail(CorrectBackend):
    """Offers no fault hook of its own but opts into the host pool's (``hicache_host_pool_faults``); a write whose host
    page cannot be read (the page helper raises) is queued for a retry that never runs, and reported True (BE-5)."""

    hicache_storage_faults = None  # type: ignore[assignment]
    hicache_host_pool_faults = True

    def write_pages(self, pool, keys, host_indices):
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return super().write_pages(pool, keys, host_indices)
        size, results = host_pool.page_size, []
        for index, key in enumerate(keys):
            slots = host_indices[index * size : (index + 1) * size]
            try:
                host_pool.get_data_page(int(slots[0]), flat=True)
            except OSError:
                results.append(True)  # queued for a retry
                continue
            results.append(super().write_pages(pool, [key], slots)[0])
        return results

    def present(self, name: str, pool: str = "kv") -> bool:
        try:
            return super().present(name, pool)
        except OSError:  # the page size comes from a page helper: a lookup it fails is a miss
            return False


class LegacyReadReturnsItsTargets(CorrectBackend):
    """The legacy batch_get fills the target of each key it finds and returns the targets it was given, filled or not:
    a missing key comes back as its empty target, a tensor, where None was meant (BE-4)."""

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        values = super().batch_get(keys, target_locations, target_sizes)
        if target_locations is None:
            return values
        return list(target_locations)


class LegacyReadReturnsTrueForEachKey(CorrectBackend):
    """The legacy batch_get fills the target of each key it finds and returns True for every key, the request having
    completed: a missing key comes back True where None was meant (BE-4)."""

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        super().batch_get(keys, target_locations, target_sizes)
        return [True] * len(keys)


class KeysCutTo24Characters(CorrectBackend):
    """Names each object by the first 24 characters of its key, its store's limit on a name: SGLang's 64-character
    hex keys stay distinct (96 random bits), but keys that share their first 24 characters share one object, and the
    last write of them wins (KEY-2: a key is any non-empty str)."""

    def name(self, key: str, pool: str = "kv") -> str:
        return super().name(key[:24], pool)


# ================================================================ BE-23: concurrency (deterministic bugs)
class IndexPerThread(CorrectBackend):
    """batch_exists consults an index of the pages the calling thread wrote (a thread-local cache): pages
    another thread stored are not counted (BE-23)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.local = threading.local()

    def written(self) -> set:
        if not hasattr(self.local, "names"):
            self.local.names = set()
        return self.local.names

    def put(self, name: str, data: bytes) -> bool:
        stored = super().put(name, data)
        self.written().add(name)
        return stored

    def batch_exists(self, keys, extra_info=None):
        for index, key in enumerate(keys):
            if not self.exists(key) or self.name(key) not in self.written():
                return index
        return len(keys)


class DropsAfterTheSecondRead(CorrectBackend):
    """A page is dropped once read twice (an eviction policy), though eviction is not declared (BE-23)."""

    hicache_may_evict = False

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.reads: dict[str, int] = {}

    def served(self, name: str) -> None:
        with self.lock:
            self.reads[name] = self.reads.get(name, 0) + 1
            if self.reads[name] >= 2:
                self.objects.pop(name, None)
                del self.reads[name]

    def read_pages(self, pool, keys, host_indices):
        results = super().read_pages(pool, keys, host_indices)
        for key, hit in zip(keys, results):
            if hit:
                self.served(self.name(key, pool))
        return results

    def get(self, key, target_location=None, target_sizes=None):
        value = super().get(key, target_location, target_sizes)
        if value is not None:
            self.served(self.name(key))
        return value


class RebuildsItsIndexOnWrite(CorrectBackend):
    """The base of the two rebuild bugs below: each write rebuilds the page index for a moment, during which other
    threads see it empty (``another_write_runs``)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.writes_running = 0
        self.writer = threading.local()

    @contextlib.contextmanager
    def rebuilding(self) -> Iterator[None]:
        with self.lock:
            self.writes_running += 1
        self.writer.active = True
        try:
            time.sleep(0.001)  # the rebuild
            yield
        finally:
            self.writer.active = False
            with self.lock:
                self.writes_running -= 1

    def another_write_runs(self) -> bool:
        """Whether a write of another thread is rebuilding the index now."""
        return bool(self.writes_running) and not getattr(self.writer, "active", False)

    def write_pages(self, pool, keys, host_indices):
        with self.rebuilding():
            return super().write_pages(pool, keys, host_indices)

    def set(self, key, value=None, target_location=None, target_sizes=None):
        with self.rebuilding():
            return super().set(key, value, target_location, target_sizes)


class LookupsMissWhileAWriteRuns(RebuildsItsIndexOnWrite):
    """Every page reads as a miss while another thread's write rebuilds the index (BE-23: a page whose write
    returned True is found by every later call). Calls made one at a time never see it, nor does the count after
    the threads end."""

    def fetch(self, name: str) -> Optional[bytes]:
        return None if self.another_write_runs() else super().fetch(name)


class CountsMissWhileAWriteRuns(RebuildsItsIndexOnWrite):
    """Only batch_exists reads the index being rebuilt, and counts nothing meanwhile; reads go to the store
    (BE-23). Only the rule for counts after a confirmed write sees it."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        return 0 if self.another_write_runs() else super().batch_exists(keys, extra_info)


class CountsOneShortWhileAWriteRuns(RebuildsItsIndexOnWrite):
    """While another thread's write rebuilds the index, batch_exists leaves the last page of its run uncounted
    (BE-23): a count one short of the pages stored before the call began is a miss as much as a count of 0."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        count = super().batch_exists(keys, extra_info)
        return max(0, count - 1) if self.another_write_runs() else count


class StatsRaiseDuringIO(CorrectBackend):
    """get_stats walks counters that IO threads update, and raises when a call moves pages meanwhile (BE-23)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.moved = 0

    def read_pages(self, pool, keys, host_indices):
        self.moved += 1
        return super().read_pages(pool, keys, host_indices)

    def write_pages(self, pool, keys, host_indices):
        self.moved += 1
        return super().write_pages(pool, keys, host_indices)

    def get_stats(self):
        before = self.moved
        time.sleep(0.0005)  # the walk over the counters
        if self.moved != before:
            raise RuntimeError("dictionary changed size during iteration")
        return None


# ================================================================ BE-8: extra_info by keyword
class V1SetNamesItsInfoParameterInfo(CorrectBackend):
    """Correct: batch_set_v1's third parameter is called ``info``; every release hands it positionally (BE-8)."""

    def batch_set_v1(self, keys, host_indices, info=None):  # type: ignore[override]
        return super().batch_set_v1(keys, host_indices, info)


class V1GetNamesItsInfoParameterInfo(CorrectBackend):
    """Correct: batch_get_v1's third parameter is called ``info``; every release hands it positionally (BE-8)."""

    def batch_get_v1(self, keys, host_indices, info=None):  # type: ignore[override]
        return super().batch_get_v1(keys, host_indices, info)


class V2GetNamesItsInfoParameterInfo(CorrectBackend):
    """batch_get_v2's second parameter is called ``info``: extra_info, which 0.5.21 on hand by keyword, raises (BE-8)."""

    def batch_get_v2(self, transfers, info=None):  # type: ignore[override]
        return super().batch_get_v2(transfers, info)


# ================================================================ host pages: a path for one contiguous run
# SGLang's host pool hands out free pages wherever they are: a batch's pages may form one ascending run, be
# scattered, or repeat none of the above from one call to the next. A backend with a fast path for a run
# (one bulk transfer of the run's bytes) has two paths, and a bug in only one of them is seen only where
# the check's host pages take it: these bugs are all in the run path.
def one_run(host_indices: Any, page_size: int, count: int) -> bool:
    """Whether ``count`` pages' host indices form one ascending run of at least two pages."""
    if count < 2:
        return False
    first = int(host_indices[0])
    return all(int(host_indices[index * page_size]) == first + index * page_size for index in range(count))


class RunBackend(CorrectBackend):
    """The correct backend with a run test for its subclasses' fast paths."""

    def is_run(self, pool: str, keys: list, host_indices: Any) -> bool:
        host_pool = self.pools.get(pool)
        return host_pool is not None and one_run(host_indices, host_pool.page_size, len(keys))

    def load_each(self, pool: str, keys: list, host_indices: Any, lookup: Any) -> list[bool]:
        """Copy ``lookup(key)``'s bytes into each key's host page: a run path's read; None is a miss."""
        host_pool, results = self.pools[pool], []
        for index, key in enumerate(keys):
            data = lookup(key)
            if data is not None:
                host_pool.set_from_flat_data_page(
                    int(host_indices[index * host_pool.page_size]), self.page_tensor(data, pool)
                )
            results.append(data is not None)
        return results


class SidecarRunReadRaisesOnStoreError(RunBackend):
    """A run of sidecar pages is fetched in one bulk read that lets the store's error escape (BE-5)."""

    def read_pages(self, pool, keys, host_indices):
        if pool == "kv" or not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)
        host_pool, page_size = self.pools[pool], self.pools[pool].page_size
        fetched = [self.fetch(self.name(key, pool)) for key in keys]  # no try: an OSError leaves the call
        results = []
        for index, data in enumerate(fetched):
            if data is None or len(data) != self.page_bytes(pool):
                results.append(False)
                continue
            host_pool.set_from_flat_data_page(int(host_indices[index * page_size]), self.page_tensor(data, pool))
            results.append(True)
        return results


class SidecarRunWriteRaisesOnStoreError(RunBackend):
    """A run of sidecar pages is written in one bulk put that lets the store's error escape (BE-5): the write twin of
    ``SidecarRunReadRaisesOnStoreError``."""

    def write_pages(self, pool, keys, host_indices):
        if pool == "kv" or not self.is_run(pool, keys, host_indices):
            return super().write_pages(pool, keys, host_indices)
        host_pool = self.pools[pool]
        for index, key in enumerate(keys):  # no try: an OSError leaves the call
            page = host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True)
            self.put(self.name(key, pool), tensor_bytes(page))
        return [True] * len(keys)


class OnePageWindowQueryRaisesOnStoreError(CorrectBackend):
    """batch_exists_v2 answers a pool query whose window holds one key (a trailing_pages window of 1) with a direct
    fetch of that key's object, a fast path without the handler its other lookups have: the store's error escapes
    (BE-5)."""

    def pool_query(self, transfer, keys):
        window = list(transfer.keys or ())
        if len(window) == 1:
            name = pool_name(transfer.name)
            self.fetch(self.name(window[0], name))  # no try: an OSError leaves the call
        return super().pool_query(transfer, keys)


class RunWriteQueuedOnStoreError(RunBackend):
    """A write whose host pages form one run copies the run and puts its objects in one bulk call; when the store
    fails, the run is queued for a retry that never runs and every page reported True (BE-5)."""

    def write_pages(self, pool, keys, host_indices):
        if not self.is_run(pool, keys, host_indices):
            return super().write_pages(pool, keys, host_indices)
        host_pool = self.pools[pool]
        pages = [
            tensor_bytes(host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True))
            for index in range(len(keys))
        ]
        try:
            for key, data in zip(keys, pages):
                self.put(self.name(key, pool), data)
        except OSError:
            pass  # queued for a retry
        return [True] * len(keys)


class RunWritePublishesBeforeCopying(RunBackend):
    """A batch_set_v1 whose host pages form one run reserves every object (a zeroed page) before copying the
    run into them: the pages are visible while the write is still reading the host pool (BE-7)."""

    def write_pages(self, pool, keys, host_indices):
        if self.is_run(pool, keys, host_indices):
            empty = bytes(self.page_bytes(pool))
            try:
                for key in keys:
                    self.put(self.name(key, pool), empty)
            except OSError:
                return [False] * len(keys)
        return super().write_pages(pool, keys, host_indices)


class RewrittenPagesMissedByTheRunRead(RunBackend):
    """A rewrite stores the new bytes under a versioned object name and deletes the old object; the per-page
    read resolves the version, the run path (one bulk fetch of the base names) does not: a rewritten page read
    into one run of host pages misses (BE-6)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.versions: dict[str, int] = {}
        self.base_names = False

    def name(self, key: str, pool: str = "kv") -> str:
        base = super().name(key, pool)
        version = 0 if self.base_names else self.versions.get(base, 0)
        return base if version == 0 else f"{base}#v{version}"

    def write_pages(self, pool, keys, host_indices):
        replaced = [self.name(key, pool) for key in keys if self.name(key, pool) in self.objects]
        for key in keys:
            if self.name(key, pool) in replaced:
                base = super().name(key, pool)
                self.versions[base] = self.versions.get(base, 0) + 1
        results = super().write_pages(pool, keys, host_indices)
        with self.lock:
            for old in replaced:
                self.objects.pop(old, None)
        return results

    def read_pages(self, pool, keys, host_indices):
        self.base_names = self.is_run(pool, keys, host_indices)
        try:
            return super().read_pages(pool, keys, host_indices)
        finally:
            self.base_names = False


class V2ReadFallsOffTheEnd(CorrectBackend):
    """v2 is not claimed; batch_get_v2 answers empty input, checks the host indices it is given, and then
    returns None instead of a result or NotImplementedError (BE-18)."""

    def batch_get_v2(self, transfers, extra_info=None):
        if not transfers:
            return {}
        for transfer in transfers:
            if (
                transfer.host_indices is not None
                and len(transfer.host_indices)
                and int(transfer.host_indices.min()) < 0
            ):
                raise ValueError(f"pool {pool_name(transfer.name)!r}: host indices must be >= 0")
        return None


class ReplicatedRunReadUsesItsOwnRank(RunBackend):
    """The run path looks replicated (MLA) KV up under the reading rank's own TP coordinate: only the writer
    rank 0, whose name it happens to be stored under, finds it; tp_rank 1 misses every page (NS-5)."""

    def read_pages(self, pool, keys, host_indices):
        config = self.config
        if config.is_mla_model and config.tp_rank != 0 and self.is_run(pool, keys, host_indices):
            return [False] * len(keys)  # the names it asks for (tp 1/2) were never written
        return super().read_pages(pool, keys, host_indices)


class RunReadExtendsThePrefix(RunBackend):
    """The run path of batch_get_v1 appends the keys it loaded to the prefix_keys list it was given, to hand the
    longer prefix on, so the caller's list changes (PFX-6)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        prefix = getattr(extra_info, "prefix_keys", None)
        if isinstance(prefix, list) and self.is_run("kv", list(keys), host_indices):
            prefix.extend(keys)
        return super().batch_get_v1(keys, host_indices, extra_info)


class DerivedRunReadSkipsTheCopy(RunBackend):
    """A KV-derived indexer read whose host pages form one run is reported loaded without a copy: the backend
    assumes the run arrived with its KV run (BE-22)."""

    def read_pages(self, pool, keys, host_indices):
        if pool == "indexer" and self.is_run(pool, keys, host_indices):
            return list(self.pool_present(pool, list(keys)))
        return super().read_pages(pool, keys, host_indices)


class DerivedReadLeftToTheKvRead(CorrectBackend):
    """Means a KV read to bring its KV-derived sidecar pages along, so batch_get_v2 reports a transfer of a KV-derived
    pool loaded wherever its pages are stored, without copying them; but the KV read copies KV only, and the
    sidecar's host pages keep what they held (BE-22, HYB-8: a page counted as loaded never landed)."""

    def taken_along(self, transfer) -> bool:
        """Whether the read reports ``transfer`` loaded without copying it: here, one of a KV-derived pool."""
        return self.is_derived(transfer)

    def batch_get_v2(self, transfers, extra_info=None):
        along = [self.taken_along(item) for item in transfers]
        results = super().batch_get_v2([item for item, skip in zip(transfers, along) if not skip], extra_info)
        for item, skip in zip(transfers, along):
            if skip:
                results[pool_name(item.name)] = list(self.pool_present(pool_name(item.name), list(item.keys or ())))
        return results


class WindowReadTakenAsResident(DerivedReadLeftToTheKvRead):
    """Takes a sidecar transfer with slots of its own (not KV-derived: the sliding-window pool) for pages SGLang keeps
    resident in host memory: batch_get_v2 reports them loaded wherever they are stored, without copying them (HYB-8:
    a page counted as loaded never landed)."""

    def taken_along(self, transfer) -> bool:
        return pool_name(transfer.name) != "kv" and not self.is_derived(transfer)


class DerivedPoolsTrustedInTheFold(CorrectBackend):
    """batch_exists_v2 leaves KV-derived pools (``indices_from_pool`` KV) out of its fold, trusting that a backup wrote
    them with their KV pages: a KV page whose indexer page was never written counts as a hit, with no indexer entry
    (BE-22: a KV-derived sidecar never written is reported missing)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        kept = [item for item in pool_transfers or () if getattr(item, "indices_from_pool", None) is None]
        return super().batch_exists_v2(keys, kept, extra_info)


class SidecarReadFromTheResidentHostPage(CorrectBackend):
    """A sidecar page is read from the host page it was written from while that page still holds data (not
    all zeros), as a host-memory hit; SGLang reuses host pages after a backup, so it may hold anything (HYB-8; BE-17's
    non-writer rank overwrites its source pages with -1.0 before it reads them back)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.resident: dict[str, int] = {}

    def serves_resident(self, pool: str) -> bool:
        """Whether reads of ``pool`` look at the host page a page was written from."""
        return pool != "kv"

    def write_pages(self, pool, keys, host_indices):
        results = super().write_pages(pool, keys, host_indices)
        if self.serves_resident(pool):
            page_size = self.pools[pool].page_size
            for index, (key, ok) in enumerate(zip(keys, results)):
                if ok:
                    self.resident[self.name(key, pool)] = int(host_indices[index * page_size])
        return results

    def read_pages(self, pool, keys, host_indices):
        results = super().read_pages(pool, keys, host_indices)
        host_pool = self.pools.get(pool)
        if not self.serves_resident(pool) or host_pool is None:
            return results
        for index, (key, ok) in enumerate(zip(keys, results)):
            source = self.resident.get(self.name(key, pool))
            if ok and source is not None:
                page = host_pool.get_data_page(source, flat=True)
                if bool(page.count_nonzero()):
                    host_pool.set_from_flat_data_page(int(host_indices[index * host_pool.page_size]), page.clone())
        return results


# ================================================================ BE-8: unknown extra_info keys
class FlagLikeUnknownKeyRefused(CorrectBackend):
    """An unknown extra_info key whose value is a flag (0, 1, True or False) is refused as a misspelt option (BE-8)."""

    known_options = ("priority",)

    def refuse_misspelt_flags(self, extra_info: Any) -> None:
        for key, value in (getattr(extra_info, "extra_info", None) or {}).items():
            if key not in self.known_options and value in (0, 1):
                raise ValueError(f"unknown extra_info flag {key!r}; is it misspelt?")

    def batch_exists(self, keys, extra_info=None):
        self.refuse_misspelt_flags(extra_info)
        return super().batch_exists(keys, extra_info)


# ================================================================ the host pool's last page
class LastHostPageRefused(CorrectBackend):
    """A read's bounds test is off by one (``slot + page_size < size``): a page read into the host pool's last
    page is reported missing. SGLang's allocator hands that page out like any other (BE-27's small pool reads
    into it; BE-17 holds the page to the read)."""

    def read_pages(self, pool, keys, host_indices):
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return [False] * len(keys)
        results = super().read_pages(pool, keys, host_indices)
        page_size = host_pool.page_size
        return [
            ok and int(host_indices[index * page_size]) + page_size < host_pool.size for index, ok in enumerate(results)
        ]


# ================================================================ registration, extra_info, guards, prefixes
class KvOnlyThroughV2Registration(CorrectBackend):
    """Finds its KV host pool only through ``register_mem_host_pool_v2``, as SGLang's hybrid controller registers
    it: a plain model's controller calls ``register_mem_pool_host`` alone, and then every write fails (BE-1)."""

    def register_mem_pool_host(self, mem_pool_host):
        pass

    def on_host_pools_registered(self):
        self.attached = True


class V2ReadWithInfoSkipsTheCopy(CorrectBackend):
    """A batch_get_v2 given an extra_info reports every stored page loaded without copying it (BE-8): the info
    selects a path (say, a prefetch hint) that only marks the pages."""

    def batch_get_v2(self, transfers, extra_info=None):
        if extra_info is None:
            return super().batch_get_v2(transfers, extra_info)
        return {
            pool_name(item.name): list(self.pool_present(pool_name(item.name), list(item.keys or ())))
            for item in transfers
        }


class ReadRunsOnePagePastTheLast(CorrectBackend):
    """A v1 read's last copy runs one page too far: the page after the highest host page it was given gets the
    bytes of the page before it (BE-16; a span copy whose end is off by one)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_get_v1(keys, host_indices, extra_info)
        host_pool = self.pools["kv"]
        page_size = host_pool.page_size
        last = max((int(host_indices[index * page_size]) for index in range(len(keys))), default=None)
        if last is not None and last + page_size < host_pool.size:
            host_pool.set_from_flat_data_page(last + page_size, host_pool.get_data_page(last, flat=True))
        return results


class ChainsPagesWithinOneCall(CorrectBackend):
    """v1 reads and writes name a page after the key before it in the same call, forgetting prefix_keys, and keep
    a plain index that batch_exists answers from (PFX-1). Each batch read back as it was written holds; only the
    read of the whole chain from its root, as SGLang's prefetch reads it, batches the pages otherwise."""

    def chained(self, keys: list) -> list[str]:
        return [self.name(f"{previous}>{key}") for previous, key in zip([""] + keys[:-1], keys)]

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        results = super().batch_set_v1(keys, host_indices, extra_info)  # the plain index batch_exists reads
        host_pool = self.pools["kv"]
        for index, (name, stored) in enumerate(zip(self.chained(keys), results)):
            if stored:
                page = host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True)
                self.put(name, tensor_bytes(page))
        return results

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        host_pool = self.pools["kv"]
        results = []
        for index, name in enumerate(self.chained(list(keys))):
            data = self.fetch(name)
            if data is not None:
                host_pool.set_from_flat_data_page(
                    int(host_indices[index * host_pool.page_size]), self.page_tensor(data)
                )
            results.append(data is not None)
        return results


class V1ReadWithInfoSkipsTheCopy(CorrectBackend):
    """A batch_get_v1 given an extra_info reports every stored page loaded without copying it (BE-8): the info
    selects a path (say, a prefetch hint) that only marks the pages."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        if extra_info is None:
            return super().batch_get_v1(keys, host_indices, extra_info)
        return list(self.pool_present("kv", list(keys)))


class CountsThePrefixKeysToo(CorrectBackend):
    """batch_exists given prefix_keys counts the prefix's pages as hits too, as if the keys were the whole chain
    (BE-8: the count is of the keys asked about)."""

    def batch_exists(self, keys, extra_info=None):
        return super().batch_exists(keys, extra_info) + len(getattr(extra_info, "prefix_keys", None) or ())


class CountsFromPastThePrefix(CorrectBackend):
    """batch_exists given prefix_keys takes the keys for the whole chain and counts from past the prefix's length:
    with a prefix as long as the batch it counts nothing (PFX-1: the keys asked about come after the prefix)."""

    def batch_exists(self, keys, extra_info=None):
        skipped = len(getattr(extra_info, "prefix_keys", None) or ())
        return super().batch_exists(list(keys)[skipped:], extra_info)


class DerivedRunWriteStoresNothing(RunBackend):
    """A KV-derived indexer write whose host pages form one run is reported stored without a copy: the backend
    counts on deriving it from the KV run later, and never does (BE-22)."""

    def write_pages(self, pool, keys, host_indices):
        if pool == "indexer" and self.is_run(pool, keys, host_indices):
            return [True] * len(keys)
        return super().write_pages(pool, keys, host_indices)


RUN_CACHE: dict[tuple[str, str, str], bytes] = {}
"""RunReadCacheKeyedByKeyAlone's cache: (store, pool, key) -> the bytes of the last write of that key."""


class RunReadCacheKeyedByKeyAlone(RunBackend):
    """A read whose host pages form one run finds its pages in the namespace's index, then takes their bytes from a
    cache that every write fills under the key alone: after another rank or model wrote the same key, the run
    read returns that writer's bytes (NS-1..NS-4)."""

    def write_pages(self, pool, keys, host_indices):
        results = super().write_pages(pool, keys, host_indices)
        for key, stored in zip(keys, results):
            if stored:
                RUN_CACHE[(self.store_name, pool, key)] = self.fetch(self.name(key, pool))
        return results

    def read_pages(self, pool, keys, host_indices):
        if not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)
        return self.load_each(
            pool,
            keys,
            host_indices,
            lambda key: (
                RUN_CACHE.get((self.store_name, pool, key)) if self.present(self.name(key, pool), pool) else None
            ),
        )


class SidecarRunCacheOutlivesClear(RunBackend):
    """Sidecar pages written are kept in a read cache as well, and a sidecar read whose host pages form one run is
    served from it; clear() empties the store but forgets the cache (BE-11): such a read still loads the pages."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.cache: dict[tuple[str, str], Optional[bytes]] = {}

    def caches(self, pool: str) -> bool:
        """Whether the pages of ``pool`` are cached (and its run reads served from the cache)."""
        return pool != "kv"

    def write_pages(self, pool, keys, host_indices):
        results = super().write_pages(pool, keys, host_indices)
        for key, stored in zip(keys, results):
            if stored and self.caches(pool):
                self.cache[(pool, key)] = self.fetch(self.name(key, pool))
        return results

    def read_pages(self, pool, keys, host_indices):
        if not self.caches(pool) or not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)
        return self.load_each(
            pool, keys, host_indices, lambda key: self.cache.get((pool, key)) or self.fetch(self.name(key, pool))
        )


class ExistsPromotesToAHotTier(CorrectBackend):
    """batch_exists moves each page it counts into a hot tier that reads consult and its own lookups do not: asked
    again, it no longer counts them (BE-3: asking changes nothing)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.hot: set[str] = set()

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        count = 0
        for key in keys:
            if self.name(key) in self.hot or not self.exists(key):
                break
            count += 1
        self.hot.update(self.name(key) for key in keys[:count])
        return count


class ClearReportsFalseAndKeepsItsPages(CorrectBackend):
    """clear() fails inside and says so by returning False, as HiCacheFile.clear does, removing nothing: SGLang
    takes any return as a clear done and forgets what it believed stored, so the pages it keeps are stale hits
    (BE-11)."""

    def clear(self):  # returns False, as HiCacheFile.clear does when it fails
        return False


class AllPagesHitCopiedFromKv(CorrectBackend):
    """batch_exists_v2 reports an all_pages pool's hit as the KV hit, never looking at the pool's pages (HYB-6: each
    pool's entry is its own boundary); the folded hit is still right."""

    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        hits = dict(result.extra_pool_hit_pages)
        kv_hit = hits.get("kv", 0)
        for transfer in pool_transfers or ():
            if kv_hit and pool_name(transfer.hit_policy) == "all_pages":
                hits[pool_name(transfer.name)] = kv_hit
        return PoolTransferResult(kv_hit_pages=result.kv_hit_pages, extra_pool_hit_pages=hits)  # type: ignore[arg-type]


class SidecarSpansCappedAtOneSlice(CorrectBackend):
    """A sidecar transfer of more than STORAGE_BATCH_SIZE keys is served for its first 128 only, the rest answered
    False, as SGLang's NIXL backend's bounce path does: a hybrid backup's sidecar write of a longer span loses its
    tail (BE-10)."""

    LIMIT = 128

    def write_pages(self, pool, keys, host_indices):
        if pool == "kv" or len(keys) <= self.LIMIT:
            return super().write_pages(pool, keys, host_indices)
        return super().write_pages(pool, keys[: self.LIMIT], host_indices) + [False] * (len(keys) - self.LIMIT)


class PoolsJudgedWithinTheRunningFold(CorrectBackend):
    """batch_exists_v2 judges each pool over the keys still in the running fold, not over the KV hit, as SGLang's
    UMBP backend does (DIV-47): a pool queried after one that shortened the fold reports a boundary shorter than
    its own (HYB-6 for an all_pages pool, HYB-7 for a trailing one); the folded hit is still right."""

    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        keys = list(keys)
        kv = self.pool_present("kv", keys)
        folded = count_leading_run(kv)
        hits = {"kv": folded} if folded else {}
        for transfer in pool_transfers or ():
            if not folded:
                break
            present = self.pool_present(pool_name(transfer.name), keys[:folded])
            query = self.pool_query(transfer, keys[:folded])[:3] + (present,)
            boundary = plain_pool_boundary(query[1], query[2], present, folded)
            if boundary:
                hits[query[0]] = boundary
            folded = min(folded, boundary)
        return PoolTransferResult(kv_hit_pages=folded, extra_pool_hit_pages=hits)  # type: ignore[arg-type]


# ================================================================ correct variants
class CompactsHitsPastAMiss(CorrectBackend):
    """Correct: batch_get_v1 skips the misses when it places pages, so every hit after a miss lands one page early,
    in slots it was given. SGLang reads no entry after the first False (``_page_get_zero_copy`` stops there), so
    the pages it uses, the leading run, are all in their own slots (BE-15)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        page_size = self.pools["kv"].page_size
        hits = [index for index, key in enumerate(keys) if self.exists(key)]
        landed = self.read_pages("kv", [keys[index] for index in hits], host_indices[: len(hits) * page_size])
        results = [False] * len(keys)
        for index, ok in zip(hits, landed):
            results[index] = ok
        return results


class OneHitLandsInTheFirstSlot(CorrectBackend):
    """Correct: a read with exactly one page to load copies it into the batch's first host page; where that page
    is not the first key's, the first key missed, and SGLang reads nothing of the batch (BE-15)."""

    def read_pages(self, pool, keys, host_indices):
        present = list(self.pool_present(pool, list(keys)))
        if present.count(True) != 1 or present[0]:
            return super().read_pages(pool, keys, host_indices)
        index = present.index(True)
        page_size = self.pools[pool].page_size
        moved = super().read_pages(pool, [keys[index]], host_indices[:page_size])
        return [moved[0] if position == index else False for position in range(len(keys))]


class FilesSidecarPagesByHitPolicy(CorrectBackend):
    """Files a sidecar page under its pool and its transfer's hit policy (trailing state in a tier of its own, say),
    so a page written under one policy is not found under another. Correct: SGLang gives a pool the one policy of
    its pool spec on every query, write and read (0.5.23 HybridCacheController builds each transfer from the
    spec's hit_policy)."""

    def filed(self, transfer) -> str:
        name = pool_name(transfer.name)
        if name == "kv" or name not in self.pools:
            return name
        filed = f"{name}@{pool_name(transfer.hit_policy)}"
        self.pools.setdefault(filed, self.pools[name])  # the same host pool, under the filing name
        return filed

    def pool_query(self, transfer, keys):
        name = self.filed(transfer)
        return (
            pool_name(transfer.name),
            pool_name(transfer.hit_policy),
            len(transfer.keys or ()),
            self.pool_present(name, keys),
        )

    def batch_get_v2(self, transfers, extra_info=None):
        return {
            pool_name(item.name): self.read_pages(self.filed(item), list(item.keys or ()), item.host_indices)
            for item in transfers
        }

    def batch_set_v2(self, transfers, extra_info=None):
        ordered = sorted(transfers, key=lambda item: pool_name(item.name) == "kv")
        return {
            pool_name(item.name): self.write_pages(self.filed(item), list(item.keys or ()), item.host_indices)
            for item in ordered
        }


class KvReadBringsItsDerivedPagesAlong(DerivedReadLeftToTheKvRead):
    """Keeps each KV page and its KV-derived sidecar pages side by side, so its KV read lands both, the sidecar's at
    the same page of its pool; batch_get_v2 then reports a KV-derived transfer loaded without copying it again.
    Correct: SGLang reads the KV-derived pools right after the KV read of the same slice, the host pages untouched
    between (0.5.23 CacheController._page_transfer_kv_batch), so the sidecar's bytes are where it says."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        flags = super().batch_get_v1(keys, host_indices, extra_info)
        kv = self.pools["kv"]
        for index, key in enumerate(keys):
            page = int(host_indices[index * kv.page_size]) // kv.page_size
            for name in self.derived_pools:  # marked KV-derived by a backup's writes
                if flags[index] and name in self.pools:
                    size = self.pools[name].page_size
                    self.read_pages(name, [key], torch.arange(page * size, (page + 1) * size))
        return flags


class EvictsAfterTheSecondRead(DropsAfterTheSecondRead):
    """The same cache, declaring that it may evict: correct."""

    hicache_may_evict = True


class KvHitAsAFloat(CorrectBackend):
    """batch_exists_v2 answers with its own result object whose kv_hit_pages is a float (2.0): SGLang slices the
    keys and sizes its reads by it, which a float breaks (BE-21's result shape). An int-valued float compares
    equal to the right count, so only the shape test tells it apart."""

    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        return SimpleNamespace(
            kv_hit_pages=float(result.kv_hit_pages), extra_pool_hit_pages=dict(result.extra_pool_hit_pages)
        )


class VisibleWhileLookupsRaise(VisibleBeforeWritten):
    """Publishes a placeholder before copying (BE-7), and batch_exists raises while a write is in flight: the
    half-written page is still served by batch_get_v1. A probe that raises must not end the watch."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        if self.writing:
            raise RuntimeError("index busy")
        return super().batch_exists(keys, extra_info)

    def write_pages(self, pool, keys, host_indices):
        self.writing = True
        try:
            return super().write_pages(pool, keys, host_indices)
        finally:
            self.writing = False

    writing = False


class LastLegacyTargetLeftUnfilled(CorrectBackend):
    """batch_get stops filling targets one short of the end of a batch of four or more: the last key's target
    comes back as handed in (zeros), reported as a hit (BE-9's bytes). Only a check reading the last key sees it."""

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        values = super().batch_get(keys[:-1], target_locations, target_sizes) if len(keys) >= 4 else None
        if values is None:
            return super().batch_get(keys, target_locations, target_sizes)
        last = target_locations[-1] if target_locations else None
        return values + [last if last is not None and self.exists(keys[-1]) else None]


class FirstLegacyTargetLeftUnfilled(CorrectBackend):
    """batch_get fills the targets from the second key on (a loop started at 1): the first key's target comes back
    as handed in (zeros), reported as a hit (BE-9's bytes). Only a check reading the first key of a batch sees it."""

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        targets = list(target_locations or [None] * len(keys))
        if len(keys) < 2 or targets[0] is None or not self.exists(keys[0]):
            return super().batch_get(keys, target_locations, target_sizes)
        return [targets[0]] + super().batch_get(keys[1:], targets[1:], target_sizes)


class LooksUpUnderTheFirstTpRank(CorrectBackend):
    """batch_exists names keys with TP rank 0 whatever the instance's rank (the lookup path reads a default that
    the write path overrides): on any other TP rank it misses what the writes stored (NS-6)."""

    axis = "tp"

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        rank = getattr(self.config, f"{self.axis}_rank")
        first = self.namespace.replace(f"|{self.axis}{rank}/", f"|{self.axis}0/", 1)
        for index, key in enumerate(keys):
            if self.fetch(f"{first}|kv|{key}") is None:
                return index
        return len(keys)


class RefusesTheLastPipelineRank(CorrectBackend):
    """Sizes its per-stage table by pp_size - 1, so the last pipeline stage of three or more is refused at
    construction (BE-25: every rank up to size - 1 is accepted). A check at another stage misses it."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        pp_rank, pp_size = getattr(storage_config, "pp_rank", 0), getattr(storage_config, "pp_size", 1)
        if pp_size >= 3 and pp_rank == pp_size - 1:
            raise ValueError(f"pp_rank {pp_rank} is outside the stage table of {pp_size - 1} stages")
        super().__init__(storage_config, kwargs)


class HitAfterAMissLeftUnfilled(CorrectBackend):
    """batch_get skips filling the target of the key right after a miss (an index kept across the gap), yet
    returns that target as the hit (BE-9's bytes). Only a check reading the key after the miss sees it."""

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        targets = list(target_locations or [None] * len(keys))
        values: list = []
        after_miss = False
        for key, target in zip(keys, targets):
            if after_miss and target is not None and self.exists(key):
                values.append(target)  # the bug: never filled
            else:
                values.append(self.get(key, target))
            after_miss = values[-1] is None
        return values


class KeepsOneOfEachWrite(CorrectBackend):
    """Declares that it may evict and keeps only the first page of each write: correct. A check still sees a page
    of what it wrote, so none may skip for want of one (a count of 1 is a page seen)."""

    hicache_may_evict = True

    def write_pages(self, pool, keys, host_indices):
        results = super().write_pages(pool, keys, host_indices)
        self.drop(keys[1:], pool)
        return results

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        stored = super().batch_set(keys, values, target_locations, target_sizes)
        self.drop(keys[1:], "kv")
        return stored

    def drop(self, keys: list, pool: str) -> None:
        with self.lock:
            for key in keys:
                self.objects.pop(self.name(key, pool), None)


class ChecksItsHostIndices(CorrectBackend):
    """Raises on a call whose host indices name a page twice, a negative slot, a slot past the pool or a first slot
    off a page boundary, or hold other than a page of slots per key: correct, since SGLang's host pool hands a call
    distinct free pages of its own, one per key, so no check may pass anything else. For a pool it does not know it
    can still tell a slot named twice, and refuses that too."""

    def read_pages(self, pool, keys, host_indices):
        self.require_valid(pool, keys, host_indices)
        return super().read_pages(pool, keys, host_indices)

    def write_pages(self, pool, keys, host_indices):
        self.require_valid(pool, keys, host_indices)
        return super().write_pages(pool, keys, host_indices)

    def require_valid(self, pool, keys, host_indices):
        host_pool = self.pools.get(pool)
        if host_pool is None:
            if host_indices is not None and len(set(host_indices.tolist())) != len(host_indices):
                raise ValueError(f"host_indices of pool {pool!r} name a slot twice in one call")
            return
        if len(host_indices) != len(keys) * host_pool.page_size:
            raise ValueError(
                f"host_indices hold {len(host_indices)} slots for {len(keys)} keys of {host_pool.page_size}"
            )
        starts = [int(host_indices[index * host_pool.page_size]) for index in range(len(keys))]
        if any(start < 0 or start >= host_pool.size or start % host_pool.page_size for start in starts):
            raise ValueError(f"host_indices name slots outside the pool's pages: first slots {starts}")
        if len(set(starts)) != len(starts):
            raise ValueError(f"host_indices name a host page twice in one call: first slots {starts}")


class HoldsOnePage(CorrectBackend):
    """Declares that it may evict and has room for one page in the whole store: a write evicts every page held
    before it and keeps its own first page, the others evicted as they land. Correct; a check that needs a page
    kept past a later write skips, and a check that sees its one page (a count of 1) may not."""

    hicache_may_evict = True
    room: Optional[int] = None
    """Pages the write in progress may still keep; None between writes."""

    @contextlib.contextmanager
    def one_write(self) -> Iterator[None]:
        with self.lock:
            outer = self.room is None
            if outer:
                self.objects.clear()
                self.room = 1
            try:
                yield
            finally:
                if outer:
                    self.room = None

    def put(self, name, data):
        if self.room == 0 and not self.store_failing:
            return True  # stored, and evicted at once
        stored = super().put(name, data)
        if self.room is not None:
            self.room -= 1
        return stored

    def write_pages(self, pool, keys, host_indices):
        with self.one_write():
            return super().write_pages(pool, keys, host_indices)

    def set(self, key, value=None, target_location=None, target_sizes=None):
        with self.one_write():
            return super().set(key, value, target_location, target_sizes)

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        with self.one_write():
            return super().batch_set(keys, values, target_locations, target_sizes)


WITHOUT_V2 = tuple(level for level in ALL_LEVELS if level != "v2")
"""The levels of a backend that does not claim v2."""


class LegacyLeftUnimplemented(CorrectBackend):
    """A v1 backend without the legacy per-key methods: get, set, exists, batch_get and batch_set raise
    NotImplementedError, as the interface's defaults do (correct: SGLang calls them only on a backend without
    v1). batch_exists, which every backend answers, looks up the store itself."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        for index, key in enumerate(keys):
            if not self.present(self.name(key)):
                return index
        return len(keys)

    def exists(self, key: str) -> bool:
        raise NotImplementedError("exists")

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        raise NotImplementedError("get")

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        raise NotImplementedError("batch_get")

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        raise NotImplementedError("set")

    def batch_set(self, keys: list, values: Any = None, target_locations: Any = None, target_sizes: Any = None) -> bool:
        raise NotImplementedError("batch_set")


class V2HookRefusesASecondPoolTersely(CorrectBackend):
    """Refuses a second, different host pool in register_mem_pool_host, saying why; its v2 hook refuses one with a
    bare ValueError. Correct: SGLang registers through the v1 hook first and never reaches the v2 hook once that
    refused (BE-28 judges the refusal SGLang sees)."""

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        known = self.pools.get(pool_name(host_pool_name))
        if known is not None and known is not host_pool:
            raise ValueError()
        super().register_mem_host_pool_v2(host_pool, host_pool_name)


class EmptyValueRefusedShortOneKept(CorrectBackend):
    """set raises on an empty value (its store has no zero-length objects) but keeps a value shorter than a page,
    and exists and batch_exists look only at whether an object is there, not at its length (get checks it): half
    a page counts as a hit (BE-13). The refusal of the empty value is fine; the check must go on to the short one."""

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        if isinstance(value, torch.Tensor) and value.numel() == 0:
            raise ValueError(f"empty value for {key!r}: the store keeps no zero-length objects")
        return super().set(key, value, target_location, target_sizes)

    def exists(self, key: str) -> bool:
        return self.fetch(self.name(key)) is not None

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        if not self.present(self.name(key)):
            return None
        return super().get(key, target_location, target_sizes)


class RefusesAnLcmAboveItsTpSize(CorrectBackend):
    """Sizes its head shards by tp_size alone and refuses a config whose tp_lcm_size is larger (SGLang sets it
    when prefill and decode run different TP sizes), so the edge with tp_lcm_size 4 and tp_size 2 fails to build
    (BE-25). Under a release without dp_rank the check must still reach that edge past the one it cannot build."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        lcm, size = getattr(storage_config, "tp_lcm_size", None), storage_config.tp_size
        if lcm is not None and lcm != size:
            raise ValueError(f"tp_lcm_size {lcm} differs from tp_size {size}: heads are sharded by tp_size only")
        super().__init__(storage_config, kwargs)


class DerivedWriteIndexedBeforeItsCopy(CorrectBackend):
    """Enters a KV-derived sidecar page in its index before copying it and keeps the entry when the copy fails;
    batch_exists_v2 answers a KV-derived query (indices_from_pool kv) from that index. Here every KV-derived copy
    fails (no room for that pool), so batch_set_v2 says False, yet batch_exists_v2 reports the pages present and
    batch_get_v2 cannot load them (BE-22). A query without indices_from_pool looks at the store and sees none."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.derived: set[str] = set()

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict:
        def is_derived(item: Any) -> bool:
            return pool_name(getattr(item, "indices_from_pool", None)) == "kv"

        results = super().batch_set_v2([item for item in transfers if not is_derived(item)], extra_info)
        for item in filter(is_derived, transfers):
            name, keys = pool_name(item.name), list(item.keys or ())
            self.derived.update(self.name(key, name) for key in keys)
            results[name] = [False] * len(keys)  # the copy failed; the index entries stay
        return results

    def pool_query(self, transfer: Any, keys: list) -> tuple:
        name, policy, window, present = super().pool_query(transfer, keys)
        if pool_name(getattr(transfer, "indices_from_pool", None)) == "kv":
            present = tuple(self.name(key, name) in self.derived for key in keys)
        return (name, policy, window, present)


class HoldsOnePageForEveryController(HoldsOnePage):
    """HoldsOnePage driven through the legacy methods, serving any number of host pools: get and set carry their
    own tensors, so a second pool under 'kv' needs nothing of it (it keeps the first for its page size). Correct;
    with room for one page, a check that reads through two pools or two prefix states sees a page through only
    one of them, and must count that as seen."""

    def register_pool(self, name: str, host_pool: Any) -> None:
        self.pools.setdefault(name, host_pool)


class AdmitsNothingOnceFull(CorrectBackend):
    """Declares that it may evict and has room for eight pages in the whole store, which it never gives up: once
    full, every new page is evicted as it lands (its write still says True). Correct; a check that saw pages early
    and none after the store filled has still seen pages, and may not skip."""

    hicache_may_evict = True
    room = 8

    def put(self, name: str, data: bytes) -> bool:
        with self.lock:
            if len(self.objects) >= self.room and name not in self.objects and not self.store_failing:
                return True  # stored, and evicted at once
            return super().put(name, data)


class ReadsMissWhileAWriteRuns(RebuildsItsIndexOnWrite):
    """Reads find their pages through the index a write rebuilds, and miss every page while another thread's write
    runs; batch_exists looks at the store itself and counts them (BE-23: a page whose write returned True is found
    by every get that begins after it). Only the history rule for gets after a confirmed write sees it.

    Once reads and writes have come from different threads, the two meet on purpose (each waits up to
    ``MEETING_S`` for the other): a read waits for a write to begin, a write holds its rebuild until a read has
    looked. So each read of the suite's paced reading thread meets the write of its turn, in every round, however
    busy the machine; calls from one thread never wait."""

    MEETING_S = 0.05
    """How long a read waits for a write, and a write for a read, once both come from different threads."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.write_begun = threading.Event()
        self.read_looked = threading.Event()
        self.readers: set[int] = set()
        self.writers: set[int] = set()

    def crosses_threads(self, own: int, others: set[int]) -> bool:
        return bool(others - {own})

    @contextlib.contextmanager
    def rebuilding(self) -> Iterator[None]:
        me = threading.get_ident()
        self.writers.add(me)
        self.read_looked.clear()
        with super().rebuilding():
            self.write_begun.set()
            if self.crosses_threads(me, self.readers):
                self.read_looked.wait(self.MEETING_S)
            try:
                yield
            finally:
                self.write_begun.clear()

    def misses_now(self) -> bool:
        me = threading.get_ident()
        self.readers.add(me)
        if self.crosses_threads(me, self.writers):
            self.write_begun.wait(self.MEETING_S)
        missing = self.another_write_runs()
        self.read_looked.set()
        return missing

    def read_pages(self, pool, keys, host_indices):
        if self.misses_now():
            return [False] * len(keys)
        return super().read_pages(pool, keys, host_indices)

    def get(self, key, target_location=None, target_sizes=None):
        return None if self.misses_now() else super().get(key, target_location, target_sizes)


class MambaStateSharedUnderMla(CorrectBackend):
    """Files every pool of a replicated-KV (MLA) instance under the namespace its TP ranks share, Mamba state
    included: the state each rank writes under one key collides, the last rank's replacing the others' (NS-1:
    Mamba state is sharded by TP rank, CTL-8). MLA KV is shared as it must be (NS-5)."""

    def name(self, key: str, pool: str = "kv") -> str:
        return f"{self.namespace}|{pool}|{key}"


class ExistsStagesPagesTheRunReadMisses(RunBackend):
    """batch_exists stages each page it counts in a memory tier for the read it expects next, moving the object out
    of the store; a read page by page looks in that tier first, but a read whose host pages form one run fetches
    the run from the store in one bulk call and misses the staged pages (BE-3: asking changes nothing)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.staged: dict[str, bytes] = {}

    def fetch(self, name: str) -> Optional[bytes]:
        with self.lock:
            if name in self.staged:
                return self.staged[name]
        return super().fetch(name)

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        count = super().batch_exists(keys, extra_info)
        with self.lock:
            for key in keys[:count]:
                if self.name(key) in self.objects:
                    self.staged[self.name(key)] = self.objects.pop(self.name(key))
        return count

    def read_pages(self, pool, keys, host_indices):
        if pool != "kv" or not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)
        with self.lock:
            stored = {key: self.objects.get(self.name(key, pool)) for key in keys}
        return self.load_each(pool, keys, host_indices, stored.get)


class PrefixLookupRefusesUnknownOptions(CorrectBackend):
    """A lookup given prefix_keys (a list, even empty) continues a prefix match and turns on each extra_info option
    set to a true value, looking up the option's handler: an unknown one raises KeyError (BE-8). Without
    prefix_keys it reads no option, and an option set to 0 is never looked up."""

    prefix_options: dict[str, Any] = {}
    """The options the prefix match knows: none."""

    def batch_exists(self, keys, extra_info=None):
        if getattr(extra_info, "prefix_keys", None) is not None:
            for option, value in (getattr(extra_info, "extra_info", None) or {}).items():
                if value:
                    self.prefix_options[option]
        return super().batch_exists(keys, extra_info)


class FoldsByTheSmallestPoolHit(CorrectBackend):
    """batch_exists_v2's kv_hit_pages is the smallest of KV's leading run and each pool's own largest hit, as SGLang
    folded before #39147 (BE-21): a trailing_pages pool with a hole restores a short prefix and a longer one but
    none between, and the smallest largest hit can fall between them. Each pool's entry is right."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        kv_hit = count_leading_run(self.pool_present("kv", keys))
        boundaries = [
            plain_pool_boundary(policy, window, present, kv_hit)
            for _, policy, window, present in (self.pool_query(item, keys) for item in pool_transfers or ())
        ]
        return PoolTransferResult(
            kv_hit_pages=min([kv_hit, *boundaries]),
            extra_pool_hit_pages=result.extra_pool_hit_pages,
            restorable_prefix_pages=result.restorable_prefix_pages,
        )


class FoldsToTheShortestRestorableLength(CorrectBackend):
    """batch_exists_v2 scans the prefix lengths upward and stops at the first one KV and every pool can restore:
    kv_hit_pages is the shortest restorable length, not the largest (BE-21). A trailing_pages pool restores 1 and 2
    of a chain but not 3, so the hit is 1 where it should be 2. Each pool's entry is right."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        queries = tuple(self.pool_query(item, keys) for item in pool_transfers or ())
        _, _, restorable = plain_fold(self.pool_present("kv", keys), queries)
        return PoolTransferResult(
            kv_hit_pages=min(restorable, default=0), extra_pool_hit_pages=result.extra_pool_hit_pages
        )


class KvRunWriteIndexesItsDerivedPages(RunBackend):
    """A KV write whose host pages form one run is indexed as a whole slice: its entry also marks the slice's
    KV-derived indexer pages present (they share KV's host indices), written or not, and batch_exists_v2 answers a
    KV-derived query from that index (BE-22: an indexer page never written is reported missing). KV written page by
    page is indexed one pool at a time."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.slices: set[str] = set()

    def write_pages(self, pool, keys, host_indices):
        results = super().write_pages(pool, keys, host_indices)
        if pool == "kv" and self.is_run(pool, keys, host_indices):
            self.slices.update(self.name(key, "indexer") for key, stored in zip(keys, results) if stored)
        return results

    def pool_query(self, transfer: Any, keys: list) -> tuple:
        name, policy, window, present = super().pool_query(transfer, keys)
        if pool_name(getattr(transfer, "indices_from_pool", None)) == "kv":
            present = tuple(here or self.name(key, name) in self.slices for key, here in zip(keys, present))
        return (name, policy, window, present)


class DerivedReadTrustsTheKvHits(CorrectBackend):
    """A KV-derived sidecar read (``indices_from_pool`` KV) copies the pages it finds and reports every page loaded:
    the backend takes it for the tail of a KV read of the same keys, whose hits it assumes, so a key never written
    reads as a hit (BE-4). A sidecar read of its own pool's indices looks each page up."""

    def batch_get_v2(self, transfers, extra_info=None):
        results = super().batch_get_v2(transfers, extra_info)
        for item in transfers:
            if self.is_derived(item):
                results[pool_name(item.name)] = [True] * len(item.keys or ())
        return results


class V1ReadFallsOffTheEnd(CorrectBackend):
    """v1 is not claimed while the extra config asks SGLang for it; batch_get_v1 answers empty input, checks the host
    indices it is given, and then returns None instead of a result or NotImplementedError (BE-18), as
    ``V2ReadFallsOffTheEnd`` does for v2."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        if not keys:
            return []
        if len(host_indices) and int(host_indices.min()) < 0:
            raise ValueError("host indices must be >= 0")
        return None


class V2WriteFallsOffTheEnd(UnimplementedV2, CorrectBackend):
    """v2 is not claimed: batch_exists_v2 and batch_get_v2 are SGLang's stubs (NotImplementedError), and batch_set_v2,
    begun and left unfinished, answers empty input and returns None for anything else (BE-18). Only a check that goes
    on past the first NotImplementedError reaches it."""

    def batch_set_v2(self, transfers, extra_info=None):
        if not transfers:
            return {}
        return None


class V2LeftUnimplemented(UnimplementedV2, CorrectBackend):
    """A v1 backend without v2: the v2 data methods raise NotImplementedError, as SGLang's base class does. Correct:
    SGLang calls v2 only on a backend that implements it, and NotImplementedError is what BE-18 asks for."""


class BulkResultsAsTensors(CorrectBackend):
    """A v1 batch of 8 keys or more goes through one bulk copy whose per-page status is a bool tensor, returned as
    ``list(status)`` (one 0-d tensor per key) where ``status.tolist()`` was meant (BE-14: a list of bools). Smaller
    batches, copied page by page, return bools."""

    BULK = 8

    def as_result(self, results: list[bool]) -> list:
        return list(torch.tensor(results, dtype=torch.bool)) if len(results) >= self.BULK else results

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return self.as_result(super().batch_get_v1(keys, host_indices, extra_info))

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return self.as_result(super().batch_set_v1(keys, host_indices, extra_info))


class EmptyV2ReadAnsweredWithAList(CorrectBackend):
    """batch_get_v2 returns early for no transfers with ``[]`` instead of an empty dict (BE-19: SGLang looks its
    pools up in the result)."""

    def batch_get_v2(self, transfers, extra_info=None):
        if not transfers:
            return []
        return super().batch_get_v2(transfers, extra_info)


class DerivedResultsFiledUnderKv(CorrectBackend):
    """batch_get_v2 and batch_set_v2 file each transfer's flags under the pool whose host indices it carries: a
    KV-derived sidecar (``indices_from_pool`` KV) under ``kv``, not under its own name (BE-19: one entry per transfer
    name)."""

    def filed(self, transfers: list, results: dict) -> dict:
        filed = {}
        for item in transfers:
            carrier = "kv" if self.is_derived(item) else item.name
            filed[pool_name(carrier)] = results[pool_name(item.name)]
        return filed

    def batch_get_v2(self, transfers, extra_info=None):
        return self.filed(transfers, super().batch_get_v2(transfers, extra_info))

    def batch_set_v2(self, transfers, extra_info=None):
        return self.filed(transfers, super().batch_set_v2(transfers, extra_info))


class DerivedIndexKeyedByHostSlot(CorrectBackend):
    """Keeps an index of the KV-derived sidecar pages it holds, keyed by the host slot each was copied from, and
    answers a KV-derived query (``indices_from_pool`` KV) from it: a later backup through the same host pages (SGLang
    reuses them) overwrites the entry, so the earlier pages, still stored, are reported missing (BE-21: the hit is the
    longest prefix every gating pool can restore). A query without ``indices_from_pool`` looks at the store."""

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.derived_index: dict[tuple[str, int], str] = {}

    def batch_set_v2(self, transfers, extra_info=None):
        results = super().batch_set_v2(transfers, extra_info)
        for item in transfers:
            name = pool_name(item.name)
            if getattr(item, "indices_from_pool", None) is None or name not in self.pools:
                continue
            size = self.pools[name].page_size
            for index, (key, stored) in enumerate(zip(item.keys or (), results[name])):
                if stored:
                    self.derived_index[(name, int(item.host_indices[index * size]))] = key
        return results

    def pool_query(self, transfer, keys):
        name, policy, window, present = super().pool_query(transfer, keys)
        if getattr(transfer, "indices_from_pool", None) is not None:
            indexed = {key for (pool, _), key in self.derived_index.items() if pool == name}
            present = tuple(key in indexed for key in keys)
        return name, policy, window, present


class RunReadJoinsItsPages(RunBackend):
    """A KV read whose host pages form one run fetches the run's objects in one bulk call and joins their bytes into
    one buffer before copying it: a missing page (None) makes the join raise TypeError (BE-4: a missing key is a
    miss), and the store's error escapes the bulk fetch (BE-5: a storage error is a failure). A read of scattered
    pages looks each page up, and a miss or a failing store is a miss."""

    joined_pools: tuple[str, ...] = ("kv",)
    """The pools whose run reads take the bulk path."""

    def read_pages(self, pool, keys, host_indices):
        if pool not in self.joined_pools or not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)
        joined = b"".join([self.fetch(self.name(key, pool)) for key in keys])  # a missing page (None) raises
        size = self.page_bytes(pool)
        pages = {key: joined[index * size : (index + 1) * size] for index, key in enumerate(keys)}
        return self.load_each(pool, keys, host_indices, pages.get)


class KvRunCacheOutlivesClear(SidecarRunCacheOutlivesClear):
    """The KV twin of ``SidecarRunCacheOutlivesClear``: KV pages written are kept in a read cache as well, and a KV
    read whose host pages form one run is served from it; clear() empties the store but forgets the cache (BE-11).
    Counts and reads of scattered pages look at the store."""

    def caches(self, pool: str) -> bool:
        return pool == "kv"


class EmptyLookupAnsweredWithAnEmptyList(CorrectBackend):
    """batch_exists answers an empty key list with an empty list (one flag per key, as for a v1 read) where the count
    0 is asked for (BE-3): SGLang cuts the key list with the count and multiplies it by the page size. Every lookup of
    one key or more counts its leading run."""

    def batch_exists(self, keys, extra_info=None):
        if not keys:
            return []
        return super().batch_exists(keys, extra_info)


class EmptyLookupAnsweredWithFalse(CorrectBackend):
    """Correct: batch_exists answers an empty key list with False, which SGLang reads as the count 0 (it only cuts the
    key list with the count and does arithmetic with it, BE-2)."""

    def batch_exists(self, keys, extra_info=None):
        if not keys:
            return False
        return super().batch_exists(keys, extra_info)


class CountsWithNumpyIntegers(CorrectBackend):
    """Correct: batch_exists returns its count as a numpy integer (a vector library's sum), which SGLang cuts the key
    list with and multiplies as it does an int (BE-2)."""

    def batch_exists(self, keys, extra_info=None):
        return numpy.int64(super().batch_exists(keys, extra_info))


class CountsInANarrowNumpyInteger(CorrectBackend):
    """batch_exists returns its count as numpy's int8: a slice takes it, but SGLang multiplies it by the page size in
    that type, so 3 pages of 64 tokens become -64 tokens (BE-2)."""

    def batch_exists(self, keys, extra_info=None):
        return numpy.int8(super().batch_exists(keys, extra_info))


class OneReplicaForEveryDcpRankUndeclared(OneReplicaForEveryDcpRank):
    """Correct: keeps no DCP shard apart and does not say SGLang drives it under decode context parallelism, which
    SGLang 0.5.23 does only for its file and Mooncake backends, never for a dynamic one (NS-5)."""

    hicache_dcp = False


class DisabledLayoutListsItsRankPools(CorrectBackend):
    """Correct: a layout it cannot describe (sharded KV) still lists its pools under the instance's whole namespace,
    ranks included, so the schedulers of one stage give unequal disabled replies, as SGLang's MooncakeStore does for
    a TP-sharded pool; the joined layout is disabled either way (BE-32)."""

    def describe_l3_object_layout(self, **kwargs: Any) -> dict:
        layout = super().describe_l3_object_layout(**kwargs)
        if not layout["enabled"]:
            layout["hicache_object_layout"]["pools"] = [{"pool": "kv", "key_prefix": self.namespace}]
        return layout


class FlagsAsNumpyBools(CorrectBackend):
    """Correct: every read and write flag, v1 and v2 (and the legacy write's one), is numpy's bool (a vector library's
    comparison), which SGLang tests by its truth as it does a bool (BE-14, BE-19)."""

    def read_pages(self, pool, keys, host_indices):
        return [numpy.bool_(flag) for flag in super().read_pages(pool, keys, host_indices)]

    def write_pages(self, pool, keys, host_indices):
        return [numpy.bool_(flag) for flag in super().write_pages(pool, keys, host_indices)]

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        return numpy.bool_(super().batch_set(keys, values, target_locations, target_sizes))


class V2ExtraInfoByKeywordOnly(CorrectBackend):
    """batch_get_v2 and batch_set_v2 take extra_info by keyword only, the form the controller uses from 0.5.21: SGLang
    0.5.23's failure injector hands it on positionally, so every sidecar read and write behind it raises (BE-8,
    BE-33)."""

    def batch_get_v2(self, transfers, *, extra_info=None):
        return super().batch_get_v2(transfers, extra_info)

    def batch_set_v2(self, transfers, *, extra_info=None):
        return super().batch_set_v2(transfers, extra_info)


class SidecarRunReadJoinsItsPages(RunReadJoinsItsPages):
    """The sidecar twin of ``RunReadJoinsItsPages``: a sidecar read (a KV-derived indexer read included) whose host
    pages form one run joins the fetched objects' bytes, and a missing page makes the join raise TypeError (BE-4)."""

    joined_pools = ("indexer", "swa")


class LookupLeavesOutTheTpRank(CorrectBackend):
    """batch_exists looks keys up in one index for the whole TP group (the namespace without its TP rank, to answer a
    lookup once for every shard), while writes and reads keep the rank: a sibling TP rank counts pages it cannot read
    (NS-1)."""

    def shared(self, name: str) -> str:
        """``name`` with its TP coordinate left out."""
        head, _, rest = name.partition("|tp")
        return head + "|" + rest.partition("|")[2]

    def batch_exists(self, keys, extra_info=None):
        with self.lock:
            indexed = {self.shared(name) for name in self.objects}
        return count_leading_run(tuple(self.shared(self.name(key)) in indexed for key in keys))


class RunReadTakesItsFirstSlotForAPage(RunBackend):
    """A KV read whose host pages form one run copies the run in one piece to the host page numbered by the run's
    first slot (a slot index taken for a page index): a run from host page 0 lands right, one from any later page
    lands past the pool and the read reports a miss (NS-6: pages written, counted and then not read back; NS-7: the
    rebuilt instance reads them into pages 4 to 6; BE-28: the pages written before a second host pool was
    registered, read back into pages 4 to 7, are gone). A read of scattered pages copies each page to its own slot."""

    def read_pages(self, pool, keys, host_indices):
        if pool != "kv" or not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)
        host_pool, first = self.pools[pool], int(host_indices[0])
        results = []
        for index, key in enumerate(keys):
            data = self.fetch(self.name(key, pool))
            try:
                if data is None:
                    raise KeyError(key)
                host_pool.set_from_flat_data_page((first + index) * host_pool.page_size, self.page_tensor(data, pool))
                results.append(True)
            except Exception:
                results.append(False)
        return results


class RefusesPagesOfZeros(CorrectBackend):
    """Refuses (False) to write a page whose bytes are all zeros, taking it for a host page never filled, and stores
    nothing for it. Correct: a write may be refused, and a page of computed KV or sidecar state is not all zeros."""

    def write_pages(self, pool, keys, host_indices):
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return super().write_pages(pool, keys, host_indices)
        size, results = host_pool.page_size, []
        for index, key in enumerate(keys):
            slots = host_indices[index * size : (index + 1) * size]
            filled = bool(host_pool.get_data_page(int(slots[0]), flat=True).count_nonzero())
            results.append(filled and super().write_pages(pool, [key], slots)[0])
        return results


class StoredKeysExtendThePrefix(RefusesPagesOfZeros):
    """batch_set_v1 appends the keys it stored to the prefix_keys list it was given, to hand the longer prefix on to
    the next batch, so the caller's list changes (PFX-6). It refuses pages of zeros, as ``RefusesPagesOfZeros`` may:
    a write that stored nothing leaves the list alone."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_set_v1(keys, host_indices, extra_info)
        prefix = getattr(extra_info, "prefix_keys", None)
        if isinstance(prefix, list):
            prefix.extend(key for key, stored in zip(keys, results) if stored)
        return results


class KeepsTheFirstWrite(CorrectBackend):
    """A write-once store: writing a key it holds returns True and keeps the bytes first written, as SGLang's
    HiCacheFile skips a page whose file exists. Correct: a rewrite may skip or overwrite (BE-6)."""

    def put(self, name: str, data: bytes) -> bool:
        with self.lock:
            if name in self.objects and not self.store_failing:
                return True
        return super().put(name, data)


class RefusesV2Pools(UnimplementedV2, CorrectBackend):
    """A v1 backend without v2 that refuses v2 pools: register_mem_host_pool_v2 raises NotImplementedError, so that
    a hybrid model's attach fails at once instead of losing its sidecars. Correct: SGLang registers v2 pools only
    through the hybrid controller, which drives a backend that implements v2."""

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} serves no v2 pools ({pool_name(host_pool_name)!r})")


class RefusesADerivedSwaPool(CorrectBackend):
    """Refuses (False for every page) a transfer of the swa pool marked KV-derived (``indices_from_pool`` KV): a
    KV-derived pool has every KV page, and a sliding-window pool restores only its trailing window, so SGLang always
    gives the swa pool slots of its own. Correct: a write may return False, and what was refused is a miss."""

    def derived_swa(self, transfer: Any) -> bool:
        return pool_name(transfer.name) == "swa" and self.is_derived(transfer)

    def refusing(self, method: Any, transfers: list, extra_info: Any) -> dict:
        served = method([item for item in transfers if not self.derived_swa(item)], extra_info)
        refused = {pool_name(item.name): [False] * len(item.keys or ()) for item in transfers if self.derived_swa(item)}
        return {**served, **refused}

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict:
        return self.refusing(super().batch_set_v2, transfers, extra_info)

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict:
        return self.refusing(super().batch_get_v2, transfers, extra_info)


class RefusesPastItsRoom(CorrectBackend):
    """Gives each client (instance) room for seven pages, and refuses (False) every new page past them, storing
    nothing; a page it holds it keeps, and a rewrite of one is served. Correct: a write may be refused, and without
    eviction declared every page whose write returned True stays."""

    room = 7

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.held: set[str] = set()

    def put(self, name: str, data: bytes) -> bool:
        with self.lock:
            if name not in self.held and len(self.held) >= self.room and not self.store_failing:
                return False
            stored = super().put(name, data)
            if stored:
                self.held.add(name)
            return stored


class DerivedPagesOutliveClear(CorrectBackend):
    """A KV-derived sidecar page (``indices_from_pool`` KV) is filed with the KV page it derives from, under a name
    outside the prefix of the namespace that clear() walks: clear() removes the KV pages and the sidecars with slots
    of their own, and leaves the KV-derived ones, which still read back (BE-11)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.filing = threading.local()

    def derived(self, transfer: Any) -> bool:
        return self.is_derived(transfer)

    @contextlib.contextmanager
    def filed_with_kv(self) -> Iterator[None]:
        self.filing.derived = True
        try:
            yield
        finally:
            self.filing.derived = False

    def name(self, key: str, pool: str = "kv") -> str:
        if pool != "kv" and getattr(self.filing, "derived", False):
            return f"{self.namespace}+kv-derived|{pool}|{key}"
        return super().name(key, pool)

    def by_filing(self, method: Any, transfers: list, extra_info: Any) -> dict:
        with self.filed_with_kv():
            results = method([item for item in transfers if self.derived(item)], extra_info)
        return {**results, **method([item for item in transfers if not self.derived(item)], extra_info)}

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict:
        return self.by_filing(super().batch_set_v2, transfers, extra_info)

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict:
        return self.by_filing(super().batch_get_v2, transfers, extra_info)

    def pool_query(self, transfer: Any, keys: list) -> tuple:
        if not self.derived(transfer):
            return super().pool_query(transfer, keys)
        with self.filed_with_kv():
            return super().pool_query(transfer, keys)


class V2ReadFallsOffTheEndWithoutALookup(V2ReadFallsOffTheEnd):
    """``V2ReadFallsOffTheEnd`` (v2 not claimed, batch_get_v2 returning None) with no batch_exists_v2 at all: the
    attribute is None, hiding the base class's method (BE-18). A check that stops at the first method it finds
    absent never reaches the read that returns None."""

    batch_exists_v2 = None  # type: ignore[assignment]


class RunWriteCacheOutlivesClear(SidecarRunCacheOutlivesClear):
    """A write over one run of host pages, in any pool, is one bulk put whose buffer is kept as a read cache, and a
    read whose host pages form one run is served from it; clear() empties the store but forgets the cache (BE-11).
    A write from scattered host pages goes page by page and caches nothing."""

    def caches(self, pool: str) -> bool:
        return True

    def write_pages(self, pool, keys, host_indices):
        if not self.is_run(pool, keys, host_indices):
            return CorrectBackend.write_pages(self, pool, keys, host_indices)
        return super().write_pages(pool, keys, host_indices)


class StatsOfASinglePageWriteAsADict(CorrectBackend):
    """get_stats returns the statistics of the last write: a batch builds a metrics object, and a write of one page,
    which goes through the store client's single put, keeps the client's reply as it is, a dict (BE-12). None
    before any write."""

    last_write: Any = None

    def write_pages(self, pool, keys, host_indices):
        results = super().write_pages(pool, keys, host_indices)
        if len(keys) == 1:
            self.last_write = {"pages": 1, "stored": sum(results)}
        elif keys:
            self.last_write = SimpleNamespace(pages=len(keys), stored=sum(results))
        return results

    def get_stats(self):
        return self.last_write


def unfinished_at(host_indices: Any) -> None:
    """The body of a zero-copy method begun and left unfinished: a negative first slot raises ValueError, a first
    slot of 0 returns None early (``if not first``, a test meant for no host indices), and any other page reaches the
    path not written yet, NotImplementedError (BE-18: a method that returns None where SGLang calls it)."""
    first = int(host_indices[0])
    if first < 0:
        raise ValueError(f"host indices must be >= 0, got {first}")
    if not first:
        return None
    raise NotImplementedError("the zero-copy path is not written yet")


class V1ReadTakesSlotZeroForNoPages(CorrectBackend):
    """v1 is not claimed while the extra config asks SGLang for it; batch_get_v1 answers empty input and is otherwise
    ``unfinished_at`` its host indices: None for page 0, NotImplementedError elsewhere (BE-18)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return unfinished_at(host_indices) if keys else []


class V1WriteTakesSlotZeroForNoPages(CorrectBackend):
    """``V1ReadTakesSlotZeroForNoPages`` for batch_set_v1 (BE-18)."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return unfinished_at(host_indices) if keys else []


class V2ReadTakesSlotZeroForNoPages(CorrectBackend):
    """v2 is not claimed; batch_get_v2 answers empty input and is otherwise ``unfinished_at`` its first transfer's host
    indices: None for page 0, NotImplementedError elsewhere (BE-18)."""

    def batch_get_v2(self, transfers, extra_info=None):
        return unfinished_at(transfers[0].host_indices) if transfers else {}


class V2WriteTakesSlotZeroForNoPages(CorrectBackend):
    """``V2ReadTakesSlotZeroForNoPages`` for batch_set_v2 (BE-18)."""

    def batch_set_v2(self, transfers, extra_info=None):
        return unfinished_at(transfers[0].host_indices) if transfers else {}


class TakesAPoolOfTheSameShapeForTheSame(CorrectBackend):
    """Tells a host pool registered again from a different one by its shape (slots, page size, dtype), not by
    identity: a second pool of the first one's shape is taken for the first re-registered and replaces it, so the
    first controller's v1 calls move the second one's slots (BE-28); a pool of another shape is refused, saying why."""

    @staticmethod
    def shape(host_pool: Any) -> tuple:
        return (host_pool.size, host_pool.page_size, host_pool.dtype)

    def register_pool(self, name: str, host_pool: Any) -> None:
        known = self.pools.get(name)
        if known is not None and self.shape(known) != self.shape(host_pool):
            raise ValueError(
                f"pool {name!r} already has a host pool of another shape; build one instance per controller"
            )
        self.pools[name] = host_pool


class RunWriteFromPageZeroStoresNothing(RunBackend):
    """The run path of a write (one bulk put of a run of host pages) guards against no host indices with ``if not
    first`` on its first slot, so a run from page 0 stores nothing and reports every page written (BE-17); the pages
    read back through the first of two host pools registered under 'kv' are then missing (BE-28)."""

    def write_pages(self, pool, keys, host_indices):
        if self.is_run(pool, keys, host_indices) and not int(host_indices[0]):
            return [True] * len(keys)
        return super().write_pages(pool, keys, host_indices)


class RunWriteTakesItsFirstSlotForAPage(RunBackend):
    """The write twin of ``RunReadTakesItsFirstSlotForAPage``: a KV write whose host pages form one run slices the run
    from the host page numbered by its first slot. A run from host page 0 is right; from any later page the slice
    lies past the pool's end, which yields no bytes rather than an error, and the write stores those empty objects
    and reports them written (BE-17): the pages are then missing (BE-28 reads its second write back)."""

    def write_pages(self, pool, keys, host_indices):
        if pool != "kv" or not self.is_run(pool, keys, host_indices):
            return super().write_pages(pool, keys, host_indices)
        host_pool, first = self.pools[pool], int(host_indices[0])
        results = []
        for index, key in enumerate(keys):
            slot = (first + index) * host_pool.page_size
            try:
                page = host_pool.get_data_page(slot, flat=True) if slot < host_pool.size else torch.empty(0)
                results.append(self.put(self.name(key, pool), tensor_bytes(page)))
            except Exception:
                results.append(False)
        return results


class RewriteKeepsTheOldTail(CorrectBackend):
    """A rewrite of a key whose bytes changed is an in-place update of the object's first chunk, half a page, which
    leaves the old second half (BE-6: a rewrite leaves the first or the second bytes, never a mix). A rewrite of the
    same bytes is whole either way."""

    def put(self, name: str, data: bytes) -> bool:
        with self.lock:
            old = self.objects.get(name)
        if old is not None and len(old) == len(data) and old != data:
            data = data[: len(data) // 2] + old[len(data) // 2 :]
        return super().put(name, data)


class CountsThePrefixsLastKeyToo(CorrectBackend):
    """batch_exists given a non-empty prefix_keys takes the prefix's last key for the first page of the query (an off
    by one on where the prefix ends) and counts it as a hit: one more than the leading run of the keys asked about
    (BE-8)."""

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        return count + 1 if getattr(extra_info, "prefix_keys", None) else count


class CountsFromTheSecondKeyPastAPrefix(CorrectBackend):
    """batch_exists given a non-empty prefix_keys takes the query's first key for the prefix's last one (the opposite
    off by one) and counts from the second: one less than the leading run of the keys asked about (BE-8)."""

    def batch_exists(self, keys, extra_info=None):
        if getattr(extra_info, "prefix_keys", None):
            return super().batch_exists(list(keys)[1:], extra_info)
        return super().batch_exists(keys, extra_info)


class EmptyTensorForAMissingKey(CorrectBackend):
    """batch_get answers a missing key with an empty tensor, not None (BE-9: one tensor-or-None per key, None for a
    miss); get answers None."""

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        values = super().batch_get(keys, target_locations, target_sizes)
        return [torch.empty(0, dtype=torch.float16) if value is None else value for value in values]


class FullBatchReadStopsAt64Pages(CorrectBackend):
    """batch_get_v1 stages its pages in a buffer of 64 and loads only the first 64 of a longer batch, reporting the
    rest missing though they are stored (BE-10: a batch of 128 pages reads back whole)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_get_v1(list(keys)[:64], host_indices, extra_info)
        return results + [False] * (len(keys) - len(results))


READ_CACHE: dict[tuple[str, str, str], Optional[bytes]] = {}
"""The process-wide read cache of ``RunReadServedFromAReadCacheOfAnyNamespace``: bytes by (store, pool, key)."""


class RunReadServedFromAReadCacheOfAnyNamespace(RunBackend):
    """A read whose host pages form one run is served first from a process-wide read cache that earlier run reads
    filled under the key alone, namespace left out; a write of the key drops its entry. Another rank or model that
    reads a key as a run after this one read it gets this one's bytes (NS-1..NS-4); a scattered read goes to the
    store."""

    def read_pages(self, pool, keys, host_indices):
        if not self.is_run(pool, keys, host_indices):
            return super().read_pages(pool, keys, host_indices)

        def lookup(key: str) -> Optional[bytes]:
            cached = READ_CACHE.get((self.store_name, pool, key))
            if cached is None and self.present(self.name(key, pool), pool):
                cached = READ_CACHE[(self.store_name, pool, key)] = self.fetch(self.name(key, pool))
            return cached

        return self.load_each(pool, keys, host_indices, lookup)

    def write_pages(self, pool, keys, host_indices):
        for key in keys:
            READ_CACHE.pop((self.store_name, pool, key), None)
        return super().write_pages(pool, keys, host_indices)


class NonWriterRunWriteTakesTheKvPath(RunBackend):
    """A write whose host pages form one run takes the bulk path built for KV, which on a rank that is not the storage
    writer of replicated KV acknowledges the pages and drops them, "the writer stores them": right for KV, which
    SGLang never sends there, wrong for the sidecars it does (BE-17). Scattered pages go page by page and are
    written."""

    def write_pages(self, pool, keys, host_indices):
        config = self.config
        writer = not config.is_mla_model or config.tp_rank == getattr(config, "dcp_rank", 0)
        if not writer and self.is_run(pool, keys, host_indices):
            return [True] * len(keys)
        return super().write_pages(pool, keys, host_indices)


class NonWriterRunReadTakesTheKvPath(RunBackend):
    """A read whose host pages form one run takes the bulk path built for KV, which on a rank that is not the storage
    writer of replicated KV fetches from the writer rank's node, where replicated KV lives: right for KV, but this
    rank's own sidecar pages are not there, so a run of them reads as missing though its write returned True
    (BE-17). Scattered pages are read page by page from this rank's store."""

    def read_pages(self, pool, keys, host_indices):
        config = self.config
        writer = not config.is_mla_model or config.tp_rank == getattr(config, "dcp_rank", 0)
        if not writer and pool != "kv" and self.is_run(pool, keys, host_indices):
            return [False] * len(keys)
        return super().read_pages(pool, keys, host_indices)


class LooksUpUnderTheFirstPipelineStage(LooksUpUnderTheFirstTpRank):
    """batch_exists names keys with pipeline stage 0 whatever the instance's stage (a cross-stage lookup meant to ask
    the first stage, used for every lookup): on any other stage it misses what the writes stored (NS-6), the pipeline
    twin of ``LooksUpUnderTheFirstTpRank``."""

    axis = "pp"


class PerInstanceCipher(CorrectBackend):
    """Stores each page enciphered with a key drawn when the instance is built (XOR with one byte), and deciphers what
    it fetches with its own: the names are stable, so a rebuilt instance finds every page, but reads another
    instance's pages as noise (NS-7: a rebuilt backend reads the pages written before)."""

    _instances = 0

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        type(self)._instances += 1
        self.cipher = 1 + type(self)._instances % 255

    def put(self, name: str, data: bytes) -> bool:
        return super().put(name, bytes(byte ^ self.cipher for byte in data))

    def fetch(self, name: str) -> Optional[bytes]:
        data = super().fetch(name)
        return None if data is None else bytes(byte ^ self.cipher for byte in data)


class SecondSegmentReadsAnswerATensor(CorrectBackend):
    """Registers the host pool in segments of 256 pages (a registration limit of its transfer engine); a v1 read that
    reaches past the first segment goes through the engine's batched path, whose per-page status comes back as a bool
    tensor, returned as it is where a list of bools was meant (BE-14). Reads into the first 256 pages return a list."""

    SEGMENT_PAGES = 256

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_get_v1(keys, host_indices, extra_info)
        page_size = self.pools["kv"].page_size
        beyond = len(host_indices) and int(host_indices.max()) >= self.SEGMENT_PAGES * page_size
        return torch.tensor(results, dtype=torch.bool) if beyond else results


class V1WriteAnswersTheBytesItStored(RefusesPagesOfZeros):
    """``RefusesPagesOfZeros`` (a page of zeros refused, False), whose batch_set_v1 answers each page it stored with
    the number of bytes it stored, an int, where a bool was meant (BE-14): only a write of filled pages shows it."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_set_v1(keys, host_indices, extra_info)
        return [self.page_bytes() if stored else False for stored in results]


class KvReadFromTheResidentHostPage(SidecarReadFromTheResidentHostPage):
    """The KV twin of ``SidecarReadFromTheResidentHostPage``: a KV page is read from the host page it was written from
    while that page holds anything but zeros (BE-15: a read puts exactly the stored bytes in its slots). v1's round
    trip overwrites its source pages with -1.0 before the read; a fill of zeros (or -0.0) would hide it."""

    def serves_resident(self, pool: str) -> bool:
        return pool == "kv"


class FullMissAnsweredWithNoResults(CorrectBackend):
    """batch_get_v1 takes a fast path when none of its keys is stored and answers ``[]``, one result for no key, where
    one False per key was meant (BE-14); a batch with any hit answers in full."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_get_v1(keys, host_indices, extra_info)
        return results if any(results) else []


class V1ReadLeavesTheLastOfSeveralKeys(CorrectBackend):
    """A v1 read of two keys or more copies all but the last (a loop bound off by one; a single key takes a fast
    path, right) and reports the last key missed, though batch_exists still counts it (BE-17: a page batch_set_v1
    stored is read back). Only a read of a stored key last in a batch of several shows it."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        if len(keys) < 2:
            return super().batch_get_v1(keys, host_indices, extra_info)
        page_size = self.pools["kv"].page_size
        return super().batch_get_v1(keys[:-1], host_indices[: (len(keys) - 1) * page_size], extra_info) + [False]


class ExtendsThePrefixInPlaceAndRestoresIt(CorrectBackend):
    """batch_exists appends each key to the caller's prefix_keys to name the page by its chain, then pops it back
    (PFX-6: the list is mutated during the call, where another thread reading it sees the keys come and go), so the
    list ends as it began. Only the record of mutating calls shows it."""

    def batch_exists(self, keys, extra_info=None):
        prefix = getattr(extra_info, "prefix_keys", None)
        if prefix is not None:
            for key in keys:
                prefix.append(key)
                prefix.pop()
        return super().batch_exists(keys, extra_info)


class RunPathChainsPagesWithinOneCall(ChainsPagesWithinOneCall, RunBackend):
    """``ChainsPagesWithinOneCall``'s bug in the run path alone (PFX-1): a v1 write or read of one ascending run of
    host pages names each page after the key before it in the call; scattered pages take the plain path, right.
    Only the whole chain read from its root into one run shows it."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        if self.is_run("kv", list(keys), host_indices):
            return super().batch_set_v1(keys, host_indices, extra_info)
        return CorrectBackend.batch_set_v1(self, keys, host_indices, extra_info)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        if self.is_run("kv", list(keys), host_indices):
            return super().batch_get_v1(keys, host_indices, extra_info)
        return CorrectBackend.batch_get_v1(self, keys, host_indices, extra_info)


class SmallV2QueryKeepsThePrefix(CorrectBackend):
    """batch_exists_v2 of at most two keys takes a fast path that remembers the caller's prefix_keys list itself as
    the last prefix seen, for the next query to extend (PFX-6: kept, not copied); larger queries take the plain
    path, right. Only a check's v2 query of one or two keys shows it."""

    def takes_the_fast_path(self, keys: list) -> bool:
        return len(keys) <= 2

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        if self.takes_the_fast_path(list(keys)) and getattr(extra_info, "prefix_keys", None) is not None:
            self.last_prefix = extra_info.prefix_keys
        return super().batch_exists_v2(keys, pool_transfers, extra_info)


class BatchedV2QueryKeepsThePrefix(SmallV2QueryKeepsThePrefix):
    """The same kept list on the batched path of a v2 query of two keys or more (PFX-6); a single key is looked up
    on its own, right. Only a check's v2 query of several keys shows it."""

    def takes_the_fast_path(self, keys: list) -> bool:
        return len(keys) >= 2


class KeepsThePrefixInEveryIndex(CorrectBackend):
    """batch_exists files the caller's prefix_keys list itself (not a copy) in each of its four lookup structures: a
    recent list, a by-length dict, a pending (length, prefix) tuple and the backend's last-prefix field (PFX-6: kept, four
    times over). The check names the first three holders it finds."""

    def batch_exists(self, keys, extra_info=None):
        prefix = getattr(extra_info, "prefix_keys", None)
        if prefix is not None:
            self.recent = [prefix]
            self.by_length = {len(prefix): prefix}
            self.pending = (len(prefix), prefix)
            self.last_prefix = prefix
        return super().batch_exists(keys, extra_info)


class ServesEveryControllerThroughTheLegacyMethods(CorrectBackend):
    """CorrectBackend driven through the legacy methods, serving any number of host pools under a name: get and set
    carry their own tensors, so a second pool needs nothing of it (it keeps the first for its page size), and KV never
    moves through v2. Correct, and it keeps every page: a second controller's pages read back through its own pool,
    so a check must write them there before it reads them (``HoldsOnePageForEveryController`` may evict them)."""

    def register_pool(self, name: str, host_pool: Any) -> None:
        self.pools.setdefault(name, host_pool)


class LeavesASecondPoolToTheV2Hook(CorrectBackend):
    """register_mem_pool_host keeps the first pool it was given and passes over a later, different one, leaving it to
    register_mem_host_pool_v2 (which SGLang calls next, KV included, on a backend that claims v2) to refuse with a
    message. Correct: the attach of a second controller fails at the v2 hook, and the first pool is never replaced."""

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.pools.setdefault("kv", mem_pool_host)


class SplitsHeadsOnlyInAPageHeadLayout(CorrectBackend):
    """Would split each page's heads into tp_lcm_size // tp_size shards when the config says should_split_heads, as
    Mooncake does, and refuses at registration a host pool whose layout keeps a page's heads together (any layout
    but page_head). Correct: SGLang sets should_split_heads only for a page_head host layout, so a check may not
    send it beside any other."""

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        layout = getattr(mem_pool_host, "layout", None)
        if getattr(self.config, "should_split_heads", False) and layout != "page_head":
            raise ValueError(f"should_split_heads needs a page_head host layout to split, not {layout!r}")
        super().register_mem_pool_host(mem_pool_host)


class OneHostPoolSizePerModel(CorrectBackend):
    """Every rank of a model shares one layout of host pages (say, one segment registered for replicated KV), sized by
    the first rank's host pool: a later rank of the same model, pipeline stage and context shard whose pool has
    another size is refused at registration. Correct: SGLang gives every TP rank of a model the same host pool, so a
    check may not build two ranks of one model with pools of different sizes."""

    sizes: dict[tuple, int] = {}
    """The first host pool size (slots) by store and model group, for every instance."""

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        config = self.config
        group = (self.store_name, config.model_name, config.pp_rank, config.attn_cp_rank)
        size = self.sizes.setdefault(group, mem_pool_host.size)
        if size != mem_pool_host.size:
            raise ValueError(f"the ranks of a model share one host pool size ({size} slots), got {mem_pool_host.size}")
        super().register_mem_pool_host(mem_pool_host)


class WalksThePrefixThroughLinkedNodes(CorrectBackend):
    """Every call given prefix_keys walks them through a throwaway chain of nodes linked both ways (parent and
    child) and drops it on return: correct (PFX-6: nothing is kept past the call), but the chain is a reference
    cycle over the caller's list, so the list outlives the call until the garbage collector runs."""

    @staticmethod
    def walk(extra_info: Any) -> None:
        prefix = getattr(extra_info, "prefix_keys", None)
        if prefix is not None:
            root: dict = {"keys": prefix, "child": None}
            root["child"] = {"parent": root, "depth": len(prefix)}

    def batch_exists(self, keys, extra_info=None):
        self.walk(extra_info)
        return super().batch_exists(keys, extra_info)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        self.walk(extra_info)
        return super().batch_get_v1(keys, host_indices, extra_info)

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        self.walk(extra_info)
        return super().batch_set_v1(keys, host_indices, extra_info)

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        self.walk(extra_info)
        return super().batch_exists_v2(keys, pool_transfers, extra_info)

    def batch_get_v2(self, transfers, extra_info=None):
        self.walk(extra_info)
        return super().batch_get_v2(transfers, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        self.walk(extra_info)
        return super().batch_set_v2(transfers, extra_info)


CORRECT_VARIANTS: list[tuple[str, type, dict]] = [
    ("v1-hits-past-a-miss-compacted", CompactsHitsPastAMiss, {}),
    ("v1-one-hit-after-a-miss-in-the-first-slot", OneHitLandsInTheFirstSlot, {}),
    ("evicting-declared", EvictsAfterTheSecondRead, {}),
    ("evicting-keeps-one-of-each-write", KeepsOneOfEachWrite, {}),
    ("checks-its-host-indices", ChecksItsHostIndices, {}),
    ("v2-hook-refuses-tersely", V2HookRefusesASecondPoolTersely, {}),
    ("v1-without-v2", V2LeftUnimplemented, dict(levels=WITHOUT_V2)),
    ("v1-refusing-v2-pools", RefusesV2Pools, dict(levels=WITHOUT_V2)),
    ("write-once", KeepsTheFirstWrite, {}),
    ("hex-only-keys", HexOnlyKeys, {}),
    ("empty-lookup-answered-with-false", EmptyLookupAnsweredWithFalse, {}),
    ("counts-with-numpy-integers", CountsWithNumpyIntegers, {}),
    ("mla-dcp-shards-shared-undeclared", OneReplicaForEveryDcpRankUndeclared, dict(kind="mla")),
    ("disabled-layout-lists-its-rank-pools", DisabledLayoutListsItsRankPools, {}),
    ("flags-as-numpy-bools", FlagsAsNumpyBools, {}),
    ("exists-raises-beside-its-own-lookup", ExistsRaisesBesideItsOwnLookup, {}),
    ("refuses-a-derived-swa-pool", RefusesADerivedSwaPool, {}),
    ("mla-v1-refusing-v2-pools", RefusesV2Pools, dict(kind="mla", levels=WITHOUT_V2)),
    ("second-pool-left-to-the-v2-hook", LeavesASecondPoolToTheV2Hook, {}),
    (
        "legacy-serving-every-controller",
        ServesEveryControllerThroughTheLegacyMethods,
        dict(levels=tuple(level for level in ALL_LEVELS if level != "v1")),
    ),
    ("splits-heads-only-in-a-page-head-layout", SplitsHeadsOnlyInAPageHeadLayout, {}),
    ("kv-read-brings-its-derived-pages-along", KvReadBringsItsDerivedPagesAlong, {}),
    ("files-sidecar-pages-by-hit-policy", FilesSidecarPagesByHitPolicy, {}),
    ("mla-one-host-pool-size-per-model", OneHostPoolSizePerModel, dict(kind="mla")),
    ("mla-page-first", CorrectBackend, dict(kind="mla", layout="page_first")),
    ("legacy-mla", CorrectBackend, dict(kind="mla", levels=tuple(level for level in ALL_LEVELS if level != "v1"))),
    (
        "v1-without-legacy",
        LegacyLeftUnimplemented,
        dict(levels=tuple(level for level in ALL_LEVELS if level != "legacy")),
    ),
]
"""(name, correct backend, suite options): every check the run makes must pass (an evicting backend declares it)."""


class _FormatTagLeavesOut(MemoryBackend):
    """The reference memory backend whose format part of the namespace leaves out some of the pool's format."""

    def left_out(self, tag: str) -> str:
        raise NotImplementedError

    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        if name == "kv" and self.namespace != self.base_namespace:
            namespace, _, tag = self.namespace.rpartition("/")
            self.namespace = self._formatted_namespace = f"{namespace}/{self.left_out(tag)}"


class FormatTagWithoutTheDtype(_FormatTagLeavesOut):
    """The format part names the layout and the page geometry, not the dtype (NS-9): a bfloat16 reader loads float16
    pages as hits holding other values."""

    def left_out(self, tag: str) -> str:
        layout, _, rest = tag.partition(".")
        return f"{layout}.{rest.partition('.')[2]}"


class FormatTagWithoutTheGeometry(_FormatTagLeavesOut):
    """The format part names the layout and the dtype, not the page geometry (NS-9): a reader of twice the tokens of
    half the heads per page loads the writer's pages as hits, every token in the wrong place."""

    def left_out(self, tag: str) -> str:
        return ".".join(tag.split(".")[:2])


class FormatTagPerHostPool(_FormatTagLeavesOut):
    """The format part names the host pool object, not its format (NS-9): a reader of the writer's own format
    never finds the writer's pages, so misses of the other formats show nothing."""

    def left_out(self, tag: str) -> str:
        return f"{tag}.pool{id(self.mem_pool_host):x}"


class ChecksTheFormatAfterTheCopy(MemoryBackend):
    """Each page's host-pool format is kept in an index beside it, not in its name (NS-9): lookups check it, but a
    read copies a page of another format into the host slots before it checks the format and answers False,
    leaving the reader's host pages overwritten with bytes it cannot use."""

    format_guard = False
    FORMATS: dict = {}

    def page_format(self) -> tuple:
        pool = self.mem_pool_host
        return (pool.layout, str(pool.dtype), pool.page_size)

    def same_format(self, key: str) -> bool:
        return self.FORMATS.get((self.namespace, key)) == self.page_format()

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_set_v1(keys, host_indices, extra_info)
        for key, stored in zip(keys, results):
            if stored:
                self.FORMATS[(self.namespace, key)] = self.page_format()
        return results

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        for index, key in enumerate(keys[:count]):
            if not self.same_format(key):
                return index
        return count

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        results = super().batch_get_v1(keys, host_indices, extra_info)
        return [bool(loaded) and self.same_format(key) for key, loaded in zip(keys, results)]
