"""The reference linker: device pools linked directly to a page store, with a load and an offload thread.

It follows the linker clauses of every pinned SGLang release: lookup reports
the restorable set (LNK-7) of pages stored whole (LNK-8); load only
queues (LNK-9, LNK-10); start_layer_wise_loading starts a batch the load
thread copies layer by layer (LNK-11, LNK-12, LNK-5); a failed batch is
reported by finish_layer_wise_loading returning False (LNK-13) or, for
0.5.20/0.5.21, by pop_completed_load (LNK-14); offload results come back in
submission order (LNK-16); reset and close wait for both threads (LNK-17,
LNK-18, LNK-19); a non-owner rank of replicated pools writes nothing (LNK-20);
keys carry the model and rank coordinates (LNK-21). lookup runs on the
caller's thread while the two threads work: it only asks the store, which
publishes each page whole under its lock or by a rename (LNK-24).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from typing import Any, Callable, Mapping, Optional, Sequence


from hicache_spec import KV
from hicache_contracts.linker.device import DevicePool, pool_name
from hicache_reference.linker.stores import PageStore
from hicache_spec.linker import linker_restorable_lengths

__all__ = ["LayerCounter", "LinkerCore", "MissingPageError"]

logger = logging.getLogger(__name__)

KV = KV


class MissingPageError(RuntimeError):
    """A load named a page the store does not hold."""


class _Batch:
    def __init__(self, num_layers: int) -> None:
        self.layers = [threading.Event() for _ in range(num_layers)]
        self.stopped = threading.Event()
        self.failed = False


class LayerCounter:
    """Per-batch, per-layer completion the forward waits on (LNK-5); it never raises (LNK-13)."""

    def __init__(self, num_layers: int) -> None:
        self.num_layers = num_layers
        self._batches: dict[int, _Batch] = {}
        self._next = 0
        self._lock = threading.Lock()
        self.consumer_index = -1

    def new_batch(self) -> int:
        with self._lock:
            index = self._next
            self._next += 1
            self._batches[index] = _Batch(self.num_layers)
            return index

    def batch(self, index: int) -> Optional[_Batch]:
        with self._lock:
            return self._batches.get(index)

    def set_consumer(self, index: int) -> None:
        self.consumer_index = index

    def wait_until(self, threshold: int) -> None:
        batch = self.batch(self.consumer_index)
        if batch is not None:
            batch.layers[threshold].wait()

    def finish(self, index: int) -> bool:
        batch = self.batch(index)
        if batch is None:
            return True
        batch.stopped.wait()  # LNK-13: nothing of this batch writes after this returns
        with self._lock:
            self._batches.pop(index, None)
        return not batch.failed

    def reset(self) -> None:
        with self._lock:
            self._batches.clear()
            self._next = 0
            self.consumer_index = -1


class LinkerCore:
    """The behaviour shared by the memory and file reference linkers (release-neutral method set)."""

    def __init__(
        self,
        pools: Mapping[Any, DevicePool],
        store: PageStore,
        *,
        namespace: str,
        owner: bool = True,
    ) -> None:
        if not pools:
            raise ValueError("pools: a linker needs at least one device pool")
        self.device_pools = {pool_name(name): pool for name, pool in pools.items()}
        self.store = store
        self.namespace = namespace
        self.offload_owner = owner
        self.num_layers = max(pool.num_layers for pool in self.device_pools.values())
        self.layer_done_counter = LayerCounter(self.num_layers)
        self._pending: dict[str, list[Any]] = {}
        self._completed_loads: deque[list[str]] = deque()
        self._offload_results: deque[bool] = deque()
        self._results_lock = threading.Lock()
        self._loads: queue.Queue[Optional[tuple[int, dict[str, list[Any]]]]] = queue.Queue()
        self._offloads: queue.Queue[Optional[tuple[list[Any], Optional[str]]]] = queue.Queue()
        self._closed = False
        self._load_thread = threading.Thread(target=self._load_loop, name="reference-linker-load", daemon=True)
        self._offload_thread = threading.Thread(target=self._offload_loop, name="reference-linker-offload", daemon=True)
        self._load_thread.start()
        self._offload_thread.start()

    # ---- keys ----

    def _key(self, pool: str, key: str) -> str:
        return f"{self.namespace}/{pool}/{key}"  # LNK-21

    def _pool(self, transfer: Any) -> Optional[DevicePool]:
        return self.device_pools.get(pool_name(transfer.name))

    def _held(self, transfer: Any) -> DevicePool:
        """The pool of a transfer already accepted (load and offload keep only those of pools held)."""
        pool = self._pool(transfer)
        if pool is None:
            raise KeyError(f"pool {pool_name(transfer.name)!r} is not held by this linker")
        return pool

    # ---- lookup ----

    def lookup(self, rid: str, transfers: list[Any]) -> list[int]:
        kv = next((t for t in transfers if pool_name(t.name) == KV), None)
        if kv is None or not kv.keys:
            return []
        keys = list(kv.keys)
        kv_present = tuple(self.store.contains(self._key(KV, key)) for key in keys)
        queries = []
        for transfer in transfers:
            name = pool_name(transfer.name)
            if name == KV or not transfer.keys:
                continue
            present = tuple(self.store.contains(self._key(name, key)) for key in keys)
            queries.append((name, pool_name(transfer.hit_policy), len(transfer.keys), present))
        return list(linker_restorable_lengths(kv_present, tuple(queries)))  # LNK-7

    # ---- load ----

    def load(self, rid: str, transfers: list[Any]) -> bool:
        usable = [t for t in transfers if t.keys and self._pool(t) is not None and t.device_indices is not None]
        if not usable or rid in self._pending:  # LNK-10
            return False
        for transfer in usable:
            if len(transfer.device_indices) != len(transfer.keys) * self._held(transfer).slots_per_page:
                return False
        self._pending[rid] = usable  # LNK-9: queued only
        return True

    def cancel_queued_load(self, rid: str) -> bool:
        return self._pending.pop(rid, None) is not None  # LNK-15

    def start_layer_wise_loading(self) -> int:
        if not self._pending:
            return -1  # LNK-11
        batch, self._pending = self._pending, {}
        index = self.layer_done_counter.new_batch()
        self._loads.put((index, batch))
        return index

    def finish_layer_wise_loading(self, counter_index: int) -> bool:
        return self.layer_done_counter.finish(counter_index)

    def num_completed_loads(self) -> int:
        with self._results_lock:
            return len(self._completed_loads)

    def pop_completed_load(self) -> list[str]:
        with self._results_lock:
            return self._completed_loads.popleft()

    def _load_loop(self) -> None:
        _serve(self._loads, lambda task: self._load_batch(*task))

    def _load_batch(self, index: int, batch: dict[str, list[Any]]) -> None:
        state = self.layer_done_counter.batch(index)
        try:
            pages = []  # (pool, slots, blob) of every page, fetched before any slot is written
            for transfers in batch.values():
                for transfer in transfers:
                    pool = self._held(transfer)
                    per_page = pool.slots_per_page
                    for j, key in enumerate(transfer.keys):
                        blob = self.store.get(self._key(pool.name, key))
                        if blob is None or len(blob) != pool.num_layers:
                            raise MissingPageError(f"pool {pool.name}: page {key!r} is not stored")
                        pages.append((pool, transfer.device_indices[j * per_page : (j + 1) * per_page], blob))
            for layer in range(self.num_layers):
                for pool, slots, blob in pages:
                    if layer < pool.num_layers:
                        pool.write_slots(layer, slots, blob[layer])  # LNK-12
                if state is not None:
                    state.layers[layer].set()
        except Exception as error:  # LNK-13: reported by finish, never raised into the forward
            logger.info("reference linker: load batch %d failed: %s", index, error)
            if state is not None:
                state.failed = True
        finally:
            if state is not None:
                for event in state.layers:
                    event.set()
                state.stopped.set()
            with self._results_lock:
                self._completed_loads.append(list(batch))  # LNK-14 (0.5.20, 0.5.21)

    # ---- offload ----

    def offload(self, transfers: list[Any], session_id: Optional[str] = None) -> bool:
        usable = [t for t in transfers if t.keys and self._pool(t) is not None and t.device_indices is not None]
        if not usable:
            return False
        if not self.offload_owner:  # LNK-20: the owner rank writes the replicated pages
            with self._results_lock:
                self._offload_results.append(True)
            return True
        self._offloads.put((usable, session_id))
        return True

    def num_completed_offloads(self) -> int:
        with self._results_lock:
            return len(self._offload_results)

    def pop_completed_offload(self) -> bool:
        with self._results_lock:
            return self._offload_results.popleft()  # LNK-16: submission order

    def _offload_loop(self) -> None:
        _serve(self._offloads, self._offload_task)

    def _offload_task(self, task: Any) -> None:
        try:
            success = self._offload_one(task[0])
        except Exception as error:  # LNK-16: a result for every accepted offload
            logger.info("reference linker: offload failed: %s", error)
            success = False
        with self._results_lock:
            self._offload_results.append(success)

    def _offload_one(self, transfers: Sequence[Any]) -> bool:
        try:
            for transfer in transfers:
                pool = self._held(transfer)
                per_page = pool.slots_per_page
                if len(transfer.device_indices) != len(transfer.keys) * per_page:
                    return False
                for j, key in enumerate(transfer.keys):
                    slots = transfer.device_indices[j * per_page : (j + 1) * per_page]
                    blob = tuple(pool.read_slots(layer, slots) for layer in range(pool.num_layers))
                    self.store.put(self._key(pool.name, key), blob)  # LNK-8: the whole page at once
            return True
        except Exception as error:
            logger.info("reference linker: offload failed: %s", error)
            return False

    # ---- lifecycle ----

    def _quiesce(self) -> None:
        self._loads.join()
        self._offloads.join()

    def reset(self) -> None:
        if self._closed:
            return
        self._pending.clear()
        self._quiesce()  # LNK-17
        with self._results_lock:
            self._completed_loads.clear()
            self._offload_results.clear()
        self.layer_done_counter.reset()

    def close(self) -> None:
        if self._closed:
            return  # LNK-19
        self.reset()
        self._closed = True
        self._loads.put(None)
        self._offloads.put(None)
        self._load_thread.join()
        self._offload_thread.join()  # LNK-18
        self.store.close()


def _serve(tasks: queue.Queue, handle: Callable[[Any], None]) -> None:
    """A worker thread's loop: ``handle`` each task of ``tasks`` until the ``None`` that stops it; every task,
    the ``None`` included, is marked done (so ``join`` on the queue returns once the work is finished)."""
    while True:
        task = tasks.get()
        try:
            if task is None:
                return
            handle(task)
        finally:
            tasks.task_done()
