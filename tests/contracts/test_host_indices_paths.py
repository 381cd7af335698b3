"""validate_host_indices: its three fast paths (a Python list, NumPy, torch) accept and reject the same tensors.

A few pages are read as a list, more of an int64 or int32 CPU tensor through
NumPy, anything else through torch. Each path is compared with a plain
Python statement of the rule (BE-15) on valid tensors and on tensors broken
in every way the rule names, at the first, a middle and the last page; a
planted fast path that skips the alignment check is caught by the same
comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from hicache_contracts import ContractViolation, validate_host_indices
from hicache_contracts.models import _boundary

SHAPES = {
    "list": (2, 4, torch.int64),
    "list, one slot a page": (8, 1, torch.int64),
    "numpy int64": (32, 16, torch.int64),
    "numpy int32": (20, 64, torch.int32),
    "numpy, one slot a page": (128, 1, torch.int64),
    "torch int16": (32, 16, torch.int16),
}
"""Path → (key_count, page_size, dtype): shapes that take each path."""


def rule_holds(slots: list[int], page_size: int) -> bool:
    """BE-15, stated plainly: every page's slots are consecutive, from a non-negative multiple of page_size."""
    for start in range(0, len(slots), page_size):
        first = slots[start]
        if first < 0 or first % page_size or slots[start : start + page_size] != list(range(first, first + page_size)):
            return False
    return True


def cases(key_count: int, page_size: int) -> Iterator[tuple[str, list[int]]]:
    """Yield (label, slots): valid layouts and every way of breaking one page."""
    pages = [(key_count - 1 - page) * page_size for page in range(key_count)]  # reversed pages: valid
    yield "valid, in order", list(range(key_count * page_size))
    yield "valid, pages reversed", [first + slot for first in pages for slot in range(page_size)]
    for page in sorted({0, key_count // 2, key_count - 1}):
        base = list(range(key_count * page_size))
        start = page * page_size
        for label, change in (
            ("negative first slot", lambda slots: [s - (page + 1) * page_size for s in slots]),
            ("misaligned", lambda slots: [s + 1 for s in slots]),
            ("one slot too high", lambda slots: slots[:-1] + [slots[-1] + 1]),
            ("first two swapped", lambda slots: [slots[1], slots[0], *slots[2:]] if page_size > 1 else slots),
            ("middle slot off", lambda slots: [*slots[: page_size // 2], -1, *slots[page_size // 2 + 1 :]]),
        ):
            broken = base[:start] + change(base[start : start + page_size]) + base[start + page_size :]
            if broken != base:
                yield f"page {page}: {label}", broken


def disagreements(check: Callable[..., Any]) -> list[str]:
    """Return every case where ``check`` and the plain rule disagree, or where a rejection is not BE-15's."""
    found = []
    for path, (key_count, page_size, dtype) in SHAPES.items():
        for label, slots in cases(key_count, page_size):
            tensor = torch.tensor(slots, dtype=dtype)
            try:
                returned = check(tensor, key_count, page_size)
            except ContractViolation as error:
                accepted = False
                if error.clause_id != "BE-15" or not error.field.startswith("host_indices["):
                    found.append(f"{path}, {label}: {error}")
            else:
                accepted = True
                if returned is not tensor:
                    found.append(f"{path}, {label}: returned another object")
            if accepted != rule_holds(slots, page_size):
                found.append(f"{path}, {label}: {'accepted' if accepted else 'rejected'}")
    return found


@pytest.mark.clause("BE-15")
def test_the_shapes_take_the_paths_they_name(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []
    real_tolist, real_numpy = torch.Tensor.tolist, torch.Tensor.numpy
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: taken.append("list") or real_tolist(self))
    monkeypatch.setattr(torch.Tensor, "numpy", lambda self, **kw: taken.append("numpy") or real_numpy(self, **kw))
    for path, (key_count, page_size, dtype) in SHAPES.items():
        taken.clear()
        validate_host_indices(torch.arange(key_count * page_size, dtype=dtype), key_count, page_size)
        assert taken == ([] if path.startswith("torch") else [path.split()[0].rstrip(",")]), path


@pytest.mark.clause("BE-15")
def test_every_path_agrees_with_the_rule() -> None:
    assert disagreements(validate_host_indices) == []


@pytest.mark.clause("BE-15")
def test_every_path_names_the_same_page() -> None:
    for path, (key_count, page_size, dtype) in SHAPES.items():
        for label, slots in cases(key_count, page_size):
            if rule_holds(slots, page_size):
                continue
            with pytest.raises(ContractViolation) as fast:
                validate_host_indices(torch.tensor(slots, dtype=dtype), key_count, page_size)
            first_broken = next(
                page
                for page in range(key_count)
                if not rule_holds(slots[page * page_size : (page + 1) * page_size], page_size)
            )
            assert f"page {first_broken}'s" in str(fast.value), (path, label, str(fast.value))


@pytest.mark.clause("BE-15")
def test_int32_slots_do_not_wrap_around() -> None:
    # 2**31 - 2 is a multiple of 3; one past 2**31 - 1 is -2**31 in int32 arithmetic, not the next slot.
    for key_count in (1, 20):  # the list path, then NumPy
        slots = list(range((key_count - 1) * 3)) + [2**31 - 2, 2**31 - 1, -(2**31)]
        with pytest.raises(ContractViolation, match=f"page {key_count - 1}'s slots must be consecutive"):
            validate_host_indices(torch.tensor(slots, dtype=torch.int32), key_count, 3)


def lax_fast_path(host_indices: torch.Tensor, key_count: int, page_size: int) -> bool:
    """Planted: consecutive slots are checked, a page's first slot is not (alignment and sign skipped)."""
    slots = host_indices.tolist()
    return all(
        slots[start : start + page_size] == list(range(slots[start], slots[start] + page_size))
        for start in range(0, len(slots), page_size)
    )


@pytest.mark.clause("BE-15")
def test_planted_lax_fast_path_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_boundary, "_pages_well_formed", lax_fast_path)
    found = disagreements(validate_host_indices)
    assert any("misaligned: accepted" in line for line in found)
    assert any("negative first slot: accepted" in line for line in found)
