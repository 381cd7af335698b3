"""How a variant of the reference controller plugs in: ``CacheController.with_parts``, and the steps that moved.

A variant (a planted bug, an engine's own step) subclasses one collaborator;
``with_parts`` returns a controller subclass using it. A controller subclass
that still defines a step the controller no longer has fails at class
creation, naming the collaborator that holds it. See docs/controller.md.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

__all__ = ["MOVED_STEPS", "PART_SLOTS", "reject_moved_steps", "subclass_with_parts"]

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

MOVED_STEPS = {
    "_register_host_pools": "Attachment",
    **dict.fromkeys(["_operation_extra_info", "_extra_info_for_slice", "_sidecar_groups"], "PrefixInfo"),
    **dict.fromkeys(["_free_host_slots", "_record_internal_error"], "Upkeep"),
    "_should_terminate": "Termination",
    **dict.fromkeys(["_agree_ack", "_emit_ack", "_finish_prefetch"], "Acks"),
    **dict.fromkeys(
        [
            "_run_hit_query_stage",
            "_hit_query",
            "_hit_query_v1",
            "_hit_query_v2",
            "_exists_slice",
            "_exists_transfers",
            "_span_worth_querying",
            "_allocate",
            "_agree_hit",
            "_is_worth_prefetching",
            "_revoke",
        ],
        "HitQuery",
    ),
    **dict.fromkeys(
        ["_run_io_stage", "_load_kv", "_stops_after", "_read_slice", "_read_kv_slice", "_read_derived_slice"],
        "PrefetchIO",
    ),
    **dict.fromkeys(
        ["_sidecar_window", "_load_sidecars", "_read_sidecars", "_read_sidecar_parts", "_sidecar_read_succeeded"],
        "SidecarReader",
    ),
    **dict.fromkeys(["_writes_kv", "_writes_sidecar"], "StorageWriter"),
    **dict.fromkeys(
        ["_run_backup", "_write_slice", "_write_sidecars", "_backup_sidecar_transfers", "_agree_backup"],
        "BackupWriter",
    ),
    **dict.fromkeys(["_hit_query_worker", "_io_worker", "_backup_worker", "_submit"], "Workers"),
}
"""Steps that were methods of the controller, and the collaborator that holds them now."""


def reject_moved_steps(cls: type) -> None:
    """Raise TypeError if ``cls`` defines a step that moved to a collaborator."""
    for name in vars(cls):
        if name in MOVED_STEPS:
            raise TypeError(
                f"{cls.__name__}.{name}: this step is now a method of {MOVED_STEPS[name]}; subclass that "
                "and plug it in with CacheController.with_parts (docs/controller.md)"
            )


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
