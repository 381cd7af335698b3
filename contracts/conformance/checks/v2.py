"""Checks of the pool-aware v2 level: result shapes (BE-19), unregistered pools (BE-20, robustness), pool-hit folding
per policy (BE-21, HYB-6, HYB-7), truthful per-pool hits (HYB-8) and KV-derived sidecars (BE-22).

The suite registers KV and two sidecar pools (``indexer``, ``swa``) with
every instance when v2 is claimed; ``draft`` is never registered.

Calls follow SGLang's hybrid controller: KV pages move through v1 (or the
legacy path of a backend without v1), never through ``batch_get_v2`` /
``batch_set_v2``, which carry the sidecar pools only; a backup writes the
sidecars first, then KV; ``batch_exists_v2`` takes the whole chain with one
transfer per sidecar pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Sequence

from hypothesis import example, given, strategies as st

from hicache_spec.values import is_count
from hicache_spec import ALL_PAGES, STORAGE_BATCH_SIZE, TRAILING_PAGES, count_pool_hits, fold_pool_query
from hicache_contracts.sglang_release import release_of
from hicache_spec.releases import release_key
from hicache_contracts.conformance.session.context import UNREGISTERED_POOL, Instance, SuiteContext
from hicache_contracts.conformance.framework import CheckSkipped, conformance_check, expect, fail
from hicache_contracts.conformance.session.pools import describe_page_difference
from hicache_contracts.conformance.session.properties import run_property
from hicache_contracts.models import PoolHitPolicy, PoolName

VARIANTS = {PoolName.KV.value: 0, PoolName.INDEXER.value: 0, PoolName.SWA.value: 3}
"""Which variant of a key's page each pool stores (sidecar pools share a geometry, so they differ by variant)."""


def place(suite: SuiteContext, instance: Instance, name: PoolName, keys: Sequence[str], pages: Sequence[int]) -> None:
    """Put the suite's page of each key for pool ``name`` into ``pages`` of that pool."""
    pool = instance.pool_for(name)
    for key, page in zip(keys, pages):
        pool.poke(page, suite.pages.page_for(key, pool, VARIANTS[name.value]))


def expected_page(suite: SuiteContext, instance: Instance, name: str, key: str) -> Any:
    pool = instance.pool_for(name)
    return suite.pages.page_for(key, pool, VARIANTS[name])


def store_pool(
    suite: SuiteContext,
    instance: Instance,
    name: PoolName,
    keys: Sequence[str],
    pages: Sequence[int],
    *,
    derived: bool = False,
) -> None:
    """Write ``keys`` into pool ``name`` alone (KV as SGLang writes it, a sidecar with batch_set_v2); skip the
    check if the backend refuses."""
    if not keys:
        return
    if name is PoolName.KV:
        if not all(suite.io.write(instance, keys, pages=pages, clause_id="BE-21")):
            raise CheckSkipped("the backend refused to store KV pages the check needs")
        return
    place(suite, instance, name, keys, pages)
    transfers = [suite.wire.transfer(name, keys, instance.pool_for(name).slots(pages), derived=derived)]
    flags = suite.io.v2_flags(
        suite.calls.call("BE-19", instance.backend.batch_set_v2, transfers, None), transfers, "batch_set_v2"
    )
    if not all(flags[name.value]):
        raise CheckSkipped(f"the backend refused to store pages of pool {name.value!r} the check needs")


def read_result(suite: SuiteContext, raw: Any, shown: str) -> tuple[int, dict[str, int]]:
    """Return ``(kv_hit_pages, extra_pool_hit_pages by pool name)`` of a batch_exists_v2 result; fail BE-21 on a bad shape."""
    kv_hit = getattr(raw, "kv_hit_pages", None)
    extra = getattr(raw, "extra_pool_hit_pages", None)
    if not is_count(kv_hit, exact=False) or not isinstance(extra, Mapping):
        fail(
            "BE-21",
            "batch_exists_v2 must return a PoolTransferResult (kv_hit_pages int, extra_pool_hit_pages "
            f"dict), got {suite.names.show(raw)}",
            shown,
        )
    return kv_hit, {str(getattr(name, "value", name)): hits for name, hits in extra.items()}


@conformance_check("BE-19")
def v2_results_have_one_entry_per_pool(suite: SuiteContext) -> None:
    """batch_get_v2 and batch_set_v2 return one entry per transfer name holding len(keys) bools; [] gives {}."""
    instance, backend = suite.instances.main, suite.instances.main.backend
    for method in (backend.batch_set_v2, backend.batch_get_v2):
        raw = suite.calls.call("BE-19", method, [], None)
        expect(
            isinstance(raw, Mapping) and not raw,
            "BE-19",
            f"{method.__name__}([]) returned {suite.names.show(raw)}, not an empty dict",
        )
    for size in (1, 3):
        keys = suite.names.new_keys(size)
        kv_pages, swa_pages = list(range(size)), list(range(size, 2 * size))
        place(suite, instance, PoolName.INDEXER, keys, kv_pages)
        place(suite, instance, PoolName.SWA, keys, swa_pages)
        for method in (backend.batch_set_v2, backend.batch_get_v2):
            transfers = [  # the sidecars of one slice, as SGLang sends them (KV moves through v1)
                suite.wire.transfer(
                    PoolName.INDEXER,
                    keys,
                    instance.pool.slots(kv_pages),
                    derived=True,
                    read=method.__name__ == "batch_get_v2",
                ),
                suite.wire.transfer(
                    PoolName.SWA,
                    keys,
                    instance.pool_for(PoolName.SWA).slots(swa_pages),
                    policy=PoolHitPolicy.TRAILING_PAGES,
                ),
            ]
            suite.io.v2_flags(suite.calls.call("BE-19", method, transfers, None), transfers, method.__name__)


SIDECAR_SPAN = STORAGE_BATCH_SIZE + 72
"""Pages of the span BE-10's v2 check backs up: its KV-derived sidecar goes in one batch_set_v2, longer than a KV
slice."""
READ_BACK = 32
"""Pages of each slice BE-10's v2 check reads the span back in."""


@conformance_check("BE-10", requires=("v2",))
def v2_sidecar_calls_take_a_whole_span(suite: SuiteContext) -> None:
    """A backup's KV-derived sidecar write carries the whole span, more than STORAGE_BATCH_SIZE pages, in one
    batch_set_v2 (SGLang gives it the operation's every key): every page is stored, and reads back with its KV slice."""
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    suite.io.require_round_trip(instance)
    size, name = SIDECAR_SPAN, PoolName.INDEXER
    sidecar = instance.pool_for(name)
    keys = suite.names.new_keys(size)
    sources = suite.pages.spread(size)
    place(suite, instance, name, keys, sources)
    writes = [suite.wire.transfer(name, keys, pool.slots(sources), derived=True)]
    shown = (
        f"batch_set_v2 of the kv-derived {name.value} pages of {size} keys in one call, the KV write in slices of "
        f"{STORAGE_BATCH_SIZE}, then slices of {READ_BACK} read back as SGLang reads them: KV, then batch_get_v2 of the "
        "sidecar"
    )
    written = suite.io.v2_flags(suite.calls.call("BE-10", backend.batch_set_v2, writes, None), writes, "batch_set_v2")[
        name.value
    ]
    expect(all(written), "BE-10", f"a batch_set_v2 of {size} pages stored {sum(written)} of them", shown)
    seen = False
    for start in range(0, size, STORAGE_BATCH_SIZE):
        batch, pages = keys[start : start + STORAGE_BATCH_SIZE], sources[start : start + STORAGE_BATCH_SIZE]
        if not all(suite.io.write(instance, batch, pages=pages, clause_id="BE-10")):
            raise CheckSkipped("the backend refused KV pages of the span the check reads back")
    for start in range(0, size, READ_BACK):  # read back in small slices: the write is what is judged (HYB-8 reads)
        batch = keys[start : start + READ_BACK]
        targets = suite.pages.spread(len(batch), start=pool.page_count - len(batch))
        sidecar.fill(targets)
        kv_pages = suite.io.read(instance, batch, pages=targets, clause_id="BE-10")
        reads = [suite.wire.transfer(name, batch, pool.slots(targets), derived=True, read=True)]
        loaded = suite.io.v2_flags(suite.calls.call("BE-10", backend.batch_get_v2, reads, None), reads, "batch_get_v2")[
            name.value
        ]
        for index, (key, hit) in enumerate(zip(batch, loaded)):
            if kv_pages[index] is None or not hit:
                expect(suite.may_evict, "BE-10", f"page {start + index} of the span does not read back", shown)
                continue
            seen = True
            expect(
                suite.io.holds(key, sidecar, sidecar.peek(targets[index]), (VARIANTS[name.value],)),
                "BE-10",
                f"the {name.value} page {start + index} of the span reads back as "
                f"{describe_page_difference(expected_page(suite, instance, name.value, key), sidecar.peek(targets[index]))}",
                shown,
            )
    suite.io.require_seen(seen, f"that a sidecar span of {size} pages reads back")


@conformance_check("BE-20", requires=("v2", "robustness"))
def v2_unregistered_pool_is_all_false(suite: SuiteContext) -> None:
    """A transfer for a pool never registered yields all False for that pool and never raises; other pools are served.

    No pinned release sends such a transfer, so this runs only when the backend claims robustness.
    """
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    keys = suite.names.new_keys(2)
    swa = instance.pool_for(PoolName.SWA)
    place(suite, instance, PoolName.SWA, keys, [0, 1])
    for method in (backend.batch_set_v2, backend.batch_get_v2):
        transfers = [
            suite.wire.transfer(PoolName.SWA, keys, swa.slots([0, 1])),
            suite.wire.transfer(UNREGISTERED_POOL, keys, pool.slots([2, 3])),
        ]
        flags = suite.io.v2_flags(suite.calls.call("BE-20", method, transfers, None), transfers, method.__name__)
        expect(
            not any(flags[UNREGISTERED_POOL.value]),
            "BE-20",
            f"{method.__name__} returned {flags[UNREGISTERED_POOL.value]} for pool "
            f"{UNREGISTERED_POOL.value!r}, which was never registered",
            f"{method.__name__}({suite.names.show(transfers)})",
        )
        if method.__name__ == "batch_set_v2":
            expect(
                all(flags[PoolName.SWA.value]),
                "BE-20",
                f"batch_set_v2 failed the registered pool 'swa' "
                f"({flags[PoolName.SWA.value]}) because another transfer named an unregistered pool",
                f"batch_set_v2({suite.names.show(transfers)}) -> {flags}",
            )
    query = [suite.wire.transfer(UNREGISTERED_POOL, keys)]
    shown = f"batch_exists_v2({suite.names.show(keys)}, {suite.names.show(query)})"
    kv_hit, _ = read_result(suite, suite.calls.call("BE-20", backend.batch_exists_v2, keys, query, None), shown)
    expect(
        kv_hit == 0,
        "BE-20",
        f"batch_exists_v2 counted {kv_hit} pages of pool {UNREGISTERED_POOL.value!r}, which was never registered",
        shown,
    )


def _examined(kv: tuple[Any, ...], first: tuple[Any, ...], name: str) -> bool:
    """Whether SGLang's fold looks at pool ``name`` of a two-pool query whose first pool is ``first`` (its query
    tuple): always the first, the next while a length is left."""
    if name == first[0]:
        return True
    _, _, left = fold_pool_query(kv, (first,))
    return bool(left)


def _pattern(flags: Sequence[bool]) -> str:
    return "".join("S" if flag else "-" for flag in flags) or "(none)"


@st.composite
def pool_patterns(draw: Any) -> tuple[Any, ...]:
    """Draw which pages KV, an all_pages pool and a trailing_pages pool hold, the trailing window, and whether the
    trailing pool comes first in the query (SGLang lists component pools before sidecars)."""
    size = draw(st.integers(0, 6))
    flags = st.lists(st.booleans(), min_size=size, max_size=size)
    return draw(flags), draw(flags), draw(flags), draw(st.integers(0, 3)), draw(st.booleans())


RESTORABLE_READ_FROM = "0.5.23"
"""The first release whose engine reads restorable_prefix_pages (None there: every length up to the hit)."""


def none_read_as_every_length(suite: SuiteContext) -> bool:
    """Whether the engine the run stands for reads a None restorable_prefix_pages as 1..kv_hit_pages: the contract
    models and 0.5.23 on; before, the engine never reads the field."""
    sglang = suite.wire.sglang
    release = None if sglang is None else release_of(sglang)
    return release is None or release_key(release) >= release_key(RESTORABLE_READ_FROM)


@conformance_check("BE-21", "HYB-6", "HYB-7", "BE-26")
def v2_exists_folds_pool_hits_per_policy(suite: SuiteContext) -> None:
    """batch_exists_v2's kv_hit_pages is the largest length KV and every pool can restore (SGLang 0.5.23's HiCacheFile)."""
    instance, backend = suite.instances.main, suite.instances.main.backend
    suite.io.require_round_trip(instance)
    start = 2 * STORAGE_BATCH_SIZE
    hits: list[int] = []

    @given(pool_patterns())
    @example(([True, True, True], [False, False, False], [True, True, True], 1, False))  # an earlier pool, no hit
    @example(([True, True, True], [True, False, True], [True, True, True], 1, False))  # all_pages: a hole counts
    @example(([True, True, True], [True, True, True], [False, True, True], 1, False))  # trailing: only the window
    # KV 5, indexer 4, swa (N=2) restores 1, 2 and 5: the hit is 2, not min(5, 4, 5) = 4 (SGLang #39147).
    @example(([True] * 5, [True, True, True, True, False], [True, True, False, True, True], 2, False))
    @example(([False, True], [False, True], [True, False], 1, False))  # no KV hit: no pool is examined; entry 0
    # swa first restores only length 2; the all_pages indexer's own boundary is still 5, within the KV hit
    @example(([True] * 5, [True] * 5, [False, True, False, False, False], 1, True))
    def folding(patterns: tuple[Any, ...]) -> None:
        kv, indexer, swa, window, swa_first = patterns
        size = len(kv)
        keys = suite.names.new_keys(size)
        for name, present in ((PoolName.KV, kv), (PoolName.INDEXER, indexer), (PoolName.SWA, swa)):
            chosen = [key for key, here in zip(keys, present) if here]
            store_pool(suite, instance, name, chosen, list(range(start, start + len(chosen))))
        window_keys = keys[max(0, len(keys) - window) :] if window else []
        window = len(window_keys)  # N is len(transfer.keys): a window cannot hold more keys than the chain
        query = [
            suite.wire.transfer(PoolName.INDEXER, keys, policy=PoolHitPolicy.ALL_PAGES),
            suite.wire.transfer(PoolName.SWA, window_keys, policy=PoolHitPolicy.TRAILING_PAGES),
        ]
        queried = (
            (PoolName.INDEXER.value, ALL_PAGES, len(keys), tuple(indexer)),
            (PoolName.SWA.value, TRAILING_PAGES, window, tuple(swa)),
        )
        if swa_first:
            query, queried = query[::-1], queried[::-1]
        folded, entries, restorable = fold_pool_query(tuple(kv), queried)
        expected = dict(entries)
        # SGLang's backends stop examining pools once no length is left to restore: a later pool's entry is
        # not demanded then, but one that is reported must be that pool's own boundary.
        examined = [name for name, *_ in queried if _examined(tuple(kv), queried[0], name)]
        own = {pool[0]: fold_pool_query(tuple(kv), (pool,))[1] for pool in queried}
        order = "swa, then indexer" if swa_first else "indexer, then swa"
        shown = (
            f"{size} keys; stored kv '{_pattern(kv)}', indexer (all_pages) '{_pattern(indexer)}', "
            f"swa (trailing_pages, window {window}) '{_pattern(swa)}', queried {order}; expected kv_hit_pages "
            f"{folded}, extra_pool_hit_pages {expected}, restorable_prefix_pages {list(restorable)}"
        )
        result = suite.calls.call("BE-21", backend.batch_exists_v2, keys, query, None)
        kv_hit, pools = read_result(suite, result, shown)
        got = f"got kv_hit_pages {kv_hit}, extra_pool_hit_pages {pools}"
        for pool_name, clause_id, policy in (
            (PoolName.INDEXER.value, "HYB-6", ALL_PAGES),
            (PoolName.SWA.value, "HYB-7", TRAILING_PAGES),
        ):
            if pool_name not in pools:
                continue  # an entry left out is no verdict (BE-21): the engine then writes what storage may lack
            examined_here = pool_name in examined
            boundary = expected.get(pool_name, 0) if examined_here else dict(own[pool_name]).get(pool_name, 0)
            expect(
                suite.io.counted(pools[pool_name], boundary),
                clause_id,
                f"pool {pool_name!r} ({policy}) hit {pools[pool_name]} pages, expected its own boundary {boundary}"
                + ("" if examined_here else " (an entry is optional once no length is left to restore)")
                + f"; {got}",
                shown,
            )
        if PoolName.KV.value in pools and pools[PoolName.KV.value]:
            expect(
                suite.io.counted(pools[PoolName.KV.value], expected.get(PoolName.KV.value, 0)),
                "BE-21",
                f"the KV entry of extra_pool_hit_pages is not the KV leading run; {got}",
                shown,
            )
        hits.append(kv_hit)
        # pages an evicting backend dropped only take lengths away: its hit is 0 or one the written pages allow
        expect(
            kv_hit == folded or (suite.may_evict and (kv_hit == 0 or kv_hit in restorable)),
            "BE-21",
            f"kv_hit_pages must be the largest prefix length KV and every pool can "
            f"restore ({folded}), not the minimum of each pool's largest hit; {got}",
            shown,
        )
        reported = getattr(result, "restorable_prefix_pages", None)
        if reported is None and not none_read_as_every_length(suite):
            return  # an engine that never reads the field: None says nothing to it
        if reported is None:  # None says every length 1..kv_hit_pages can be restored
            implied = set(range(1, kv_hit + 1))
            expect(
                implied <= set(restorable),
                "BE-26",
                f"restorable_prefix_pages is None, which says every length 1..{kv_hit} can be restored, but only "
                f"{list(restorable)} can: list them; {got}",
                shown,
            )
            return
        # read as a set (SGLang marks each listed length in a mask), lengths outside 1..kv_hit_pages ignored; a length
        # left out only shortens the hit SGLang loads, a length listed that a pool cannot restore loads a broken prefix
        listed = {length for length in reported if is_count(length, 1, kv_hit, exact=False)}
        expect(
            listed <= set(restorable),
            "BE-26",
            f"restorable_prefix_pages {list(reported)} lists {sorted(listed - set(restorable))}, which KV and every "
            f"pool cannot restore (they can restore {list(restorable)}); {got}",
            shown,
        )

    run_property(suite.seed, folding, "BE-21", suite.profile.examples)
    suite.io.require_seen(any(hits), "how pool hits fold")


@conformance_check("HYB-8")
def v2_pool_hits_count_only_pages_that_landed(suite: SuiteContext) -> None:
    """Per pool, the leading run of True that count_pool_hits takes from a slice's reads covers only pages whose bytes landed."""
    instance, backend = suite.instances.main, suite.instances.main.backend
    suite.io.require_round_trip(instance)  # KV moves through v1 here: a broken v1 round trip is BE-15/BE-17's
    seen = False
    for size in suite.profile.batch_sizes:
        keys = suite.names.new_keys(size)
        sources, targets = list(range(size)), suite.pages.spread(size, start=2 * STORAGE_BATCH_SIZE)
        swa_sources = list(range(size, 2 * size))
        sidecars = [(PoolName.INDEXER, sources, True), (PoolName.SWA, swa_sources, False)]
        for name, pages, _ in sidecars:
            place(suite, instance, name, keys, pages)
        writes = [
            suite.wire.transfer(name, keys, instance.pool_for(name).slots(pages), derived=derived)
            for name, pages, derived in sidecars
        ]
        suite.io.v2_flags(
            suite.calls.call("HYB-8", backend.batch_set_v2, writes, None), writes, "batch_set_v2"
        )  # sidecars first
        suite.io.write(instance, keys, pages=sources, clause_id="HYB-8")  # then KV, as a backup writes them
        for name, pages, _ in sidecars:
            instance.pool_for(name).fill(pages, value=-1.0)
        instance.pool.fill(sources, value=-1.0)
        for name, _, _ in sidecars:  # emptied before the KV read, which may bring KV-derived pages along
            instance.pool_for(name).fill(targets)
        kv_pages = suite.io.read(instance, keys, pages=targets, clause_id="HYB-8")  # KV of the slice, then its sidecars
        reads = [  # a KV-derived read over the KV pages' slots, as SGLang sends it
            suite.wire.transfer(
                name,
                keys,
                (instance.pool if derived else instance.pool_for(name)).slots(targets),
                derived=derived,
                read=True,
            )
            for name, _, derived in sidecars
        ]
        flags = suite.io.v2_flags(suite.calls.call("HYB-8", backend.batch_get_v2, reads, None), reads, "batch_get_v2")
        results = {PoolName.KV.value: [page is not None for page in kv_pages], **flags}
        hits = dict(count_pool_hits(tuple((name, tuple(value)) for name, value in results.items())))
        seen = seen or any(hits.values())
        for pool_name, loaded in hits.items():
            for index in range(loaded):
                if pool_name == PoolName.KV.value:
                    page = kv_pages[index]
                else:
                    page = instance.pool_for(pool_name).peek(targets[index])
                wanted = expected_page(suite, instance, pool_name, keys[index])
                expect(
                    suite.io.holds(keys[index], instance.pool_for(pool_name), page, (VARIANTS[pool_name],)),
                    "HYB-8",
                    f"count_pool_hits counts page {index} of pool {pool_name!r} ({suite.names.label(keys[index])}) as loaded, "
                    f"but its slots hold {describe_page_difference(wanted, page)}",
                    f"batch_set_v2 (indexer, swa) and the KV write, then the KV read and batch_get_v2 of {size} "
                    f"keys {suite.names.show(keys)}",
                )
    suite.io.require_seen(seen, "which pages count as loaded")


def write_with_derived_sidecar(
    suite: SuiteContext, instance: Instance, keys: Sequence[str], pages: Sequence[int]
) -> tuple[list[bool], list[bool]]:
    """Back up ``keys`` as SGLang does: the KV-derived indexer with batch_set_v2 first, then KV; return both flags."""
    pool = instance.pool
    place(suite, instance, PoolName.INDEXER, keys, pages)
    sidecar = [suite.wire.transfer(PoolName.INDEXER, keys, pool.slots(pages), derived=True)]
    indexer = suite.io.v2_flags(
        suite.calls.call("BE-22", instance.backend.batch_set_v2, sidecar, None), sidecar, "batch_set_v2"
    )[PoolName.INDEXER.value]
    kv = suite.io.write(instance, keys, pages=pages, clause_id="BE-22")
    return kv, indexer


@conformance_check("BE-22")
def v2_kv_derived_sidecars_travel_with_kv(suite: SuiteContext) -> None:
    """A KV-derived sidecar written with KV reads back with it, also after a rewrite, and one never written is reported missing."""
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    suite.io.require_round_trip(instance)
    keys = suite.names.new_keys(3)
    pages = [0, 1, 2]
    for attempt in ("first backup", "a second backup of the same pages"):  # SGLang may back a page up again
        written_kv, written_indexer = write_with_derived_sidecar(suite, instance, keys, pages)
        query = [suite.wire.transfer(PoolName.INDEXER, keys, policy=PoolHitPolicy.ALL_PAGES, derived=True)]
        shown = (
            f"{attempt}: batch_set_v2(kv-derived indexer, {suite.names.show(keys)}) then the KV write; then "
            "batch_exists_v2 with the indexer transfer, the KV read and batch_get_v2 of the indexer"
        )
        kv_hit, pools = read_result(suite, suite.calls.call("BE-22", backend.batch_exists_v2, keys, query, None), shown)
        targets = [10, 11, 12]
        indexer_pool = instance.pool_for(PoolName.INDEXER)
        # emptied before the KV read, which may bring the indexer pages along (SGLang reads the indexer right after)
        indexer_pool.fill(targets)
        kv_pages = suite.io.read(instance, keys, pages=targets, clause_id="BE-22")
        reads = [suite.wire.transfer(PoolName.INDEXER, keys, pool.slots(targets), derived=True, read=True)]
        loaded = suite.io.v2_flags(suite.calls.call("BE-22", backend.batch_get_v2, reads, None), reads, "batch_get_v2")[
            PoolName.INDEXER.value
        ]
        for index, key in enumerate(keys):
            reported = pools.get(PoolName.INDEXER.value, 0) > index and kv_hit > index
            if loaded[index]:
                page = indexer_pool.peek(targets[index])
                wanted = expected_page(suite, instance, "indexer", key)
                expect(
                    suite.io.holds(key, indexer_pool, page, (VARIANTS["indexer"],)),
                    "BE-22",
                    f"the kv-derived indexer page of {suite.names.label(key)} "
                    f"read back as {describe_page_difference(wanted, page)}",
                    shown,
                )
            elif reported and not suite.may_evict:
                fail(
                    "BE-22",
                    f"batch_exists_v2 reports the kv-derived indexer page of {suite.names.label(key)} present "
                    f"(kv_hit_pages {kv_hit}, extra_pool_hit_pages {pools}), but batch_get_v2 cannot "
                    "read it",
                    shown,
                )
            if written_indexer[index] and written_kv[index] and kv_pages[index] is not None and not suite.may_evict:
                expect(
                    loaded[index],
                    "BE-22",
                    f"{suite.names.label(key)}'s KV page reads back but its kv-derived "
                    "indexer page, written in the same backup, does not",
                    shown,
                )
    alone = suite.names.new_keys(2)
    store_pool(suite, instance, PoolName.KV, alone, [20, 21])
    shown = f"the KV write alone of {suite.names.show(alone)}, then batch_exists_v2 asking for the kv-derived indexer"
    query = [suite.wire.transfer(PoolName.INDEXER, alone, policy=PoolHitPolicy.ALL_PAGES, derived=True)]
    kv_hit, pools = read_result(suite, suite.calls.call("BE-22", backend.batch_exists_v2, alone, query, None), shown)
    expect(
        kv_hit == 0 and pools.get(PoolName.INDEXER.value, 0) == 0,
        "BE-22",
        f"an indexer page never written is reported present (kv_hit_pages {kv_hit}, extra_pool_hit_pages {pools})",
        shown,
    )
