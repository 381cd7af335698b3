"""The file backend keeps itself usable: a deleted root is made again, killed writers' temporary files are reclaimed.

Scenario: a cleaner deletes the backend's root directory while it serves;
writers are SIGKILLed between their temporary file and the rename.
Expected: the next write makes the root again (counted in
``roots_recreated``) and every page written after is read back; opening
the backend, and ``clear()``, remove the temporary files no live writer
owns (a dead writer's at once, anyone's once older than
``temporary_grace``) and nothing else: no published page, no fresh
temporary file of a live writer, no file of another name. Why this
matters: before, a deleted root silently disabled the cache (every write
failed, every read missed) and killed writers leaked tens of MiB.
"""

from __future__ import annotations

import os
from pathlib import Path
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from hicache_reference.backends import FileBackend
from hicache_reference.backends.file import FileStore
from tests.reference.backend_checks import config, make_pool, page_bytes, page_keys, write_pages

PROJECT = Path(__file__).resolve().parents[2]
"""The repository root: the subprocesses import the project's tests from it, whatever pytest's folder."""

KEYS = page_keys(8)


def open_backend(root: str, **extra: Any) -> FileBackend:
    backend = FileBackend(config(enable_storage_metrics=True), {"path": root, **extra})
    backend.register_mem_pool_host(make_pool())
    return backend


def files_under(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(top, name), root) for top, _, names in os.walk(root) for name in names)


def test_a_deleted_root_is_made_again_and_serves(tmp_path: Any) -> None:
    root = str(tmp_path / "pages")
    backend = open_backend(root)
    pool = backend.mem_pool_host
    assert write_pages(backend, KEYS[:4], [0, 1, 2, 3]) == [True] * 4
    shutil.rmtree(root)  # the cleaner
    assert not os.path.exists(root)
    assert backend.batch_exists(KEYS[:4]) == 0  # what was deleted is gone: misses, not errors
    assert write_pages(backend, KEYS[4:], [4, 5, 6, 7], seed=2) == [True] * 4
    assert os.path.isdir(root) and backend.roots_recreated == 1
    assert backend.batch_exists(KEYS[4:]) == 4
    slots = pool.alloc(4)
    assert backend.batch_get_v1(KEYS[4:], slots) == [True] * 4
    landed = [int(slot) // pool.page_size for slot in slots[:: pool.page_size]]
    assert [page_bytes(pool, page) for page in landed] == [page_bytes(pool, page) for page in [4, 5, 6, 7]]
    stats = backend.get_stats()
    assert stats is not None and stats.storage_errors == 0 and stats.write_failures == 0
    # deleted again, twice: made again each time, the count says so
    for expected in (2, 3):
        shutil.rmtree(root)
        assert write_pages(backend, KEYS[:1], [0]) == [True]
        assert backend.roots_recreated == expected


def test_planted_backend_that_never_remakes_its_root_is_caught(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FileStore, "_recreate_root", lambda self: None)
    with pytest.raises(AssertionError):
        test_a_deleted_root_is_made_again_and_serves(tmp_path)


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from hicache_reference.backends import FileBackend
    from tests.reference.backend_checks import config, make_pool, page_keys, write_pages
    backend = FileBackend(config(), {"path": sys.argv[1]})
    backend.register_mem_pool_host(make_pool())
    os.replace = lambda source, target: os.kill(os.getpid(), signal.SIGKILL)  # killed before the rename
    write_pages(backend, page_keys(4, start=100), [0, 1, 2, 3])
    """
)


def killed_writer(root: str) -> None:
    """Run a writer that is SIGKILLed between its first temporary file and its rename."""
    child = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, root], cwd=PROJECT, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def temporaries(root: str) -> list[str]:
    return [name for name in files_under(root) if "%tmp" in name]


def test_temporary_files_of_killed_writers_are_reclaimed_on_open(tmp_path: Any) -> None:
    root = str(tmp_path / "pages")
    backend = open_backend(root)
    assert write_pages(backend, KEYS, list(range(8))) == [True] * 8
    published = [name for name in files_under(root) if "%tmp" not in name]
    killed_writer(root)
    left = temporaries(root)
    assert len(left) == 1  # the killer struck at the first rename; the batch's temporary file stays
    # a live writer's fresh temporary file (this process) and one of another name are never touched
    directory = os.path.dirname(os.path.join(root, left[0]))
    live = os.path.join(directory, f"{KEYS[0]}%tmp.{os.getpid()}.1.0")
    other = os.path.join(directory, "notes.txt")
    for path in (live, other):
        with open(path, "wb") as handle:
            handle.write(b"x")
    reopened = open_backend(root)
    assert reopened.temporaries_reclaimed == 1
    assert temporaries(root) == [os.path.relpath(live, root)]
    assert sorted(name for name in files_under(root) if "%tmp" not in name) == sorted(
        published + [os.path.relpath(other, root)]
    )
    assert reopened.batch_exists(KEYS) == 8  # every published page is still served
    # once older than the grace, even a live writer's temporary file is stale
    old = time.time() - 61
    os.utime(live, (old, old))
    assert open_backend(root).temporaries_reclaimed == 1 and temporaries(root) == []


def test_clear_reclaims_stale_probes_and_the_namespaces_temporaries(tmp_path: Any) -> None:
    root = str(tmp_path / "pages")
    backend = open_backend(root, temporary_grace=0)
    assert write_pages(backend, KEYS, list(range(8))) == [True] * 8
    killed_writer(root)
    probe = os.path.join(root, ".probe%tmp.999999999.1")  # an opener killed between its probe and the unlink
    open(probe, "wb").close()
    backend.clear()
    assert files_under(root) == []


@pytest.mark.parametrize("grace", [-1, float("nan"), float("inf"), True, "60"])
def test_a_bad_temporary_grace_is_refused_naming_the_option(tmp_path: Any, grace: Any) -> None:
    root = tmp_path / "pages"
    with pytest.raises(ValueError) as raised:
        FileBackend(config(), {"path": str(root), "temporary_grace": grace})
    assert str(raised.value) == (
        f"FileBackend.extra_config.temporary_grace: must be a finite number of seconds >= 0 (got {grace!r})"
    )
    assert not root.exists()  # nothing written


def test_planted_backend_that_never_reclaims_is_caught(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FileBackend, "reclaim_temporaries", lambda self, namespace=True: 0)
    with pytest.raises(AssertionError):
        test_temporary_files_of_killed_writers_are_reclaimed_on_open(tmp_path)


@pytest.mark.parametrize("linked", ["tp0of1", "m"])
def test_clear_never_goes_through_a_link_above_the_format_part(tmp_path: Any, linked: str) -> None:
    """NS-9 puts the format below the ranks; a link in place of a parent must not make clear() remove outside files.

    A link in place of this configuration's own directory (``tp0of1``) is removed, never followed; one in place
    of a directory other namespaces share (the model's ``m``) is left, and the clear counts a storage error.
    """
    root, outside = tmp_path / "pages", tmp_path / "outside"
    backend = FileBackend(config(model_name="m", enable_storage_metrics=True), {"path": str(root)})
    backend.register_mem_pool_host(make_pool())
    format_part = backend.namespace.rpartition("/")[2]
    victim = outside / "pp0of1" / "cp0of1" / "tp0of1" / format_part if linked == "m" else outside / format_part
    victim.mkdir(parents=True)
    (victim / "precious").write_bytes(b"not the cache's")
    parent = root / "m" / "pp0of1" / "cp0of1" if linked == "tp0of1" else root
    parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, parent / linked)
    backend.clear()
    assert (victim / "precious").read_bytes() == b"not the cache's"
    stats = backend.get_stats()
    assert stats is not None
    if linked == "tp0of1":
        assert not os.path.lexists(root / "m") and stats.storage_errors == 0  # the link went, and its parents
    else:
        assert os.path.islink(root / "m") and stats.storage_errors == 1
