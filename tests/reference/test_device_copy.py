"""L2 ⇄ L1 page copies between the host pool and a device buffer (CPU path here; CUDA tests marked ``cuda``)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

from hicache_contracts import ContractViolation
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.device_copy import PageCopier

PAGE_SIZE = 4


def host_pool(layout: str, pages: int = 80) -> HostPagePool:
    pool = HostPagePool(pages, PAGE_SIZE, 3, 2, 8, kind="mha", layout=layout)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape).to(pool.dtype))
    return pool


def slots_of(pages: list[int]) -> torch.Tensor:
    return torch.tensor([page * PAGE_SIZE + offset for page in pages for offset in range(PAGE_SIZE)])


def device_page(copier: PageCopier, page: int) -> torch.Tensor:
    return copier.device_buffer.narrow(copier.slot_dim, page * PAGE_SIZE, PAGE_SIZE).cpu()


def host_page(pool: HostPagePool, page: int) -> torch.Tensor:
    return pool.get_data_page(page * PAGE_SIZE, flat=False)


PLACEMENTS = {
    "one run": (list(range(10, 20)), list(range(0, 10))),
    "scattered": ([5, 3, 40, 41, 7], [9, 0, 1, 30, 2]),
    "target run, source scattered": (list(range(0, 66, 2)), list(range(33))),
    "both mixed": ([1, 2, 3, 9, 8, 20, 21, 22, 50], [4, 5, 6, 7, 0, 1, 2, 40, 10]),
}


@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_load_then_store_round_trip(layout, placement, device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    pool = host_pool(layout)
    original = pool.kv_buffer.clone()
    host_pages, device_pages = PLACEMENTS[placement]
    copier = PageCopier.allocate(pool, 48, device=device)
    assert copier.uses_cuda is (device == "cuda")
    copier.load(slots_of(host_pages), slots_of(device_pages)).wait()
    for host, target in zip(host_pages, device_pages):
        assert torch.equal(device_page(copier, target), host_page(pool, host))
    untouched = sorted(set(range(48)) - set(device_pages))
    assert all(not device_page(copier, page).any() for page in untouched)  # nothing else written
    # back into other host pages
    free_pages = [page for page in range(pool.page_count) if page not in host_pages][: len(host_pages)]
    handle = copier.store(slots_of(device_pages), slots_of(free_pages))
    handle.wait()
    assert handle.done()
    for host, back in zip(host_pages, free_pages):
        assert torch.equal(host_page(pool, back), original.narrow(copier.slot_dim, host * PAGE_SIZE, PAGE_SIZE))
    kept = sorted(set(range(pool.page_count)) - set(free_pages))
    for page in kept:
        assert torch.equal(host_page(pool, page), original.narrow(copier.slot_dim, page * PAGE_SIZE, PAGE_SIZE))


def test_empty_copy_is_done():
    copier = PageCopier.allocate(host_pool("layer_first"), 4, device="cpu")
    empty = torch.empty(0, dtype=torch.int64)
    assert copier.load(empty, empty).done() and copier.store(empty, empty).done()


@pytest.mark.clause("BE-15")
def test_bad_indices_are_rejected_before_any_copy():
    pool = host_pool("layer_first")
    copier = PageCopier.allocate(pool, 4, device="cpu")
    with pytest.raises(ContractViolation) as error:
        copier.load(slots_of([0, 1]), slots_of([0]))
    assert str(error.value) == "PageCopier.device_indices: must hold as many slots as host_indices (8) (got 4) [BE-15]"
    with pytest.raises(ContractViolation) as error:
        copier.load(slots_of([0]), slots_of([4]))
    assert str(error.value) == "PageCopier.device_indices: must address slots in [0, 16) (got 19) [BE-15]"
    with pytest.raises(ContractViolation) as error:
        copier.load(slots_of([0]) + 1, slots_of([0]))
    assert str(error.value).startswith(
        "PageCopier.host_indices[0]: page 0's first slot must be a non-negative multiple"
    )
    assert not copier.device_buffer.any()


def test_device_buffer_must_match_the_host_geometry():
    pool = host_pool("page_first")
    with pytest.raises(ContractViolation, match=r"PageCopier.device_buffer: must have the host pool's shape"):
        PageCopier(pool, torch.zeros(2, 16, 3, 2, 4, dtype=pool.dtype))
    with pytest.raises(ContractViolation, match=r"must have the host pool's dtype torch.float16"):
        PageCopier(pool, torch.zeros(2, 16, 3, 2, 8, dtype=torch.float32))
    with pytest.raises(ContractViolation, match=r"must hold whole pages of 4 slots"):
        PageCopier(pool, torch.zeros(2, 18, 3, 2, 8, dtype=pool.dtype))


@pytest.mark.cuda
def test_cuda_load_is_asynchronous_on_its_own_stream():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    pool = HostPagePool(256, PAGE_SIZE, 8, 4, 64, kind="mha", pin_memory=True)
    assert pool.pinned
    copier = PageCopier.allocate(pool, 256)
    assert copier.stream is not None and copier.stream != torch.cuda.current_stream()
    handle = copier.load(slots_of(list(range(256))), slots_of(list(range(256))))
    handle.wait()
    assert handle.done()
    assert torch.equal(copier.device_buffer.cpu(), pool.kv_buffer)


# ---------------------------------------------------------------- the CUDA path, its runtime stood in
class StandInEvent:
    """Stands in for torch.cuda.Event: the stand-in stream runs its work at once, so the event has completed."""

    def record(self, stream: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class StandInStream:
    def wait_stream(self, other: Any) -> None:
        pass


def cuda_path_copier(monkeypatch: Any, layout: str, copier_class: type = PageCopier) -> PageCopier:
    """A copier over a CPU buffer that takes the CUDA path, with torch's CUDA runtime stood in (no GPU needed)."""
    monkeypatch.setattr(torch.cuda, "Event", StandInEvent)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda tensor: tensor.clone())
    copier = copier_class(host_pool(layout), torch.zeros(*cuda_buffer_shape(layout), dtype=torch.float16))
    copier.uses_cuda, copier.stream = True, StandInStream()
    monkeypatch.setattr(copier, "_staging", lambda pages: unpinned_staging(copier, pages))
    return copier


def cuda_buffer_shape(layout: str) -> list[int]:
    shape = list(host_pool(layout, pages=1).kv_buffer.shape)
    shape[2 if layout == "layer_first" else 1] = 48 * PAGE_SIZE
    return shape


def unpinned_staging(copier: PageCopier, pages: int) -> torch.Tensor:
    shape = list(copier.host_pool.kv_buffer.shape)
    shape[copier.slot_dim] = pages * copier.page_size
    return torch.empty(shape, dtype=copier.host_pool.dtype)


def check_cuda_path_round_trip(copier: PageCopier, placement: str) -> None:
    """Host pages load into their device pages, and store back into other host pages, scattered in ``wait``."""
    pool = copier.host_pool
    original = pool.kv_buffer.clone()
    host_pages, device_pages = PLACEMENTS[placement]
    copier.load(slots_of(host_pages), slots_of(device_pages)).wait()
    for host, target in zip(host_pages, device_pages):
        assert torch.equal(device_page(copier, target), host_page(pool, host)), f"device page {target} after load"
    free_pages = [page for page in range(pool.page_count) if page not in host_pages][: len(host_pages)]
    handle = copier.store(slots_of(device_pages), slots_of(free_pages))
    assert not handle.done()  # the host scatter runs in wait()
    handle.wait()
    for host, back in zip(host_pages, free_pages):
        expected = original.narrow(copier.slot_dim, host * PAGE_SIZE, PAGE_SIZE)
        assert torch.equal(host_page(pool, back), expected), f"host page {back} after store"


class StoreLoadsInstead(PageCopier):
    """Planted: the CUDA store runs the host-to-device steps."""

    def _move_cuda(self, host_slots: Any, device_slots: Any, *, to_device: bool) -> Any:
        return super()._move_cuda(host_slots, device_slots, to_device=True)


@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
@pytest.mark.parametrize("placement", list(PLACEMENTS))
def test_the_cuda_path_round_trips_with_its_runtime_stood_in(monkeypatch, layout, placement):
    check_cuda_path_round_trip(cuda_path_copier(monkeypatch, layout), placement)


def test_the_cuda_path_check_catches_a_store_that_loads(monkeypatch):
    with pytest.raises(AssertionError):
        check_cuda_path_round_trip(cuda_path_copier(monkeypatch, "layer_first", StoreLoadsInstead), "scattered")
