"""Every oracle can fail: each planted-bug controller of the catalog is caught by every oracle listed for it.

The catalog is ``tests/planted_controllers.py``. A ``checks`` oracle runs one
of this file's scenarios (one controller class through one situation, with
the checks of ``controller_checks``); a ``trace`` oracle runs an engine
scenario through the trace checker; an ``engine`` oracle through the engine
suite's ``check_reference_controller``. For each, the reference controller
passes and the planted one fails with the entry's clause named.
"""

from __future__ import annotations

import re

import pytest

from hicache_contracts import PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.verdicts import FAIL
from hicache_reference import CacheController, SidecarPool, ThreadRankGroup
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain
from hicache_spec.clauses import CLAUSES
from hicache_reference.engine_check import check_reference_controller, run_scenario
from hicache_reference.settings import ControllerSettings
from tests.planted_controllers import CATALOG, by_clause
from tests.reference.controller_checks import (
    check_backup,
    check_backup_order,
    check_confirmed,
    check_derived_with_kv,
    check_frees,
    check_hit_query,
    check_loaded_bytes,
    check_prefetch_acks,
    check_prefixes,
    check_ranks_in_step,
    check_reads_stop,
    check_replicated_writes,
    check_revoked_without_io,
    check_sidecar_all_or_nothing,
    check_sidecar_windows,
    check_slices,
)
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    CountingHostPool,
    FakeClock,
    FaultingRecorder,
    config,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    run_on_ranks,
    store_pages,
    wait_all,
    on_call,
    raising,
    returning,
    short_by,
)
from tests.reference.test_controller_agreement import answer, run_two_ranks
from tests.reference.test_controller_hybrid import (
    LONG_STORED,
    check_a_failed_part_fails_the_read,
    check_sidecar_read_in_groups,
    checked_by_the_trace_checker,
    prefetch_long_prefix,
    store_long_prefix,
)
from tests.reference.test_controller_ranks import CountingGroup

PAGES = 300
KEYS = keys_for(PAGES)
ANCHOR = compute_key_chain(tuple(range(70_000, 70_004)), PAGE_SIZE)
WINDOW = 4


def all_checks(*checks):
    """Run every check; raise one AssertionError naming every clause broken (a bug may break several)."""
    failures = []
    for check in checks:
        try:
            check()
        except AssertionError as error:
            failures.append(str(error))
    if failures:
        raise AssertionError("; ".join(failures))


def finish(operation, timeout=5.0):
    operation.wait(timeout)  # bounded: a planted controller may never finish


# ---------------------------------------------------------------- scenarios
def round_trip(cls, prefix=ANCHOR, stored=PAGES):
    source = make_pool()
    fill_random(source)
    backend = memory_backend()
    source_slots = store_pages(backend, source, KEYS[:stored])
    recorder = FaultingRecorder(memory_backend(store=backend.store))
    pool = make_pool()
    with cls(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, pass_prefix_keys=prefix is not None)
    ) as controller:
        operation = controller.prefetch(keys=KEYS, prefix_keys=prefix)
        finish(operation)
    all_checks(
        lambda: check_prefixes(recorder.calls, KEYS, prefix),
        lambda: check_slices(recorder.calls, KEYS, STORAGE_BATCH_SIZE),
        lambda: check_hit_query(recorder.calls, KEYS, STORAGE_BATCH_SIZE),
        lambda: check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE),
        lambda: check_loaded_bytes(source, source_slots, pool, operation.loaded_host_indices, stored),
        lambda: check_frees(pool, operation.loaded_host_indices),
    )


def faulty_read(cls, fault, loaded_pages):
    backend = memory_backend()
    store_pages(backend, make_pool(), KEYS)
    recorder = FaultingRecorder(memory_backend(store=backend.store), {"batch_get_v1": fault})
    pool = make_pool()
    with cls(recorder, pool, settings=ControllerSettings(prefetch_threshold=0)) as controller:
        operation = controller.prefetch(keys=KEYS)
        finish(operation)
    all_checks(
        lambda: check_confirmed(recorder.calls, operation, PAGE_SIZE),
        lambda: check_reads_stop(recorder.calls),
        lambda: check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=loaded_pages),
        lambda: check_frees(pool, operation.loaded_host_indices),
    )


def revoke(cls):
    """Rank 0 hits 300 pages, rank 1 only 100: the agreed 200 tokens are below the threshold of 256."""
    operations, recorders, _, pools = two_ranks(cls, stored=(PAGES, 100), threshold=256, with_pools=True, timeout=1.0)
    checks = []
    for operation, recorder, pool in zip(operations, recorders, pools):
        checks.append(lambda o=operation, r=recorder: check_revoked_without_io(r.calls, o, 256, PAGE_SIZE))
        checks.append(lambda o=operation, p=pool: check_frees(p, o.loaded_host_indices))
    all_checks(*checks)


def short_span(cls):
    """A span of 3 pages (6 tokens) under a threshold of 8 tokens: declined before any query (CTL-3)."""
    recorder = FaultingRecorder(memory_backend())
    with cls(recorder, make_pool(), settings=ControllerSettings(prefetch_threshold=4 * PAGE_SIZE)) as controller:
        operation = controller.prefetch(keys=keys_for(3))
        wait_all(operation)
    queried = recorder.calls_of("batch_exists", "batch_exists_v2")
    assert not queried, f"[CTL-3] a span below the threshold was queried ({len(queried)} call(s))"
    assert operation.revoked and operation.final_ack.tokens == 0, "[CTL-3] a declined span was not revoked"


def timeout_policy(cls):
    clock = FakeClock()
    backend = memory_backend()
    store_pages(backend, make_pool(), KEYS)
    recorder = FaultingRecorder(
        memory_backend(store=backend.store), {"batch_get_v1": lambda call, run: (clock.advance(2.1), run())[1]}
    )
    with cls(recorder, make_pool(), clock=clock, settings=ControllerSettings(prefetch_threshold=0)) as controller:
        operation = controller.prefetch(keys=KEYS, policy="timeout")
        finish(operation)
    if len(recorder.calls_of("batch_get_v1")) != 1:
        raise AssertionError("[CTL-9] the timeout policy read on past its timeout")


def faulty_backup(cls):
    pool = make_pool()
    recorder = FaultingRecorder(memory_backend(), {"batch_set_v1": on_call(1, short_by(1))})
    with cls(recorder, pool) as controller:
        backup = controller.backup(KEYS, pool.alloc(PAGES))
        finish(backup)
    check_backup(recorder.calls, backup, PAGE_SIZE, STORAGE_BATCH_SIZE)


class HybridPools:
    def __init__(self) -> None:
        self.kv = make_pool()
        self.indexer = CountingHostPool(600, PAGE_SIZE, 1, 1, 2, kind="mla", pin_memory=False)
        self.swa = CountingHostPool(32, PAGE_SIZE, 1, 1, 4, pin_memory=False)
        self.sidecars = [
            SidecarPool(PoolName.INDEXER, self.indexer, kv_derived=True),
            SidecarPool(PoolName.SWA, self.swa, hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=WINDOW),
        ]


def hybrid_backup(cls, stored=200):
    pools = HybridPools()
    recorder = FaultingRecorder(memory_backend())
    swa = PoolTransfer(
        name=PoolName.SWA,
        keys=KEYS[stored - WINDOW : stored],
        host_indices=pools.swa.alloc(WINDOW),
        hit_policy=PoolHitPolicy.TRAILING_PAGES,
    )
    with cls(recorder, pools.kv, sidecar_pools=pools.sidecars) as controller:
        backup = controller.backup(KEYS[:stored], pools.kv.alloc(stored), sidecar_transfers=[swa])
        finish(backup)
    check_backup_order(recorder.calls)
    return recorder.inner.store


def hybrid_prefetch(cls, faults=None):
    store = hybrid_backup(CacheController)
    pools = HybridPools()
    recorder = FaultingRecorder(memory_backend(store=store), faults)
    with cls(
        recorder, pools.kv, sidecar_pools=pools.sidecars, settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=KEYS)
        finish(operation)
    all_checks(
        lambda: check_derived_with_kv(recorder.calls),
        lambda: check_sidecar_windows(recorder.calls, operation, {"swa": WINDOW}),
        lambda: check_sidecar_all_or_nothing(recorder.calls, operation),
        lambda: check_frees(pools.swa, torch_cat(operation.pool_host_indices.values())),
    )


def torch_cat(tensors):
    import torch

    tensors = list(tensors)
    return torch.cat(tensors) if tensors else torch.empty(0, dtype=torch.int64)


def two_ranks(
    cls,
    stored=(PAGES, PAGES),
    faults=(None, None),
    mla=False,
    backup=False,
    timeout=20.0,
    threshold=0,
    with_pools=False,
):
    groups = ThreadRankGroup.create(2, timeout=timeout)
    store = memory_backend().store
    ranks = []
    for rank in range(2):
        pool = make_pool()
        backend = memory_backend(store=store, tp_rank=rank, tp_size=2, is_mla_model=mla)
        if stored[rank]:
            store_pages(backend, make_pool(), KEYS[: stored[rank]])
        recorder = FaultingRecorder(backend, faults[rank])
        group = CountingGroup(groups[rank])
        controller = cls(
            recorder,
            pool,
            storage_config=config(tp_rank=rank, tp_size=2, is_mla_model=mla),
            rank_group=group,
            settings=ControllerSettings(prefetch_threshold=threshold, register_host_pools=not stored[rank]),
        )
        ranks.append((controller, recorder, group, pool))

    def submit(rank):
        controller, _, _, pool = ranks[rank]
        return controller.backup(KEYS, pool.alloc(PAGES)) if backup else controller.prefetch(keys=KEYS)

    controllers = [controller for controller, *_ in ranks]
    results = run_on_ranks(
        controllers, groups, submit, lambda operation: finish(operation, timeout + 5), timeout + 10, close_timeout=5
    )
    recorders = [recorder for _, recorder, _, _ in ranks]
    counts = [dict(group.counts) for _, _, group, _ in ranks]
    if with_pools:
        return results, recorders, counts, [pool for *_, pool in ranks]
    return results, recorders, counts


def ranks_with_a_failure(cls):
    operations, _, counts = two_ranks(cls, faults=(None, {"batch_get_v1": on_call(1, raising())}))
    check_ranks_in_step(operations, counts)


def ranks_with_a_miss(cls):
    operations, _, counts = two_ranks(cls, stored=(PAGES, 0), timeout=1.0)
    check_ranks_in_step(operations, counts)


def replicated_backup(cls):
    backups, recorders, _ = two_ranks(cls, stored=(0, 0), mla=True, backup=True)
    check_replicated_writes(recorders, backups)


def grouped_sidecar_read(cls):
    """A long hybrid prefix whose sidecar windows are longer than a slice: one read call per group (CTL-2, HYB-2, PFX-9)."""
    store, _, _ = store_long_prefix()
    pools, recorder, operation = prefetch_long_prefix(store, cls)
    check_sidecar_read_in_groups(recorder, operation, pools.windows(LONG_STORED))


def grouped_sidecar_read_trace(cls):
    store, _, _ = store_long_prefix()
    _, recorder, operation = prefetch_long_prefix(store, cls)
    return checked_by_the_trace_checker(recorder, operation)


def min_of_maxima(cls):
    """Two ranks whose restorable lengths differ: the agreed hit is one every rank restores (RANK-6)."""
    answers = (answer(6, (2, 4, 6), swa=6), answer(5, (2, 4, 5), swa=5))
    operations, _ = run_two_ranks(answers, cls)
    agreed = {operation.hit_pages for operation in operations}
    assert agreed == {4}, f"[RANK-6] agreed on {sorted(agreed)}, not the largest length both ranks restore (4)"


# ---------------------------------------------------------------- the catalog's oracles
SCENARIOS = {
    "round_trip": round_trip,
    "round_trip_empty_prefix": lambda cls: round_trip(cls, prefix=()),
    "round_trip_no_prefix": lambda cls: round_trip(cls, prefix=None),
    "round_trip_stored_200": lambda cls: round_trip(cls, stored=200),
    "short_first_read": lambda cls: faulty_read(cls, on_call(0, short_by(3)), (125,)),
    "raise_on_second_read": lambda cls: faulty_read(cls, on_call(1, raising()), (128, 0)),
    "doubled_result": lambda cls: faulty_read(cls, on_call(0, lambda call, run: run() + run()), (0,)),
    "none_on_second_read": lambda cls: faulty_read(cls, on_call(1, returning(None)), (128, 0)),
    "revoke": revoke,
    "short_span": short_span,
    "timeout_policy": timeout_policy,
    "faulty_backup": faulty_backup,
    "hybrid_prefetch": lambda cls: hybrid_prefetch(cls),
    "hybrid_prefetch_missing_pool": lambda cls: hybrid_prefetch(cls, {"batch_get_v2": on_call(2, returning({}))}),
    "hybrid_backup": hybrid_backup,
    "replicated_backup": replicated_backup,
    "ranks_with_a_failure": ranks_with_a_failure,
    "ranks_with_a_miss": ranks_with_a_miss,
    "grouped_sidecar_read": grouped_sidecar_read,
    "failed_sidecar_part": lambda cls: check_a_failed_part_fails_the_read(cls, failing_call=0, result={}),
    "min_of_maxima": min_of_maxima,
}
"""The scenarios a ``checks`` oracle names: each runs a controller class and raises AssertionError naming a clause."""

TRACES = {"grouped_sidecar_read": grouped_sidecar_read_trace}
"""The trace scenarios a ``trace`` oracle names: each runs a controller class and returns the trace checker's report."""


def run_oracle(oracle, controller_class):
    """Run one oracle; return the clauses it reports broken (a ``checks`` scenario reports through its error)."""
    if oracle.kind == "checks":
        try:
            SCENARIOS[oracle.scenario](controller_class)
        except AssertionError as error:
            return set(re.findall(r"\[([A-Z]+-[0-9]+)\]", str(error))) or {str(error)}
        return set()
    if oracle.kind == "trace" and isinstance(oracle.scenario, str):
        return set(TRACES[oracle.scenario](controller_class).violated)
    if oracle.kind == "trace":
        return set(run_scenario(oracle.scenario, controller_class).check().violated)
    assert oracle.kind == "engine", oracle.kind
    results = check_reference_controller(controller_class, scenarios=[oracle.scenario])
    return {verdict.clause_id for verdict in results if verdict.status == FAIL}


ORACLE_CASES = [
    pytest.param(
        entry,
        oracle,
        marks=pytest.mark.clause(*{entry.clause, oracle.clause or entry.clause}),
        id=f"{entry.name}-{oracle.kind}-{index}",
    )
    for entry in CATALOG
    for index, oracle in enumerate(entry.oracles)
]


@pytest.mark.parametrize("entry,oracle", ORACLE_CASES)
def test_each_oracle_catches_its_planted_bug(entry, oracle):
    assert run_oracle(oracle, CacheController) == set()  # the reference passes the same oracle
    assert (oracle.clause or entry.clause) in run_oracle(oracle, entry.controller)


def test_the_catalog_is_complete():
    names = [entry.name for entry in CATALOG]
    assert len(names) == len(set(names)), "a bug is planted twice"
    assert all(entry.oracles for entry in CATALOG), "an entry no oracle catches"
    used = {oracle.scenario for entry in CATALOG for oracle in entry.oracles if oracle.kind == "checks"}
    assert used == set(SCENARIOS), "a scenario no entry uses"
    known = {clause.id for clause in CLAUSES}
    named = {entry.clause for entry in CATALOG} | {o.clause for e in CATALOG for o in e.oracles if o.clause}
    assert named <= known, f"unknown clause IDs: {sorted(named - known)}"
    clause_ids = {entry.clause for entry in CATALOG}
    assert sorted(entry.name for c in clause_ids for entry in by_clause(c)) == sorted(names)  # each under its clause
