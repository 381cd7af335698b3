"""The plain fold of ``tests/oracles.py`` is a second formulation: it agrees with the spec and refutes planted folds.

Scenario: hypothesis draws KV presence and up to three pools of every policy;
three planted folds (the minimum of each pool's largest hit, SGLang #39147; a
BLOCK_GROUPS pool that gates; pools examined after no length is left).
Expected: the plain fold equals ``fold_pool_query`` everywhere and differs from
each planted fold: the first on #39147's store and on drawn stores where the
folds part, the others on a fixed store.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from hicache_spec import fold_pool_hits, fold_pool_query
from tests.oracles import plain_fold, plain_pool_boundary
from tests.spec import planted_spec
from tests.spec.test_planted import gating_fold_cases, is_refuted
from tests.spec.test_pools import fold_cases

ISSUE_39147 = (
    (True,) * 5,
    (
        ("indexer", "all_pages", 0, (True, True, True, True, False)),
        ("swa", "trailing_pages", 2, (True, True, False, True, True)),
    ),
)
"""KV and an ALL_PAGES pool reach 4; a trailing pool of 2 pages restores 2 and 5 but not 3 or 4."""


def gating_block_groups(kv_present, pools):
    """Planted: a BLOCK_GROUPS pool narrows the hit like an ALL_PAGES pool (HYB-9 says it never gates)."""
    return fold_pool_query(
        kv_present, tuple((n, "all_pages" if p == "block_groups" else p, w, f) for n, p, w, f in pools)
    )


def examines_every_pool(kv_present, pools):
    """Planted: entries for pools after the restorable set emptied, as if every pool were examined."""
    hit, entries, restorable = fold_pool_query(kv_present, pools)
    kv_hit = dict(entries).get("kv", 0)
    seen = dict(entries)
    for name, policy, window, present in pools:
        own = plain_pool_boundary(policy, window, present, kv_hit)
        if own and name not in seen:
            seen[name] = own
    return hit, tuple(seen.items()), restorable


@pytest.mark.clause("BE-21", "BE-26", "HYB-6", "HYB-7", "HYB-9")
@given(fold_cases)
def test_plain_fold_agrees_with_the_spec(case):
    assert plain_fold(*case) == fold_pool_query(*case)
    assert plain_fold(*case)[:2] == fold_pool_hits(*case)


def agreeing(fold, parts=3):
    """A check that ``fold`` gives the plain fold's first ``parts`` answers."""

    def check(case):
        assert fold(*case)[:parts] == plain_fold(*case)[:parts]

    return check


@pytest.mark.clause("BE-21", "HYB-7")
def test_plain_fold_refutes_the_minimum_of_maxima():
    assert plain_fold(*ISSUE_39147) == (2, (("kv", 5), ("indexer", 4), ("swa", 5)), (1, 2))
    assert planted_spec.fold_pool_query_min_of_maxima(*ISSUE_39147)[0] == 4
    assert is_refuted(agreeing(planted_spec.fold_pool_query_min_of_maxima, parts=2), gating_fold_cases)


@pytest.mark.clause("HYB-9", "BE-21")
@pytest.mark.parametrize(
    "planted, store",
    [
        (gating_block_groups, ((True,) * 4, (("c4", "block_groups", 2, (True, True, True, False)),))),
        (
            examines_every_pool,
            ((True, True), (("indexer", "all_pages", 0, (False, False)), ("swa", "trailing_pages", 1, (True, True)))),
        ),
    ],
    ids=["gating-block-groups", "examines-every-pool"],
)
def test_plain_fold_refutes_planted_folds(planted, store):
    with pytest.raises(AssertionError):
        agreeing(planted)(store)
    agreeing(fold_pool_query)(store)
