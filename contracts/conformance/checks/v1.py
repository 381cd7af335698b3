"""Checks of the zero-copy v1 level: result cardinality (BE-14), bytes that land where asked (BE-15, BE-17),
and nothing written outside the addressed slots (BE-16).

Data checks try the profile's batch sizes in ascending order and stop at
the first that fails, so the counterexample is the smallest batch that
shows the bug. Pages are written from one region of the host pool, the
region is then overwritten, and the pages are read into another region:
what lands can only have come from storage.
"""

from __future__ import annotations

import itertools

from hicache_spec import STORAGE_BATCH_SIZE
from hicache_spec.values import is_flag
from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.framework import conformance_check, expect, fail
from hicache_contracts.conformance.session.pools import describe_page_difference, pages_equal

GUARD_VALUE = 77.0
"""The value of guard pages around the pages a read addresses (BE-16)."""


@conformance_check("BE-14")
def v1_results_have_one_bool_per_key(suite: SuiteContext) -> None:
    """batch_get_v1 and batch_set_v1 return a list of exactly len(keys) bools, for hits, misses and empty input."""
    backend, pool = suite.instances.main.backend, suite.instances.main.pool
    for size in (0,) + suite.profile.batch_sizes:
        keys = suite.names.new_keys(size)
        for method, pages in (
            (backend.batch_set_v1, suite.pages.spread(size)),
            (backend.batch_get_v1, suite.pages.spread(size, start=2 * STORAGE_BATCH_SIZE)),
        ):
            if method.__name__ == "batch_set_v1":
                for key, page in zip(keys, pages):
                    pool.poke(page, suite.pages.page_for(key, pool))
            raw = suite.calls.call("BE-14", method, keys, pool.slots(pages), None)
            shown = f"{method.__name__}({suite.names.show(keys)}, <{size * pool.page_size} host slots>) -> {suite.names.show(raw)}"
            if not isinstance(raw, list):
                fail("BE-14", f"{method.__name__} returned a {type(raw).__name__}, not a list", shown)
            expect(len(raw) == size, "BE-14", f"{method.__name__} returned {len(raw)} results for {size} keys", shown)
            expect(
                all(is_flag(item) for item in raw),
                "BE-14",
                f"{method.__name__} returned non-bool entries {[type(item).__name__ for item in raw][:4]}",
                shown,
            )
        missing = suite.names.new_keys(size)
        raw = suite.calls.call("BE-14", backend.batch_get_v1, missing, pool.slots(suite.pages.spread(size)), None)
        expect(
            isinstance(raw, list) and len(raw) == size,
            "BE-14",
            f"batch_get_v1 on {size} missing keys returned {suite.names.show(raw)}",
        )


@conformance_check("BE-15", "BE-17")
def v1_pages_round_trip_bit_for_bit(suite: SuiteContext) -> None:
    """A page whose set returned True reads back; a read that returns True put exactly the stored bytes in the addressed slots."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    seen = False
    for size in suite.profile.batch_sizes:
        keys = suite.names.new_keys(size)
        sources = suite.pages.spread(size)
        written = suite.io.write(instance, keys, pages=sources, path="v1", clause_id="BE-17")
        pool.fill(sources, value=-1.0)  # from now on the bytes can only come from storage
        targets = suite.pages.spread(size, start=2 * STORAGE_BATCH_SIZE)
        read = suite.io.read(instance, keys, pages=targets, path="v1", clause_id="BE-15")
        for index, (key, stored, page) in enumerate(zip(keys, written, read)):
            shown = (
                f"batch_set_v1 then batch_get_v1 of {size} keys {suite.names.show(keys)}; "
                f"page {index} ({suite.names.label(key)}) from host page {sources[index]} into host page {targets[index]}"
            )
            expect(
                page is not None or not stored or suite.io.holds(key, pool, page),
                "BE-17",
                f"batch_set_v1 returned True for {suite.names.label(key)} but batch_get_v1 cannot read it back",
                shown,
            )
            if page is not None:
                seen = True
                expected = suite.pages.page_for(key, pool)
                expect(
                    suite.io.holds(key, pool, page),
                    "BE-15",
                    f"batch_get_v1 returned True for {suite.names.label(key)} but its slots hold "
                    f"{describe_page_difference(expected, page)}",
                    shown,
                )
    suite.io.require_seen(seen, "that pages round trip bit for bit")


@conformance_check("BE-16")
def v1_reads_touch_only_addressed_slots(suite: SuiteContext) -> None:
    """A read writes nothing outside the addressed host slots, for hits and misses alike."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    for size in suite.profile.batch_sizes:
        keys = suite.names.new_keys(size)
        present = [index % 3 != 1 for index in range(size)]  # every third page is a miss
        stored = [key for key, here in zip(keys, present) if here]
        suite.io.store(instance, stored, pages=suite.pages.spread(len(stored)), path="v1", clause_id="BE-17")
        addressed = suite.pages.spread(size, start=1, stride=2)  # odd pages; the even pages around them are guards
        guards = list(range(0, 2 * size + 1, 2))
        pool.fill(guards, value=GUARD_VALUE)
        guard_page = pool.peek(guards[0])
        suite.io.read(instance, keys, pages=addressed, path="v1", clause_id="BE-16")
        for guard in guards:
            page = pool.peek(guard)
            if not pages_equal(guard_page, page):
                neighbours = [index for index, page_number in enumerate(addressed) if abs(page_number - guard) == 1]
                which = ", ".join(
                    f"{suite.names.label(keys[index])} ({'hit' if present[index] else 'miss'})" for index in neighbours
                )
                fail(
                    "BE-16",
                    f"batch_get_v1 wrote into guard page {guard}, which it was not given "
                    f"({describe_page_difference(guard_page, page)})",
                    f"batch_get_v1 of {size} keys {suite.names.show(keys)} (every third missing) into odd host pages; "
                    f"guard page {guard} lies next to {which}",
                )


@conformance_check("BE-15", "BE-16")
def v1_hits_land_in_their_own_scattered_slots(suite: SuiteContext) -> None:
    """A read puts each hit of its leading run in its own slots, for pages scattered over the host pool; the pages
    after its first miss, which SGLang never reads, are judged only for what they write outside the given slots."""
    instance, pool = suite.instances.main, suite.instances.main.pool
    suite.io.require_round_trip(instance)  # plain reads work: what fails below is the scatter
    # every fourth page missing: from the fourth on (a leading run of hits, then hits SGLang never reads), or from
    # the first (no hit SGLang reads; what the read writes still stays in the slots it was given)
    for size, missing in itertools.product(suite.profile.batch_sizes, (3, 0)):
        if size < 2:
            continue
        keys = suite.names.new_keys(size)
        present = [index % 4 != missing for index in range(size)]
        stored = [key for key, here in zip(keys, present) if here]
        suite.io.store(instance, stored, pages=suite.pages.spread(len(stored)), path="v1", clause_id="BE-17")
        # non-consecutive pages, one or two guard pages apart, in a random order: host pages handed out by an
        # allocator that has been running a while are scattered, never one contiguous run
        addressed, cursor = [], 2 * STORAGE_BATCH_SIZE
        for _ in range(size):
            cursor += 1 + suite.pages.rng.randrange(2)
            addressed.append(cursor)
        suite.pages.rng.shuffle(addressed)
        region = list(range(2 * STORAGE_BATCH_SIZE, cursor + 2))
        pool.fill(region, value=GUARD_VALUE)
        guard = pool.peek(region[0])
        read = suite.io.read(instance, keys, pages=addressed, path="v1", clause_id="BE-15")
        pattern = "".join("S" if here else "-" for here in present)
        shown = (
            f"batch_get_v1 of {size} keys {suite.names.show(keys)} (stored pattern '{pattern}', S stored) into "
            f"scattered host pages {addressed[:6]}{' ...' if size > 6 else ''}"
        )
        for index, (key, here, page) in enumerate(zip(keys, present, read)):
            if page is not None:
                expected = suite.pages.page_for(key, pool)
                expect(
                    here,
                    "BE-15",
                    f"batch_get_v1 returned True for {suite.names.label(key)}, which was never written",
                    shown,
                )
                expect(
                    suite.io.holds(key, pool, page),
                    "BE-15",
                    f"batch_get_v1 returned True for {suite.names.label(key)} (position {index}) but host page "
                    f"{addressed[index]} holds {describe_page_difference(expected, page)}",
                    shown,
                )
        untouched = sorted(set(region) - set(addressed))
        for page_number in untouched:
            landed = pool.peek(page_number)
            expect(
                pages_equal(guard, landed),
                "BE-16",
                f"batch_get_v1 wrote into host page {page_number}, which "
                f"lies between the pages it was given ({describe_page_difference(guard, landed)})",
                shown,
            )
