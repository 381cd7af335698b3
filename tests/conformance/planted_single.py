"""Planted bugs that only one check catches: for checks whose other planted bugs some other check sees too.

``planted_catalog.CATALOG`` names, for each, the one check that must catch it,
and no other (its ``only`` oracle). Each bug is one a vendor could ship; the
docstring says which path it lives on and why the other checks never walk that path.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

import torch

from hicache_spec import STORAGE_BATCH_SIZE
from hicache_contracts.models import PoolTransferResult
from hicache_reference.backends.memory import MemoryBackend
from tests.conformance.correct_backend import CorrectBackend, pool_name, tensor_bytes


class FullBatchOfUnknownKeysHitsOnce(CorrectBackend):
    """A full batch of never-written keys counts one page (BE-2): a filter's false positive on its first key."""

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        if count == 0 and len(keys) == STORAGE_BATCH_SIZE and not any(self.exists(key) for key in keys):
            return 1
        return count


class ClearLeavesTheRanksState(CorrectBackend):
    """Planted (BE-11): under replicated KV, clear() removes the shared namespace's pages but not the Mamba state the
    rank keeps apart (as the reference backends did before the rank's own namespace was cleared too)."""

    def clear(self) -> None:
        with self.lock:
            for name in [name for name in self.objects if name.startswith(self.namespace + "|")]:
                if "@tp" not in name[len(self.namespace) + 1 :].partition("|")[0]:  # the pool part
                    del self.objects[name]


class FoldsSlashesInModelNames(CorrectBackend):
    """Planted (NS-4): '/' in the model name becomes '-' in the namespace, so ``org/model`` and ``org-model`` share
    pages (as SGLang's HiCacheFile and MooncakeStore do, DIV-30, DIV-31)."""

    def namespace_of(self, config: Any) -> str:
        return super().namespace_of(config).replace("/", "-", config.model_name.count("/"))


class CloseDropsThePages(CorrectBackend):
    """The last instance of a namespace to close deletes its pages (NS-7): the pages do not survive a restart.
    While another instance of the namespace is open, close() leaves the pages to it, so BE-29 (whose reader stays
    open across the writer's close) passes."""

    open_instances: dict = {}
    """How many instances of each (store, namespace) are open."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        with self.lock:
            self.open_instances[self.store_name, self.namespace] = self.open_count() + 1

    def open_count(self) -> int:
        return self.open_instances.get((self.store_name, self.namespace), 0)

    def close(self):
        with self.lock:
            self.open_instances[self.store_name, self.namespace] = max(0, self.open_count() - 1)
            if self.open_count() == 0:  # the last one out cleans up
                self.clear()


class RootPrefixCapsTheCount(CorrectBackend):
    """With the prefix at the root ([]) batch_exists counts at most 2 pages (PFX-1): an index keyed by prefix
    that holds only the first batch written under []."""

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        prefix = getattr(extra_info, "prefix_keys", None)
        return min(count, 2) if prefix is not None and len(prefix) == 0 else count


class ChainLookupReservesTheRest(CorrectBackend):
    """A lookup of a chain (more than 4 keys) whose head is stored reserves page-sized placeholders for the
    missing rest, for the write-back to come, and a placeholder counts as stored (BE-3). Only BE-3 looks up
    such a chain twice; the state machine's lookups hold at most 4 keys."""

    def batch_exists(self, keys, extra_info=None):
        found = super().batch_exists(keys, extra_info)
        if 0 < found < len(keys) and len(keys) > 4:
            for key in keys[found:]:
                if self.fetch(self.name(key)) is None:
                    self.put(self.name(key), bytes(self.page_bytes()))
        return found


class BaseLookupAsksARaisingExists(CorrectBackend):
    """batch_exists is HiCacheStorage's own (it asks exists key by key, stopping at the first False), and exists()
    indexes its dict with [], so a lookup of a key never stored raises KeyError (BE-4); get looks keys up safely."""

    def exists(self, key):
        with self.lock:
            self.objects[self.name(key)]  # KeyError for a key never stored
        return self.present(self.name(key))

    def batch_exists(self, keys, extra_info=None):
        for index, key in enumerate(keys):
            if not self.exists(key):
                return index
        return len(keys)

    def get(self, key, target_location=None, target_sizes=None):
        if not self.present(self.name(key)):
            return None
        return super().get(key, target_location, target_sizes)


class ExistsRaisesBesideItsOwnLookup(BaseLookupAsksARaisingExists):
    """Correct: exists() raises KeyError for a key never stored, but batch_exists is the backend's own and looks keys
    up safely, so SGLang, which reaches exists only through HiCacheStorage's batch_exists, never asks it (BE-4)."""

    def batch_exists(self, keys, extra_info=None):
        for index, key in enumerate(keys):
            if not self.present(self.name(key)):
                return index
        return len(keys)


class AcknowledgesFailedWrites(CorrectBackend):
    """A page whose store call fails is reported stored, "queued for a retry" that never comes (BE-5). Only BE-5
    makes the store fail."""

    def put(self, name, data):
        try:
            return super().put(name, data)
        except OSError:
            return True


class MissAnsweredWithFalse(CorrectBackend):
    """Planted (BE-9): batch_get answers a missing key with False, not None. SGLang stops at the first None and copies
    every entry before it into host memory, so it would copy False; the suite's own reads take any entry that is not
    a tensor for a miss, so only BE-9's check, which looks at the entries themselves, sees it."""

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        values = super().batch_get(keys, target_locations, target_sizes)
        return [False if value is None else value for value in values]


class ShortObjectPaddedIntoTarget(CorrectBackend):
    """get() copies a stored object into the head of the target whatever its length and returns the whole target
    as the page (BE-13); exists and batch_exists check the length. Only BE-13 stores a short object."""

    def get(self, key, target_location=None, target_sizes=None):
        try:
            data = self.fetch(self.name(key))
        except OSError:
            return None
        if data is None or target_location is None:
            return super().get(key, target_location, target_sizes)
        flat = target_location.view(-1)
        if data:
            page = torch.frombuffer(bytearray(data), dtype=flat.dtype)
            flat[: page.numel()].copy_(page)
        return target_location


class MissClearsThePageAtItsPosition(CorrectBackend):
    """A read zero-fills the slots of each miss, but takes host page i for the i-th key instead of the page
    host_indices gives (BE-16). Only BE-16 guards low host pages while reading past a miss."""

    def read_pages(self, pool, keys, host_indices):
        results = super().read_pages(pool, keys, host_indices)
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return results
        for index, hit in enumerate(results):
            start = index * host_pool.page_size  # the key's position, not host_indices[index * page_size]
            if not hit and start < host_pool.size:
                host_pool.set_from_flat_data_page(start, host_pool.get_dummy_flat_data_page())
        return results


class LeadingMissesRebaseTheRead(CorrectBackend):
    """A read whose first keys miss skips them and reads the rest as one run of host pages from the first hit's
    slot (BE-15): right only where the pages are contiguous, as the state machine's are."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        lead = next((index for index, key in enumerate(keys) if self.exists(key)), len(keys))
        if lead in (0, len(keys)):
            return super().batch_get_v1(keys, host_indices, extra_info)
        page_size = self.pools["kv"].page_size
        first = int(host_indices[lead * page_size])
        run = torch.arange(first, first + (len(keys) - lead) * page_size, dtype=torch.int64)
        return [False] * lead + self.read_pages("kv", keys[lead:], run)


class FullBatchWriteDeferred(CorrectBackend):
    """batch_set_v1 of a full batch (128 pages) acknowledges at once and copies the host pages when a read
    comes; a page whose host memory changed meanwhile is dropped as torn (BE-17). Only the v1 round trip
    overwrites a full batch's host pages before reading it back."""

    def __init__(self, storage_config, kwargs=None):
        super().__init__(storage_config, kwargs)
        self.deferred: dict[str, tuple[int, bytes]] = {}

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        if len(keys) < STORAGE_BATCH_SIZE:
            return super().batch_set_v1(keys, host_indices, extra_info)
        host_pool = self.pools["kv"]
        for index, key in enumerate(keys):
            slot = int(host_indices[index * host_pool.page_size])
            self.deferred[self.name(key)] = (slot, tensor_bytes(host_pool.get_data_page(slot, flat=True)))
        return [True] * len(keys)

    def present(self, name, pool="kv"):
        return name in self.deferred or super().present(name, pool)

    def read_pages(self, pool, keys, host_indices):
        host_pool = self.pools["kv"]
        for name, (slot, snapshot) in list(self.deferred.items()):
            data = tensor_bytes(host_pool.get_data_page(slot, flat=True))
            if data == snapshot:
                self.put(name, data)
            del self.deferred[name]
        return super().read_pages(pool, keys, host_indices)

    def clear(self):
        self.deferred.clear()
        super().clear()


class DerivedSidecarFollowsKv(CorrectBackend):
    """batch_exists_v2 answers a KV-derived sidecar (indices_from_pool kv) from KV's presence, as if the two were
    always written together (BE-22). The policy-folding check asks about the indexer without indices_from_pool."""

    def pool_query(self, transfer, keys):
        name, policy, window, present = super().pool_query(transfer, keys)
        if pool_name(getattr(transfer, "indices_from_pool", None)) == "kv":
            present = self.pool_present("kv", keys)
        return (name, policy, window, present)


class ChunkedSidecarReadReusesFirstSlots(CorrectBackend):
    """batch_get_v2 reads a sidecar transfer of more than 64 pages in chunks of 64, giving every chunk the first
    chunk's host slots: later pages land on the first ones (HYB-8). Only HYB-8 reads a full sidecar batch."""

    CHUNK = 64

    def batch_get_v2(self, transfers, extra_info=None):
        results = {}
        for item in transfers:
            name, keys = pool_name(item.name), list(item.keys or ())
            flags: list[bool] = []
            for start in range(0, len(keys), self.CHUNK):  # host_indices is never offset by start * page_size
                flags += self.read_pages(name, keys[start : start + self.CHUNK], item.host_indices)
            results[name] = flags
        return results


class LookupFlattensRanksOtherwise(CorrectBackend):
    """Names carry one flat rank, tp + tp_size * (pp + pp_size * cp); batch_exists flattens it as
    tp + tp_size * pp + pp_size * cp, so lookups miss on a rank with cp > 0 and tp_size > 1 (NS-6). Only NS-6
    looks up its own pages on such a rank."""

    def flat_rank(self, config, *, lookup=False):
        tp = 0 if config.is_mla_model else config.tp_rank
        cp_stride = config.pp_size if lookup else config.tp_size * config.pp_size
        flat = tp + config.tp_size * config.pp_rank + cp_stride * config.attn_cp_rank
        # replicated KV is one per DCP rank, as the correct backend keeps it
        dcp = f"dcp{getattr(config, 'dcp_rank', 0)}/{getattr(config, 'dcp_size', 1)}" if config.is_mla_model else ""
        return f"{flat}{dcp}"

    def namespace_of(self, config):
        return f"{config.model_name}|rank{self.flat_rank(config)}"

    def batch_exists(self, keys, extra_info=None):
        namespace = f"{self.config.model_name}|rank{self.flat_rank(self.config, lookup=True)}"
        for index, key in enumerate(keys):
            if not self.present(f"{namespace}|kv|{key}"):
                return index
        return len(keys)


class OneKeyLookupsCached(CorrectBackend):
    """A one-key lookup is answered from a cache of earlier one-key hits, which clear() leaves in place (BE-11).
    The pool-clearing check looks up several keys at once."""

    def __init__(self, storage_config, kwargs=None):
        super().__init__(storage_config, kwargs)
        self.hot: set[str] = set()

    def batch_exists(self, keys, extra_info=None):
        if len(keys) == 1 and keys[0] in self.hot:
            return 1
        count = super().batch_exists(keys, extra_info)
        if len(keys) == 1 and count:
            self.hot.add(keys[0])
        return count


class WriteKeysParkedOnTheInstance(CorrectBackend):
    """batch_set_v1 parks the batch's keys on the instance while it gathers the host pages, then stores the
    pages under the parked keys: two concurrent writes would store pages under each other's keys. Correct for
    SGLang, whose one backup thread per instance never writes twice at once; BE-23 runs only the concurrency
    SGLang's threads make, so it passes."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        self.parked = list(keys)
        host_pool = self.pools["kv"]
        pages = [
            tensor_bytes(host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True))
            for index in range(len(keys))
        ]
        time.sleep(0.001)  # the latency of a real transfer, during which another thread may park its keys
        results = []
        for key, data in zip(self.parked, pages):
            try:
                results.append(self.put(self.name(key), data))
            except OSError:
                results.append(False)
        return results + [False] * (len(keys) - len(results))


class RestorableLengthsLeftNone(CorrectBackend):
    """Planted (BE-26): kv_hit_pages is the largest length KV and every pool can restore (the fold is right), but
    restorable_prefix_pages is always None, which says every length up to the hit is restorable: wrong when a
    trailing pool's window leaves lengths inside the hit unrestorable (SGLang 0.5.23 then restores them)."""

    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        return PoolTransferResult(kv_hit_pages=result.kv_hit_pages, extra_pool_hit_pages=result.extra_pool_hit_pages)


class CloseWaitsForItsFlushThread(CorrectBackend):
    """Planted (BE-29): close() waits for the flush thread register_mem_pool_host starts; a backend closed after a
    failed attach, never registered, waits for a thread that never ran (a hang within --timeout). Every other close
    the suite makes follows a registration."""

    never = threading.Event()

    def close(self) -> None:
        if not self.pools:
            self.never.wait(600)  # the flush thread's "stopped" signal, never set: blocks as long as the process lives
        super().close()


class CloseDropsTheStore(CorrectBackend):
    """Planted (BE-29): close() clears its namespace, taking with it the pages other instances of the same
    configuration read (the store outlives the instance; a detach must not lose the cache). Only BE-29's check
    closes an instance and then reads its pages from another."""

    def close(self) -> None:
        self.clear()
        super().close()


_STORED_BY_THIS_THREAD = threading.local()
"""The object names each thread stored (``V2HitsFromAThreadsOwnIndex``)."""


class V2HitsFromAThreadsOwnIndex(CorrectBackend):
    """Planted (BE-30): to spare a store lookup, batch_exists_v2 answers from an index of the objects the calling
    thread stored, kept per thread; a hit query from a thread that never wrote finds nothing. Every other check
    queries v2 from the thread that wrote, and BE-23's threads ask through batch_exists."""

    def put(self, name: str, data: bytes) -> bool:
        stored = super().put(name, data)
        if stored:
            known = getattr(_STORED_BY_THIS_THREAD, "names", None)
            if known is None:
                known = _STORED_BY_THIS_THREAD.names = set()
            known.add(name)
        return stored

    def pool_present(self, pool: str, keys: list) -> tuple[bool, ...]:
        known = getattr(_STORED_BY_THIS_THREAD, "names", None) or set()
        return tuple(
            self.name(key, pool) in known and found for key, found in zip(keys, super().pool_present(pool, keys))
        )


class PagesFiledPerSession(CorrectBackend):
    """Planted (BE-31): a write whose extra_info names a session_id files its pages under that session, and a
    lookup finds them only with the same session; SGLang's hit queries carry none. No other check sends a
    session_id."""

    session: Optional[str] = None

    def name(self, key: str, pool: str = "kv") -> str:
        if not self.session:
            return super().name(key, pool)
        return f"{self.namespace}|session-{self.session}|{pool}|{key}"

    def in_session(self, extra_info: Any, call: Any, *args: Any) -> Any:
        extra = getattr(extra_info, "extra_info", None) or {}
        self.session = extra.get("session_id")
        try:
            return call(*args)
        finally:
            self.session = None

    def batch_exists(self, keys, extra_info=None):
        return self.in_session(extra_info, super().batch_exists, keys, extra_info)

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return self.in_session(extra_info, super().batch_set_v1, keys, host_indices, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        return self.in_session(extra_info, super().batch_set_v2, transfers, extra_info)


class KeyPrefixPerStage(CorrectBackend):
    """Planted (BE-32): describe_l3_object_layout names its key prefix after the instance's whole namespace, its
    ranks included. With replicated KV, the layout it describes, the stages' replies then differ in more than
    pp_rank and pools, and SGLang's merge reports the whole layout inconsistent. Only BE-32's check asks for a
    layout."""

    def describe_l3_object_layout(self, **kwargs: Any) -> dict:
        layout = super().describe_l3_object_layout(**kwargs)
        layout["hicache_object_layout"]["key_prefix"] = self.namespace
        return layout


class LegacyTargetsByKeywordOnly(CorrectBackend):
    """Planted (BE-33): the legacy batch methods take their target arguments by keyword only. SGLang's generic
    page path passes keys and values (or targets) alone, so every other check passes; SGLang's failure injector
    passes every argument on positionally, and the call raises TypeError."""

    def batch_get(self, keys: list, target_locations: Any = None, *, target_sizes: Any = None) -> list:  # type: ignore[override]
        return super().batch_get(keys, target_locations, target_sizes)

    def batch_set(  # type: ignore[override]
        self, keys: list, values: Any = None, *, target_locations: Any = None, target_sizes: Any = None
    ) -> bool:
        return super().batch_set(keys, values, target_locations, target_sizes)


class LeasedPagesSurviveAGlobalClear(CorrectBackend):
    """clear() empties its own namespace and every other object whose lease has run out; a read renews an object's
    lease for a minute (NS-8: pages of other models and ranks survive). Pages read back just before survive; pages
    written and not read since are lost."""

    LEASES: dict[str, float] = {}

    def fetch(self, name: str):
        data = super().fetch(name)
        if data is not None:
            self.LEASES[name] = time.monotonic() + 60.0
        return data

    def clear(self) -> None:
        now = time.monotonic()
        with self.lock:
            for name in list(self.objects):
                if name.startswith(self.namespace + "|") or self.LEASES.get(name, 0.0) < now:
                    del self.objects[name]


class ListsWhatItWroteAndClearsEverything(CorrectBackend):
    """clear() empties the whole store (NS-8), and each instance answers lookups and reads from a list of the
    objects it wrote, kept in memory: the instance that wrote a page still counts it after another's clear()."""

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.listed: dict[str, bytes] = {}

    def put(self, name: str, data: bytes) -> bool:
        self.listed[name] = data
        return super().put(name, data)

    def fetch(self, name: str):
        return self.listed.get(name) if name in self.listed else super().fetch(name)

    def clear(self) -> None:
        with self.lock:
            self.objects.clear()
        self.listed.clear()


class ClearsEveryModelItsNamePrefixes(CorrectBackend):
    """clear() removes its rank's objects of every model whose name begins with its own (a prefix match without
    the separator, NS-8): a deployment named model-nested loses its pages when model clears."""

    def clear(self) -> None:
        model = self.config.model_name
        rest = self.namespace[len(model) :]
        with self.lock:
            for name in list(self.objects):
                owner, _, tail = name.partition("|")
                if owner.startswith(model) and ("|" + tail).startswith(rest + "|"):
                    del self.objects[name]


class BatchGetServesShortObjects(CorrectBackend):
    """batch_get (SGLang's generic read path) returns what is stored without checking its length, padding a short
    object into its target (BE-13); get, exists and batch_exists check the length, right."""

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        results = []
        for index, key in enumerate(keys):
            data = self.fetch(self.name(key))
            target = target_locations[index] if target_locations else None
            if data is None or target is None:
                results.append(self.get(key, target))
                continue
            page = torch.zeros(target.numel(), dtype=target.dtype)
            short = self.page_tensor(data) if data else torch.zeros(0, dtype=target.dtype)
            page[: short.numel()] = short
            target.view(-1).copy_(page)
            results.append(target)
        return results


class UnguardedMemoryBackend(MemoryBackend):
    """The reference memory backend with its format guard off (NS-9): the namespace holds the model and the ranks
    only, so a reader whose host pool has another layout, dtype or page geometry, its pages of the same size, loads
    the writer's pages as hits holding scrambled values. Only the format check reads through a pool of another
    format; every other check passes as on the reference."""

    format_guard = False


class OneReplicaForEveryDcpRank(CorrectBackend):
    """With replicated KV (MLA) the namespace leaves out the DCP rank: the writers of two DCP ranks store their
    parts of a page under one name, and a rank reads the other DCP rank's part (NS-5)."""

    def namespace_of(self, config):
        if not config.is_mla_model:
            return super().namespace_of(config)
        return (
            f"{config.model_name}|pp{config.pp_rank}/{config.pp_size}|cp{config.attn_cp_rank}/{config.attn_cp_size}|tp*"
        )


class OneStoreForEveryModelAtARank(CorrectBackend):
    """Instances at one rank store their pages under one name whatever their model_name (NS-4); each model keeps
    its own index of the pages it wrote, and each instance reads the pages it wrote from its own memory. Another
    model's instance at that rank neither finds them nor stops the first reading its own, but overwrites them in
    the store: a new instance of the first model finds them in its index and reads the other model's bytes."""

    INDEXES: dict[str, set] = {}

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.own: dict[str, bytes] = {}
        self.index = self.INDEXES.setdefault(f"{self.store_name}|{storage_config.model_name}|{self.namespace}", set())

    def namespace_of(self, config):
        return super().namespace_of(config).split("|", 1)[1]  # the model name left out

    def put(self, name: str, data: bytes) -> bool:
        self.own[name] = data
        self.index.add(name)
        return super().put(name, data)

    def fetch(self, name: str):
        return self.own[name] if name in self.own else super().fetch(name)

    def present(self, name: str, pool: str = "kv") -> bool:
        return name in self.index and super().present(name, pool)


class LegacyReadOfOnlyMissingKeysRaises(CorrectBackend):
    """Legacy batch_get asks the store for every key at once, and the store's multi-get raises KeyError("none of the
    keys found") when not one of them is stored, instead of answering one None per key (BE-4); a read with any key
    stored works, and the v1 and v2 reads answer misses."""

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        if keys and all(self.fetch(self.name(key)) is None for key in keys):  # no object at all, whole or short
            raise KeyError("none of the keys found")
        return super().batch_get(keys, target_locations, target_sizes)
