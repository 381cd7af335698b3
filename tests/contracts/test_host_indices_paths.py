"""validate_host_indices: its three fast paths (a Python list, NumPy, torch) accept and reject the same tensors.

A few pages are read as a list, more of an int64 or int32 CPU tensor through
NumPy, anything else through torch. Each path is compared with a plain
Python statement of the rule (BE-15) on valid tensors and on tensors broken
in every way the rule names, at the first, a middle and the last page; a
planted fast path that skips the alignment check is caught by the same
comparison. ``host_page_starts`` (the check that also hands back each page's
first slot) gives the same answers and errors; planted NumPy passes that skip
the first slots' check, or compute pages that wrap around in int32, are caught.
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
    "numpy, many slots": (80, 64, torch.int64),  # more than _BYTES_COMPARED: compared element by element
    "numpy int32, many slots": (70, 64, torch.int32),
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
    yield "valid, one run from a later page", list(range(page_size, (key_count + 1) * page_size))
    if page_size > 1:
        yield "one run, misaligned", list(range(1, key_count * page_size + 1))
    yield "one run, negative", list(range(-page_size, (key_count - 1) * page_size))
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
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: taken.append("list") or real_tolist(self))  # type: ignore[func-returns-value]
    monkeypatch.setattr(torch.Tensor, "numpy", lambda self, **kw: taken.append("numpy") or real_numpy(self, **kw))  # type: ignore[func-returns-value]
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


def starts_or_error(check: Callable[..., Any], *arguments: Any) -> Any:
    """Return what ``check`` returns, or the text and clause of the ContractViolation it raises."""
    try:
        return check(*arguments)
    except ContractViolation as error:
        return ("raised", str(error), error.clause_id)


@pytest.mark.clause("BE-15")
def test_host_page_starts_agrees_with_the_rule_and_names_the_same_errors() -> None:
    for path, (key_count, page_size, dtype) in SHAPES.items():
        for label, slots in cases(key_count, page_size):
            tensor = torch.tensor(slots, dtype=dtype)
            got = starts_or_error(_boundary.host_page_starts, tensor, key_count, page_size)
            if rule_holds(slots, page_size):
                assert got == slots[::page_size], (path, label)
            else:
                assert got == starts_or_error(validate_host_indices, tensor, key_count, page_size), (path, label)
    whole = torch.arange(64 * 16)
    for arguments in (
        (whole.tolist(), 64, 16),  # not a tensor
        (whole.view(64, 16), 64, 16),  # 2-D
        (whole.double(), 64, 16),  # not integers
        (whole[:-1], 64, 16),  # one slot short
        (whole, 64, 0),  # no page size
        (whole, True, 16),  # a bool for a count
        (whole, -64, -16),  # negative counts whose product is right
        (torch.empty(64 * 16, dtype=torch.int64, device="meta"), 64, 16),  # no slots to read
    ):
        expected = starts_or_error(validate_host_indices, *arguments)
        assert expected[0] == "raised" and starts_or_error(_boundary.host_page_starts, *arguments) == expected
    assert _boundary.host_page_starts(torch.arange(0), 0, 16) == []
    window = torch.arange(80 * 16)[16 * 16 :]  # a view with an offset, pages reversed below
    assert _boundary.host_page_starts(window, 64, 16) == list(range(256, 80 * 16, 16))
    reversed_pages = torch.arange(64 * 16).view(64, 16).flip(0).reshape(-1)
    assert _boundary.host_page_starts(reversed_pages, 64, 16) == list(range(63 * 16, -1, -16))


def lax_numpy_first_slots(array: Any, page_size: int) -> Any:
    """Planted: the pages are compared with their first slots, the first slots themselves are not checked."""
    firsts = array[::page_size]
    grid = _boundary._page_grid(page_size, array.itemsize)
    return firsts.tolist() if (firsts[:, None] + grid).tobytes() == array.tobytes() else None


REAL_NUMPY_FIRST_SLOTS = _boundary._numpy_first_slots


def run_without_alignment(array: Any, page_size: int) -> Any:
    """Planted: a run of slots is accepted from any non-negative first slot, aligned or not."""
    starts = array[::page_size].tolist()
    if starts[0] >= 0 and array.tolist() == list(range(starts[0], starts[0] + array.size)):
        return starts
    return REAL_NUMPY_FIRST_SLOTS(array, page_size)


def unbounded_numpy_first_slots(array: Any, page_size: int) -> Any:
    """Planted: every check made, but the pages computed in the array's dtype without room checked first."""
    firsts = array[::page_size]
    starts = firsts.tolist()
    grid = _boundary._page_grid(page_size, array.itemsize)
    if min(starts) < 0 or any(start % page_size for start in starts):
        return None
    return starts if (firsts[:, None] + grid).tobytes() == array.tobytes() else None


@pytest.mark.clause("BE-15")
def test_planted_numpy_passes_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(_boundary, "_numpy_first_slots", lax_numpy_first_slots)
        found = disagreements(validate_host_indices)
        assert any(line.startswith("numpy int64, page 0: misaligned: accepted") for line in found)
        assert any(line.startswith("numpy int32, page 10: negative first slot: accepted") for line in found)
    with monkeypatch.context() as patched:
        patched.setattr(_boundary, "_numpy_first_slots", run_without_alignment)
        found = disagreements(validate_host_indices)
        assert [line for line in found if "one run, misaligned: accepted" in line] == [
            f"{path}, one run, misaligned: accepted"
            for path, (_, page_size, _) in SHAPES.items()
            if path.startswith("numpy") and page_size > 1
        ]
    with monkeypatch.context() as patched:  # planted: a long array compared only as far as the bytes limit
        patched.setattr(
            _boundary,
            "_same_slots",
            lambda expected, array: expected.reshape(-1)[:4096].tobytes() == array[:4096].tobytes(),
        )
        found = disagreements(validate_host_indices)
        assert "numpy, many slots, page 79: one slot too high: accepted" in found
        assert "numpy int32, many slots, page 69: middle slot off: accepted" in found
    with monkeypatch.context() as patched:
        patched.setattr(_boundary, "_numpy_first_slots", unbounded_numpy_first_slots)
        assert disagreements(validate_host_indices) == []  # right wherever nothing wraps around
        with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):  # the wrapped page is accepted
            test_int32_slots_do_not_wrap_around()
