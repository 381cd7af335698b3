"""The shared base's page ranges of a HostPagePool, computed by arithmetic, against the pool's own answer.

Scenario: pools of every kind and layout; random sets of pages.
Expected: the views the base hands to reads and writes cover exactly the
ranges ``get_page_buffer_meta`` lists, in its order (BE-15, BE-16).
Planted: a layout whose stride is one token off is caught.
"""

from __future__ import annotations

import ctypes
import random
from typing import Any

import pytest
import torch

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend

LAYOUTS = [("mha", "page_first"), ("mha", "layer_first"), ("mla", "page_first"), ("mla", "layer_first")]


def pool_of(kind: str, layout: str) -> HostPagePool:
    return HostPagePool(37, 4, 3, 2, 8, dtype=torch.float16, kind=kind, layout=layout, pin_memory=False)


def check_views_match_the_pool(backend: Any, pool: HostPagePool) -> None:
    page_format = backend._formats["kv"]
    chooser = random.Random(5)
    for _ in range(20):
        pages = chooser.sample(range(pool.page_count), chooser.randint(1, 12))
        slots = [page * pool.page_size for page in pages]
        views = backend._range_views(pool, page_format, slots)
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
    assert backend._layouts, "the arithmetic path was taken"


class StrideOneTokenOff(FileBackend):
    def _pool_layout(self, pool: Any, page_format: Any, per_page: int) -> Any:
        layout = super()._pool_layout(pool, page_format, per_page)
        return None if layout is None else (layout[0], layout[1] + pool.page_bytes // pool.page_size // 2, layout[2])


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("kind, layout", LAYOUTS[:2])
def test_range_check_catches_a_wrong_stride(tmp_path: Any, kind: str, layout: str) -> None:
    pool = pool_of(kind, layout)
    with pytest.raises(AssertionError):
        check_views_match_the_pool(backend_for(tmp_path, pool, StrideOneTokenOff), pool)
