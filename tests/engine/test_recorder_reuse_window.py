"""The recorder looks for an earlier snapshot of a list prefix among the 8 calls before each call, v2 calls too.

Scenario: a long plain-list prefix handed to many v2 reads in a row.
Expected: each read after the first searches the calls just before it (and
reuses their snapshot); planted: the search window taken from the position
of the call's transfers instead of the call's own, which finds no call.
"""

from __future__ import annotations

from typing import Any

import pytest

from hicache_contracts.engine import RecordingBackend
from hicache_contracts.engine import _recorder
from tests.engine.list_prefix import ListExtraInfo

LONG = [f"{index:064x}" for index in range(1_000)]


class Reads:
    """A v2 reader that reads nothing."""

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict:
        return {}


def windows_searched(monkeypatch: pytest.MonkeyPatch, calls: int = 12) -> tuple[list[int], Any]:
    """Run ``calls`` v2 reads with one long list prefix; return how many earlier calls each search was given."""
    searched: list[int] = []
    real = _recorder._reused_snapshot

    def spy(prefix: Any, earlier: Any) -> Any:
        searched.append(len(earlier))
        return real(prefix, earlier)

    monkeypatch.setattr(_recorder, "_reused_snapshot", spy)
    recorder = RecordingBackend(Reads())
    info = ListExtraInfo(prefix_keys=list(LONG))
    for _ in range(calls):
        recorder.batch_get_v2([], info)
    return searched, recorder.calls


@pytest.mark.clause("PFX-5")
def test_v2_calls_search_the_calls_before_them(monkeypatch: pytest.MonkeyPatch) -> None:
    searched, calls = windows_searched(monkeypatch)
    assert searched == [min(index, _recorder._REUSE_LOOKBACK) for index in range(12)]
    assert all(call.prefix_keys is calls[0].prefix_keys for call in calls)
    assert calls[0].prefix_keys == tuple(LONG)


def window_from_the_transfers_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the position of the call's transfers (0 for batch_get_v2) taken for the call's own."""
    real = _recorder._record_arguments

    def planted(
        call: Any, plan: Any, args: Any, kwargs: Any, earlier: Any = (), snapshots: Any = None, position: Any = None
    ) -> None:
        transfer_place = plan[1]
        real(call, plan, args, kwargs, earlier, snapshots, transfer_place[0] if transfer_place else position)

    monkeypatch.setattr(_recorder, "_record_arguments", planted)


@pytest.mark.clause("PFX-5")
def test_planted_window_from_the_transfers_place_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    window_from_the_transfers_place(monkeypatch)
    with pytest.raises(AssertionError):
        test_v2_calls_search_the_calls_before_them(monkeypatch)
