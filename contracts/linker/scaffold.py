"""``hicache-conform init --linker NAME``: write a UnifiedCacheLinker skeleton a vendor fills in with storage calls.

The skeleton answers every pinned release's linker interface (LNK-1 to LNK-4):
it subclasses the imported release's ``UnifiedCacheLinker`` when SGLang is
importable (a plain class otherwise), has both completion styles and
``offload(transfers, session_id=None)``. Its contract-facing logic — the
restorable set lookup reports, lazy loads, layer-by-layer completion, failed
loads reported and never raised, offload results in order, cancel, reset and
close waiting for both worker threads, the owner rank of replicated pools,
names per model and rank — sits on top of five storage calls the vendor writes
(``LINKER_STORAGE_CALLS``): connect to the store, put a whole page, get it,
say whether it is stored, and disconnect.
"""

from __future__ import annotations

import string
from pathlib import Path

from hicache_contracts.scaffold import checked_names, write_module

__all__ = ["LINKER_STORAGE_CALLS", "render_linker_skeleton", "write_linker_skeleton"]

LINKER_STORAGE_CALLS = ("connect", "put_page", "get_page", "has_page", "disconnect")
"""The storage calls a vendor fills in, in the order the linker skeleton lists them."""

LINKER_SKELETON = string.Template('''"""$class_name: an SGLang UnifiedCacheLinker (skeleton written by `hicache-conform init --linker`).

Fill in the five storage calls at the end of the file (connect, put_page,
get_page, has_page, disconnect) with your store's client calls; everything
above them already follows the linker clauses (LNK family) of every pinned
SGLang release. Check it with

    hicache-conform linker --linker $module_name:$class_name

and load it in SGLang 0.5.23 with

    --enable-unified-cache-external-linker --unified-cache-external-linker-backend dynamic
    --unified-cache-external-linker-config '{"linker": "$class_name", "linker_module_path": "$module_name",
        "linker_extra_config": {"endpoint": "..."}}'

Guide: docs/linkers.md of hicache-spec.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from typing import Any, Optional

import torch

try:  # SGLang's abstract class when a release is importable; a plain object otherwise (LNK-1, LNK-2, LNK-3)
    from sglang.srt.mem_cache.unified_cache import unified_cache_linker as _sglang_linker
except Exception:  # pragma: no cover - ImportError, or a release whose import chain fails here
    _sglang_linker = None

_Base: Any = getattr(_sglang_linker, "UnifiedCacheLinker", object) if _sglang_linker is not None else object

logger = logging.getLogger(__name__)

KV = "kv"


def _pool_name(name: Any) -> str:
    """A pool name (an enum member or a str) as its plain value: "kv", "swa", ..."""
    return str(getattr(name, "value", name))


def _leading_run(flags: list) -> int:
    run = 0
    while run < len(flags) and flags[run]:
        run += 1
    return run


class _Pool:
    """One pool's device memory: layers[l] is layer l's tuple of buffers, slot-major."""

    def __init__(self, name: str, layers: list, slots_per_page: int, rank_replicated: bool = False) -> None:
        self.name, self.layers, self.slots_per_page = name, layers, slots_per_page
        self.rank_replicated = rank_replicated
        self.num_layers = len(layers)

    def read_slots(self, layer: int, slots: torch.Tensor) -> bytes:
        """Layer ``layer``'s bytes of ``slots``, buffer after buffer."""
        index = slots.to(torch.int64)
        parts = [b[index.to(b.device)].contiguous().view(torch.uint8).reshape(-1).cpu() for b in self.layers[layer]]
        return torch.cat(parts).numpy().tobytes()

    def write_slots(self, layer: int, slots: torch.Tensor, data: bytes) -> None:
        """Write ``data`` (as read_slots returns it) into layer ``layer``'s ``slots``."""
        index = slots.to(torch.int64)
        flat = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        offset = 0
        for buffer in self.layers[layer]:
            size = buffer[0].numel() * buffer.element_size() * len(index)
            chunk = flat[offset : offset + size].view(buffer.dtype).reshape((len(index),) + tuple(buffer.shape[1:]))
            buffer[index.to(buffer.device)] = chunk.to(buffer.device)
            offset += size
        if offset != flat.numel():
            raise ValueError(f"pool {self.name}: {len(data)} bytes for {len(index)} slots of layer {layer}")


def device_pools_from(params: Any) -> dict:
    """The device pools to read on offload and write on load, by pool name."""
    given = getattr(params, "linker_device_pools", None)  # the linker suite's CPU pools
    if given:
        return {_pool_name(name): pool for name, pool in given.items()}
    allocator = getattr(params, "token_to_kv_pool_allocator", None)
    kvcache = allocator.get_kvcache() if allocator is not None else None
    page_size = int(getattr(params, "page_size", 1) or 1)
    if kvcache is not None and hasattr(kvcache, "k_buffer"):  # MHA: K and V per layer
        return {KV: _Pool(KV, list(zip(kvcache.k_buffer, kvcache.v_buffer)), page_size)}
    if kvcache is not None and hasattr(kvcache, "kv_buffer"):  # MLA: one buffer, the same on every TP rank
        return {KV: _Pool(KV, [(b,) for b in kvcache.kv_buffer], page_size, rank_replicated=True)}
    raise ValueError("params: no device pools (need linker_device_pools or token_to_kv_pool_allocator)")


class _Batch:
    def __init__(self, num_layers: int) -> None:
        self.layers = [threading.Event() for _ in range(num_layers)]
        self.stopped = threading.Event()
        self.failed = False


class LayerCounter:
    """Per-batch, per-layer completion the forward waits on (LNK-5); it never raises (LNK-13)."""

    def __init__(self, num_layers: int) -> None:
        self.num_layers = num_layers
        self.batches: dict = {}
        self.next_index = 0
        self.consumer_index = -1
        self.lock = threading.Lock()

    def new_batch(self) -> int:
        with self.lock:
            index, self.next_index = self.next_index, self.next_index + 1  # LNK-11: a new index per batch
            self.batches[index] = _Batch(self.num_layers)
            return index

    def batch(self, index: int) -> Optional[_Batch]:
        with self.lock:
            return self.batches.get(index)

    def set_consumer(self, index: int) -> None:
        self.consumer_index = index

    def wait_until(self, threshold: int) -> None:
        batch = self.batch(self.consumer_index)
        if batch is not None:  # LNK-5: an index with no batch returns at once
            batch.layers[threshold].wait()

    def finish(self, index: int) -> bool:
        batch = self.batch(index)
        if batch is None:
            return True
        batch.stopped.wait()  # LNK-13: nothing of this batch writes after this returns
        with self.lock:
            self.batches.pop(index, None)
        return not batch.failed

    def reset(self) -> None:
        with self.lock:
            self.batches.clear()
            self.next_index, self.consumer_index = 0, -1


class $class_name(_Base):
    """Device pools linked to a page store: a load thread and an offload thread over five storage calls."""

    def __init__(self, server_args: Any = None, params: Any = None, *, components: Any = None,
                 extra_config: Optional[dict] = None, forward_stream: Any = None) -> None:
        # 0.5.23's dynamic loader calls exactly this (LNK-4); options come from linker_extra_config
        extra = dict(extra_config or {})
        self.device_pools = device_pools_from(params)
        self.components, self.forward_stream = components, forward_stream
        replicated = bool(extra.get("rank_replicated", all(p.rank_replicated for p in self.device_pools.values())))
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        tp_default = torch.distributed.get_rank() if distributed else 0
        tp_rank = int(extra.get("tp_rank", tp_default))
        cp_rank = int(extra.get("cp_rank", getattr(params, "attn_cp_rank", 0) or 0))
        pp_rank = int(extra.get("pp_rank", getattr(params, "pp_rank", 0) or 0))
        model = str(extra.get("model_name") or getattr(server_args, "model_path", "") or "model")
        # LNK-21: names carry the model and rank coordinates; replicated pools are shared across TP
        self.namespace = f"{model}/{'replicated' if replicated else f'tp{tp_rank}'}_cp{cp_rank}_pp{pp_rank}"
        self.offload_owner = not replicated or tp_rank == 0  # LNK-20: one rank writes replicated pages
        self.num_layers = max(pool.num_layers for pool in self.device_pools.values())
        self.layer_done_counter = LayerCounter(self.num_layers)  # LNK-5
        self.pools = self.release_pool_keys(self.device_pools)  # LNK-6
        self.pending: dict = {}
        self.completed_loads: deque = deque()
        self.offload_results: deque = deque()
        self.results_lock = threading.Lock()
        self.loads: queue.Queue = queue.Queue()
        self.offloads: queue.Queue = queue.Queue()
        self.closed = False
        self.connect(extra)
        self.load_thread = threading.Thread(target=self.load_loop, name="$module_name-load", daemon=True)
        self.offload_thread = threading.Thread(target=self.offload_loop, name="$module_name-offload", daemon=True)
        self.load_thread.start()
        self.offload_thread.start()

    @staticmethod
    def release_pool_keys(pools: dict) -> dict:
        """pools keyed by the release's PoolName where it has one (LNK-6), by plain name otherwise."""
        enum = getattr(_sglang_linker, "PoolName", None) if _sglang_linker is not None else None
        return {enum(name): pool for name, pool in pools.items()} if enum is not None else dict(pools)

    # ---------------------------------------------------------------- names
    def name_of(self, pool: str, key: str) -> str:
        return f"{self.namespace}/{pool}/{key}"  # LNK-21

    def held(self, transfer: Any) -> Any:
        return self.device_pools.get(_pool_name(transfer.name))

    def usable(self, transfers: list) -> list:
        """The transfers with keys, slots and a pool this linker holds."""
        return [t for t in transfers if t.keys and self.held(t) is not None and t.device_indices is not None]

    def stored(self, pool: str, key: str) -> bool:
        try:
            return bool(self.has_page(self.name_of(pool, key)))
        except Exception:  # a storage error is a miss
            return False

    # ---------------------------------------------------------------- lookup (LNK-7, LNK-8)
    def lookup(self, rid: str, transfers: list) -> list:
        """Every tail length KV and each gating pool can restore (LNK-7); pages count once stored whole (LNK-8)."""
        kv = next((t for t in transfers if _pool_name(t.name) == KV), None)
        if kv is None or not kv.keys:
            return []
        keys = list(kv.keys)
        kv_hit = _leading_run([self.stored(KV, key) for key in keys])
        restorable = list(range(1, kv_hit + 1))
        for transfer in transfers:
            pool = _pool_name(transfer.name)
            if pool == KV or not transfer.keys or not restorable:
                continue
            policy = _pool_name(getattr(transfer, "hit_policy", "all_pages"))
            if policy == "block_groups":
                continue  # reports its own verdict and never narrows the set
            present = [self.stored(pool, key) for key in keys[:kv_hit]]
            window = max(1, len(transfer.keys))
            if policy == "trailing_pages":  # every n whose window of pages ending at n is present
                allowed = {n for n in range(1, kv_hit + 1) if all(present[max(0, n - window) : n])}
            else:  # all_pages: the leading run
                allowed = set(range(1, _leading_run(present) + 1))
            restorable = [n for n in restorable if n in allowed]
        return restorable

    # ---------------------------------------------------------------- load (LNK-9 to LNK-15)
    def load(self, rid: str, transfers: list) -> bool:
        usable = self.usable(transfers)
        if not usable or rid in self.pending:  # LNK-10: nothing to load, or the rid is queued already
            return False
        for transfer in usable:
            if len(transfer.device_indices) != len(transfer.keys) * self.held(transfer).slots_per_page:
                return False
        self.pending[rid] = usable  # LNK-9: queued only; nothing is read or written before the batch starts
        return True

    def cancel_queued_load(self, rid: str) -> bool:
        return self.pending.pop(rid, None) is not None  # LNK-15: only a queued, unstarted load

    def start_layer_wise_loading(self) -> int:
        if not self.pending:
            return -1  # LNK-11
        batch, self.pending = self.pending, {}
        index = self.layer_done_counter.new_batch()
        self.loads.put((index, batch))
        return index

    def finish_layer_wise_loading(self, counter_index: int) -> bool:
        """0.5.22 and later: False when the batch failed, never an exception (LNK-13)."""
        return self.layer_done_counter.finish(counter_index)

    def num_completed_loads(self) -> int:
        """0.5.20 and 0.5.21: batches that stopped writing, in start order (LNK-14)."""
        with self.results_lock:
            return len(self.completed_loads)

    def pop_completed_load(self) -> list:
        with self.results_lock:
            return self.completed_loads.popleft()

    def load_loop(self) -> None:
        while True:
            task = self.loads.get()
            try:
                if task is None:
                    return
                self.load_batch(*task)
            finally:
                self.loads.task_done()

    def fetch_pages(self, transfers: list) -> list:
        """(pool, slots, layers) of every page, all fetched before any slot is written."""
        pages = []
        for transfer in transfers:
            pool = self.held(transfer)
            per_page = pool.slots_per_page
            for j, key in enumerate(transfer.keys):
                layers = self.get_page(self.name_of(pool.name, key))
                if layers is None or len(layers) != pool.num_layers:
                    raise KeyError(f"pool {pool.name}: page {key!r} is not stored whole")
                pages.append((pool, transfer.device_indices[j * per_page : (j + 1) * per_page], layers))
        return pages

    def load_batch(self, index: int, batch: dict) -> None:
        state = self.layer_done_counter.batch(index)
        try:
            pages = [page for transfers in batch.values() for page in self.fetch_pages(transfers)]
            for layer in range(self.num_layers):
                for pool, slots, layers in pages:
                    if layer < pool.num_layers:
                        pool.write_slots(layer, slots, layers[layer])  # LNK-12: only the target slots
                if state is not None:
                    state.layers[layer].set()
        except Exception as error:  # LNK-13: reported by finish_layer_wise_loading, never raised into the forward
            logger.info("$class_name: load batch %d failed: %s", index, error)
            if state is not None:
                state.failed = True
        finally:
            if state is not None:
                for event in state.layers:
                    event.set()
                state.stopped.set()
            with self.results_lock:
                self.completed_loads.append(list(batch))  # LNK-14: after the batch stopped writing

    # ---------------------------------------------------------------- offload (LNK-16, LNK-20)
    def offload(self, transfers: list, session_id: Optional[str] = None) -> bool:
        """session_id is 0.5.23's; earlier releases call offload(transfers) (LNK-3)."""
        usable = self.usable(transfers)
        if not usable:
            return False
        if not self.offload_owner:  # LNK-20: a non-owner rank of replicated pools reports True, writes nothing
            with self.results_lock:
                self.offload_results.append(True)
            return True
        self.offloads.put(usable)
        return True

    def num_completed_offloads(self) -> int:
        with self.results_lock:
            return len(self.offload_results)

    def pop_completed_offload(self) -> bool:
        with self.results_lock:
            return self.offload_results.popleft()  # LNK-16: submission order

    def offload_loop(self) -> None:
        while True:
            task = self.offloads.get()
            try:
                if task is None:
                    return
                success = self.offload_pages(task)
                with self.results_lock:
                    self.offload_results.append(success)  # LNK-16: one result per accepted offload
            finally:
                self.offloads.task_done()

    def offload_pages(self, transfers: list) -> bool:
        """True only when every page was stored whole (LNK-16); a page is put with all its layers at once (LNK-8)."""
        try:
            for transfer in transfers:
                pool = self.held(transfer)
                per_page = pool.slots_per_page
                if len(transfer.device_indices) != len(transfer.keys) * per_page:
                    return False
                for j, key in enumerate(transfer.keys):
                    slots = transfer.device_indices[j * per_page : (j + 1) * per_page]
                    layers = tuple(pool.read_slots(layer, slots) for layer in range(pool.num_layers))
                    if self.put_page(self.name_of(pool.name, key), layers) is False:
                        return False
            return True
        except Exception as error:
            logger.info("$class_name: offload failed: %s", error)
            return False

    # ---------------------------------------------------------------- lifecycle (LNK-17 to LNK-19)
    def reset(self) -> None:
        if self.closed:
            return  # LNK-19
        self.pending.clear()
        self.loads.join()  # LNK-17: nothing begun before reset writes after it returns
        self.offloads.join()
        with self.results_lock:
            self.completed_loads.clear()
            self.offload_results.clear()
        self.layer_done_counter.reset()

    def close(self) -> None:
        if self.closed:
            return  # LNK-19
        self.reset()
        self.closed = True
        self.loads.put(None)
        self.offloads.put(None)
        self.load_thread.join()  # LNK-18: no load or offload writes after close returns
        self.offload_thread.join()
        self.disconnect()

    # ---------------------------------------------------------------- storage calls: fill these in
    def connect(self, extra_config: dict) -> None:
        """Open the client to your store from your keys in ``extra_config`` (linker_extra_config)."""

    def put_page(self, name: str, layers: tuple) -> bool:
        """Store a page's bytes, one entry per layer, under ``name``: whole or not at all (LNK-8).

        Return True once stored (False or an exception: the offload reports False)."""
        raise NotImplementedError("$class_name.put_page: fill in the storage calls")

    def get_page(self, name: str) -> Optional[tuple]:
        """Return the layers put under ``name``, or None when there are none."""
        raise NotImplementedError("$class_name.get_page: fill in the storage calls")

    def has_page(self, name: str) -> bool:
        """Whether a whole page is stored under ``name``, without reading it.

        Called on the scheduler thread while put_page and get_page run on the linker's threads (LNK-24):
        never True for a page put_page is still writing."""
        raise NotImplementedError("$class_name.has_page: fill in the storage calls")

    def disconnect(self) -> None:
        """Release the client (close calls it once, after both threads stopped); the pages stay."""
''')
"""The linker skeleton module; ``$module_name`` and ``$class_name`` are filled in."""


def render_linker_skeleton(module_name: str, class_name: str | None = None) -> str:
    """Return the linker skeleton's source for ``module_name``; raise ValueError naming a bad name."""
    module_name, class_name = checked_names(module_name, class_name, "my_linker")
    return LINKER_SKELETON.substitute(module_name=module_name, class_name=class_name)


def write_linker_skeleton(module_name: str, directory: Path | str = ".", class_name: str | None = None) -> Path:
    """Write ``<directory>/<module_name>.py``; refuse to overwrite; return the path written."""
    return write_module(render_linker_skeleton(module_name, class_name), module_name, directory)
