"""What the checks try: the inputs their properties draw and the cases they always try, whatever the draws.

A check is only as strong as the cases it reaches. These tests pin each property's input domain (its draws reach
the boundaries its documentation names, and nothing past them) and show that the explicit examples alone catch
the bugs they are there for (the draws turned off).
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, settings
from hypothesis.errors import NoSuchExample

from hicache_contracts.conformance.session import properties
from hicache_contracts.conformance.checks.core_hits import PRESENCE_PATTERNS
from hicache_contracts.conformance.checks.v2 import pool_patterns
from hicache_contracts.conformance.session.pools import PoolHooks
from hicache_contracts.conformance.session.wire import PLACEHOLDER
from hicache_contracts.models import PoolTransferResult
from tests.conformance.correct_backend import pool_name
from tests.conformance.helpers import run, statuses
from tests.conformance.planted_branches import CorrectBackend, HoldsOnePage
from tests.oracles import plain_pool_boundary

SEARCH = settings(database=None, derandomize=True, max_examples=500)


def reaches(strategy, condition) -> bool:
    """Whether ``strategy`` can draw a value meeting ``condition`` (a search of up to 500 draws, derandomized)."""
    try:
        find(strategy, condition, settings=SEARCH)
    except NoSuchExample:
        return False
    return True


@pytest.fixture
def explicit_examples_only(monkeypatch):
    """Run every property on its explicit examples alone: no draws."""
    plain = properties.property_settings

    def explicit(examples, steps=None):
        return settings(plain(examples, steps), phases=(Phase.explicit,))

    monkeypatch.setattr(properties, "property_settings", explicit)


# ---------------------------------------------------------------- BE-2
@pytest.mark.clause("BE-2")
def test_be_2_draws_chains_of_none_up_to_twelve_keys() -> None:
    assert reaches(PRESENCE_PATTERNS, lambda flags: flags == [])
    assert reaches(PRESENCE_PATTERNS, lambda flags: len(flags) == 12)
    assert not reaches(PRESENCE_PATTERNS, lambda flags: len(flags) > 12)


class CountsFromTheFirstStoredKey(CorrectBackend):
    """batch_exists skips the missing keys before the first stored one and counts the run from there."""

    def batch_exists(self, keys, extra_info=None):
        stored = [super(CountsFromTheFirstStoredKey, self).batch_exists([key]) == 1 for key in keys]
        return super().batch_exists(keys[stored.index(True) :], extra_info) if True in stored else 0


@pytest.mark.clause("BE-2")
def test_be_2s_explicit_examples_alone_catch_a_count_past_a_leading_miss(explicit_examples_only) -> None:
    """A miss first, then hits: the count is 0. A backend that starts counting at the first stored key passes a
    hole after a hit ([S - S] gives 1 either way), so only a pattern that starts with a miss shows it."""
    report = run(CountsFromTheFirstStoredKey, checks=("batch_exists_counts_the_leading_run",))
    assert statuses(report)["BE-2"] == "fail", report.render_text(color=False)
    report = run(CorrectBackend, checks=("batch_exists_counts_the_leading_run",))
    assert statuses(report)["BE-2"] == "pass", report.render_text(color=False)


# ---------------------------------------------------------------- BE-21, HYB-6, HYB-7, BE-26
FOLDING_CHECK = "v2_exists_folds_pool_hits_per_policy"


@pytest.mark.clause("BE-21")
def test_the_fold_check_draws_chains_of_none_up_to_six_pages_and_windows_of_none_up_to_three() -> None:
    strategy = pool_patterns()
    assert reaches(strategy, lambda drawn: len(drawn[0]) == 0)
    assert reaches(strategy, lambda drawn: len(drawn[0]) == 6)
    assert not reaches(strategy, lambda drawn: len(drawn[0]) > 6)
    assert reaches(strategy, lambda drawn: drawn[3] == 0)
    assert reaches(strategy, lambda drawn: drawn[3] == 3)
    assert not reaches(strategy, lambda drawn: drawn[3] > 3)
    assert reaches(strategy, lambda drawn: drawn[4]) and reaches(strategy, lambda drawn: not drawn[4])


class RecordsQueries(CorrectBackend):
    """Correct; records each batch_exists_v2 as (its keys, each transfer's keys by pool name)."""

    queries: list = []

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        transfers = {pool_name(transfer.name): list(transfer.keys or ()) for transfer in pool_transfers or ()}
        self.queries.append((list(keys), transfers))
        return super().batch_exists_v2(keys, pool_transfers, extra_info)


@pytest.mark.clause("HYB-7")
def test_the_trailing_window_is_the_chains_last_keys_and_a_window_past_the_chain_is_tried() -> None:
    """The swa transfer of a hit query carries one placeholder key per window page, as SGLang's tree builds it
    (the chain's last N pages, whose real keys are filled in only for the read); a window of N at least the
    chain's length covers the whole chain (a short prompt under a long sliding window), and the draws try that
    case."""
    RecordsQueries.queries = []
    report = run(RecordsQueries, checks=(FOLDING_CHECK,), profile="standard")
    assert statuses(report)["BE-21"] == "pass", report.render_text(color=False)
    windows = [(keys, transfers["swa"]) for keys, transfers in RecordsQueries.queries if "swa" in transfers]
    assert windows and all(set(window) <= {PLACEHOLDER} and len(window) <= len(keys) for keys, window in windows)
    assert any(keys and len(window) == len(keys) for keys, window in windows)


class KvEntryCountsStoredPages(CorrectBackend):
    """batch_exists_v2's KV entry counts the KV pages stored, not their leading run (the hit itself is right)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        stored = sum(self.pool_present("kv", list(keys)))
        entries = {**result.extra_pool_hit_pages, **({"kv": stored} if stored else {})}
        return PoolTransferResult(
            kv_hit_pages=result.kv_hit_pages,
            extra_pool_hit_pages=entries,
            restorable_prefix_pages=result.restorable_prefix_pages,
        )


class TrailingPoolCountedWithoutKv(CorrectBackend):
    """batch_exists_v2 reports each trailing_pages pool's boundary over the whole chain, as if every KV page were
    stored: a pool counted on its own, not against the KV run (the hit itself is right)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        entries = dict(result.extra_pool_hit_pages)
        for transfer in pool_transfers or ():
            name, policy, window, present = self.pool_query(transfer, list(keys))
            boundary = plain_pool_boundary(policy, window, present, len(keys))
            if policy == "trailing_pages" and boundary:
                entries[name] = boundary
        return PoolTransferResult(
            kv_hit_pages=result.kv_hit_pages,
            extra_pool_hit_pages=entries,
            restorable_prefix_pages=result.restorable_prefix_pages,
        )


@pytest.mark.clause("BE-21", "HYB-7")
@pytest.mark.parametrize(
    "backend, clause_id",
    [(KvEntryCountsStoredPages, "BE-21"), (TrailingPoolCountedWithoutKv, "HYB-7")],
    ids=["kv-entry-counts-stored-pages", "trailing-pool-without-kv"],
)
def test_the_fold_checks_explicit_examples_alone_catch_an_entry_given_with_no_kv_hit(
    explicit_examples_only, backend, clause_id
) -> None:
    """With no KV hit nothing is restorable, so no pool is examined and an entry reported anyway must be 0: the
    example whose first KV page is missing (KV '-S', swa '(S-)' with a window of 1) shows an entry of 1 there,
    the one value no other example reaches for these bugs."""
    report = run(backend, checks=(FOLDING_CHECK,))
    assert statuses(report)[clause_id] == "fail", report.render_text(color=False)
    report = run(CorrectBackend, checks=(FOLDING_CHECK,))
    assert statuses(report)[clause_id] == "pass", report.render_text(color=False)


# ---------------------------------------------------------------- BE-7
@pytest.mark.clause("BE-7")
@pytest.mark.parametrize("timeout_s, held", [(4.0, 8.0), (30.0, 20.0)], ids=["short", "capped"])
def test_be_7_holds_the_write_twice_as_long_as_it_waits_for_a_step(monkeypatch, timeout_s, held) -> None:
    """BE-7 waits for each step (the write reaching its held page, the poller, each thread's end) at most
    min(timeout_s, 10 s), and holds the write twice that: the suite, not the hold's own timeout, then lets a backend
    that serialises its calls go on, so its lookups return only after the release and show nothing. (The
    arguments are recorded; nothing here is timed.)"""
    holds = []
    plain = PoolHooks.holding  # the suite's hooks, on its own pools and mixed into a release's

    def recorded(pool, pages, timeout_s):
        holds.append(timeout_s)
        return plain(pool, pages, timeout_s)

    monkeypatch.setattr(PoolHooks, "holding", recorded)
    report = run(CorrectBackend, checks=("pages_are_invisible_until_fully_written",), timeout_s=timeout_s)
    assert statuses(report)["BE-7"] == "pass", report.render_text(color=False)
    assert holds == [held]


# ---------------------------------------------------------------- what counts as a page seen
class KeepsOnePageAndForgetsWhatIsRead(CorrectBackend):
    """May evict. Room for one page in the whole store, the oldest kept: a write into a full store is confirmed and
    dropped at once. A read drops the pages it asks for before it looks, so it misses them. Correct (each miss is an
    eviction it may make); right after a write a lookup finds the one page kept, and no read returns it."""

    hicache_may_evict = True

    def put(self, name, data):
        with self.lock:
            return True if self.objects else super().put(name, data)

    def read_pages(self, pool, keys, host_indices):
        with self.lock:
            for key in keys:
                self.objects.pop(self.name(key, pool), None)
        return super().read_pages(pool, keys, host_indices)


class WritesEvictAndReadsForgetEverything(HoldsOnePage):
    """May evict. Room for one page, each write evicting what was held (HoldsOnePage); a read drops every page held
    before it looks, so it misses. Correct; a lookup after a write finds that write's first page, no read returns it."""

    def read_pages(self, pool, keys, host_indices):
        with self.lock:
            self.objects.clear()
        return super().read_pages(pool, keys, host_indices)


@pytest.mark.clause("NS-5", "NS-7", "PFX-1")
@pytest.mark.parametrize("backend", [KeepsOnePageAndForgetsWhatIsRead, WritesEvictAndReadsForgetEverything])
@pytest.mark.parametrize(
    "check",
    [
        "replicated_kv_is_shared_across_tp_ranks",
        "pages_survive_a_rebuild",
        "prefix_states_none_empty_and_list_all_work",
    ],
)
def test_a_lookup_that_finds_one_page_is_a_page_seen(backend, check) -> None:
    """An evicting backend's misses are allowed, so a check skips when nothing it wrote was seen. One page found by
    a lookup is seen, though every read after it misses: the check's assertions ran on it, and it passes."""
    report = run(backend, checks=(check,))
    (outcome,) = [item for item in report.sections[0].checks if item.check == check]
    assert outcome.status == "pass", report.render_text(color=False)
