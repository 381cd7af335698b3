"""Core-level housekeeping checks: clear, stats, short objects, unimplemented methods (BE-11..BE-13, BE-18),
host pools and ranks (BE-24, BE-25, BE-27), and a second host pool under one name (BE-28, level robustness).

Written as in ``checks_core_hits`` (fresh keys, a verified round trip first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from hicache_contracts.capabilities import V1_METHODS, V2_METHODS, detect_capabilities
from hicache_contracts.conformance.checks.core_hits import setup_clause
from hicache_contracts.conformance.session.context import Instance, SuiteContext, is_storage_writer
from hicache_contracts.conformance.framework import (
    CallTimedOut,
    CheckSkipped,
    ClauseFailure,
    conformance_check,
    expect,
    fail,
)
from hicache_contracts.conformance.session.pools import describe_page_difference
from hicache_contracts.models import PoolHitPolicy, PoolName


# ---------------------------------------------------------------- BE-11, BE-12, BE-13
@conformance_check("BE-11")
def clear_removes_every_page(suite: SuiteContext) -> None:
    """After a clear() that returns, batch_exists is 0 and exists False for every key written before."""
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("clear")), pages=8, tag="clear"
    )
    keys = suite.names.new_keys(3)
    suite.io.store(instance, keys, clause_id=setup_clause(suite))
    before = suite.io.count(
        instance, keys, clause_id="BE-11"
    )  # looked up before clear(): a cache of hits must not outlive it
    suite.io.found(instance, keys)
    suite.io.require_seen(before > 0, "what clear() removes")
    cleared_or_skip(suite, instance)
    count = suite.io.count(instance, keys, clause_id="BE-11")
    left = [suite.names.label(key) for key, hit in zip(keys, suite.io.found(instance, keys)) if hit]
    expect(
        count == 0 and not left,
        "BE-11",
        f"after clear() batch_exists returned {count} and exists() was true for {left}",
        f"write {suite.names.show(keys)}, clear(), batch_exists({suite.names.show(keys)})",
    )


def cleared_or_skip(suite: SuiteContext, instance: Instance) -> None:
    """Clear ``instance``; skip the check when clear() raised, SGLang's only sign of a failed clear (BE-11)."""
    if not suite.io.clear(instance):
        raise CheckSkipped(
            "clear() raised: SGLang takes that as a failed clear and keeps what it believed stored, so what it "
            "should have removed cannot be judged"
        )


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
    suite.io.store(instance, keys, pages=pages, clause_id=setup_clause(suite))
    if not all(all(flags) for flags in written.values()):
        raise CheckSkipped(f"the backend refused sidecar pages the check needs (batch_set_v2 -> {written})")
    if suite.may_evict:  # pages already gone show nothing about clear()
        suite.io.require_seen(suite.io.count(instance, keys, clause_id="BE-11") > 0, "what clear() removes")
    cleared_or_skip(suite, instance)
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
        slots = (instance.pool if derived else sidecar).slots([4, 5, 6])  # a KV-derived read over the KV slots
        reads = [suite.wire.transfer(name, keys, slots, derived=derived, read=True)]
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


@conformance_check("BE-11", requires=("v2",))
def clear_removes_a_ranks_own_state_under_replicated_kv(suite: SuiteContext) -> None:
    """With is_mla_model=True and a Mamba state pool, clear() at a rank removes the KV and the rank's own Mamba state:
    the state is sharded by TP rank where the KV is one copy (NS-5, CTL-8), so a backend keeping it apart must clear
    it too."""
    model = suite.names.namespace("clear-mla-state")
    config = suite.instances.config(model_name=model, is_mla_model=True, tp_rank=0, tp_size=2)
    instance = suite.instances.build(config, pages=6, v2=True, hybrid=True, tag="clear, MLA with Mamba state")
    keys = suite.names.new_keys(2)
    last = keys[-1:]  # SGLang stores one state per node, under its last page's key
    suite.io.store(instance, keys, clause_id=setup_clause(suite))
    state = instance.pool_for(PoolName.MAMBA)
    state.poke(0, suite.pages.page_for(last[0], state, 1))
    writes = [suite.wire.transfer(PoolName.MAMBA, last, state.slots([0]), policy=PoolHitPolicy.TRAILING_PAGES)]
    raw = suite.calls.call(setup_clause(suite), instance.backend.batch_set_v2, writes, None)
    if not suite.io.v2_flags(raw, writes, "batch_set_v2")[PoolName.MAMBA.value][0]:
        raise CheckSkipped("the backend refused the Mamba state the check needs (batch_set_v2 -> False)")

    def state_loads() -> bool:
        state.fill([3])
        reads = [
            suite.wire.transfer(PoolName.MAMBA, last, state.slots([3]), policy=PoolHitPolicy.TRAILING_PAGES, read=True)
        ]
        raw = suite.calls.call("BE-11", instance.backend.batch_get_v2, reads, None)
        return bool(suite.io.v2_flags(raw, reads, "batch_get_v2")[PoolName.MAMBA.value][0])

    if suite.may_evict:  # a state already gone shows nothing about clear()
        suite.io.require_seen(state_loads(), "what clear() removes")
    cleared_or_skip(suite, instance)
    shown = (
        f"is_mla_model=True, tp_rank 0 of 2: the KV of {suite.names.show(keys)} and the rank's Mamba state of "
        f"{suite.names.show(last)} (batch_set_v2, pool mamba), clear(), then batch_exists and batch_get_v2 of the state"
    )
    count = suite.io.count(instance, keys, clause_id="BE-11")
    expect(count == 0, "BE-11", f"after clear() batch_exists still counts {count} pages", shown)
    expect(
        not state_loads(),
        "BE-11",
        "after clear() batch_get_v2 still loads the rank's Mamba state: clear() must remove every pool of the "
        "instance, the state it keeps per rank under replicated KV included",
        shown,
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
            read_whole = is_full_page(read, pool)
            # SGLang's generic path reads through batch_get, one target per key
            batch = suite.calls.call(
                "BE-13", backend.batch_get, [key], [torch.zeros(pool.page_element_count, dtype=pool.dtype)]
            )
            batch_whole = isinstance(batch, (list, tuple)) and len(batch) == 1 and is_full_page(batch[0], pool)
        except ClauseFailure as failure:  # say which short object the failing lookup met
            raise ClauseFailure(
                failure.clause_id, failure.message, f"{stored}, then {failure.counterexample or 'look it up'}"
            ) from None
        expect(
            counted == 0 and not hit and not read_whole and not batch_whole,
            "BE-13",
            f"{label} stored under {suite.names.label(key)} counts as a hit (batch_exists {counted}, exists {hit}, "
            f"get a full page {read_whole}, batch_get a full page {batch_whole})",
            f"{stored}, then batch_exists, exists, get and batch_get of [{suite.names.label(key)}]",
        )


def is_full_page(value: Any, pool: Any) -> bool:
    """Whether a legacy read gave ``value`` as a hit: a tensor of a whole page."""
    return isinstance(value, torch.Tensor) and value.numel() == pool.page_element_count


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
    back = suite.io.write_and_read_back(instance, clause_id="BE-24")
    expect(
        back.works,
        "BE-24",
        f"the first IO after registration failed (writes {back.written}, reads {back.loaded})",
        "construct, register the pools, write 2 pages, read them",
    )
    suite.io.require_seen(back.seen, "that IO works right after registration")


def _round_trip(suite: SuiteContext, instance: Instance, keys: list[str], targets: list[int], shown: str) -> bool:
    """Read ``keys`` into host pages ``targets`` of ``instance``'s pool in one batch, then each page past the batch's
    first miss on its own (SGLang reads nothing of a batch past its first miss; a backend that may evict keeps only
    some pages); fail BE-28 on other bytes; return whether any of them read back."""
    read = suite.io.read(instance, keys, pages=targets, clause_id="BE-28")
    after = next((number + 1 for number, page in enumerate(read) if page is None), len(read))
    read[after:] = [
        suite.io.read(instance, [key], pages=[target], clause_id="BE-28")[0]
        for key, target in zip(keys[after:], targets[after:])
    ]
    for key, page in zip(keys, read):
        wanted = suite.pages.page_for(key, instance.pool)
        expect(
            suite.io.holds(key, instance.pool, page),
            "BE-28",
            f"after a second host pool was registered under 'kv', "
            f"{suite.names.label(key)} read through {instance.tag}'s pool holds "
            f"{describe_page_difference(wanted, page)}",
            shown,
        )
    return any(page is not None for page in read)


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
    seen = _round_trip(suite, first, early + late, [4, 5, 6, 7], shown)
    if refused is None:
        seen = _round_trip(suite, second, theirs, [4, 5], shown) or seen
    suite.io.require_seen(seen, "which host pool a read lands in")


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
    back = suite.io.write_and_read_back(instance, clause_id="BE-27")
    expect(
        back.works,
        "BE-27",
        f"the first IO after on_host_pools_registered failed (writes {back.written}, reads {back.loaded})",
        "construct, register the pools, on_host_pools_registered(), write 2 pages, read them",
    )
    suite.io.require_seen(back.seen, "that IO works after on_host_pools_registered")


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
    seen = False
    for label, overrides in edges:
        if not suite.wire.release_has_fields(overrides):
            continue  # only configurations the release handing over its objects can build
        config = suite.instances.config(model_name=suite.names.namespace("edge"), **overrides)
        instance = suite.instances.build(config, pages=4, v2=False, tag=label, construct_clause="BE-25")
        writer = instance
        if not is_storage_writer(config):  # replicated KV: SGLang lets only the writer rank write it
            writer = suite.instances.build(
                config.model_copy(update=dict(tp_rank=getattr(config, "dcp_rank", 0))),
                pages=4,
                v2=False,
                tag=f"the writer of {label}",
                construct_clause="BE-25",
            )
        back = suite.io.write_and_read_back(instance, writer=writer, clause_id="BE-25")
        seen = seen or back.seen
        expect(
            back.works,
            "BE-25",
            f"a backend built with {label} does not store and read pages (writes {back.written}, reads {back.loaded})",
            f"storage config with {overrides}",
        )
    suite.io.require_seen(seen, "that pages move at the edges of the groups")
