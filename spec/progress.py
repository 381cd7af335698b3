"""Acks, backup accounting, rank agreement and the prefetch timeout (CTL, RANK families)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_PREFETCH_THRESHOLD_TOKENS",
    "DEFAULT_PREFETCH_TIMEOUT_BASE",
    "DEFAULT_PREFETCH_TIMEOUT_MAX",
    "DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN",
    "agree_hit_pages",
    "compute_backup_progress",
    "compute_prefetch_acks",
    "compute_prefetch_timeout",
    "is_prefetch_worth_it",
]

DEFAULT_PREFETCH_THRESHOLD_TOKENS = 256
"""Below this agreed hit, in tokens, a prefetch is revoked (CTL-3)."""
DEFAULT_PREFETCH_TIMEOUT_BASE = 2.0
"""Seconds every prefetch may take under the timeout policy (CTL-10)."""
DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN = 0.1
"""Extra seconds per 1024 tokens of hit (CTL-10)."""
DEFAULT_PREFETCH_TIMEOUT_MAX = 30.0
"""Upper bound on the prefetch timeout, in seconds (CTL-10)."""


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
    """Return the hit every rank uses: the minimum over ranks. Clauses: RANK-1, RANK-2.

    pre: len(rank_hits) >= 1
    pre: all(h >= 0 for h in rank_hits)
    post: __return__ in rank_hits
    post: all(__return__ <= h for h in rank_hits)
    """
    return min(rank_hits)


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
    maximum: float = DEFAULT_PREFETCH_TIMEOUT_MAX,
) -> float:
    """Return the prefetch timeout in seconds: min(maximum, base + per_ki_token * tokens / 1024). Clause: CTL-10.

    pre: 0 <= tokens <= 2 ** 53
    pre: 0 <= base <= 1e9 and 0 <= per_ki_token <= 1e9 and 0 <= maximum <= 1e9
    post: __return__ <= maximum
    post: __return__ >= min(maximum, base)
    """
    return min(maximum, base + per_ki_token * tokens / 1024)
