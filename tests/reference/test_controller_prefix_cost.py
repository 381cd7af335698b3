"""The controller builds each call's prefix from the previous call's, one batch at a time.

Scenario: a backup and a prefetch of several 128-page slices with prefix
metadata on. Every call must receive the prefix the spec gives it (PFX-2),
and the prefix of slice ``k + 1`` must be the prefix of slice ``k`` extended
by slice ``k``'s keys: the new ``PrefixKeys`` node links to the previous
call's node and holds one batch, so a call costs O(batch) whatever the depth
(the timings are in benchmarks/bench_prefix_keys.py, never here).

Why this matters: rebuilding each slice's prefix from the operation's own
prefix and every earlier key makes an operation's metadata cost grow with the
square of its length (383× at 256 slices, measured earlier).
"""

from __future__ import annotations

import pytest

from hicache_reference import CacheController
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain
from tests.reference.controller_checks import check_prefixes
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FaultingRecorder,
    config,
    fill_random,
    make_pool,
    memory_backend,
    tokens_for,
    wait_all,
)

PAGES = 3 * STORAGE_BATCH_SIZE + 5
"""Four slices, the last one short."""
ANCHOR_KEYS = compute_key_chain(tuple(range(50_000, 50_000 + 2 * PAGE_SIZE)), PAGE_SIZE)


def check_chained(calls: list, method: str) -> None:
    """Each call's prefix node is the previous call's extended by that call's keys (one chunk, shared parent)."""
    selected = [call for call in calls if call.method == method]
    assert len(selected) == 4, f"{method}: expected 4 slices, got {len(selected)}"
    for previous, current in zip(selected, selected[1:]):
        node = current.extra_info.prefix_keys
        assert node._parent is previous.extra_info.prefix_keys, f"{method}: slice prefix not built on the previous one"
        assert node._chunk == previous.keys, f"{method}: the added chunk is not the previous slice's keys"


@pytest.mark.clause("PFX-2", "PFX-5")
def test_each_slice_prefix_extends_the_previous_slice_prefix(threads_before):
    tokens = tokens_for(PAGES)
    chain = compute_key_chain(tuple(tokens), PAGE_SIZE, ANCHOR_KEYS[-1])
    source, target = make_pool(), make_pool()
    fill_random(source)
    writer = FaultingRecorder(memory_backend())
    reader = FaultingRecorder(memory_backend(store=writer.inner.store))
    with CacheController(
        writer, source, storage_config=config(), settings=ControllerSettings(pass_prefix_keys=True)
    ) as controller:
        wait_all(controller.backup(chain, source.alloc(PAGES), prefix_keys=ANCHOR_KEYS))
    with CacheController(
        reader,
        target,
        storage_config=config(),
        settings=ControllerSettings(pass_prefix_keys=True, prefetch_threshold=0),
    ) as controller:
        operation = controller.prefetch(tokens, prior_key=ANCHOR_KEYS[-1], prefix_keys=ANCHOR_KEYS)
        wait_all(operation)
    assert operation.hit_pages == PAGES
    for recorded in (writer.calls, reader.calls):
        check_prefixes(recorded, chain, ANCHOR_KEYS)  # PFX-2: the values, as handed out and afterwards
    check_chained(writer.calls, "batch_set_v1")
    check_chained(reader.calls, "batch_get_v1")
