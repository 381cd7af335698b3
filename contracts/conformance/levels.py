"""The backend levels a vendor can claim: each a named set of clause IDs derived from the registry.

A level's clauses are the live clauses of that level whose role is
``backend`` or ``both`` (``hicache_spec.clauses``). ``core`` binds every
backend; the others are claimed (declared or probed, see ``runner``);
``legacy`` is also required of a backend without v1 (SGLang moves its KV
through ``batch_get``/``batch_set``), and ``robustness`` (inputs no pinned
release sends) and ``format`` (pages tagged by the host pool's format, a
guard SGLang does not require) only count when declared. The ``linker`` level binds linkers, which
``hicache-conform linker`` judges: it is no level of this suite.
"""

from __future__ import annotations

import functools

from hicache_spec import LEVELS, Clause, clauses

__all__ = [
    "BACKEND_LEVELS",
    "BACKEND_ROLES",
    "OWN_SUITE_LEVELS",
    "backend_clauses",
    "level_clause_ids",
    "level_clauses",
    "level_of",
    "parse_levels",
]

BACKEND_ROLES: tuple[str, ...] = ("backend", "both")
"""Clause roles that a backend must honour."""

OWN_SUITE_LEVELS: tuple[str, ...] = ("linker",)
"""Levels whose implementations a suite of their own judges (``hicache-conform linker``): a linker is no storage
backend, so the vendor suite never claims, lists or checks them."""

BACKEND_LEVELS: tuple[str, ...] = tuple(
    level
    for level in LEVELS
    if level not in OWN_SUITE_LEVELS and any(item.level == level and item.role in BACKEND_ROLES for item in clauses())
)
"""The levels that bind storage backends (those with a live backend clause, but ``OWN_SUITE_LEVELS``), in the
registry's order."""


def level_clauses(level: str) -> tuple[Clause, ...]:
    """Return the live backend clauses of ``level``, in registry order."""
    if level not in BACKEND_LEVELS:
        raise ValueError(f"level: must be one of {list(BACKEND_LEVELS)} (got {level!r})")
    return tuple(item for item in clauses() if item.level == level and item.role in BACKEND_ROLES)


def level_clause_ids(level: str) -> tuple[str, ...]:
    """Return the IDs of ``level_clauses(level)``."""
    return tuple(item.id for item in level_clauses(level))


def backend_clauses() -> tuple[Clause, ...]:
    """Return every live backend clause, level by level in ``BACKEND_LEVELS`` order."""
    return tuple(item for level in BACKEND_LEVELS for item in level_clauses(level))


@functools.lru_cache(maxsize=1)
def _levels_by_clause() -> dict[str, str]:
    return {item.id: item.level for item in backend_clauses()}


def level_of(clause_id: str) -> str:
    """Return the level of a backend clause; raise ValueError for any other ID."""
    level = _levels_by_clause().get(clause_id)
    if level is None:
        raise ValueError(f"clause_id: must name a backend clause (got {clause_id!r})")
    return level


def parse_levels(text: str | None, *, field: str = "levels") -> tuple[str, ...] | None:
    """Return the levels of a comma-separated list (``"core,v1"``), or None for None or blank text.

    Raises ValueError naming ``field`` for a level that does not bind backends.
    """
    if text is None or not text.strip():
        return None
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if name not in BACKEND_LEVELS:
            if name in OWN_SUITE_LEVELS:
                kind = f"the {name} level, judged by hicache-conform {name}"
            else:
                kind = "an engine level" if name in LEVELS else "not a level"
            raise ValueError(f"{field}: must name backend levels from {list(BACKEND_LEVELS)} (got {name!r}, {kind})")
    return tuple(dict.fromkeys(names))
