"""The controller checks: each reads what a controller did and raises AssertionError naming the clause broken.

A check reads the calls its backend saw (``FaultingRecorder.calls``), the
acks its operations emitted and the host pool's frees. Each is tripped by a
planted-bug controller in ``tests/planted_controllers.py`` (see
``test_controller_planted.py``).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from hicache_contracts import FinalAck, PoolHitsAck, ProgressAck
from hicache_contracts.host_pool import HostPagePool
from hicache_spec import compute_prefetch_acks, plan_batches
from tests.reference.controller_helpers import Call, CountingHostPool, FaultingRecorder


def expected_prefix(operation_prefix: Optional[tuple], chain: tuple, offset: int) -> Optional[tuple]:
    return None if operation_prefix is None else tuple(operation_prefix) + tuple(chain[:offset])


def check_prefixes(calls: list[Call], chain: tuple, operation_prefix: Optional[tuple]) -> None:
    """PFX-2/3/4/5/7: every chain call carries an extra info whose prefix is the operation's prefix + the keys before it."""
    position = {key: index for index, key in enumerate(chain)}
    for call in calls:
        if call.extra_info is None:
            raise AssertionError(f"[PFX-7] {call.method} got extra_info=None")
        if not call.keys or call.method in ("batch_exists_v2",) or call.keys[0] not in position:
            continue
        offset = position[call.keys[0]]
        if tuple(chain[offset : offset + len(call.keys)]) != call.keys:
            raise AssertionError(f"[PFX-2] {call.method} keys are not contiguous in the chain")
        wanted = expected_prefix(operation_prefix, chain, offset)
        if operation_prefix is None and call.prefix_at_call is not None:
            raise AssertionError(f"[PFX-3] {call.method} at page {offset} got a prefix with the feature off")
        if operation_prefix is not None and call.prefix_at_call is None:
            raise AssertionError(f"[PFX-4] {call.method} at page {offset} got None for a list prefix")
        if call.prefix_at_call != wanted:
            raise AssertionError(
                f"[PFX-2] {call.method} at page {offset}: prefix of {len(call.prefix_at_call or ())}"
                f" keys, expected {len(wanted or ())}"
            )
        if call.prefix_now != call.prefix_at_call:
            raise AssertionError(f"[PFX-5] the prefix handed to {call.method} changed after the call")


UNSLICED = ("batch_exists", "batch_exists_v2", "batch_set_v2")
"""Calls SGLang 0.5.23 does not slice (CTL-2): the whole-chain hit query and the trailing-group sidecar writes."""


def check_slices(calls: list[Call], chain: tuple, batch_size: int) -> None:
    """CTL-2: KV reads and writes carry at most batch_size keys and start at multiples of it; the hit query and
    sidecar v2 calls are not sliced (KV-derived reads are checked with their KV read, check_derived_with_kv)."""
    position = {key: index for index, key in enumerate(chain)}
    for call in calls:
        if call.method in UNSLICED:
            continue
        if call.method == "batch_get_v2":
            continue
        if len(call.keys) > batch_size:
            raise AssertionError(f"[CTL-2] {call.method} carried {len(call.keys)} keys > {batch_size}")
        if call.method in ("batch_get_v1", "batch_set_v1", "batch_exists") and call.keys:
            offset = position.get(call.keys[0])
            if offset is not None and offset % batch_size:
                raise AssertionError(f"[CTL-2] {call.method} started at page {offset}")


def check_hit_query(calls: list[Call], chain: tuple, batch_size: int) -> None:
    """CTL-1: one batch_exists over the whole chain (SGLang 0.5.21+), or slice by slice stopping after the first short slice."""
    exists = [call for call in calls if call.method == "batch_exists"]
    if len(exists) == 1 and exists[0].keys == tuple(chain):
        return  # one call over the whole chain
    if len(exists) > 1 and any(call.keys == tuple(chain) for call in exists):
        raise AssertionError("[CTL-1] the whole chain was queried more than once")
    slices = plan_batches(len(chain), batch_size)
    for index, call in enumerate(exists):
        if index >= len(slices) or call.keys != tuple(chain[slices[index][0] : slices[index][1]]):
            raise AssertionError(f"[CTL-1] hit query call {index} is not slice {index} of the chain")
        if call.result != len(call.keys) and index != len(exists) - 1:
            raise AssertionError(f"[CTL-1] hit query went on after slice {index} hit {call.result} of {len(call.keys)}")
    if exists:
        last = exists[-1]
        if last.result == len(last.keys) and len(exists) < len(slices):
            raise AssertionError("[CTL-1] hit query stopped after a fully hit slice")


def check_prefetch_acks(operation: Any, page_size: int, batch_size: int, loaded_pages: Optional[tuple] = None) -> None:
    """CTL-5/CTL-6: one progress ack per slice of the agreed keys, non-decreasing, then exactly one final ack last.

    With ``loaded_pages`` (pages each read slice loaded), the acks must equal
    ``compute_prefetch_acks`` of them.
    """
    acks = operation.acks
    finals = [index for index, ack in enumerate(acks) if isinstance(ack, FinalAck)]
    if finals != [len(acks) - 1]:
        raise AssertionError(f"[CTL-6] expected exactly one final ack, last; got kinds {[a.kind for a in acks]}")
    progress = [ack for ack in acks if isinstance(ack, ProgressAck)]
    slices = () if operation.revoked else plan_batches(operation.hit_pages or 0, batch_size)
    if len(progress) != len(slices):
        raise AssertionError(f"[CTL-5] {len(progress)} progress acks for {len(slices)} slices")
    for index, ack in enumerate(progress):
        if ack.slice_index != index:
            raise AssertionError(f"[CTL-5] ack {index} names slice {ack.slice_index}")
    tokens = [ack.tokens for ack in progress]
    if any(a > b for a, b in zip(tokens, tokens[1:])):
        raise AssertionError(f"[CTL-5] progress acks decrease: {tokens}")
    if loaded_pages is not None:
        wanted = compute_prefetch_acks(tuple(end - start for start, end in slices), loaded_pages, page_size)
        if tuple(tokens) != wanted:
            raise AssertionError(f"[CTL-5] acks {tokens}, spec gives {list(wanted)}")
    final = acks[-1]
    if final.tokens != (tokens[-1] if tokens else 0):
        raise AssertionError(f"[CTL-6] final ack {final.tokens} tokens, last progress {tokens[-1:]}")


def check_reads_stop(calls: list[Call]) -> None:
    """CTL-4: no KV read after a slice that loaded fewer pages than it asked for."""
    reads = [call for call in calls if call.method == "batch_get_v1"]
    for index, call in enumerate(reads[:-1]):
        if not (
            isinstance(call.result, list) and len(call.result) == len(call.keys) and all(x is True for x in call.result)
        ):
            raise AssertionError(f"[CTL-4] read {index + 1} issued after short read {index}")


def check_loaded_bytes(
    source: HostPagePool, source_slots: torch.Tensor, target: HostPagePool, target_slots: torch.Tensor, pages: int
) -> None:
    """The first ``pages`` pages at ``target_slots`` hold the bytes of those at ``source_slots``."""
    size = source.page_size
    if target_slots.numel() < pages * size:
        raise AssertionError(f"only {target_slots.numel() // size} pages loaded, expected {pages}")
    for page in range(pages):
        want = source.get_data_page(int(source_slots[page * size]))
        got = target.get_data_page(int(target_slots[page * size]))
        if not torch.equal(want, got):
            raise AssertionError(f"page {page} differs after the round trip")


def check_frees(pool: CountingHostPool, kept_slots: torch.Tensor) -> None:
    """CTL-12: no double free, and every allocated page is either freed or kept by the caller."""
    if pool.double_frees:
        raise AssertionError(f"[CTL-12] double free of pages at slots {pool.double_frees}")
    kept = kept_slots.numel() // pool.page_size
    if pool.used_pages() != kept:
        raise AssertionError(f"[CTL-12] {pool.used_pages()} pages in use, the caller keeps {kept}")


def check_derived_with_kv(calls: list[Call]) -> None:
    """HYB-1/PFX-8: each KV read is followed by the derived v2 read of the same keys and slots, with the same extra info object."""
    reads = [call for call in calls if call.method in ("batch_get_v1", "batch_get_v2")]
    for index, call in enumerate(reads):
        if call.method != "batch_get_v1":
            continue
        following = reads[index + 1] if index + 1 < len(reads) else None
        if following is None or following.method != "batch_get_v2":
            raise AssertionError("[HYB-1] a KV slice read without its derived sidecar read")
        for name, keys, slots in following.transfers:
            if keys != call.keys or not torch.equal(slots, call.host_indices):
                raise AssertionError(f"[HYB-1] derived read of {name} is not the KV slice's pages")
        if following.extra_info is not call.extra_info:
            raise AssertionError("[PFX-8] the derived read got a different extra info object than the KV read")


def pool_hits(operation: Any) -> Optional[dict]:
    hits = [ack for ack in operation.acks if isinstance(ack, PoolHitsAck)]
    if len(hits) > 1:
        raise AssertionError("[HYB-2] more than one pool-hits ack")
    return dict(hits[0].pool_hits) if hits else None


def check_backup(calls: list[Call], operation: Any, page_size: int, batch_size: int) -> None:
    """CTL-7: slices in order, stop at the first failed slice, completed tokens = successful slices' pages."""
    writes = [call for call in calls if call.method == "batch_set_v1"]
    ok = [
        isinstance(call.result, list)
        and len(call.result) == len(call.keys)
        and all(flag is True for flag in call.result)
        for call in writes
    ]
    if False in ok and ok.index(False) != len(ok) - 1:
        raise AssertionError("[CTL-7] backup wrote on after a failed slice")
    slices = plan_batches(len(operation.keys), batch_size)
    for index, call in enumerate(writes):
        start, end = slices[index]
        if call.keys != tuple(operation.keys[start:end]):
            raise AssertionError(f"[CTL-7] backup write {index} is not slice {index}")
    if all(ok) and len(writes) < len(slices):
        raise AssertionError("[CTL-7] backup stopped without a failed slice")
    good_pages = (
        sum(len(call.keys) for call, good in zip(writes, ok) if good)
        if False not in ok
        else sum(len(call.keys) for call in writes[: ok.index(False)])
    )
    if operation.completed_tokens != good_pages * page_size:
        raise AssertionError(
            f"[CTL-7] completed_tokens {operation.completed_tokens}, expected {good_pages * page_size}"
        )


def check_confirmed(calls: list[Call], operation: Any, page_size: int) -> None:
    """CTL-11: the tokens loaded never exceed the pages the KV reads confirmed, read independently of the controller."""
    confirmed = 0
    for call in calls:
        if call.method != "batch_get_v1":
            continue
        result = call.result
        if type(result) is list and len(result) == len(call.keys):
            run = next((index for index, flag in enumerate(result) if flag is not True), len(result))
        else:
            run = 0
        confirmed += run
        if run < len(call.keys):
            break
    if operation.loaded_tokens > confirmed * page_size:
        raise AssertionError(
            f"[CTL-11] {operation.loaded_tokens} tokens counted, the backend confirmed {confirmed} pages"
        )


def check_revoked_without_io(calls: list[Call], operation: Any, threshold_tokens: int, page_size: int) -> None:
    """CTL-3: an agreed hit below the threshold is revoked and reads nothing."""
    if (operation.hit_pages or 0) * page_size < threshold_tokens or not operation.hit_pages:
        if not operation.revoked or any(call.method == "batch_get_v1" for call in calls):
            raise AssertionError(f"[CTL-3] a hit of {operation.hit_pages} pages was read, not revoked")


def check_sidecar_windows(calls: list[Call], operation: Any, windows: dict) -> None:
    """HYB-3: each TRAILING_PAGES sidecar reads the window of its N pages ending at the agreed hit."""
    hit = operation.hit_pages
    for call in calls:
        if call.method != "batch_get_v2":
            continue
        for name, keys, _ in call.transfers:
            if name in windows:
                start = max(0, hit - max(1, windows[name]))
                if keys != tuple(operation.keys[start:hit]):
                    raise AssertionError(f"[HYB-3] {name} read pages not ending at the agreed hit {hit}")


def check_sidecar_all_or_nothing(calls: list[Call], operation: Any) -> None:
    """HYB-4: a sidecar read counts only if every pool is in the result with every page True."""
    hits = pool_hits(operation)
    if hits is None:
        return
    sidecar_reads = [
        call for call in calls if call.method == "batch_get_v2" and any(name in hits for name, _, _ in call.transfers)
    ]
    for call in sidecar_reads:
        result = call.result if isinstance(call.result, dict) else {}
        complete = all(
            isinstance(result.get(name), list)
            and len(result[name]) == len(keys)
            and all(flag is True for flag in result[name])
            for name, keys, _ in call.transfers
        )
        if not complete and any(hits.values()):
            raise AssertionError(f"[HYB-4] an incomplete sidecar result {sorted(result)} counted as hits {hits}")


def check_backup_order(calls: list[Call]) -> None:
    """HYB-5: every sidecar write (batch_set_v2) comes before the first KV write (batch_set_v1)."""
    methods = [call.method for call in calls if call.method in ("batch_set_v1", "batch_set_v2")]
    if "batch_set_v2" not in methods:
        raise AssertionError("[HYB-5] no sidecar write")
    if (
        "batch_set_v1" in methods
        and methods.index("batch_set_v1") < len(methods) - methods[::-1].index("batch_set_v2") - 1
    ):
        raise AssertionError(f"[HYB-5] KV written before the sidecars: {methods}")


def check_replicated_writes(backends: list[FaultingRecorder], backups: list[Any]) -> None:
    """CTL-8: with replicated KV only TP rank 0 writes, and every rank acks the same outcome."""
    for rank, backend in enumerate(backends[1:], start=1):
        if backend.calls_of("batch_set_v1", "batch_set_v2"):
            raise AssertionError(f"[CTL-8] TP rank {rank} wrote replicated KV")
    outcomes = {backup.completed_tokens for backup in backups}
    if len(outcomes) != 1 or None in outcomes:
        raise AssertionError(f"[CTL-8] ranks acked different backups: {outcomes}")


def check_ranks_in_step(operations: list[Any], counts: list[Any]) -> None:
    """RANK-1/RANK-3: every rank ran the same collectives and emitted the same acks."""
    if any(count != counts[0] for count in counts[1:]):
        raise AssertionError(f"[RANK-1] collective counts differ across ranks: {counts}")
    if any(operation.hit_pages != operations[0].hit_pages for operation in operations):
        raise AssertionError("[RANK-1] ranks disagree on the hit")

    def shape(operation: Any) -> list:
        return [
            (
                ack.kind,
                getattr(ack, "slice_index", None),
                getattr(ack, "tokens", None),
                dict(getattr(ack, "pool_hits", {})),
            )
            for ack in operation.acks
        ]

    if any(shape(operation) != shape(operations[0]) for operation in operations):
        raise AssertionError("[RANK-3] ranks emitted different acks")
