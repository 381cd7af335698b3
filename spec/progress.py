"""Acks, backup accounting, rank agreement and the prefetch timeout (CTL, RANK families)."""

from __future__ import annotations

from typing import Optional

__all__ = [
    "DEFAULT_PREFETCH_THRESHOLD_TOKENS",
    "DEFAULT_PREFETCH_TIMEOUT_BASE",
    "DEFAULT_PREFETCH_TIMEOUT_MAX",
    "DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN",
    "agree_hit_pages",
    "agree_pool_boundaries",
    "compute_backup_progress",
    "LEGACY_PREFETCH_TIMEOUT_BASE",
    "LEGACY_PREFETCH_TIMEOUT_MAX",
    "LEGACY_PREFETCH_TIMEOUT_PER_KI_TOKEN",
    "agree_restorable_hit_pages",
    "compute_effective_threshold",
    "compute_prefetch_acks",
    "compute_prefetch_timeout",
    "compute_restorable_flags",
    "is_prefetch_span_long_enough",
    "is_prefetch_worth_it",
]

DEFAULT_PREFETCH_THRESHOLD_TOKENS = 256
"""Below this span or agreed hit, in tokens, a prefetch is declined or revoked (CTL-3)."""
DEFAULT_PREFETCH_TIMEOUT_BASE = 1.0
"""Seconds every prefetch may take under the timeout policy (CTL-14, CTL-16)."""
DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN = 0.25
"""Extra seconds per 1024 tokens (CTL-14: of the requested span; CTL-16: of the key list when checked)."""
DEFAULT_PREFETCH_TIMEOUT_MAX = None
"""No upper bound on the unified cache's prefetch timeout (CTL-14, CTL-16)."""
LEGACY_PREFETCH_TIMEOUT_BASE = 2.0
"""SGLang 0.5.20 HiRadixCache's base timeout, seconds (CTL-10)."""
LEGACY_PREFETCH_TIMEOUT_PER_KI_TOKEN = 0.1
"""SGLang 0.5.20 HiRadixCache's seconds per 1024 tokens (CTL-10)."""
LEGACY_PREFETCH_TIMEOUT_MAX = 30.0
"""SGLang 0.5.20 HiRadixCache's upper bound on the timeout, seconds (CTL-10)."""


def compute_prefetch_acks(
    slice_pages: tuple[int, ...], loaded_pages: tuple[int, ...], page_size: int
) -> tuple[int, ...]:
    """Return the progress ack, in cumulative tokens, emitted after each slice. Clauses: CTL-4, CTL-5.

    ``slice_pages[i]`` is how many pages slice i asked for; ``loaded_pages``
    holds, for the slices that were read, how many pages each loaded. A slice
    that loads fewer than it asked for, or the end of ``loaded_pages``
    (termination), freezes every later ack. One ack per slice, always.

    pre: page_size >= 1
    pre: all(n >= 1 for n in slice_pages)
    pre: len(loaded_pages) <= len(slice_pages)
    pre: all(0 <= got <= asked for got, asked in zip(loaded_pages, slice_pages))
    post: len(__return__) == len(slice_pages)
    post: all(a <= b for a, b in zip(__return__, __return__[1:]))
    post: all(ack <= sum(slice_pages[: i + 1]) * page_size for i, ack in enumerate(__return__))
    post: all(ack % page_size == 0 for ack in __return__)
    """
    acks: list[int] = []
    tokens = 0
    frozen = False
    for index, asked in enumerate(slice_pages):
        if not frozen and index < len(loaded_pages):
            tokens += loaded_pages[index] * page_size
            frozen = loaded_pages[index] < asked  # CTL-4: a short slice stops IO
        else:
            frozen = True  # termination: nothing more is read, acks still flow
        acks.append(tokens)  # CTL-5: one ack per slice
    return tuple(acks)


def compute_backup_progress(slice_pages: tuple[int, ...], slice_ok: tuple[bool, ...], page_size: int) -> int:
    """Return the tokens a backup completed: the pages of its leading run of successful slices. Clause: CTL-7.

    ``slice_ok`` holds the outcome of the slices attempted; the backup stops
    at the first failed one.

    pre: page_size >= 1
    pre: len(slice_ok) <= len(slice_pages)
    pre: all(n >= 0 for n in slice_pages)
    post: 0 <= __return__ <= sum(slice_pages) * page_size
    post: __return__ % page_size == 0
    post: all(slice_ok) or __return__ == sum(slice_pages[: slice_ok.index(False)]) * page_size
    """
    pages = 0
    for asked, ok in zip(slice_pages, slice_ok):
        if not ok:
            break  # CTL-7: stop at the first failed slice
        pages += asked
    return pages * page_size


def agree_hit_pages(rank_hits: tuple[int, ...]) -> int:
    """Return the hit every rank uses: the minimum over ranks. Clauses: RANK-1, RANK-2, RANK-5.

    pre: len(rank_hits) >= 1
    pre: all(h >= 0 for h in rank_hits)
    post: __return__ in rank_hits
    post: all(__return__ <= h for h in rank_hits)
    """
    return min(rank_hits)


def agree_pool_boundaries(rank_boundaries: tuple[tuple[tuple[str, int], ...], ...]) -> tuple[tuple[str, int], ...]:
    """Return each pool's agreed own boundary: the MIN over ranks, kept only where every rank gave one. Clause: RANK-5.

    ``rank_boundaries[r]`` holds rank r's (pool, boundary) verdicts; a pool
    a rank left out carries no verdict afterwards (SGLang packs it as -1,
    which MIN keeps). Pools come in the first rank's order.

    pre: len(rank_boundaries) >= 1
    pre: all(hits >= 0 for rank in rank_boundaries for _, hits in rank)
    pre: all(len({name for name, _ in rank}) == len(rank) for rank in rank_boundaries)
    post: all(any(n == name for n, _ in rank) for name, _ in __return__ for rank in rank_boundaries)
    post: all(hits == min(h for rank in rank_boundaries for n, h in rank if n == name) for name, hits in __return__)
    post: all(any(n == name for n, _ in __return__) for name, _ in rank_boundaries[0] if all(any(m == name for m, _ in rank) for rank in rank_boundaries))
    """
    agreed: list[tuple[str, int]] = []
    for name, hits in rank_boundaries[0]:
        others = [dict(rank).get(name) for rank in rank_boundaries[1:]]
        if all(other is not None for other in others):
            agreed.append((name, min([hits, *(other for other in others if other is not None)])))
    return tuple(agreed)


def compute_restorable_flags(
    hit_pages: int, restorable: Optional[tuple[int, ...]], span_pages: int
) -> tuple[bool, ...]:
    """Return one rank's restorable flag per prefix length 0..span_pages, as SGLang 0.5.23 packs it. Clause: RANK-6.

    Length 0 is always restorable. With no hit nothing else is. A backend
    that reports no restorable set (None) is taken as restoring 1..hit; a
    reported length above the hit (the hit may have been capped after the
    query) or outside the span is dropped.

    pre: 0 <= hit_pages <= span_pages
    pre: restorable is None or all(isinstance(n, int) for n in restorable)
    post: len(__return__) == span_pages + 1
    post: __return__[0]
    post: all(not flag for flag in __return__[hit_pages + 1:])
    post: restorable is not None or __return__ == (True,) * (hit_pages + 1) + (False,) * (span_pages - hit_pages)
    """
    flags = [False] * (span_pages + 1)
    flags[0] = True
    if hit_pages > 0:
        lengths = range(1, hit_pages + 1) if restorable is None else restorable
        for length in lengths:
            if 0 < length <= hit_pages:
                flags[length] = True
    return tuple(flags)


def agree_restorable_hit_pages(rank_flags: tuple[tuple[bool, ...], ...]) -> int:
    """Return the agreed hit: the largest length every rank flags restorable (MIN of the flags). Clause: RANK-6.

    pre: len(rank_flags) >= 1
    pre: all(len(flags) == len(rank_flags[0]) and len(flags) >= 1 and flags[0] for flags in rank_flags)
    post: all(flags[__return__] for flags in rank_flags)
    post: all(not all(flags[n] for flags in rank_flags) for n in range(__return__ + 1, len(rank_flags[0])))
    """
    agreed = [all(flags[n] for flags in rank_flags) for n in range(len(rank_flags[0]))]
    return max(n for n, ok in enumerate(agreed) if ok)


def compute_effective_threshold(threshold_tokens: int, page_size: int) -> int:
    """Return the threshold a controller applies: at least one page. Clause: CTL-3.

    pre: page_size >= 1
    post: __return__ == max(threshold_tokens, page_size)
    """
    return max(threshold_tokens, page_size)


def is_prefetch_span_long_enough(span_tokens: int, threshold_tokens: int, page_size: int) -> bool:
    """Return whether a page-aligned span may be queried at all; shorter ones are declined before any query. Clause: CTL-3.

    pre: page_size >= 1
    pre: span_tokens >= 0
    post: __return__ == (span_tokens - span_tokens % page_size >= max(threshold_tokens, page_size))
    """
    aligned = span_tokens - span_tokens % page_size
    return aligned >= compute_effective_threshold(threshold_tokens, page_size)


def is_prefetch_worth_it(hit_tokens: int, threshold_tokens: int = DEFAULT_PREFETCH_THRESHOLD_TOKENS) -> bool:
    """Return whether an agreed hit is long enough to prefetch. Clause: CTL-3.

    pre: hit_tokens >= 0
    post: __return__ == (hit_tokens >= threshold_tokens and hit_tokens > 0)
    """
    return hit_tokens > 0 and hit_tokens >= threshold_tokens


def compute_prefetch_timeout(
    tokens: int,
    base: float = DEFAULT_PREFETCH_TIMEOUT_BASE,
    per_ki_token: float = DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    maximum: Optional[float] = DEFAULT_PREFETCH_TIMEOUT_MAX,
) -> float:
    """Return the prefetch timeout in seconds: base + per_ki_token * tokens / 1024, capped by ``maximum`` when given. Clauses: CTL-10, CTL-14, CTL-16.

    ``tokens`` is whole pages times page_size: the requested span's pages in
    SGLang 0.5.23 (CTL-14), the operation's key list when the deadline is
    checked in 0.5.20-0.5.22's UnifiedRadixCache (CTL-16); defaults 1.0 s and
    0.25 s, no maximum. 0.5.20's HiRadixCache (CTL-10): ``min(maximum, ...)``
    with 2.0 s, 0.1 s and 30 s (the LEGACY_ constants).

    pre: 0 <= tokens <= 2 ** 53
    pre: 0 <= base <= 1e9 and 0 <= per_ki_token <= 1e9
    pre: maximum is None or 0 <= maximum <= 1e9
    post: maximum is None or __return__ <= maximum
    post: __return__ >= (base if maximum is None else min(maximum, base))
    """
    linear = base + per_ki_token * tokens / 1024
    return linear if maximum is None else min(maximum, linear)
