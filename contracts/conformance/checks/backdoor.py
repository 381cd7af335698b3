"""Checks that need the backend's backdoor hooks (``hicache_contracts.conformance.session.backdoor``).

Some states no call of the interface can make: an object a crashed writer
left short, or a page's object deleted behind the backend's back (an
eviction by another process, an operator). The hooks make them directly;
where the backend offers none, these checks are skipped with the reason.

Before relying on the hooks, each check confirms them against the backend
(a planted whole page is a hit, a written page is seen by ``peek``); hooks
that disagree with the backend skip the check, saying so, rather than blame
the backend.
"""

from __future__ import annotations

import torch

from hicache_contracts.conformance.session.backdoor import Backdoor, backdoor_of, no_backdoor_reason
from hicache_contracts.conformance.checks.v2 import expected_page, read_result, write_with_derived_sidecar
from hicache_contracts.conformance.checks.core_hits import setup_clause
from hicache_contracts.conformance.session.context import Instance, SuiteContext
from hicache_contracts.conformance.framework import CheckSkipped, conformance_check, expect
from hicache_contracts.conformance.session.pools import describe_page_difference, pages_equal
from hicache_contracts.models import PoolHitPolicy, PoolName
from hicache_spec import KV


def hooks(suite: SuiteContext) -> Backdoor:
    """Return the backend's backdoor hooks; skip the check where it offers none, or offers an object without them."""
    try:
        found = backdoor_of(suite.factory)
    except ValueError as error:  # hooks that are not hooks: the fixture's bug, not the backend's
        raise CheckSkipped(str(error)) from None
    if found is None:
        raise CheckSkipped(no_backdoor_reason())
    return found


def page_bytes(page: torch.Tensor) -> bytes:
    """The bytes of a flat page, as the backend holds them."""
    return page.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def lookups(suite: SuiteContext, instance: Instance, key: str, clause_id: str) -> dict[str, bool]:
    """Ask every claimed lookup whether ``key`` is a hit: batch_exists always, exists and get with legacy."""
    backend, pool = instance.backend, instance.pool
    seen = {"batch_exists": suite.io.count(instance, [key], clause_id=clause_id) == 1}
    if suite.claims("legacy"):
        seen["exists"] = bool(suite.calls.call(clause_id, backend.exists, key))
        target = torch.zeros(pool.page_element_count, dtype=pool.dtype)
        read = suite.calls.call(clause_id, backend.get, key, target)
        seen["get"] = isinstance(read, torch.Tensor) and read.numel() == pool.page_element_count
    return seen


@conformance_check("BE-13", "BE-16", "BE-15", requires=("core",))
def planted_short_objects_are_misses(suite: SuiteContext) -> None:
    """An empty or truncated object left in the store is a miss, and a read of an object of any wrong size writes
    nothing outside its host page.

    The lookups (BE-13) are asked where legacy is claimed; the v1 read where
    v1 is. A longer object may be read as its first page (HiCacheFile reads
    just a page's bytes) but must never spill into the next host page.
    """
    backdoor, instance = hooks(suite), suite.instances.main
    backend, pool = instance.backend, instance.pool
    if not (suite.claims("legacy") or suite.claims("v1")):
        raise CheckSkipped("neither legacy nor v1 is claimed: no call of the backend's mode reads one planted page")
    whole = suite.names.new_keys(1)[0]
    suite.calls.call("BE-13", backdoor.plant, backend, whole, KV, page_bytes(suite.pages.page_for(whole, pool)))
    if not all(lookups(suite, instance, whole, "BE-13").values()):
        raise CheckSkipped(
            f"a whole page planted through the backdoor under {suite.names.label(whole)} is not a hit: the hooks "
            "do not plant where the backend reads, so nothing planted can be checked"
        )
    size = pool.page_bytes
    objects = (
        ("an empty object", 0),
        ("a truncated object (half a page)", size // 2),
        ("a longer object (a page and a half)", size + size // 2),
    )
    for label, length in objects:
        key = suite.names.new_keys(1)[0]
        data = (page_bytes(suite.pages.page_for(key, pool)) * 2)[:length]
        suite.calls.call("BE-13", backdoor.plant, backend, key, KV, data)
        planted = f"plant {length} bytes under {suite.names.label(key)} (a page is {size})"
        short = length < size
        if short and suite.claims("legacy"):
            hits = [name for name, hit in lookups(suite, instance, key, "BE-13").items() if hit]
            expect(not hits, "BE-13", f"{label} counts as a hit for {', '.join(hits)}", f"{planted}, then look it up")
        if not suite.claims("v1"):
            continue
        guards = [1, 3]  # the object is read into host page 2
        pool.fill(guards)
        before = [pool.peek(page) for page in guards]
        flags = suite.io.v1_flags(
            suite.calls.call("BE-16", backend.batch_get_v1, [key], pool.slots([2]), None), [key], "batch_get_v1"
        )
        read = f"{planted}, then batch_get_v1([{suite.names.label(key)}]) into host page 2"
        if short:
            expect(not any(flags), "BE-15", f"batch_get_v1 of {label} reported it loaded ({flags})", read)
        for page, expected in zip(guards, before):
            got = pool.peek(page)
            expect(
                pages_equal(expected, got),
                "BE-16",
                f"a read of {label} wrote into host page {page}, next to its own "
                f"({describe_page_difference(expected, got)})",
                read,
            )
    if suite.claims("v2"):
        short_sidecar_objects_are_misses(suite, backdoor, instance)


def short_sidecar_objects_are_misses(suite: SuiteContext, backdoor: Backdoor, instance: Instance) -> None:
    """A short object in a sidecar pool (the indexer's, behind a whole KV page) is a miss: batch_exists_v2 counts no
    hit for that pool (nor, the pool gating it, for KV), and batch_get_v2 does not report it loaded."""
    backend, pool = instance.backend, instance.pool
    name = PoolName.INDEXER
    sidecar = instance.pool_for(name)
    whole = suite.names.new_keys(1)[0]
    for target, kind in ((pool, KV), (sidecar, name.value)):
        suite.calls.call("BE-13", backdoor.plant, backend, whole, kind, page_bytes(suite.pages.page_for(whole, target)))
    query = [suite.wire.transfer(name, [whole], policy=PoolHitPolicy.ALL_PAGES)]
    shown = f"batch_exists_v2([{suite.names.label(whole)}], [indexer])"
    _, found = read_result(suite, suite.calls.call("BE-13", backend.batch_exists_v2, [whole], query, None), shown)
    if found.get(name.value, 0) != 1:
        raise CheckSkipped(
            f"a whole indexer page planted through the backdoor under {suite.names.label(whole)} is not a hit: the "
            "hooks do not plant where the backend reads sidecar pages, so no short one can be checked there"
        )
    size = sidecar.page_bytes
    for label, length in (("an empty object", 0), ("a truncated object (half a page)", size // 2)):
        key = suite.names.new_keys(1)[0]
        suite.calls.call("BE-13", backdoor.plant, backend, key, KV, page_bytes(suite.pages.page_for(key, pool)))
        data = page_bytes(suite.pages.page_for(key, sidecar))[:length]
        suite.calls.call("BE-13", backdoor.plant, backend, key, name.value, data)
        planted = (
            f"plant a whole KV page and {length} bytes of indexer page under {suite.names.label(key)} (an indexer "
            f"page is {size})"
        )
        query = [suite.wire.transfer(name, [key], policy=PoolHitPolicy.ALL_PAGES)]
        raw = suite.calls.call("BE-13", backend.batch_exists_v2, [key], query, None)
        kv_hit, hits = read_result(suite, raw, planted)
        expect(
            hits.get(name.value, 0) == 0 and kv_hit == 0,
            "BE-13",
            f"{label} in the indexer pool counts as a hit (kv_hit_pages {kv_hit}, extra_pool_hit_pages {hits})",
            f"{planted}, then batch_exists_v2([{suite.names.label(key)}], [indexer])",
        )
        sidecar.fill([2])
        reads = [suite.wire.transfer(name, [key], sidecar.slots([2]), read=True)]
        loaded = suite.io.v2_flags(suite.calls.call("BE-13", backend.batch_get_v2, reads, None), reads, "batch_get_v2")[
            name.value
        ]
        expect(
            not any(loaded),
            "BE-13",
            f"batch_get_v2 of {label} in the indexer pool reported it loaded ({loaded})",
            f"{planted}, then batch_get_v2([indexer {suite.names.label(key)}]) into indexer host page 2",
        )


@conformance_check("BE-4", "BE-15", requires=("core",))
def a_removed_object_is_never_read_as_a_hit(suite: SuiteContext) -> None:
    """A page whose stored object vanished (evicted or deleted elsewhere) reads as a miss or as its own bytes, never
    as a hit without them, and no call raises.

    Lookups may still count it: SGLang's HiCacheFile with its metadata cache
    answers exists from memory for a few seconds, and the engine copes with a
    hit that fails to load. A read that reports it loaded must have loaded it.
    """
    backdoor, instance = hooks(suite), suite.instances.main
    backend, pool = instance.backend, instance.pool
    keys = suite.names.new_keys(3)
    suite.io.store(instance, keys, clause_id=setup_clause(suite))
    gone = keys[1]
    if any(suite.calls.call("BE-4", backdoor.peek, backend, key, KV) is None for key in keys):
        raise CheckSkipped("the backdoor's peek does not see the pages the backend wrote: the hooks disagree with it")
    suite.calls.call("BE-4", backdoor.remove, backend, gone, KV)
    if suite.calls.call("BE-4", backdoor.peek, backend, gone, KV) is not None:
        raise CheckSkipped("the backdoor's remove left the object in place: nothing vanished to check")
    removed = f"write {suite.names.show(keys)}, remove the object of {suite.names.label(gone)} through the backdoor"
    suite.io.count(instance, keys, clause_id="BE-4")
    lookups(suite, instance, gone, "BE-4")
    pages = suite.io.read(instance, keys, pages=[4, 5, 6], clause_id="BE-4")
    wanted = suite.pages.page_for(gone, pool)
    expect(
        pages[1] is None or pages_equal(wanted, pages[1]),
        "BE-4",
        f"the read reported the removed page {suite.names.label(gone)} loaded, but its slots hold "
        f"{describe_page_difference(wanted, pages[1])}",
        f"{removed}, then read all three",
    )
    # SGLang reads no page of a v1 read after its first miss: the page after the removed one counts only when the
    # removed one read back as itself
    for index in (0, 2) if pages[1] is not None else (0,):
        expect(
            pages[index] is None and suite.may_evict or suite.pages.same_page(keys[index], pool, pages[index]),
            "BE-15",
            f"{suite.names.label(keys[index])}, next to the removed page, did not read back whole",
            f"{removed}, then read all three",
        )


@conformance_check("BE-22")
def a_removed_kv_derived_sidecar_is_never_read_as_a_hit(suite: SuiteContext) -> None:
    """A KV-derived sidecar page whose object vanished reads as a miss or as its own bytes, never as a hit without them.

    As for KV pages, lookups may still count it (SGLang's HiCacheFile with its
    metadata cache does); a read that reports it loaded must have loaded it.
    """
    backdoor, instance = hooks(suite), suite.instances.main
    backend, pool = instance.backend, instance.pool
    suite.io.require_round_trip(instance)
    keys = suite.names.new_keys(3)
    written_kv, written_indexer = write_with_derived_sidecar(suite, instance, keys, [0, 1, 2])
    if not (all(written_kv) and all(written_indexer)):
        raise CheckSkipped(
            f"the backend refused the backup (kv {written_kv}, indexer {written_indexer}); nothing to remove"
        )
    indexer = PoolName.INDEXER.value
    if any(suite.calls.call("BE-22", backdoor.peek, backend, key, indexer) is None for key in keys):
        raise CheckSkipped(
            "the backdoor's peek does not see the indexer pages the backend wrote: the hooks disagree with it"
        )
    suite.calls.call("BE-22", backdoor.remove, backend, keys[1], indexer)
    removed = (
        f"back up {suite.names.show(keys)} with a kv-derived indexer, remove the indexer object of "
        f"{suite.names.label(keys[1])} through the backdoor"
    )
    query = [suite.wire.transfer(PoolName.INDEXER, keys, policy=PoolHitPolicy.ALL_PAGES, derived=True)]
    suite.calls.call("BE-22", backend.batch_exists_v2, keys, query, None)  # may still count it; must not raise
    indexer_pool = instance.pool_for(PoolName.INDEXER)
    reads = [suite.wire.transfer(PoolName.INDEXER, keys, pool.slots([4, 5, 6]), derived=True, read=True)]
    indexer_pool.fill([4, 5, 6])
    loaded = suite.io.v2_flags(suite.calls.call("BE-22", backend.batch_get_v2, reads, None), reads, "batch_get_v2")
    wanted = expected_page(suite, instance, indexer, keys[1])
    got = indexer_pool.peek(5)
    expect(
        not loaded[indexer][1] or pages_equal(wanted, got),
        "BE-22",
        f"batch_get_v2 reported the vanished indexer page of {suite.names.label(keys[1])} loaded, but its slots hold "
        f"{describe_page_difference(wanted, got)}",
        f"{removed}, then batch_get_v2 of the indexer",
    )
