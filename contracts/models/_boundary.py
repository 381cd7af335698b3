"""Standalone checks for boundaries where no model is built: page keys and host indices."""

from __future__ import annotations

import functools
from typing import Any, Optional

import numpy
import torch

from hicache_spec import is_page_key
from hicache_spec.values import is_count
from hicache_contracts.errors import ContractViolation
from hicache_contracts.models._fields import _index_tensor_problem
from hicache_contracts.prefix_keys import PrefixKeys, find_key_problem


# ==================================================================== boundary checks
_HEX_DIGITS = b"0123456789abcdef"
"""The characters of a strict page key (KEY-2)."""


def validate_page_keys(keys: Any, *, strict: bool = False, field: str = "keys") -> Any:
    """Check that ``keys`` is a list, tuple or key sequence of page keys, and return it unchanged. Clause: KEY-2.

    Every key must be a non-empty str; with ``strict``, exactly 64 lowercase hex
    characters (``hicache_spec.is_page_key``). Raises ContractViolation naming
    ``field`` and the index of the first bad key.
    """
    if isinstance(keys, PrefixKeys):
        flat = keys.as_tuple()  # checked when built
    elif isinstance(keys, (list, tuple)):
        flat = tuple(keys)
        bad = find_key_problem(flat)
        if bad is not None:
            raise ContractViolation(f"{field}[{bad}]", "page key must be a non-empty str", flat[bad], "KEY-2")
    else:
        raise ContractViolation(field, "must be a list, tuple or key sequence of str", keys, "KEY-2")
    if strict and flat:
        # Fast path: every key 64 long and only lowercase hex digits overall means every key is a page key.
        joined = "".join(flat)
        if set(map(len, flat)) != {64} or not joined.isascii() or joined.encode("ascii").translate(None, _HEX_DIGITS):
            for index, key in enumerate(flat):
                if not is_page_key(key):
                    raise ContractViolation(
                        f"{field}[{index}]", "page key must be 64 lowercase hex characters", key, "KEY-2"
                    )
    return keys


@functools.lru_cache(maxsize=64)
def _page_offsets_cached(page_size: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.arange(page_size, dtype=dtype, device=device)


def _page_offsets(page_size: int, like: torch.Tensor) -> torch.Tensor:
    """Return ``[0, 1, ..., page_size - 1]`` with the dtype and device of ``like`` (cached)."""
    return _page_offsets_cached(page_size, like.dtype, like.device)


_NUMPY_DTYPES = frozenset({torch.int64, torch.int32})
"""Index dtypes whose CPU tensors are checked through NumPy (a NumPy call costs a fraction of a torch one)."""
_WIDE_DTYPES = frozenset(dtype for dtype in (torch.int64, getattr(torch, "uint64", None)) if dtype is not None)
"""Index dtypes whose slot arithmetic in torch cannot wrap around for any slot they hold; others are widened."""
_LISTED_PAGES = 16
"""Up to this many pages (and ``_LISTED_SLOTS`` slots) are checked as a Python list: cheaper than NumPy there."""
_LISTED_SLOTS = 256


@functools.lru_cache(maxsize=32)
def _page_grid(page_size: int, itemsize: int) -> numpy.ndarray:
    """Return ``0 .. page_size - 1`` as a signed integer array of ``itemsize`` bytes (read-only, cached)."""
    grid = numpy.arange(page_size, dtype=numpy.dtype(f"i{itemsize}"))
    grid.flags.writeable = False
    return grid


_BYTES_COMPARED = 4096
"""Up to this many slots are compared as bytes (two small copies and one memcmp: the fewest NumPy calls); more are
compared element by element (copies that large cost page faults)."""


def _same_slots(expected: numpy.ndarray, array: numpy.ndarray) -> bool:
    """Whether ``array`` holds exactly the slots of ``expected`` (the same dtype and count, any shape), in order."""
    if array.size <= _BYTES_COMPARED:
        return expected.tobytes() == array.tobytes()
    return bool(numpy.equal(expected.reshape(-1), array).all())


def _numpy_first_slots(array: numpy.ndarray, page_size: int) -> Optional[list[int]]:
    """Return each page's first slot if every page is consecutive from a non-negative multiple of page_size.

    ``array``: 1-D int64 or int32, a whole number (>= 1) of pages. None when
    some page breaks the rule. The slots are compared (``_same_slots``) with
    what the rule makes of their first slots: one run from the first (the
    common case), else each page's first slot plus ``0 .. page_size - 1``,
    computed in the array's own dtype only once every value is known to fit
    it (nothing wraps around).
    """
    firsts = array[::page_size]
    starts: list[int] = firsts.tolist()
    count, first = array.size, starts[0]
    end = 1 << (8 * array.itemsize - 1)  # one past the dtype's largest value
    if 0 <= first <= end - count and not first % page_size and starts[-1] == first + count - page_size:
        if _same_slots(numpy.arange(first, first + count, dtype=array.dtype), array):
            return starts
    if min(starts) < 0 or max(starts) > end - page_size:
        return None
    if page_size > 1 and (
        (firsts % page_size).any() or not _same_slots(firsts[:, None] + _page_grid(page_size, array.itemsize), array)
    ):
        return None
    return starts


def _quick_first_slots(host_indices: Any, key_count: Any, page_size: Any) -> Optional[list[int]]:
    """The first slots of a well-formed int64 or int32 CPU tensor of more than a few pages, read through NumPy in
    one pass; None for anything else (which then goes through every rule in turn)."""
    if (
        type(host_indices) is torch.Tensor
        and type(page_size) is int
        and type(key_count) is int
        and page_size > 0
        and (key_count > _LISTED_PAGES or key_count * page_size > _LISTED_SLOTS)
        and host_indices.dtype in _NUMPY_DTYPES
        and host_indices.is_cpu
    ):
        try:
            array = host_indices.numpy()  # a view of the same memory: nothing is copied
        except (TypeError, RuntimeError):
            return None
        if array.shape == (key_count * page_size,):  # 1-D, and exactly the slots of key_count pages
            return _numpy_first_slots(array, page_size)
    return None


def _pages_well_formed(host_indices: torch.Tensor, key_count: int, page_size: int) -> bool:
    """Whether every page's slots are consecutive from a non-negative multiple of page_size (key_count >= 1).

    A CPU tensor of a few pages is read as a Python list; a longer int64 or
    int32 one through NumPy, without a copy (``_numpy_first_slots``). Any
    other tensor goes through torch, widened to int64.
    """
    on_cpu = host_indices.device.type == "cpu"
    if on_cpu and key_count <= _LISTED_PAGES and key_count * page_size <= _LISTED_SLOTS:
        slots = host_indices.tolist()
        for start in range(0, len(slots), page_size):
            first = slots[start]
            if first < 0 or first % page_size or slots[start : start + page_size] != [*range(first, first + page_size)]:
                return False
        return True
    if on_cpu and host_indices.dtype in _NUMPY_DTYPES:
        return _numpy_first_slots(host_indices.numpy(), page_size) is not None
    pages = host_indices.view(key_count, page_size)
    if pages.dtype not in _WIDE_DTYPES:
        pages = pages.long()
    first_slots = pages[:, 0]
    return (
        torch.equal(pages - first_slots.unsqueeze(1), _page_offsets(page_size, pages).expand(key_count, page_size))
        and int(first_slots.min()) >= 0
        and not bool((first_slots % page_size).any())
    )


def host_page_starts(host_indices: Any, key_count: int, page_size: int, *, field: str = "host_indices") -> list[int]:
    """Check the host slots of ``key_count`` pages as ``validate_host_indices`` does; return each page's first slot.

    The same rules and errors (BE-15, BE-16); a well-formed int64 or int32 CPU
    tensor of more than a few pages is checked and read in one NumPy pass.
    """
    starts = _quick_first_slots(host_indices, key_count, page_size)
    if starts is not None:
        return starts
    _validate_by_rule(host_indices, key_count, page_size, field)
    if key_count == 0:
        return []
    try:  # a CPU tensor through NumPy, a view of the same memory: cheaper than torch's own slicing
        firsts: list[int] = host_indices.numpy()[::page_size].tolist()
    except (TypeError, RuntimeError):  # on a device, or not one NumPy can view
        firsts = host_indices[::page_size].tolist()
    return firsts


def validate_host_indices(
    host_indices: Any, key_count: int, page_size: int, *, field: str = "host_indices"
) -> torch.Tensor:
    """Check the host slots of ``key_count`` pages and return the tensor itself (never a copy). Clauses: BE-15, BE-16.

    Rules, in order: a tensor on the CPU or a CUDA device (a meta tensor has
    no slots to read); a 1-D integer tensor; exactly ``key_count * page_size``
    slots; each page's first slot a non-negative multiple of ``page_size``;
    each page's slots consecutive. Raises ContractViolation naming ``field``
    (with the page index where one applies) and the rule.
    """
    if _quick_first_slots(host_indices, key_count, page_size) is not None:
        return host_indices  # type: ignore[no-any-return]  # a well-formed int64 or int32 CPU tensor
    return _validate_by_rule(host_indices, key_count, page_size, field)


def _validate_by_rule(host_indices: Any, key_count: int, page_size: int, field: str) -> torch.Tensor:
    """``validate_host_indices`` without its NumPy pass: each rule in turn, for what that pass did not accept."""
    if not is_count(page_size, 1):
        raise ContractViolation("page_size", "must be an int >= 1", page_size, "BE-15")
    if not is_count(key_count):
        raise ContractViolation("key_count", "must be an int >= 0", key_count, "BE-15")
    if isinstance(host_indices, torch.Tensor) and host_indices.device.type not in ("cpu", "cuda"):
        raise ContractViolation(
            field,
            "must be a tensor on the CPU (or a CUDA device), whose slots can be read",
            f"tensor on {host_indices.device}",
            "BE-15",
        )  # a meta tensor holds no slots
    problem = _index_tensor_problem(host_indices)
    if problem is not None:
        raise ContractViolation(field, problem, host_indices, "BE-15")
    tensor: torch.Tensor = host_indices  # no problem: a 1-D integer tensor
    expected = key_count * page_size
    if host_indices.numel() != expected:
        raise ContractViolation(
            field,
            f"must hold key_count * page_size = {key_count} * {page_size} = {expected} slots",
            host_indices,
            "BE-15",
        )
    if key_count == 0:
        return tensor
    if _pages_well_formed(host_indices, key_count, page_size):
        return tensor
    pages = host_indices.view(key_count, page_size)  # a view of the caller's tensor: nothing is copied
    if pages.dtype not in _WIDE_DTYPES:
        pages = pages.long()  # slot arithmetic must not wrap around (int32: 2**31 - 1 + 1 is not -2**31)
    first_slots = pages[:, 0]
    # Slow path: find the first broken page, to name it.
    misaligned = (first_slots % page_size != 0) | (first_slots < 0)
    if page_size == 1:
        broken = misaligned
    else:
        steps = pages[:, 1:] - pages[:, :-1]
        broken = misaligned | (steps != 1).any(dim=1)
    if bool(broken.any()):
        page = int(broken.nonzero()[0, 0])
        if bool(misaligned[page]):
            raise ContractViolation(
                f"{field}[{page * page_size}]",
                f"page {page}'s first slot must be a non-negative multiple of page_size = {page_size}",
                int(first_slots[page]),
                "BE-15",
            )
        raise ContractViolation(
            f"{field}[{page * page_size}:{(page + 1) * page_size}]",
            f"page {page}'s slots must be consecutive",
            pages[page].tolist(),
            "BE-15",
        )
    return tensor
