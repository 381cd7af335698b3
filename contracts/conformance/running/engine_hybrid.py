"""Hybrid sidecar scenarios of the engine-driven tier: the release's HybridCacheController, its tree's transfers.

With a release importable, ``run_hybrid_scenarios`` builds the release's ``HybridCacheController`` over
its host-pool group with an SWA window and a KV-derived indexer pool, then with a Mamba state pool, and
has the release's tree code build each write-through and prefetch and their pool transfers
(``hybrid_engine``).

Scenarios: the full hit (a chain of 150 pages, more than one storage batch, written then read; prefix
metadata on: the root's prefix, ``[]``, so each sidecar has a call of its own) and the partial hit (a
chain 50 pages longer than the one written: the window is the hit's tail, moved there by the
controller's ``_sync_trailing_keys``; prefix metadata off, so one v2 call carries both sidecars); and
with the Mamba pool, the partial hit (the state re-aligned to the hit's last page). Verdict, slot by
slot: every KV page loaded holds the bytes written, as does every indexer page in the rows of the KV
page it follows and every trailing page in the rows the transfer names; every other page of every
pool is untouched. A failure names the SGLang function that made the failing call.
"""

from __future__ import annotations

import functools
import importlib
import time
from typing import Any, Callable, Optional

import torch

from hicache_spec import KV
from hicache_contracts.conformance.running.engine_parts import (
    EXTRA_PAGES,
    PAGE_SIZE,
    STORED_PAGES,
    callers,
    read_method,
)
from hicache_contracts.conformance.running.hybrid_engine import (
    TRAILING,
    HybridEngine,
    host_pools,
    pool_name,
    trailing_transfers,
)

__all__ = ["HYBRID_SCENARIOS", "run_hybrid_scenarios"]

HYBRID_SCENARIOS: tuple[str, ...] = (
    "hybrid sidecars, full hit",
    "hybrid sidecars, partial hit",
    "hybrid Mamba state, partial hit",
)
"""The hybrid scenarios, in the order they run."""


def _differs(got: torch.Tensor, wanted: torch.Tensor) -> bool:
    return not torch.equal(got.reshape(-1).view(torch.uint8), wanted.reshape(-1).view(torch.uint8))


def _caller(method: str, sidecar: Optional[bool]) -> str:
    """The SGLang functions calling ``method``; ``sidecar`` keeps those reading trailing pools (True) or the others."""
    found = callers(method).split(" / ")
    if sidecar is not None:
        found = [name for name in found if ("sidecar" in name) == sidecar] or found
    return " / ".join(found)


def _check(engine: HybridEngine, operation: Any, info: Any, loaded: int, before: Any, expect: int) -> str:
    """What is wrong with a hybrid prefetch's outcome ('' when nothing), naming the SGLang caller."""
    page = PAGE_SIZE

    def by(method: str, sidecar: Optional[bool] = None) -> str:
        return f"{method}, called by {_caller(method, sidecar)}"

    hits = operation.storage_hit_count // page
    if hits != expect:
        return f"the hit query found {hits} of the {expect} pages written with their sidecars ({by('batch_exists_v2')})"
    kv_method = read_method(engine)
    if loaded // page != expect:
        return f"{loaded // page} of {expect} pages loaded ({by(kv_method)})"
    keys = list(operation.hash_value[:expect])
    derived = [name for name in engine.sidecars if name not in TRAILING]
    touched: dict[str, set[int]] = {name: set() for name in engine.pools}
    for number, key in enumerate(keys):
        row = int(operation.host_indices[number * page])
        for name in (KV, *derived):
            touched[name].add(row // page)
            if not _differs(engine.pools[name].get_data_page(row), engine.written[name][key]):
                continue
            if name == KV:
                return f"KV page {number} of the chain loaded other bytes than were written ({by(kv_method)})"
            return (
                f"{name} page {number} (KV-derived) loaded other bytes than were written, or none "
                f"({by('batch_get_v2', False)}; written by {by('batch_set_v2')})"
            )
    transfers = trailing_transfers(info)
    if {pool_name(transfer) for transfer in transfers} != {name for name in engine.sidecars if name in TRAILING}:
        return "the tree built no trailing transfer for a trailing pool of the read"
    for transfer in transfers:
        name, pool = pool_name(transfer), engine.pools[pool_name(transfer)]
        wanted = keys[-TRAILING[name] :]
        if transfer.host_indices is None or list(transfer.keys or []) != wanted:
            return (
                f"the {name} read named keys {list(transfer.keys or [])[:2]}..., not the hit's last {len(wanted)} pages"
            )
        for number, key in enumerate(wanted):
            row = int(transfer.host_indices[number * pool.page_size])
            touched[name].add(row // pool.page_size)
            if _differs(pool.get_data_page(row), engine.written[name][key]):
                return (
                    f"{name} page {number} of the trailing {len(wanted)} loaded other bytes than were written, or none "
                    f"({by('batch_get_v2', True)}; written by {by('batch_set_v2')})"
                )
    for name, pages in before.items():
        size = engine.pools[name].page_size
        for number, old in enumerate(pages):
            if number not in touched[name] and _differs(engine.pools[name].get_data_page(number * size), old):
                method = kv_method if name == KV else "batch_get_v2"
                return f"{name} host page {number}, outside the rows read, changed ({by(method, name in TRAILING or None)})"
    return ""


SETS: dict[str, tuple[str, ...]] = {
    HYBRID_SCENARIOS[0]: ("swa", "indexer"),
    HYBRID_SCENARIOS[1]: ("swa", "indexer"),
    HYBRID_SCENARIOS[2]: ("mamba",),
}
"""The sidecar pools of each scenario's model."""


def run_hybrid_scenarios(
    attach: tuple[str, Optional[dict[str, Any]]],
    folder: Optional[str],
    model: str,
    record: Callable[[str, Callable[[], str], Any, float], None],
    skip: Callable[[str, str], None],
) -> None:
    """Run the hybrid scenarios with the loaded release; ``record(name, body, recorder, setup_s)`` keeps each verdict.

    A release without a piece a scenario needs gets ``skip(name, reason)``, the reason naming the piece.
    """
    missing = _missing_pieces()
    if missing:
        for name in HYBRID_SCENARIOS:
            skip(name, f"SGLang lacks {missing}")
        return
    counter = [0]
    for sidecars in dict.fromkeys(SETS.values()):
        names = [name for name, kept in SETS.items() if kept == sidecars]
        started = time.monotonic()
        try:
            host_pools(sidecars[-1:])
        except Exception as error:  # the release cannot build this pool on CPU
            for name in names:
                skip(
                    name,
                    f"the release's {sidecars[-1]} host pool does not build on CPU: {type(error).__name__}: {error}",
                )
            continue
        try:
            engine = HybridEngine(attach, folder, f"{model}-{'-'.join(sidecars)}", sidecars)
        except Exception as error:  # a verdict, never a crash
            found = (
                f"attaching the backend to the hybrid controller failed: {type(error).__name__}: {error} "
                "(HybridCacheController.attach_storage_backend: register_mem_host_pool_v2 for each pool of the group)"
            )
            for name in names:
                record(name, functools.partial(str, found), None, 0.0)
            continue
        built_s = time.monotonic() - started
        try:
            for name in names:
                prefix, partial = PLANS[name]
                record(name, functools.partial(_round_trip, engine, counter, partial, prefix), engine.rec, built_s)
                built_s = 0.0
        finally:
            engine.close()


PLANS: dict[str, tuple[bool, bool]] = {
    HYBRID_SCENARIOS[0]: (True, False),
    HYBRID_SCENARIOS[1]: (False, True),
    HYBRID_SCENARIOS[2]: (True, True),
}
"""Each scenario's prefix metadata (on: the root's ``[]``; off: None) and whether it asks for more than was written."""


def _round_trip(engine: HybridEngine, counter: list[int], partial: bool, prefix: bool) -> str:
    page, stored = PAGE_SIZE, STORED_PAGES
    extra_pages = EXTRA_PAGES if partial else 0
    engine.cache.hicache_storage_pass_prefix_keys = prefix
    counter[0] += 1
    start = 1_000_000 * counter[0] + 500_000
    tokens = list(range(start, start + (stored + extra_pages) * page))
    done = engine.backup(tokens[: stored * page], seed=counter[0])
    if done.completed_tokens != stored * page:
        return (
            f"the write-through completed {done.completed_tokens} of {stored * page} tokens "
            f"(batch_set_v2 / batch_set_v1, called by {callers('batch_set_v2')})"
        )
    operation, info, loaded, before = engine.prefetch(tokens)
    try:
        return _check(engine, operation, info, loaded, before, stored)
    finally:
        engine.release(operation, info)


_PIECES = (
    ("sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller", "HybridCacheController"),
    ("sglang.srt.mem_cache.unified_radix_cache", "UnifiedRadixCache"),
    ("sglang.srt.mem_cache.unified_cache.unified_tree_core", "UnifiedTreeCore"),
    ("sglang.srt.mem_cache.unified_cache.components.swa", "SWAComponent"),
    ("sglang.srt.mem_cache.unified_cache.components.mamba", "MambaComponent"),
    ("sglang.srt.mem_cache.hicache_storage", "SidecarPoolSpec"),
)


def _module(name: str) -> Any:
    return importlib.import_module(name)


def _missing_pieces() -> str:
    """The first piece the hybrid scenarios need that the loaded release lacks ('' when none)."""
    for module, name in _PIECES:
        try:
            if not hasattr(_module(module), name):
                return f"{module}.{name}"
        except ImportError as error:
            return f"{module} (import fails: {error})"
    radix = _module("sglang.srt.mem_cache.unified_radix_cache").UnifiedRadixCache
    for method in (
        "write_backup_storage",
        "prefetch_from_storage",
        "_build_sidecar_transfers",
        "_alloc_prefetch_aux_staging",
    ):
        if not hasattr(radix, method):
            return f"UnifiedRadixCache.{method}"
    return ""
