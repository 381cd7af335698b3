"""The clause registry: every normative rule of the contract, with a stable ID.

A clause ID (``PFX-2``, ``BE-14``, ...) is public API. IDs are never renumbered;
a rule that no longer holds is retired (``retired=True``) and keeps its ID.
Code that implements a clause cites it in a comment, and every test that
checks it carries ``@pytest.mark.clause("PFX-2")``.
"""

from __future__ import annotations

from hicache_spec._clause import Clause
from hicache_spec.clauses import CLAUSES
from hicache_spec.releases import SGLANG_RELEASES, check_release, release_key

__all__ = [
    "Clause",
    "FAMILIES",
    "LEVELS",
    "ROLES",
    "UnknownClauseError",
    "clause",
    "clauses",
    "clauses_for_level",
    "clauses_for_release",
    "describe_releases",
    "holds_for",
]

DECISION = "decision"
"""The ``releases`` value of a project decision: a rule the project keeps for every release."""

FAMILIES: dict[str, str] = {
    "KEY": "page keys and the page-hash chain",
    "PFX": "prefix metadata (hicache_storage_pass_prefix_keys)",
    "BE": "backend calls and results",
    "NS": "namespacing of keys across models and ranks",
    "CTL": "the controller: hit query, IO, backup, acks, policies",
    "HYB": "hybrid models: sidecar pools and pool-hit folding",
    "RANK": "agreement between tensor/pipeline/context-parallel ranks",
    "LNK": "the UnifiedCacheLinker: device pools linked directly to a store",
}
"""Clause families, by ID prefix."""

LEVELS: dict[str, str] = {
    "core": "batch_exists and housekeeping; what every backend must honour",
    "legacy": "legacy page methods (get / set / exists / batch_get / batch_set), SGLang's path for a backend "
    "without v1",
    "v1": "zero-copy v1 interface (batch_get_v1 / batch_set_v1)",
    "v2": "pool-aware v2 interface (batch_exists_v2 / batch_get_v2 / batch_set_v2)",
    "prefix": "prefix metadata carried in extra_info",
    "namespacing": "keys kept apart per model and rank, shared for replicated KV",
    "concurrency": "safety under concurrent calls from the engine's threads",
    "durability": "pages survive a restart of a persistent backend",
    "robustness": "inputs no pinned SGLang release sends, checked only when claimed",
    "format": "pages tagged by the host pool's format; checked only when claimed",
    "controller": "the engine-side controller's calls and acks",
    "hybrid": "hybrid-model sidecar pools on the engine side",
    "ranks": "multi-rank agreement on the engine side",
    "linker": "the UnifiedCacheLinker interface and behaviour (direct device-to-store linkers)",
}
"""Capability levels. Backend levels are claimed by vendors; the others bind engines."""

ROLES = ("backend", "engine", "both")
"""Whom a clause binds: the storage backend, the engine's controller, or both."""


class UnknownClauseError(KeyError):
    """A clause ID was looked up that the registry does not hold."""


def _release_bounds(releases: str) -> tuple[str, str]:
    """Return the first and last pinned release a ``releases`` value covers; raise ValueError if malformed."""
    text = releases.strip()
    if text == DECISION:
        return SGLANG_RELEASES[0], SGLANG_RELEASES[-1]
    if text.endswith("+"):
        first, last = text[:-1], SGLANG_RELEASES[-1]
    elif "-" in text:
        first, last = text.split("-", 1)
    else:
        first = last = text
    check_release(first)
    check_release(last)
    if release_key(first) > release_key(last):
        raise ValueError(f"Clause.releases: range runs backwards (got {releases!r})")
    return first, last


def holds_for(item: Clause, version: str) -> bool:
    """Return whether clause ``item`` holds for pinned SGLang release ``version`` (a decision holds for all)."""
    check_release(version)
    first, last = _release_bounds(item.releases)
    return release_key(first) <= release_key(version) <= release_key(last)


def describe_releases(item: Clause) -> str:
    """Return the releases of a clause in words: ``since 0.5.21``, ``0.5.20–0.5.22``, ``0.5.23 only``, ``project decision``."""
    if item.releases == DECISION:
        return "project decision (every release)"
    first, last = _release_bounds(item.releases)
    if item.releases.endswith("+"):
        return f"since {first}" if first != SGLANG_RELEASES[0] else f"every pinned release (since {first})"
    if first == last:
        return f"{first} only"
    return f"{first}–{last}"


def _validate(all_clauses: tuple[Clause, ...]) -> dict[str, Clause]:
    by_id: dict[str, Clause] = {}
    for item in all_clauses:
        if item.id in by_id:
            raise ValueError(f"Clause.id: duplicate ID (got {item.id!r})")
        if item.family not in FAMILIES:
            raise ValueError(f"Clause.id: unknown family (got {item.id!r})")
        if item.level not in LEVELS:
            raise ValueError(f"Clause.level: unknown level (got {item.level!r} in {item.id})")
        if item.role not in ROLES:
            raise ValueError(f"Clause.role: must be one of {ROLES} (got {item.role!r} in {item.id})")
        try:
            _release_bounds(item.releases)
        except ValueError as error:
            raise ValueError(f"Clause.releases: {error} (in {item.id})") from None
        by_id[item.id] = item
    return by_id


def _load() -> dict[str, Clause]:
    return _validate(CLAUSES)


_BY_ID: dict[str, Clause] | None = None


def _registry() -> dict[str, Clause]:
    global _BY_ID
    if _BY_ID is None:
        _BY_ID = _load()
    return _BY_ID


def clause(clause_id: str) -> Clause:
    """Return the clause with ID ``clause_id``; raise ``UnknownClauseError`` if none."""
    try:
        return _registry()[clause_id]
    except KeyError:
        raise UnknownClauseError(f"unknown clause ID {clause_id!r}") from None


def clauses(include_retired: bool = False) -> tuple[Clause, ...]:
    """Return every clause, ordered by family then number."""
    order = list(FAMILIES)
    items = [c for c in _registry().values() if include_retired or not c.retired]
    return tuple(sorted(items, key=lambda c: (order.index(c.family), c.number)))


def clauses_for_level(level: str) -> tuple[Clause, ...]:
    """Return the live clauses of one level."""
    if level not in LEVELS:
        raise ValueError(f"level: must be one of {sorted(LEVELS)} (got {level!r})")
    return tuple(c for c in clauses() if c.level == level)


def clauses_for_release(version: str, include_retired: bool = False) -> tuple[Clause, ...]:
    """Return the clauses that hold for pinned SGLang release ``version``; raise UnknownReleaseError if it is not pinned."""
    check_release(version)
    return tuple(c for c in clauses(include_retired) if holds_for(c, version))
