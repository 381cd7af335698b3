"""PageRanges keeps the page views it cut for later calls: bounded, and dropped when the pool's buffer is replaced.

The views a call gets back must be those of the pool's buffer as it is now
(BE-15, BE-16: a read lands in its own page's slots and nowhere else); a
planted variant that keeps its views across a replaced buffer is caught.
"""

from __future__ import annotations

from typing import Any

import pytest

from hicache_reference.backends import FileBackend, page_ranges
from hicache_reference.backends.page_ranges import PageRanges
from tests.reference.test_range_layout import backend_for, check_views_match_the_pool, pool_of


class KeepsStaleViews(PageRanges):
    """Planted: the views kept for the first buffer are handed out after the buffer was replaced."""

    def _learnt(self, pool: Any, page_format: Any) -> Any:
        learnt = super()._learnt(pool, page_format)
        first = self.__dict__.setdefault("_first_kept", learnt[3])
        return (*learnt[:3], first)


class FileBackendKeepsStaleViews(FileBackend):
    host_ranges_class = KeepsStaleViews


def kept_views(backend: Any, pool: Any) -> dict:
    return backend.host_pages.ranges._learnt(pool, backend._formats["kv"])[3]


@pytest.mark.clause("BE-15", "BE-16")
def test_views_are_kept_and_match_the_pool(tmp_path: Any) -> None:
    pool = pool_of("mha", "layer_first")
    backend = backend_for(tmp_path, pool)
    page_format = backend._formats["kv"]
    slots = [page * pool.page_size for page in (5, 2, 9)]
    first = backend.host_pages.ranges.views(pool, page_format, slots)
    again = backend.host_pages.ranges.views(pool, page_format, slots)
    assert all(type(page) is tuple for page in first)  # kept pages cannot be changed by a caller
    assert [list(map(id, page)) for page in again] == [list(map(id, page)) for page in first]
    assert sorted(kept_views(backend, pool)) == sorted(slots)
    check_views_match_the_pool(backend, pool)  # pages kept and pages cut, mixed


@pytest.mark.clause("BE-15", "BE-16")
def test_kept_views_stay_under_the_bound(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_ranges, "CACHED_VIEWS", 40)
    pool = pool_of("mha", "layer_first")
    backend = backend_for(tmp_path, pool)
    per_page = backend._formats["kv"].flat_range_count
    for start in range(0, pool.page_count - 3, 3):
        backend.host_pages.ranges.views(
            pool, backend._formats["kv"], [page * pool.page_size for page in range(start, start + 3)]
        )
        assert len(kept_views(backend, pool)) * per_page <= 40
    check_views_match_the_pool(backend, pool)


@pytest.mark.clause("BE-15", "BE-16")
def test_planted_views_kept_across_a_replaced_buffer_are_caught(tmp_path: Any) -> None:
    pool = pool_of("mha", "page_first")
    backend = backend_for(tmp_path, pool, FileBackendKeepsStaleViews)
    check_views_match_the_pool(backend, pool)
    pool.kv_buffer = pool.kv_buffer.clone()
    with pytest.raises(AssertionError):
        check_views_match_the_pool(backend, pool)
