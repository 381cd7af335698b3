"""The 0/1 boundaries and edge inputs of the spec functions, each against a plain second formulation.

Scenario: inputs at the edges a mutation of the spec code moves (hits of 0 and
1 token, a chain of exactly one page, rank 0, page size 0, a block-groups pool
before a gating pool, a local version suffix).
Expected: the value each clause states, computed here without the spec code.
Why it matters: these are the cases a wrong comparison or an off-by-one slips through.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import (
    ALL_PAGES,
    BLOCK_GROUPS,
    FAMILIES,
    KV,
    LEVELS,
    STORAGE_BATCH_SIZE,
    TRAILING_PAGES,
    check_dcp_config,
    clauses,
    clauses_for_level,
    compute_key_chain,
    is_prefetch_worth_it,
    is_storage_writer,
)
from hicache_spec.divergences import DIVERGENCES
from hicache_spec.pools import compute_restorable_lengths, fold_pool_query
from hicache_spec.registry import Clause
from hicache_spec.releases import LATEST_RELEASE, SGLANG_RELEASES, UnknownReleaseError, release_key
from hicache_spec.render import render_markdown, summarize


def leading(flags) -> int:
    run = 0
    for flag in flags:
        if not flag:
            break
        run += 1
    return run


# ---------------------------------------------------------------- CTL-3, CTL-2
@pytest.mark.clause("CTL-3")
@pytest.mark.parametrize(
    "hit, threshold, worth",
    [
        (0, 0, False),
        (1, 0, True),
        (1, 1, True),
        (1, 2, False),
        (2, 2, True),
        (0, 1, False),
        (64, 65, False),
        (65, 65, True),
    ],
)
def test_prefetch_threshold_boundaries(hit: int, threshold: int, worth: bool) -> None:
    assert is_prefetch_worth_it(hit, threshold) is worth


@pytest.mark.clause("CTL-2")
def test_storage_batch_size_is_sglangs() -> None:
    assert STORAGE_BATCH_SIZE == 128  # cache_controller.py STORAGE_BATCH_SIZE in every pinned release


# ---------------------------------------------------------------- KEY-*: bigram chains at their length boundaries
@pytest.mark.clause("KEY-1")
@pytest.mark.parametrize(
    "tokens, page_size, pages",
    [((), 1, 0), ((7,), 1, 0), ((7, 8), 1, 1), ((7, 8), 2, 0), ((1, 2, 3, 4), 2, 1), ((1, 2, 3, 4, 5), 2, 2)],
)
def test_bigram_chain_length_counts_the_lookahead_out(tokens: tuple, page_size: int, pages: int) -> None:
    assert len(compute_key_chain(tokens, page_size, bigram=True)) == pages
    assert len(compute_key_chain(tokens, page_size)) == len(tokens) // page_size


# ---------------------------------------------------------------- HYB-6/7/9, BE-21
@pytest.mark.clause("HYB-6")
@given(st.lists(st.booleans(), max_size=8), st.data())
def test_all_pages_lengths_are_exactly_the_leading_run(present: list[bool], data: st.DataObject) -> None:
    kv_hit = data.draw(st.integers(0, len(present)))
    assert compute_restorable_lengths(ALL_PAGES, 0, tuple(present), kv_hit) == tuple(
        range(1, leading(present[:kv_hit]) + 1)
    )


@pytest.mark.clause("HYB-9", "BE-21")
def test_a_block_groups_pool_does_not_stop_the_pools_after_it() -> None:
    kv = (True, True, True, True)
    pools = (
        ("indexer", BLOCK_GROUPS, 0, (True, False, False, False)),
        ("swa", ALL_PAGES, 0, (True, True, False, False)),
    )
    hit, entries, restorable = fold_pool_query(kv, pools)
    assert (hit, restorable) == (2, (1, 2))
    assert dict(entries)["swa"] == 2 and entries[0] == (KV, 4)


@pytest.mark.clause("HYB-6", "HYB-7", "BE-21")
@given(
    st.lists(st.booleans(), min_size=1, max_size=6).flatmap(
        lambda kv: st.tuples(
            st.just(tuple(kv)),
            st.lists(
                st.tuples(
                    st.sampled_from((ALL_PAGES, TRAILING_PAGES)),
                    st.integers(0, 3),
                    st.lists(st.booleans(), min_size=len(kv), max_size=len(kv)).map(tuple),
                ),
                min_size=1,
                max_size=3,
            ),
        )
    )
)
def test_mixed_all_and_trailing_pools_fold_to_the_intersection(case) -> None:
    kv, queries = case
    pools = tuple((f"p{index}", policy, window, present) for index, (policy, window, present) in enumerate(queries))
    kv_hit = leading(kv)
    lengths = set(range(1, kv_hit + 1))
    for _, policy, window, present in pools:  # a plain formulation of HYB-6 / HYB-7
        if policy == ALL_PAGES:
            lengths &= set(range(1, leading(present[:kv_hit]) + 1))
        else:
            size = max(1, window)
            lengths &= {n for n in range(1, kv_hit + 1) if all(present[max(0, n - size) : n])}
    hit, _, restorable = fold_pool_query(kv, pools)
    assert restorable == tuple(sorted(lengths)) and hit == max(lengths, default=0)


# ---------------------------------------------------------------- CTL-8, BE-25
@pytest.mark.clause("CTL-8")
def test_the_writer_of_replicated_kv_defaults_to_tp_rank_0() -> None:
    assert [is_storage_writer(True, rank) for rank in range(3)] == [True, False, False]
    assert is_storage_writer(False, 1) is True


@pytest.mark.clause("BE-25")
@pytest.mark.parametrize(
    "args, valid",
    [
        (dict(tp_rank=0, tp_size=2, dcp_rank=0, dcp_size=2, logical_page_size=2), True),
        (dict(tp_rank=1, tp_size=2, dcp_rank=1, dcp_size=2, logical_page_size=4), True),
        (dict(tp_rank=-1, tp_size=2, dcp_rank=1, dcp_size=2, logical_page_size=2), False),
        (dict(tp_rank=0, tp_size=2, dcp_rank=0, dcp_size=2, logical_page_size=0), False),
        (dict(tp_rank=0, tp_size=1, dcp_rank=-1, dcp_size=1, logical_page_size=None), False),
        (dict(tp_rank=0, tp_size=1, dcp_rank=0, dcp_size=1, logical_page_size=None), True),
    ],
)
def test_dcp_configuration_boundaries(args: dict, valid: bool) -> None:
    assert (check_dcp_config(is_mla_model=True, **args) is None) is valid


# ---------------------------------------------------------------- the registry and its documents
def test_clauses_for_level_holds_exactly_that_levels_clauses() -> None:
    for level in LEVELS:
        assert clauses_for_level(level) == tuple(c for c in clauses() if c.level == level)
    assert sum(len(clauses_for_level(level)) for level in LEVELS) == len(clauses())
    assert all(clauses_for_level(level) for level in ("core", "v2"))


def test_registry_records_are_frozen() -> None:
    for record in (clauses()[0], DIVERGENCES[0]):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.id = "X-1"  # type: ignore[misc]
    assert dataclasses.fields(Clause)


def test_the_spec_document_shows_every_clause_and_the_summary_counts_each_family() -> None:
    text = render_markdown()
    assert all(f"#### {item.id}\n" in text for item in clauses())
    summary = summarize().splitlines()
    for family in FAMILIES:
        row = next(line for line in summary if line.split()[:1] == [family])
        assert int(row.split()[1]) == sum(c.family == family for c in clauses())


def test_latest_release_is_the_newest_and_versions_order_numerically() -> None:
    assert LATEST_RELEASE == max(SGLANG_RELEASES, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert release_key("0.5.23+cu129") == (0, 5, 23)
    assert release_key(" 0.5.9 ") < release_key("0.5.10")
    with pytest.raises(UnknownReleaseError, match="expected numbers separated by dots"):
        release_key("0.5.x")


def test_a_retired_clause_is_left_out_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from hicache_spec import clauses_for_release, registry

    live = clauses()[0]
    retired = dataclasses.replace(live, id=f"{live.family}-999", retired=True)
    monkeypatch.setattr(registry, "_BY_ID", {**registry._registry(), retired.id: retired})
    assert retired not in clauses() and retired in clauses(include_retired=True)
    assert retired not in clauses_for_release(LATEST_RELEASE)
    assert retired in clauses_for_release(LATEST_RELEASE, include_retired=True)


def test_a_family_without_clauses_does_not_end_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    from hicache_spec import render

    monkeypatch.setattr(render, "FAMILIES", {"EMPTY": "no clauses", **FAMILIES})
    text = render.render_markdown()
    assert "## EMPTY" not in text and all(f"#### {item.id}\n" in text for item in clauses())
