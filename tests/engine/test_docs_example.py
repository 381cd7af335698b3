"""The worked example of docs/engines.md runs as written (with a smaller pool), so the guide cannot rot."""

from __future__ import annotations

import pytest

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.engine import RecordingBackend, check_trace
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.backends import MemoryBackend
from hicache_spec import compute_key_chain

PAGES = 150
PAGE_SIZE = 4


@pytest.mark.clause("PFX-2", "CTL-5", "CTL-7")
def test_worked_example_with_the_reference_controller():
    config = HiCacheStorageConfig.single_rank()
    rec = RecordingBackend(MemoryBackend(config, {}))
    token_ids = list(range(PAGES * PAGE_SIZE))
    anchor_keys = []

    source = HostPagePool(PAGES, PAGE_SIZE, 2, 1, 8, kind="mha", pin_memory=False)
    with CacheController(rec, source, storage_config=config, pass_prefix_keys=True) as controller:
        backup = controller.backup(compute_key_chain(tuple(token_ids), PAGE_SIZE), source.alloc(PAGES),
                                   prefix_keys=anchor_keys)
        backup.wait(10)
    report = check_trace(rec.calls, chain=backup.keys, prefix_keys=backup.prefix_keys, page_size=PAGE_SIZE,
                         backup_completed_tokens=backup.completed_tokens)
    assert report.ok, report.format_table()
    rec.clear_calls()

    pool = HostPagePool(2 * PAGES, PAGE_SIZE, 2, 1, 8, kind="mha", pin_memory=False)
    with CacheController(rec, pool, storage_config=config, pass_prefix_keys=True) as controller:
        operation = controller.prefetch(token_ids, prefix_keys=anchor_keys)
        operation.wait(30)

    report = check_trace(
        rec.calls,
        chain=operation.keys,
        prefix_keys=operation.base_info.prefix_keys,
        page_size=pool.page_size,
        acks=operation.acks,
    )
    assert report.ok, report.format_table(statements=True)
    assert operation.loaded_tokens == PAGES * PAGE_SIZE
    assert {"PFX-2", "CTL-1", "CTL-4", "CTL-5", "CTL-6"} <= set(report.checked)


@pytest.mark.clause("CTL-3", "CTL-5")
def test_a_revoked_prefetch_has_no_progress_ack_and_conforms():
    config = HiCacheStorageConfig.single_rank()
    rec = RecordingBackend(MemoryBackend(config, {}))
    source = HostPagePool(PAGES, PAGE_SIZE, 2, 1, 8, kind="mha", pin_memory=False)
    token_ids = list(range(PAGES * PAGE_SIZE))
    with CacheController(rec, source, storage_config=config) as controller:
        controller.backup(compute_key_chain(tuple(token_ids), PAGE_SIZE), source.alloc(PAGES)).wait(10)
    rec.clear_calls()
    small = HostPagePool(PAGES // 2, PAGE_SIZE, 2, 1, 8, kind="mha", pin_memory=False)  # host memory short
    with CacheController(rec, small, storage_config=config) as controller:
        operation = controller.prefetch(token_ids)
        operation.wait(10)
    assert operation.revoked and len(operation.acks) == 1
    report = check_trace(rec.calls, chain=operation.keys, prefix_keys=None, page_size=PAGE_SIZE,
                         acks=operation.acks)
    assert report.ok, report.format_table()
    wrong = check_trace(rec.calls, chain=operation.keys, prefix_keys=None, page_size=PAGE_SIZE,
                        acks=operation.acks, agreed_pages=PAGES)  # told it was agreed: the acks are missing
    assert {"CTL-5", "RANK-3"} <= set(wrong.violated)
