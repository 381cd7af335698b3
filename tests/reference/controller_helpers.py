"""Test helpers for the controller: a counting pool, a recording, fault-injecting backend, canned faults, ranks.

The checks that read what a controller did are ``controller_checks``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.memory import MemoryBackend
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain

PAGE_SIZE = 2
"""Small pages keep 128-page slices fast."""


# ---------------------------------------------------------------- pools
class CountingHostPool(HostPagePool):
    """A host pool that counts frees per page and records every double free (CTL-12)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.free_counts: dict[int, int] = {}
        self.double_frees: list[int] = []
        self.alloc_short = False
        """When True, every alloc reports host memory short."""
        self._count_lock = threading.Lock()

    def alloc(self, page_count: int):
        if self.alloc_short and page_count:
            return None
        return super().alloc(page_count)

    def free(self, indices) -> int:
        starts = [int(slot) for slot in torch.as_tensor(indices)[:: self.page_size].tolist()]
        with self._count_lock:
            for start in starts:
                self.free_counts[start] = self.free_counts.get(start, 0) + 1
                if 0 <= start < self.size and not self._page_in_use[start // self.page_size]:
                    self.double_frees.append(start)
        return super().free(indices)


def make_pool(
    pages: int = 600,
    layers: int = 2,
    heads: int = 1,
    head_dim: int = 4,
    *,
    page_size: int = PAGE_SIZE,
    kind: str = "mha",
) -> CountingHostPool:
    return CountingHostPool(pages, page_size, layers, heads, head_dim, kind=kind, pin_memory=False)


def fill_random(pool: HostPagePool, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape, generator=generator).to(pool.dtype))


def tokens_for(pages: int, page_size: int = PAGE_SIZE, offset: int = 0) -> list[int]:
    return [offset + index for index in range(pages * page_size)]


def keys_for(pages: int, page_size: int = PAGE_SIZE, offset: int = 0, prior_key: Optional[str] = None) -> tuple:
    return compute_key_chain(tuple(tokens_for(pages, page_size, offset)), page_size, prior_key)


def config(**overrides: Any) -> HiCacheStorageConfig:
    return HiCacheStorageConfig.single_rank(**overrides)


def memory_backend(store: Any = None, **config_overrides: Any) -> MemoryBackend:
    return MemoryBackend(config(**config_overrides), {} if store is None else {"store": store})


def store_pages(backend: Any, pool: HostPagePool, keys: tuple) -> torch.Tensor:
    """Register ``pool`` with ``backend`` and write ``keys`` from new slots, a batch per call; return the slots."""
    backend.register_mem_pool_host(pool)
    slots = pool.alloc(len(keys))
    assert slots is not None, f"the pool has no room for {len(keys)} pages"
    for start in range(0, len(keys), STORAGE_BATCH_SIZE):
        end = min(start + STORAGE_BATCH_SIZE, len(keys))
        written = backend.batch_set_v1(list(keys[start:end]), slots[start * PAGE_SIZE : end * PAGE_SIZE])
        assert written == [True] * (end - start), f"the backend did not store pages {start}..{end}: {written}"
    return slots


# ---------------------------------------------------------------- recording backend
@dataclass
class Call:
    """One backend call as the controller made it."""

    method: str
    keys: tuple
    """The call's keys (for v2 reads and writes: the first transfer's keys)."""
    extra_info: Any
    prefix_at_call: Any
    """``tuple(extra_info.prefix_keys)`` when the call was made, or None."""
    transfers: tuple = ()
    """(pool name, keys, host_indices) per transfer, for v2 calls."""
    host_indices: Any = None
    result: Any = None
    thread: str = ""

    @property
    def prefix_now(self) -> Any:
        prefix = getattr(self.extra_info, "prefix_keys", None)
        return None if prefix is None else tuple(prefix)


Fault = Callable[[Call, Callable[[], Any]], Any]
"""A fault gets the call and a thunk that runs the real method; it returns the result to give back."""


def _described(transfers: Any) -> tuple:
    """(pool name, keys, host_indices) of each transfer, as a Call holds them."""
    return tuple((str(transfer.name), tuple(transfer.keys or ()), transfer.host_indices) for transfer in transfers)


class FaultingRecorder:
    """Wraps a backend: records every IO call and lets a test replace results per method (``faults``)."""

    def __init__(self, inner: Any, faults: Optional[dict[str, Fault]] = None) -> None:
        self.inner = inner
        self.faults: dict[str, Fault] = dict(faults or {})
        self.calls: list[Call] = []
        self.registered: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def register_mem_pool_host(self, pool: Any) -> None:
        self.registered.append(("register_mem_pool_host", pool))
        self.inner.register_mem_pool_host(pool)

    def register_mem_host_pool_v2(self, pool: Any, name: Any) -> None:
        self.registered.append((str(name), pool))
        self.inner.register_mem_host_pool_v2(pool, name)

    def on_host_pools_registered(self) -> None:
        self.registered.append(("on_host_pools_registered", None))
        finish = getattr(self.inner, "on_host_pools_registered", None)
        if callable(finish):
            finish()

    def _record(
        self,
        method: str,
        keys: Any,
        extra_info: Any,
        run: Callable[[], Any],
        *,
        transfers: tuple = (),
        host_indices: Any = None,
    ) -> Any:
        prefix = getattr(extra_info, "prefix_keys", None)
        call = Call(
            method,
            tuple(keys),
            extra_info,
            None if prefix is None else tuple(prefix),
            transfers,
            host_indices,
            thread=threading.current_thread().name,
        )
        with self._lock:
            self.calls.append(call)
        fault = self.faults.get(method)
        result = fault(call, run) if fault is not None else run()
        call.result = result
        return result

    def batch_exists(self, keys, extra_info=None):
        return self._record("batch_exists", keys, extra_info, lambda: self.inner.batch_exists(keys, extra_info))

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return self._record_v1("batch_get_v1", keys, host_indices, extra_info)

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return self._record_v1("batch_set_v1", keys, host_indices, extra_info)

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        return self._record(
            "batch_exists_v2",
            keys,
            extra_info,
            lambda: self.inner.batch_exists_v2(keys, pool_transfers, extra_info),
            transfers=_described(pool_transfers or ()),
        )

    def batch_get_v2(self, transfers, extra_info=None):
        return self._record_v2("batch_get_v2", transfers, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        return self._record_v2("batch_set_v2", transfers, extra_info)

    def _record_v1(self, method: str, keys: Any, host_indices: Any, extra_info: Any) -> Any:
        """Record a v1 read or write and pass it on to the inner backend's ``method``."""
        run = getattr(self.inner, method)
        return self._record(
            method, keys, extra_info, lambda: run(keys, host_indices, extra_info), host_indices=host_indices
        )

    def _record_v2(self, method: str, transfers: Any, extra_info: Any) -> Any:
        """Record a v2 read or write (its keys: the first transfer's) and pass it on to the inner ``method``."""
        described = _described(transfers)
        run = getattr(self.inner, method)
        return self._record(
            method,
            described[0][1] if described else (),
            extra_info,
            lambda: run(transfers, extra_info),
            transfers=described,
        )

    def calls_of(self, *methods: str) -> list[Call]:
        with self._lock:
            return [call for call in self.calls if call.method in methods]

    def clear_calls(self) -> None:
        with self._lock:
            self.calls.clear()


# ---------------------------------------------------------------- canned faults
def raising(error: type = RuntimeError) -> Fault:
    def fault(call: Call, run: Callable[[], Any]) -> Any:
        raise error("planted storage failure")

    return fault


def returning(value: Any) -> Fault:
    return lambda call, run: value


def on_call(number: int, fault: Fault) -> Fault:
    """Apply ``fault`` to the ``number``-th call of the method (from 0) only."""
    counter = {"n": 0}

    def wrapped(call: Call, run: Callable[[], Any]) -> Any:
        index = counter["n"]
        counter["n"] += 1
        return fault(call, run) if index == number else run()

    return wrapped


def short_by(missing: int) -> Fault:
    """Run the real call, then report the last ``missing`` pages as failed."""

    def fault(call: Call, run: Callable[[], Any]) -> Any:
        result = run()
        if isinstance(result, list):
            return result[: len(result) - missing] + [False] * missing
        return result

    return fault


# ---------------------------------------------------------------- waiting, ranks and time
def wait_all(*operations: Any, timeout: float = 20.0) -> None:
    for operation in operations:
        if not operation.wait(timeout):
            raise AssertionError(f"{operation!r} did not finish within {timeout} s")


def run_on_ranks(
    controllers: Sequence[Any],
    groups: Sequence[Any],
    submit: Callable[[int], Any],
    wait: Callable[[Any], Any] = wait_all,
    join_timeout: float = 20.0,
    close_timeout: Optional[float] = 10.0,
) -> list:
    """On one thread per rank, ``submit(rank)`` an operation and ``wait`` for it; return the operations by rank.

    Then the rank group is aborted (releasing a rank still waiting on the
    other, as a planted controller may leave it) and every controller closed.
    """
    operations: list = [None] * len(controllers)

    def run(rank: int) -> None:
        operations[rank] = submit(rank)
        wait(operations[rank])

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(controllers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(join_timeout)
    groups[0].abort()
    for controller in controllers:
        controller.close(timeout=close_timeout)
    return operations


@dataclass
class FakeClock:
    """A clock the test moves by hand."""

    now: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds
