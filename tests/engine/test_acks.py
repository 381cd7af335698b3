"""check_acks: the ack schedule of a prefetch against hicache_spec.compute_prefetch_acks.

Scenario: the acks a conforming controller emits for given slices and loaded
pages, then the same acks with one planted change. Expected: the conforming
schedule passes for every input; each change is named by its clause.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_contracts import ContractViolation, FinalAck, PoolHitsAck, ProgressAck
from hicache_contracts.engine import check_acks
from hicache_spec import compute_prefetch_acks

PAGE_SIZE = 16


def schedule(slice_pages, loaded_pages, *, pool_hits=None, operation_id="op"):
    """The acks a conforming controller emits: one progress ack per slice, pool hits if any, the final ack."""
    tokens = compute_prefetch_acks(tuple(slice_pages), tuple(loaded_pages), PAGE_SIZE)
    acks = [
        ProgressAck(operation_id=operation_id, slice_index=index, tokens=value) for index, value in enumerate(tokens)
    ]
    if pool_hits is not None:
        acks.append(PoolHitsAck(operation_id=operation_id, pool_hits=pool_hits))
    acks.append(FinalAck(operation_id=operation_id, tokens=tokens[-1] if tokens else 0))
    return acks


@st.composite
def slices_and_loads(draw):
    slice_pages = draw(st.lists(st.integers(1, 128), min_size=0, max_size=4))
    read = draw(st.integers(0, len(slice_pages)))
    loaded = [draw(st.integers(0, asked)) for asked in slice_pages[:read]]
    return slice_pages, loaded


@pytest.mark.clause("CTL-5", "CTL-6", "RANK-3")
@given(slices_and_loads())
def test_the_conforming_schedule_passes(case):
    slice_pages, loaded = case
    report = check_acks(
        schedule(slice_pages, loaded), slice_pages=slice_pages, loaded_pages=loaded, page_size=PAGE_SIZE
    )
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-5", "RANK-3")
@given(slices_and_loads(), st.data())
def test_a_missing_or_extra_progress_ack_is_caught(case, data):
    slice_pages, loaded = case
    acks = schedule(slice_pages, loaded)
    progress = [ack for ack in acks if isinstance(ack, ProgressAck)]
    if progress and data.draw(st.booleans()):
        acks.remove(data.draw(st.sampled_from(progress)))
    else:
        acks.insert(0, ProgressAck(operation_id="op", slice_index=0, tokens=0))
    report = check_acks(acks, slice_pages=slice_pages, loaded_pages=loaded, page_size=PAGE_SIZE)
    assert {"CTL-5", "RANK-3"} <= set(report.violated)


SLICES = [128, 128, 44]
SHORT = [128, 100]  # slice 1 short: acks freeze at 228 pages
PLANTED = {
    "the ack after a short slice is not frozen": (
        "CTL-5",
        SHORT,
        lambda acks: acks[:2] + [ProgressAck(operation_id="op", slice_index=2, tokens=272 * 16)] + acks[3:],
    ),
    "acks decrease": ("CTL-5", SLICES, lambda acks: [acks[0], acks[1].model_copy(update={"tokens": 100}), *acks[2:]]),
    "a slice index out of order": (
        "CTL-5",
        SLICES,
        lambda acks: [
            acks[1].model_copy(update={"slice_index": 0}),
            acks[0].model_copy(update={"slice_index": 1}),
            *acks[2:],
        ],
    ),
    "no final ack": ("CTL-6", SHORT, lambda acks: acks[:-1]),
    "a final ack that is not last": ("CTL-6", SLICES, lambda acks: [acks[-1], *acks[:-1]]),
    "two final acks": ("CTL-6", SLICES, lambda acks: acks + [acks[-1]]),
    "a final ack with other tokens": (
        "CTL-6",
        SHORT,
        lambda acks: acks[:-1] + [FinalAck(operation_id="op", tokens=300 * 16)],
    ),
    "an ack of another operation": (
        "CTL-5",
        SLICES,
        lambda acks: [acks[0].model_copy(update={"operation_id": "other"}), *acks[1:]],
    ),
    "two pool-hits acks": (
        "HYB-2",
        SLICES,
        lambda acks: acks[:-1] + [PoolHitsAck(operation_id="op", pool_hits={"swa": 1})] * 2 + acks[-1:],  # type: ignore[arg-type]
    ),
    "pool hits although KV did not complete": (
        "HYB-2",
        SHORT,
        lambda acks: acks[:-1] + [PoolHitsAck(operation_id="op", pool_hits={"swa": 4})] + acks[-1:],  # type: ignore[arg-type]
    ),
    "pool hits before the progress acks": (
        "HYB-2",
        SLICES,
        lambda acks: [PoolHitsAck(operation_id="op", pool_hits={"swa": 4}), *acks],  # type: ignore[arg-type]
    ),
}


@pytest.mark.clause("CTL-5", "CTL-6", "HYB-2")
@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_ack_change_is_named_by_its_clause(name):
    clause_id, loaded, change = PLANTED[name]
    acks = change(schedule(SLICES, loaded))
    report = check_acks(acks, slice_pages=SLICES, loaded_pages=loaded, page_size=PAGE_SIZE)
    assert clause_id in report.violated, report.format_table()


@pytest.mark.clause("HYB-2")
def test_pool_hits_after_a_complete_load_pass_and_zero_hits_after_an_incomplete_one_too():
    complete = schedule(SLICES, SLICES, pool_hits={"swa": 300})
    assert check_acks(complete, slice_pages=SLICES, loaded_pages=SLICES, page_size=PAGE_SIZE).ok
    incomplete = schedule(SLICES, SHORT, pool_hits={"swa": 0})
    assert check_acks(incomplete, slice_pages=SLICES, loaded_pages=SHORT, page_size=PAGE_SIZE).ok


@pytest.mark.clause("CTL-6")
def test_acks_may_be_dicts_and_the_message_is_exact():
    acks = [ack.model_dump() for ack in schedule(SLICES, SHORT)][:-1]
    report = check_acks(acks, slice_pages=SLICES, loaded_pages=SHORT, page_size=PAGE_SIZE)
    (violation,) = report.violations
    assert str(violation) == (
        "[CTL-6] operation: no final ack; every prefetch ends with one, also when the backend "
        "raised or the operation was terminated"
    )


@pytest.mark.parametrize(
    "arguments,message",
    [
        (
            dict(slice_pages="ab", loaded_pages=[], page_size=1),
            "check_acks.slice_pages: must be a sequence of ints (got 'ab') [CTL-5]",
        ),
        (
            dict(slice_pages=[0], loaded_pages=[], page_size=1),
            "check_acks.slice_pages: must hold ints >= 1 (got (0,)) [CTL-5]",
        ),
        (
            dict(slice_pages=[4], loaded_pages=[True], page_size=1),
            "check_acks.loaded_pages[0]: must be an int >= 0 (got True) [CTL-5]",
        ),
        (
            dict(slice_pages=[4], loaded_pages=[4, 4], page_size=1),
            "check_acks.loaded_pages: must hold at most len(slice_pages) = 1 entries (got (4, 4)) [CTL-5]",
        ),
        (
            dict(slice_pages=[4], loaded_pages=[5], page_size=1),
            "check_acks.loaded_pages[0]: must be <= slice_pages[0] = 4 (got 5) [CTL-5]",
        ),
        (
            dict(slice_pages=[4], loaded_pages=[4], page_size=0),
            "check_acks.page_size: must be an int >= 1 (got 0) [CTL-5]",
        ),
    ],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ContractViolation) as error:
        check_acks([], **arguments)
    assert str(error.value) == message


def test_a_malformed_ack_is_named():
    with pytest.raises(ContractViolation) as error:
        check_acks(
            [{"kind": "progress", "operation_id": "op", "slice_index": 0, "tokens": -1}],
            slice_pages=[1],
            loaded_pages=[1],
            page_size=1,
        )
    assert str(error.value) == "ProgressAck.tokens: input should be greater than or equal to 0 (got -1) [CTL-5]"
