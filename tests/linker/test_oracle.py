"""The linker oracles (hicache_spec.linker) against independent definitions.

Scenario: random tail presence per pool, hit policies and windows; random per-rank lookups.
Expected: the restorable set is the lengths where KV's first n pages are present and each gating
pool meets its policy at n (BLOCK_GROUPS never gates); the judge splits a report into the
non-restorable and the missing lengths, ignoring order, repeats and values outside 1..tail; the
rank agreement is the largest length every rank reported.
Why it matters: these are the oracles the linker suite judges lookup with.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec.linker import intersect_rank_lookups, judge_lookup, linker_restorable_lengths

POLICIES = ("all_pages", "trailing_pages", "block_groups")


@st.composite
def queries(draw):
    length = draw(st.integers(0, 8))
    kv = tuple(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
    pools = tuple(
        (
            f"p{i}",
            draw(st.sampled_from(POLICIES)),
            draw(st.integers(0, 4)),
            tuple(draw(st.lists(st.booleans(), min_size=length, max_size=length))),
        )
        for i in range(draw(st.integers(0, 3)))
    )
    return kv, pools


def brute_force(kv, pools):
    lengths = []
    for n in range(1, len(kv) + 1):
        if not all(kv[:n]):
            continue
        ok = True
        for _, policy, window, present in pools:
            if policy == "all_pages":
                ok = ok and all(present[:n])
            elif policy == "trailing_pages":
                ok = ok and all(present[max(0, n - max(1, window)) : n])
        if ok:
            lengths.append(n)
    return tuple(lengths)


@pytest.mark.clause("LNK-7")
@given(queries())
def test_restorable_set_matches_its_definition(case) -> None:
    kv, pools = case
    assert linker_restorable_lengths(kv, pools) == brute_force(kv, pools)


@pytest.mark.clause("LNK-7")
def test_restorable_set_example() -> None:
    # KV pages 0..5 present; SWA (window 2) present at 1, 3, 4, 5: only 5 and 6 end a full window.
    kv = (True,) * 6 + (False, True)
    swa = tuple(i in (1, 3, 4, 5) for i in range(8))
    assert linker_restorable_lengths(kv, (("swa", "trailing_pages", 2, swa),)) == (5, 6)


@pytest.mark.clause("LNK-7")
@given(st.lists(st.integers(-3, 12)), st.integers(0, 8), st.data())
def test_judge_lookup(reported, tail, data) -> None:
    expected = tuple(sorted(data.draw(st.sets(st.integers(1, tail))) if tail else ()))
    extra, missing = judge_lookup(tuple(reported), expected, tail)
    inside = {n for n in reported if 1 <= n <= tail}
    assert set(extra) == inside - set(expected)
    assert set(missing) == set(expected) - inside


@pytest.mark.clause("LNK-22")
@given(st.lists(st.lists(st.integers(-2, 10)), min_size=1, max_size=4), st.integers(0, 8))
def test_rank_agreement_is_the_largest_common_length(per_rank, tail) -> None:
    common = [n for n in range(1, tail + 1) if all(n in r for r in per_rank)]
    assert intersect_rank_lookups(tuple(tuple(r) for r in per_rank), tail) == (common[-1] if common else 0)
