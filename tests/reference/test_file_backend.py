"""The file reference backend: every generic clause check, restart, atomic writes, file damage, planted bugs."""

from __future__ import annotations

import os
import shutil
from typing import Any, Callable, Optional

import pytest

from hicache_reference.backends import FileBackend
from tests.reference.backend_checks import (
    BackendClauseTests,
    FileHarness,
    Harness,
    check_clear_keeps_other_namespaces,
    check_restart,
    check_short_objects_are_misses,
    check_storage_error_is_a_failure,
    clause_check,
    config,
    page_bytes,
    page_keys,
    slots_of,
    write_pages,
)


@pytest.fixture
def file_harness(tmp_path: Any) -> FileHarness:
    return FileHarness(str(tmp_path / "pages"))


class TestFileBackend(BackendClauseTests):
    @pytest.fixture
    def harness(self, file_harness: FileHarness) -> Harness:
        return file_harness

    @pytest.mark.clause("NS-7")
    def test_restart(self, harness: Harness) -> None:
        check_restart(harness)


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
    real_write = os.write

    def write_half_then_look(descriptor: int, data: Any) -> int:
        half = max(1, len(data) // 2)
        count = real_write(descriptor, data[:half])
        seen.append((observer.exists(key), observer.batch_exists([key])))
        return count

    os.write = write_half_then_look
    try:
        assert write_pages(backend, [key], [0], seed=30) == [True]
    finally:
        os.write = real_write
    assert seen, "the write went through os.write at least once"
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
    expected = os.path.join(file_harness.path, "org%2fmodel", "pp1of2", "cp0of1", "tp1of2", "kv", key)
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


@pytest.mark.clause("BE-11")
def test_clear_while_another_instance_writes(file_harness: FileHarness) -> None:
    writer = file_harness.make()
    other = file_harness.make()
    keys = page_keys(2, start=740)
    assert write_pages(writer, keys[:1], [0]) == [True]
    other.clear()  # removes the directory the writer already made
    assert write_pages(writer, keys[1:], [1]) == [True], "a write after a clear must make its directory again"
    assert writer.batch_exists(keys) == 0 and writer.batch_exists(keys[1:]) == 1


# ================================================================== planted bugs
class ZeroLengthIsHit(FileBackend):
    """Counts any existing file as a page, as a real backend did with the empty files of crashed writers."""

    def _present(self, pool_name: str, keys: Any) -> list[bool]:
        return [os.path.exists(self._path(self._name(key, pool_name))) for key in keys]


class ReadsWhateverIsThere(FileBackend):
    """Reads without checking the size: a short file is a 'hit' with a partial page."""

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        try:
            with open(self._path(name), "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return False
        buffer[: len(data)] = data[: len(buffer)]
        return True


class ClearRemovesTheRoot(FileBackend):
    def _clear_namespace(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.root, exist_ok=True)
        self._made_directories.clear()


class ProcessInNamespace(FileBackend):
    """Derives its directory from process-local state, so a restart never finds the pages."""

    instances = 0

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        type(self).instances += 1
        self.namespace = f"{self.namespace}-run{type(self).instances}"


class WritesInPlace(FileBackend):
    """Preallocates the final file and fills it in place: visible at full size before its bytes are there."""

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        final = self._path(name)
        self._ensure_directory(os.path.dirname(final))
        descriptor = os.open(final, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(descriptor, len(data))
            written = 0
            while written < len(data):
                written += os.write(descriptor, data[written:])
        finally:
            os.close(descriptor)
        return True


PLANTED: list[Any] = [
    pytest.param(check_short_objects_are_misses, ZeroLengthIsHit, marks=pytest.mark.clause("BE-13"),
                 id="BE-13-zero-length"),
    pytest.param(check_short_objects_are_misses, ReadsWhateverIsThere, marks=pytest.mark.clause("BE-13"),
                 id="BE-13-short-read"),
    pytest.param(check_damaged_files_are_misses, ZeroLengthIsHit, marks=pytest.mark.clause("BE-13"),
                 id="BE-13-damaged"),
    pytest.param(check_clear_keeps_other_namespaces, ClearRemovesTheRoot, marks=pytest.mark.clause("NS-8"),
                 id="NS-8"),
    pytest.param(check_restart, ProcessInNamespace, marks=pytest.mark.clause("NS-7"), id="NS-7"),
    pytest.param(check_never_visible_half_written, WritesInPlace, marks=pytest.mark.clause("BE-7"), id="BE-7"),
]


@pytest.mark.parametrize("check, buggy_class", PLANTED)
def test_check_catches_planted_bug(file_harness: FileHarness, check: Callable[[Harness], None],
                                   buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check(file_harness.using(buggy_class))
