"""The file backend never reads, writes or deletes outside its root, and never follows a link below it.

Every case builds the backend in ``<tmp>/root`` with a sibling ``<tmp>/outside``
holding a foreign file; after the case, nothing outside the root has
changed. The planted backends at the end undo one safeguard each and must be
caught by the same cases.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import pytest
import torch

import hicache_reference.backends.file as file_module
from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend
from hicache_reference.backends.file import FileStore
from hicache_reference.backends.namespace import _safe
from hicache_reference.backends.strategies import PER_PAGE
from tests.reliability.badinput_rows import make_pool

PAGE_SIZE = 4
KEY = "ab" * 32


def flat_page(pool: HostPagePool, page: int) -> torch.Tensor:
    return pool.get_data_page(page * PAGE_SIZE, flat=True)


def put_page(pool: HostPagePool, page: int, value: float) -> None:
    pool.set_from_flat_data_page(page * PAGE_SIZE, torch.full(flat_page(pool, page).shape, value, dtype=torch.float16))


def slots(page: int = 0) -> torch.Tensor:
    return torch.arange(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)


def snapshot(directory: str) -> dict[str, bytes]:
    """Every file under ``directory`` (links as their target text), by relative path."""
    found = {}
    for folder, folders, files in os.walk(directory):
        for name in folders + files:
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, directory)
            if os.path.islink(path):
                found[relative] = b"link:" + os.readlink(path).encode()
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    found[relative] = handle.read()
            else:
                found[relative] = b"<dir>"
    return found


@pytest.fixture
def place(tmp_path: Any) -> dict[str, str]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "foreign.bin").write_bytes(b"x" * 16)
    return {"root": str(root), "outside": str(outside), "top": str(tmp_path)}


def backend_for(place: dict[str, str], cls: type = FileBackend, **fields: Any) -> Any:
    backend = cls(HiCacheStorageConfig.single_rank(**{"model_name": "m", **fields}), {"path": place["root"]})
    backend.register_mem_pool_host(make_pool(4))
    return backend


# ---------------------------------------------------------------- configuration
@pytest.mark.parametrize("model_name", ["..", ".", "x" * 201, "x" * 10_000, "é" * 40])
def test_model_names_that_are_no_directory_name_are_refused(place: dict[str, str], model_name: str) -> None:
    before = snapshot(place["top"])
    with pytest.raises(ValueError) as raised:
        backend_for(place, model_name=model_name)
    shown = repr(model_name) if len(repr(model_name)) <= 80 else repr(model_name)[:77] + "..."
    assert str(raised.value) == (
        "FileBackend.storage_config.model_name: must give a directory name that is not '.' or '..' and at most "
        f"200 bytes once escaped (got {shown}, {len(model_name)} characters)"
    )
    assert snapshot(place["top"]) == before  # nothing written, not even the root's probe


@pytest.mark.parametrize("model_name", ["org/model", "a..b", ".hidden", "x" * 200, "%2e", "-"])
def test_model_names_that_escape_to_a_directory_name_are_accepted(place: dict[str, str], model_name: str) -> None:
    backend = backend_for(place, model_name=model_name)
    assert backend.batch_set_v1([KEY], slots()) == [True]
    assert backend.batch_get_v1([KEY], slots()) == [True]
    backend.clear()
    assert snapshot(place["root"]) == {}  # clear() leaves no empty directory behind


# ---------------------------------------------------------------- keys and pool names
@pytest.mark.parametrize(
    "key",
    [".", "..", "...", "%2e", "../../outside/foreign.bin", "/etc/passwd", "a" * 300, "a" * 301, "\x00", "k/../.."],
)
def test_every_key_stays_a_file_of_its_own_under_the_root(place: dict[str, str], key: str) -> None:
    backend = backend_for(place)
    outside = snapshot(place["outside"])
    pool = backend.mem_pool_host
    put_page(pool, 0, 3.0)
    put_page(pool, 1, -1.0)
    assert backend.batch_set_v1([key], slots(0)) == [True]
    assert backend.exists(key) is True
    assert backend.batch_get_v1([key], slots(1)) == [True]
    assert flat_page(pool, 1).eq(3.0).all()
    stored = [name for name in snapshot(place["root"]) if name.endswith(tuple("0123456789abcdef")) or "%" in name]
    assert all(
        os.path.realpath(os.path.join(place["root"], name)).startswith(place["root"] + os.sep) for name in stored
    )
    assert snapshot(place["outside"]) == outside
    backend.clear()
    assert backend.exists(key) is False
    assert snapshot(place["outside"]) == outside
    assert snapshot(place["root"]) == {}


def test_dot_keys_and_long_keys_never_share_a_file(place: dict[str, str]) -> None:
    backend = backend_for(place)
    keys = [".", "..", "%2e", "%2e%2e", "a" * 300, "a" * 301]
    pool = backend.mem_pool_host
    for index, key in enumerate(keys):
        put_page(pool, 0, float(index))
        assert backend.batch_set_v1([key], slots(0)) == [True]
    for index, key in enumerate(keys):
        assert backend.batch_get_v1([key], slots(1)) == [True]
        assert flat_page(pool, 1).eq(float(index)).all(), key
    names = {backend._name(key) for key in keys}
    assert len(names) == len(keys)


def test_long_names_become_a_digest_and_fit_the_limit() -> None:
    assert file_module._file_component("a" * 200) == "a" * 200
    assert file_module._file_component("a" * 201).startswith("%h") and len(file_module._file_component("a" * 201)) == 66
    assert file_module._file_component("..") == "%2e%2e"
    assert _safe("%2e") == "%252e"  # an escaped name never holds %2e or %h: the forms stay distinct


def test_an_object_name_outside_the_root_is_refused_before_any_io(place: dict[str, str]) -> None:
    backend = backend_for(place)
    for name in ("../outside/foreign.bin", "m/../../outside/foreign.bin", "/etc/passwd", "m//kv", "m/./kv", "a\x00b"):
        with pytest.raises(ValueError) as raised:
            backend.files.path(name)
        assert str(raised.value) == (
            f"FileBackend: object name {name[:80]!r} does not lie under the root {place['root']!r}"
        )


# ---------------------------------------------------------------- links
def test_a_page_file_that_is_a_link_is_a_miss_and_is_never_followed(place: dict[str, str]) -> None:
    backend = backend_for(place)
    assert backend.batch_set_v1([KEY], slots()) == [True]
    page_file = os.path.join(place["root"], backend._name(KEY))
    os.unlink(page_file)
    os.symlink(os.path.join(place["outside"], "foreign.bin"), page_file)  # 16 bytes: one page exactly
    outside = snapshot(place["outside"])
    assert backend.exists(KEY) is False
    assert backend.batch_exists([KEY]) == 0
    put_page(backend.mem_pool_host, 1, -1.0)
    assert backend.batch_get_v1([KEY], slots(1)) == [False]
    assert flat_page(backend.mem_pool_host, 1).eq(-1).all()  # nothing of the foreign file landed
    assert backend.batch_set_v1([KEY], slots()) == [True]  # the link is replaced, its target untouched
    assert not os.path.islink(page_file)
    backend.clear()
    assert snapshot(place["outside"]) == outside


def test_a_directory_that_is_a_link_is_never_written_through_or_cleared_through(place: dict[str, str]) -> None:
    backend = backend_for(place)
    os.makedirs(os.path.join(place["root"], "m", "pp0of1", "cp0of1"))
    os.symlink(place["outside"], os.path.join(place["root"], "m", "pp0of1", "cp0of1", "tp0of1"))
    outside = snapshot(place["outside"])
    assert backend.batch_set_v1([KEY], slots()) == [False]
    assert backend.exists(KEY) is False
    backend.clear()
    assert snapshot(place["outside"]) == outside
    assert not os.path.lexists(os.path.join(place["root"], "m"))  # the link went, and the empty parents with it


def test_files_and_directories_are_private(place: dict[str, str]) -> None:
    backend = backend_for(place)
    old = os.umask(0)
    try:
        assert backend.batch_set_v1([KEY], slots()) == [True]
    finally:
        os.umask(old)
    page_file = os.path.join(place["root"], backend._name(KEY))
    assert stat.S_IMODE(os.stat(page_file).st_mode) == file_module.FILE_MODE == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(page_file)).st_mode) == file_module.DIRECTORY_MODE == 0o700


def test_clear_leaves_no_empty_directory_but_keeps_other_namespaces(place: dict[str, str]) -> None:
    first = backend_for(place, tp_rank=0, tp_size=2)
    second = backend_for(place, tp_rank=1, tp_size=2)
    assert first.batch_set_v1([KEY], slots()) == [True]
    assert second.batch_set_v1([KEY], slots()) == [True]
    first.clear()
    assert second.exists(KEY) is True
    format_part = second.namespace.rpartition("/")[2]  # NS-9: the pool's format, below the ranks
    assert sorted(snapshot(place["root"])) == [
        "m",
        "m/pp0of1",
        "m/pp0of1/cp0of1",
        "m/pp0of1/cp0of1/tp1of2",
        f"m/pp0of1/cp0of1/tp1of2/{format_part}",
        f"m/pp0of1/cp0of1/tp1of2/{format_part}/kv",
        f"m/pp0of1/cp0of1/tp1of2/{format_part}/kv/{KEY}",
    ]
    second.clear()
    assert snapshot(place["root"]) == {}


def test_a_write_under_way_at_close_leaves_nothing(place: dict[str, str]) -> None:
    backend = backend_for(place)
    real_write, real_writev = os.write, os.writev

    def close_mid_write(descriptor: int, data: Any) -> int:
        backend.clear()
        backend.close()
        return real_write(descriptor, data)

    def close_mid_writev(descriptor: int, parts: Any) -> int:
        backend.clear()
        backend.close()
        return real_writev(descriptor, parts)

    file_module.os.write, file_module.os.writev = close_mid_write, close_mid_writev
    try:
        assert backend.batch_set_v1([KEY], slots()) == [False]
    finally:
        file_module.os.write, file_module.os.writev = real_write, real_writev
    assert snapshot(place["root"]) == {}


# ---------------------------------------------------------------- planted bugs
class DotsPassThrough(FileBackend):
    """Names files with the plain escaped key, as before: '..' is the pool directory itself."""

    def _name(self, key: str, pool: str = "kv") -> str:
        return f"{self.namespace}/{_safe(str(pool))}/{_safe(key)}"


class FollowsLinks(FileBackend):
    """Sizes and opens pages following links."""

    strategy = PER_PAGE  # every page through the replaced single-page primitives

    def _object_size(self, name: str) -> Any:
        try:
            return os.stat(self.files.path(name)).st_size
        except FileNotFoundError:
            return None

    def _read_object_into_ranges(self, name: str, views: Any) -> bool:
        descriptor = os.open(self.files.path(name), os.O_RDONLY)
        try:
            return file_module.read_exactly(descriptor, views, sum(map(len, views)))
        finally:
            os.close(descriptor)


class KeepsEmptyDirectories(FileStore):
    def _remove_empty_parents(self, directory: str) -> None:
        pass


class LeavesEmptyDirectories(FileBackend):
    store_class = KeepsEmptyDirectories


def test_planted_dots_pass_through_is_caught(place: dict[str, str]) -> None:
    with pytest.raises(AssertionError):
        backend = backend_for(place, DotsPassThrough)
        assert backend.batch_set_v1([".."], slots(0)) == [True]
        assert backend.exists("..") is True


def test_planted_link_following_is_caught(place: dict[str, str], monkeypatch: Any) -> None:
    with pytest.raises(AssertionError):
        test_a_page_file_that_is_a_link_is_a_miss_and_is_never_followed(place_with(place, FollowsLinks, monkeypatch))


def test_planted_empty_directories_are_caught(place: dict[str, str], monkeypatch: Any) -> None:
    with pytest.raises(AssertionError):
        test_clear_leaves_no_empty_directory_but_keeps_other_namespaces(
            place_with(place, LeavesEmptyDirectories, monkeypatch)
        )


def place_with(place: dict[str, str], cls: type, monkeypatch: Any) -> dict[str, str]:
    """Make ``backend_for`` build ``cls`` for the rest of the test."""
    original = backend_for.__defaults__
    monkeypatch.setattr(backend_for, "__defaults__", (cls,))
    assert original == (FileBackend,)
    return place
