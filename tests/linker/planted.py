"""Planted linkers: the reference memory linker with one bug each, which exactly one linker check catches.

``PLANTED`` maps each class to the check that must catch it (and no other).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from hicache_reference.linker import LayerCounter, MemoryLinker
from hicache_reference.linker.stores import MemoryStore


class EagerLoadLinker(MemoryLinker):
    """load() copies the pages into the slots at once (and queues them as well)."""

    def load(self, rid: str, transfers: list[Any]) -> bool:
        queued = super().load(rid, transfers)
        if queued:
            for transfer in self._pending[rid]:
                pool = self._pool(transfer)
                assert pool is not None
                per_page = pool.slots_per_page
                for j, key in enumerate(transfer.keys):
                    blob = self.store.get(self._key(pool.name, key))
                    if blob is not None:
                        for layer in range(pool.num_layers):
                            pool.write_slots(
                                layer, transfer.device_indices[j * per_page : (j + 1) * per_page], blob[layer]
                            )
        return queued


class NewestFirstOffloadLinker(MemoryLinker):
    """pop_completed_offload() hands out the newest result instead of the oldest."""

    def pop_completed_offload(self) -> bool:
        with self._results_lock:
            return self._offload_results.pop()


class KvOnlyLookupLinker(MemoryLinker):
    """lookup() reports the KV leading run and ignores the other pools' hit policies."""

    def lookup(self, rid: str, transfers: list[Any]) -> list[int]:
        return super().lookup(rid, [t for t in transfers if str(getattr(t.name, "value", t.name)) == "kv"])


class CancelStartedLinker(MemoryLinker):
    """cancel_queued_load() returns True for a load already started."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._started: set[str] = set()

    def start_layer_wise_loading(self) -> int:
        self._started |= set(self._pending)
        return super().start_layer_wise_loading()

    def cancel_queued_load(self, rid: str) -> bool:
        return super().cancel_queued_load(rid) or rid in self._started


class CancelAnyRidLinker(MemoryLinker):
    """cancel_queued_load() returns True for a rid it has no queued load of (never loaded, or cancelled already)
    as well; 0.5.20-0.5.21's wrapper asks about every released request and then pops a load it never queued."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()
        self._cancelled: set[str] = set()

    def load(self, rid: str, transfers: list[Any]) -> bool:
        queued = super().load(rid, transfers)
        if queued:
            self._loaded.add(rid)
        return queued

    def cancel_queued_load(self, rid: str) -> bool:
        if super().cancel_queued_load(rid):
            self._cancelled.add(rid)
            return True
        return rid not in self._loaded or rid in self._cancelled  # a started load still answers False


class _SlowLoads(MemoryLinker):
    def _load_batch(self, index: int, batch: dict[str, list[Any]]) -> None:
        time.sleep(0.1)  # a slow store: the batch writes well after it started
        super()._load_batch(index, batch)


class HastyResetLinker(_SlowLoads):
    """reset() drops its state without waiting for the load and offload threads."""

    def reset(self) -> None:
        self._pending.clear()
        with self._results_lock:
            self._completed_loads.clear()
            self._offload_results.clear()


class HastyCloseLinker(_SlowLoads):
    """close() signals the threads to stop and returns without waiting for them."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loads.put(None)
        self._offloads.put(None)


class WritingPeerLinker(MemoryLinker):
    """A non-owner rank of replicated pools writes the store like the owner."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offload_owner = True


class RaisingFinishLinker(MemoryLinker):
    """finish_layer_wise_loading() raises when the batch failed instead of returning False."""

    def finish_layer_wise_loading(self, counter_index: int) -> bool:
        if not super().finish_layer_wise_loading(counter_index):
            raise RuntimeError(f"load batch {counter_index} failed")
        return True


class TornPageLinker(MemoryLinker):
    """offload() stores a page whose slots are short (only what it could read) and reports False."""

    def _offload_one(self, transfers: Any) -> bool:
        whole = True
        for transfer in transfers:
            pool = self._pool(transfer)
            assert pool is not None
            per_page = pool.slots_per_page
            for j, key in enumerate(transfer.keys):
                page = transfer.device_indices[j * per_page : (j + 1) * per_page]
                whole = whole and len(page) == per_page
                blob = tuple(pool.read_slots(layer, page) for layer in range(pool.num_layers))
                self.store.put(self._key(pool.name, key), blob)
        return whole


class DuplicateRidLinker(MemoryLinker):
    """load() accepts a rid already queued, replacing its first load."""

    def load(self, rid: str, transfers: list[Any]) -> bool:
        self._pending.pop(rid, None)
        return super().load(rid, transfers)


class _SameIndexCounter(LayerCounter):
    def new_batch(self) -> int:
        super().new_batch()
        with self._lock:
            self._batches[0] = self._batches.pop(self._next - 1)
        return 0


class ReusedIndexLinker(MemoryLinker):
    """Correct: every batch starts as counter index 0, which the counter binds to the newest batch. SGLang finishes a
    batch before it starts the next, so an index that comes back stands for the batch it was returned for (LNK-11)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layer_done_counter = _SameIndexCounter(self.num_layers)


class StaleIndexLinker(_SlowLoads):
    """Every batch starts as index 0 to its caller while the counter keeps each batch under its own index, so waiting
    on 0 after the first batch finished waits for nothing and the forward reads slots the load is still writing."""

    def start_layer_wise_loading(self) -> int:
        index = super().start_layer_wise_loading()
        if index < 0:
            return index
        self._started_as = index
        return 0

    def finish_layer_wise_loading(self, index: int) -> bool:
        return super().finish_layer_wise_loading(self._started_as if index == 0 else index)


class StrayWriteLinker(MemoryLinker):
    """A load also overwrites the slot just past each transfer's last slot."""

    def _load_batch(self, index: int, batch: dict[str, list[Any]]) -> None:
        for transfers in batch.values():
            for transfer in transfers:
                pool = self._pool(transfer)
                assert pool is not None
                neighbour = int(transfer.device_indices[-1]) + 1
                if neighbour < pool.num_slots:
                    for buffer in pool.layers[0]:
                        buffer[neighbour] = 0
        super()._load_batch(index, batch)


class FragileCloseLinker(MemoryLinker):
    """close() raises when called a second time."""

    def close(self) -> None:
        if self._closed:
            raise RuntimeError("already closed")
        super().close()


class ModelBlindLinker(MemoryLinker):
    """Its keys leave the model out: two models share pages."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.namespace = self.namespace.rsplit("/", 1)[-1]  # the rank part alone


class _NeverCounter(LayerCounter):
    def wait_until(self, threshold: int) -> None:
        if self.batch(self.consumer_index) is None:
            threading.Event().wait(30)  # waits on a batch that will never exist
            return
        super().wait_until(threshold)


class BlockingCounterLinker(MemoryLinker):
    """layer_done_counter.wait_until blocks for an index with no batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layer_done_counter = _NeverCounter(self.num_layers)


class PoolsAfterTheFirstLoadLinker(MemoryLinker):
    """pools is filled in lazily, on the first load, so the linker has none when the wrapper is built and asks
    whether it holds the SWA pool (0.5.23: AttributeError, the attach fails)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pools_later = self.pools
        del self.pools


class PageShownBeforeWrittenLinker(MemoryLinker):
    """A slow store that shows a page as soon as its first layer is written: offload() puts each page's
    entry with the layers read so far, one layer at a time (a millisecond each). Once an offload has
    finished every page is whole, so lookup is right whenever it runs alone; a lookup during the offload
    counts a page whose other layers are not there yet."""

    def _offload_one(self, transfers: Any) -> bool:
        for transfer in transfers:
            if len(transfer.device_indices) != len(transfer.keys) * self._held(transfer).slots_per_page:
                return False
        for transfer in transfers:
            pool = self._held(transfer)
            per_page = pool.slots_per_page
            for j, key in enumerate(transfer.keys):
                page = transfer.device_indices[j * per_page : (j + 1) * per_page]
                name, layers = self._key(pool.name, key), []
                try:
                    for layer in range(pool.num_layers):
                        layers.append(pool.read_slots(layer, page))
                        self.store.put(name, tuple(layers))
                        time.sleep(0.001)
                except Exception:
                    store = self.store
                    assert isinstance(store, MemoryStore)
                    with store._lock:
                        store._pages.pop(name, None)  # a page torn alone is taken back
                    return False
        return True


PLANTED: dict[type, str] = {
    BlockingCounterLinker: "layer_done_counter",
    PoolsAfterTheFirstLoadLinker: "pools_attribute",
    KvOnlyLookupLinker: "lookup_restorable_set",
    TornPageLinker: "lookup_never_counts_torn_pages",
    EagerLoadLinker: "load_only_queues",
    DuplicateRidLinker: "load_refusals_and_partial",
    StaleIndexLinker: "start_indices",
    StrayWriteLinker: "round_trip_byte_exact",
    RaisingFinishLinker: "failed_load_reported_not_raised",
    CancelStartedLinker: "cancel_only_queued",
    NewestFirstOffloadLinker: "offload_results_in_order",
    HastyResetLinker: "reset_quiesces",
    HastyCloseLinker: "close_quiesces",
    FragileCloseLinker: "reset_close_idempotent",
    WritingPeerLinker: "non_owner_rank_writes_nothing",
    ModelBlindLinker: "namespacing",
    PageShownBeforeWrittenLinker: "lookup_during_transfers",
}
"""Each planted linker and the one check that must catch it (0.5.23's interface)."""


class EarlyReportLinker(MemoryLinker):
    """0.5.20/0.5.21 style: a batch is reported completed when it starts, before its slots are written."""

    def start_layer_wise_loading(self) -> int:
        rids = list(self._pending)
        index = super().start_layer_wise_loading()
        if index >= 0:
            with self._results_lock:
                self._completed_loads.append(rids)
        return index

    def _load_batch(self, index: int, batch: dict[str, list[Any]]) -> None:
        time.sleep(0.1)
        super()._load_batch(index, batch)
        with self._results_lock:
            self._completed_loads.pop()  # reported already, at start


class EmptyStartAsZeroLinker(MemoryLinker):
    """start_layer_wise_loading with nothing queued returns 0, an index whose wait returns at once: before 0.5.23
    the index only reaches that wait; 0.5.23 reads a non-negative index as a load pending (LNK-11)."""

    def start_layer_wise_loading(self) -> int:
        index = super().start_layer_wise_loading()
        return 0 if index < 0 else index


class _RaisingEmptyCounter(LayerCounter):
    """A counter whose wait on an index before any batch started raises (LNK-5 asks it to return at once)."""

    def wait_until(self, threshold: int) -> None:
        if self.consumer_index >= 0 and self._next == 0:
            raise RuntimeError(f"no batch under index {self.consumer_index}")
        super().wait_until(threshold)


class EmptyStartAsZeroRaisingLinker(EmptyStartAsZeroLinker):
    """As EmptyStartAsZeroLinker, but the counter's wait on that index raises, which ends the forward (LNK-11)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layer_done_counter = _RaisingEmptyCounter(self.num_layers)
