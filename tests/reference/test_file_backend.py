"""The file reference backend: the vendor suite, the reference checks, atomic writes, file damage, planted bugs.

Over 450 lines: the read-in-place checks and the planted bugs they must catch share their helpers; split, one
test module would import another's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
from typing import Any, Callable, Iterator, Optional, Sequence

import pytest
import torch

import hicache_reference.backends.file as file_module
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend, PageFormat
from hicache_reference.backends.base import flat_order_range_count, host_bytes
from hicache_reference.backends.strategies import PER_PAGE
from tests.reference.backend_checks import (
    assert_vendor_check_fails,
    FileHarness,
    ForeignPool,
    Harness,
    before_page,
    clause_check,
    config,
    make_pool,
    page_bytes,
    page_keys,
    sentinel_fill,
    slots_of,
    write_pages,
)
from tests.reference.reference_checks import (
    ReferenceBackendTests,
    check_reads_stay_in_their_slots,
    check_round_trip_between_pools,
    check_short_objects_are_misses,
    check_storage_error_is_a_failure,
)


@pytest.fixture
def file_harness(tmp_path: Any) -> FileHarness:
    return FileHarness(str(tmp_path / "pages"))


class TestFileBackend(ReferenceBackendTests):
    """The vendor suite (every level claimed, durability too), then the reference checks."""

    @pytest.fixture
    def harness(self, file_harness: FileHarness) -> Harness:
        return file_harness


# ================================================================== file-only checks
def replace_root_with_a_file(backend: Any) -> None:
    """Break the storage for real: the directory becomes a plain file, so every call fails with OSError."""
    shutil.rmtree(backend.root)
    with open(backend.root, "wb") as handle:
        handle.write(b"not a directory")


@pytest.mark.clause("BE-5")
def test_real_storage_error_is_a_failure(file_harness: FileHarness) -> None:
    check_storage_error_is_a_failure(file_harness, replace_root_with_a_file)


@clause_check
def check_never_visible_half_written(harness: Harness) -> None:
    """BE-7: while a page's bytes are being written, neither exists nor a read sees it."""
    backend = harness.make()
    observer = harness.make()
    key = page_keys(1, start=700)[0]
    seen: list[tuple[bool, int]] = []
    real_write, real_writev = os.write, os.writev

    def write_half_then_look(descriptor: int, data: Any) -> int:
        half = max(1, len(data) // 2)
        count = real_write(descriptor, data[:half])
        seen.append((observer.exists(key), observer.batch_exists([key])))
        return count

    def writev_half_then_look(descriptor: int, parts: Any) -> int:
        return write_half_then_look(descriptor, b"".join(bytes(part) for part in parts))

    os.write, os.writev = write_half_then_look, writev_half_then_look
    try:
        assert write_pages(backend, [key], [0], seed=30) == [True]
    finally:
        os.write, os.writev = real_write, real_writev
    assert seen, "the write went through os.write or os.writev at least once"
    assert all(visible == (False, 0) for visible in seen), f"a half-written page was visible: {seen}"
    assert observer.batch_get_v1([key], slots_of(observer.mem_pool_host, [3])) == [True]
    assert page_bytes(observer.mem_pool_host, 3) == page_bytes(backend.mem_pool_host, 0)


@pytest.mark.clause("BE-7")
def test_never_visible_half_written(file_harness: FileHarness) -> None:
    check_never_visible_half_written(file_harness)


@clause_check
def check_damaged_files_are_misses(harness: FileHarness) -> None:
    """BE-13: a page file emptied or truncated after it was written is a miss; a stray temporary is no page."""
    backend = harness.make()
    keys = page_keys(3, start=720)
    assert write_pages(backend, keys, [0, 1, 2]) == [True] * 3
    os.truncate(harness.file_of(backend, keys[0]), 0)
    os.truncate(harness.file_of(backend, keys[1]), backend.mem_pool_host.page_bytes - 1)
    assert backend.batch_exists(keys[2:]) == 1
    for key in keys[:2]:
        assert backend.exists(key) is False and backend.get(key) is None
    assert backend.batch_get_v1(keys, slots_of(backend.mem_pool_host, [4, 5, 6])) == [False, False, True]
    stray = page_keys(1, start=730)[0]
    with open(harness.file_of(backend, stray) + "%tmp.1.2.3", "wb") as handle:
        handle.write(b"\x05" * backend.mem_pool_host.page_bytes)
    assert backend.exists(stray) is False


@pytest.mark.clause("BE-13")
def test_damaged_files_are_misses(file_harness: FileHarness) -> None:
    check_damaged_files_are_misses(file_harness)


@pytest.mark.clause("BE-7")
def test_no_temporary_left_behind(file_harness: FileHarness) -> None:
    backend = file_harness.make(fsync=True)
    assert write_pages(backend, page_keys(4), [0, 1, 2, 3]) == [True] * 4
    leftovers = [name for _, _, files in os.walk(file_harness.path) for name in files if "%tmp" in name]
    assert leftovers == []
    assert file_harness.object_count() == 4


@pytest.mark.clause("NS-1", "NS-2", "NS-3", "NS-4")
def test_layout_on_disk(file_harness: FileHarness) -> None:
    backend = file_harness.make(config(tp_rank=1, tp_size=2, pp_rank=1, pp_size=2, model_name="org/model"))
    key = page_keys(1)[0]
    assert write_pages(backend, [key], [0]) == [True]
    format_part = "fmt-page_first.float16.p4.e256"  # NS-9: the KV pool's layout, dtype, page size and elements
    expected = os.path.join(file_harness.path, "org%2fmodel", "pp1of2", "cp0of1", "tp1of2", format_part, "kv", key)
    assert os.path.getsize(expected) == backend.mem_pool_host.page_bytes


def test_configuration_errors(tmp_path: Any) -> None:
    with pytest.raises(ValueError) as raised:
        FileBackend(config(), {"fsync": True})
    assert str(raised.value) == (
        "FileBackend.extra_config.path: required, the directory that holds the pages (got None)"
    )
    with pytest.raises(ValueError) as raised:
        FileBackend(config(), {"path": str(tmp_path), "fsync": "yes"})
    assert str(raised.value) == "FileBackend.extra_config.fsync: must be true or false (got 'yes')"
    from_config = FileBackend(config(extra_config={"path": str(tmp_path)}))
    assert from_config.root == str(tmp_path)


def test_unusable_path_errors_name_the_key(tmp_path: Any) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"not a directory")
    for path in (str(a_file), str(a_file / "pages"), "/proc/hicache-pages"):
        with pytest.raises(ValueError) as raised:
            FileBackend(config(), {"path": path})
        message = str(raised.value)
        assert message.startswith(
            f"FileBackend.extra_config.path: must be a directory the backend can create and write in (got {path!r}"
        ), message


@pytest.mark.clause("BE-11")
def test_clear_while_another_instance_writes(file_harness: FileHarness) -> None:
    writer = file_harness.make()
    other = file_harness.make()
    keys = page_keys(2, start=740)
    assert write_pages(writer, keys[:1], [0]) == [True]
    other.clear()  # removes the directory the writer already made
    assert write_pages(writer, keys[1:], [1]) == [True], "a write after a clear must make its directory again"
    assert writer.batch_exists(keys) == 0 and writer.batch_exists(keys[1:]) == 1


# ================================================================== reads straight into the host pages
class ViewPool:
    """A foreign host pool shaped like SGLang's: its unflattened page is a view into ``kv_buffer``.

    Everything else is delegated to a ``HostPagePool``. ``order`` is how
    ``get_page_buffer_meta`` lists a page's ranges: ``"flat"`` in flat-page
    order (component-major, as the flat page holds them), or ``"per_layer"``
    K and V layer by layer, as SGLang's layer_first MHA pool does, which is not
    the flat page's order.
    """

    def __init__(self, inner: HostPagePool, order: str = "flat") -> None:
        self._inner = inner
        self.order = order

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_data_page(self, index: Any, flat: bool = True) -> torch.Tensor:
        start, buffer = int(index), self._inner.kv_buffer
        size = self._inner.page_size
        page = (
            buffer[:, :, start : start + size]
            if self._inner.layout == "layer_first"
            else buffer[:, start : start + size]
        )
        return page.flatten() if flat else page

    def set_from_flat_data_page(self, index: Any, data: torch.Tensor) -> None:
        page = self.get_data_page(index, flat=False)
        page.copy_(data.reshape(page.shape))

    def get_page_buffer_meta(self, indices: Any) -> tuple[list[int], list[int]]:
        pointers, sizes = self._inner.get_page_buffer_meta(indices)
        per_page = self._inner.ranges_per_page()
        if self.order == "per_layer" and self._inner.layout == "layer_first" and self._inner.component_count == 2:
            layers = self._inner.layer_num
            pointers = [
                pointers[first + component * layers + layer]
                for first in range(0, len(pointers), per_page)
                for layer in range(layers)
                for component in range(2)
            ]
        return pointers, sizes


class PoolWithoutRanges(ForeignPool):
    """A foreign host pool without ``get_page_buffer_meta``: the file backend reads it through staging."""

    def __getattr__(self, name: str) -> Any:
        if name == "get_page_buffer_meta":
            raise AttributeError(name)
        return super().__getattr__(name)


class PageCopyPool(ForeignPool):
    """A foreign host pool whose unflattened page is a copy, so the order of its ranges cannot be checked."""

    def get_data_page(self, index: Any, flat: bool = True) -> torch.Tensor:
        return self._inner.get_data_page(index, flat=flat).clone()


def staged_pools(harness: FileHarness) -> FileHarness:
    """Return a harness whose backends get host pools without byte ranges."""
    clone = harness.using(harness.backend_cls)
    clone.pool_wrapper = PoolWithoutRanges
    return clone


def view_pools(harness: FileHarness, order: str) -> FileHarness:
    """Return a harness whose backends get ``ViewPool`` host pools listing their ranges in ``order``."""
    clone = harness.using(harness.backend_cls)
    clone.pool_wrapper = lambda pool: ViewPool(pool, order)
    return clone


@pytest.mark.clause("BE-15")
def test_which_pools_are_read_in_place() -> None:
    """A pool's ranges are used for reads only where they are known to come in flat-page order."""
    for layout in ("page_first", "layer_first"):
        pool = make_pool(layout=layout)
        assert flat_order_range_count(pool, pool.page_size, pool.page_bytes) == pool.ranges_per_page()
        assert PageFormat.of_pool(ViewPool(pool)).flat_range_count == pool.ranges_per_page()
        assert PageFormat.of_pool(ForeignPool(pool)).flat_range_count == pool.ranges_per_page()
        assert PageFormat.of_pool(PageCopyPool(pool)).flat_range_count is None, "its page is a copy: order unknown"
        assert PageFormat.of_pool(PoolWithoutRanges(pool)).flat_range_count is None
    layer_first = make_pool(layout="layer_first")
    assert PageFormat.of_pool(ViewPool(layer_first, "per_layer")).flat_range_count is None
    assert (
        PageFormat.of_pool(ViewPool(make_pool(kind="mla", layout="layer_first"), "per_layer")).flat_range_count == 2
    ), "one component: per layer is the flat order"

    class NoRanges:
        page_size = 4

        def get_data_page(self, index: Any, flat: bool = True) -> torch.Tensor:
            return torch.zeros(8)

    assert flat_order_range_count(NoRanges(), 4, 32) is None


@contextlib.contextmanager
def failing_read(path: str, fault: str) -> Iterator[None]:
    """Make reading the file at ``path`` stop half way: the next ``os.readv`` finds its end ("shrank") or fails ("error").

    Other files read as usual. ``os.preadv`` (the backend's first read) fails the same way.
    """
    target = os.stat(path).st_ino
    real_readv, real_preadv = os.readv, os.preadv
    calls: list[int] = []

    def readv(descriptor: int, buffers: Sequence[Any]) -> int:
        return preadv(descriptor, buffers, None)

    def preadv(descriptor: int, buffers: Sequence[Any], offset: Any) -> int:
        def real(chosen: Sequence[Any]) -> int:
            return real_readv(descriptor, chosen) if offset is None else real_preadv(descriptor, chosen, offset)

        if os.fstat(descriptor).st_ino != target:
            return real(buffers)
        calls.append(descriptor)
        if len(calls) == 1:
            return real(first_bytes(buffers, sum(map(len, buffers)) // 2))
        if fault == "error":
            raise OSError(errno.EIO, "input/output error")
        return 0

    os.readv, os.preadv = readv, preadv  # type: ignore[assignment]  # stand-ins with the arguments the backend passes
    try:
        yield
    finally:
        os.readv, os.preadv = real_readv, real_preadv
    assert calls, "the failing file was read"


def first_bytes(buffers: Sequence[Any], count: int) -> list[memoryview]:
    """Return ``buffers`` cut down to their first ``count`` bytes."""
    kept = []
    for buffer in buffers:
        view = memoryview(buffer)[:count]
        if len(view):
            kept.append(view)
        count -= len(view)
    return kept


def read_with_failing_page(harness: FileHarness, fault: str) -> tuple[list[bool], set[int], dict[int, bytes], Any]:
    """Read four pages into pool pages 5..8 while the second one's file fails half way.

    Returns the result, the pages whose bytes changed, the bytes each page
    that arrived must hold, and the reader's pool.
    """
    writer = harness.make()
    keys = page_keys(4, start=760)
    assert write_pages(writer, keys, [0, 1, 2, 3], seed=31) == [True] * 4
    expected = {page: page_bytes(writer.mem_pool_host, source) for page, source in ((5, 0), (7, 2), (8, 3))}
    reader = harness.make()
    pool = reader.mem_pool_host
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    with failing_read(harness.file_of(reader, keys[1]), fault):
        result = reader.batch_get_v1(keys, slots_of(pool, [5, 6, 7, 8]))
    changed = {
        page for page in range(pool.page_count) if page_bytes(pool, page) != bytes(before_page(before, pool, page))
    }
    return result, changed, expected, pool


@clause_check
def check_failed_read_stays_in_its_page(harness: FileHarness, fault: str) -> None:
    """BE-15, BE-16: a page whose file fails part way is False; no byte outside it changes, in the call or out of it."""
    result, changed, expected, pool = read_with_failing_page(harness, fault)
    assert result == [True, False, True, True], f"only the page that failed may be False: {result}"
    assert changed <= {5, 6, 7, 8}, f"a read wrote outside the addressed pages: {sorted(changed - {5, 6, 7, 8})}"
    for page, data in expected.items():
        assert page_bytes(pool, page) == data, f"page {page} arrived but does not hold its bytes"


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("fault", ["shrank", "error"])
@pytest.mark.parametrize("pools", ["page_first", "layer_first", "staged"])
def test_failed_read_stays_in_its_page(file_harness: FileHarness, fault: str, pools: str) -> None:
    if pools == "staged":
        harness = staged_pools(file_harness)
    else:
        harness = file_harness.using(FileBackend)
        harness.pool_wrapper = lambda pool, layout=pools: make_pool(page_count=pool.page_count, layout=layout)
    check_failed_read_stays_in_its_page(harness, fault)


@pytest.mark.clause("BE-15", "BE-16")
def test_reads_land_in_place(file_harness: FileHarness) -> None:
    """With a HostPagePool the read goes straight into the host page: the failed page holds part of its file."""
    result, changed, _, _ = read_with_failing_page(file_harness, "shrank")
    assert result == [True, False, True, True]
    assert changed == {5, 6, 7, 8}, "the failed page's own slots took the half that arrived"
    result, changed, _, _ = read_with_failing_page(staged_pools(file_harness), "shrank")
    assert result == [True, False, True, True]
    assert changed == {5, 7, 8}, "through staging a failed page is never touched"


@pytest.mark.clause("BE-13", "BE-15", "BE-16")
@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
def test_pools_read_through_staging(file_harness: FileHarness, layout: str) -> None:
    """The fallback for pools whose ranges are not known: staging, then set_from_flat_data_page."""
    harness = staged_pools(file_harness)
    check_round_trip_between_pools(harness, "mha", layout)
    check_reads_stay_in_their_slots(harness)
    check_short_objects_are_misses(harness)


@pytest.mark.clause("BE-15", "BE-16", "BE-24")
@pytest.mark.parametrize("order", ["flat", "per_layer"])
@pytest.mark.parametrize("layout", ["page_first", "layer_first"])
def test_pools_with_page_views(file_harness: FileHarness, layout: str, order: str) -> None:
    """SGLang-shaped pools: read in place when their ranges come in flat-page order, through staging otherwise."""
    harness = view_pools(file_harness, order)
    check_round_trip_between_pools(harness, "mha", layout)
    check_stored_pages_are_flat(harness, "mha", layout)
    check_reads_stay_in_their_slots(harness)
    check_failed_read_stays_in_its_page(harness, "shrank")


@clause_check
def check_stored_pages_are_flat(harness: Harness, kind: str, layout: str) -> None:
    """BE-17: a written file holds the flat page (``get_data_page(flat=True)``), whatever order the pool lists
    its ranges in, so any reader of the format reads it back."""
    writer = harness.make(pool=make_pool(kind=kind, layout=layout))
    keys = page_keys(3, start=80)
    assert write_pages(writer, keys, [2, 7, 11], seed=8) == [True] * 3
    assert [harness.peek(writer, key) for key in keys] == [
        page_bytes(writer.mem_pool_host, page) for page in (2, 7, 11)
    ]


@clause_check
def check_reads_continue_after_short_reads(
    read: Callable[[int, Sequence[memoryview], int], bool], directory: str
) -> None:
    """BE-15: a page arrives whole however few bytes and buffers each readv takes; a file that ends early is False."""
    data = bytes(range(256)) * 40
    path = os.path.join(directory, "page")
    with open(path, "wb") as handle:
        handle.write(data)
    real_readv = os.readv

    def readv_at_most_100_bytes(descriptor: int, buffers: Sequence[Any]) -> int:
        return real_readv(descriptor, first_bytes(buffers, 100))

    sizes = [0, 7, 300, 1, 0, 2000, 5, 1927, 2000, 2000, 2000]
    assert sum(sizes) == len(data)
    targets = [bytearray(size) for size in sizes]
    os.readv = readv_at_most_100_bytes  # type: ignore[assignment]
    original_limit, file_module.IOV_MAX = file_module.IOV_MAX, 3
    descriptor = os.open(path, os.O_RDONLY)
    try:
        assert read(descriptor, [memoryview(target) for target in targets], len(data)) is True
        assert b"".join(targets) == data
        os.lseek(descriptor, 0, os.SEEK_SET)
        longer = bytearray(len(data) + 10)
        assert read(descriptor, [memoryview(longer)], len(longer)) is False, "the file ended first"
    finally:
        os.close(descriptor)
        os.readv = real_readv
        file_module.IOV_MAX = original_limit


@pytest.mark.clause("BE-15")
def test_reads_continue_after_short_reads(tmp_path: Any) -> None:
    check_reads_continue_after_short_reads(file_module.read_exactly, str(tmp_path))


# ================================================================== planted bugs
class ZeroLengthIsHit(FileBackend):
    """Counts any existing file as a page, as a real backend did with the empty files of crashed writers."""

    def _present(self, pool_name: str, keys: Any) -> list[bool]:
        return [os.path.exists(self.files.path(self._name(key, pool_name))) for key in keys]


class ReadsWhateverIsThere(FileBackend):
    """Reads without checking the size: a short file is a 'hit' with a partial page."""

    strategy = PER_PAGE  # every page through the replaced single-page primitive

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        try:
            with open(self.files.path(name), "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return False
        buffer[: len(data)] = data[: len(buffer)]
        return True


class ClearRemovesTheRoot(FileBackend):
    def _clear_namespace(self, namespace: str) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.root, exist_ok=True)
        self.files._made_directories.clear()


class ProcessInNamespace(FileBackend):
    """Derives its directory from process-local state, so a restart never finds the pages."""

    instances = 0

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        type(self).instances += 1
        self.namespace = f"{self.namespace}-run{type(self).instances}"


class WritesInPlace(FileBackend):
    """Preallocates the final file and fills it in place: visible at full size before its bytes are there."""

    strategy = PER_PAGE  # every page through the replaced single-page primitive

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        final = self.files.path(name)
        self.files._ensure_directory(os.path.dirname(final))
        descriptor = os.open(final, os.O_WRONLY | os.O_CREAT, 0o644)
        parts = [data] if isinstance(data, memoryview) else data
        try:
            os.ftruncate(descriptor, sum(part.nbytes for part in parts))
            file_module.write_all(descriptor, parts, sum(part.nbytes for part in parts))
        finally:
            os.close(descriptor)
        return True


class ShortReadIsHit(FileBackend):
    """Checks the size, then trusts one readv: a file that shrinks under the read is a 'hit' with half a page."""

    strategy = PER_PAGE  # every page through the replaced single-page primitive

    def _read_object_into_ranges(self, name: str, views: Sequence[memoryview]) -> bool:
        descriptor = os.open(self.files.path(name), os.O_RDONLY)
        try:
            if os.fstat(descriptor).st_size != sum(map(len, views)):
                return False
            return os.readv(descriptor, list(views)) > 0
        finally:
            os.close(descriptor)


class ReadsPageAsOneBlock(FileBackend):
    """Reads each page into one block from its first range on, as if a page were contiguous in the pool."""

    def _read_objects_into_ranges(self, names: Sequence[str], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        blocks = [
            [host_bytes(ctypes.addressof(ctypes.c_char.from_buffer(views[0])), sum(map(len, views)))]
            for views in page_views
        ]
        return super()._read_objects_into_ranges(names, blocks)


class ScrubsTheCallOnFailure(FileBackend):
    """Zeroes every page of the call when one fails, 'so that no half page stays', spoiling pages that arrived."""

    def _read_objects_into_ranges(self, names: Sequence[str], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        results = super()._read_objects_into_ranges(names, page_views)
        if not all(results):
            for views in page_views:
                for view in views:
                    view[:] = bytes(len(view))
        return results


class TrustsAnyRangeOrder(FileBackend):
    """Reads into any pool's ranges in the order it lists them, without checking that it is the flat page's."""

    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        page_format = self._formats[name]
        per_page = len(pool.get_page_buffer_meta(torch.arange(page_format.page_size))[0])
        self._formats[name] = PageFormat(**{**page_format.__dict__, "flat_range_count": per_page})


def read_once(descriptor: int, views: Sequence[memoryview], byte_count: int) -> bool:
    """One readv and no more: a short read is taken for the whole page."""
    return os.readv(descriptor, list(views)[: file_module.IOV_MAX]) > 0


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("fault", ["shrank", "error"])
@pytest.mark.parametrize("buggy_class", [ShortReadIsHit, ReadsPageAsOneBlock, ScrubsTheCallOnFailure])
def test_failed_read_check_catches_planted_bug(file_harness: FileHarness, fault: str, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check_failed_read_stays_in_its_page(file_harness.using(buggy_class), fault)


class ReadsInAnyRangeOrder(TrustsAnyRangeOrder):
    """Writes the flat page through a copy, reads into the pool's ranges in whatever order it lists them."""

    writes_from_ranges = False


@pytest.mark.clause("BE-15")
def test_round_trip_catches_ranges_in_the_wrong_order(file_harness: FileHarness) -> None:
    harness = view_pools(file_harness.using(ReadsInAnyRangeOrder), "per_layer")
    with pytest.raises(AssertionError):
        check_round_trip_between_pools(harness, "mha", "layer_first")


@pytest.mark.clause("BE-17")
def test_flat_page_check_catches_writes_in_the_wrong_range_order(file_harness: FileHarness) -> None:
    harness = view_pools(file_harness.using(TrustsAnyRangeOrder), "per_layer")
    with pytest.raises(AssertionError):
        check_stored_pages_are_flat(harness, "mha", "layer_first")


@pytest.mark.clause("BE-15")
def test_short_read_check_catches_planted_bug(tmp_path: Any) -> None:
    with pytest.raises(AssertionError):
        check_reads_continue_after_short_reads(read_once, str(tmp_path))


VENDOR_PLANTED: list[Any] = [
    pytest.param("planted_short_objects_are_misses", ZeroLengthIsHit, marks=pytest.mark.clause("BE-13"), id="BE-13"),
    pytest.param(
        "planted_short_objects_are_misses", ReadsWhateverIsThere, marks=pytest.mark.clause("BE-13"), id="BE-13-read"
    ),
    pytest.param(
        "clear_removes_only_its_own_namespace", ClearRemovesTheRoot, marks=pytest.mark.clause("NS-8"), id="NS-8"
    ),
    pytest.param("pages_survive_a_rebuild", ProcessInNamespace, marks=pytest.mark.clause("NS-7"), id="NS-7"),
]
"""Planted file bugs the vendor suite catches: each is run through the one vendor check named, alone."""

PLANTED: list[Any] = [
    pytest.param(
        check_short_objects_are_misses, ZeroLengthIsHit, marks=pytest.mark.clause("BE-13"), id="BE-13-zero-length"
    ),
    pytest.param(
        check_short_objects_are_misses, ReadsWhateverIsThere, marks=pytest.mark.clause("BE-13"), id="BE-13-short-read"
    ),
    pytest.param(
        check_damaged_files_are_misses, ZeroLengthIsHit, marks=pytest.mark.clause("BE-13"), id="BE-13-damaged"
    ),
    pytest.param(check_never_visible_half_written, WritesInPlace, marks=pytest.mark.clause("BE-7"), id="BE-7"),
]
"""Planted file bugs the reference checks catch (the file layout, damage, in-place writes)."""


@pytest.mark.parametrize("check, buggy_class", VENDOR_PLANTED)
def test_vendor_check_catches_planted_bug(file_harness: FileHarness, check: str, buggy_class: type) -> None:
    assert_vendor_check_fails(file_harness.using(buggy_class), check)


@pytest.mark.parametrize("check, buggy_class", PLANTED)
def test_check_catches_planted_bug(
    file_harness: FileHarness, check: Callable[[Harness], None], buggy_class: type
) -> None:
    with pytest.raises(AssertionError):
        check(file_harness.using(buggy_class))
