"""The recorder's snapshots of new list prefixes built from an earlier one (``prefix + batch``, as SGLang builds them).

Scenario: every call receives a new list; usually it starts with the keys of
a list recorded earlier, and the recorder then extends that snapshot by the
new keys instead of copying the whole list.
Expected: every call's snapshot holds exactly what its list held at call
time: when the lists differ anywhere (a middle key, a key of another type,
one missing), when the engine changes a list after the call (PFX-5, seen by
that call's ``current_prefix``), and with two threads recording at once.
A new operation's first list that equals the start of a longer one recorded
before reuses that earlier snapshot, compared key for key the same way.
Planted: a comparison that trusts the first and last keys alone, a reuse
of an earlier start that does the same, and a key-for-key comparison that
skips one key.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

from hicache_contracts import PrefixKeys
from hicache_contracts.engine import RecordingBackend
from hicache_contracts.engine import _list_snapshots
from tests.engine.list_prefix import Answers, ListExtraInfo

BATCH = 128
CHAIN = [f"{index:064x}" for index in range(4_096)]


def record(recorder: Any, prefix: list) -> Any:
    """Make one call with ``prefix`` and return its RecordedCall."""
    info = ListExtraInfo(prefix_keys=prefix)
    recorder.batch_exists(CHAIN[len(prefix) : len(prefix) + BATCH], info)
    return next(call for call in reversed(recorder.calls) if call.extra_info is info)


def growing(start: int = 1_024, batches: int = 8) -> list[list[str]]:
    """New lists as SGLang builds them: each one the previous plus a batch."""
    lists, prefix = [], CHAIN[:start]
    for _ in range(batches):
        lists.append(prefix)
        prefix = prefix + CHAIN[len(prefix) : len(prefix) + BATCH]
    return lists


def check_differences_are_recorded() -> None:
    """Lists that do not start with an earlier one's keys, key for key, are recorded as they are."""
    base = CHAIN[:2_048]
    builds: dict[str, Callable[[], list[Any]]] = {
        "middle key replaced": lambda: base[:1_000] + ["f" * 64] + base[1_001:] + CHAIN[2_048:2_176],
        "middle key replaced, same length": lambda: base[:1_000] + ["f" * 64] + base[1_001:],
        "middle key dropped": lambda: base[:1_000] + base[1_001:] + CHAIN[2_048:2_176],
        "second-last key replaced": lambda: base[:-2] + ["f" * 64] + base[-1:] + CHAIN[2_048:2_176],
        "second-last key replaced, same length": lambda: base[:-2] + ["f" * 64] + base[-1:],
        "a key of another type": lambda: base[:1_000] + [1_000] + base[1_001:] + CHAIN[2_048:2_176],
        "an int in the new keys": lambda: base + [2_048] + CHAIN[2_049:2_176],
    }
    for name, build in builds.items():
        recorder = RecordingBackend(Answers())
        record(recorder, list(base))
        prefix = build()
        assert record(recorder, prefix).prefix_keys == tuple(prefix), name


def check_earlier_starts_are_recorded() -> None:
    """New lists as long as an earlier snapshot of a longer operation are recorded as they are, and so are the next."""
    lists = growing()
    start = lists[2]
    builds: dict[str, Callable[[], list[Any]]] = {
        "the same keys": lambda: list(start),
        "middle key replaced": lambda: start[:700] + ["f" * 64] + start[701:],
        "a key of another type": lambda: start[:700] + [700] + start[701:],
        "second-last key replaced": lambda: start[:-2] + ["f" * 64] + start[-1:],
    }
    for name, build in builds.items():
        recorder = RecordingBackend(Answers())
        for prefix in lists:
            record(recorder, prefix)
        prefix = build()
        assert record(recorder, prefix).prefix_keys == tuple(prefix), name
        for following in (prefix + CHAIN[len(prefix) : len(prefix) + BATCH], lists[-1] + CHAIN[2_048:2_176]):
            assert record(recorder, following).prefix_keys == tuple(following), name
    for position in (0, 900, len(lists[3]) - 2, len(lists[3]) - 1):  # the earlier operation's next list, changed
        recorder = RecordingBackend(Answers())
        for prefix in lists:
            record(recorder, prefix)
        record(recorder, list(start))
        changed = list(lists[3])
        changed[position] = "f" * 64
        for following in (changed, list(lists[4]), list(lists[5])):
            assert record(recorder, following).prefix_keys == tuple(following), position


@pytest.mark.clause("PFX-5")
def test_each_new_list_is_recorded_as_it_was() -> None:
    recorder = RecordingBackend(Answers())
    lists = growing()
    calls = [record(recorder, prefix) for prefix in lists]
    for call, prefix in zip(calls, lists):
        assert call.prefix_keys == tuple(prefix)
        assert call.current_prefix() == (False, tuple(prefix), None)
    assert type(calls[0].prefix_keys) is tuple  # copied
    assert all(type(call.prefix_keys) is PrefixKeys for call in calls[1:])  # extended, sharing the keys
    again = record(recorder, list(lists[-1]))  # an equal new list: the same snapshot
    assert again.prefix_keys is calls[-1].prefix_keys


@pytest.mark.clause("PFX-5")
def test_differences_are_recorded() -> None:
    check_differences_are_recorded()


@pytest.mark.clause("PFX-5")
def test_the_start_of_an_earlier_operation_reuses_its_snapshot() -> None:
    recorder = RecordingBackend(Answers())
    lists = growing()
    calls = [record(recorder, prefix) for prefix in lists]
    again = record(recorder, list(lists[2]))  # a new operation with the same first prefix
    assert again.prefix_keys is calls[2].prefix_keys
    following = [record(recorder, list(prefix)) for prefix in lists[3:]]
    assert [call.prefix_keys for call in following] == [tuple(prefix) for prefix in lists[3:]]
    assert all(type(call.prefix_keys) is PrefixKeys for call in following)
    check_earlier_starts_are_recorded()


@pytest.mark.clause("PFX-5")
@pytest.mark.parametrize("position", [0, 513, 1_100, -1])
def test_a_list_changed_after_its_call_is_reported_and_the_next_call_is_exact(position: int) -> None:
    recorder = RecordingBackend(Answers())
    first_list = CHAIN[:1_200]
    first = record(recorder, first_list)
    first_list[position] = "e" * 64  # the engine rewrites a list it handed over (PFX-5)
    assert first.current_prefix() == (True, tuple(first_list), None)
    for next_list in (first_list + CHAIN[1_200:1_328], CHAIN[:1_328]):
        call = record(recorder, next_list)
        assert call.prefix_keys == tuple(next_list)
        next_list.append("d" * 64)
        assert call.current_prefix()[0] is True


@pytest.mark.clause("PFX-5")
def test_keys_that_cannot_be_compared_are_copied() -> None:
    class Uncomparable:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no comparison")

        __hash__ = object.__hash__

    recorder = RecordingBackend(Answers())
    record(recorder, CHAIN[:1_000])
    odd = CHAIN[:500] + [Uncomparable()] + CHAIN[501:1_128]
    call = record(recorder, odd)
    assert call.recording_problem is None
    assert type(call.prefix_keys) is tuple and call.prefix_keys[500] is odd[500]


@pytest.mark.clause("PFX-5")
def test_two_threads_recording_at_once() -> None:
    recorder = RecordingBackend(Answers())
    failures: list[str] = []

    def operation(start: int) -> None:
        for prefix in growing(start, batches=12):
            call = record(recorder, prefix)
            if call.prefix_keys != tuple(prefix):
                failures.append(f"{start}: {len(prefix)} keys recorded wrong")

    threads = [threading.Thread(target=operation, args=(start,)) for start in (300, 700, 1_100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def ends_only(entry: Any, prefix: list, *_: Any) -> Any:
    """Planted: the new list counts as starting with the entry's keys when the first and last of them match."""
    known = len(entry.snapshot)
    if known > len(prefix) or prefix[0] != entry.first or prefix[known - 1] != entry.snapshot[-1]:
        return None
    if known == len(prefix):
        return entry.snapshot
    added = [*entry.snapshot, *prefix[known:]]
    entry.snapshot = tuple(added)
    return entry.snapshot


@pytest.mark.clause("PFX-5")
def test_planted_ends_only_comparison_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_list_snapshots, "_snapshot_from", ends_only)
    with pytest.raises(AssertionError):
        check_differences_are_recorded()


def earlier_start_ends_only(entry: Any, prefix: list, length: int) -> Any:
    """Planted: an earlier snapshot as long as the new list is reused when its first and last keys match."""
    node = entry.snapshot
    while node is not None and len(node) > length:
        node = node._parent
    if entry.mirror is None or node is None or len(node) != length:
        return None
    if prefix[0] != entry.first or prefix[-1] != entry.mirror[length - 1]:
        return None
    del entry.mirror[length:]
    entry.snapshot, entry.last = node, prefix[-1]
    return node


@pytest.mark.clause("PFX-5")
def test_planted_ends_only_earlier_start_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_list_snapshots, "_rewound", earlier_start_ends_only)
    with pytest.raises(AssertionError):
        check_earlier_starts_are_recorded()


def all_but_one_compared(mirror: list, prefix: list, count: int) -> bool:
    """Planted: the comparison of the first ``count`` keys, without the second-last one."""
    return mirror[: count - 2] == prefix[: count - 2] and mirror[count - 1] == prefix[count - 1]


@pytest.mark.clause("PFX-5")
def test_planted_comparison_skipping_a_key_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_list_snapshots, "_starts_with", all_but_one_compared)
    with pytest.raises(AssertionError):
        check_earlier_starts_are_recorded()
    with pytest.raises(AssertionError):
        check_differences_are_recorded()
