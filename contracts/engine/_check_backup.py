"""The trace checker's backup rules, CTL-7, CTL-13 and HYB-5: ``check_backup(checker)``; see docs/engines.md."""

from __future__ import annotations

from typing import Any, Optional

from hicache_spec import compute_backup_progress, plan_batches
from hicache_spec.values import is_true_flag
from hicache_contracts.engine._check_base import KV_WRITE, SIDECAR_WRITE, _Checker, leading_flags
from hicache_contracts.engine._check_pages import (
    fail_extra_calls,
    fail_repeated_pages,
    sidecar_pages,
)


def written_pages(call: Any, count: int) -> int:
    """Return the pages a KV write confirmed; a legacy ``batch_set`` confirms its whole batch with one true flag
    (``True``, numpy's included)."""
    if call.raised is not None:
        return 0
    if call.method == "batch_set":
        return count if is_true_flag(call.result) else 0
    return leading_flags(call.result, count)


def check_backup(checker: _Checker) -> None:
    """CTL-7, CTL-13, HYB-5."""
    writes = checker.of_kind(KV_WRITE)
    _check_sidecar_writes(checker, writes)
    if not writes:
        return
    checker.check("CTL-7", "CTL-13")
    batch_size = checker.batch_size
    slice_ok: list[bool] = []
    failed: Optional[int] = None
    covered = 0
    for slice_index, call in enumerate(writes):
        keys = call.all_keys
        offset = checker.offset(call)
        if failed is not None:
            checker.fail("CTL-7", f"backup wrote pages [{offset}...) after slice {failed} failed", call)
            continue
        if tuple(keys) != checker.slice_keys(slice_index):
            checker.fail(
                "CTL-7",
                f"backup write {slice_index} writes pages [{offset}...) but slice {slice_index} "
                f"is pages [{slice_index * batch_size}...)",
                call,
            )
        ok = written_pages(call, len(keys)) == len(keys)
        slice_ok.append(ok)
        covered += len(keys)
        if not ok:
            failed = slice_index
    chain = checker.chain
    if failed is None and covered < len(chain):
        checker.fail(
            "CTL-13", f"backup stopped after {covered} of {len(chain)} pages without a failed slice", writes[-1]
        )
    reported = checker.operation.backup_completed_tokens
    if reported is not None:
        page_size = checker.operation.page_size
        assert page_size is not None  # check_trace asks for page_size with backup_completed_tokens
        slice_pages = tuple(end - start for start, end in plan_batches(len(chain), batch_size))
        expected = compute_backup_progress(slice_pages, tuple(slice_ok[: len(slice_pages)]), page_size)
        if reported != expected:
            checker.fail("CTL-7", f"backup reported {reported} completed tokens; its writes completed {expected}")


def _check_sidecar_writes(checker: _Checker, writes: list[Any]) -> None:
    """HYB-5: sidecars are written before the first KV write, in as few calls as allowed, each page once."""
    sidecar_writes = checker.of_kind(SIDECAR_WRITE)
    if not sidecar_writes:
        return
    checker.check("HYB-5")
    first_kv = min((call.index for call in writes), default=None)
    keys_per_pool, _ = sidecar_pages(sidecar_writes)
    fail_extra_calls(
        checker,
        "HYB-5",
        sidecar_writes,
        keys_per_pool,
        "write number {number}: sidecars are written in {needed} batch_set_v2 call(s): {why}",
    )
    for call in sidecar_writes:
        if first_kv is not None and call.index > first_kv:
            checker.fail("HYB-5", f"sidecar write after the KV write call #{first_kv}; sidecars go first", call)
    fail_repeated_pages(
        checker,
        "HYB-5",
        keys_per_pool,
        "written twice; each sidecar page is written once per backup",
        sidecar_writes[-1],
    )
