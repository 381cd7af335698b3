"""The recorder's prefix snapshots when an engine hands one list to several calls.

Scenario: a plain-list prefix (as SGLang's dataclass carries) handed to
consecutive calls, unchanged or changed in place between them.
Expected: an unchanged long list is copied once and the snapshot reused; a
change the check sees (length, the first or last elements) makes a fresh
copy; any change in place after a call is still reported by that call's
``current_prefix`` (PFX-5). Planted: a recorder that reuses a snapshot on
identity and length alone.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from hicache_contracts.engine import RecordingBackend
from hicache_contracts.engine import _recorder
from tests.engine.list_prefix import Answers, ListExtraInfo

LONG = [f"{index:064x}" for index in range(1_000)]


def two_calls(change: Callable[[list], None], length: int = len(LONG)) -> tuple[Any, Any, list]:
    recorder = RecordingBackend(Answers())
    shared = list(LONG[:length])
    info = ListExtraInfo(prefix_keys=shared)
    recorder.batch_exists(["a" * 64], info)
    change(shared)
    recorder.batch_exists(["b" * 64], info)
    first, second = recorder.calls
    return first, second, shared


def replace_at(position: int) -> Callable[[list], None]:
    def change(keys: list) -> None:
        keys[position] = "f" * 64

    return change


@pytest.mark.clause("PFX-5")
def test_an_unchanged_list_is_copied_once() -> None:
    first, second, shared = two_calls(lambda keys: None)
    assert second.prefix_keys is first.prefix_keys
    assert second.prefix_keys == tuple(shared)
    assert first.current_prefix() == (False, tuple(shared), None)


def check_changes_between_calls_are_snapshotted() -> None:
    """Each change the reuse check covers gives the second call a snapshot of the list as it then was."""
    changes = {
        "first key": replace_at(0),
        "last key": replace_at(-1),
        "fourth last key": replace_at(-4),
        "appended": lambda keys: keys.append("e" * 64),
        "removed": lambda keys: keys.pop(),
    }
    for name, change in changes.items():
        first, second, shared = two_calls(change)
        assert second.prefix_keys == tuple(shared), f"{name}: the second call's snapshot is stale"
        assert first.current_prefix()[0] is True, f"{name}: the change after the first call is not seen"
    first, second, shared = two_calls(replace_at(100), length=200)  # short lists are always copied
    assert second.prefix_keys == tuple(shared), "short list: the second call's snapshot is stale"


@pytest.mark.clause("PFX-5")
def test_changes_between_calls_are_snapshotted() -> None:
    check_changes_between_calls_are_snapshotted()


@pytest.mark.clause("PFX-5")
@pytest.mark.parametrize("position", [8, 300, 500, 991])
def test_a_change_in_the_middle_is_seen_on_the_earlier_call(position: int) -> None:
    first, second, shared = two_calls(replace_at(position))
    assert first.current_prefix() == (True, tuple(shared), None)
    assert second.prefix_keys in (tuple(LONG), tuple(shared))


@pytest.mark.clause("PFX-5")
def test_snapshot_check_catches_reuse_on_identity_and_length(monkeypatch: pytest.MonkeyPatch) -> None:
    def identity_and_length(prefix: Any, earlier: Any) -> Any:
        for call in reversed(earlier):
            if call.prefix_object is prefix and len(call.prefix_keys) == len(prefix):
                return call.prefix_keys
        return None

    monkeypatch.setattr(_recorder, "_reused_snapshot", identity_and_length)
    with pytest.raises(AssertionError):
        check_changes_between_calls_are_snapshotted()
