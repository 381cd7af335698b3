"""Planted buggy variants of spec functions, each under the real function's contracts.

CrossHair and the checks in this folder must refute every one of them;
``test_planted.py`` and ``.ci/crosshair_check.py`` prove they do. Each variant
reproduces a bug seen in the field (CONTRACT.md §5, §6) or a plausible slip.

Every function of ``spec/`` that carries PEP 316 contracts has at least one
variant here. A variant names the function it plants with a ``plants:`` line,
keeps every ``pre:`` line of that function (it may add some that narrow the
domain to where the bug shows, so CrossHair finds it within its budget) and
only ``post:`` lines of that function: its refutation comes from the
function's own postcondition. ``test_planted.py`` enforces all of this. One module, over 450 lines: a catalog, one small variant per
entry, read as a list.
"""

from __future__ import annotations

import hashlib
import operator  # noqa: F401 (the contracts name it)
from typing import Any, Optional

from hicache_spec import compute_page_words, count_leading_run
from hicache_spec import compute_restorable_lengths, is_page_key, plan_batches  # noqa: F401 (the contracts name them)
from hicache_spec.call_forms import EXTRA_INFO_FORMS, extra_info_forms  # noqa: F401 (the contracts name it)
from hicache_spec.releases import UnknownReleaseError  # noqa: F401 (the contracts name it)


def extend_prefix_in_place(prefix: Optional[list[str]], batch: list[str]) -> Optional[list[str]]:
    """Extend the prefix with ``+=`` (SGLang before the fix): mutates the list already handed out.

    plants: extend_prefix
    post[]: __return__ is None or __return__ == prefix + batch
    """
    if prefix is None:
        return None
    prefix += batch
    return prefix


def extend_prefix_only_when_non_empty(
    prefix: Optional[tuple[str, ...]], batch: tuple[str, ...]
) -> Optional[tuple[str, ...]]:
    """Extend only a non-empty prefix (SGLang before the fix): [] never accumulates.

    plants: extend_prefix
    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + batch
    """
    if prefix is not None and len(prefix) > 0:
        return prefix + batch
    return prefix


def extend_prefix_collapsing_empty(
    prefix: Optional[tuple[str, ...]], batch: tuple[str, ...]
) -> Optional[tuple[str, ...]]:
    """Treat [] as None ('feature off'): the feature switches itself off at the root.

    plants: extend_prefix
    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + batch
    """
    if not prefix:
        return None
    return prefix + batch


def count_leading_run_off_by_one(flags: tuple[bool, ...]) -> int:
    """Count the first failing flag as a hit.

    plants: count_leading_run
    post: 0 <= __return__ <= len(flags)
    post: all(flags[:__return__])
    post: __return__ == len(flags) or not flags[__return__]
    """
    for index, flag in enumerate(flags):
        if not flag:
            return index + 1
    return len(flags)


def compute_pool_hit_window_misplaced(policy: str, window: int, present: tuple[bool, ...], kv_hit: int) -> int:
    """Check the TRAILING_PAGES window at the start of the prefix instead of at its end.

    plants: compute_pool_hit
    pre: policy in ("all_pages", "trailing_pages", "block_groups")
    pre: 0 <= kv_hit <= len(present)
    pre: window >= 0
    pre: policy != "block_groups"
    post: 0 <= __return__ <= kv_hit
    post: policy != "all_pages" or all(present[:__return__])
    post: policy != "trailing_pages" or __return__ == 0 or all(present[max(0, __return__ - max(1, window)):__return__])
    """
    if policy == "all_pages":
        run = 0
        while run < kv_hit and present[run]:
            run += 1
        return run
    size = max(1, window)
    return kv_hit if all(present[:size]) else 0


def fold_pool_query_min_of_maxima(
    kv_present: tuple[bool, ...], pools: tuple[tuple[str, str, int, tuple[bool, ...]], ...]
) -> tuple:
    """Fold with the minimum of each pool's largest hit (SGLang #39147; HiCacheFile before 0.5.23, SimHiCacheStorage).

    The first two pre lines narrow the domain to where the two folds part (an
    ALL_PAGES pool then a one-page TRAILING_PAGES pool over two present KV pages),
    so CrossHair finds the counterexample within its budget.

    plants: fold_pool_query
    pre: kv_present == (True, True) and len(pools) == 2
    pre: pools[0][1] == "all_pages" and pools[1][1:3] == ("trailing_pages", 1)
    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages", "block_groups") and query[2] >= 0 for query in pools)
    post: 0 <= __return__[0] <= count_leading_run(kv_present)
    post: __return__[0] == (__return__[2][-1] if __return__[2] else 0)
    post: all(n in compute_restorable_lengths(q[1], q[2], q[3], count_leading_run(kv_present)) for q in pools if q[1] != "block_groups" for n in __return__[2])
    """
    kv_hit = 0
    while kv_hit < len(kv_present) and kv_present[kv_hit]:
        kv_hit += 1
    final = kv_hit
    entries = [("kv", kv_hit)] if kv_hit else []
    for name, policy, window, present in pools:
        if final == 0:
            break
        size = max(1, window)
        boundary = 0
        for end in range(kv_hit, 0, -1):  # the pool's largest hit, inline
            if policy == "all_pages":
                ok = all(present[:end])
            else:
                ok = all(present[max(0, end - size) : end])
            if ok:
                boundary = end
                break
        if boundary:
            entries.append((name, boundary))
        final = min(final, boundary)
    return final, tuple(entries), tuple(range(1, final + 1))


def plan_sidecar_groups_operation_prefix(
    prefix: Optional[tuple[str, ...]], span: tuple[str, ...], key_counts: tuple[int, ...]
) -> tuple:
    """Give every sidecar call the operation-level prefix (the old PFX-9 decision): a trailing window's prefix skips keys.

    plants: plan_sidecar_groups
    pre: all(0 <= n <= len(span) for n in key_counts)
    post: prefix is None or all(p == prefix + span[: len(span) - key_counts[m[0]]] for p, m in __return__)
    """
    if prefix is None:
        return ((None, tuple(range(len(key_counts)))),)
    # Lists rather than a dict, so that CrossHair explores the grouping within its per-condition budget.
    groups: list = []
    seen: list = []
    for index, count in enumerate(key_counts):
        covered = len(span) - count
        if covered in seen:
            groups[seen.index(covered)][1].append(index)
        else:
            seen.append(covered)
            groups.append((prefix, [index]))
    return tuple((group_prefix, tuple(members)) for group_prefix, members in groups)


# batching


def plan_batches_unclamped_end(page_count: int, batch_size: int) -> tuple[tuple[int, int], ...]:
    """End the last batch at ``start + batch_size``: a short last batch reads past the operation.

    plants: plan_batches
    pre: page_count >= 0
    pre: batch_size >= 1
    post: __return__ == () or (__return__[0][0] == 0 and __return__[-1][1] == page_count)
    """
    return tuple((start, start + batch_size) for start in range(0, page_count, batch_size))


# confirmation


def confirmed_pages_unchecked_length(result: list[bool], count: int, *, snapshot: bool = False) -> int:
    """Count the leading True entries without checking the result has ``count`` of them (BE-14).

    plants: confirmed_pages
    post: 0 <= __return__ <= max(count, 0)
    """
    if type(result) not in ((list, tuple) if snapshot else (list,)):
        return 0
    run = 0
    while run < len(result) and result[run] is True:
        run += 1
    return run


def confirmed_hit_unbounded(result: int, count: int) -> int:
    """Take any non-negative int a ``batch_exists`` returns, even one above the pages asked.

    plants: confirmed_hit
    post: 0 <= __return__ <= max(count, 0)
    """
    if type(result) is int and result >= 0:
        return result
    return 0


# keys


def is_page_key_any_length(value: str) -> bool:
    """Check the characters but not the length: the empty name and a short hex digest pass as keys (KEY-2).

    plants: is_page_key
    post: (not __return__) or (isinstance(value, str) and len(value) == 64)
    """
    return isinstance(value, str) and all(character in "0123456789abcdef" for character in value)


def compute_namespace_seed_empty_as_absent(extra_key: Optional[str], cache_salt: Optional[str]) -> Optional[str]:
    """Treat an empty ``extra_key`` or ``cache_salt`` as absent: ``""`` gets no namespace (KEY-4).

    plants: compute_namespace_seed
    raises: UnicodeEncodeError
    post: (extra_key is None and cache_salt is None) == (__return__ is None)
    """
    if not extra_key and not cache_salt:
        return None
    digest = hashlib.sha256(b"sglang-cache-namespace-v1")
    for part in (extra_key, cache_salt):
        encoded = (part or "").encode("utf-8")
        digest.update(b"\x01" + len(encoded).to_bytes(8, "little") + encoded)
    return digest.hexdigest()


def compute_page_words_bigram_without_lookahead(
    tokens: tuple[Any, ...], bigram_next: Optional[int] = None
) -> tuple[int, ...]:
    """Pair only the tokens inside the page: the last token's pair with the lookahead is lost (KEY-6).

    plants: compute_page_words
    pre: bigram_next is None or all(isinstance(t, int) for t in tokens)
    post: bigram_next is None or len(__return__) == 2 * len(tokens)
    """
    if bigram_next is not None:
        words: list[int] = []
        for index in range(len(tokens) - 1):
            words += [tokens[index], tokens[index + 1]]
        return tuple(words)
    flat: list[int] = []
    for token in tokens:
        flat.extend(token if isinstance(token, tuple) else (token,))
    return tuple(flat)


def compute_page_key_raw_digest(
    token_ids: tuple[Any, ...], prior_key: Optional[str] = None, bigram_next: Optional[int] = None
) -> Any:
    """Return the raw 32-byte digest instead of its hex string: not a page key (KEY-2).

    plants: compute_page_key
    pre: all(0 <= w < 2 ** 63 for w in compute_page_words(token_ids, bigram_next))
    pre: prior_key is None or is_page_key(prior_key)
    post: is_page_key(__return__)
    """
    digest = hashlib.sha256(bytes.fromhex(prior_key) if prior_key is not None else b"")
    for word in compute_page_words(token_ids, bigram_next):
        digest.update((word & 0xFFFFFFFF).to_bytes(4, "little"))
    return digest.digest()


def compute_key_chain_keys_partial_page(
    token_ids: tuple[Any, ...],
    page_size: int,
    prior_key: Optional[str] = None,
    extra_key: Optional[str] = None,
    cache_salt: Optional[str] = None,
    bigram: bool = False,
) -> tuple[str, ...]:
    """Give the trailing partial page a key too (KEY-3): a key for tokens no page holds.

    plants: compute_key_chain
    pre: page_size >= 1
    pre: prior_key is None or is_page_key(prior_key)
    pre: not bigram or all(isinstance(t, int) for t in token_ids)
    pre: all(0 <= w < 2 ** 63 for t in token_ids for w in ((t,) if isinstance(t, int) else t))
    pre: not bigram and extra_key is None and cache_salt is None and prior_key is None
    pre: all(isinstance(t, int) for t in token_ids) and len(token_ids) == 1 and page_size == 2
    raises: UnicodeEncodeError
    post: len(__return__) == max(0, len(token_ids) - (1 if bigram else 0)) // page_size
    """
    keys: list[str] = []
    previous = b""
    for start in range(0, len(token_ids), page_size):
        digest = hashlib.sha256(previous)
        for token in token_ids[start : start + page_size]:
            digest.update(int(token).to_bytes(8, "little"))
        previous = digest.digest()
        keys.append(digest.hexdigest())
    return tuple(keys)


# pools


def compute_restorable_lengths_zero_window(
    policy: str, window: int, present: tuple[bool, ...], kv_hit: int
) -> tuple[int, ...]:
    """Use the window as given: a window of 0 checks no page, so every length looks restorable (HYB-7).

    plants: compute_restorable_lengths
    pre: policy in ("all_pages", "trailing_pages")
    pre: 0 <= kv_hit <= len(present)
    pre: window >= 0
    post: policy != "trailing_pages" or all(all(present[max(0, n - max(1, window)):n]) for n in __return__)
    """
    if policy == "all_pages":
        return tuple(range(1, count_leading_run(present[:kv_hit]) + 1))
    return tuple(n for n in range(1, kv_hit + 1) if all(present[max(0, n - window) : n]))


def fold_pool_hits_zero_entries(
    kv_present: tuple[bool, ...], pools: tuple[tuple[str, str, int, tuple[bool, ...]], ...]
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Give every examined pool an entry, a boundary of 0 included (BE-21's entries are non-zero).

    plants: fold_pool_hits
    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages", "block_groups") and query[2] >= 0 for query in pools)
    pre: len(pools) <= 2 and len(kv_present) <= 3
    post: all(hits > 0 for _, hits in __return__[1])
    """
    kv_hit = count_leading_run(kv_present)
    entries = [("kv", kv_hit)] if kv_hit else []
    hit = kv_hit
    for name, _policy, _window, present in pools:
        if hit == 0:
            break
        own = count_leading_run(present[:kv_hit])
        entries.append((name, own))
        hit = min(hit, own)
    return hit, tuple(entries)


def count_pool_hits_drops_misses(results: tuple[tuple[str, tuple[bool, ...]], ...]) -> tuple[tuple[str, int], ...]:
    """Leave out the pools with no hit: the caller's per-pool list no longer lines up (HYB-8).

    plants: count_pool_hits
    post: len(__return__) == len(results)
    """
    return tuple((name, count_leading_run(flags)) for name, flags in results if count_leading_run(flags) > 0)


def compute_trailing_window_unclamped(hit_pages: int, window: int) -> tuple[int, int]:
    """Start the window at ``hit_pages - window`` without clamping: a window longer than the hit starts before 0.

    plants: compute_trailing_window
    pre: hit_pages >= 0
    pre: window >= 0
    post: 0 <= __return__[0] <= __return__[1]
    """
    return hit_pages - max(1, window), hit_pages


# prefix


def prefix_before_including_first_key(prefix: Optional[tuple[str, ...]], chain: tuple[str, ...], offset: int):
    """Include the call's own first key in its prefix (an off-by-one in the slice).

    plants: prefix_before
    pre: 0 <= offset <= len(chain)
    post: __return__ is None or __return__ == prefix + chain[:offset]
    """
    return None if prefix is None else prefix + chain[: offset + 1]


def expected_prefixes_after_own_batch(
    prefix: Optional[tuple[str, ...]], chain: tuple[str, ...], batch_size: int
) -> tuple[Optional[tuple[str, ...]], ...]:
    """Extend the prefix before handing it out: each batch's prefix already holds its own keys (PFX-2).

    plants: expected_prefixes
    pre: batch_size >= 1
    post: all(p is None or p == prefix + chain[:start] for p, (start, _) in zip(__return__, plan_batches(len(chain), batch_size)))
    """
    result: list[Optional[tuple[str, ...]]] = []
    current = prefix
    for start in range(0, len(chain), batch_size):
        current = None if current is None else current + chain[start : start + batch_size]
        result.append(current)
    return tuple(result)


# progress


def compute_prefetch_acks_zero_after_termination(
    slice_pages: tuple[int, ...], loaded_pages: tuple[int, ...], page_size: int
) -> tuple[int, ...]:
    """Ack 0 for the slices after termination instead of repeating the frozen progress (CTL-5).

    plants: compute_prefetch_acks
    pre: page_size >= 1
    pre: all(n >= 1 for n in slice_pages)
    pre: len(loaded_pages) <= len(slice_pages)
    pre: all(0 <= got <= asked for got, asked in zip(loaded_pages, slice_pages))
    post: all(a <= b for a, b in zip(__return__, __return__[1:]))
    """
    acks: list[int] = []
    tokens = 0
    frozen = False
    for index, asked in enumerate(slice_pages):
        if not frozen and index < len(loaded_pages):
            tokens += loaded_pages[index] * page_size
            frozen = loaded_pages[index] < asked
            acks.append(tokens)
        else:
            frozen = True
            acks.append(0)
    return tuple(acks)


def compute_backup_progress_skipping_failures(
    slice_pages: tuple[int, ...], slice_ok: tuple[bool, ...], page_size: int
) -> int:
    """Count every successful slice, going on past a failed one (CTL-7): a hole in the backed-up prefix.

    plants: compute_backup_progress
    pre: page_size >= 1
    pre: len(slice_ok) <= len(slice_pages)
    pre: all(n >= 0 for n in slice_pages)
    post: all(slice_ok) or __return__ == sum(slice_pages[: slice_ok.index(False)]) * page_size
    """
    return sum(asked for asked, ok in zip(slice_pages, slice_ok) if ok) * page_size


def agree_hit_pages_maximum(rank_hits: tuple[int, ...]) -> int:
    """Agree on the largest hit: a rank reads pages it does not have (RANK-1).

    plants: agree_hit_pages
    pre: len(rank_hits) >= 1
    pre: all(h >= 0 for h in rank_hits)
    post: all(__return__ <= h for h in rank_hits)
    """
    return max(rank_hits)


def agree_pool_boundaries_first_rank_wins(
    rank_boundaries: tuple[tuple[tuple[str, int], ...], ...],
) -> tuple[tuple[str, int], ...]:
    """Keep a pool the first rank names even where another rank gave no verdict (RANK-5's -1 lost).

    plants: agree_pool_boundaries
    pre: len(rank_boundaries) >= 1
    pre: all(hits >= 0 for rank in rank_boundaries for _, hits in rank)
    pre: all(len({name for name, _ in rank}) == len(rank) for rank in rank_boundaries)
    pre: len(rank_boundaries) <= 2 and all(len(rank) <= 1 for rank in rank_boundaries)
    post: all(any(n == name for n, _ in rank) for name, _ in __return__ for rank in rank_boundaries)
    """
    agreed: list[tuple[str, int]] = []
    for name, hits in rank_boundaries[0]:
        others = [h for rank in rank_boundaries[1:] for n, h in rank if n == name]
        agreed.append((name, min([hits, *others])))
    return tuple(agreed)


def compute_restorable_flags_keeps_lengths_above_hit(
    hit_pages: int, restorable: Optional[tuple[int, ...]], span_pages: int
) -> tuple[bool, ...]:
    """Keep a reported length above the (capped) hit as long as it lies in the span (RANK-6).

    plants: compute_restorable_flags
    pre: 0 <= hit_pages <= span_pages
    pre: restorable is None or all(isinstance(n, int) for n in restorable)
    post: all(not flag for flag in __return__[hit_pages + 1:])
    """
    flags = [False] * (span_pages + 1)
    flags[0] = True
    if hit_pages > 0:
        for length in range(1, hit_pages + 1) if restorable is None else restorable:
            if 0 < length <= span_pages:
                flags[length] = True
    return tuple(flags)


def agree_restorable_hit_pages_min_of_maxima(rank_flags: tuple[tuple[bool, ...], ...]) -> int:
    """Agree on the minimum of each rank's largest restorable length (the rank analogue of SGLang #39147).

    plants: agree_restorable_hit_pages
    pre: len(rank_flags) >= 1
    pre: all(len(flags) == len(rank_flags[0]) and len(flags) >= 1 and flags[0] for flags in rank_flags)
    pre: len(rank_flags) <= 2 and len(rank_flags[0]) <= 4
    post: all(flags[__return__] for flags in rank_flags)
    """
    return min(max(n for n, ok in enumerate(flags) if ok) for flags in rank_flags)


def compute_effective_threshold_zero_only(threshold_tokens: int, page_size: int) -> int:
    """Raise only a zero threshold to one page: a threshold inside the first page is kept (CTL-3).

    plants: compute_effective_threshold
    pre: page_size >= 1
    post: __return__ == max(threshold_tokens, page_size)
    """
    return threshold_tokens or page_size


def is_prefetch_span_long_enough_unaligned(span_tokens: int, threshold_tokens: int, page_size: int) -> bool:
    """Compare the raw span, partial page included, with the threshold (CTL-3 counts whole pages).

    plants: is_prefetch_span_long_enough
    pre: page_size >= 1
    pre: span_tokens >= 0
    post: __return__ == (span_tokens - span_tokens % page_size >= max(threshold_tokens, page_size))
    """
    return span_tokens >= max(threshold_tokens, page_size)


def is_prefetch_worth_it_strict(hit_tokens: int, threshold_tokens: int = 256) -> bool:
    """Require the hit to exceed the threshold: a hit of exactly the threshold is revoked (CTL-3).

    plants: is_prefetch_worth_it
    pre: hit_tokens >= 0
    post: __return__ == (hit_tokens >= threshold_tokens and hit_tokens > 0)
    """
    return hit_tokens > 0 and hit_tokens > threshold_tokens


def compute_prefetch_timeout_caps_base_only(
    tokens: int, base: float = 1.0, per_ki_token: float = 0.25, maximum: Optional[float] = None
) -> float:
    """Cap the base, not the sum: the per-token part runs past the maximum (CTL-10).

    plants: compute_prefetch_timeout
    pre: 0 <= tokens <= 2 ** 53
    pre: 0 <= base <= 1e9 and 0 <= per_ki_token <= 1e9
    pre: maximum is None or 0 <= maximum <= 1e9
    post: maximum is None or __return__ <= maximum
    """
    return (base if maximum is None else min(maximum, base)) + per_ki_token * tokens / 1024


# values


def is_count_accepting_bool(value: Any, minimum: int = 0, maximum: Optional[int] = None, *, exact: bool = True) -> bool:
    """Test with ``isinstance(value, int)``: ``True`` passes as the count 1.

    plants: is_count
    pre: maximum is None or minimum <= maximum
    pre: type(value) in (int, bool)
    post: not __return__ or operator.index(value) >= minimum
    post: not (__return__ and exact) or type(value) is int
    """
    return isinstance(value, int) and value >= minimum and (maximum is None or value <= maximum)


def is_flag_accepting_ints(value: Any) -> bool:
    """Take 0 and 1 for flags, as a truthiness test would: ``1`` passes as True.

    plants: is_flag
    pre: type(value) in (int, bool)
    post: __return__ == (type(value) is bool or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")))
    """
    return isinstance(value, int) and value in (0, 1)


# writers


def is_storage_writer_tp_rank_zero(is_mla_model: bool, tp_rank: int, dcp_rank: int = 0) -> bool:
    """Keep 0.5.20's ``tp_rank == 0`` under DCP: the DCP shards other than 0 have no writer (CTL-8).

    plants: is_storage_writer
    post: not is_mla_model or __return__ == (tp_rank == dcp_rank)
    """
    return not is_mla_model or tp_rank == 0


def writes_pool_writer_only(pool: str, writer: bool, every_rank_pools: tuple[str, ...] = ("mamba",)) -> bool:
    """Let only the writer write sidecars: TP-sharded mamba state of the other ranks is never stored (CTL-8).

    plants: writes_pool
    post: writer or __return__ == (pool in every_rank_pools)
    """
    return writer


def compute_non_writer_backup_tokens_vacuous(sidecar_ok: tuple[bool, ...], span_pages: int, page_size: int) -> int:
    """Report every token when the rank wrote no sidecar at all (``all(())`` is True) (CTL-15).

    plants: compute_non_writer_backup_tokens
    pre: span_pages >= 0 and page_size >= 1
    post: (__return__ == span_pages * page_size and span_pages > 0) == (span_pages > 0 and len(sidecar_ok) > 0 and all(sidecar_ok))
    """
    return span_pages * page_size if all(sidecar_ok) else 0


def check_dcp_config_mla_first(
    is_mla_model: bool, tp_rank: int, tp_size: int, dcp_rank: int, dcp_size: int, logical_page_size: Optional[int]
) -> Optional[str]:
    """Ask for MLA before looking at dcp_size: a setup without DCP and without MLA is refused (BE-25).

    plants: check_dcp_config
    post: dcp_size != 1 or dcp_rank != 0 or __return__ is None
    """
    if not is_mla_model:
        return "dcp_size: DCP requires is_mla_model"
    if dcp_size < 1 or not 0 <= dcp_rank < dcp_size:
        return "dcp_rank: must satisfy 0 <= dcp_rank < dcp_size with dcp_size >= 1"
    return None


# linker


def linker_restorable_lengths_kv_only(kv_present: tuple[bool, ...], pools: tuple[Any, ...]) -> tuple[int, ...]:
    """Count the first missing KV page as restorable: one length past the KV leading run (LNK-7).

    plants: linker_restorable_lengths
    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages", "block_groups") and query[2] >= 0 for query in pools)
    post: all(all(kv_present[:n]) for n in __return__)
    """
    return tuple(range(1, count_leading_run(kv_present) + 2))


def judge_lookup_ignoring_missing(
    reported: tuple[int, ...], expected: tuple[int, ...], tail_pages: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Judge only the lengths reported, never the restorable ones left out (LNK-7).

    plants: judge_lookup
    pre: tail_pages >= 0
    pre: all(1 <= n <= tail_pages for n in expected)
    post: (__return__ == ((), ())) == ({n for n in reported if 1 <= n <= tail_pages} == set(expected))
    """
    seen = {n for n in reported if 1 <= n <= tail_pages}
    return tuple(sorted(seen - set(expected))), ()


def intersect_rank_lookups_max_of_minima(per_rank: tuple[tuple[int, ...], ...], tail_pages: int) -> int:
    """Take the smallest of the ranks' largest lengths, which some rank may not have reported (LNK-22).

    plants: intersect_rank_lookups
    pre: tail_pages >= 0
    pre: len(per_rank) >= 1
    post: __return__ == 0 or all(__return__ in lengths for lengths in per_rank)
    """
    tops = [max([n for n in lengths if 1 <= n <= tail_pages], default=0) for lengths in per_rank]
    return min(tops)


def extra_info_forms_every_release_always(method: str, release: Optional[str] = None) -> tuple[str, ...]:
    """Answer for every pinned release even when one is named (BE-8 would ask forms that release never uses).

    plants: extra_info_forms
    pre: method in EXTRA_INFO_FORMS
    raises: UnknownReleaseError
    post: len(__return__) >= 1
    post: release is None or len(__return__) == 1
    post: len(set(__return__)) == len(__return__)
    """
    return extra_info_forms(method)
