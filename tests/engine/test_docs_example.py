"""The runnable examples of docs/engines.md and docs/controller.md run as written, so the guides cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.engine import RecordingBackend, check_trace
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.backends import MemoryBackend, forget_shared_memory_store
from hicache_spec import compute_key_chain

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = 150
PAGE_SIZE = 4


def python_blocks(document: str) -> list[str]:
    """The ```python blocks of a guide, in order."""
    return re.findall(r"```python\n(.*?)```", (DOCS / document).read_text(), re.S)


def run_block(document: str, first_line: str) -> dict:
    """Run the guide's block that starts with ``first_line``, as written; return its names."""
    (block,) = [block for block in python_blocks(document) if block.startswith(first_line)]
    names: dict = {}
    exec(compile(block, f"{document}: {first_line}", "exec"), names)
    return names


@pytest.mark.clause("PFX-2", "CTL-5", "CTL-7")
def test_worked_example_of_the_engine_guide_runs_as_written():
    names = run_block("engines.md", "from hicache_contracts import HiCacheStorageConfig\n")
    report, operation = names["report"], names["operation"]
    assert report.ok and operation.loaded_tokens == 300 * 16
    assert {"PFX-2", "PFX-5", "CTL-1", "CTL-4", "CTL-5", "CTL-6"} <= set(report.checked)
    assert len(operation.progress_acks) == 3


@pytest.mark.clause("CTL-5", "CTL-7")
def test_example_of_the_controller_guide_runs_as_written():
    names = run_block("controller.md", "from hicache_contracts import HiCacheStorageConfig\n")
    assert names["backup"].completed_tokens == 40 * 16
    assert [ack.kind for ack in names["operation"].acks] == ["progress", "final"]
    assert names["operation"].loaded_tokens == 40 * 16


@pytest.mark.clause("CTL-3", "CTL-5")
def test_a_revoked_prefetch_has_no_progress_ack_and_conforms():
    config = HiCacheStorageConfig.single_rank()
    store = {"store": "revoked-prefetch-example"}  # one instance per controller (BE-24), sharing one store
    rec = RecordingBackend(MemoryBackend(config, store))
    source = HostPagePool(PAGES, PAGE_SIZE, 2, 1, 8, kind="mha", pin_memory=False)
    token_ids = list(range(PAGES * PAGE_SIZE))
    with CacheController(rec, source, storage_config=config) as controller:
        controller.backup(compute_key_chain(tuple(token_ids), PAGE_SIZE), source.alloc(PAGES)).wait(10)
    rec = RecordingBackend(MemoryBackend(config, store))
    forget_shared_memory_store(store["store"])
    small = HostPagePool(PAGES // 2, PAGE_SIZE, 2, 1, 8, kind="mha", pin_memory=False)  # host memory short
    with CacheController(rec, small, storage_config=config) as controller:
        operation = controller.prefetch(token_ids)
        operation.wait(10)
    assert operation.revoked and len(operation.acks) == 1
    report = check_trace(rec.calls, chain=operation.keys, prefix_keys=None, page_size=PAGE_SIZE, acks=operation.acks)
    assert report.ok, report.format_table()
    wrong = check_trace(
        rec.calls, chain=operation.keys, prefix_keys=None, page_size=PAGE_SIZE, acks=operation.acks, agreed_pages=PAGES
    )  # told it was agreed: the acks are missing
    assert {"CTL-5", "RANK-3"} <= set(wrong.violated)
