"""The vendor suite's fold oracle (BE-21, HYB-6, HYB-7, BE-26) follows SGLang 0.5.23's HiCacheFile.

A backend that folds with the minimum of each pool's largest hit (SGLang
#39147) fails BE-21; one that also reports pools after the restorable set
became empty, each with its own boundary, passes (SGLang's own backends stop
examining there, so the suite demands no such entry, and refuses none); one
that lists a length some pool cannot restore fails BE-26; one listing only the hit passes (a length left out only
shortens the agreed hit).
The correct folds are ``tests/oracles.py``'s plain formulation, not the
spec's ``fold_pool_query`` the suite judges by.
"""

from __future__ import annotations

from typing import Any

import pytest

from hicache_contracts import PoolTransferResult
from tests.conformance.correct_backend import CorrectBackend, ListsRestorableLengths
from tests.conformance.helpers import checks_for, failed, run, statuses
from tests.conformance.planted_evicting import EvictsAfterReadListingItsLengths
from tests.oracles import plain_fold, plain_pool_boundary
from tests.spec import planted_spec

FOLD_CLAUSES = ("BE-21", "HYB-6", "HYB-7", "BE-26")


class MinOfMaximaFold(CorrectBackend):
    """batch_exists_v2 takes the minimum of each pool's largest hit (SGLang's sim backend; HiCacheFile before 0.5.23)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        queries = tuple(self.pool_query(transfer, keys) for transfer in pool_transfers or ())
        hit, entries, _ = planted_spec.fold_pool_query_min_of_maxima(self.pool_present("kv", keys), queries)
        _, _, restorable = plain_fold(self.pool_present("kv", keys), queries)  # the lengths it lists are right
        return PoolTransferResult(
            kv_hit_pages=hit, extra_pool_hit_pages=dict(entries), restorable_prefix_pages=list(restorable)
        )


class WithRestorableSet(ListsRestorableLengths):
    """The correct fold, reporting restorable_prefix_pages as 0.5.23's HiCacheFile does."""


class ContiguousRestorableSet(WithRestorableSet):
    """Reports 1..hit as restorable, also where a trailing pool cannot restore some of those lengths (BE-26)."""

    def restorable(self, restorable: tuple) -> Any:
        return list(range(1, (restorable[-1] if restorable else 0) + 1))


class OnlyTheHitRestorable(WithRestorableSet):
    """Reports only the hit itself as restorable, leaving out the shorter lengths every pool can restore: correct
    (BE-26: a length left out only shortens the hit SGLang agrees on across ranks; every length listed restores)."""

    def restorable(self, restorable: tuple) -> Any:
        return list(restorable[-1:])


class KeptAsGiven:
    """A batch_exists_v2 result holding its fields as given, as SGLang's PoolTransferResult (a dataclass) does; the
    project's model would sort and dedupe the lengths before the suite saw them."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class ListsItsLengthsLongestFirst(WithRestorableSet):
    """The right restorable lengths, longest first and each twice: correct (BE-26 reads them as a set; SGLang marks
    each listed length in a mask)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        lengths = sorted(result.restorable_prefix_pages or (), reverse=True)
        return KeptAsGiven(
            kv_hit_pages=result.kv_hit_pages,
            extra_pool_hit_pages=dict(result.extra_pool_hit_pages),
            restorable_prefix_pages=lengths + lengths,
        )


class ReportsEveryPool(CorrectBackend):
    """Examines every pool, also after no length is left to restore, each entry its own boundary (allowed)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        keys = list(keys)
        queries = tuple(self.pool_query(transfer, keys) for transfer in pool_transfers or ())
        kv_present = self.pool_present("kv", keys)
        hit, entries, restorable = plain_fold(kv_present, queries)
        kv_hit = dict(entries).get("kv", 0)
        everything = dict(entries)
        for name, policy, window, present in queries:
            own = plain_pool_boundary(policy, window, present, kv_hit)
            if own and kv_hit:
                everything.setdefault(name, own)
        return PoolTransferResult(
            kv_hit_pages=hit, extra_pool_hit_pages=everything, restorable_prefix_pages=list(restorable)
        )


@pytest.mark.clause("BE-21", "HYB-7")
def test_min_of_maxima_fold_fails_be21():
    report = run(MinOfMaximaFold, checks=checks_for(FOLD_CLAUSES), profile="standard")
    assert "BE-21" in failed(report), statuses(report)


@pytest.mark.clause("BE-26")
def test_a_restorable_set_that_is_not_the_intersection_fails_be26():
    report = run(ContiguousRestorableSet, checks=checks_for(FOLD_CLAUSES), profile="standard")
    assert "BE-26" in failed(report), statuses(report)


@pytest.mark.clause("BE-21", "BE-26", "HYB-6", "HYB-7")
@pytest.mark.parametrize(
    "backend",
    [
        CorrectBackend,
        WithRestorableSet,
        ListsItsLengthsLongestFirst,
        ReportsEveryPool,
        EvictsAfterReadListingItsLengths,
        OnlyTheHitRestorable,
    ],
    ids=[
        "no-restorable-set",
        "restorable-set",
        "longest-first-twice",
        "reports-every-pool",
        "evicting-restorable-set",
        "only-the-hit-listed",
    ],
)
def test_correct_folds_pass(backend):
    report = run(backend, checks=checks_for(FOLD_CLAUSES), profile="standard")
    assert not [clause for clause in failed(report) if clause in FOLD_CLAUSES], statuses(report)
