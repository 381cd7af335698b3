"""What the reference controller sends, acknowledges and frees, where its other tests left a mutant alive.

Each test pins one observable outcome that SGLang's controller (0.5.23,
``srt/managers/cache_controller.py``) also produces: the calls the backend
sees, the acks an operation emits, the host slots left in use. The
mutants they kill are listed in docs/mutation/controller.md.

One module, though long: docs/mutation/controller.md and the controller target of
scripts/mutation.py name it, and each section holds one stage's survivors.
"""

from __future__ import annotations

import dataclasses
import threading
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from hicache_contracts import PoolHitPolicy, PoolName, PoolTransfer
from hicache_reference import CacheController, SidecarPool, ThreadRankGroup
from hicache_reference import workers as workers_module
from hicache_reference.backup_writer import BackupWriter
from hicache_reference.controller_parts import Acks
from hicache_reference.hit_query import HitQuery
from hicache_reference.prefetch_io import PrefetchIO
from hicache_reference.settings import ControllerSettings
from hicache_spec import compute_key_chain
from tests.reference.controller_checks import check_frees, pool_hits
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    CountingHostPool,
    FaultingRecorder,
    config,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    raising,
    returning,
    short_by,
    wait_all,
)

PAGES = 20
WINDOW = 4
KEYS = keys_for(PAGES, offset=90_000)


def swa_pool(pages: int = 32) -> CountingHostPool:
    return CountingHostPool(pages, PAGE_SIZE, 1, 1, 4, kind="mha", pin_memory=False)


def swa_sidecar(pool: CountingHostPool) -> SidecarPool:
    return SidecarPool(PoolName.SWA, pool, hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=WINDOW)


def store_with_swa(backend, pages: int = PAGES) -> None:
    """Back up ``pages`` pages of KEYS with the SWA state of the last WINDOW of them, through a controller."""
    kv, swa = make_pool(), swa_pool()
    fill_random(kv, 1)
    fill_random(swa, 2)
    transfer = PoolTransfer(
        name=PoolName.SWA,
        keys=KEYS[pages - WINDOW : pages],  # type: ignore[arg-type]
        host_indices=swa.alloc(WINDOW),
        hit_policy=PoolHitPolicy.TRAILING_PAGES,
    )
    with CacheController(backend, kv, sidecar_pools=[swa_sidecar(swa)]) as controller:
        backup = controller.backup(KEYS[:pages], kv.alloc(pages), sidecar_transfers=[transfer])
        wait_all(backup)
    assert backup.completed_tokens == pages * PAGE_SIZE, backup.error


# ================================================================== hit query
@pytest.mark.clause("CTL-11", "BE-21", "CTL-3")
def test_a_raising_v2_hit_query_is_a_miss():
    """SGLang counts a hit query that raised as 0 pages: nothing is read, nothing allocated."""
    store = memory_backend()
    store_with_swa(store)
    kv, swa = make_pool(), swa_pool()
    recorder = FaultingRecorder(memory_backend(store=store.store), {"batch_exists_v2": raising()})
    with CacheController(
        recorder, kv, sidecar_pools=[swa_sidecar(swa)], settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=KEYS)
        wait_all(operation)
    assert operation.local_hit_pages == operation.hit_pages == 0 and operation.revoked  # 0 pages, not fewer
    assert operation.final_ack.tokens == 0
    assert recorder.calls_of("batch_get_v1", "batch_get_v2") == []
    assert kv.used_pages() == 0 and swa.used_pages() == 0


# ================================================================== sidecars across ranks
class HybridRank:
    """One TP rank (of two) with a KV pool and an SWA pool, its own namespace of a shared store."""

    def __init__(self, rank: int, group, store, faults=None) -> None:
        store_with_swa(memory_backend(store=store, tp_rank=rank, tp_size=2))
        self.kv, self.swa = make_pool(), swa_pool()
        self.backend = FaultingRecorder(memory_backend(store=store, tp_rank=rank, tp_size=2), faults)
        self.controller = CacheController(
            self.backend,
            self.kv,
            storage_config=config(tp_rank=rank, tp_size=2),
            sidecar_pools=[swa_sidecar(self.swa)],
            rank_group=group,
            settings=ControllerSettings(prefetch_threshold=0),
        )


@pytest.mark.clause("HYB-2", "HYB-4", "CTL-12", "RANK-3")
def test_a_sidecar_read_failed_on_another_rank_frees_this_ranks_slots(threads_before):
    """The per-pool hit is agreed with MIN: a rank whose own read succeeded acks 0 and frees the pool's slots."""
    groups = ThreadRankGroup.create(2, timeout=20)
    store = memory_backend().store
    ranks = [
        HybridRank(0, groups[0], store),
        HybridRank(1, groups[1], store, {"batch_get_v2": returning({})}),
    ]
    operations = [rank.controller.prefetch(keys=KEYS) for rank in ranks]
    wait_all(*operations)
    for rank in ranks:
        assert rank.controller.close()
    for rank, operation in zip(ranks, operations):
        assert operation.loaded_tokens == PAGES * PAGE_SIZE
        assert pool_hits(operation) == {"swa": 0}
        assert operation.pool_host_indices == {}
        assert operation.final_ack.error == "sidecar read failed"
        assert rank.swa.used_pages() == 0 and not rank.swa.double_frees
        check_frees(rank.kv, operation.loaded_host_indices)
    assert ranks[0].backend.calls_of("batch_get_v2")[0].result.keys() == {"swa"}  # rank 0's own read succeeded


# ================================================================== why an operation was revoked
def stored_backend(pages: int, chain: tuple = KEYS):
    """A memory backend holding the first ``pages`` pages of ``chain``, and the pool that wrote them."""
    pool = make_pool()
    backend = memory_backend()
    backend.register_mem_pool_host(pool)
    if pages:
        slots = pool.alloc(pages)
        assert all(backend.batch_set_v1(list(chain[:pages]), slots))
        pool.free(slots)
    return backend, pool


@pytest.mark.clause("CTL-3", "CTL-6")
def test_the_final_ack_says_why_a_short_span_was_declined():
    backend, pool = stored_backend(3)
    with CacheController(
        backend, pool, settings=ControllerSettings(prefetch_threshold=8, register_host_pools=False)
    ) as controller:
        operation = controller.prefetch(keys=KEYS[:3])
        wait_all(operation)
    assert operation.final_ack.error == (
        "revoked: span of 6 tokens is below the threshold of 8; declined before any query"
    )


@pytest.mark.clause("CTL-3", "CTL-6")
@pytest.mark.parametrize(
    "stored,error", [(3, "revoked: agreed hit of 6 tokens is below the threshold of 8"), (0, "revoked: miss")]
)
def test_the_final_ack_says_why_a_short_hit_was_revoked(stored, error):
    backend, pool = stored_backend(stored)
    with CacheController(
        backend, pool, settings=ControllerSettings(prefetch_threshold=8, register_host_pools=False)
    ) as controller:
        operation = controller.prefetch(keys=KEYS)
        wait_all(operation)
    assert operation.hit_pages == stored and operation.final_ack.error == error
    assert pool.used_pages() == 0


# ================================================================== bad settings and input: a clear error, nothing done
def bad_setting(field: str, host_pool=None, sidecar_pools=(), **settings):
    """Build a controller (not started) with ``settings``; return the error's text, asserting it names ``field``.

    ``field`` is qualified: ``ControllerSettings.batch_size``, ``CacheController.sidecar_pools[0]``.
    """
    with pytest.raises(ValueError) as raised:
        CacheController(
            memory_backend(),
            host_pool or make_pool(),
            start=False,
            sidecar_pools=sidecar_pools,
            settings=ControllerSettings(**settings),
        )
    assert str(raised.value).startswith(f"{field}: "), str(raised.value)
    return str(raised.value)


CLAUSE_OF_SETTING = {"batch_size": "CTL-2", "prefetch_threshold": "CTL-3", "pass_prefix_keys": "PFX-1"}


@pytest.mark.clause("CTL-2", "CTL-3", "PFX-1")
@pytest.mark.parametrize(
    "field,value,accepted",
    [
        ("batch_size", 0, False),
        ("batch_size", 1, True),
        ("batch_size", True, False),
        ("batch_size", 2.0, False),
        ("prefetch_threshold", -1, False),
        ("prefetch_threshold", 0, True),
        ("prefetch_threshold", False, False),
        ("prefetch_threshold", 8.0, False),
        ("pass_prefix_keys", 1, False),
        ("pass_prefix_keys", True, True),
    ],
)
def test_controller_settings_are_checked(field, value, accepted):
    if accepted:
        controller = CacheController(
            memory_backend(), make_pool(), start=False, settings=ControllerSettings(**{field: value})
        )
        assert getattr(controller, field) == value and not controller.running
    else:
        text = bad_setting(f"ControllerSettings.{field}", **{field: value})
        assert text.endswith(f"(got {value!r}) [{CLAUSE_OF_SETTING[field]}]")


@pytest.mark.clause("HYB-1", "HYB-3", "HYB-7")
def test_sidecar_pool_fields_are_checked_and_frozen():
    pool = swa_pool()
    default = SidecarPool("swa", pool)
    assert (default.name, default.hit_policy, default.window_pages, default.kv_derived) == (
        PoolName.SWA,
        PoolHitPolicy.ALL_PAGES,
        1,
        False,
    )
    assert not default.is_trailing and swa_sidecar(pool).is_trailing
    with pytest.raises(AttributeError):
        default.window_pages = 2
    assert SidecarPool(PoolName.SWA, pool, hit_policy="trailing_pages", window_pages=1).window_pages == 1
    for kwargs, message in [
        ({"name": "nope"}, "SidecarPool.name: must be a PoolName value (got 'nope')"),
        ({"name": "kv"}, "SidecarPool.name: must not be kv"),
        ({"hit_policy": "some"}, "SidecarPool.hit_policy: must be a PoolHitPolicy value (got 'some')"),
        ({"window_pages": 0}, "SidecarPool.window_pages: must be an int >= 1 (got 0)"),
        ({"window_pages": True}, "SidecarPool.window_pages: must be an int >= 1 (got True)"),
        ({"window_pages": 2.0}, "SidecarPool.window_pages: must be an int >= 1 (got 2.0)"),
        (
            {"kv_derived": True, "hit_policy": "trailing_pages"},
            "SidecarPool.hit_policy: a KV-derived pool has every KV page (got 'trailing_pages')",
        ),
    ]:
        with pytest.raises(ValueError) as raised:
            SidecarPool(**{"name": "swa", "host_pool": pool, **kwargs})
        assert str(raised.value).startswith(message), str(raised.value)
    assert SidecarPool("indexer", make_pool(), kv_derived=True).kv_derived


@pytest.mark.clause("HYB-1", "BE-19")
def test_the_controllers_sidecar_pools_are_checked():
    kv = make_pool(pages=8)
    same_size = CountingHostPool(8, PAGE_SIZE, 1, 1, 2, kind="mla", pin_memory=False)
    controller = CacheController(
        memory_backend(), kv, sidecar_pools=[SidecarPool("indexer", same_size, kv_derived=True)], start=False
    )
    assert [pool.name for pool in controller.derived_pools] == [PoolName.INDEXER] and controller.separate_pools == ()
    other_page = CountingHostPool(8, PAGE_SIZE + 1, 1, 1, 2, kind="mla", pin_memory=False)
    bad_setting("CacheController.sidecar_pools[0]", host_pool=kv, sidecar_pools=["swa"])
    for pools, field in [
        ([SidecarPool("swa", swa_pool()), SidecarPool("swa", swa_pool())], "sidecar_pools[1].name"),
        ([SidecarPool("swa", swa_pool()), SidecarPool("mamba", other_page)], "sidecar_pools[1].host_pool.page_size"),
    ]:
        with pytest.raises(ValueError) as raised:
            CacheController(memory_backend(), kv, sidecar_pools=pools, start=False)
        assert str(raised.value).startswith(f"CacheController.{field}: "), str(raised.value)


@pytest.mark.clause("KEY-1", "KEY-3", "CTL-6")
def test_prefetch_input_is_checked_and_nothing_is_sent():
    recorder = FaultingRecorder(memory_backend())
    with CacheController(recorder, make_pool(), settings=ControllerSettings(prefetch_threshold=0)) as controller:
        for args, kwargs, field in [
            ((), {}, "prefetch.token_ids"),
            (([0, 1],), {"keys": KEYS[:1]}, "prefetch.token_ids"),
            (([0, 2**32],), {}, "prefetch.token_ids[1]"),
            (([True, 1],), {}, "prefetch.token_ids[0]"),
            (([0, 1.0],), {}, "prefetch.token_ids[1]"),
            (([0, 1],), {"prior_key": "A" * 64}, "prefetch.prior_key[0]"),
            (([0, 1],), {"operation_id": True}, "operation_id"),
            (([0, 1],), {"operation_id": 1.5}, "operation_id"),
        ]:
            with pytest.raises(ValueError) as raised:
                controller.prefetch(*args, **kwargs)
            assert str(raised.value).startswith(f"CacheController.{field}: "), (field, str(raised.value))
        assert recorder.calls == []
        edge = controller.prefetch([0, 2**32 - 1, 5, 6], operation_id="edge")
        numbered = controller.prefetch(keys=KEYS[:2], operation_id=7)
        counted = [controller.prefetch(keys=KEYS[:1]) for _ in range(2)]
        wait_all(edge, numbered, *counted)
    assert edge.operation_id == "edge" and numbered.operation_id == 7
    assert [operation.operation_id for operation in counted] == [0, 1]
    assert edge.keys == compute_key_chain((0, 2**32 - 1, 5, 6), PAGE_SIZE)  # the top token value is accepted


@pytest.mark.clause("HYB-5")
def test_backup_sidecar_transfers_are_checked_and_nothing_is_written():
    kv, swa = make_pool(), swa_pool()
    recorder = FaultingRecorder(memory_backend())
    indexer = SidecarPool("indexer", make_pool(), kv_derived=True)
    with CacheController(recorder, kv, sidecar_pools=[swa_sidecar(swa), indexer]) as controller:
        slots = kv.alloc(2)
        for transfer, field in [
            ("swa", "backup.sidecar_transfers[0]"),
            (PoolTransfer(name="indexer", keys=KEYS[:2], host_indices=slots), "backup.sidecar_transfers[0].name"),
            (PoolTransfer(name="mamba", keys=KEYS[:2], host_indices=slots), "backup.sidecar_transfers[0].name"),
            (PoolTransfer(name="swa", keys=KEYS[:2]), "backup.sidecar_transfers[0]"),
            (PoolTransfer(name="swa", host_indices=swa.alloc(2)), "backup.sidecar_transfers[0]"),
        ]:
            with pytest.raises(ValueError) as raised:
                controller.backup(KEYS[:2], slots, sidecar_transfers=[transfer])
            assert str(raised.value).startswith(f"CacheController.{field}: "), (field, str(raised.value))
    assert recorder.calls_of("batch_set_v1", "batch_set_v2") == []


# ================================================================== the v2 hit query's answer
class Answer:
    """A ``batch_exists_v2`` result as any backend may give it (not validated)."""

    def __init__(self, hit: int, pools=None, restorable=None) -> None:
        self.kv_hit_pages = hit
        self.extra_pool_hit_pages = pools if pools is not None else {}
        self.restorable_prefix_pages = restorable


class AnsweringBackend(FaultingRecorder):
    """Answers ``batch_exists_v2`` with a fixed result and keeps the pool transfers it was asked about."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(memory_backend())
        self.answer = answer
        self.asked: list = []

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        self.asked.append((tuple(keys), list(pool_transfers or ())))
        return self._record("batch_exists_v2", keys, extra_info, lambda: self.answer)


def v2_prefetch(answer: Answer, sidecars, **settings):
    backend = AnsweringBackend(answer)
    controller = CacheController(
        backend, make_pool(), sidecar_pools=sidecars, settings=ControllerSettings(prefetch_threshold=0, **settings)
    )
    with controller:
        operation = controller.prefetch(keys=KEYS)
        wait_all(operation)
    return operation, backend, controller


@pytest.mark.clause("RANK-5", "BE-21", "CTL-11")
@pytest.mark.parametrize(
    "entries,agreed",
    [
        ({"indexer": 0}, {"indexer": 0}),
        ({"indexer": 1}, {"indexer": 1}),
        ({"indexer": PAGES}, {"indexer": PAGES}),
        ({PoolName.INDEXER: 3}, {"indexer": 3}),
        ({"indexer": PAGES + 1}, {}),
        ({"indexer": True}, {}),
        ({"indexer": 2.0}, {}),
        ({"indexer": "3"}, {}),
        ({"swa": 3}, {}),
    ],
)
def test_each_pools_own_boundary_is_kept_only_when_it_is_a_page_count(entries, agreed):
    indexer = SidecarPool(PoolName.INDEXER, make_pool(), kv_derived=True)
    operation, _, controller = v2_prefetch(Answer(PAGES, entries), [indexer])
    assert operation.agreed_pool_hits == agreed
    assert operation.hit_pages == PAGES and controller.internal_errors == []


@pytest.mark.clause("RANK-6", "CTL-11")
@pytest.mark.parametrize("restorable", [["x"], 5, [None]], ids=["not-a-number", "not-a-list", "none-entry"])
def test_a_malformed_restorable_set_restores_nothing(restorable):
    operation, _, controller = v2_prefetch(Answer(PAGES, {"swa": PAGES}, restorable), [swa_sidecar(swa_pool())])
    assert operation.hit_pages == 0 and operation.final_ack.error == "revoked: miss"
    assert controller.internal_errors == []


@pytest.mark.clause("HYB-7", "BE-21", "PFX-7")
def test_the_v2_hit_query_names_each_pools_keys():
    """ALL_PAGES pools name the whole chain, a TRAILING_PAGES pool its last N keys; KV-derived pools index KV."""
    sidecars = [
        swa_sidecar(swa_pool()),
        SidecarPool(PoolName.INDEXER, make_pool(), kv_derived=True),
        SidecarPool(PoolName.MAMBA, swa_pool()),
    ]
    _, backend, _ = v2_prefetch(Answer(0), sidecars, pass_prefix_keys=True)
    ((keys, transfers),) = backend.asked
    assert keys == KEYS
    assert [(t.name, tuple(t.keys), t.hit_policy, t.indices_from_pool) for t in transfers] == [
        (PoolName.SWA, KEYS[-WINDOW:], PoolHitPolicy.TRAILING_PAGES, None),
        (PoolName.INDEXER, KEYS, PoolHitPolicy.ALL_PAGES, PoolName.KV),
        (PoolName.MAMBA, KEYS, PoolHitPolicy.ALL_PAGES, None),
    ]
    assert backend.calls[0].prefix_at_call == ()


# ================================================================== who writes replicated KV (CTL-8)
def backup_as(storage_config) -> tuple:
    """Back up 2 pages under ``storage_config``; return (whether KV was written, the completed tokens)."""
    recorder = FaultingRecorder(memory_backend())
    pool = make_pool()
    with CacheController(recorder, pool, storage_config=storage_config) as controller:
        backup = controller.backup(KEYS[:2], pool.alloc(2))
        wait_all(backup)
    return bool(recorder.calls_of("batch_set_v1")), backup.wrote_kv, backup.completed_tokens


@pytest.mark.clause("CTL-8")
@pytest.mark.parametrize(
    "storage_config,writes",
    [
        # SGLang 0.5.20-0.5.22's config has no dcp_rank: the writer is TP rank 0.
        (SimpleNamespace(tp_rank=0, tp_size=2, is_mla_model=True), True),
        (SimpleNamespace(tp_rank=1, tp_size=2, is_mla_model=True), False),
        (SimpleNamespace(tp_rank=0, tp_size=2, is_mla_model=True, dcp_rank=None), True),
        # 0.5.23 with decode context parallelism: the writer of each DCP shard is the rank whose tp_rank is its dcp_rank.
        (config(tp_rank=1, tp_size=2, dcp_rank=1, dcp_size=2, logical_page_size=4, is_mla_model=True), True),
        (config(tp_rank=1, tp_size=2, is_mla_model=False), True),
        (None, True),
        (SimpleNamespace(tp_size=1, is_mla_model=True), True),  # a config without tp_rank: rank 0, the writer
    ],
    ids=["0.5.20-rank0", "0.5.20-rank1", "dcp-none", "dcp-rank1", "not-mla", "no-config", "mla-no-tp-rank"],
)
def test_the_storage_writer_follows_the_config(storage_config, writes):
    wrote, wrote_kv, completed = backup_as(storage_config)
    assert (wrote, wrote_kv) == (writes, writes)
    assert completed == 2 * PAGE_SIZE  # a non-writer acks the writer's outcome (here: its own, alone)


# ================================================================== a failure of the controller's own code
class Boom(RuntimeError):
    pass


class FailsOnce:
    """Raises from the step named in ``failing``, the first time it runs."""

    failing = ""

    def fail(self, step: str) -> None:
        if step == self.failing:
            self.failing = ""
            raise Boom(f"planted failure in {step}")


class FailingHitQuery(FailsOnce, HitQuery):
    def query(self, operation):
        self.fail("hit query")
        return super().query(operation)


class FailingRead(FailsOnce, PrefetchIO):
    def read_slice(self, operation, slice_index, start, end):
        self.fail("read")
        return super().read_slice(operation, slice_index, start, end)


class FailingFinish(FailsOnce, Acks):
    def finish(self, operation):
        self.fail("final ack")
        return super().finish(operation)


class FailingWrite(FailsOnce, BackupWriter):
    def write_slice(self, operation, slice_index, start, end):
        self.fail("write")
        return super().write_slice(operation, slice_index, start, end)


FailingStep = CacheController.with_parts(FailingHitQuery, FailingRead, FailingFinish, FailingWrite, name="FailingStep")
"""Raises from the one step named in ``failing`` (its parts' ``failing``), the first time it runs."""


def failing_controller(step: str, pages: int = 3):
    backend, pool = stored_backend(pages)
    controller = FailingStep(
        backend, pool, settings=ControllerSettings(prefetch_threshold=0, register_host_pools=False), start=False
    )
    for part in (controller.hit_query, controller.prefetch_io, controller.acks, controller.backup_writer):
        part.failing = step
    controller.start()
    return controller, pool


@pytest.mark.clause("CTL-6", "CTL-3", "CTL-12")
@pytest.mark.parametrize(
    "step,stage,tokens,error",
    [
        ("hit query", "hit query", 0, "revoked: internal error: Boom: planted failure in hit query"),
        ("read", "prefetch IO", 0, "internal error: Boom: planted failure in read"),
        ("final ack", "final ack", 3 * PAGE_SIZE, "planted failure in final ack"),  # the tokens loaded
    ],
)
def test_an_internal_prefetch_failure_still_ends_with_a_final_ack(step, stage, tokens, error, threads_before):
    controller, pool = failing_controller(step)
    with controller:
        failed = controller.prefetch(keys=KEYS[:3])
        wait_all(failed)
        after = controller.prefetch(keys=KEYS[:3])  # the worker threads go on
        wait_all(after)
    assert [ack.kind for ack in failed.acks][-1:] == ["final"] and failed.done
    assert failed.final_ack.tokens == tokens and failed.final_ack.error == error
    assert len(controller.internal_errors) == 1
    assert controller.internal_errors == [f"{stage} of operation 0: Boom: planted failure in {step}"]
    assert after.final_ack.tokens == 3 * PAGE_SIZE and after.final_ack.error is None
    if step != "final ack":
        check_frees(pool, after.loaded_host_indices)


@pytest.mark.clause("CTL-7", "CTL-13")
def test_an_internal_backup_failure_completes_nothing_and_the_next_backup_runs(threads_before):
    done = []
    controller, pool = failing_controller("write", pages=0)
    controller.on_backup_done = done.append
    with controller:
        failed = controller.backup(KEYS[:2], pool.alloc(2))
        wait_all(failed)
        after = controller.backup(KEYS[2:4], pool.alloc(2))
        wait_all(after)
    assert failed.completed_tokens == 0 and failed.error == "internal error: Boom: planted failure in write"
    assert controller.internal_errors == ["backup of operation 0: Boom: planted failure in write"]
    assert after.completed_tokens == 2 * PAGE_SIZE and after.error is None
    assert done == [failed, after]


@pytest.mark.clause("CTL-13")
def test_a_raising_backup_callback_is_contained(threads_before):
    def callback(operation):
        raise Boom("planted callback failure")

    pool = make_pool()
    with CacheController(memory_backend(), pool, on_backup_done=callback) as controller:
        backups = [controller.backup(KEYS[start : start + 2], pool.alloc(2)) for start in (0, 2)]
        wait_all(*backups)
    assert [backup.completed_tokens for backup in backups] == [2 * PAGE_SIZE] * 2
    assert controller.internal_errors == [
        f"on_backup_done callback of operation {index}: Boom: planted callback failure" for index in (0, 1)
    ]


class FailingFreePool(CountingHostPool):
    def free(self, indices) -> int:
        raise Boom("planted free failure")


@pytest.mark.clause("CTL-12", "CTL-6")
def test_a_raising_host_free_is_recorded_and_the_final_ack_still_comes():
    pool = FailingFreePool(600, PAGE_SIZE, 2, 1, 4, kind="mha", pin_memory=False)
    backend, _ = stored_backend(3)
    recorder = FaultingRecorder(memory_backend(store=backend.store), {"batch_get_v1": short_by(1)})
    with CacheController(recorder, pool, settings=ControllerSettings(prefetch_threshold=0)) as controller:
        operation = controller.prefetch(keys=KEYS[:3])  # loads 2 of the 3 pages hit: the last slot is freed
        wait_all(operation)
    assert operation.final_ack.tokens == 2 * PAGE_SIZE and operation.final_ack.error is None
    assert controller.internal_errors == ["host free of operation 0: Boom: planted free failure"]


# ================================================================== sidecar reads and writes, one rank
def swa_prefetch(faults=None, short_pool=False):
    """Prefetch KEYS (all stored, with the SWA window) through a controller with one SWA pool."""
    store = memory_backend()
    store_with_swa(store)
    kv, swa = make_pool(), swa_pool()
    swa.alloc_short = short_pool
    recorder = FaultingRecorder(memory_backend(store=store.store), faults)
    with CacheController(
        recorder, kv, sidecar_pools=[swa_sidecar(swa)], settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=KEYS)
        wait_all(operation)
    return operation, recorder, kv, swa, controller


@pytest.mark.clause("HYB-2", "HYB-3", "CTL-6")
def test_a_sidecar_read_that_succeeds_keeps_its_window_and_reports_no_error():
    operation, recorder, kv, swa, controller = swa_prefetch()
    assert operation.final_ack.tokens == PAGES * PAGE_SIZE and operation.final_ack.error is None
    assert pool_hits(operation) == {"swa": PAGES}
    assert swa.used_pages() == WINDOW and operation.pool_host_indices["swa"].numel() == WINDOW * PAGE_SIZE
    ((_, keys, _),) = recorder.calls_of("batch_get_v2")[0].transfers
    assert keys == KEYS[PAGES - WINDOW :]
    assert kv.used_pages() == PAGES and controller.internal_errors == []


@pytest.mark.clause("HYB-4", "CTL-12")
def test_a_sidecar_pool_short_of_host_memory_reads_nothing_and_fails_the_pool():
    operation, recorder, kv, swa, _ = swa_prefetch(short_pool=True)
    assert operation.loaded_tokens == PAGES * PAGE_SIZE  # KV is kept
    assert pool_hits(operation) == {"swa": 0} and operation.final_ack.error == "sidecar read failed"
    assert recorder.calls_of("batch_get_v2") == [] and swa.used_pages() == 0


@pytest.mark.clause("HYB-1", "CTL-11", "CTL-4")
def test_a_raising_derived_read_loads_nothing():
    store = memory_backend()
    indexer_pool = make_pool()
    kv = make_pool()
    indexer = SidecarPool(PoolName.INDEXER, indexer_pool, kv_derived=True)
    with CacheController(
        store, make_pool(), sidecar_pools=[SidecarPool(PoolName.INDEXER, make_pool(), kv_derived=True)]
    ) as writer:
        wait_all(writer.backup(KEYS, writer.host_pool.alloc(PAGES)))
    recorder = FaultingRecorder(memory_backend(store=store.store), {"batch_get_v2": raising()})
    with CacheController(
        recorder, kv, sidecar_pools=[indexer], settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=KEYS)
        wait_all(operation)
    assert operation.hit_pages == PAGES and operation.final_ack.tokens == 0
    assert operation.final_ack.error == "batch_get_v2 raised RuntimeError: planted storage failure"
    assert len(recorder.calls_of("batch_get_v1")) == 1 and kv.used_pages() == 0


def mamba_backup(storage_config, faults):
    """Back up 2 pages with the MAMBA state of the last one; return (the backup, the recorder)."""
    kv, mamba = make_pool(), swa_pool()
    recorder = FaultingRecorder(memory_backend(), faults)
    transfer = PoolTransfer(
        name=PoolName.MAMBA, keys=KEYS[1:2], host_indices=mamba.alloc(1), hit_policy=PoolHitPolicy.TRAILING_PAGES
    )
    with CacheController(
        recorder, kv, storage_config=storage_config, sidecar_pools=[SidecarPool(PoolName.MAMBA, mamba)]
    ) as controller:
        backup = controller.backup(KEYS[:2], kv.alloc(2), sidecar_transfers=[transfer])
        wait_all(backup)
    return backup, recorder


NON_WRITER = config(tp_rank=1, tp_size=2, is_mla_model=True)
RAISED = "batch_set_v2 raised RuntimeError: planted storage failure"


@pytest.mark.clause("HYB-5", "CTL-7", "CTL-11")
def test_a_raising_sidecar_write_writes_no_kv():
    backup, recorder = mamba_backup(None, {"batch_set_v2": raising()})
    assert recorder.calls_of("batch_set_v1") == []
    assert backup.completed_tokens == 0 and backup.local_completed_tokens == 0 and backup.error == RAISED


@pytest.mark.clause("CTL-8", "CTL-15", "CTL-11")
@pytest.mark.parametrize(
    "faults,local,error",
    [
        (None, 2 * PAGE_SIZE, None),
        ({"batch_set_v2": raising()}, 0, RAISED),
        ({"batch_set_v2": returning({"mamba": [False]})}, 0, "sidecar write failed"),
    ],
    ids=["written", "raised", "failed"],
)
def test_a_non_writer_offers_the_whole_span_only_when_its_sidecars_were_written(faults, local, error):
    backup, recorder = mamba_backup(NON_WRITER, faults)
    assert recorder.calls_of("batch_set_v1") == [] and not backup.wrote_kv
    assert [name for call in recorder.calls_of("batch_set_v2") for name, _, _ in call.transfers] == ["mamba"]
    assert backup.local_completed_tokens == local and backup.completed_tokens == local  # alone: its own offer
    assert backup.error == error


# ================================================================== close() with a worker that cannot stop
@pytest.mark.clause("CTL-11", "CTL-6")
def test_close_returns_false_when_a_worker_cannot_stop_and_the_worker_still_ends(threads_before):
    """A callback that does not return keeps its worker: close(timeout) gives up and says so, never hangs."""
    release, entered = threading.Event(), threading.Event()

    def on_ack(operation, ack):
        entered.set()
        release.wait(30)

    controller = CacheController(
        memory_backend(), make_pool(), on_ack=on_ack, settings=ControllerSettings(prefetch_threshold=0)
    )
    try:
        operation = controller.prefetch(keys=KEYS[:3])  # a miss: its final ack goes to on_ack
        assert entered.wait(10)
        assert controller.close(timeout=0.5) is False
        assert not controller.running
    finally:
        release.set()
    assert operation.wait(10) and operation.final_ack.error == "revoked: miss"
    assert controller.close() is True  # closed already


class _Clock:
    """Monotonic seconds that move only while a stand-in worker waits in ``join``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class _HungWorker:
    """A worker thread that never ends: each ``join`` waits out its timeout, and an eighth of a second more, as a real
    join returns a little after its timeout."""

    def __init__(self, clock: _Clock, log: list) -> None:
        self.clock, self.log = clock, log

    def join(self, timeout=None) -> None:
        self.log.append(("join", timeout))
        if timeout is not None:
            self.clock.now += timeout + 0.125

    def is_alive(self) -> bool:
        return True


@pytest.mark.clause("CTL-11")
@pytest.mark.parametrize(
    "timeout, first, second",
    [(None, None, None), (2.0, 1.5, 0.375), (8.0, 7.0, 0.875), ("default", 9.0, 0.875)],
    ids=["none", "short", "long", "default"],
)
def test_close_gives_a_hung_worker_all_but_the_last_quarter_then_abandons_its_calls(
    monkeypatch, threads_before, timeout, first, second
):
    """close(T) waits for the workers until T minus a grace of min(1 s, T / 4), then abandons the calls under way,
    waits for the workers what is left of T, and gives the idle call threads what is left after that (never less than
    0 s). T is 10 s by default; None waits for ever. The time is a stand-in clock, so nothing here is timed."""
    clock, log = _Clock(), []
    monkeypatch.setattr(workers_module, "time", clock)
    controller = CacheController(memory_backend(), make_pool())
    caller, started = controller.workers.caller, controller.workers.threads
    stop_call_threads = caller.stop_call_threads
    monkeypatch.setattr(caller, "abandon_calls", lambda: log.append(("abandon", clock.now - 1000.0)))
    monkeypatch.setattr(caller, "stop_call_threads", lambda rest=None: log.append(("stop", rest)))
    controller.workers.threads = [_HungWorker(clock, log)]
    try:
        assert (controller.close() if timeout == "default" else controller.close(timeout)) is False
    finally:
        for thread in started:  # the real workers had STOP sent like any others
            thread.join(10)
        stop_call_threads(10)
    abandoned_at = 0.0 if first is None else first + 0.125
    assert log == [
        ("join", first),
        ("abandon", abandoned_at),
        ("join", second),
        ("stop", None if timeout is None else 0.0),
    ]


def test_callbacks_set_after_construction_are_the_ones_called(threads_before):
    """on_ack and on_backup_done can be set on a running controller: the new callbacks are read back and called."""
    acks, backups = [], []
    with CacheController(
        memory_backend(), make_pool(), settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        controller.on_ack = lambda operation, ack: acks.append(ack)
        controller.on_backup_done = backups.append
        assert controller.on_ack is not None and controller.on_backup_done == backups.append
        operation = controller.prefetch(keys=KEYS[:3])  # a miss: its final ack still goes to on_ack
        assert operation.wait(10)
        backup = controller.backup(KEYS[:2], controller.host_pool.alloc(2))
        wait_all(backup)
    assert acks and acks[-1] == operation.final_ack
    assert backups == [backup]


def test_the_stateful_parts_are_built_by_keyword_and_compared_by_identity(threads_before):
    """The hit query, IO, sidecar reader and backup writer are live parts of one controller: a variant builds them by
    keyword (their fields may be reordered), and two built alike stay two parts (each can key a dict)."""
    pool, swa = make_pool(), swa_pool()
    controllers = [
        CacheController(
            memory_backend(), pool, sidecar_pools=[swa_sidecar(swa)], settings=ControllerSettings(prefetch_threshold=0)
        )
        for _ in "ab"
    ]
    try:
        for name in ("hit_query", "prefetch_io", "sidecar_reader", "backup_writer"):
            first, second = (getattr(controller, name) for controller in controllers)
            assert first != second and len({first: 1, second: 2}) == 2, name
            with pytest.raises(TypeError):
                type(first)(*[getattr(first, field.name) for field in dataclasses.fields(first)])
    finally:
        for controller in controllers:
            assert controller.close()


def test_the_worker_threads_never_hold_the_process(threads_before):
    """The three workers are daemon threads, as SGLang's are: a controller never closed does not block exit."""
    controller = CacheController(memory_backend(), make_pool())
    try:
        workers = {thread.name: thread.daemon for thread in set(threading.enumerate()) - threads_before}
    finally:
        assert controller.close()
    assert workers == {"hicache-hit-query": True, "hicache-prefetch-io": True, "hicache-backup": True}


@pytest.mark.clause("CTL-6", "CTL-7", "CTL-13")
def test_close_lets_every_operation_submitted_before_it_finish_normally(threads_before):
    """close() first waits for the queued work (most of its timeout); only what is still running then is abandoned."""
    backend, pool = stored_backend(PAGES)
    recorder = FaultingRecorder(backend)
    controller = CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, register_host_pools=False)
    )
    prefetches = [controller.prefetch(keys=KEYS) for _ in range(3)]
    backups = [controller.backup(keys_for(2, offset=start), pool.alloc(2)) for start in range(0, 40, 4)]
    assert controller.close() is True
    assert [operation.final_ack.tokens for operation in prefetches] == [PAGES * PAGE_SIZE] * 3
    assert [operation.final_ack.error for operation in prefetches] == [None] * 3
    assert [backup.completed_tokens for backup in backups] == [2 * PAGE_SIZE] * 10
    assert [backup.error for backup in backups] == [None] * 10


@pytest.mark.clause("CTL-11")
def test_close_without_a_timeout_budget_never_waits_for_a_hung_backend_call():
    """close(timeout=0) abandons at once: it returns while the backend is still inside the call."""
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()

    def hang(call, run):
        entered.set()
        release.wait(15)
        returned.set()
        return run()

    backend, pool = stored_backend(3)
    recorder = FaultingRecorder(backend, {"batch_get_v1": hang})
    controller = CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, register_host_pools=False, call_deadline=None)
    )
    try:
        operation = controller.prefetch(keys=KEYS[:3])
        assert entered.wait(10)
        controller.close(timeout=0)
        assert not returned.is_set()  # close did not wait for the backend
    finally:
        release.set()
    assert operation.wait(10) and operation.final_ack is not None  # abandoned, or returned first: both end it


# ================================================================== prefixes of calls that do not start the chain
ANCHOR = keys_for(2, offset=70_000)


@pytest.mark.clause("PFX-9", "PFX-2", "HYB-5")
def test_a_trailing_sidecar_write_first_in_its_backup_gets_the_prefix_that_joins_its_keys():
    """The backup's first call starts mid-span (the SWA window): its prefix is the anchor and the span before it."""
    kv, swa = make_pool(), swa_pool()
    recorder = FaultingRecorder(memory_backend())
    transfer = PoolTransfer(
        name=PoolName.SWA,
        keys=KEYS[PAGES - WINDOW :],
        host_indices=swa.alloc(WINDOW),
        hit_policy=PoolHitPolicy.TRAILING_PAGES,
    )
    with CacheController(
        recorder, kv, sidecar_pools=[swa_sidecar(swa)], settings=ControllerSettings(pass_prefix_keys=True)
    ) as controller:
        backup = controller.backup(KEYS, kv.alloc(PAGES), prefix_keys=ANCHOR, sidecar_transfers=[transfer])
        wait_all(backup)
    assert backup.completed_tokens == PAGES * PAGE_SIZE
    assert [(call.method, call.prefix_at_call) for call in recorder.calls] == [
        ("batch_set_v2", ANCHOR + KEYS[: PAGES - WINDOW]),
        ("batch_set_v1", ANCHOR),
    ]


# ================================================================== the agreed cut (RANK-2)
def kv_ranks(stored: tuple, threshold: int = 0, on_first_read=None):
    """Prefetch KEYS on two TP ranks (threads) storing ``stored[rank]`` pages; return [(operation, controller, pool)]."""
    groups = ThreadRankGroup.create(2, timeout=20)
    store = memory_backend().store
    ranks = []
    for rank in range(2):
        writer = memory_backend(store=store, tp_rank=rank, tp_size=2)
        pool = make_pool()
        writer.register_mem_pool_host(pool)
        slots = pool.alloc(stored[rank])
        assert all(writer.batch_set_v1(list(KEYS[: stored[rank]]), slots))
        pool.free(slots)
        faults: dict[str, Callable[..., Any]] = {
            "batch_get_v1": lambda call, run, pool=pool, rank=rank: on_first_read(rank, pool, run)
        }
        recorder = FaultingRecorder(
            memory_backend(store=store, tp_rank=rank, tp_size=2), faults if on_first_read else None
        )
        controller = CacheController(
            recorder,
            pool,
            storage_config=config(tp_rank=rank, tp_size=2),
            rank_group=groups[rank],
            settings=ControllerSettings(prefetch_threshold=threshold),
        )
        ranks.append((controller, pool))
    operations = [controller.prefetch(keys=KEYS) for controller, _ in ranks]
    wait_all(*operations)
    for controller, _ in ranks:
        assert controller.close()
    return [(operation, controller, pool) for operation, (controller, pool) in zip(operations, ranks)]


@pytest.mark.clause("RANK-2", "CTL-12")
def test_slots_past_the_agreed_hit_are_freed_before_any_read(threads_before):
    """Rank 0 hits 20 pages, rank 1 only 12: rank 0 holds 12 pages' slots when its first read starts."""
    held_at_first_read: list = []

    def first_read(rank, pool, run):
        if rank == 0 and not held_at_first_read:
            held_at_first_read.append(pool.used_pages())
        return run()

    ranks = kv_ranks((PAGES, 12), on_first_read=first_read)
    assert held_at_first_read == [12]
    for operation, controller, pool in ranks:
        assert operation.hit_pages == 12 and operation.final_ack.tokens == 12 * PAGE_SIZE
        check_frees(pool, operation.loaded_host_indices)
        assert controller.internal_errors == []


@pytest.mark.clause("RANK-2", "CTL-3")
def test_a_hit_below_the_threshold_cut_further_by_another_rank_is_revoked_cleanly(threads_before):
    """Rank 0's 3 pages are below the threshold (nothing allocated); rank 1 has 2: both revoke, nothing held."""
    for operation, controller, pool in kv_ranks((3, 2), threshold=8):
        assert operation.hit_pages == 2 and operation.revoked
        assert operation.final_ack.error == "revoked: agreed hit of 4 tokens is below the threshold of 8"
        assert pool.used_pages() == 0 and controller.internal_errors == []
