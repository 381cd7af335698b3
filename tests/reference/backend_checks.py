"""Shared by the reference backends' tests: data helpers, check plumbing, the vendor suite over a harness.

The generic clause checks are the vendor suite's (``hicache_contracts.conformance``):
``run_vendor_suite`` runs it against a harness's backend class with the
backend's backdoor hooks (``hicache_reference.backdoors``) and a fault hook
added by a test subclass (``with_fault_hook``), so nothing is skipped for
want of a hook; ``assert_vendor_check_fails`` runs one vendor check alone
against a planted bug. The reference-specific checks and the test class that
runs the suite and them are ``reference_checks``.

A ``Harness`` builds instances of one backend class that share one store (a
named memory store, one directory, one Redis key prefix), and has backdoors
that bypass the API under test: ``plant`` writes a raw object, ``peek`` reads
one, ``remove`` deletes one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from typing import Any, Callable, Iterator, Optional, TypeVar

import torch

from hicache_contracts import ContractViolation, HiCacheStorageConfig, PoolName
from hicache_contracts.conformance import BackendFactory, SuiteOptions, SuiteReport, level_clause_ids, run_suite
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backdoors import FileBackdoor, MemoryBackdoor
from hicache_reference.backends import MemoryBackend, storage_name

PAGE_SIZE = 4
"""Tokens per page in every test pool."""


# ================================================================== data helpers
def page_key(number: int) -> str:
    """Return a distinct 64-hex page key."""
    return hashlib.sha256(f"page-{number}".encode()).hexdigest()


def page_keys(count: int, start: int = 0) -> list[str]:
    return [page_key(number) for number in range(start, start + count)]


def make_pool(page_count: int = 16, kind: str = "mha", layout: str = "page_first", **overrides: Any) -> HostPagePool:
    arguments: dict[str, Any] = dict(
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


def write_pages(backend: Any, keys: list[str], pages: list[int], seed: int = 1) -> list[bool]:
    pool = backend.mem_pool_host
    fill_pages(pool, pages, seed)
    return backend.batch_set_v1(keys, slots_of(pool, pages))


def before_page(buffer: torch.Tensor, pool: HostPagePool, page: int) -> list[int]:
    """The bytes a page held in a saved copy of the pool buffer."""
    start = page * pool.page_size
    view = (
        buffer[:, :, start : start + pool.page_size]
        if pool.layout == "layer_first"
        else buffer[:, start : start + pool.page_size]
    )
    return view.contiguous().view(torch.uint8).reshape(-1).tolist()


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


# ================================================================== the vendor suite over a harness
FAULTY_PRIMITIVES = (
    "_object_size",
    "_object_sizes",
    "_read_object_into",
    "_read_object_into_ranges",
    "_write_object",
    "_write_objects",
    "_clear_namespace",
    "_load_pages",
    "_store_pages",
)
"""The store primitives of the reference backends (those a class has), made to raise inside the fault hook."""


def with_fault_hook(backend_cls: type) -> type:
    """Return a test subclass of ``backend_cls`` offering the suite's fault hook (BE-5): inside it, every store
    primitive raises OSError, as a dead store does. The backends' own API stays as it is."""

    class WithFaultHook(backend_cls):  # type: ignore[misc, valid-type]
        @contextlib.contextmanager
        def hicache_storage_faults(self) -> Iterator[None]:
            def fail(*arguments: Any, **keywords: Any) -> Any:
                raise OSError("storage is down")

            patched = [name for name in FAULTY_PRIMITIVES if hasattr(self, name)]
            for name in patched:
                setattr(self, name, fail)
            try:
                yield
            finally:
                for name in patched:
                    delattr(self, name)

    WithFaultHook.__name__ = WithFaultHook.__qualname__ = backend_cls.__name__
    WithFaultHook.__module__ = backend_cls.__module__
    return WithFaultHook


def vendor_factory(harness: Harness, **extra: Any) -> BackendFactory:
    """The factory the vendor suite builds ``harness``'s backends with: its store, its backdoor, the fault hook."""
    return BackendFactory(
        with_fault_hook(harness.backend_cls),
        {**harness.extra, **extra},
        harness.backend_cls.__name__,
        backdoor=harness.backdoor,
    )


def run_vendor_suite(harness: Harness, checks: Optional[tuple[str, ...]] = None, **options: Any) -> SuiteReport:
    """Run the vendor suite (smoke profile, seed 0) against ``harness``'s backend class; ``checks``: only those."""
    settings: dict[str, Any] = dict(profile="smoke", seed=0)
    settings.update(options)
    if checks is not None:
        settings["checks"] = checks
    return run_suite(vendor_factory(harness), SuiteOptions(**settings))


def assert_passes_vendor_suite(harness: Harness, not_claimed: tuple[str, ...] = ()) -> None:
    """The vendor suite passes every clause but those of the levels in ``not_claimed`` (skipped, not failed) and
    those of optional methods the backend does not offer (skipped as not applicable: BE-32's layout report)."""
    report = run_vendor_suite(harness)
    assert not report.failed, report.render_text(color=False)
    skipped = {
        verdict.clause_id
        for verdict in report.sections[0].clauses
        if verdict.status != "pass" and not (verdict.reason or "").startswith("not applicable: ")
    }
    expected = {clause_id for level in not_claimed for clause_id in level_clause_ids(level)}
    assert skipped == expected, report.render_text(color=False)


def assert_vendor_check_fails(harness: Harness, check: str, **options: Any) -> None:
    """Run the vendor check ``check`` alone against ``harness``'s backend class; it must fail."""
    report = run_vendor_suite(harness, (check,), **options)
    outcome = {item.check: item for item in report.sections[0].checks}[check]
    assert outcome.status == "fail", f"{check} did not fail {harness.backend_cls.__name__}: {outcome.message}"


# ================================================================== harness
class ForeignPool:
    """A host pool that is not a ``HostPagePool``, as SGLang's would be: backends see only its attributes.

    Everything is delegated to a real pool, so tests can still inspect the bytes.
    """

    def __init__(self, inner: HostPagePool) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


HarnessT = TypeVar("HarnessT", bound="Harness")


class Harness:
    """Builds instances of one backend class over one shared store; backdoors bypass the API."""

    def __init__(self, backend_cls: type, extra: dict) -> None:
        self.backend_cls = backend_cls
        self.extra = dict(extra)
        self.pool_wrapper: Optional[Callable[[HostPagePool], Any]] = None
        self.backdoor: Any = None
        """The backdoor hooks the vendor suite is given for this backend (``hicache_reference.backdoors``)."""

    def using(self: HarnessT, backend_cls: type) -> HarnessT:
        """Return a harness for ``backend_cls`` over the same store (for planted bugs)."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.backend_cls = backend_cls
        return clone

    def with_foreign_pools(self: HarnessT) -> HarnessT:
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
        self.backdoor = MemoryBackdoor()

    def _store(self, backend: Any) -> Any:
        return backend.store

    def plant(self, backend: Any, key: str, data: bytes, pool: str = "kv") -> None:
        self._store(backend).put(storage_name(backend.namespace, key, pool), bytes(data))

    def peek(self, backend: Any, key: str, pool: str = "kv") -> Any:
        """The stored page as the store holds it (a tensor), or None."""
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
        self.backdoor = FileBackdoor()

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
