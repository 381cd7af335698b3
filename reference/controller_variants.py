"""How a variant of the reference controller plugs in: ``CacheController.with_parts``.

A variant (a planted bug, an engine's own step) subclasses one collaborator;
``with_parts`` returns a controller subclass using it. See docs/controller.md.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

__all__ = ["PART_SLOTS", "subclass_with_parts"]

PART_SLOTS: tuple[str, ...] = (
    "attachment_class",
    "prefix_info_class",
    "upkeep_class",
    "termination_class",
    "acks_class",
    "hit_query_class",
    "sidecar_reader_class",
    "prefetch_io_class",
    "storage_writer_class",
    "backup_writer_class",
    "workers_class",
)
"""The class attributes naming the collaborators, in the order they are built."""


def subclass_with_parts(base: type, parts: Sequence[type], name: Optional[str], doc: Optional[str]) -> type:
    """A subclass of ``base`` whose part slots are ``parts``, each a subclass of exactly one slot's class."""
    if not parts:
        raise TypeError("CacheController.with_parts: give at least one part")
    slots: dict[str, Any] = {}
    for part in parts:
        matches = [slot for slot in PART_SLOTS if isinstance(part, type) and issubclass(part, getattr(base, slot))]
        if len(matches) != 1:
            raise TypeError(f"CacheController.with_parts: {part!r} must subclass exactly one of the controller's parts")
        slots[matches[0]] = part
    name = name or "".join(part.__name__ for part in parts)
    namespace = {**slots, "__doc__": doc or parts[0].__doc__, "__module__": parts[0].__module__, "__qualname__": name}
    return type(name, (base,), namespace)
