"""Prefix metadata semantics (PFX family), as pure functions over tuples."""

from __future__ import annotations

from typing import Optional

from hicache_spec.batching import plan_batches

__all__ = ["Keys", "SidecarGroup", "expected_prefixes", "extend_prefix", "plan_sidecar_groups", "prefix_before"]

Keys = tuple[str, ...]
"""An ordered sequence of page keys."""


def extend_prefix(prefix: Optional[Keys], batch: Keys) -> Optional[Keys]:
    """Return the prefix handed to the call after ``batch``. Clauses: PFX-1, PFX-3, PFX-4, PFX-5.

    None stays None; any tuple, the empty one included, grows by ``batch``.
    The input is never changed (tuples are immutable, and a new value is returned).

    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + batch
    post: __return__ is None or len(__return__) == len(prefix) + len(batch)
    """
    if prefix is None:  # PFX-3: the feature is off, and stays off
        return None
    return prefix + batch  # PFX-4: [] accumulates; PFX-5: a new value


def prefix_before(prefix: Optional[Keys], chain: Keys, offset: int) -> Optional[Keys]:
    """Return the prefix of a call whose first key is ``chain[offset]``. Clause: PFX-2.

    pre: 0 <= offset <= len(chain)
    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + chain[:offset]
    """
    return extend_prefix(prefix, chain[:offset])


def expected_prefixes(prefix: Optional[Keys], chain: Keys, batch_size: int) -> tuple[Optional[Keys], ...]:
    """Return the prefix every batch of an operation receives, in batch order. Clauses: PFX-2, CTL-2.

    pre: batch_size >= 1
    post: len(__return__) == len(plan_batches(len(chain), batch_size))
    post: all((p is None) == (prefix is None) for p in __return__)
    post: all(p is None or p == prefix + chain[:start] for p, (start, _) in zip(__return__, plan_batches(len(chain), batch_size)))
    """
    result: list[Optional[Keys]] = []
    current = prefix
    for start, end in plan_batches(len(chain), batch_size):
        result.append(current)
        current = extend_prefix(current, chain[start:end])
    return tuple(result)


SidecarGroup = tuple[Optional[Keys], tuple[int, ...]]
"""One sidecar v2 call: (its prefix, the indices of the transfers it carries)."""


def plan_sidecar_groups(prefix: Optional[Keys], span: Keys, key_counts: tuple[int, ...]) -> tuple[SidecarGroup, ...]:
    """Return the sidecar v2 calls of an operation: one per distinct trailing-key count. Clauses: PFX-9, CTL-2, HYB-2, HYB-5.

    Transfer i holds the last ``key_counts[i]`` keys of ``span``; it joins the
    group of every transfer that covers the same ``len(span) - key_counts[i]``
    leading keys, groups in order of first appearance. Each group's prefix is
    ``prefix + span[:covered]``, so prefix and keys form one chain. With the
    feature off (``prefix`` None) all transfers go in one call without a
    prefix. SGLang 0.5.21+ (``_trailing_chain_groups``).

    pre: all(0 <= n <= len(span) for n in key_counts)
    post: sorted(i for _, members in __return__ for i in members) == list(range(len(key_counts)))
    post: prefix is not None or len(__return__) == (1 if key_counts else 0) or __return__ == ((None, ()),)
    post: prefix is None or all(p == prefix + span[: len(span) - key_counts[m[0]]] for p, m in __return__)
    post: prefix is None or len(__return__) == len(set(key_counts))
    """
    if prefix is None:
        return ((None, tuple(range(len(key_counts)))),)
    groups: dict[int, list[int]] = {}
    for index, count in enumerate(key_counts):
        groups.setdefault(len(span) - count, []).append(index)
    return tuple((prefix + span[:covered], tuple(members)) for covered, members in groups.items())
