"""The reference backends' own checks, beyond the vendor suite, and the test class that runs both.

``ReferenceBackendTests`` runs the vendor suite over a harness's backend
class, then the ``check_*`` functions here: what only the reference
promises, or pools and faults the suite cannot make. Each ``check_*`` raises
AssertionError when the backend breaks its clause; the test files show each
failing on a planted bug.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest
import torch

from hicache_contracts import PoolName, PoolTransfer
from hicache_contracts.conformance import backend_clauses
from tests.reference.backend_checks import (
    Harness,
    PAGE_SIZE,
    assert_passes_vendor_suite,
    before_page,
    clause_check,
    config,
    expect_violation,
    fill_pages,
    make_pool,
    page_bytes,
    page_key,
    page_keys,
    sentinel_fill,
    slots_of,
    write_pages,
)


# ================================================================== reference-specific checks
# What the vendor suite does not look at: the reference's stricter promises (an object of any wrong size is a
# miss, bad keys are refused, KV is not written without its derived sidecar), pools the suite never hands
# over (other kinds and layouts, pools that are not HostPagePools), counters, and faults of the real store.
@clause_check
def check_storage_error_is_a_failure(harness: Harness, break_storage: Callable[[Any], None]) -> None:
    """BE-5: with storage failing, every call returns False, 0 or None instead of raising."""
    backend = harness.make()
    pool = backend.mem_pool_host
    keys = page_keys(2)
    assert write_pages(backend, keys, [0, 1]) == [True, True]
    break_storage(backend)
    slots = slots_of(pool, [2, 3])
    assert backend.batch_set_v1(page_keys(2, start=10), slots) == [False, False]
    assert backend.batch_get_v1(keys, slots) == [False, False]
    assert backend.batch_exists(keys) == 0
    assert backend.exists(keys[0]) is False
    assert backend.get(keys[0]) is None
    assert backend.set(keys[0], pool.get_data_page(0)) is False
    assert backend.batch_exists_v2(keys).kv_hit_pages == 0
    assert backend.batch_get_v2([PoolTransfer(name="kv", keys=keys, host_indices=slots)])["kv"] == [False, False]  # type: ignore[arg-type]
    backend.clear()


@clause_check
def check_legacy_shapes(harness: Harness) -> None:
    """BE-9: get gives a tensor or None, batch_get one per key, set and batch_set a bool; bytes round trip."""
    backend = harness.make()
    pool = backend.mem_pool_host
    fill_pages(pool, [0, 1], seed=4)
    keys = page_keys(3)
    assert backend.set(keys[0], pool.get_data_page(0)) is True
    assert backend.batch_set(keys[1:2], [pool.get_data_page(PAGE_SIZE)]) is True
    assert backend.set(keys[2], None) is False, "no value: nothing to store"
    got = backend.get(keys[0])
    assert isinstance(got, torch.Tensor) and torch.equal(got, pool.get_data_page(0))
    batch = backend.batch_get(keys)
    assert len(batch) == 3 and batch[2] is None and torch.equal(batch[1], pool.get_data_page(PAGE_SIZE))
    target = torch.empty(pool.page_element_count, dtype=pool.dtype)
    assert backend.get(keys[0], target) is target and torch.equal(target, pool.get_data_page(0))
    short = torch.zeros(3, dtype=pool.dtype)
    assert backend.set(page_key(77), short) is False, "a value shorter than a page must be refused"
    assert backend.exists(page_key(77)) is False


@clause_check
def check_short_objects_are_misses(harness: Harness) -> None:
    """BE-13: an empty, short or long stored object is a miss everywhere, and a read of it writes nothing."""
    backend = harness.make()
    pool = backend.mem_pool_host
    size = pool.page_bytes
    keys = page_keys(4, start=40)
    harness.plant(backend, keys[0], b"")
    harness.plant(backend, keys[1], b"\x01" * (size // 2))
    harness.plant(backend, keys[2], b"\x01" * (size + 1))
    harness.plant(backend, keys[3], b"\x01" * size)  # the one whole page
    for key in keys[:3]:
        assert backend.exists(key) is False, "a page of the wrong size must not exist"
        assert backend.batch_exists([key]) == 0
        assert backend.get(key) is None
        assert backend.batch_exists_v2([key]).kv_hit_pages == 0
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    assert backend.batch_get_v1(keys[:3], slots_of(pool, [0, 1, 2])) == [False] * 3
    assert torch.equal(pool.kv_buffer, before), "a failed read must not touch the host slots"
    assert backend.batch_get_v1(keys[3:], slots_of(pool, [5])) == [True]


@clause_check
def check_round_trip_between_pools(harness: Harness, kind: str, layout: str) -> None:
    """BE-15, BE-17: bytes written from one pool's slots land exactly in another pool's slots."""
    writer = harness.make(pool=make_pool(kind=kind, layout=layout))
    reader = harness.make(pool=make_pool(kind=kind, layout=layout))
    keys = page_keys(3, start=60)
    assert write_pages(writer, keys, [2, 7, 11], seed=6) == [True] * 3
    expected = [page_bytes(writer.mem_pool_host, page) for page in (2, 7, 11)]
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, [9, 0, 4])) == [True] * 3
    assert [page_bytes(reader.mem_pool_host, page) for page in (9, 0, 4)] == expected
    transfer = PoolTransfer(name="kv", keys=keys, host_indices=slots_of(reader.mem_pool_host, [1, 3, 5]))  # type: ignore[arg-type]
    assert reader.batch_get_v2([transfer])["kv"] == [True] * 3
    assert [page_bytes(reader.mem_pool_host, page) for page in (1, 3, 5)] == expected


@clause_check
def check_reads_stay_in_their_slots(harness: Harness) -> None:
    """BE-16: a read writes only the addressed slots of pages that arrived; guards around them stay."""
    writer = harness.make()
    keys = page_keys(4, start=70)
    assert write_pages(writer, [keys[0], keys[2]], [0, 1], seed=7) == [True, True]
    harness.plant(writer, keys[3], b"\x02" * (writer.mem_pool_host.page_bytes - 2))  # short: arrives incomplete
    reader = harness.make()
    pool = reader.mem_pool_host
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    result = reader.batch_get_v1(keys, slots_of(pool, [3, 5, 7, 9]))
    assert result == [True, False, True, False]
    changed = {
        page for page in range(pool.page_count) if page_bytes(pool, page) != bytes(before_page(before, pool, page))
    }
    assert changed == {3, 7}, f"only the slots of pages that arrived may change, changed {sorted(changed)}"
    # Bad host_indices are a caller error: ContractViolation, and nothing written.
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    expect_violation(lambda: reader.batch_get_v1(keys[:1], torch.arange(1, 1 + PAGE_SIZE)))
    expect_violation(lambda: reader.batch_get_v1(keys[:2], slots_of(pool, [0])))
    expect_violation(lambda: reader.batch_get_v1(keys[:1], slots_of(pool, [pool.page_count])))
    assert torch.equal(pool.kv_buffer, before)


@clause_check
def check_fold_measures_pools_against_kv(harness: Harness) -> None:
    """BE-21, BE-22: a missing KV-derived sidecar caps kv_hit_pages, but pools are still measured against KV alone."""
    backend = harness.make()
    pool = backend.mem_pool_host
    indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    swa = make_pool(layer_num=1)
    backend.register_mem_host_pool_v2(indexer, PoolName.INDEXER)
    backend.register_mem_host_pool_v2(swa, PoolName.SWA)
    keys = page_keys(3, start=140)
    fill_pages(pool, [0, 1, 2], seed=17)
    first = [
        PoolTransfer(name="kv", keys=keys[:1], host_indices=slots_of(pool, [0])),  # type: ignore[arg-type]
        PoolTransfer(name="indexer", keys=keys[:1], indices_from_pool="kv"),  # type: ignore[arg-type]
    ]
    assert backend.batch_set_v2(first) == {"kv": [True], "indexer": [True]}
    rest = [
        PoolTransfer(name="kv", keys=keys[1:], host_indices=slots_of(pool, [1, 2])),  # type: ignore[arg-type]
        PoolTransfer(name="swa", keys=keys, host_indices=slots_of(swa, [0, 1, 2])),  # type: ignore[arg-type]
    ]
    assert backend.batch_set_v2(rest) == {"kv": [True, True], "swa": [True, True, True]}
    query = [PoolTransfer(name="swa", keys=keys[-1:], hit_policy="trailing_pages")]  # type: ignore[arg-type]
    result = backend.batch_exists_v2(keys, query)
    assert result.extra_pool_hit_pages == {"kv": 3, "swa": 3}, f"swa must be measured against the KV run of 3: {result}"
    assert result.kv_hit_pages == 1, f"the indexer, derived from KV, holds page 0 only: {result}"


@clause_check
def check_derived_sidecars_travel_with_kv(harness: Harness) -> None:
    """BE-22: a KV-derived sidecar is written with its KV page, and a KV page without it is reported missing."""
    backend = harness.make()
    pool = backend.mem_pool_host
    indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    keys = page_keys(3, start=120)
    slots = slots_of(pool, [0, 1, 2])
    fill_pages(pool, [0, 1, 2], seed=11)
    fill_pages(indexer, [0, 1, 2], seed=12)
    kv = PoolTransfer(name="kv", keys=keys, host_indices=slots)  # type: ignore[arg-type]
    derived = PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")  # type: ignore[arg-type]
    # The sidecar pool is not registered yet: its pages fail, so KV must not be written either.
    result = backend.batch_set_v2([kv, derived])
    assert result["indexer"] == [False] * 3
    assert result["kv"] == [False] * 3, "KV written without its derived sidecar"
    assert backend.batch_exists(keys) == 0, "a KV page without its derived sidecar became visible"
    backend.register_mem_host_pool_v2(indexer, PoolName.INDEXER)
    assert backend.batch_set_v2([kv, derived]) == {"kv": [True] * 3, "indexer": [True] * 3}
    reader = harness.make()
    reader_indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    reader.register_mem_host_pool_v2(reader_indexer, PoolName.INDEXER)
    read_slots = slots_of(reader.mem_pool_host, [4, 5, 6])
    got = reader.batch_get_v2(
        [
            PoolTransfer(name="kv", keys=keys, host_indices=read_slots),  # type: ignore[arg-type]
            PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv"),  # type: ignore[arg-type]
        ]
    )
    assert got == {"kv": [True] * 3, "indexer": [True] * 3}
    assert [page_bytes(reader_indexer, page) for page in (4, 5, 6)] == [
        page_bytes(indexer, page) for page in (0, 1, 2)
    ], "sidecar bytes must land in the sidecar pool"
    # The sidecar of page 1 disappears: KV page 1 is reported missing with it.
    harness.remove(backend, keys[1], pool="indexer")
    got = reader.batch_get_v2(
        [
            PoolTransfer(name="kv", keys=keys, host_indices=read_slots),  # type: ignore[arg-type]
            PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv"),  # type: ignore[arg-type]
        ]
    )
    assert got["kv"][1] is False and got["indexer"][1] is False
    exists = reader.batch_exists_v2(keys, [PoolTransfer(name="indexer", keys=keys, indices_from_pool="kv")])  # type: ignore[arg-type]
    assert exists.kv_hit_pages == 1
    # The writer learned that indexer derives from KV: a KV-only v2 read also reports page 1 missing.
    kv_only = backend.batch_get_v2([PoolTransfer(name="kv", keys=keys, host_indices=slots)])  # type: ignore[arg-type]
    assert kv_only["kv"] == [True, False, True]
    assert backend.batch_exists_v2(keys).kv_hit_pages == 1


@clause_check
def check_concurrent_threads(harness: Harness, rounds: int = 20) -> None:
    """BE-23: hit query, IO, backup and get_stats threads together: no exception, no wrong byte."""
    backend = harness.make(config(enable_storage_metrics=True), pool=make_pool(page_count=32))
    pool = backend.mem_pool_host
    stored = page_keys(4, start=200)
    assert write_pages(backend, stored, [0, 1, 2, 3], seed=13) == [True] * 4
    expected = [page_bytes(pool, page) for page in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(5)

    def run(body: Callable[[int], None]) -> Callable[[], None]:
        def target() -> None:
            try:
                start.wait(timeout=10)
                for round_number in range(rounds):
                    body(round_number)
            except BaseException as error:  # reported below, in the main thread
                errors.append(error)

        return target

    def hit_query(round_number: int) -> None:
        assert backend.batch_exists(stored) == 4

    def reader(first_page: int, order: list[int]) -> Callable[[int], None]:
        keys = [stored[index] for index in order]
        wanted = [expected[index] for index in order]

        def body(round_number: int) -> None:
            pages = [first_page + index for index in range(4)]
            assert backend.batch_get_v1(keys, slots_of(pool, pages)) == [True] * 4
            assert [page_bytes(pool, page) for page in pages] == wanted, "a read returned wrong bytes"

        return body

    def backup(round_number: int) -> None:
        keys = page_keys(2, start=1000 + 2 * round_number)
        assert backend.batch_set_v1(keys, slots_of(pool, [0, 1])) == [True, True]

    def stats(round_number: int) -> None:
        assert not isinstance(backend.get_stats(), dict)

    threads = [
        threading.Thread(target=run(body))
        for body in (hit_query, reader(8, [0, 1, 2, 3]), reader(16, [3, 2, 1, 0]), backup, stats)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, f"concurrent calls failed: {errors[0]!r}"


@clause_check
def check_registration(harness: Harness) -> None:
    """BE-24: IO before registration fails softly; an object without the page helpers is refused."""
    backend = harness.make(register=False)
    keys = page_keys(1)
    assert backend.batch_set_v1(keys, torch.arange(PAGE_SIZE)) == [False]
    assert backend.batch_get_v1(keys, torch.arange(PAGE_SIZE)) == [False]
    violation = expect_violation(lambda: backend.register_mem_pool_host(object()))
    assert str(violation) == (
        f"{harness.backend_cls.__name__}.host_pool: must provide get_data_page() (got 'object') [BE-24]"
    )
    backend.register_mem_pool_host(make_pool())
    assert write_pages(backend, keys, [0]) == [True]


@clause_check
def check_bad_keys(harness: Harness) -> None:
    """KEY-2: a non-str or empty key is a caller error, raised before any IO with the field named."""
    backend = harness.make()
    name = harness.backend_cls.__name__
    violation = expect_violation(lambda: backend.batch_exists(["a", 7]))
    assert str(violation) == f"{name}.keys[1]: page key must be a non-empty str (got 7) [KEY-2]"
    violation = expect_violation(lambda: backend.batch_set_v1([""], torch.arange(PAGE_SIZE)))
    assert str(violation) == f"{name}.keys[0]: page key must be a non-empty str (got '') [KEY-2]"
    assert harness.object_count() == 0


# ================================================================== the test class
class ReferenceBackendTests:
    """The vendor suite, then the reference-specific checks, for the backend the ``harness`` fixture builds."""

    not_claimed: tuple[str, ...] = ()
    """Backend levels the backend does not claim: their clauses are skipped by the vendor suite."""

    @pytest.fixture
    def harness(self) -> Harness:
        raise NotImplementedError

    @pytest.mark.clause(*[item.id for item in backend_clauses()])
    def test_passes_the_vendor_suite(self, harness: Harness) -> None:
        """With its backdoor hooks and the fault hook, every clause of a claimed level passes, none skipped."""
        assert_passes_vendor_suite(harness, self.not_claimed)

    @pytest.mark.clause("BE-9")
    def test_legacy_shapes(self, harness: Harness) -> None:
        check_legacy_shapes(harness)

    @pytest.mark.clause("BE-13")
    def test_objects_of_the_wrong_size_are_misses(self, harness: Harness) -> None:
        check_short_objects_are_misses(harness)

    @pytest.mark.clause("BE-15", "BE-17")
    @pytest.mark.parametrize("kind", ["mha", "mla"])
    @pytest.mark.parametrize("layout", ["layer_first", "page_first"])
    def test_round_trip_between_pools(self, harness: Harness, kind: str, layout: str) -> None:
        check_round_trip_between_pools(harness, kind, layout)

    @pytest.mark.clause("BE-16", "BE-15")
    def test_reads_stay_in_their_slots(self, harness: Harness) -> None:
        check_reads_stay_in_their_slots(harness)

    @pytest.mark.clause("BE-15", "BE-16", "BE-24")
    @pytest.mark.parametrize("layout", ["layer_first", "page_first"])
    def test_foreign_host_pool(self, harness: Harness, layout: str) -> None:
        """Any object with the page helpers serves as the host pool (pages copied through set_from_flat_data_page)."""
        foreign = harness.with_foreign_pools()
        check_round_trip_between_pools(foreign, "mha", layout)
        check_reads_stay_in_their_slots(foreign)
        check_short_objects_are_misses(foreign)

    @pytest.mark.clause("BE-21", "BE-22")
    def test_fold_measures_pools_against_kv(self, harness: Harness) -> None:
        check_fold_measures_pools_against_kv(harness)

    @pytest.mark.clause("BE-22")
    def test_derived_sidecars_travel_with_kv(self, harness: Harness) -> None:
        check_derived_sidecars_travel_with_kv(harness)

    @pytest.mark.clause("BE-23")
    def test_concurrent_threads(self, harness: Harness) -> None:
        check_concurrent_threads(harness)

    @pytest.mark.clause("BE-24")
    def test_registration(self, harness: Harness) -> None:
        check_registration(harness)

    @pytest.mark.clause("KEY-2")
    def test_bad_keys(self, harness: Harness) -> None:
        check_bad_keys(harness)
