"""Checks of the core level: what every backend honours (KEY-2, BE-1..BE-13, BE-18, BE-24), and a second host
pool under one name (BE-28, level robustness).

Each check writes fresh keys (so checks do not depend on each other or on
their order) and moves pages the way SGLang's controller does for the
backend's mode: through v1 when v1 is claimed (the legacy get/set/batch_*
are then never called: SGLang does not call them on such a backend), else
through the legacy ``batch_set``/``batch_get``; sidecar pools through v2,
never KV. Before moving pages for what it checks, a check
makes sure the basic v1 round trip works (``suite.io.require_round_trip``, or
``suite.io.store`` for the pages it needs): a broken read or write is then
reported on BE-14, BE-15 or BE-17, not on the check's own clause.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Callable

import torch
from hypothesis import example, given, strategies as st

from hicache_spec import STORAGE_BATCH_SIZE, count_leading_run
from hicache_contracts.capabilities import V1_METHODS, V2_METHODS, detect_capabilities
from hicache_contracts.conformance.context import Instance, SuiteContext, is_storage_writer
from hicache_contracts.conformance.framework import (
    CallTimedOut,
    CheckSkipped,
    ClauseFailure,
    conformance_check,
    expect,
    fail,
)
from hicache_contracts.conformance.properties import run_property
from hicache_contracts.conformance.pools import describe_page_difference, pages_equal
from hicache_contracts.models import PoolHitPolicy, PoolName

LONG_CHAIN_KEYS = 4096
"""Keys of the long hit query (BE-2): a 256k-token prompt at page size 64, one unbatched call in 0.5.23."""
LONG_CHAIN_STORED = 8 * STORAGE_BATCH_SIZE + 5
"""How many of them are stored: more than any power-of-two cap a backend might put on one lookup."""
UNKNOWN_OPTION = "hicache_conform_unknown_option"
"""A key no backend knows, added to the extra config (BE-1) and to extra_info dicts (BE-8)."""


def is_bool(value: Any) -> bool:
    """Whether ``value`` is a bool (numpy's bool included)."""
    return isinstance(value, bool) or type(value).__name__ == "bool_"


# ---------------------------------------------------------------- KEY-2, BE-1
@conformance_check("KEY-2")
def any_non_empty_string_is_a_key(suite: SuiteContext) -> None:
    """Keys are any non-empty str: pages stored under non-hex keys are found and read back."""
    instance = suite.instances.main
    suite.io.require_round_trip(instance)
    keys = [f"conform-{suite.run_id}-page-{number}.v{number % 3}" for number in range(3)]
    keys += [suite.names.new_keys(1)[0].upper()]  # same characters as a page key, but not lowercase
    written = suite.io.write(instance, keys, pages=suite.pages.spread(len(keys)), clause_id="KEY-2")
    refused = [key for key, ok in zip(keys, written) if not ok]
    expect(
        not refused, "KEY-2", f"the backend refused to store pages under the non-hex keys {refused!r}", f"keys {keys!r}"
    )
    count = suite.io.count(instance, keys, clause_id="KEY-2")
    expect(
        count == len(keys),
        "KEY-2",
        f"batch_exists found {count} of {len(keys)} pages stored under non-hex keys",
        f"keys {keys!r}",
    )
    pages = suite.pages.spread(len(keys), start=STORAGE_BATCH_SIZE * 2)
    for key, page in zip(keys, suite.io.read(instance, keys, pages=pages, clause_id="KEY-2")):
        expect(
            suite.pages.same_page(key, instance.pool, page),
            "KEY-2",
            f"the page stored under key {key!r} reads back as {describe_page_difference(suite.pages.page_for(key, instance.pool), page)}",
        )


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
    for label, extra_config in variants:
        config = suite.instances.config(model_name=suite.names.namespace("config"), extra_config=extra_config)
        instance = suite.instances.build(config, pages=4, v2=False, construct_clause="BE-1")
        keys = suite.names.new_keys(2)
        written = suite.io.write(instance, keys, clause_id="BE-1")
        read = suite.io.read(instance, keys, pages=[2, 3], clause_id="BE-1")
        works = all(written) and all(suite.pages.same_page(key, instance.pool, page) for key, page in zip(keys, read))
        expect(
            works,
            "BE-1",
            f"a backend built with an extra config {label} does not store and read pages "
            f"(writes {written}, reads {[page is not None for page in read]})",
            f"extra_config={extra_config!r}",
        )


# ---------------------------------------------------------------- BE-2, BE-3
@conformance_check("BE-2")
def batch_exists_counts_the_leading_run(suite: SuiteContext) -> None:
    """batch_exists returns the length of the leading run of stored keys, counted in pages."""
    instance = suite.instances.main
    suite.io.require_round_trip(instance)

    @given(st.lists(st.booleans(), max_size=12))
    @example([True, False, True])  # a hole: the keys after it do not count
    @example([False, True, True])
    def leading_run(presence: list[bool]) -> None:
        keys = suite.names.new_keys(len(presence))
        stored = [key for key, present in zip(keys, presence) if present]
        suite.io.store(instance, stored, pages=suite.pages.spread(len(stored)), clause_id="BE-2")
        expected = count_leading_run(tuple(presence))
        count = suite.io.count(instance, keys)
        pattern = "".join("S" if present else "-" for present in presence)
        expect(
            count == expected,
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


@conformance_check("BE-21", requires=("v2",))
def batch_exists_v2_takes_a_whole_chain(suite: SuiteContext) -> None:
    """One batch_exists_v2 over a chain of thousands of keys, with a transfer per sidecar pool, counts the whole stored prefix."""
    instance, backend = suite.instances.main, suite.instances.main.backend
    suite.io.require_round_trip(instance)
    size = STORAGE_BATCH_SIZE
    chain = suite.names.new_keys(LONG_CHAIN_KEYS)
    stored = chain[:LONG_CHAIN_STORED]
    indexer, swa = instance.pool_for(PoolName.INDEXER), instance.pool_for(PoolName.SWA)
    for start in range(0, len(stored), size):  # a backup slice by slice: its sidecars first, then KV
        batch = stored[start : start + size]
        pages = list(range(len(batch)))
        for sidecar in (indexer, swa):
            for key, page in zip(batch, pages):
                sidecar.poke(page, suite.pages.page_for(key, sidecar, 7))
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
        kv_hit == len(stored),
        "BE-21",
        f"one batch_exists_v2 over a chain of {len(chain)} keys whose first "
        f"{len(stored)} pages are stored in KV, indexer and swa returned kv_hit_pages {kv_hit!r}: SGLang 0.5.23 "
        "sends the whole chain in one call",
        f"batch_exists_v2({suite.names.show(chain)}, {suite.names.show(query)}) -> {suite.names.show(raw)}",
    )


@conformance_check("BE-3")
def batch_exists_has_no_side_effects(suite: SuiteContext) -> None:
    """batch_exists([]) is 0, and asking twice changes nothing: missing keys stay missing, stored ones stay."""
    instance = suite.instances.main
    empty = suite.calls.call("BE-3", instance.backend.batch_exists, [], None)
    expect(empty == 0 and not isinstance(empty, bool), "BE-3", f"batch_exists([]) returned {empty!r}, not 0")
    stored, missing = suite.names.new_keys(3), suite.names.new_keys(3)
    suite.io.store(instance, stored, clause_id="BE-3")
    first = [
        suite.io.count(instance, missing, clause_id="BE-3"),
        suite.io.count(instance, stored + missing, clause_id="BE-3"),
    ]
    second = [
        suite.io.count(instance, missing, clause_id="BE-3"),
        suite.io.count(instance, stored + missing, clause_id="BE-3"),
    ]
    expect(
        first == second == [0, 3],
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
        all(suite.pages.same_page(key, instance.pool, page) for key, page in zip(stored, pages)),
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
        key = missing[0]
        hit = suite.calls.call("BE-4", backend.exists, key)
        expect(not hit, "BE-4", f"exists({suite.names.label(key)}) returned {hit!r} for a key never written")
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
        sidecar = instance.pool_for(PoolName.INDEXER)
        transfers = [suite.wire.transfer(PoolName.INDEXER, missing, sidecar.slots([0, 1, 2]), derived=True)]
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
    suite.io.store(instance, keys, clause_id="BE-5")
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
    if claimed and not suite.may_evict:
        pages = suite.io.read(instance, claimed, pages=list(range(4, 4 + len(claimed))), clause_id="BE-5")
        lost = [
            suite.names.label(key) for key, page in zip(claimed, pages) if not suite.pages.same_page(key, pool, page)
        ]
        expect(
            not lost,
            "BE-5",
            f"a write {how} returned True for {lost}, which do not read back: a storage "
            "error must be reported as False",
            f"write {suite.names.show(fresh)} {how} -> {written}; read back after",
        )


# ---------------------------------------------------------------- BE-6, BE-7
@conformance_check("BE-6")
def rewriting_a_key_returns_true_and_keeps_correct_bytes(suite: SuiteContext) -> None:
    """Writing an existing key returns True and leaves correct bytes, whether the backend skips or overwrites."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    for path in [suite.io.io_path()]:  # the one path SGLang writes this backend's KV through
        keys = suite.names.new_keys(2)
        suite.io.store(instance, keys, path=path, clause_id="BE-6")
        again = suite.io.write(instance, keys, path=path, clause_id="BE-6")
        expect(
            all(again),
            "BE-6",
            f"writing the same pages again returned {again} through {path}, not all True",
            f"write {suite.names.show(keys)} twice through {path}",
        )
        changed = suite.io.write(instance, keys, path=path, variant=1, clause_id="BE-6")
        expect(
            all(changed),
            "BE-6",
            f"writing existing keys with other bytes returned {changed} through {path}, not all True",
            f"write {suite.names.show(keys)}, then again with different bytes",
        )
        for key, page in zip(keys, suite.io.read(instance, keys, pages=[4, 5], path=path, clause_id="BE-6")):
            correct = suite.pages.same_page(key, pool, page) or suite.pages.same_page(key, pool, page, variant=1)
            expect(
                correct,
                "BE-6",
                f"after rewriting {suite.names.label(key)} it reads back as neither the first nor the "
                f"second bytes ({describe_page_difference(suite.pages.page_for(key, pool), page)} against the first)",
            )


@conformance_check("BE-7", requires=("core",))
def pages_are_invisible_until_fully_written(suite: SuiteContext) -> None:
    """While a write is still reading a page from the host pool, no query or read sees that page."""
    if not suite.claims("v1"):
        raise CheckSkipped(
            "visibility is observed by holding the backend's read of a host page, which only v1 "
            "writes do; v1 is not claimed"
        )
    backend, pool = suite.instances.main.backend, suite.instances.main.pool
    keys = suite.names.new_keys(3)
    pages = [0, 1, 2]
    for key, page in zip(keys, pages):
        pool.poke(page, suite.pages.page_for(key, pool))
    held_key = keys[0]
    bound = min(suite.options.timeout_s, 10.0)
    outcome: dict[str, Any] = {}
    seen: list[str] = []

    def writer() -> None:
        try:
            outcome["result"] = backend.batch_set_v1(keys, pool.slots(pages), None)
        except Exception as error:  # reported by other checks; here only visibility matters
            outcome["error"] = error

    with pool.holding([pages[0]], timeout_s=bound) as hold:
        writing = threading.Thread(target=writer, name="hicache-conform-writer", daemon=True)
        writing.start()
        if not hold.reached.wait(bound):
            writing.join(bound)
            raise CheckSkipped(
                "the backend did not read the host page through the pool's page helpers "
                "(get_data_page / get_page_buffer_meta), so a write cannot be held half done"
            )
        watched = keys if hold.reached_by == "get_page_buffer_meta" else [held_key]

        def poller() -> None:
            probes: list[tuple[str, Callable[[str], bool]]] = [  # the lookups SGLang makes on a v1 backend
                ("batch_exists", lambda key: backend.batch_exists([key], None) != 0),
                (
                    "batch_get_v1",
                    lambda key: bool(backend.batch_get_v1([key], pool.slots([pool.page_count - 1]), None)[0]),
                ),
            ]
            for key in watched:
                for name, probe in probes:
                    try:
                        visible = probe(key)
                    except Exception:
                        visible = False
                    if visible and not hold.released.is_set():
                        seen.append(f"{name}({suite.names.label(key)})")

        polling = threading.Thread(target=poller, name="hicache-conform-poller", daemon=True)
        polling.start()
        polling.join(bound)  # a backend that serialises calls blocks here: that is allowed, not evidence
    writing.join(bound)
    polling.join(bound)
    expect(
        not seen,
        "BE-7",
        f"{', '.join(seen)} saw the page while batch_set_v1 was still reading it from the "
        f"host pool (held in {hold.reached_by})",
        f"batch_set_v1({suite.names.show(keys)}, ...) held at {suite.names.label(held_key)}'s host page; meanwhile {seen[0] if seen else ''} -> hit",
    )


# ---------------------------------------------------------------- BE-8
def extra_info_shapes(suite: SuiteContext) -> list[tuple[str, Any]]:
    """Every shape of extra_info BE-8 names, labelled."""
    history = suite.names.new_keys(2)
    return [
        ("None", None),
        ("HiCacheStorageExtraInfo()", suite.wire.info()),
        ("prefix_keys=[]", suite.wire.info(prefix_keys=[])),
        (f"prefix_keys={suite.names.show(history)}", suite.wire.info(prefix_keys=history)),
        ("extra_info with an unknown key", suite.wire.info(extra_info={UNKNOWN_OPTION: 1})),
        (
            "prefix_keys=[] and extra_info with an unknown key",
            suite.wire.info(prefix_keys=[], extra_info={UNKNOWN_OPTION: 1}),
        ),
    ]


@conformance_check("BE-8")
def extra_info_accepted_in_every_shape(suite: SuiteContext) -> None:
    """Every method taking extra_info accepts it positionally and by keyword, as None, empty, [] or a list of keys, with unknown extra_info keys."""
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    suite.io.require_round_trip(instance)
    for label, info in extra_info_shapes(suite):
        for style in ("positional", "keyword"):

            def call(method: Any, *args: Any) -> Any:
                arguments = (*args, info) if style == "positional" else args
                keywords = {} if style == "positional" else {"extra_info": info}
                try:
                    return method(*arguments, **keywords)
                except Exception as error:
                    fail(
                        "BE-8",
                        f"{method.__name__} with extra_info {label} passed {style}ly raised "
                        f"{type(error).__name__}: {error}",
                        f"{suite.names.describe_call(method, arguments, keywords)}",
                    )

            keys = suite.names.new_keys(2)
            if suite.claims("v1"):
                flags = suite.io.v1_flags(call(backend.batch_set_v1, keys, pool.slots([0, 1])), keys, "batch_set_v1")
                expect(all(flags), "BE-8", f"batch_set_v1 with extra_info {label} ({style}) returned {flags}")
            else:
                suite.io.store(instance, keys, clause_id="BE-8")
            count = call(backend.batch_exists, keys)
            expect(
                count == 2,
                "BE-8",
                f"batch_exists with extra_info {label} ({style}) returned {count!r}, expected 2",
                f"batch_exists({suite.names.show(keys)}, {label})",
            )
            if suite.claims("v1"):
                flags = suite.io.v1_flags(call(backend.batch_get_v1, keys, pool.slots([2, 3])), keys, "batch_get_v1")
                expect(all(flags), "BE-8", f"batch_get_v1 with extra_info {label} ({style}) returned {flags}")
            if suite.claims("v2"):  # v2 carries sidecars; KV moved above through v1
                sidecar = instance.pool_for(PoolName.SWA)
                more = suite.names.new_keys(1)
                call(backend.batch_set_v2, [suite.wire.transfer(PoolName.SWA, more, sidecar.slots([4]))])
                call(
                    backend.batch_exists_v2,
                    more,
                    [suite.wire.transfer(PoolName.SWA, more, policy=PoolHitPolicy.TRAILING_PAGES)],
                )
                call(backend.batch_get_v2, [suite.wire.transfer(PoolName.SWA, more, sidecar.slots([5]))])


# ---------------------------------------------------------------- BE-9, BE-10
@conformance_check("BE-9")
def legacy_results_have_their_shapes(suite: SuiteContext) -> None:
    """get gives a tensor or None, batch_get one tensor-or-None per key, set and batch_set a bool."""
    backend, pool = suite.instances.main.backend, suite.instances.main.pool  # runs only when legacy is claimed
    key = suite.names.new_keys(1)[0]
    outcome = suite.calls.call("BE-9", backend.set, key, suite.pages.page_for(key, pool))
    expect(is_bool(outcome), "BE-9", f"set returned {outcome!r}, not a bool", f"set({suite.names.label(key)}, page)")
    if outcome:
        target = torch.zeros(pool.page_element_count, dtype=pool.dtype)
        value = suite.calls.call("BE-9", backend.get, key, target)
        expect(
            isinstance(value, torch.Tensor),
            "BE-9",
            f"get of a stored key returned {suite.names.show(value)}, not a tensor",
            f"get({suite.names.label(key)}, target)",
        )
        expect(
            pages_equal(value, suite.pages.page_for(key, pool)),
            "BE-9",
            f"get of a stored key returned {describe_page_difference(suite.pages.page_for(key, pool), value)}",
            f"set then get({suite.names.label(key)})",
        )
    keys, missing = suite.names.new_keys(3), suite.names.new_keys(1)
    outcome = suite.calls.call("BE-9", backend.batch_set, keys, [suite.pages.page_for(item, pool) for item in keys])
    expect(
        is_bool(outcome),
        "BE-9",
        f"batch_set returned {outcome!r}, not a bool",
        f"batch_set({suite.names.show(keys)}, values)",
    )
    asked = [keys[0], missing[0], keys[1], keys[2]]
    targets = [torch.zeros(pool.page_element_count, dtype=pool.dtype) for _ in asked]
    values = suite.calls.call("BE-9", backend.batch_get, asked, targets)
    shape_ok = (
        isinstance(values, (list, tuple))
        and len(values) == len(asked)
        and all(value is None or isinstance(value, torch.Tensor) for value in values)
    )
    expect(
        shape_ok,
        "BE-9",
        f"batch_get returned {suite.names.show(values)}, not one tensor-or-None per key",
        f"batch_get({suite.names.show(asked)}) with {suite.names.label(missing[0])} missing",
    )
    expect(values[1] is None, "BE-9", f"batch_get gave {suite.names.show(values[1])} for a missing key, not None")
    if outcome:
        for index in (0, 2, 3):
            expect(
                pages_equal(values[index], suite.pages.page_for(asked[index], pool)),
                "BE-9",
                f"batch_get returned wrong bytes for {suite.names.label(asked[index])}: "
                f"{describe_page_difference(suite.pages.page_for(asked[index], pool), values[index])}",
            )


@conformance_check("BE-10")
def full_batches_of_128_pages_work(suite: SuiteContext) -> None:
    """Batches of STORAGE_BATCH_SIZE (128) pages are written, found and read back whole."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    suite.io.require_round_trip(instance)  # small batches work: what fails below is the size
    size = STORAGE_BATCH_SIZE
    keys = suite.names.new_keys(size)
    written = suite.io.write(instance, keys, pages=suite.pages.spread(size), clause_id="BE-10")
    expect(
        all(written),
        "BE-10",
        f"a write of {size} pages succeeded for {sum(written)} of them",
        f"{suite.io.io_path()} write of {size} keys {suite.names.show(keys)}",
    )
    count = suite.io.count(instance, keys, clause_id="BE-10")
    expect(count == size, "BE-10", f"batch_exists over {size} stored keys returned {count}")
    read = suite.io.read(instance, keys, pages=suite.pages.spread(size, start=2 * size), clause_id="BE-10")
    wrong = [index for index, (key, page) in enumerate(zip(keys, read)) if not suite.pages.same_page(key, pool, page)]
    expect(
        not wrong,
        "BE-10",
        f"a read of {size} pages got {len(wrong)} wrong or missing, the first at position {wrong[0] if wrong else 0}",
    )


@conformance_check("BE-2", requires=("core",))
def batch_exists_takes_a_whole_chain(suite: SuiteContext) -> None:
    """One batch_exists over a chain of thousands of keys counts its whole stored prefix, as 0.5.23 asks it."""
    instance = suite.instances.main
    suite.io.require_round_trip(instance)
    size = STORAGE_BATCH_SIZE
    chain = suite.names.new_keys(LONG_CHAIN_KEYS)
    stored = chain[:LONG_CHAIN_STORED]
    for start in range(0, len(stored), size):  # written as SGLang's backup writes: slice by slice
        batch = stored[start : start + size]
        written = suite.io.write(instance, batch, pages=list(range(len(batch))), clause_id="BE-2")
        if not all(written):
            raise CheckSkipped(f"the backend refused {written.count(False)} of {len(batch)} pages of the chain")
    count = suite.io.count(instance, chain)
    expect(
        count == len(stored),
        "BE-2",
        f"one batch_exists over a chain of {len(chain)} keys whose first "
        f"{len(stored)} are stored returned {count}: SGLang 0.5.23 sends the whole chain unbatched",
        f"write {len(stored)} pages in slices of {size}, then batch_exists({suite.names.show(chain)}) -> {count}",
    )


# ---------------------------------------------------------------- BE-11, BE-12, BE-13
@conformance_check("BE-11")
def clear_removes_every_page(suite: SuiteContext) -> None:
    """clear() never raises, and afterwards batch_exists is 0 and exists False for every key written before."""
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("clear")), pages=8, tag="clear"
    )
    keys = suite.names.new_keys(3)
    suite.io.store(instance, keys, clause_id="BE-11")
    suite.io.count(instance, keys, clause_id="BE-11")  # looked up before clear(): a cache of hits must not outlive it
    suite.io.found(instance, keys)
    suite.calls.call("BE-11", instance.backend.clear)
    count = suite.io.count(instance, keys, clause_id="BE-11")
    left = [suite.names.label(key) for key, hit in zip(keys, suite.io.found(instance, keys)) if hit]
    expect(
        count == 0 and not left,
        "BE-11",
        f"after clear() batch_exists returned {count} and exists() was true for {left}",
        f"write {suite.names.show(keys)}, clear(), batch_exists({suite.names.show(keys)})",
    )
    suite.calls.call("BE-11", instance.backend.clear)  # clearing an empty store never raises either


@conformance_check("BE-11", requires=("v2",))
def clear_removes_every_pool(suite: SuiteContext) -> None:
    """clear() removes KV and every sidecar pool's pages: afterwards nothing reads back from any pool."""
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("clear-pools")),
        pages=8,
        v2=True,
        tag="clear, every pool",
    )
    backend = instance.backend
    keys, pages = suite.names.new_keys(3), [0, 1, 2]
    sidecars = [(PoolName.INDEXER, True), (PoolName.SWA, False)]
    transfers = []
    for name, derived in sidecars:  # a backup as SGLang writes it: the sidecars first, then KV
        sidecar = instance.pool_for(name)
        for key, page in zip(keys, pages):
            sidecar.poke(page, suite.pages.page_for(key, sidecar, 5))
        transfers.append(suite.wire.transfer(name, keys, sidecar.slots(pages), derived=derived))
    written = suite.io.v2_flags(
        suite.calls.call("BE-11", backend.batch_set_v2, transfers, None), transfers, "batch_set_v2"
    )
    suite.io.store(instance, keys, pages=pages, clause_id="BE-11")
    if not all(all(flags) for flags in written.values()):
        raise CheckSkipped(f"the backend refused sidecar pages the check needs (batch_set_v2 -> {written})")
    suite.calls.call("BE-11", backend.clear)
    shown = (
        f"batch_set_v2 of indexer and swa pages for {suite.names.show(keys)}, the KV write, clear(), then "
        "batch_exists, the KV read and batch_get_v2 of each sidecar pool"
    )
    count = suite.io.count(instance, keys, clause_id="BE-11")
    expect(count == 0, "BE-11", f"after clear() batch_exists still counts {count} pages", shown)
    left = [
        suite.names.label(key)
        for key, page in zip(keys, suite.io.read(instance, keys, pages=[4, 5, 6], clause_id="BE-11"))
        if page is not None
    ]
    expect(not left, "BE-11", f"after clear() the KV pages of {left} still read back", shown)
    for name, derived in sidecars:
        sidecar = instance.pool_for(name)
        reads = [suite.wire.transfer(name, keys, sidecar.slots([4, 5, 6]), derived=derived)]
        loaded = suite.io.v2_flags(suite.calls.call("BE-11", backend.batch_get_v2, reads, None), reads, "batch_get_v2")[
            name.value
        ]
        expect(
            not any(loaded),
            "BE-11",
            f"after clear() batch_get_v2 still loads pool {name.value!r}'s pages "
            f"({loaded}): clear() must remove every pool of the namespace, sidecars included",
            f"{shown}; batch_get_v2({suite.names.show(reads)}) -> {loaded}",
        )


@conformance_check("BE-12")
def get_stats_returns_none_or_an_object(suite: SuiteContext) -> None:
    """get_stats() returns None or a metrics object, never a dict."""
    instance = suite.instances.main
    for moment in ("before IO", "after IO"):
        if moment == "after IO":
            suite.io.write(instance, suite.names.new_keys(1), clause_id="BE-12")
        stats = suite.calls.call("BE-12", instance.backend.get_stats)
        expect(
            not isinstance(stats, (dict, Mapping)),
            "BE-12",
            f"get_stats() {moment} returned a {type(stats).__name__}, not None or a metrics object",
            f"get_stats() -> {suite.names.show(stats)}",
        )


@conformance_check("BE-13")
def short_objects_are_misses(suite: SuiteContext) -> None:
    """A stored object that is empty or shorter than a page is a miss for exists, batch_exists and get."""
    instance, backend, pool = (
        suite.instances.main,
        suite.instances.main.backend,
        suite.instances.main.pool,
    )  # a short object is planted with set
    for label, length in (("an empty value", 0), ("half a page", pool.page_element_count // 2)):
        key = suite.names.new_keys(1)[0]
        value = suite.pages.page_for(key, pool)[:length].clone()
        try:
            suite.calls.call("BE-13", backend.set, key, value)
        except ClauseFailure:
            continue  # refusing a short value is fine; only hits matter here
        stored = f"set({suite.names.label(key)}, {length}-element tensor)"
        try:
            counted = suite.io.count(instance, [key], clause_id="BE-13")
            hit = bool(suite.calls.call("BE-13", backend.exists, key))
            target = torch.zeros(pool.page_element_count, dtype=pool.dtype)
            read = suite.calls.call("BE-13", backend.get, key, target)
            read_whole = isinstance(read, torch.Tensor) and read.numel() == pool.page_element_count
            flags: list[bool] = []
        except ClauseFailure as failure:  # say which short object the failing lookup met
            raise ClauseFailure(
                failure.clause_id, failure.message, f"{stored}, then {failure.counterexample or 'look it up'}"
            ) from None
        expect(
            counted == 0 and not hit and not read_whole and not any(flags),
            "BE-13",
            f"{label} stored under {suite.names.label(key)} counts as a hit (batch_exists {counted}, exists {hit}, "
            f"get a full page {read_whole}, batch_get_v1 {flags})",
            f"{stored}, then batch_exists([{suite.names.label(key)}])",
        )


# ---------------------------------------------------------------- BE-18, BE-24
@conformance_check("BE-18")
def unimplemented_methods_raise_not_implemented(suite: SuiteContext) -> None:
    """A v1 or v2 method the backend does not implement raises NotImplementedError; it never returns None."""
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    # SGLang's own base class returns None from v1 in every release: that is a bug only where SGLang calls v1,
    # i.e. where the extra config says interface_v1 (the dynamic loader's switch to the zero-copy path).
    asks_v1 = bool((suite.factory.extra_config or {}).get("interface_v1"))
    asked = tuple(name for name in V2_METHODS if name != "register_mem_host_pool_v2") + (V1_METHODS if asks_v1 else ())
    capabilities = suite.calls.call_as("BE-18", "detect_capabilities", detect_capabilities, backend)
    for name in capabilities.returning_none:
        if name in asked:
            fail(
                "BE-18",
                f"{name} returned None on empty input instead of a result or NotImplementedError",
                f"{name}([]) -> None",
            )
    key = suite.names.new_keys(1)
    sidecar = instance.sidecars.get(PoolName.SWA.value, pool)
    calls = {
        "batch_get_v1": (backend.batch_get_v1, (key, pool.slots([0]), None)),
        "batch_set_v1": (backend.batch_set_v1, (key, pool.slots([0]), None)),
        "batch_exists_v2": (backend.batch_exists_v2, (key, [], None)),
        "batch_get_v2": (backend.batch_get_v2, ([suite.wire.transfer(PoolName.SWA, key, sidecar.slots([0]))], None)),
        "batch_set_v2": (backend.batch_set_v2, ([suite.wire.transfer(PoolName.SWA, key, sidecar.slots([0]))], None)),
    }
    for name in asked:
        if name not in calls or not capabilities.method(name).present:
            continue
        level = "v1" if name in V1_METHODS else "v2"
        if suite.claims(level):
            continue  # a claimed level's methods are checked by that level's checks
        method, arguments = calls[name]
        try:
            result = suite.calls.call("BE-18", method, *arguments)
        except ClauseFailure as failure:
            if failure.__cause__ is not None:
                continue  # NotImplementedError as asked; any other error: input it never sees, only None is the bug
            raise
        expect(
            result is not None,
            "BE-18",
            f"{name} (level {level} not claimed) returned None instead of raising NotImplementedError",
            f"{name}({suite.names.show(key)}, ...) -> None",
        )


@conformance_check("BE-24")
def host_pools_register_before_any_io(suite: SuiteContext) -> None:
    """register_mem_pool_host (and register_mem_host_pool_v2 for every pool, KV included) accept the pools; IO works right after."""
    suite.io.require_round_trip(suite.instances.main)
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("register")), pages=4, tag="register"
    )
    keys = suite.names.new_keys(2)
    written = suite.io.write(instance, keys, clause_id="BE-24")
    read = suite.io.read(instance, keys, pages=[2, 3], clause_id="BE-24")
    expect(
        all(written) and all(suite.pages.same_page(key, instance.pool, page) for key, page in zip(keys, read)),
        "BE-24",
        f"the first IO after registration failed (writes {written}, reads {[page is not None for page in read]})",
        "construct, register the pools, write 2 pages, read them",
    )


def _round_trip(suite: SuiteContext, instance: Instance, keys: list[str], targets: list[int], shown: str) -> None:
    """Read ``keys`` into host pages ``targets`` of ``instance``'s pool; fail BE-28 on other bytes."""
    for key, page in zip(keys, suite.io.read(instance, keys, pages=targets, clause_id="BE-28")):
        wanted = suite.pages.page_for(key, instance.pool)
        expect(
            pages_equal(wanted, page),
            "BE-28",
            f"after a second host pool was registered under 'kv', "
            f"{suite.names.label(key)} read through {instance.tag}'s pool holds "
            f"{describe_page_difference(wanted, page)}",
            shown,
        )


@conformance_check("BE-28", requires=("robustness",))
def second_host_pool_is_served_or_refused(suite: SuiteContext) -> None:
    """A second, different host pool under 'kv' is either served beside the first or refused with an error; never a silent swap."""
    suite.io.require_round_trip(suite.instances.main)
    first = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("two-pools")), pages=8, tag="the first controller"
    )
    backend, config = first.backend, first.config
    second = Instance(
        backend,
        config,
        suite.instances.new_pool(8, kind="mla" if config.is_mla_model else "mha"),
        {},
        "the second controller",
    )  # shares the instance; cleared with the first
    early, late, theirs = suite.names.new_keys(2), suite.names.new_keys(2), suite.names.new_keys(2)
    if not all(suite.io.write(first, early, pages=[0, 1], clause_id="BE-28")):
        raise CheckSkipped("the backend refused the pages the check needs")
    calls: list[tuple[str, tuple[Any, ...]]] = [("register_mem_pool_host", (second.pool,))]
    if suite.claims("v2"):
        calls.append(("register_mem_host_pool_v2", (second.pool, suite.wire.pool_name(PoolName.KV))))
    refused = None
    for name, arguments in calls:  # the second controller attaches to the same instance
        try:
            suite.calls.call("BE-28", getattr(backend, name), *arguments)
        except CallTimedOut:
            raise
        except ClauseFailure as failure:
            refused = failure.__cause__ or failure
            expect(
                str(refused).strip(),
                "BE-28",
                f"{name} refused the second host pool with "
                f"{type(refused).__name__} and no message; say why (one instance serves one host pool per name)",
                f"{name}(<a second host pool>) -> raised {type(refused).__name__}()",
            )
            break
    shown = (
        f"write {suite.names.show(early)} through the first pool, register a second host pool under 'kv'"
        f"{' (refused: ' + type(refused).__name__ + ')' if refused else ''}, write "
        f"{suite.names.show(late)} through the first{'' if refused else ' and ' + suite.names.show(theirs) + ' through the second'}"
        f", read each back through its own pool"
    )
    if refused is None and not all(suite.io.write(second, theirs, pages=[0, 1], clause_id="BE-28")):
        raise CheckSkipped("the backend refused the second controller's pages the check needs")
    if not all(suite.io.write(first, late, pages=[2, 3], clause_id="BE-28")):
        raise CheckSkipped("the backend refused the pages the check needs")
    _round_trip(suite, first, early + late, [4, 5, 6, 7], shown)
    if refused is None:
        _round_trip(suite, second, theirs, [4, 5], shown)


@conformance_check("BE-27")
def host_pools_registered_hook_accepts_the_pools(suite: SuiteContext) -> None:
    """on_host_pools_registered, called once after the registration burst (0.5.23), accepts the pools; IO works after it."""
    if not callable(getattr(suite.instances.main.backend, "on_host_pools_registered", None)):
        raise CheckSkipped(
            "not applicable: the backend has no on_host_pools_registered (SGLang before 0.5.23 never "
            "calls it; 0.5.23's base class gives every subclass a no-op one)"
        )
    suite.io.require_round_trip(suite.instances.main)
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("attach")),
        pages=4,
        tag="attach",
        construct_clause="BE-27",
    )  # registers, then calls the hook (a raise fails BE-27)
    keys = suite.names.new_keys(2)
    written = suite.io.write(instance, keys, clause_id="BE-27")
    read = suite.io.read(instance, keys, pages=[2, 3], clause_id="BE-27")
    expect(
        all(written) and all(suite.pages.same_page(key, instance.pool, page) for key, page in zip(keys, read)),
        "BE-27",
        f"the first IO after on_host_pools_registered failed (writes {written}, reads "
        f"{[page is not None for page in read]})",
        "construct, register the pools, on_host_pools_registered(), write 2 pages, read them",
    )


@conformance_check("BE-25")
def every_rank_inside_its_group_is_accepted(suite: SuiteContext) -> None:
    """A backend builds and works for configs at the edges of their groups: every rank at size - 1, DP ranks, tp_lcm_size."""
    suite.io.require_round_trip(
        suite.instances.main
    )  # a single-rank instance moves pages: what fails below is the rank
    # The other half of BE-25, rejecting impossible coordinates, happens where the config is built (the
    # contract model refuses them), so the suite can hand a backend only possible ones.
    edges = [
        (
            "the last rank of every group",
            dict(tp_rank=1, tp_size=2, pp_rank=2, pp_size=3, attn_cp_rank=3, attn_cp_size=4),
        ),
        ("an attention data-parallel rank", dict(dp_rank=1)),
        # SGLang splits heads only for a page_head host layout, which the suite's pools never have: with
        # tp_lcm_size above tp_size on these layouts it sends should_split_heads=False.
        ("tp_lcm_size 4 with tp_size 2", dict(tp_rank=1, tp_size=2, tp_lcm_size=4, should_split_heads=False)),
    ]
    for label, overrides in edges:
        if not suite.wire.release_has_fields(overrides):
            continue  # only configurations the release handing over its objects can build
        config = suite.instances.config(model_name=suite.names.namespace("edge"), **overrides)
        instance = suite.instances.build(config, pages=4, v2=False, tag=label, construct_clause="BE-25")
        keys = suite.names.new_keys(2)
        writer = instance
        if not is_storage_writer(config):  # replicated KV: SGLang lets only the writer rank write it
            writer = suite.instances.build(
                config.model_copy(update=dict(tp_rank=getattr(config, "dcp_rank", 0))),
                pages=4,
                v2=False,
                tag=f"the writer of {label}",
                construct_clause="BE-25",
            )
        written = suite.io.write(writer, keys, clause_id="BE-25")
        read = suite.io.read(instance, keys, pages=[2, 3], clause_id="BE-25")
        works = all(written) and all(suite.pages.same_page(key, instance.pool, page) for key, page in zip(keys, read))
        expect(
            works,
            "BE-25",
            f"a backend built with {label} does not store and read pages (writes {written}, "
            f"reads {[page is not None for page in read]})",
            f"storage config with {overrides}",
        )
