"""Core-level checks of page IO: rewrites, visibility, extra_info and legacy shapes, full batches (BE-6..BE-10,
the long hit query of BE-2).

Written as in ``checks_core_hits`` (fresh keys, a verified round trip first).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import torch

from hicache_spec.values import is_count
from hicache_spec import STORAGE_BATCH_SIZE
from hicache_spec.call_forms import ABSENT, EXTRA_INFO_FORMS, KEYWORD, POSITIONAL, extra_info_forms
from hicache_spec.releases import SGLANG_RELEASES
from hicache_spec.values import is_flag
from hicache_contracts.conformance.checks.core_hits import (
    LONG_CHAIN_KEYS,
    LONG_CHAIN_STORED,
    UNKNOWN_OPTION,
    misses_never_raise,
)
from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.framework import CheckSkipped, conformance_check, expect, fail
from hicache_contracts.conformance.session.pools import describe_page_difference
from hicache_contracts.models import PoolHitPolicy, PoolName
from hicache_contracts.sglang_release import release_of


# ---------------------------------------------------------------- BE-6, BE-7
@conformance_check("BE-6")
def rewriting_a_key_returns_true_and_keeps_correct_bytes(suite: SuiteContext) -> None:
    """Writing an existing key returns True and leaves correct bytes, whether the backend skips or overwrites."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    for path in [suite.io.io_path()]:  # the one path SGLang writes this backend's KV through
        keys = suite.names.new_keys(2)
        suite.io.store(instance, keys, path=path, clause_id="BE-17" if path == "v1" else "BE-9")
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
            correct = suite.io.holds(key, pool, page, variants=(0, 1))
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

    # the write is held longer than the poller is waited for, so that the suite, not the hold's own timeout, lets a
    # backend that serialises its calls go on: its probes return only after the release, and show nothing
    with pool.holding([pages[0]], timeout_s=2 * bound) as hold:
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
    if suite.may_evict and not writing.is_alive():  # a page gone as soon as written shows no window at all
        suite.io.require_seen(suite.io.count(suite.instances.main, keys, clause_id="BE-7") > 0, "when a page appears")
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


def held_release(suite: SuiteContext) -> Optional[str]:
    """The pinned release whose objects the run hands over, or None (the stand-in speaks for every release)."""
    release = release_of(suite.wire.sglang) if suite.wire.sglang is not None else None
    return release if release in SGLANG_RELEASES else None


PASSED = {POSITIONAL: "positionally", KEYWORD: "by keyword", ABSENT: "left out"}
"""How a message says the form extra_info was handed in."""


@conformance_check("BE-8")
def extra_info_accepted_in_every_shape(suite: SuiteContext) -> None:
    """Every method taking extra_info accepts it in each form SGLang hands it to that method (positionally or by
    keyword, per release), as None, empty, [] or a list of keys, with unknown extra_info keys."""
    instance, backend, pool = suite.instances.main, suite.instances.main.backend, suite.instances.main.pool
    suite.io.require_round_trip(instance)
    release = held_release(suite)
    # as many rounds as the pinned releases have forms for a method, whatever the run holds, so that a run holding a
    # release makes the same calls in its first round as one on the stand-in (the newest release's forms first)
    rounds = max(len(extra_info_forms(method)) for method in EXTRA_INFO_FORMS)
    for label, info in extra_info_shapes(suite):
        for turn in range(rounds):  # each method gets each of its forms in some round

            def form(name: str) -> str:
                forms = extra_info_forms(name, release)
                return forms[turn % len(forms)]

            def call(method: Any, *args: Any) -> Any:
                handed = form(method.__name__)
                arguments = (*args, info) if handed == POSITIONAL else args
                keywords = {"extra_info": info} if handed == KEYWORD else {}
                try:
                    return method(*arguments, **keywords)
                except Exception as error:
                    fail(
                        "BE-8",
                        f"{method.__name__} with extra_info {label} passed {PASSED[handed]} raised "
                        f"{type(error).__name__}: {error}",
                        f"{suite.names.describe_call(method, arguments, keywords)}",
                    )

            keys = suite.names.new_keys(2)
            if suite.claims("v1"):
                for page, key in enumerate(keys):
                    pool.poke(page, suite.pages.page_for(key, pool))
                flags = suite.io.v1_flags(call(backend.batch_set_v1, keys, pool.slots([0, 1])), keys, "batch_set_v1")
                expect(
                    all(flags),
                    "BE-8",
                    f"batch_set_v1 with extra_info {label} ({PASSED[form('batch_set_v1')]}) returned {flags}",
                )
            else:
                suite.io.store(instance, keys, clause_id="BE-8")
            count = call(backend.batch_exists, keys)
            expect(
                count == 2 or (is_count(count, exact=False) and suite.io.counted(count, 2)),
                "BE-8",
                f"batch_exists with extra_info {label} ({PASSED[form('batch_exists')]}) returned {count!r}, expected 2",
                f"batch_exists({suite.names.show(keys)}, {label})",
            )
            if suite.claims("v1"):
                pool.fill([2, 3])
                flags = suite.io.v1_flags(call(backend.batch_get_v1, keys, pool.slots([2, 3])), keys, "batch_get_v1")
                expect(
                    all(flags) or suite.may_evict,
                    "BE-8",
                    f"batch_get_v1 with extra_info {label} ({PASSED[form('batch_get_v1')]}) returned {flags}",
                )
                wrong = [
                    suite.names.label(key)
                    for page, (key, loaded) in enumerate(zip(keys, flags), start=2)
                    if loaded and not suite.pages.same_page(key, pool, pool.peek(page))
                ]
                expect(
                    not wrong,
                    "BE-8",
                    f"batch_get_v1 with extra_info {label} ({PASSED[form('batch_get_v1')]}) reported {', '.join(wrong)} loaded, but the host "
                    "page does not hold what was written",
                )
            if suite.claims("v2"):  # v2 carries sidecars; KV moved above through v1
                sidecar = instance.pool_for(PoolName.SWA)
                more = suite.names.new_keys(1)
                sidecar.poke(4, suite.pages.page_for(more[0], sidecar))
                sidecar.fill([5])  # the read's target: whatever it holds after the read, the read put there
                put = [suite.wire.transfer(PoolName.SWA, more, sidecar.slots([4]))]
                stored = suite.io.v2_flags(call(backend.batch_set_v2, put), put, "batch_set_v2")
                call(
                    backend.batch_exists_v2,
                    more,
                    [suite.wire.transfer(PoolName.SWA, more, policy=PoolHitPolicy.TRAILING_PAGES)],
                )
                get = [suite.wire.transfer(PoolName.SWA, more, sidecar.slots([5]))]
                loaded = suite.io.v2_flags(call(backend.batch_get_v2, get), get, "batch_get_v2")
                expect(
                    not (all(stored[PoolName.SWA.value]) and all(loaded[PoolName.SWA.value]))
                    or suite.pages.same_page(more[0], sidecar, sidecar.peek(5)),
                    "BE-8",
                    f"batch_get_v2 with extra_info {label} ({PASSED[form('batch_get_v2')]}) reported the swa page it had stored as loaded, "
                    "but its host page does not hold it",
                )


# ---------------------------------------------------------------- BE-9, BE-10
@conformance_check("BE-9")
def legacy_results_have_their_shapes(suite: SuiteContext) -> None:
    """batch_get gives None or a tensor-or-None for each key (None for a miss), batch_set a bool: the legacy calls
    SGLang makes (get and set it never calls)."""
    backend, pool = suite.instances.main.backend, suite.instances.main.pool  # runs only when legacy is claimed
    keys, missing = suite.names.new_keys(3), suite.names.new_keys(1)
    outcome = suite.calls.call("BE-9", backend.batch_set, keys, [suite.pages.page_for(item, pool) for item in keys])
    expect(
        is_flag(outcome),
        "BE-9",
        f"batch_set returned {outcome!r}, not a bool",
        f"batch_set({suite.names.show(keys)}, values)",
    )
    asked = [keys[0], missing[0], keys[1], keys[2]]
    targets = [torch.zeros(pool.page_element_count, dtype=pool.dtype) for _ in asked]
    with misses_never_raise([suite.names.label(missing[0])]):
        values = suite.calls.call("BE-9", backend.batch_get, asked, targets)
    if values is None:  # SGLang reads a whole None as a miss of every key; each stored key is asked for alone below
        values = [None] * len(asked)
    # SGLang reads one entry per key it asked for and ignores any after them
    shape_ok = (
        isinstance(values, (list, tuple))
        and len(values) >= len(asked)
        and all(value is None or isinstance(value, torch.Tensor) for value in values[: len(asked)])
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
            value = values[index]
            if value is None:  # a batch with a miss may be answered all or nothing: SGLang keeps the leading hits
                target = torch.zeros(pool.page_element_count, dtype=pool.dtype)
                alone = suite.calls.call("BE-9", backend.batch_get, [asked[index]], [target])
                value = alone[0] if isinstance(alone, (list, tuple)) and len(alone) >= 1 else alone
                expect(
                    value is not None or suite.may_evict,
                    "BE-9",
                    f"batch_set returned True for {suite.names.label(asked[index])} but batch_get gives None for "
                    "it, also when asked for it alone",
                    f"batch_set({suite.names.show(keys)}), then batch_get({suite.names.show(asked)}), then "
                    f"batch_get([{suite.names.label(asked[index])}])",
                )
                if value is None:
                    continue
            expect(
                suite.io.holds(asked[index], pool, value),
                "BE-9",
                f"batch_get returned wrong bytes for {suite.names.label(asked[index])}: "
                f"{describe_page_difference(suite.pages.page_for(asked[index], pool), value)}",
            )


@conformance_check("BE-10")
def full_batches_of_128_pages_work(suite: SuiteContext) -> None:
    """Batches of STORAGE_BATCH_SIZE (128) pages are written, found and read back whole."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    suite.io.require_round_trip(instance)  # small batches work: what fails below is the size
    size = STORAGE_BATCH_SIZE
    keys = suite.names.new_keys(size)
    written = suite.io.write(instance, keys, pages=suite.pages.spread(size), clause_id="BE-10", each=True)
    expect(
        all(written),
        "BE-10",
        f"a write of {size} pages succeeded for {sum(written)} of them",
        f"{suite.io.io_path()} write of {size} keys {suite.names.show(keys)}",
    )
    count = suite.io.count(instance, keys, clause_id="BE-10")
    expect(suite.io.counted(count, size), "BE-10", f"batch_exists over {size} stored keys returned {count}")
    # read into the pool's top pages, its last among them: a bound off by one shows on a full batch too
    read = suite.io.read(
        instance, keys, pages=suite.pages.spread(size, start=pool.page_count - size), clause_id="BE-10"
    )
    wrong = [index for index, (key, page) in enumerate(zip(keys, read)) if not suite.io.holds(key, pool, page)]
    expect(
        not wrong,
        "BE-10",
        f"a read of {size} pages got {len(wrong)} wrong or missing, the first at position {wrong[0] if wrong else 0}",
    )
    suite.io.require_seen(any(page is not None for page in read), f"that a batch of {size} pages reads back")


@conformance_check("BE-2", requires=("core",))
def batch_exists_takes_a_whole_chain(suite: SuiteContext) -> None:
    """One batch_exists over a chain of thousands of keys counts its whole stored prefix, as every pinned release asks it."""
    instance = suite.instances.main
    suite.io.require_round_trip(instance)
    size = STORAGE_BATCH_SIZE
    chain = suite.names.new_keys(LONG_CHAIN_KEYS)
    stored = chain[:LONG_CHAIN_STORED]
    for start in range(0, len(stored), size):  # written as SGLang's backup writes: slice by slice
        batch = stored[start : start + size]
        written = suite.io.write(instance, batch, pages=list(range(len(batch))), clause_id="BE-2", each=True)
        if not all(written):
            raise CheckSkipped(f"the backend refused {written.count(False)} of {len(batch)} pages of the chain")
    count = suite.io.count(instance, chain)
    expect(
        suite.io.counted(count, len(stored)),
        "BE-2",
        f"one batch_exists over a chain of {len(chain)} keys whose first "
        f"{len(stored)} are stored returned {count}: SGLang sends the whole chain unbatched",
        f"write {len(stored)} pages in slices of {size}, then batch_exists({suite.names.show(chain)}) -> {count}",
    )
    suite.io.require_seen(count > 0, "that one call counts a whole chain")
