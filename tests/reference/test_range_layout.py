"""The shared base's page ranges of a HostPagePool, computed by arithmetic, against the pool's own answer.

Scenario: pools of every kind and layout; random sets of pages.
Expected: the views the base hands to reads and writes cover exactly the
ranges ``get_page_buffer_meta`` lists, in its order (BE-15, BE-16).
Planted: a layout whose stride is half a token off is caught; a page past
the pool gets no views (never views cut short by the end of its buffer); a
pool whose buffer was replaced gets views of the new one (views kept from
the old one are caught).
"""

from __future__ import annotations

import ctypes
import dataclasses
import random
from typing import Any

import pytest
import torch

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend
from hicache_reference.backends.page_ranges import PageRanges

LAYOUTS = [("mha", "page_first"), ("mha", "layer_first"), ("mla", "page_first"), ("mla", "layer_first")]


def pool_of(kind: str, layout: str) -> HostPagePool:
    return HostPagePool(37, 4, 3, 2, 8, dtype=torch.float16, kind=kind, layout=layout, pin_memory=False)


def check_views_match_the_pool(backend: Any, pool: HostPagePool) -> None:
    page_format = backend._formats["kv"]
    chooser = random.Random(5)
    for _ in range(20):
        pages = chooser.sample(range(pool.page_count), chooser.randint(1, 12))
        slots = [page * pool.page_size for page in pages]
        views = backend.host_pages.ranges.views(pool, page_format, slots)
        assert views is not None, f"pages {pages}: no views"
        indices = torch.tensor([slot + offset for slot in slots for offset in range(pool.page_size)])
        pointers, sizes = pool.get_page_buffer_meta(indices)
        got = [(ctypes.addressof(ctypes.c_char.from_buffer(view)), len(view)) for page in views for view in page]
        assert got == list(zip(pointers, sizes)), f"pages {pages}"


def backend_for(tmp_path: Any, pool: HostPagePool, backend_class: type = FileBackend) -> Any:
    backend = backend_class(None, {"path": str(tmp_path / "pages")})
    backend.register_mem_pool_host(pool)
    return backend


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("kind, layout", LAYOUTS)
def test_page_ranges_by_arithmetic_match_the_pool(tmp_path: Any, kind: str, layout: str) -> None:
    pool = pool_of(kind, layout)
    backend = backend_for(tmp_path, pool)
    check_views_match_the_pool(backend, pool)
    assert backend.host_pages.ranges.layout(pool, backend._formats["kv"]) is not None, "the arithmetic path was taken"


class StrideOneTokenOff(PageRanges):
    """Planted: the layout's stride half a token's bytes too long."""

    def layout(self, pool: Any, page_format: Any) -> Any:
        layout = super().layout(pool, page_format)
        if layout is None:
            return None
        return dataclasses.replace(layout, slot_bytes=layout.slot_bytes + pool.page_bytes // pool.page_size // 2)


class FileBackendStrideOff(FileBackend):
    host_ranges_class = StrideOneTokenOff


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("kind, layout", LAYOUTS[:2])
def test_range_check_catches_a_wrong_stride(tmp_path: Any, kind: str, layout: str) -> None:
    pool = pool_of(kind, layout)
    with pytest.raises(AssertionError):
        check_views_match_the_pool(backend_for(tmp_path, pool, FileBackendStrideOff), pool)


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("kind, layout", LAYOUTS)
def test_no_view_reaches_past_the_pool(tmp_path: Any, kind: str, layout: str) -> None:
    pool = pool_of(kind, layout)
    backend = backend_for(tmp_path, pool)
    page_format = backend._formats["kv"]
    last = (pool.page_count - 1) * pool.page_size
    assert backend.host_pages.ranges.views(pool, page_format, [last]) is not None
    # One page past the end: no view cut short by the buffer's end, none at all.
    assert backend.host_pages.ranges.views(pool, page_format, [last + pool.page_size]) is None


@pytest.mark.clause("BE-15", "BE-16")
def test_a_replaced_buffer_is_seen(tmp_path: Any) -> None:
    pool = pool_of("mha", "page_first")
    backend = backend_for(tmp_path, pool)
    check_views_match_the_pool(backend, pool)
    pool.kv_buffer = pool.kv_buffer.clone()  # a pool that moved its pages: views of the old buffer would be stale
    check_views_match_the_pool(backend, pool)
