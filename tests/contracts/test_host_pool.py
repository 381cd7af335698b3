"""The host page pool: page addressing, the page helpers backends call, allocation.

Each check is a function that raises AssertionError; the real pool passes it
and a planted-bug pool (at the bottom of the helpers) is caught by it. Over 450 lines: each check sits
beside the planted pools it must catch.
"""

from __future__ import annotations

import ctypes

import pytest
import torch

from hicache_contracts.errors import ContractViolation
from hicache_contracts.host_pool import HostPagePool

PAGE_COUNT, PAGE_SIZE, LAYER_NUM, HEAD_NUM, HEAD_DIM = 8, 4, 2, 2, 8
GEOMETRIES = [(kind, layout) for kind in ("mha", "mla") for layout in ("layer_first", "page_first")]


def make_pool(kind: str = "mha", layout: str = "page_first", pool_class: type = HostPagePool, **overrides):
    arguments = dict(
        page_count=PAGE_COUNT,
        page_size=PAGE_SIZE,
        layer_num=LAYER_NUM,
        head_num=1 if kind == "mla" else HEAD_NUM,
        head_dim=HEAD_DIM,
        kind=kind,
        layout=layout,
    )
    arguments.update(overrides)
    return pool_class(**arguments)


def random_page(pool: HostPagePool, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(pool.page_element_count, generator=generator).to(pool.dtype)


def page_bytes_through_pointers(pool: HostPagePool, slots: torch.Tensor) -> bytes:
    pointers, sizes = pool.get_page_buffer_meta(slots)
    return b"".join(ctypes.string_at(pointer, size) for pointer, size in zip(pointers, sizes))


def as_bytes(tensor: torch.Tensor) -> bytes:
    return bytes(tensor.contiguous().view(torch.uint8).tolist())


def slots_of_page(pool: HostPagePool, page: int) -> torch.Tensor:
    return torch.arange(page * pool.page_size, (page + 1) * pool.page_size, dtype=torch.int64)


# ------------------------------------------------------------------ checks
def check_round_trip(pool: HostPagePool, page: int = 3) -> None:
    """A page written flat reads back the same through get_data_page and through the pointers."""
    data = random_page(pool, seed=page)
    pool.set_from_flat_data_page(page * pool.page_size, data)
    assert torch.equal(pool.get_data_page(page * pool.page_size), data)
    assert page_bytes_through_pointers(pool, slots_of_page(pool, page)) == as_bytes(data)


def check_pointer_write(pool: HostPagePool, page: int = 5) -> None:
    """Bytes written through the pointers read back as the flat page (the zero-copy get path)."""
    data = random_page(pool, seed=100 + page)
    raw = as_bytes(data)
    pointers, sizes = pool.get_page_buffer_meta(slots_of_page(pool, page))
    offset = 0
    for pointer, size in zip(pointers, sizes):
        ctypes.memmove(pointer, raw[offset : offset + size], size)
        offset += size
    assert offset == pool.page_bytes
    assert torch.equal(pool.get_data_page(page * pool.page_size), data)


def check_neighbours_untouched(pool: HostPagePool, page: int = 4) -> None:
    """Writing one page changes no element of the buffer outside that page (BE-16)."""
    before = pool.kv_buffer.clone()
    pool.set_from_flat_data_page(page * pool.page_size, random_page(pool, seed=7) + 1)
    start, stop = page * pool.page_size, (page + 1) * pool.page_size
    inside = torch.zeros_like(pool.kv_buffer, dtype=torch.bool)
    if pool.layout == "layer_first":  # [component, layer, slot, head, dim]
        inside[:, :, start:stop] = True
    else:  # [component, slot, layer, head, dim]
        inside[:, start:stop] = True
    changed = pool.kv_buffer != before
    assert not bool((changed & ~inside).any()), "elements outside the written page changed"
    assert bool(changed[inside].any()), "the page itself was not written"


def check_get_data_page_copies(pool: HostPagePool, page: int = 2) -> None:
    """get_data_page(flat=True) is a copy: changing it leaves the pool alone."""
    pool.set_from_flat_data_page(page * pool.page_size, torch.zeros(pool.page_element_count, dtype=pool.dtype))
    copy = pool.get_data_page(page * pool.page_size)
    copy.fill_(3)
    assert not bool(pool.get_data_page(page * pool.page_size).any())


def check_rejects_misaligned(pool: HostPagePool) -> None:
    """A misaligned index raises and writes nothing."""
    before = pool.kv_buffer.clone()
    try:
        pool.set_from_flat_data_page(pool.page_size + 1, random_page(pool, seed=1))
    except ValueError:
        pass
    else:
        raise AssertionError("a misaligned index was accepted")
    assert torch.equal(pool.kv_buffer, before)


def check_double_free_detected(pool: HostPagePool) -> None:
    """Freeing a page twice raises, and the accounting is unchanged by the failed call."""
    slots = pool.alloc(2)
    assert slots is not None
    pool.free(slots)
    free_before = pool.available_pages()
    try:
        pool.free(slots)
    except ValueError:
        pass
    else:
        raise AssertionError("a double free was accepted")
    assert pool.available_pages() == free_before


# ------------------------------------------------------------------ planted bugs
class PointersOfNextPage(HostPagePool):
    """Planted bug: pointers one page too far."""

    def get_page_buffer_meta(self, indices):
        pointers, sizes = super().get_page_buffer_meta(indices)
        step = self.page_size * self.kv_buffer[0].stride(1 if self.layout == "layer_first" else 0)
        return [pointer + step * self.element_size for pointer in pointers], sizes


class PointersLayerMajor(HostPagePool):
    """Planted bug: layer_first ranges listed layer by layer (K0, V0, K1, V1), not matching the flat page."""

    def get_page_buffer_meta(self, indices):
        pointers, sizes = super().get_page_buffer_meta(indices)
        per_component = self.layer_num
        reordered = []
        for page in range(0, len(pointers), self.ranges_per_page()):
            block = pointers[page : page + self.ranges_per_page()]
            for layer in range(per_component):
                reordered.extend(block[component * per_component + layer] for component in range(self.component_count))
        return reordered, sizes


class WritesOneSlotTooMany(HostPagePool):
    """Planted bug: a page write spills into the first token of the next page."""

    def set_from_flat_data_page(self, index, data):
        super().set_from_flat_data_page(index, data)
        spill = index + self.page_size
        if spill < self.size:
            if self.layout == "layer_first":
                self.kv_buffer[:, :, spill] = 9
            else:
                self.kv_buffer[:, spill] = 9


class FlatPageIsAView(HostPagePool):
    """Planted bug: get_data_page hands out the pool's own memory instead of a copy."""

    def get_data_page(self, index, flat=True):
        return super().get_data_page(index, flat=False)


class AcceptsMisaligned(HostPagePool):
    """Planted bug: index alignment is not checked, so a write lands across two pages."""

    def _page_start(self, field, index):
        return int(index)


class ForgetsDoubleFree(HostPagePool):
    """Planted bug: free never checks that the page was allocated."""

    def free(self, indices):
        starts = self._page_starts("indices", indices)
        with self._lock:
            for start in starts:
                self._free_pages.append(start // self.page_size)
        return len(starts)


# ------------------------------------------------------------------ tests
@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_page_round_trips_through_flat_page_and_pointers(kind, layout):
    check_round_trip(make_pool(kind, layout))


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_page_written_through_pointers_reads_back_flat(kind, layout):
    check_pointer_write(make_pool(kind, layout))


@pytest.mark.clause("BE-16")
@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_writing_a_page_leaves_neighbours_untouched(kind, layout):
    check_neighbours_untouched(make_pool(kind, layout))


@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_flat_page_is_a_copy(kind, layout):
    check_get_data_page_copies(make_pool(kind, layout))


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_misaligned_write_is_rejected(kind, layout):
    check_rejects_misaligned(make_pool(kind, layout))


@pytest.mark.clause("BE-16")
def test_double_free_is_detected():
    check_double_free_detected(make_pool())


@pytest.mark.parametrize(
    "planted, check, geometries",
    [
        (PointersOfNextPage, check_round_trip, GEOMETRIES),
        (PointersOfNextPage, check_pointer_write, GEOMETRIES),
        (PointersLayerMajor, check_round_trip, [("mha", "layer_first")]),
        (PointersLayerMajor, check_pointer_write, [("mha", "layer_first")]),
        (WritesOneSlotTooMany, check_neighbours_untouched, GEOMETRIES),
        (FlatPageIsAView, check_get_data_page_copies, GEOMETRIES),
        (AcceptsMisaligned, check_rejects_misaligned, GEOMETRIES),
        (ForgetsDoubleFree, check_double_free_detected, [("mha", "page_first")]),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_each_check_catches_its_planted_bug(planted, check, geometries):
    for kind, layout in geometries:
        with pytest.raises(AssertionError):
            check(make_pool(kind, layout, pool_class=planted))


# ------------------------------------------------------------------ geometry
@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_sizes_and_shapes(kind, layout):
    pool = make_pool(kind, layout)
    components = 2 if kind == "mha" else 1
    heads = HEAD_NUM if kind == "mha" else 1
    assert pool.component_count == components
    assert pool.size == PAGE_COUNT * PAGE_SIZE
    assert pool.size_per_token == components * LAYER_NUM * heads * HEAD_DIM * 2  # float16
    assert pool.get_size_per_token() == pool.size_per_token
    assert pool.get_ksize_per_token() == pool.size_per_token // components
    assert pool.page_bytes == pool.size_per_token * PAGE_SIZE
    assert pool.get_dummy_flat_data_page().shape == (pool.page_bytes // 2,)
    assert not bool(pool.get_dummy_flat_data_page().any())
    assert pool.get_data_page(0).dtype == torch.float16
    assert pool.get_data_page(0, flat=False).shape == pool.page_shape
    expected_buffer = (
        (components, LAYER_NUM, pool.size, heads, HEAD_DIM)
        if layout == "layer_first"
        else (components, pool.size, LAYER_NUM, heads, HEAD_DIM)
    )
    assert tuple(pool.kv_buffer.shape) == expected_buffer


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize(
    "kind, layout, ranges",
    [("mha", "page_first", 2), ("mla", "page_first", 1), ("mha", "layer_first", 4), ("mla", "layer_first", 2)],
)
def test_buffer_meta_counts_ranges_per_page_and_bytes(kind, layout, ranges):
    pool = make_pool(kind, layout)
    slots = torch.cat([slots_of_page(pool, 6), slots_of_page(pool, 1)])  # out of order on purpose
    pointers, sizes = pool.get_page_buffer_meta(slots)
    assert pool.ranges_per_page() == ranges
    assert len(pointers) == len(sizes) == 2 * ranges
    assert sum(sizes) == 2 * pool.page_bytes
    first_of_page_six = pool.get_page_buffer_meta(slots_of_page(pool, 6))[0][0]
    assert pointers[0] == first_of_page_six  # pages keep the order given


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_structured_page_follows_documented_order(kind, layout):
    """The flat position of element (c, l, t, h, d) is the one docs/host_pool.md states."""
    pool = make_pool(kind, layout)
    start = 2 * PAGE_SIZE
    view = pool.get_data_page(start, flat=False)
    view.copy_(torch.arange(view.numel(), dtype=torch.float32).reshape(view.shape).to(pool.dtype))
    flat = pool.get_data_page(start).to(torch.float32)
    heads, components = pool.head_num, pool.component_count
    for c in range(components):
        for layer in range(LAYER_NUM):
            for t in range(PAGE_SIZE):
                h, d = heads - 1, HEAD_DIM - 1
                if layout == "layer_first":
                    position = (((c * LAYER_NUM + layer) * PAGE_SIZE + t) * heads + h) * HEAD_DIM + d
                    stored = pool.kv_buffer[c, layer, start + t, h, d]
                else:
                    position = (((c * PAGE_SIZE + t) * LAYER_NUM + layer) * heads + h) * HEAD_DIM + d
                    stored = pool.kv_buffer[c, start + t, layer, h, d]
                assert float(flat[position]) == float(stored)


@pytest.mark.parametrize("kind, layout", GEOMETRIES)
def test_page_index_may_be_a_zero_dim_tensor(kind, layout):
    pool = make_pool(kind, layout)
    data = random_page(pool, seed=11)
    pool.set_from_flat_data_page(torch.tensor(PAGE_SIZE), data)
    assert torch.equal(pool.get_data_page(torch.tensor(PAGE_SIZE)), data)


def test_unpinned_without_accelerator_and_never_fails():
    assert make_pool().pinned == torch.cuda.is_available()
    assert make_pool(pin_memory=False).pinned is False
    make_pool(pin_memory=True)  # falls back to plain memory where pinning is impossible


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to pin memory")
def test_pinned_by_default_with_accelerator():
    pool = make_pool()
    assert pool.pinned
    check_round_trip(pool)


# ------------------------------------------------------------------ allocation
def test_alloc_free_accounting():
    pool = make_pool()
    assert (pool.available_pages(), pool.used_pages(), pool.available_size()) == (PAGE_COUNT, 0, PAGE_COUNT * PAGE_SIZE)
    first = pool.alloc(3)
    assert first.dtype == torch.int64 and first.shape == (3 * PAGE_SIZE,)
    pages = first.reshape(3, PAGE_SIZE)
    assert bool((pages[:, 0] % PAGE_SIZE == 0).all())
    assert bool((pages - pages[:, :1] == torch.arange(PAGE_SIZE)).all())
    rest = pool.alloc(PAGE_COUNT - 3)
    assert (pool.available_pages(), pool.used_pages()) == (0, PAGE_COUNT)
    assert sorted(torch.cat([first, rest]).tolist()) == list(range(PAGE_COUNT * PAGE_SIZE))
    assert pool.alloc(1) is None
    assert pool.free(first) == 3
    assert (pool.available_pages(), pool.used_pages()) == (3, PAGE_COUNT - 3)
    assert pool.alloc(4) is None  # short: nothing taken
    assert pool.available_pages() == 3
    assert pool.alloc(0).shape == (0,)


def test_alloc_reuses_freed_pages():
    pool = make_pool()
    everything = pool.alloc(PAGE_COUNT)
    pool.free(everything[PAGE_SIZE : 2 * PAGE_SIZE])
    again = pool.alloc(1)
    assert again.tolist() == list(range(PAGE_SIZE, 2 * PAGE_SIZE))


def test_free_accepts_a_list_of_slots():
    pool = make_pool()
    assert pool.free(pool.alloc(2).tolist()) == 2
    assert pool.used_pages() == 0


@pytest.mark.clause("BE-16")
def test_double_free_message_and_nothing_freed():
    pool = make_pool()
    slots = pool.alloc(2)
    pool.free(slots[:PAGE_SIZE])
    with pytest.raises(ContractViolation) as caught:
        pool.free(slots)  # second page still allocated, first already free
    assert str(caught.value) == (
        "HostPagePool.indices: must name allocated pages only (double free of the page at this slot) (got 0) [BE-16]"
    )
    assert (caught.value.field, caught.value.clause_id, caught.value.value) == ("HostPagePool.indices", "BE-16", 0)
    assert pool.used_pages() == 1  # the still-allocated page was not freed either


@pytest.mark.clause("BE-16")
def test_free_naming_a_page_twice_frees_nothing():
    pool = make_pool()
    slots = pool.alloc(1)
    with pytest.raises(ContractViolation) as caught:
        pool.free(torch.cat([slots, slots]))
    assert str(caught.value) == (
        "HostPagePool.indices: must name each page once (this page start repeats) (got 0) [BE-16]"
    )
    assert pool.used_pages() == 1


# ------------------------------------------------------------------ bad input
BAD_INDICES = [
    (5, "HostPagePool.index: must be page-aligned, a multiple of page_size 4 (got 5) [BE-15]"),
    (32, "HostPagePool.index: must be a slot in [0, 32) (got 32) [BE-15]"),
    (-4, "HostPagePool.index: must be a slot in [0, 32) (got -4) [BE-15]"),
    (4.0, "HostPagePool.index: must be an int slot index (got 4.0) [BE-15]"),
    (True, "HostPagePool.index: must be an int slot index (got True) [BE-15]"),
]


BAD_PAGES = [
    (
        torch.zeros(10, dtype=torch.float16),
        "HostPagePool.data: must hold exactly one page, 256 elements (got 10) [BE-15]",
    ),
    (
        torch.zeros(256, dtype=torch.float32),
        "HostPagePool.data: must have the pool dtype torch.float16 (got torch.float32) [BE-15]",
    ),
    ([0.0] * 256, "HostPagePool.data: must be a torch.Tensor (got 'list') [BE-15]"),
]


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize(
    "index, data, message",
    [(index, None, message) for index, message in BAD_INDICES] + [(0, data, message) for data, message in BAD_PAGES],
)
def test_a_bad_index_or_page_is_rejected_and_nothing_written(index, data, message):
    pool = make_pool()
    before = pool.kv_buffer.clone()
    with pytest.raises(ContractViolation) as caught:
        pool.set_from_flat_data_page(index, random_page(pool, seed=3) if data is None else data)
    assert str(caught.value) == message
    assert torch.equal(pool.kv_buffer, before)
    if data is None:  # a bad index is refused for reads too
        with pytest.raises(ContractViolation):
            pool.get_data_page(index)


def _slots(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


BAD_SLOT_BATCHES = [
    (_slots(0, 1, 2), "HostPagePool.indices: must hold whole pages, a multiple of page_size 4 slots (got 3) [BE-15]"),
    (_slots(1, 2, 3, 4), "HostPagePool.indices: must start each page at a multiple of page_size 4 (got 1) [BE-15]"),
    (
        _slots(0, 1, 2, 4),
        "HostPagePool.indices: must hold each page's slots consecutively (the page at this slot does not) (got 0) [BE-15]",
    ),
    (
        _slots(0, 4, 8, 12),
        "HostPagePool.indices: must hold each page's slots consecutively (the page at this slot does not) (got 0) [BE-15]",
    ),
    (_slots(28, 29, 30, 31, 32, 33, 34, 35), "HostPagePool.indices: must hold slots in [0, 32) (got 32) [BE-15]"),
    (torch.zeros(4), "HostPagePool.indices: must hold integer slot indices (got torch.float32) [BE-15]"),
    (torch.zeros(1, 4, dtype=torch.int64), "HostPagePool.indices: must be 1-D (got (1, 4)) [BE-15]"),
]


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("indices, message", BAD_SLOT_BATCHES)
def test_bad_slot_batch_is_rejected_by_meta_and_free(indices, message):
    pool = make_pool()
    pool.alloc(PAGE_COUNT)
    with pytest.raises(ContractViolation) as caught:
        pool.get_page_buffer_meta(indices)
    assert str(caught.value) == message
    with pytest.raises(ContractViolation):
        pool.free(indices)
    assert pool.used_pages() == PAGE_COUNT


def test_page_starts_only_are_rejected_unless_page_size_is_one():
    """Passing one slot per page (not every slot) is caught: the batch form is all slots."""
    pool = make_pool()
    with pytest.raises(ContractViolation):
        pool.get_page_buffer_meta(_slots(0, 4, 8, 12))
    single = make_pool(page_size=1)
    assert len(single.get_page_buffer_meta(_slots(0, 4))[0]) == 2 * single.ranges_per_page()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"page_size": 0}, "HostPagePool.page_size: must be a positive int (got 0)"),
        ({"layer_num": True}, "HostPagePool.layer_num: must be a positive int (got True)"),
        ({"kind": "gqa"}, "HostPagePool.kind: must be one of ['mha', 'mla'] (got 'gqa')"),
        (
            {"layout": "page_first_direct"},
            "HostPagePool.layout: must be one of ['layer_first', 'page_first'] (got 'page_first_direct')",
        ),
        ({"dtype": "float16"}, "HostPagePool.dtype: must be a torch.dtype (got 'float16')"),
        ({"pin_memory": 1}, "HostPagePool.pin_memory: must be None, True or False (got 1)"),
    ],
)
def test_bad_constructor_argument_names_the_field(overrides, message):
    with pytest.raises(ValueError) as caught:
        make_pool(**overrides)
    assert str(caught.value) == message


def test_alloc_rejects_a_negative_count():
    with pytest.raises(ValueError) as caught:
        make_pool().alloc(-1)
    assert str(caught.value) == "HostPagePool.page_count: must be an int >= 0 (got -1)"
