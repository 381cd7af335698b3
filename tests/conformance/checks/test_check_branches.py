"""Every branch of a vendor check that decides a verdict is reached by a planted bug or a correct variant.

Scenario: each planted backend of planted_catalog.CATALOG is run through each check that must catch it
alone (its ``alone`` and ``only`` oracles); each correct variant of planted_branches.CORRECT_VARIANTS
through every check.
Expected: the planted bug fails the check on its clause, with a message (the verdict recorded in
check_messages.json, where recorded); a correct variant fails none.
Why it matters: a condition of a check that no bug reaches can be inverted or dropped with every test
still green, and a check that moves to other host pages stops catching a bug that depends on them
(docs/mutation/checks.md lists the checks' mutation score).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import json
import re
import struct
import threading
import time
from types import SimpleNamespace
from typing import Optional

import pytest

from tests.conftest import SGLANG_RELEASE
import torch

from hicache_contracts.conformance import CHECKS
from hicache_contracts.conformance.checks import concurrency as checks_concurrency
from hicache_contracts.conformance.checks.concurrency import Event, _check_histories, _history
from hicache_contracts.conformance.framework import ClauseFailure
from hicache_contracts.conformance.session.names import Names
from hicache_contracts.conformance.session.pools import slots_of_pages
from hicache_contracts.models import PoolTransferResult
from tests.conformance.check_messages import RACING, RECORDED, run_alone, verdict_of
from tests.conformance.helpers import ALL_LEVELS, UNCLAIMED_CHECKS, failed, run, statuses
from tests.conformance.planted_catalog import BY_NAME, CATALOG, LEGACY_MODE
from tests.conformance.planted_evicting import EvictsEverything
from tests.conformance.planted_branches import (
    CORRECT_VARIANTS,
    AdmitsNothingOnceFull,
    ChecksItsHostIndices,
    CorrectBackend,
    DerivedResultsFiledUnderKv,
    HoldsOnePage,
    HoldsOnePageForEveryController,
    LastHostPageRefused,
    RefusesAnLcmAboveItsTpSize,
    RefusesPagesOfZeros,
    RefusesPastItsRoom,
    WalksThePrefixThroughLinkedNodes,
    one_run,
)
from tests.conformance.correct_backend import pool_name
from tests.oracles import plain_fold
from tests.sglang_standin import installed, make_storage_module


def alone_cases(recorded: bool) -> list:
    """One case per oracle that runs a check alone, recorded or not: ``<clause>-<backend>-<check>``. An
    unrecorded ``only`` oracle is slow (a long profile, a stuck call or racing threads); its whole-suite
    run is in test_single_check.py."""
    return [
        pytest.param(
            entry,
            oracle.check,
            id=f"{entry.id}-{oracle.check}",
            marks=[
                pytest.mark.clause(*entry.clauses),
                *([pytest.mark.slow] if oracle.kind == "only" and not recorded else []),
            ],
        )
        for entry in CATALOG
        for oracle in entry.alone()
        if oracle.recorded is recorded
    ]


def fails_on_its_clause(entry, check: str, report) -> None:
    """The check failed ``entry`` on one of its clauses, with a message."""
    caught = [clause_id for clause_id in failed(report) if clause_id in entry.clauses]
    assert caught, f"{entry.name}: {check} gave {statuses(report)}"
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == caught[0])
    assert verdict.failures and verdict.failures[0].message
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "fail", f"{entry.name}: {check} alone gave {outcome.status}"


RACE_TRIES = 3
"""Runs of a concurrency check on a racing bug: it shows only when the threads interleave so, which a busy machine
can keep from happening in one run."""
MEETS_EVERY_ROUND = frozenset({"ReadsMissWhileAWriteRuns"})
"""Racing bugs whose threads meet on purpose (each waits a moment for the other): one run shows them."""


@pytest.mark.parametrize("entry, check", alone_cases(recorded=False))
def test_planted_bug_fails_its_check(entry, check: str) -> None:
    report = run_alone(entry, check)
    for _ in range(RACE_TRIES - 1 if check in RACING and entry.name not in MEETS_EVERY_ROUND else 0):
        if any(item.check == check and item.status == "fail" for item in report.sections[0].checks):
            break
        report = run_alone(entry, check)
    fails_on_its_clause(entry, check, report)


@pytest.mark.parametrize(
    "backend, options", [pytest.param(backend, options, id=name) for name, backend, options in CORRECT_VARIANTS]
)
def test_correct_variant_passes_every_check(backend: type, options: dict) -> None:
    report = run(backend, **options)
    failing = {verdict.clause_id: verdict.reason for verdict in report.sections[0].clauses if verdict.status == "fail"}
    assert failing == {}, report.render_text(color=False)
    not_passed = {outcome.check for outcome in report.sections[0].checks if outcome.status != "pass"}
    assert not_passed == expected_skips(options), report.render_text(color=False)


BACKDOOR_CHECKS = {check.name for check in CHECKS if check.function.__module__.endswith(".checks.backdoor")}
"""The checks that need backdoor hooks: skipped where a backend offers none."""


def expected_skips(options: dict) -> set[str]:
    """The checks a correct variant is skipped on, each for a reason of its own: the backdoor checks (the variants
    offer no hooks); without v1, the checks of v1 and those that need a v1 write (BE-7 holds one half done, the
    non-writer rank's check reads its write back); without legacy or v2, the checks of that level. Any other skip
    is a check that stopped looking: a pages-seen test that never saw a page (an evicting backend), a branch that no
    longer runs."""
    skips = set(BACKDOOR_CHECKS)
    if "v1" not in options.get("levels", ("v1",)):
        skips |= {check.name for check in CHECKS if "v1" in check.requires}
        skips |= {"pages_are_invisible_until_fully_written", "a_non_writer_rank_writes_what_it_reports"}
    for level in ("legacy", "v2"):
        if level not in options.get("levels", (level,)):
            skips |= {check.name for check in CHECKS if level in check.requires}
    if "format" not in options.get("levels", ALL_LEVELS):
        skips |= UNCLAIMED_CHECKS  # no in-test backend makes the format guard (NS-9)
    return skips


KEPT_PAGES_NEEDED = {
    "clear_removes_a_ranks_own_state_under_replicated_kv",
    "a_slash_in_a_model_name_is_part_of_it",
    "distinct_keys_name_distinct_pages",
    "batch_exists_counts_the_leading_run",
    "batch_exists_takes_a_whole_chain",
    "batch_exists_v2_takes_a_whole_chain",
    "clear_removes_every_page",
    "clear_removes_every_pool",
    "clear_removes_only_its_own_namespace",
    "concurrent_calls_keep_every_key_consistent",
    "defined_extra_info_keys_change_no_page",
    "every_rank_inside_its_group_is_accepted",
    "exists_get_and_set_share_one_key_scheme",
    "extra_config_with_unknown_keys_is_accepted",
    "full_batches_of_128_pages_work",
    "hit_queries_agree_from_every_thread",
    "host_pools_register_before_any_io",
    "host_pools_registered_hook_accepts_the_pools",
    "a_non_writer_rank_writes_what_it_reports",
    "pages_are_invisible_until_fully_written",
    "pages_stay_consistent_under_the_failure_injector",
    "pages_survive_a_rebuild",
    "prefix_states_none_empty_and_list_all_work",
    "ranks_and_models_never_share_pages",
    "replicated_kv_is_shared_across_tp_ranks",
    "second_host_pool_is_served_or_refused",
    "stateful_model_of_a_lossy_write_once_store",
    "v1_pages_round_trip_bit_for_bit",
    "v2_sidecar_calls_take_a_whole_span",
    "v2_exists_folds_pool_hits_per_policy",
    "v2_pool_hits_count_only_pages_that_landed",
}
"""The checks whose subject is a page read back or counted: a backend that keeps nothing leaves them nothing to
look at. The others look at misses, shapes, errors and arguments, which need no page kept."""


def test_a_backend_keeping_nothing_skips_exactly_the_checks_that_need_a_page_kept() -> None:
    """A correct cache that keeps no page: a check that needs one skips, saying so; every other check passes.
    A check that passes here although it saw no page (or skips although it needed none) has stopped looking."""
    report = run(EvictsEverything)
    outcomes = {outcome.check: outcome for outcome in report.sections[0].checks}
    skipped = {name for name, outcome in outcomes.items() if outcome.status == "skip"}
    assert skipped == KEPT_PAGES_NEEDED | BACKDOOR_CHECKS | UNCLAIMED_CHECKS, report.render_text(color=False)
    assert all(outcome.status == "pass" for name, outcome in outcomes.items() if name not in skipped)


TWO_PAGES_NEEDED = {
    "batch_exists_takes_a_whole_chain",
    "batch_exists_v2_takes_a_whole_chain",
    "v2_exists_folds_pool_hits_per_policy",
    "v2_sidecar_calls_take_a_whole_span",
}
"""The checks whose subject is a run of two or more stored pages counted together (or, for the sidecar span, a
KV page and its sidecar page kept together)."""


def test_a_backend_holding_one_page_skips_only_the_checks_that_need_two() -> None:
    """A correct cache with room for one page, each write evicting the page before: a check that sees its one page
    (a count of 1, one page read back) goes on and passes; only the checks that need two pages kept skip. It also
    holds its lock across a whole write, so the visibility check's probes wait for the write to end."""
    report = run(HoldsOnePage)
    outcomes = {outcome.check: outcome.status for outcome in report.sections[0].checks}
    # BE-30's threads query the one page while another thread writes others: whether it is still there when they ask
    # depends on how they interleave, so that check passes or skips (never fails)
    racing = "hit_queries_agree_from_every_thread"
    assert outcomes[racing] in ("pass", "skip"), report.render_text(color=False)
    not_passed = {name for name, status in outcomes.items() if status != "pass" and name != racing}
    assert not_passed == TWO_PAGES_NEEDED | BACKDOOR_CHECKS | UNCLAIMED_CHECKS, report.render_text(color=False)
    assert {outcomes[name] for name in TWO_PAGES_NEEDED} == {"skip"}


LAST_PAGE_READERS = {
    "a_slash_in_a_model_name_is_part_of_it",
    "every_rank_inside_its_group_is_accepted",
    "exists_get_and_set_share_one_key_scheme",
    "extra_config_with_unknown_keys_is_accepted",
    "full_batches_of_128_pages_work",
    "host_pools_register_before_any_io",
    "host_pools_registered_hook_accepts_the_pools",
    "pages_stay_consistent_under_the_failure_injector",
    "ranks_and_models_never_share_pages",
    "replicated_kv_is_shared_across_tp_ranks",
    "second_host_pool_is_served_or_refused",
    "v2_sidecar_calls_take_a_whole_span",
}
"""The checks that read into the last page of their instance's host pool: the 4-page instances' round trips (into
pages 2 and 3), the namespacing checks' 6-page instances (pages 2 to 5), BE-10's full batch (the main pool's top
pages) and BE-33's reads through the failure injector (the upper half of its pool). NS-7 reads pages 4 to 6 of an
8-page pool, NS-8 reads nothing."""


BOUNDED_BY_THE_STAND_IN_POOL = pytest.mark.skipif(
    SGLANG_RELEASE is not None,
    reason="LastHostPageRefused tests its bound against the suite's own pool size; a release's host pool is "
    "sized by SGLang (one page more than asked), so its last handed-out page is not the one the bug refuses",
)


@BOUNDED_BY_THE_STAND_IN_POOL
def test_a_backend_refusing_the_pools_last_page_fails_exactly_the_checks_that_read_into_it() -> None:
    """The off-by-one bounds test of LastHostPageRefused: every check reading into a pool's last page fails it, and
    no other check does. A check that moved its reads onto a pool's last page, or shrank its pool under them, is a
    check that now fails where it did not (and one that stopped reading there no longer fails)."""
    report = run(LastHostPageRefused)
    failing = {outcome.check for outcome in report.sections[0].checks if outcome.status == "fail"}
    assert failing == LAST_PAGE_READERS, report.render_text(color=False)


RECORDED_VERDICTS: dict[str, dict[str, list]] = json.loads(RECORDED.read_text())


@pytest.mark.parametrize("entry, check", alone_cases(recorded=True))
def test_check_alone_reports_the_planted_bug_as_recorded(entry, check: str) -> None:
    """Run alone, the check fails the planted bug on the same clause, with the same message and counterexample."""
    if entry.name == "LastHostPageRefused" and SGLANG_RELEASE is not None:
        pytest.skip(BOUNDED_BY_THE_STAND_IN_POOL.kwargs["reason"])
    report = run_alone(entry, check)
    fails_on_its_clause(entry, check, report)
    assert verdict_of(report, check) == RECORDED_VERDICTS.get(entry.name, {}).get(check)


@pytest.mark.clause("BE-23")
def test_a_racing_failure_names_the_first_problem_and_counts_them() -> None:
    """StatsRaiseDuringIO makes exactly one problem (the stats thread stops at its first error): the verdict names
    it and counts one. The concurrency checks' verdicts are not recorded (threads interleave differently each run),
    so this is the test of the message."""
    report = run_alone(BY_NAME["StatsRaiseDuringIO"], "concurrent_calls_keep_every_key_consistent")
    outcome = next(
        item for item in report.sections[0].checks if item.check == "concurrent_calls_keep_every_key_consistent"
    )
    assert outcome.status == "fail", outcome
    problem = (
        "get_stats raised RuntimeError: dictionary changed size during iteration while IO ran (1 problem(s) in all)"
    )
    assert outcome.message == (  # the stats thread walks without pause: the second round meets the IO too
        f"{problem}; a second round of the same calls on fresh keys failed too: {problem}; reproducible"
    )


@pytest.mark.clause("BE-23")
def test_a_get_that_misses_a_stored_page_shows_the_calls_on_that_key() -> None:
    """ReadsMissWhileAWriteRuns misses pages in gets only (batch_exists counts them), so the rule for a get after a
    confirmed write is the one that fails it. The counterexample is the run's shape, then one line per call on the
    missed key: the history that shows the set returning True before the get began."""
    check = "concurrent_calls_keep_every_key_consistent"
    report = run_alone(BY_NAME["ReadsMissWhileAWriteRuns"], check)
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "fail", outcome
    assert outcome.message is not None and outcome.counterexample is not None
    missed = re.fullmatch(
        r"get by thread \d+ missed (k\d+), stored \(set returned True\) before the get began; a second round of the "
        r"same calls on fresh keys failed too: get by thread \d+ missed k\d+, stored \(set returned True\) before "
        r"the get began; reproducible",
        outcome.message,
    )
    assert missed, outcome.message
    shape, *rest = outcome.counterexample.splitlines()
    assert shape.endswith("shared keys, plus get_stats"), shape
    history = list(itertools.takewhile(lambda line: line.startswith("  t="), rest))
    assert history, outcome.counterexample
    assert all(" µs  thread " in line and missed.group(1) in line for line in history), history


@pytest.mark.clause("BE-15")
def test_the_state_machine_reads_one_host_page_per_key() -> None:
    """ChecksItsHostIndices refuses host indices other than one page of slots per key, as SGLang never passes: the
    state machine's v1 reads must pass it. The smoke profile's three runs (seed 0) make no v1 read, so the standard
    profile's fifty do."""
    report = run(ChecksItsHostIndices, checks=("stateful_model_of_a_lossy_write_once_store",), profile="standard")
    assert statuses(report)["BE-15"] == "pass", report.render_text(color=False)


class ClearFailsPartWayAndRaises(CorrectBackend):
    """Correct: clear() deletes while it walks the store, so the first deletion ends the walk with RuntimeError.
    SGLang catches a raising clear (``StorageAttachment.clear``), reports it failed and keeps what it believed."""

    def clear(self) -> None:
        with self.lock:
            for name in self.objects:
                if name.startswith(self.namespace + "|"):
                    del self.objects[name]


@pytest.mark.clause("BE-11", "NS-8")
def test_a_clear_that_raises_is_a_failed_clear_and_judged_no_further() -> None:
    """A raise is SGLang's only sign of a failed clear: no check fails it, and each check that needs a clear done
    skips, saying why."""
    report = run(ClearFailsPartWayAndRaises)
    assert failed(report) == [], report.render_text(color=False)
    skipped = {
        outcome.check
        for outcome in report.sections[0].checks
        if outcome.status == "skip" and "clear() raised" in (outcome.message or "")
    }
    assert skipped == {
        "clear_removes_every_page",
        "clear_removes_every_pool",
        "clear_removes_a_ranks_own_state_under_replicated_kv",
        "clear_removes_only_its_own_namespace",
    }, report.render_text(color=False)


class RollsBackFailedBatches(CorrectBackend):
    """Correct: every third batch_set_v1 of two or more keys fails its last key and stores none of the batch, yet
    flags the others True. SGLang reads only the AND of one call's flags (``_page_set_zero_copy``), so a True beside
    a False is never taken as a page kept."""

    rolled_back = 0

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        keys = list(keys)
        self.batches = getattr(self, "batches", 0) + (len(keys) >= 2)
        if len(keys) >= 2 and self.batches % 3 == 0:
            type(self).rolled_back += 1
            return [True] * (len(keys) - 1) + [False]
        return super().batch_set_v1(keys, host_indices, extra_info)


@pytest.mark.clause("BE-17")
def test_a_true_beside_a_false_in_one_v1_write_confirms_nothing() -> None:
    """The state machine and the threads take a v1 write's flags as SGLang does, by their AND: a backend that rolls
    a failed batch back whole, flagging the rest True, passes BE-17 (it failed when each True confirmed its page)."""
    RollsBackFailedBatches.rolled_back = 0
    report = run(RollsBackFailedBatches, checks=("stateful_model_of_a_lossy_write_once_store",), profile="standard")
    assert RollsBackFailedBatches.rolled_back, "no batch was rolled back: the test saw nothing"
    assert "fail" not in statuses(report).values(), report.render_text(color=False)


class FlagsPastAFailedSidecarPage(CorrectBackend):
    """Correct: a batch_set_v2 of three or more pages fails its second page and keeps nothing after it, yet flags
    the third True. SGLang takes a pool's flags by their leading run (``count_pool_hits``), or by their AND where
    a rank that is not the storage writer decides its backup, so a True past a False is never relied on."""

    def batch_set_v2(self, transfers, extra_info=None):
        result = {}
        for item in transfers:
            keys = list(item.keys or ())
            if len(keys) < 3:
                result.update(super().batch_set_v2([item], extra_info))
                continue
            name = pool_name(item.name)
            result[name] = self.write_pages(name, keys[:1], item.host_indices) + [False] + [True] * (len(keys) - 2)
        return result


@pytest.mark.clause("BE-17")
def test_a_true_past_a_false_in_a_sidecar_write_is_never_relied_on() -> None:
    """The non-writer rank's sidecar check judges only the leading run of batch_set_v2's flags."""
    report = run(FlagsPastAFailedSidecarPage, checks=("a_non_writer_rank_writes_what_it_reports",))
    assert statuses(report)["BE-17"] == "pass", report.render_text(color=False)


@pytest.mark.parametrize(
    "pages, expected",
    [([4, 5], True), ([0, 1, 2], True), ([3, 5], False), ([3, 3], False), ([5, 4], False), ([5], False), ([], False)],
)
def test_a_run_is_two_or_more_ascending_consecutive_host_pages(pages: list, expected: bool) -> None:
    """The run-path planted bugs take their fast path exactly for one ascending run of host pages."""
    assert one_run(slots_of_pages(pages, 4), 4, len(pages)) is expected


class WriterHangs(CorrectBackend):
    """Correct, except that BE-7's held write, once it has read its pages, does not return until the test lets it."""

    let_go = threading.Event()

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        stored = super().batch_set_v1(keys, host_indices, extra_info)
        if threading.current_thread().name == "hicache-conform-writer":
            self.let_go.wait(60)
        return stored


class LookupHangs(CorrectBackend):
    """Correct, except that a lookup from BE-7's poller, made while the write is held, does not return until the test
    lets it (a lookup that waits for a lock the write holds, say)."""

    let_go = threading.Event()

    def batch_exists(self, keys, extra_info=None):
        if threading.current_thread().name == "hicache-conform-poller":
            self.let_go.wait(60)
        return super().batch_exists(keys, extra_info)


class EvictingWriterHangs(WriterHangs, EvictsEverything):
    """WriterHangs declaring that it may evict and keeping no page (EvictsEverything)."""

    let_go = threading.Event()


@pytest.mark.clause("BE-7")
@pytest.mark.parametrize(
    "backend, thread_name",
    [
        (WriterHangs, "hicache-conform-writer"),
        (LookupHangs, "hicache-conform-poller"),
        (EvictingWriterHangs, "hicache-conform-writer"),
    ],
    ids=["writer", "poller", "evicting-writer"],
)
def test_a_call_that_never_returns_leaves_no_thread_that_keeps_the_process_alive(backend, thread_name) -> None:
    """BE-7's writer and poller threads outlive a write or a lookup that hangs: each must be a daemon, or a vendor's
    hung call would keep the suite's process from exiting after the report. The check judges the window it held the
    write open for, whatever a backend that may evict keeps: it asks for a page kept only once the write has ended
    (a page gone as soon as written shows no window), so an evicting backend whose write still runs passes."""
    backend.let_go.clear()
    try:
        report = run(backend, checks=("pages_are_invisible_until_fully_written",), timeout_s=1.0)
        assert statuses(report)["BE-7"] == "pass", report.render_text(color=False)
        hung = [thread for thread in threading.enumerate() if thread.name == thread_name]
        assert hung, "the call was expected to be still running"
        assert all(thread.daemon for thread in hung), hung
    finally:
        backend.let_go.set()


def test_a_history_line_shows_each_call_from_its_start_to_its_end() -> None:
    """The lines under a concurrency failure: times in µs from the run's start, each call from start to end."""
    names = Names("run", "model")
    key, other = names.new_keys(2)
    origin = 7_000_000_000
    events = [
        Event(thread=1, operation="set", keys=(key,), start=origin + 5_000, end=origin + 9_000, outcome=[True]),
        Event(thread=2, operation="get", keys=(other,), start=origin, end=origin + 1_000, outcome=[False]),
        Event(thread=0, operation="get", keys=(key, other), start=origin + 2_000, end=origin + 3_000, outcome=[False]),
    ]
    lines = _history(SimpleNamespace(names=names), events, key, origin).splitlines()  # type: ignore[arg-type]
    assert [line.split("µs")[0].split() for line in lines] == [["t=", "2..3"], ["t=", "5..9"]]
    assert lines[1].endswith("thread 1  set([k0]) -> [True]")


@pytest.mark.clause("BE-23")
@pytest.mark.parametrize("first_written", [None, False], ids=["never-written", "write-refused"])
def test_a_count_stops_at_a_first_key_not_stored_though_a_later_one_was(first_written) -> None:
    """batch_exists counts the leading run: a first key never written, or whose write returned False, ends it at 0,
    however many keys after it were stored before the call began. The lower bound a count must reach is the leading
    run of keys stored before the call, not every such key."""
    names = Names("run", "model")
    first, stored = names.new_keys(2)
    origin = 7_000_000_000
    events = [Event(thread=1, operation="set", keys=(stored,), start=origin, end=origin + 1_000, outcome=[True])]
    if first_written is not None:
        events.append(
            Event(thread=2, operation="set", keys=(first,), start=origin, end=origin + 1_000, outcome=[first_written])
        )
    events.append(
        Event(thread=0, operation="exists", keys=(first, stored), start=origin + 2_000, end=origin + 3_000, outcome=0)
    )
    suite = SimpleNamespace(names=names, may_evict=False)
    _check_histories(suite, events, [first, stored], origin, "2 threads")  # type: ignore[arg-type]


@pytest.mark.clause("BE-23")
def test_a_page_found_before_any_write_of_it_began_fails_with_the_calls_on_that_key() -> None:
    """A get that finds a key no set had begun to write by the time the get ended (a backend answering from another
    namespace's pages, say): the failure names the call, and its counterexample is the run's shape, then one line per
    call on that key."""
    names = Names("run", "model")
    (key,) = names.new_keys(1)
    origin = 7_000_000_000
    events = [
        Event(thread=2, operation="get", keys=(key,), start=origin, end=origin + 1_000, outcome=[True]),
        Event(thread=1, operation="set", keys=(key,), start=origin + 2_000, end=origin + 3_000, outcome=[True]),
    ]
    suite = SimpleNamespace(names=names, may_evict=False)
    with pytest.raises(ClauseFailure) as raised:
        _check_histories(suite, events, [key], origin, "2 threads")  # type: ignore[arg-type]
    assert raised.value.message == "get by thread 2 found k0 before any write of it began"
    assert raised.value.counterexample is not None
    shape, *history = raised.value.counterexample.splitlines()
    assert shape == "2 threads"
    assert history == _history(suite, events, key, origin).splitlines() and len(history) == 2  # type: ignore[arg-type]


def boundary_history(rule: str, late_ns: int) -> tuple[list, Names]:
    """A recorded history whose call meets a write at one instant (``late_ns`` 0), or ``late_ns`` after it: a get
    after a confirmed write (``get``), a count after one (``exists``), or a hit before the key's only write began
    (``found``)."""
    names = Names("run", "model")
    (key,) = names.new_keys(1)
    origin = 7_000_000_000
    write_at, looked_at = (origin + 1_000, origin) if rule == "found" else (origin, origin + 1_000)
    set_call = Event(thread=1, operation="set", keys=(key,), start=write_at, end=write_at + 1_000, outcome=[True])
    outcome = {"get": [False], "exists": 0, "found": [True]}[rule]
    operation = "exists" if rule == "exists" else "get"
    if rule == "found":  # the get ends as the write begins, or late_ns before
        lookup = Event(2, operation, (key,), looked_at - late_ns, write_at - late_ns, outcome)
    else:  # the lookup begins as the write returns, or late_ns after
        lookup = Event(2, operation, (key,), looked_at + late_ns, looked_at + 1_000 + late_ns, outcome)
    return [set_call, lookup], names


@pytest.mark.clause("BE-23")
@pytest.mark.parametrize("rule", ["get", "exists", "found"])
def test_a_call_meeting_a_write_at_one_instant_is_given_the_benefit_of_the_tie(rule: str) -> None:
    """The times are taken around each call, so a tie cannot say which came first: a get or a count that begins the
    nanosecond its key's write returned may still miss it, and a get that ends the nanosecond the key's first write
    begins may find it. One nanosecond further apart, each of these histories breaks its rule."""
    events, names = boundary_history(rule, 0)
    suite = SimpleNamespace(names=names, may_evict=False)
    _check_histories(suite, events, [events[0].keys[0]], 7_000_000_000, "2 threads")  # type: ignore[arg-type]
    events, names = boundary_history(rule, 1)
    with pytest.raises(ClauseFailure):
        _check_histories(
            SimpleNamespace(names=names, may_evict=False),  # type: ignore[arg-type]
            events,
            [events[0].keys[0]],
            7_000_000_000,
            "2 threads",
        )


@pytest.mark.clause("BE-23")
def test_a_count_short_of_the_pages_stored_before_it_fails_with_the_calls_on_the_first_missed_key() -> None:
    """batch_exists counting 0 of a key whose write returned True before the count began: the failure names the count
    and the leading run it had to reach, and its counterexample is the run's shape, then one line per call on that
    key."""
    events, names = boundary_history("exists", 1)
    suite = SimpleNamespace(names=names, may_evict=False)
    with pytest.raises(ClauseFailure) as raised:
        _check_histories(suite, events, [events[0].keys[0]], 7_000_000_000, "2 threads")  # type: ignore[arg-type]
    assert (
        raised.value.message == "batch_exists by thread 2 returned 0, but the first 1 keys were stored before it began"
    )
    assert raised.value.counterexample is not None
    shape, *history = raised.value.counterexample.splitlines()
    assert shape == "2 threads"
    assert history == _history(suite, events, events[0].keys[0], 7_000_000_000).splitlines() and len(history) == 2  # type: ignore[arg-type]


@pytest.mark.clause("BE-23")
def test_an_evicting_backend_is_still_held_to_finding_only_pages_whose_write_began() -> None:
    """A backend that may evict may miss any page, but never find one no write had begun: every lookup of the history
    is held to that rule, not only the first (a get that missed, then a get that found a key never written)."""
    names = Names("run", "model")
    missed, never_written = names.new_keys(2)
    origin = 7_000_000_000
    events = [
        Event(thread=1, operation="get", keys=(missed,), start=origin, end=origin + 1_000, outcome=[False]),
        Event(
            thread=2, operation="get", keys=(never_written,), start=origin + 2_000, end=origin + 3_000, outcome=[True]
        ),
    ]
    suite = SimpleNamespace(names=names, may_evict=True)
    with pytest.raises(ClauseFailure) as raised:
        _check_histories(suite, events, [missed, never_written], origin, "2 threads")  # type: ignore[arg-type]
    assert raised.value.message == "get by thread 2 found k1 before any write of it began"


@pytest.mark.clause("BE-23")
def test_keys_whose_every_write_was_refused_are_not_looked_for_after_the_threads() -> None:
    """RefusesPastItsRoom stores the round trip's four pages and the first three of the six shared keys, and refuses
    every later new page: three keys were never stored. After the threads, only the keys a write confirmed must be
    counted; a key no write stored may be missing, and the check must pass."""
    check = "concurrent_calls_keep_every_key_consistent"
    report = run(RefusesPastItsRoom, checks=(check,))
    assert statuses(report)["BE-23"] == "pass", report.render_text(color=False)


CONCURRENCY_CHECK = "concurrent_calls_keep_every_key_consistent"


def concurrency_outcome(backend, **options):
    """BE-23's check, run alone on ``backend`` with ``options``: its outcome in the report."""
    report = run(backend, checks=(CONCURRENCY_CHECK,), **options)
    return next(item for item in report.sections[0].checks if item.check == CONCURRENCY_CHECK)


class RecordsItsCallers(CorrectBackend):
    """Correct; records each data call on BE-23's instance (its model name is tagged ``threads``) as (the calling
    thread's name, the method, the keys), and the threads that call get_stats."""

    calls: list = []
    stats_callers: set = set()

    def record(self, method: str, keys) -> None:
        if "-threads" in self.config.model_name:
            self.calls.append((threading.current_thread().name, method, tuple(keys)))

    def batch_exists(self, keys, extra_info=None):
        self.record("batch_exists", keys)
        return super().batch_exists(keys, extra_info)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        self.record("batch_get_v1", keys)
        return super().batch_get_v1(keys, host_indices, extra_info)

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        self.record("batch_set_v1", keys)
        return super().batch_set_v1(keys, host_indices, extra_info)

    def get_stats(self):
        self.stats_callers.add(threading.current_thread())
        return super().get_stats()


def worker_schedules(operations: int, **options) -> list:
    """Run BE-23 alone on RecordsItsCallers; return each worker's calls in order, as (method, number of keys), sorted.
    Each worker's calls go through a helper thread of its own, which makes ``operations`` calls (the main thread's
    helper makes the round trip's and the final counts)."""
    RecordsItsCallers.calls = []
    report = run(RecordsItsCallers, checks=(CONCURRENCY_CHECK,), **options)
    assert statuses(report)["BE-23"] == "pass", report.render_text(color=False)
    by_thread: dict = {}
    for thread, method, keys in RecordsItsCallers.calls:
        by_thread.setdefault(thread, []).append((method, len(keys)))
    return sorted(calls for calls in by_thread.values() if len(calls) == operations)


@pytest.mark.clause("BE-23")
def test_the_seed_replays_the_workers_calls_and_another_seed_draws_others() -> None:
    """Each worker draws its calls (exists, get or set, of one to four keys) from the run's seed: the same seed makes
    the same calls again, which is what replaying a failure by its seed needs, and another seed makes other ones,
    so that runs under fresh seeds try other schedules."""
    first = worker_schedules(40, seed=0)
    assert len(first) == 3
    assert worker_schedules(40, seed=0) == first
    assert worker_schedules(40, seed=1) != first


@pytest.mark.clause("BE-23")
def test_each_worker_call_takes_one_to_four_keys_and_every_size_is_tried() -> None:
    """A worker owns four host pages, so each of its calls takes one to four of the shared keys, never none; over 40
    calls a worker's draws reach every size, so races between multi-key batches of each length are tried."""
    schedules = worker_schedules(40, seed=0)
    assert [sorted({size for _, size in calls}) for calls in schedules] == [[1, 2, 3, 4]] * 3


@pytest.mark.clause("BE-23")
def test_every_worker_thread_of_the_profile_calls_the_backend() -> None:
    """The standard profile runs four workers of 500 calls each, all started together: each makes its calls. (A
    worker left out, or made to wait past the run's timeout before it starts, tests fewer threads than the profile
    says.)"""
    assert len(worker_schedules(500, profile="standard", timeout_s=10.0)) == 4


@pytest.mark.clause("BE-23")
def test_after_the_threads_every_key_a_write_confirmed_is_counted_once_more() -> None:
    """The check's last look, after the threads end: each shared key a write confirmed (all six, on a correct
    backend) is counted alone, from the main thread, and must still be there. A page lost where no later call of the
    threads looked is seen only here."""
    RecordsItsCallers.calls = []
    report = run(RecordsItsCallers, checks=(CONCURRENCY_CHECK,))
    assert statuses(report)["BE-23"] == "pass", report.render_text(color=False)
    by_thread: dict = {}
    for thread, method, keys in RecordsItsCallers.calls:
        by_thread.setdefault(thread, []).append((method, keys))
    workers = [calls for calls in by_thread.values() if len(calls) == 40]
    (main,) = [calls for calls in by_thread.values() if len(calls) != 40]
    shared = {key for calls in workers for method, keys in calls if method == "batch_set_v1" for key in keys}
    assert len(workers) == 3 and len(shared) == 6
    last = main[-len(shared) :]
    assert all(method == "batch_exists" and len(keys) == 1 for method, keys in last), last
    assert {keys[0] for _, keys in last} == shared


class SlowStats(RecordsItsCallers):
    """Correct; get_stats takes a millisecond (it walks the store)."""

    def get_stats(self):
        time.sleep(0.001)
        return super().get_stats()


@pytest.mark.clause("BE-23")
def test_the_stats_thread_stops_when_the_workers_end() -> None:
    """get_stats is called while IO runs, and no longer: once the workers end, the stats thread stops, so none is
    left calling the backend after the check."""
    SlowStats.stats_callers = set()
    report = run(SlowStats, checks=(CONCURRENCY_CHECK,), timeout_s=2.0)
    assert statuses(report)["BE-23"] == "pass", report.render_text(color=False)
    assert SlowStats.stats_callers
    assert not [thread.name for thread in SlowStats.stats_callers if thread.is_alive()]


class BeforeEachDataCall(CorrectBackend):
    """Correct; runs ``before()`` ahead of each of the calls BE-23's workers make (batch_exists, batch_get_v1,
    batch_set_v1)."""

    def before(self) -> None:
        pass

    def batch_exists(self, keys, extra_info=None):
        self.before()
        return super().batch_exists(keys, extra_info)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        self.before()
        return super().batch_get_v1(keys, host_indices, extra_info)

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        self.before()
        return super().batch_set_v1(keys, host_indices, extra_info)


class CrawlsUntilLetGo(BeforeEachDataCall):
    """Correct but slow: each data call on BE-23's instance takes ``step`` s (under the run's deadline) until the test
    lets it go, and get_stats does not return until then."""

    let_go = threading.Event()
    step = 0.1

    def before(self) -> None:
        if "-threads" in self.config.model_name:
            self.let_go.wait(self.step)

    def get_stats(self):
        self.let_go.wait(30)
        return super().get_stats()


@pytest.mark.clause("BE-23")
def test_workers_still_running_at_the_timeout_fail_the_check_and_are_left_as_daemons() -> None:
    """Three workers of 40 calls of 0.1 s each need 4 s: under a timeout of 0.5 s the check stops waiting for them,
    fails BE-23 saying they did not finish, and leaves them and the stats thread (stuck in get_stats) running as
    daemon threads, which never keep the process alive."""
    CrawlsUntilLetGo.let_go.clear()
    running, stats = [], []
    try:
        report = run(CrawlsUntilLetGo, checks=(CONCURRENCY_CHECK,), timeout_s=0.5)
        running = [thread for thread in threading.enumerate() if thread.name.startswith("hicache-conform-worker-")]
        stats = [thread for thread in threading.enumerate() if thread.name == "hicache-conform-stats"]
        outcome = next(item for item in report.sections[0].checks if item.check == CONCURRENCY_CHECK)
        assert outcome.status == "fail", outcome
        assert outcome.message == "3 worker thread(s) did not finish within 0.5 s (deadlock?)"
        assert len(running) == 3 and all(thread.daemon for thread in running), running
        assert stats and all(thread.daemon for thread in stats), stats
    finally:
        CrawlsUntilLetGo.let_go.set()
        for thread in running + stats:  # let them end here, not inside torch while the interpreter exits
            thread.join(30)


class StatsHangOnceIoRan(BeforeEachDataCall):
    """get_stats waits for the IO it has seen start to drain, on a condition the data calls never signal: called
    alone it returns at once, but once BE-23's workers have called, it hangs until the test lets it go (BE-23:
    get_stats from a fourth thread beside the IO threads)."""

    let_go = threading.Event()
    io_ran = threading.Event()

    def before(self) -> None:
        if "-threads" in self.config.model_name:
            self.io_ran.set()

    def get_stats(self):
        if self.io_ran.is_set():
            self.let_go.wait(30)
        return super().get_stats()


@pytest.mark.clause("BE-23")
def test_a_get_stats_that_hangs_while_io_runs_fails_the_check() -> None:
    """The workers end, but the stats thread is still inside get_stats a timeout (1 s) later: the check fails BE-23
    saying so, and leaves the thread running as a daemon."""
    StatsHangOnceIoRan.let_go.clear()
    StatsHangOnceIoRan.io_ran.clear()
    try:
        outcome = concurrency_outcome(StatsHangOnceIoRan, timeout_s=1.0)
        assert outcome.status == "fail", outcome
        assert outcome.message == "get_stats did not return within 1.0 s after the workers ended", outcome.message
    finally:
        StatsHangOnceIoRan.let_go.set()
        for thread in threading.enumerate():
            if thread.name == "hicache-conform-stats":
                thread.join(30)


class CrawlsBriefly(CrawlsUntilLetGo):
    """As CrawlsUntilLetGo, each call taking 16 ms: a worker's 40 calls take at least 0.64 s."""

    step = 0.016


@pytest.mark.clause("BE-23")
def test_workers_that_end_past_the_timeout_fail_the_check() -> None:
    """The check waits for the workers until the run's timeout (0.3 s) after they start, and no longer: workers that
    need at least 0.64 s have not finished then, and fail it, though each would end well within a second."""
    CrawlsBriefly.let_go.clear()
    try:
        outcome = concurrency_outcome(CrawlsBriefly, timeout_s=0.3)
        assert outcome.status == "fail", outcome
        assert outcome.message == "3 worker thread(s) did not finish within 0.3 s (deadlock?)"
    finally:
        CrawlsBriefly.let_go.set()
        for thread in threading.enumerate():
            if thread.name.startswith("hicache-conform-worker-") or thread.name == "hicache-conform-stats":
                thread.join(30)


class StatsRecordOverflows(CrawlsUntilLetGo):
    """Packs its call counts into a fixed binary record of 16-bit fields for a metrics exporter: get_stats raises
    struct.error from its 65,536th call on (BE-23: get_stats is called for as long as the engine runs). Its data calls
    take 50 ms each, so the three workers run for two seconds."""

    step = 0.05

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.stats_calls = 0

    def get_stats(self):
        self.stats_calls += 1
        return struct.pack("<H", self.stats_calls)


@pytest.mark.clause("BE-23")
def test_get_stats_is_called_tens_of_thousands_of_times_while_io_runs() -> None:
    """The stats thread calls get_stats without pause while the workers run, up to 100,000 calls: a get_stats that
    breaks only at its 65,536th call is reached while two seconds of IO run, and fails the check."""
    StatsRecordOverflows.let_go.clear()
    outcome = concurrency_outcome(StatsRecordOverflows, timeout_s=10.0)
    assert outcome.status == "fail", outcome
    overflow = r"get_stats raised error: .*format requires 0 <= number <= 65535 while IO ran \(1 problem\(s\) in all\)"
    assert re.fullmatch(  # the count goes on: the second round's first call overflows too
        f"{overflow}; a second round of the same calls on fresh keys failed too: {overflow}; reproducible",
        outcome.message,
    ), outcome.message


class ClientBoundToItsFirstThread(BeforeEachDataCall):
    """Opens its store client on the first data call and, like a connection that checks the thread using it (sqlite3's
    ``check_same_thread``), raises on any call from another thread (BE-23: SGLang calls from several threads)."""

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.owner: Optional[threading.Thread] = None
        self.refused = itertools.count(1)

    def before(self) -> None:
        if self.owner is None:
            self.owner = threading.current_thread()
        elif self.owner is not threading.current_thread():
            raise RuntimeError(
                f"store client used outside the thread that opened it (refused call {next(self.refused)})"
            )


@pytest.mark.clause("BE-23")
def test_a_worker_goes_on_after_a_failed_call_and_every_failure_is_counted() -> None:
    """Every call from a worker raises on ClientBoundToItsFirstThread: each worker goes on to its next call, and the
    verdict names the first failure and counts all 3 x 40, not one per worker. (Each worker reports a failure before
    it makes its next call, so the first failure reported is one of the workers' first three calls.) The same call
    made alone, from the thread that opened the client, does not fail: a race, BE-23's."""
    outcome = concurrency_outcome(ClientBoundToItsFirstThread)
    assert outcome.status == "fail", outcome
    refused = (
        r"thread \d+: batch_(?:exists|[gs]et_v1)\(.*\) raised RuntimeError: store client used outside the thread "
        r"that opened it \(refused call (\d+)\) \(120 problem\(s\) in all\); the same call made alone does not fail"
    )
    named = re.fullmatch(  # every call of the second round's workers is refused too
        f"{refused}; a second round of the same calls on fresh keys failed too: {refused}; reproducible",
        outcome.message,
    )
    assert named and int(named.group(1)) <= 3, outcome.message


class OnePageReadReturnsItsSlotMask(CorrectBackend):
    """batch_get_v1 of one key returns, as that key's flag, the mask of the page's slots it copied (a tensor of
    page_size bools) where one bool was meant (BE-14). SGLang's test of the flag would raise on it."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        flags = super().batch_get_v1(keys, host_indices, extra_info)
        if len(flags) != 1:
            return flags
        return [torch.full((self.pools["kv"].page_size,), flags[0])]


@pytest.mark.clause("BE-14", "BE-23")
def test_a_flag_with_no_truth_value_is_named_where_it_was_met() -> None:
    """The suite's helpers fail BE-14 on a flag that has no truth value, naming the entry, where turning it into a
    bool used to stop a check on RuntimeError: BE-23's workers meet it, the one-key read made alone meets it again,
    so it is no race: BE-23 is not reached, pointing at BE-14; a check whose setup read meets it is skipped saying
    so."""
    outcome = concurrency_outcome(OnePageReadReturnsItsSlotMask)
    assert outcome.status == "skip" and outcome.needs == "BE-14", outcome
    assert re.fullmatch(
        r"batch_get_v1's entry 0 is <tensor \(64,\) bool>, not a bool \(RuntimeError: Boolean value of Tensor with "
        r"more than one (value|values) is ambiguous\) \(also for get made alone on fresh keys stored '\S+' \(S "
        r"stored\) with no other call running: no race\)",
        outcome.message,
    ), outcome.message
    report = run(OnePageReadReturnsItsSlotMask, checks=("v1_pages_round_trip_bit_for_bit",))
    outcome = report.sections[0].checks[0]
    assert outcome.status == "skip", outcome
    assert outcome.message is not None
    assert outcome.message.startswith("batch_get_v1's entry 0 is <tensor (64,) bool>, not a bool"), outcome.message


class _BarrierThatBreaks:
    """A barrier whose every wait ends as one does when a party waited out its timeout: broken."""

    def __init__(self, parties: int) -> None:
        self.parties = parties

    def wait(self, timeout=None) -> int:
        raise threading.BrokenBarrierError


@pytest.mark.clause("BE-23")
def test_workers_that_never_start_together_skip_the_check_with_the_reason(monkeypatch) -> None:
    """The workers wait for each other and the main thread before their first call; a barrier broken by a stall (a
    party waited timeout_s) means no call was made, so the check is skipped, saying why, not passed on nothing."""
    monkeypatch.setattr(
        checks_concurrency, "threading", SimpleNamespace(**{**vars(threading), "Barrier": _BarrierThatBreaks})
    )
    outcome = concurrency_outcome(CorrectBackend, timeout_s=2.0)
    assert outcome.status == "skip", outcome
    assert outcome.message.startswith("the 3 worker threads did not all start within 2.0 s"), outcome.message


class ResultStreamClosesOnOneKeyReads(CorrectBackend):
    """batch_get_v1 of one key returns a list that streams its flags from the store and raises ConnectionError when
    iterated (the stream closed): a list of the right length whose reading fails in the suite's own helper."""

    class Streamed(list):
        def __iter__(self):
            raise ConnectionError("result stream closed")

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        flags = super().batch_get_v1(keys, host_indices, extra_info)
        return self.Streamed(flags) if len(flags) == 1 else flags


@pytest.mark.clause("BE-23")
def test_an_error_of_the_suites_own_in_a_worker_is_reported_and_the_worker_goes_on() -> None:
    """A worker's call that ends in an error the suite's helpers did not name (here ConnectionError, raised while the
    helper reads the result) is reported as that call raising, and the worker goes on; every one-key get fails, also
    made alone once the threads have ended: no race, so BE-23 is not reached, pointing at the read's clause."""
    outcome = concurrency_outcome(ResultStreamClosesOnOneKeyReads)
    assert outcome.status == "skip" and outcome.needs == "BE-15", outcome
    assert re.fullmatch(
        r"get raised ConnectionError: result stream closed \(also for get made alone on fresh keys stored '\S+' "
        r"\(S stored\) with no other call running: no race\)",
        outcome.message,
    ), outcome.message


@pytest.mark.clause("BE-23")
def test_history_lines_show_the_first_twelve_calls_on_the_key() -> None:
    """Under a failure, the calls on the key are shown in time order, the first twelve only, each from its start to its
    end in whole microseconds (a call from 999 ns to 1,998 ns shows as 0..1)."""
    names = Names("run", "model")
    (key,) = names.new_keys(1)
    origin = 7_000_000_000
    events = [
        Event(
            thread=1,
            operation="get",
            keys=(key,),
            start=origin + 2_000 * n + 999,
            end=origin + 2_000 * n + 1_998,
            outcome=[False],
        )
        for n in range(13, -1, -1)
    ]
    lines = _history(SimpleNamespace(names=names), events, key, origin).splitlines()  # type: ignore[arg-type]
    assert [line.split("µs")[0].split()[1] for line in lines] == [f"{2 * n}..{2 * n + 1}" for n in range(12)]


@pytest.mark.clause("BE-19")
def test_the_long_chain_backs_its_indexer_up_as_kv_derived() -> None:
    """BE-21's chain is backed up as SGLang backs a slice up: the indexer pool KV-derived (``indices_from_pool`` KV).
    DerivedResultsFiledUnderKv files a KV-derived transfer's flags under ``kv``, so the backup's result leaves the
    indexer out and the check is blocked on BE-19; an indexer backed up from its own slots would hide that."""
    report = run(DerivedResultsFiledUnderKv, checks=("batch_exists_v2_takes_a_whole_chain",))
    outcome = next(item for item in report.sections[0].checks if item.check == "batch_exists_v2_takes_a_whole_chain")
    assert outcome.status == "skip", report.render_text(color=False)
    assert outcome.message == "batch_set_v2 left pool 'indexer' out of its result"


@pytest.mark.clause("BE-21")
def test_the_long_chain_is_not_held_against_a_backend_that_refused_part_of_its_backup() -> None:
    """A write may be refused: where the backend refused any page of BE-21's chain, in KV or in a sidecar pool, the
    hit it then reports is not the check's to judge. RefusesPagesOfZeros stores the chain's KV pages and refuses its
    sidecar pages (host pages the check leaves unfilled), and must not fail the check."""
    report = run(RefusesPagesOfZeros, checks=("batch_exists_v2_takes_a_whole_chain",))
    outcome = next(item for item in report.sections[0].checks if item.check == "batch_exists_v2_takes_a_whole_chain")
    assert outcome.status != "fail", report.render_text(color=False)


class BuffersWritesWhileTheStoreFails(ChecksItsHostIndices):
    """While its store fails, a write is kept in a write-behind buffer and reported True; the buffer is flushed into
    the store as soon as it works again, before any other store operation. Correct: BE-5 asks only that a page
    reported stored while the store failed reads back afterwards. It checks its host indices as SGLang passes them."""

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.pending: dict[str, bytes] = {}

    def flush(self) -> None:
        if not self.store_failing and self.pending:
            with self.lock:
                self.objects.update(self.pending)
                self.pending.clear()

    def put(self, name: str, data: bytes) -> bool:
        if self.store_failing:
            self.pending[name] = data
            return True
        self.flush()
        return super().put(name, data)

    def fetch(self, name: str):
        self.flush()
        return super().fetch(name)


@pytest.mark.clause("BE-5")
def test_a_write_buffered_while_the_store_fails_is_read_back_one_host_page_per_key() -> None:
    """BuffersWritesWhileTheStoreFails reports its writes True while the store fails and stores them once it works:
    BE-5 reads those pages back afterwards, into one host page per key (SGLang's host pool never hands a call more or
    fewer), and must pass."""
    report = run(BuffersWritesWhileTheStoreFails, checks=("storage_errors_are_failures_not_exceptions",))
    assert statuses(report)["BE-5"] == "pass", report.render_text(color=False)


class OneCallAtATime(CorrectBackend):
    """Its client serves one page transfer at a time and raises RuntimeError on a transfer begun while another is in
    flight, where SGLang's IO threads call it concurrently (BE-23)."""

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.busy = threading.Lock()

    def one_at_a_time(self, transfer, *args):
        if not self.busy.acquire(blocking=False):
            raise RuntimeError("client busy: another transfer is in flight")
        try:
            time.sleep(0.005)  # the transfer's round trip, long enough for the other threads' calls to meet it
            return transfer(*args)
        finally:
            self.busy.release()

    def read_pages(self, pool, keys, host_indices):
        return self.one_at_a_time(super().read_pages, pool, keys, host_indices)

    def write_pages(self, pool, keys, host_indices):
        return self.one_at_a_time(super().write_pages, pool, keys, host_indices)


@pytest.mark.clause("BE-23")
def test_a_backend_call_that_raises_in_a_worker_is_reported_as_that_call_failed() -> None:
    """A worker's call that raises is a failure the suite's call wrapper has already named (the call, its error):
    the verdict is that thread's message as the wrapper wrote it, not a second wrapping of it."""
    check = "concurrent_calls_keep_every_key_consistent"
    report = run(OneCallAtATime, checks=(check,))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "fail", outcome
    busy = (
        r"thread \d+: batch_[gs]et_v1\(.*\) raised RuntimeError: client busy: another transfer is in flight "
        r"\(\d+ problem\(s\) in all\); the same call made alone does not fail"
    )
    second = (  # whether the second round's calls overlap again depends on how its threads interleave
        f"a second round of the same calls on fresh keys failed too: {busy}; reproducible",
        r"a second round of the same calls on fresh keys passed: not reproducible \(it depends on how the threads "
        r"interleave\)",
    )
    assert outcome.message is not None
    assert re.fullmatch(f"{busy}; (?:{second[0]}|{second[1]})", outcome.message), outcome.message


class EvictsEverythingListingItsLengths(EvictsEverything):
    """Keeps nothing, and its batch_exists_v2 lists the prefix lengths it can restore (restorable_prefix_pages), as
    0.5.23's HiCacheFile does: none, so an empty list beside kv_hit_pages 0. Correct for a backend that may evict."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        queries = tuple(self.pool_query(transfer, keys) for transfer in pool_transfers or ())
        hit, entries, restorable = plain_fold(self.pool_present("kv", keys), queries)
        return PoolTransferResult(
            kv_hit_pages=hit, extra_pool_hit_pages=dict(entries), restorable_prefix_pages=list(restorable)
        )


@pytest.mark.clause("BE-26")
def test_an_evicting_backend_may_list_no_restorable_length_beside_a_hit_of_zero() -> None:
    """BE-26 lets a backend that may evict list fewer lengths than were written, down to none: an empty list beside
    kv_hit_pages 0 is its whole answer. The folding check then has no page kept to look at and skips, as for
    EvictsEverything; it must not fail the empty list."""
    check = "v2_exists_folds_pool_hits_per_policy"
    report = run(EvictsEverythingListingItsLengths, checks=(check,))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "skip", report.render_text(color=False)


class OneOpenInstancePerStore(CorrectBackend):
    """Serves one open instance per store: building another while ``open_at_once`` are open raises (an engine bound
    to one port, say), until close() lets one go."""

    open_at_once = 1
    open_instances: dict[str, int] = {}
    """Open instances by store, for every subclass."""

    def __init__(self, storage_config, kwargs=None):
        super().__init__(storage_config, kwargs)
        opened = self.open_instances.get(self.store_name, 0)
        if opened >= self.open_at_once:
            raise OSError(f"store {self.store_name!r} is already open in this process (address in use)")
        self.open_instances[self.store_name] = opened + 1
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.open_instances[self.store_name] -= 1


class TwoOpenInstancesPerStore(OneOpenInstancePerStore):
    """Serves two open instances per store: the main one and one more, until close() lets one go."""

    open_at_once = 2


@pytest.mark.clause("BE-1")
def test_a_state_machine_instance_that_cannot_be_built_blocks_the_check() -> None:
    """The main instance is open while the state machine builds its own, so OneOpenInstancePerStore fails the
    machine's build: the check is blocked on BE-1 (skipped, saying why), never failed on a clause of its own. Its
    teardown has no instance to clear, and must not reach for one (an AttributeError would fail BE-2)."""
    check = "stateful_model_of_a_lossy_write_once_store"
    report = run(OneOpenInstancePerStore, checks=(check,))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "skip", report.render_text(color=False)
    assert outcome.message is not None
    assert outcome.message.startswith("building the backend raised OSError: store "), outcome.message


@pytest.mark.clause("BE-11")
def test_the_state_machine_closes_each_instance_it_built() -> None:
    """Each example of the state machine builds its own instance beside the main one; its teardown clears and closes
    it, so TwoOpenInstancesPerStore builds the next example's. A teardown that left its instance open would make the
    second example's build raise, and the check fail a correct backend."""
    check = "stateful_model_of_a_lossy_write_once_store"
    report = run(TwoOpenInstancesPerStore, checks=(check,))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "pass", report.render_text(color=False)


@pytest.mark.clause("BE-20")
def test_the_unregistered_pool_check_writes_its_keys_pages_into_the_registered_pool() -> None:
    """BE-20 asks the registered swa pool's write to succeed beside an unregistered transfer, so it must hand over its
    keys' pages: run alone, the swa pool's pages are still zeros, which RefusesPagesOfZeros may refuse. A check that
    left a page unfilled would fail a correct backend for refusing it."""
    report = run(RefusesPagesOfZeros, checks=("v2_unregistered_pool_is_all_false",))
    assert statuses(report)["BE-20"] == "pass", report.render_text(color=False)


class RefusesPagesOnceFull(CorrectBackend):
    """Has room for 64 pages in the whole store and refuses (False, nothing stored) every new page past them. Correct:
    a write may be refused. ``refused`` counts the pages its last write refused."""

    room = 64
    refused = 0

    def write_pages(self, pool, keys, host_indices):
        results = []
        for index, key in enumerate(keys):
            with self.lock:
                full = len(self.objects) >= self.room and self.name(key, pool) not in self.objects
            slots = host_indices[index * self.pools[pool].page_size :] if pool in self.pools else host_indices
            results.append(not full and super().write_pages(pool, [key], slots)[0])
        type(self).refused = results.count(False)
        return results


@pytest.mark.clause("BE-2")
def test_a_chain_the_backend_refuses_is_skipped_saying_how_many_pages_it_refused() -> None:
    """BE-2's long chain needs every page of it stored: a backend that refuses pages once full skips the check, and
    the reason counts the pages of the slice it refused."""
    check = "batch_exists_takes_a_whole_chain"
    report = run(RefusesPagesOnceFull, checks=(check,))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    assert outcome.status == "skip", report.render_text(color=False)
    assert 0 < RefusesPagesOnceFull.refused < 128
    assert outcome.message == f"the backend refused {RefusesPagesOnceFull.refused} of 128 pages of the chain"


class WriteRaisesOnceItHasReadItsPages(CorrectBackend):
    """batch_set_v1 stores its pages and then raises (a bug BE-5 reports): BE-7, which runs the write in a thread of
    its own, looks only at visibility."""

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        super().batch_set_v1(keys, host_indices, extra_info)
        raise RuntimeError("connection reset after the put")


@pytest.mark.clause("BE-7")
def test_a_held_write_that_raises_leaves_no_unhandled_exception_in_the_suites_thread(monkeypatch) -> None:
    """The exception of BE-7's held write is the backend's, reported by other checks: the writer thread keeps it,
    and the suite prints no traceback of an unhandled exception in a thread of its own."""
    unhandled: list = []
    monkeypatch.setattr(threading, "excepthook", unhandled.append)
    report = run(WriteRaisesOnceItHasReadItsPages, checks=("pages_are_invisible_until_fully_written",))
    assert statuses(report)["BE-7"] == "pass", report.render_text(color=False)
    assert unhandled == []


class CountsAsAFloatGivenExtraInfo(CorrectBackend):
    """batch_exists given extra_info returns its count as a float, 2.0 for 2 (a BE-2 bug: the count is an int)."""

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        return count if extra_info is None else float(count)


@pytest.mark.clause("BE-8")
def test_the_extra_info_check_judges_the_count_and_leaves_its_type_to_be2() -> None:
    """BE-8 asks whether batch_exists takes each shape of extra_info and counts the keys asked about; the count's type
    is BE-2's (every check that counts through PageIO.count fails a float). A count equal to 2, of another type,
    passes BE-8: one bug, one clause."""
    report = run(CountsAsAFloatGivenExtraInfo, checks=("extra_info_accepted_in_every_shape",))
    assert statuses(report)["BE-8"] == "pass", report.render_text(color=False)


class PromisesNoPage(CorrectBackend):
    """Declares that it may evict and never promises a page: batch_exists answers 0 (a page counted could be gone
    before the read), while reads serve every page it still holds. Correct: a backend that may evict may count a
    shorter run, down to none."""

    hicache_may_evict = True

    def batch_exists(self, keys, extra_info=None):
        return 0


@pytest.mark.clause("NS-5", "NS-7")
def test_a_backend_counting_nothing_has_shown_the_pages_it_read_back() -> None:
    """NS-5 and NS-7 look at a count and a read: a page read back is seen though the count is 0, so a backend that
    may evict and promises no page passes them, never skips for want of a page."""
    checks = ("replicated_kv_is_shared_across_tp_ranks", "pages_survive_a_rebuild")
    report = run(PromisesNoPage, checks=checks)
    outcomes = {outcome.check: outcome.status for outcome in report.sections[0].checks if outcome.check in checks}
    assert outcomes == dict.fromkeys(checks, "pass"), report.render_text(color=False)


@pytest.mark.clause("BE-11")
def test_the_clear_check_writes_its_keys_sidecar_pages() -> None:
    """BE-11's check of every pool asks batch_set_v2 to store its keys' sidecar pages before clear(), and skips if
    the write is refused: run alone, the sidecar pools still hold zeros, which RefusesPagesOfZeros may refuse, so the
    check must fill its pages first."""
    report = run(RefusesPagesOfZeros, checks=("clear_removes_every_pool",))
    assert statuses(report)["BE-11"] == "pass", report.render_text(color=False)


@pytest.mark.clause("BE-21")
def test_the_long_v2_chain_writes_sidecar_pages_that_are_not_zeros() -> None:
    """BE-21's chain of thousands of keys writes its sidecar pages from host pages it never reads back; run alone,
    those pages held zeros, which RefusesPagesOfZeros may refuse, so the check skipped a correct backend. It fills
    them first, and the check runs."""
    report = run(RefusesPagesOfZeros, checks=("batch_exists_v2_takes_a_whole_chain",))
    assert statuses(report)["BE-21"] == "pass", report.render_text(color=False)


@pytest.mark.clause("BE-28")
def test_a_one_page_cache_serving_two_pools_sees_its_page_through_the_first() -> None:
    """HoldsOnePage through the legacy methods, serving a second host pool: the first controller's later write
    evicts the second's page, so BE-28 finds a page only through the first pool. A page seen through one pool is
    seen: the check passes, never skips."""
    report = run(HoldsOnePageForEveryController, checks=("second_host_pool_is_served_or_refused",), **LEGACY_MODE)
    assert statuses(report)["BE-28"] == "pass", report.render_text(color=False)


@pytest.mark.clause("PFX-1")
def test_a_full_cache_has_shown_its_pages_under_the_first_prefix_state() -> None:
    """AdmitsNothingOnceFull is filled by the suite's first round trip (four pages) and PFX-1's first chain (four
    more): the check finds pages under the first prefix state and none under the second, and must pass, not
    skip for want of a page."""
    report = run(AdmitsNothingOnceFull, checks=("prefix_states_none_empty_and_list_all_work",))
    assert statuses(report)["PFX-1"] == "pass", report.render_text(color=False)


def release_without_dp_rank():
    """The stand-in storage module with the config of SGLang 0.5.20, the last release before dp_rank (and before
    0.5.23's DCP fields and logical_page_size)."""
    module = make_storage_module()
    module.__sglang_version__ = "0.5.20"
    newer = {"dp_rank", "dcp_size", "dcp_rank", "logical_page_size"}
    kept = [
        (item.name, item.type) if item.default is dataclasses.MISSING else (item.name, item.type, item.default)
        for item in dataclasses.fields(module.HiCacheStorageConfig)
        if item.name not in newer
    ]
    writer = property(lambda config: not config.is_mla_model or config.tp_rank == 0)
    module.HiCacheStorageConfig = dataclasses.make_dataclass(
        "HiCacheStorageConfig", kept, namespace={"is_storage_writer": writer}
    )
    return module


@pytest.mark.clause("BE-25")
def test_an_edge_a_release_cannot_build_is_passed_over_not_the_end() -> None:
    """Under 0.5.20 the data-parallel edge cannot be built (no dp_rank); BE-25 passes over it and still builds the
    tp_lcm_size edge after it, where RefusesAnLcmAboveItsTpSize fails."""
    with installed(release_without_dp_rank()):
        report = run(RefusesAnLcmAboveItsTpSize, checks=("every_rank_inside_its_group_is_accepted",))
    assert report.sections[0].options["sglang_release"] == "0.5.20"
    assert statuses(report)["BE-25"] == "fail", report.render_text(color=False)


def test_a_prefix_list_left_in_a_reference_cycle_is_not_kept() -> None:
    """PFX-6's check collects the garbage before it calls a prefix_keys list kept: a backend that walks the prefix
    through a chain of nodes linked both ways keeps nothing past the call, though the list lives on in the cycle
    until the collector runs. With automatic collection off, so that no call's cycle is freed before the check
    looks, every list is still alive when the check looks; the check must pass it."""
    check = "prefix_keys_are_copied_if_kept"
    gc.disable()
    try:
        report = run(WalksThePrefixThroughLinkedNodes, checks=(check,))
    finally:
        gc.enable()
    outcomes = {outcome.check: outcome.status for outcome in report.sections[0].checks}
    assert outcomes[check] == "pass" and failed(report) == [], report.render_text(color=False)
