"""Planted bugs: one small subclass of ``CorrectBackend`` per bug class, each with the clause it breaks.

The first sixteen are the bug classes seen in the field (CONTRACT.md §6); the
rest give every other check a bug of its own. ``planted_catalog.CATALOG``
names each with its clause and the oracles that must catch it. Over 450
lines: a family of small classes, one per bug, read as a list.
"""

from __future__ import annotations

import threading
import time
import uuid


import torch

from hicache_contracts.models import PoolTransferResult
from hicache_spec import count_leading_run
from tests.conformance.correct_backend import CorrectBackend, pool_name, tensor_bytes


# ================================================================ the bug classes seen in the field
class TwoResultsPerPageV1(CorrectBackend):
    """v1 results counted per component object (K and V): 2N entries for N keys (BE-14)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return [flag for flag in super().batch_get_v1(keys, host_indices, extra_info) for _ in range(2)]

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return [flag for flag in super().batch_set_v1(keys, host_indices, extra_info) for _ in range(2)]


class ScalarV1Result(CorrectBackend):
    """batch_set_v1 returns one bare bool for the whole batch (BE-14)."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return all(super().batch_set_v1(keys, host_indices, extra_info))


class BatchExistsWithoutExtraInfo(CorrectBackend):
    """batch_exists has no extra_info parameter: the engine's positional call raises TypeError (BE-8)."""

    def batch_exists(self, keys):  # type: ignore[override]
        return super().batch_exists(keys)


class RaisesOnMissingKey(CorrectBackend):
    """A missing key raises KeyError instead of giving None or False, on the legacy and the v1 read (BE-4)."""

    def get(self, key, target_location=None, target_sizes=None):
        if not self.exists(key):
            raise KeyError(key)
        return super().get(key, target_location, target_sizes)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        for key in keys:
            if not self.exists(key):
                raise KeyError(key)
        return super().batch_get_v1(keys, host_indices, extra_info)


class RaisesOnStorageError(CorrectBackend):
    """An error while moving a page escapes as an exception instead of a False (BE-5)."""

    def read_pages(self, pool, keys, host_indices):
        host_pool = self.pools[pool]
        results = []
        for index, key in enumerate(keys):
            if not self.present(self.name(key, pool), pool):
                results.append(False)
                continue
            slot = int(host_indices[index * host_pool.page_size])
            host_pool.set_from_flat_data_page(slot, self.page_tensor(self.fetch(self.name(key, pool)), pool))
            results.append(True)
        return results

    def write_pages(self, pool, keys, host_indices):
        host_pool = self.pools[pool]
        return [
            self.put(
                self.name(key, pool),
                tensor_bytes(host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True)),
            )
            for index, key in enumerate(keys)
        ]


class ExistsSetKeyMismatch(CorrectBackend):
    """set tags the stored name with the TP size; exists and batch_exists look without the tag (NS-6)."""

    def tagged(self, key: str, pool: str = "kv") -> str:
        return self.name(key, pool) + f"|tp{self.config.tp_size}"

    def set(self, key, value=None, target_location=None, target_sizes=None):
        try:
            return self.put(self.tagged(key), tensor_bytes(value))
        except Exception:
            return False

    def get(self, key, target_location=None, target_sizes=None):
        data = self.fetch(self.tagged(key)) or self.fetch(self.name(key))
        if data is None or len(data) != self.page_bytes():
            return None
        page = self.page_tensor(data)
        if target_location is None:
            return page
        target_location.view(-1).copy_(page)
        return target_location


class NoPipelineRankInKeys(CorrectBackend):
    """The namespace leaves out the PP rank: pipeline stages overwrite each other (NS-2)."""

    def namespace_of(self, config):
        return super().namespace_of(config).replace(f"|pp{config.pp_rank}/", "|pp?/")


class ReplicatedKvNotShared(CorrectBackend):
    """Replicated KV (is_mla_model) keeps the TP rank in the namespace: rank 1 never hits (NS-5)."""

    def namespace_of(self, config):
        return super().namespace_of(config).replace("|tp*", f"|tp{config.tp_rank}/{config.tp_size}")


class VisibleBeforeWritten(CorrectBackend):
    """A write publishes a page-sized placeholder before it has read the host page (BE-7)."""

    def write_pages(self, pool, keys, host_indices):
        host_pool = self.pools.get(pool)
        results = []
        for index, key in enumerate(keys):
            try:
                self.put(self.name(key, pool), bytes(self.page_bytes(pool)))  # published first: zeros
                slot = int(host_indices[index * host_pool.page_size])
                results.append(self.put(self.name(key, pool), tensor_bytes(host_pool.get_data_page(slot, flat=True))))
            except Exception:
                results.append(False)
        return results


class ZeroLengthObjectIsHit(CorrectBackend):
    """Any stored object counts as a hit, an empty or short one included (BE-13)."""

    def present(self, name, pool="kv"):
        return self.fetch(name) is not None


class V2MissingPoolCountedAsFullHit(CorrectBackend):
    """batch_exists_v2 skips a pool that holds nothing for the keys, counting it as a full hit (BE-21)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        known = [item for item in pool_transfers or () if any(self.pool_present(pool_name(item.name), keys))]
        return super().batch_exists_v2(keys, known, extra_info)


class MutatesPrefixKeys(CorrectBackend):
    """batch_exists extends the caller's prefix_keys in place with the keys it was asked about (PFX-6)."""

    def batch_exists(self, keys, extra_info=None):
        prefix = getattr(extra_info, "prefix_keys", None)
        if prefix is not None:
            try:
                prefix += list(keys)  # a list grows in place; an immutable sequence makes a new one
            except Exception:
                pass
        return super().batch_exists(keys, extra_info)


class RetainsPrefixKeys(CorrectBackend):
    """batch_exists keeps the caller's prefix_keys list and reads it on the next call (PFX-6)."""

    def batch_exists(self, keys, extra_info=None):
        previous = getattr(self, "last_prefix", None)
        self.prefix_length_seen = 0 if previous is None else len(previous)  # reads the kept reference later
        self.last_prefix = getattr(extra_info, "prefix_keys", None)
        return super().batch_exists(keys, extra_info)


class WritesOutsideSlots(CorrectBackend):
    """A read that misses clears the addressed page and, off by one, the page after it too (BE-16)."""

    def read_pages(self, pool, keys, host_indices):
        results = super().read_pages(pool, keys, host_indices)
        host_pool = self.pools.get(pool)
        for index, hit in enumerate(results):
            if not hit and host_pool is not None:
                start = int(host_indices[index * host_pool.page_size])
                for page_start in (start, start + host_pool.page_size):
                    if page_start < host_pool.size:
                        host_pool.set_from_flat_data_page(page_start, host_pool.get_dummy_flat_data_page())
        return results


class ClearLeavesKeysBehind(CorrectBackend):
    """clear() drops the sidecar pools' pages but leaves the KV pages (BE-11)."""

    def clear(self):
        with self.lock:
            for name in [name for name in self.objects if name.startswith(self.namespace + "|") and "|kv|" not in name]:
                del self.objects[name]


class RemembersHitsAcrossClear(CorrectBackend):
    """exists() caches the keys it has found; clear() empties the store but not that cache (BE-11)."""

    def __init__(self, storage_config, kwargs=None):
        super().__init__(storage_config, kwargs)
        self.known_hits: set[str] = set()

    def exists(self, key):
        if key in self.known_hits:
            return True
        hit = super().exists(key)
        if hit:
            self.known_hits.add(key)
        return hit


class ShortObjectCopiedIntoTarget(CorrectBackend):
    """get() copies whatever is stored into the target without checking its length: a short object raises (BE-13)."""

    def get(self, key, target_location=None, target_sizes=None):
        data = self.fetch(self.name(key))
        if data is None or target_location is None:
            return super().get(key, target_location, target_sizes)
        target_location.view(-1).copy_(self.page_tensor(data))
        return target_location


class StatsAsDict(CorrectBackend):
    """get_stats() returns a dict, on which the scheduler's attribute reads fail (BE-12)."""

    def get_stats(self):
        return {"pages": len(self.objects)}


# ================================================================ one bug for every other check
class HexOnlyKeys(CorrectBackend):
    """Correct: keys are decoded as hex, so a key that is not hex is refused; SGLang sends only its 64-character
    lowercase hex keys (KEY-2) to be stored, read or looked up."""

    def name(self, key, pool="kv"):
        return super().name(bytes.fromhex(key).hex(), pool)

    def exists(self, key):
        try:
            return super().exists(key)
        except ValueError:
            return False

    def get(self, key, target_location=None, target_sizes=None):
        try:
            return super().get(key, target_location, target_sizes)
        except ValueError:
            return None


class StrictExtraConfig(CorrectBackend):
    """Refuses an extra config holding keys it does not know (BE-1)."""

    def __init__(self, storage_config, kwargs=None):
        unknown = set(getattr(storage_config, "extra_config", None) or {}) - {"store"}
        if unknown:
            raise ValueError(f"unknown extra config keys {sorted(unknown)}")
        super().__init__(storage_config, kwargs)


class CountsEveryStoredKey(CorrectBackend):
    """batch_exists counts every stored key, not the leading run (BE-2)."""

    def batch_exists(self, keys, extra_info=None):
        return sum(self.exists(key) for key in keys)


class QueryCreatesPlaceholders(CorrectBackend):
    """batch_exists reserves a page for every key it misses, so a miss becomes a hit (BE-3)."""

    def batch_exists(self, keys, extra_info=None):
        found = super().batch_exists(keys, extra_info)
        for key in keys[found:]:
            if not self.exists(key) and "kv" in self.pools:
                self.put(self.name(key), bytes(self.page_bytes()))
        return found


class RefusesRewrite(CorrectBackend):
    """Writing a key that exists returns False (BE-6)."""

    def set(self, key, value=None, target_location=None, target_sizes=None):
        return False if self.exists(key) else super().set(key, value, target_location, target_sizes)

    def write_pages(self, pool, keys, host_indices):
        results = (
            super().write_pages(pool, keys, host_indices)
            if not any(self.present(self.name(key, pool), pool) for key in keys)
            else [False] * len(keys)
        )
        return results


class CompactedBatchGet(CorrectBackend):
    """batch_get leaves the misses out of its result instead of giving None for them (BE-9)."""

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        return [value for value in super().batch_get(keys, target_locations, target_sizes) if value is not None]


class TruncatesLongBatches(CorrectBackend):
    """Only the first 64 KV pages of a batch are served; the rest fail (BE-10)."""

    LIMIT = 64

    def write_pages(self, pool, keys, host_indices):
        if pool != "kv":
            return super().write_pages(pool, keys, host_indices)
        served = super().write_pages(pool, keys[: self.LIMIT], host_indices)
        return served + [False] * (len(keys) - len(served))

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        return super().batch_set(keys[: self.LIMIT], (values or [])[: self.LIMIT]) and len(keys) <= self.LIMIT


class V1StubReturnsNone(CorrectBackend):
    """The v1 methods are stubs that return None instead of raising NotImplementedError (BE-18)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return None

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return None


class RejectsKvInV2Registration(CorrectBackend):
    """register_mem_host_pool_v2 refuses the KV pool, expecting it only through register_mem_pool_host (BE-24)."""

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        if pool_name(host_pool_name) == "kv":
            raise ValueError("the KV pool is registered with register_mem_pool_host")
        super().register_mem_host_pool_v2(host_pool, host_pool_name)


class RejectsDataParallelRanks(CorrectBackend):
    """Refuses a configuration with attention data parallelism (dp_rank > 0) (BE-25)."""

    def __init__(self, storage_config, kwargs=None):
        if getattr(storage_config, "dp_rank", 0) > 0:
            raise ValueError("data-parallel ranks are not supported")
        super().__init__(storage_config, kwargs)


class ShiftedV1Read(CorrectBackend):
    """batch_get_v1 loads page i + 1's bytes into page i's slots and still says True (BE-15)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        shifted = keys[1:] + keys[-1:]
        results = self.read_pages("kv", shifted, host_indices)
        return [flag and self.exists(key) for flag, key in zip(results, keys)]


class LyingV1Set(CorrectBackend):
    """batch_set_v1 drops every third page but reports them all stored (BE-17)."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        page_size = self.pools["kv"].page_size
        kept = [index for index in range(len(keys)) if index % 3 != 2]
        if kept:
            slots = torch.cat([host_indices[index * page_size : (index + 1) * page_size] for index in kept])
            self.write_pages("kv", [keys[index] for index in kept], slots)
        return [True] * len(keys)


class DropsEveryV1Write(CorrectBackend):
    """batch_set_v1 stores nothing and reports every page stored (BE-17); every other path works."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        host_pool = self.pools["kv"]
        for index in range(len(keys)):  # reads each host page, as a real write would, then drops it
            host_pool.get_data_page(int(host_indices[index * host_pool.page_size]), flat=True)
        return [True] * len(keys)


class V2DropsSidecarEntries(CorrectBackend):
    """batch_get_v2 and batch_set_v2 return only the KV entry (BE-19)."""

    def batch_get_v2(self, transfers, extra_info=None):
        return {name: flags for name, flags in super().batch_get_v2(transfers, extra_info).items() if name == "kv"}

    def batch_set_v2(self, transfers, extra_info=None):
        return {name: flags for name, flags in super().batch_set_v2(transfers, extra_info).items() if name == "kv"}


class V2RaisesOnUnregisteredPool(CorrectBackend):
    """A transfer for a pool never registered raises KeyError (BE-20)."""

    def batch_get_v2(self, transfers, extra_info=None):
        for item in transfers:
            self.pools[pool_name(item.name)]
        return super().batch_get_v2(transfers, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        for item in transfers:
            self.pools[pool_name(item.name)]
        return super().batch_set_v2(transfers, extra_info)


class TrailingTreatedAsAllPages(CorrectBackend):
    """A TRAILING_PAGES pool is measured like ALL_PAGES: every page of the prefix must exist (HYB-7)."""

    def pool_query(self, transfer, keys):
        name, _, window, present = super().pool_query(transfer, keys)
        return (name, "all_pages", window, present)


class AllPagesCountsEveryPresentPage(CorrectBackend):
    """An ALL_PAGES pool's hit counts every present page within the KV hit, not the leading run (HYB-6)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        kv_hit = count_leading_run(self.pool_present("kv", keys))
        hits = {"kv": kv_hit} if kv_hit else {}
        folded = kv_hit
        for item in pool_transfers or ():
            name = pool_name(item.name)
            present = self.pool_present(name, keys)[:kv_hit]
            if pool_name(item.hit_policy) == "all_pages":
                hit = sum(present)
            else:
                hit = super().batch_exists_v2(keys, [item]).extra_pool_hit_pages.get(name, 0)
            folded = min(folded, hit)
            if hit:
                hits[name] = hit
        return PoolTransferResult(kv_hit_pages=folded, extra_pool_hit_pages=hits)


class SidecarNotLoaded(CorrectBackend):
    """batch_get_v2 reports sidecar pages loaded without copying their bytes (HYB-8)."""

    def batch_get_v2(self, transfers, extra_info=None):
        results = {}
        for item in transfers:
            name, keys = pool_name(item.name), list(item.keys or ())
            if name == "kv":
                results[name] = self.read_pages(name, keys, item.host_indices)
            else:
                results[name] = [self.present(self.name(key, name), name) for key in keys]
        return results


class IndexerNeverPersisted(CorrectBackend):
    """A KV-derived sidecar is acknowledged but never stored, and reported present whenever KV is (BE-22)."""

    def batch_set_v2(self, transfers, extra_info=None):
        results = {}
        for item in transfers:
            name, keys = pool_name(item.name), list(item.keys or ())
            if pool_name(getattr(item, "indices_from_pool", None)) == "kv":
                results[name] = [True] * len(keys)
            else:
                results[name] = self.write_pages(name, keys, item.host_indices)
        return results

    def pool_present(self, pool, keys):
        if pool == "indexer":
            return tuple(self.present(self.name(key)) or self.present(self.name(key, pool), pool) for key in keys)
        return super().pool_present(pool, keys)


class EmptyPrefixCrashes(CorrectBackend):
    """Any non-None prefix is assumed non-empty: prefix_keys=[] raises IndexError (PFX-1)."""

    def batch_exists(self, keys, extra_info=None):
        prefix = getattr(extra_info, "prefix_keys", None)
        if prefix is not None:
            self.last_root = list(prefix)[-1]  # a list, whatever sequence the engine passed
        return super().batch_exists(keys, extra_info)


class NoTensorRankInKeys(CorrectBackend):
    """The namespace leaves out the TP rank: TP shards overwrite each other (NS-1)."""

    def namespace_of(self, config):
        return super().namespace_of(config).replace(f"|tp{config.tp_rank}/", "|tp?/")


class NoContextRankInKeys(CorrectBackend):
    """The namespace leaves out the attention CP rank (NS-3)."""

    def namespace_of(self, config):
        return super().namespace_of(config).replace(f"|cp{config.attn_cp_rank}/", "|cp?/")


class NoModelInKeys(CorrectBackend):
    """The namespace leaves out the model name: two models read each other's pages (NS-4)."""

    def namespace_of(self, config):
        return super().namespace_of(config).split("|", 1)[1]


class GlobalClear(CorrectBackend):
    """clear() empties the whole store, every model's and rank's pages included (NS-8)."""

    def clear(self):
        with self.lock:
            self.objects.clear()


class PerInstanceSalt(CorrectBackend):
    """The namespace holds a random salt per instance: a rebuilt backend finds nothing (NS-7)."""

    def namespace_of(self, config):
        return super().namespace_of(config) + f"|{uuid.uuid4().hex[:8]}"


class SharedStagingBuffer(CorrectBackend):
    """Reads go through one staging buffer per instance, unguarded: two concurrent reads would mix pages. Correct
    for SGLang, whose one IO thread per instance never reads twice at once (each attach builds its own backend);
    BE-23 runs only the concurrency SGLang's threads make, so it passes."""

    def read_pages(self, pool, keys, host_indices):
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return [False] * len(keys)
        results = []
        for index, key in enumerate(keys):
            if not self.present(self.name(key, pool), pool):
                results.append(False)
                continue
            staging = getattr(self, "staging", None)
            if staging is None:
                staging = self.staging = host_pool.get_dummy_flat_data_page()
            staging.copy_(self.page_tensor(self.fetch(self.name(key, pool)), pool))
            time.sleep(0.0002)  # the latency of a real transfer, during which another thread may reuse the buffer
            host_pool.set_from_flat_data_page(int(host_indices[index * host_pool.page_size]), staging)
            results.append(True)
        return results


class ForgetsWritesAfterClear(CorrectBackend):
    """Deduplicates writes by a set of keys ever written, which clear() does not reset: a page written again
    after clear() is acknowledged but not stored (found by the state machine: set, clear, set, get)."""

    def __init__(self, storage_config, kwargs=None):
        super().__init__(storage_config, kwargs)
        self.ever_written: set[str] = set()
        self.ever_lock = threading.Lock()

    def put(self, name, data):
        with self.ever_lock:
            if name in self.ever_written:
                return True
            self.ever_written.add(name)
        return super().put(name, data)


# ================================================================ what the suite used to miss
class BlocksOnLongLookups(CorrectBackend):
    """batch_exists over more than one batch of keys waits on a lock nobody releases (BE-2, within --timeout)."""

    never = threading.Event()

    def batch_exists(self, keys, extra_info=None):
        if len(keys) > 128:
            self.never.wait(600)  # a lost wake-up: blocks as long as the process lives, in practice
        return super().batch_exists(keys, extra_info)


class CapsLookupsAt1024Keys(CorrectBackend):
    """batch_exists looks at the first 1024 keys only (a per-request key limit of its store) (BE-2)."""

    def batch_exists(self, keys, extra_info=None):
        return super().batch_exists(list(keys)[:1024], extra_info)


class AssumesContiguousSlots(CorrectBackend):
    """batch_get_v1 reads host_indices[0] only and assumes the pages follow one another (BE-15)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        page_size = self.pools["kv"].page_size
        first = int(host_indices[0]) if len(keys) else 0
        contiguous = torch.arange(first, first + len(keys) * page_size, dtype=torch.int64)
        return self.read_pages("kv", list(keys), contiguous)


class ClearLeavesSidecars(CorrectBackend):
    """clear() removes the KV pages and Mamba state but leaves the SWA and indexer pools' pages (BE-11)."""

    def clear(self):
        with self.lock:
            for name in [name for name in self.objects if name.startswith(self.namespace + "|")]:
                if name[len(self.namespace) + 1 :].partition("|")[0].partition("@")[0] in ("kv", "mamba"):
                    del self.objects[name]


class NonWriterSkipsWrites(CorrectBackend):
    """On a rank that is not the storage writer every write is acknowledged and dropped, "the writer stores it"
    (BE-17): right for replicated KV, which SGLang never sends there, wrong for the sidecars it does send."""

    def writer(self):
        return not self.config.is_mla_model or self.config.tp_rank == getattr(self.config, "dcp_rank", 0)

    def write_pages(self, pool, keys, host_indices):
        return super().write_pages(pool, keys, host_indices) if self.writer() else [True] * len(keys)


class SidecarLostOnKvRewrite(CorrectBackend):
    """A rewrite of a KV page drops its KV-derived indexer page, while batch_exists_v2 still counts the indexer
    wherever KV is present (BE-22)."""

    def write_pages(self, pool, keys, host_indices):
        if pool == "kv":
            with self.lock:
                for key in keys:
                    if self.name(key) in self.objects:
                        self.objects.pop(self.name(key, "indexer"), None)
        return super().write_pages(pool, keys, host_indices)

    def pool_present(self, pool, keys):
        if pool == "indexer":
            return tuple(self.present(self.name(key)) for key in keys)
        return super().pool_present(pool, keys)


class CapsV2LookupsAt1024Keys(CorrectBackend):
    """batch_exists_v2 looks at the first 1024 keys only (BE-21)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        return super().batch_exists_v2(list(keys)[:1024], pool_transfers, extra_info)


class RefusesSidecarsAtAttach(CorrectBackend):
    """on_host_pools_registered raises when any pool besides KV was registered: every hybrid attach fails (BE-27)."""

    def on_host_pools_registered(self):
        extra = sorted(name for name in self.pools if name != "kv")
        if extra:
            raise ValueError(f"unsupported host pools {extra}")
        super().on_host_pools_registered()


class ReplacesFirstHostPool(CorrectBackend):
    """A second host pool under a name silently replaces the first: v1 calls of the first controller then move
    the second one's slots (BE-28)."""

    def register_pool(self, name, host_pool):
        self.pools[name] = host_pool


class RefusesWithoutSaying(CorrectBackend):
    """Refuses a second host pool, but with an exception that says nothing (BE-28)."""

    def register_pool(self, name, host_pool):
        known = self.pools.get(name)
        if known is not None and known is not host_pool:
            raise RuntimeError()
        self.pools[name] = host_pool
