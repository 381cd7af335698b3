"""Host pools the suite controls, and the page data it writes and compares.

``ConformancePool`` is a ``HostPagePool`` whose page helpers (the calls a
backend makes to read or write host pages) can be told to

- fail: every helper raises ``OSError`` — how the suite provokes a storage
  error inside a backend (BE-5) without knowing how the backend stores pages;
- hold: a helper that reads a chosen page stops until the suite lets it go —
  how the suite looks at the store while a write is half done (BE-7).

The suite itself reads and writes pages through ``peek``/``poke``, which
bypass both, so that its own view never depends on the backend's.

Pages hold random finite values and are compared bit for bit.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional, Sequence

import torch

from hicache_contracts.host_pool import HostPagePool

__all__ = [
    "ConformancePool",
    "Hold",
    "PoolHooks",
    "MAMBA_STATE_ELEMENTS",
    "describe_page_difference",
    "mamba_state_pool",
    "pages_equal",
    "slots_of_pages",
]

INJECTED_FAULT_MESSAGE = "hicache-conform: injected storage fault"
"""The message of the OSError a failing pool raises."""

SENTINEL_VALUE = -1234.0
"""The value the suite fills host pages with before a read, to see what the backend wrote."""


def slots_of_pages(pages: Sequence[int], page_size: int) -> torch.Tensor:
    """Return the host indices of ``pages`` (page numbers), page by page: what ``host_indices`` holds."""
    if not pages:
        return torch.empty(0, dtype=torch.int64)
    starts = torch.tensor(list(pages), dtype=torch.int64) * page_size
    return (starts[:, None] + torch.arange(page_size, dtype=torch.int64)[None, :]).reshape(-1)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


def pages_equal(left: Optional[torch.Tensor], right: Optional[torch.Tensor]) -> bool:
    """Return whether two flat pages hold the same bytes (a None or a size mismatch is unequal)."""
    if left is None or right is None:
        return False
    try:
        a, b = _bits(left), _bits(right)
    except (RuntimeError, TypeError):
        return False
    return a.numel() == b.numel() and bool(torch.equal(a, b))


def describe_page_difference(expected: torch.Tensor, got: Optional[torch.Tensor]) -> str:
    """Return a short description of how ``got`` differs from ``expected``."""
    if got is None:
        return "nothing"
    try:
        a, b = _bits(expected), _bits(got)
    except (RuntimeError, TypeError) as error:
        return f"an unreadable value ({type(error).__name__})"
    if a.numel() != b.numel():
        return f"{b.numel()} bytes instead of {a.numel()}"
    differing = (a != b).nonzero()
    if not differing.numel():
        return "the same bytes"
    first = int(differing[0, 0])
    return f"{differing.numel()} of {a.numel()} bytes differ (first at byte {first})"


class Hold:
    """A page read the suite holds: ``reached`` is set when a backend starts reading the page."""

    def __init__(self, page_starts: frozenset[int], timeout_s: float) -> None:
        self.page_starts = page_starts
        """The first slots of the held pages."""
        self.timeout_s = timeout_s
        """The longest a backend thread is held, whatever happens."""
        self.reached = threading.Event()
        """Set when a backend thread reaches a held page."""
        self.released = threading.Event()
        """Set by the suite to let the backend go on."""
        self.reached_by: Optional[str] = None
        """Which helper reached the page."""

    def wait_here(self, helper: str) -> None:
        if self.reached_by is None:
            self.reached_by = helper
        self.reached.set()
        self.released.wait(self.timeout_s)


class PoolHooks:
    """Page helpers that can fail or hold on demand, and ``peek``/``poke`` that bypass both.

    Mixed in first, before a host pool class with SGLang's page helpers: the project's
    ``HostPagePool`` (``ConformancePool``) or a release's own host pool
    (``hicache_contracts.conformance.session.release_pools``).
    """

    page_size: int
    dtype: torch.dtype
    page_element_count: int

    def _init_hooks(self) -> None:
        self._failing = False
        self._hold: Optional[Hold] = None
        self.helper_calls = 0
        """How many times a backend called one of the page helpers."""

    # ------------------------------------------------------------ the suite's own access
    def peek(self, page: int) -> torch.Tensor:
        """Return a flat copy of page number ``page`` (not a slot), bypassing the hooks."""
        got: torch.Tensor = super().get_data_page(page * self.page_size, flat=True)  # type: ignore[misc]
        return got.reshape(-1).clone()

    def poke(self, page: int, data: torch.Tensor) -> None:
        """Write the flat page ``data`` into page number ``page``, bypassing the hooks."""
        super().set_from_flat_data_page(page * self.page_size, data)  # type: ignore[misc]

    def fill(self, pages: Sequence[int], value: float = SENTINEL_VALUE) -> None:
        """Fill ``pages`` (page numbers) with ``value``, bypassing the hooks."""
        page = torch.full((self.page_element_count,), value, dtype=self.dtype)
        for number in pages:
            self.poke(number, page)

    def random_page(self, generator: torch.Generator) -> torch.Tensor:
        """Return a flat page of random finite values drawn from ``generator``."""
        values = torch.randn(self.page_element_count, generator=generator, dtype=torch.float32)
        return values.to(self.dtype)

    def slots(self, pages: Sequence[int]) -> torch.Tensor:
        """Return the host indices of ``pages`` (page numbers)."""
        return slots_of_pages(pages, self.page_size)

    # ------------------------------------------------------------ hooks
    @contextlib.contextmanager
    def failing(self) -> Iterator[None]:
        """Make every page helper raise OSError inside the block."""
        self._failing = True
        try:
            yield
        finally:
            self._failing = False

    @contextlib.contextmanager
    def holding(self, pages: Sequence[int], timeout_s: float) -> Iterator[Hold]:
        """Hold any backend read of ``pages`` (page numbers) until the block ends or ``release`` is set."""
        hold = Hold(frozenset(page * self.page_size for page in pages), timeout_s)
        self._hold = hold
        try:
            yield hold
        finally:
            hold.released.set()
            self._hold = None

    def _before_helper(self, helper: str, starts: Sequence[int]) -> None:
        self.helper_calls += 1
        if self._failing:
            raise OSError(INJECTED_FAULT_MESSAGE)
        hold = self._hold
        if hold is not None and any(start in hold.page_starts for start in starts):
            hold.wait_here(helper)

    @staticmethod
    def _as_start(index: Any) -> int:
        try:
            return int(index)
        except (TypeError, ValueError, RuntimeError):
            return -1

    def get_data_page(self, index: Any, flat: bool = True) -> torch.Tensor:
        self._before_helper("get_data_page", [self._as_start(index)])
        got: torch.Tensor = super().get_data_page(index, flat)  # type: ignore[misc]
        return got

    def set_from_flat_data_page(self, index: Any, data: torch.Tensor) -> None:
        self._before_helper("set_from_flat_data_page", [])
        super().set_from_flat_data_page(index, data)  # type: ignore[misc]

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        self._before_helper("get_dummy_flat_data_page", [])
        got: torch.Tensor = super().get_dummy_flat_data_page()  # type: ignore[misc]
        return got

    def get_page_buffer_meta(self, indices: Any) -> tuple[list[int], list[int]]:
        try:
            flat = torch.as_tensor(indices).reshape(-1).tolist()
            starts = flat[:: self.page_size]
        except (TypeError, ValueError, RuntimeError):
            starts = []
        self._before_helper("get_page_buffer_meta", starts)
        got: tuple[list[int], list[int]] = super().get_page_buffer_meta(indices)  # type: ignore[misc]
        return got


class ConformancePool(PoolHooks, HostPagePool):
    """The project's host page pool, with the suite's hooks (``PoolHooks``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        HostPagePool.__init__(self, *args, **kwargs)
        self._init_hooks()


MAMBA_STATE_ELEMENTS = 24
"""Elements of one Mamba layer's state in a state slot (its recurrent and convolution state, flattened): small,
the bytes matter, not their number."""


def mamba_state_pool(slots: int, *, layer_num: int, layout: str) -> ConformancePool:
    """Return a host pool shaped as SGLang's Mamba host pool (``MambaPoolHost``, 0.5.23
    ``mem_cache/pool_host/mamba.py``): one state slot per page, ``page_size`` 1 whatever the KV page size, each
    slot holding one request's state at a chunk boundary for every Mamba layer, in float32; ``layer_first`` or
    ``page_first`` (``page_first_direct`` addresses its slots as ``page_first`` does).

    SGLang stores one state per node, under the node's last page key (a TRAILING_PAGES pool of window 1), and the
    state is sharded by TP rank even where KV is replicated: every rank writes its own (CTL-8).
    """
    return ConformancePool(
        page_count=slots,
        page_size=1,
        layer_num=layer_num,
        head_num=1,
        head_dim=MAMBA_STATE_ELEMENTS,
        dtype=torch.float32,
        kind="mla",  # one component: the state itself
        layout="layer_first" if layout == "layer_first" else "page_first",
        pin_memory=False,
    )
