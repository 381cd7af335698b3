"""The trace checker's hit-query rule, CTL-1: ``check_hit_query(checker)``; see docs/engines.md."""

from __future__ import annotations

from typing import Optional

from hicache_contracts.engine._check_base import HIT_QUERY, _Checker, describe, hit_count


def check_hit_query(checker: _Checker) -> Optional[int]:
    """CTL-1; return the hit the query found (pages), or None when the trace holds no hit query."""
    queries = checker.of_kind(HIT_QUERY)
    if not queries:
        return None
    checker.check("CTL-1")
    batch_size = checker.batch_size
    hit = 0
    short_slice: Optional[int] = None
    covered = 0
    for slice_index, call in enumerate(queries):
        keys = call.all_keys
        if short_slice is not None:
            checker.fail(
                "CTL-1",
                f"hit query continued with pages [{checker.offset(call)}...) after slice "
                f"{short_slice} was not fully hit",
                call,
            )
            continue
        if tuple(keys) != checker.slice_keys(slice_index) and not (
            slice_index == 0 and tuple(keys) == checker.chain  # one call over the whole chain
        ):
            checker.fail(
                "CTL-1",
                f"hit query call {slice_index} asks for {describe(keys)} at page "
                f"{checker.offset(call)}; slice {slice_index} is pages "
                f"[{slice_index * batch_size}, "
                f"{slice_index * batch_size + len(checker.slice_keys(slice_index))})",
                call,
            )
        found = hit_count(call)
        hit += found
        covered += len(keys)
        if found < len(keys):
            short_slice = slice_index
    if short_slice is None and covered < len(checker.chain):
        checker.fail(
            "CTL-1",
            f"hit query stopped after {covered} of {len(checker.chain)} pages although every slice was fully hit",
            queries[-1],
        )
    return hit
