"""Core-level checks of keys and the hit query: KEY-2, BE-1..BE-5 (batch_exists, misses, storage errors).

Each check writes fresh keys (so checks do not depend on each other or on
their order) and moves pages the way SGLang's controller does for the
backend's mode: through v1 when v1 is claimed (the legacy get/set/batch_*
are then never called: SGLang does not call them on such a backend), else
through the legacy ``batch_set``/``batch_get``; sidecar pools through v2,
never KV. Before moving pages for what it checks, a check
makes sure the basic v1 round trip works (``suite.io.require_round_trip``, or
``suite.io.store`` for the pages it needs): a broken read or write is then
reported on BE-14, BE-15 or BE-17, not on the check's own clause.

The core checks are split by concern over ``checks_core_hits``, ``checks_core_pages`` and
``checks_core_upkeep``; the run imports them in that order, which is the order of their checks.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import torch
from hypothesis import example, given, strategies as st

from hicache_spec.values import is_count
from hicache_spec import STORAGE_BATCH_SIZE, count_leading_run
from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.framework import CheckSkipped, ClauseFailure, conformance_check, expect
from hicache_contracts.conformance.session.properties import run_property
from hicache_contracts.conformance.session.pools import describe_page_difference
from hicache_contracts.models import PoolHitPolicy, PoolName

LONG_CHAIN_KEYS = 4096
"""Keys of the long hit query (BE-2): a 256k-token prompt at page size 64, one unbatched call in every pinned release."""
LONG_CHAIN_STORED = 8 * STORAGE_BATCH_SIZE + 5
"""How many of them are stored: more than any power-of-two cap a backend might put on one lookup."""
UNKNOWN_OPTION = "hicache_conform_unknown_option"
"""A key no backend knows, added to the extra config (BE-1) and to extra_info dicts (BE-8)."""
PRESENCE_PATTERNS = st.lists(st.booleans(), max_size=12)
"""BE-2's draws: which of a chain of 0 to 12 keys are stored."""


def setup_clause(suite: SuiteContext) -> str:
    """The clause a check's setup write serves, whatever the check is about: BE-17 through v1 (a page whose set
    returned True reads back), BE-9 through the legacy methods; a write that raises there is that clause's
    failure, and the check is not reached."""
    return "BE-17" if suite.io.io_path() == "v1" else "BE-9"


@contextlib.contextmanager
def misses_never_raise(missing: Sequence[str]) -> Iterator[None]:
    """A backend call inside that raises while the keys asked for include ``missing`` (labels of keys never
    stored) fails BE-4 (a missing key is a miss, never an exception), not the clause the call serves."""
    try:
        yield
    except ClauseFailure as failure:
        cause = failure.__cause__
        if not missing or cause is None or isinstance(cause, ClauseFailure):
            raise
        raise ClauseFailure(
            "BE-4",
            f"{failure.message}; it was asked for {', '.join(missing)}, never stored (a missing key is a miss)",
            failure.counterexample,
        ) from cause


# ---------------------------------------------------------------- KEY-2, BE-1
@conformance_check("KEY-2")
def distinct_keys_name_distinct_pages(suite: SuiteContext) -> None:
    """Page keys in SGLang's form (64 lowercase hex characters) that share all but their last characters still
    name distinct pages: each is stored, found and read back as its own."""
    instance = suite.instances.main
    suite.io.require_round_trip(instance)
    base = suite.names.new_keys(1)[0]
    end = int(base[-2:], 16)  # the last two hex characters, stepped: the last alone, then the one before it
    keys = [base[:-2] + f"{(end + step) % 256:02x}" for step in (0, 1, 16, 32)]
    written = suite.io.write(instance, keys, pages=suite.pages.spread(len(keys)), clause_id="KEY-2", each=True)
    refused = [key for key, ok in zip(keys, written) if not ok]
    shown = f"keys {keys!r}, alike but for their last two characters"
    expect(not refused, "KEY-2", f"the backend refused to store pages under the keys {refused!r}", shown)
    count = suite.io.count(instance, keys, clause_id="KEY-2")
    expect(
        suite.io.counted(count, len(keys)),
        "KEY-2",
        f"batch_exists found {count} of {len(keys)} pages stored under keys alike but for their last characters",
        shown,
    )
    pages = suite.pages.spread(len(keys), start=STORAGE_BATCH_SIZE * 2)
    read = suite.io.read(instance, keys, pages=pages, clause_id="KEY-2")
    for key, page in zip(keys, read):
        expect(
            suite.io.holds(key, instance.pool, page),
            "KEY-2",
            f"the page stored under key {key!r} reads back as "
            f"{describe_page_difference(suite.pages.page_for(key, instance.pool), page)}",
            shown,
        )
    suite.io.require_seen(any(page is not None for page in read), "that keys alike but for their ends read back")


@conformance_check("BE-1")
def extra_config_with_unknown_keys_is_accepted(suite: SuiteContext) -> None:
    """A backend accepts SGLang's loading keys and keys it does not know in its extra config (and None when it needs none)."""
    suite.io.require_round_trip(suite.instances.main)  # with the suite's own extra config, pages move
    base = dict(suite.factory.extra_config or {})
    loading = {
        "backend_name": "hicache-conform",
        "module_path": "hicache_conform.unknown",
        "class_name": "Unknown",
        "interface_v1": 1,
    }  # SGLang passes its loading keys through
    variants: list[tuple[str, Any]] = []
    if not base:
        variants.append(("None", None))
    extended = {
        **{key: value for key, value in loading.items() if key not in base},
        **base,
        UNKNOWN_OPTION: {"nested": [1, 2, 3]},
    }
    variants.append((f"holding {sorted(set(extended) - set(base))}", extended))
    seen = False
    for label, extra_config in variants:
        config = suite.instances.config(model_name=suite.names.namespace("config"), extra_config=extra_config)
        instance = suite.instances.build(config, pages=4, v2=False, construct_clause="BE-1")
        back = suite.io.write_and_read_back(instance, clause_id="BE-1")
        seen = seen or back.seen
        expect(
            back.works,
            "BE-1",
            f"a backend built with an extra config {label} does not store and read pages "
            f"(writes {back.written}, reads {back.loaded})",
            f"extra_config={extra_config!r}",
        )
    suite.io.require_seen(seen, "that pages move on a backend built with those extra configs")


# ---------------------------------------------------------------- BE-2, BE-3
@conformance_check("BE-2")
def batch_exists_counts_the_leading_run(suite: SuiteContext) -> None:
    """batch_exists returns the length of the leading run of stored keys, counted in pages."""
    instance = suite.instances.main
    suite.io.require_round_trip(instance)
    counts: list[int] = []

    @given(PRESENCE_PATTERNS)
    @example([True, False, True])  # a hole: the keys after it do not count
    @example([False, True, True])  # a miss first: the hits after it do not count
    def leading_run(presence: list[bool]) -> None:
        keys = suite.names.new_keys(len(presence))
        stored = [key for key, present in zip(keys, presence) if present]
        if stored:  # SGLang never writes an empty batch (its backup loops over the pages it has)
            suite.io.store(instance, stored, pages=suite.pages.spread(len(stored)), clause_id=setup_clause(suite))
        expected = count_leading_run(tuple(presence))
        count = suite.io.count(instance, keys)
        counts.append(count)
        pattern = "".join("S" if present else "-" for present in presence)
        expect(
            suite.io.counted(count, expected),
            "BE-2",
            f"batch_exists returned {count}, expected the leading run {expected}",
            f"keys {suite.names.show(keys)} with stored pattern '{pattern}' (S stored, - missing)",
        )

    run_property(suite.seed, leading_run, "BE-2", suite.profile.examples)
    expect(
        suite.io.count(instance, suite.names.new_keys(STORAGE_BATCH_SIZE)) == 0,
        "BE-2",
        "batch_exists counted pages that were never written",
    )
    suite.io.require_seen(any(counts), "how batch_exists counts stored pages")


@conformance_check("BE-21", requires=("v2",))
def batch_exists_v2_takes_a_whole_chain(suite: SuiteContext) -> None:
    """One batch_exists_v2 over a chain of thousands of keys, with a transfer per sidecar pool, counts the whole stored prefix."""
    instance, backend = suite.instances.main, suite.instances.main.backend
    suite.io.require_round_trip(instance)
    size = STORAGE_BATCH_SIZE
    chain = suite.names.new_keys(LONG_CHAIN_KEYS)
    stored = chain[:LONG_CHAIN_STORED]
    indexer, swa = instance.pool_for(PoolName.INDEXER), instance.pool_for(PoolName.SWA)
    for sidecar in (indexer, swa):  # the sidecars' bytes are never read back, but a backend may refuse pages of zeros
        sidecar.fill(range(size))
    for start in range(0, len(stored), size):  # a backup slice by slice: its sidecars first, then KV
        batch = stored[start : start + size]
        pages = list(range(len(batch)))  # every slice writes from the same host pages
        transfers = [
            suite.wire.transfer(PoolName.INDEXER, batch, indexer.slots(pages), derived=True),
            suite.wire.transfer(PoolName.SWA, batch, swa.slots(pages)),
        ]
        flags = suite.io.v2_flags(
            suite.calls.call("BE-21", backend.batch_set_v2, transfers, None), transfers, "batch_set_v2"
        )
        written = suite.io.write(instance, batch, pages=pages, clause_id="BE-21")
        if not all(written) or not all(all(value) for value in flags.values()):
            raise CheckSkipped("the backend refused pages of the chain the check needs")
    query = [
        suite.wire.transfer(PoolName.INDEXER, chain, policy=PoolHitPolicy.ALL_PAGES, derived=True),
        suite.wire.transfer(PoolName.SWA, chain[-1:], policy=PoolHitPolicy.TRAILING_PAGES),
    ]
    raw = suite.calls.call("BE-21", backend.batch_exists_v2, chain, query, None)
    kv_hit = getattr(raw, "kv_hit_pages", None)
    expect(
        is_count(kv_hit, exact=False) and suite.io.counted(kv_hit, len(stored)),
        "BE-21",
        f"one batch_exists_v2 over a chain of {len(chain)} keys whose first "
        f"{len(stored)} pages are stored in KV, indexer and swa returned kv_hit_pages {kv_hit!r}: SGLang 0.5.23 "
        "sends the whole chain in one call",
        f"batch_exists_v2({suite.names.show(chain)}, {suite.names.show(query)}) -> {suite.names.show(raw)}",
    )
    suite.io.require_seen(bool(kv_hit), "that one call counts a whole chain")


@conformance_check("BE-3")
def batch_exists_has_no_side_effects(suite: SuiteContext) -> None:
    """batch_exists([]) is 0, and asking twice changes nothing: missing keys stay missing, stored ones stay."""
    instance = suite.instances.main
    empty = suite.calls.call("BE-3", instance.backend.batch_exists, [], None)
    expect(is_count(empty, 0, 0, exact=False), "BE-3", f"batch_exists([]) returned {empty!r}, not 0")
    stored, missing = suite.names.new_keys(3), suite.names.new_keys(3)
    suite.io.store(instance, stored, clause_id=setup_clause(suite))
    first = [
        suite.io.count(instance, missing, clause_id="BE-3"),
        suite.io.count(instance, stored + missing, clause_id="BE-3"),
    ]
    second = [
        suite.io.count(instance, missing, clause_id="BE-3"),
        suite.io.count(instance, stored + missing, clause_id="BE-3"),
    ]
    expect(
        first[0] == second[0] == 0 and all(suite.io.counted(counts[1], 3) for counts in (first, second)),
        "BE-3",
        f"repeated batch_exists calls gave {first} then {second}, expected [0, 3] both times",
        f"stored {suite.names.show(stored)}, missing {suite.names.show(missing)}",
    )
    appeared = [suite.names.label(key) for key, hit in zip(missing, suite.io.found(instance, missing)) if hit]
    expect(
        not appeared,
        "BE-3",
        f"batch_exists made missing keys exist: exists() is now true for {appeared}",
        f"batch_exists({suite.names.show(missing)}) on keys never written",
    )
    pages = suite.io.read(instance, stored, pages=[8, 9, 10], clause_id="BE-3")
    expect(
        all(suite.io.holds(key, instance.pool, page) for key, page in zip(stored, pages)),
        "BE-3",
        "stored pages no longer read back after batch_exists calls",
    )


# ---------------------------------------------------------------- BE-4, BE-5
@conformance_check("BE-4")
def missing_keys_are_misses_not_errors(suite: SuiteContext) -> None:
    """A missing key yields None or False from every read and query of the backend's mode, never an exception."""
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    missing = suite.names.new_keys(3)
    count = suite.io.count(instance, missing, clause_id="BE-4")
    expect(
        count == 0,
        "BE-4",
        f"batch_exists counted {count} of 3 keys never written",
        f"batch_exists({suite.names.show(missing)}) -> {count}",
    )
    if suite.claims("v1"):
        flags = suite.io.v1_flags(
            suite.calls.call("BE-4", backend.batch_get_v1, missing, pool.slots([0, 1, 2]), None),
            missing,
            "batch_get_v1",
        )
        expect(
            not any(flags),
            "BE-4",
            f"batch_get_v1 on missing keys returned {flags}",
            f"batch_get_v1({suite.names.show(missing)}, <host slots>, None) -> {flags}",
        )
    if suite.claims("legacy"):  # the legacy methods: on a backend SGLang drives through them, or that claims them
        # exists is not asked: the engine reaches it only through HiCacheStorage's own batch_exists, asked above
        targets = [torch.zeros(pool.page_element_count, dtype=pool.dtype) for _ in missing]
        values = suite.calls.call("BE-4", backend.batch_get, missing, targets)
        expect(
            values is None
            or (isinstance(values, (list, tuple)) and all(value is None or value is False for value in values)),
            "BE-4",
            f"batch_get on missing keys returned {suite.names.show(values)}, not one None per key",
            f"batch_get({suite.names.show(missing)}, <3 flat pages>) -> {suite.names.show(values)}",
        )
    if suite.claims("v2"):
        query = [suite.wire.transfer(PoolName.INDEXER, missing, derived=True)]  # SGLang queries before it reads
        suite.calls.call("BE-4", backend.batch_exists_v2, missing, query, None)
        transfers = [
            suite.wire.transfer(PoolName.INDEXER, missing, instance.pool.slots([0, 1, 2]), derived=True, read=True)
        ]
        flags = suite.io.v2_flags(
            suite.calls.call("BE-4", backend.batch_get_v2, transfers, None), transfers, "batch_get_v2"
        )[PoolName.INDEXER.value]
        expect(
            not any(flags),
            "BE-4",
            f"batch_get_v2 of a sidecar on missing keys returned {flags}",
            f"batch_get_v2({suite.names.show(transfers)}, None) -> {flags}",
        )


@conformance_check("BE-5", requires=("core",))
def storage_errors_are_failures_not_exceptions(suite: SuiteContext) -> None:
    """A storage error yields False, 0 or None from every call of the backend's mode, never an exception.

    The error is made the way a store fails: inside the backend's own fault
    hook (``hicache_storage_faults()``), or, where the backend opts in, by
    the host pool's page helpers raising. A page reported stored while the
    store failed must read back afterwards.
    """
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    keys = suite.names.new_keys(2)
    suite.io.store(instance, keys, clause_id=setup_clause(suite))
    fresh = suite.names.new_keys(2)
    calls_before = pool.helper_calls
    with suite.io.storage_faults(instance) as how:
        written = suite.io.write(instance, fresh, pages=[0, 1], clause_id="BE-5")
        suite.io.read(instance, keys, pages=[2, 3], clause_id="BE-5")
        suite.io.count(instance, keys + fresh, clause_id="BE-5")
        if suite.claims("v2"):
            sidecar = instance.pool_for(PoolName.SWA)
            transfer = [suite.wire.transfer(PoolName.SWA, fresh, sidecar.slots([0, 1]))]
            suite.calls.call("BE-5", backend.batch_set_v2, transfer, None)
            suite.calls.call(
                "BE-5", backend.batch_get_v2, [suite.wire.transfer(PoolName.SWA, keys, sidecar.slots([2, 3]))], None
            )
            suite.calls.call(
                "BE-5",
                backend.batch_exists_v2,
                keys,
                [suite.wire.transfer(PoolName.SWA, keys[-1:], policy=PoolHitPolicy.TRAILING_PAGES)],
                None,
            )
    if how.startswith("while every page helper") and pool.helper_calls == calls_before:
        raise CheckSkipped(
            "the backend moved pages without the host pool's page helpers (get_data_page, "
            "set_from_flat_data_page, get_page_buffer_meta), so no storage error could be injected"
        )
    claimed = [key for key, ok in zip(fresh, written) if ok]
    if claimed:
        pages = suite.io.read(instance, claimed, pages=list(range(4, 4 + len(claimed))), clause_id="BE-5")
        lost = [suite.names.label(key) for key, page in zip(claimed, pages) if not suite.io.holds(key, pool, page)]
        expect(
            not lost,
            "BE-5",
            f"a write {how} returned True for {lost}, which do not read back: a storage "
            "error must be reported as False",
            f"write {suite.names.show(fresh)} {how} -> {written}; read back after",
        )
