"""Who writes what: the storage-writer rule, per-pool replication and DCP validation (CTL-8, CTL-15, BE-25)."""

from __future__ import annotations

from typing import Optional

__all__ = [
    "EVERY_RANK_POOLS",
    "check_dcp_config",
    "compute_non_writer_backup_tokens",
    "is_storage_writer",
    "writes_pool",
]

EVERY_RANK_POOLS = ("mamba",)
"""Pools every TP rank writes even when KV is replicated: their state is TP-sharded (SGLang 0.5.23 should_backup)."""


def is_storage_writer(is_mla_model: bool, tp_rank: int, dcp_rank: int = 0) -> bool:
    """Return whether this rank writes replicated KV: every rank without MLA, else the rank whose tp_rank equals its dcp_rank. Clause: CTL-8.

    Without DCP (dcp_rank 0) that is TP rank 0 (SGLang 0.5.20-0.5.22 ``tp_rank != 0``; 0.5.23 ``is_storage_writer``).

    post: is_mla_model or __return__
    post: not is_mla_model or __return__ == (tp_rank == dcp_rank)
    """
    return not is_mla_model or tp_rank == dcp_rank


def writes_pool(pool: str, writer: bool, every_rank_pools: tuple[str, ...] = EVERY_RANK_POOLS) -> bool:
    """Return whether a rank writes a sidecar pool: the writer writes all, other ranks only rank-sharded pools. Clause: CTL-8.

    post: not writer or __return__
    post: writer or __return__ == (pool in every_rank_pools)
    """
    return writer or pool in every_rank_pools


def compute_non_writer_backup_tokens(sidecar_ok: tuple[bool, ...], span_pages: int, page_size: int) -> int:
    """Return the tokens a non-writer rank reports for a backup: all of them iff it wrote at least one sidecar and every sidecar write succeeded, else 0. Clause: CTL-15.

    ``sidecar_ok`` holds, per sidecar transfer the rank wrote, whether every page
    of it succeeded. A non-writer with no sidecar to write reports 0 (SGLang 0.5.23
    ``_page_backup_with_stable_layout``).

    pre: span_pages >= 0 and page_size >= 1
    post: __return__ in (0, span_pages * page_size)
    post: (__return__ == span_pages * page_size and span_pages > 0) == (span_pages > 0 and len(sidecar_ok) > 0 and all(sidecar_ok))
    """
    return span_pages * page_size if sidecar_ok and all(sidecar_ok) else 0


def check_dcp_config(
    is_mla_model: bool, tp_rank: int, tp_size: int, dcp_rank: int, dcp_size: int, logical_page_size: Optional[int]
) -> Optional[str]:
    """Return why a decode-context-parallel setup is invalid, or None if it is valid. Clause: BE-25.

    DCP needs dcp_size >= 1 and 0 <= dcp_rank < dcp_size; beyond one shard it
    needs MLA, contiguous DCP groups within TP (tp_size a multiple of
    dcp_size, tp_rank % dcp_size == dcp_rank) and a positive logical page
    size that dcp_size divides (SGLang 0.5.23 HiCacheStorageConfig.__post_init__).

    post: __return__ is None or len(__return__) > 0
    post: dcp_size != 1 or dcp_rank != 0 or __return__ is None
    """
    if dcp_size < 1 or not 0 <= dcp_rank < dcp_size:
        return "dcp_rank: must satisfy 0 <= dcp_rank < dcp_size with dcp_size >= 1"
    if dcp_size == 1:
        return None
    if not is_mla_model:
        return "dcp_size: more than one DCP shard requires is_mla_model"
    if tp_size % dcp_size != 0 or not 0 <= tp_rank < tp_size or tp_rank % dcp_size != dcp_rank:
        return "dcp_rank: DCP groups must be contiguous within TP (tp_rank % dcp_size == dcp_rank)"
    if logical_page_size is None or logical_page_size <= 0 or logical_page_size % dcp_size != 0:
        return "logical_page_size: must be a positive multiple of dcp_size"
    return None
