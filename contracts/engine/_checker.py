"""The trace checker: ``check_trace`` (live recorded calls), ``check_operation`` (a trace file's operation), ``check_acks``.

Each returns a ``TraceReport``. The rules, the kinds of call and how SGLang's
calls are read are in docs/engines.md ("The rules, clause by clause", "The
ack schedule"); the rule families live in ``_check_prefix``, ``_check_pages``,
``_check_hits``, ``_check_backup`` and ``_check_acks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from hicache_spec import STORAGE_BATCH_SIZE, plan_batches
from hicache_spec.divergences import divergences_for_release
from hicache_spec.releases import UnknownReleaseError, check_release
from hicache_contracts.errors import ContractViolation
from hicache_contracts.prefix_keys import PrefixKeys
from hicache_contracts.models import validate_page_keys
from hicache_contracts.engine._check_acks import check_acks, check_unconfirmed_acks
from hicache_contracts.engine._check_backup import check_backup
from hicache_contracts.engine._check_base import (
    DERIVED_READ,
    HIT_QUERY,
    KV_READ,
    KV_WRITE,
    SIDECAR_READ,
    SIDECAR_WRITE,
    _Checker,
    check_int,
)
from hicache_contracts.engine._check_hits import check_hit_query
from hicache_contracts.engine._check_pages import check_sidecar_reads, check_sizes, locate, read_slices
from hicache_contracts.engine._check_prefix import check_prefixes, check_same_batch
from hicache_contracts.engine._report import TraceReport
from hicache_contracts.engine._trace import TraceOperation, resolve_operation_prefix

__all__ = ["check_acks", "check_operation", "check_trace"]


def check_trace(
    calls: Sequence[Any],
    *,
    chain: Sequence[str],
    prefix_keys: Optional[Sequence[str]],
    batch_size: int = STORAGE_BATCH_SIZE,
    page_size: Optional[int] = None,
    acks: Optional[Sequence[Any]] = None,
    agreed_pages: Optional[int] = None,
    terminated_before_slice: Optional[int] = None,
    backup_completed_tokens: Optional[int] = None,
    operation_id: Any = None,
    sglang_version: Optional[str] = None,
) -> TraceReport:
    """Return the verdict on one operation's calls (``rec.calls``, or ``TraceCall`` objects).

    ``chain`` is the operation's page keys after its prefix (a chain cut at the
    hit is completed from the recorded hit query); ``prefix_keys`` is the live
    object the controller used as the operation's prefix, not a copy (PFX-5).
    The other arguments are ``TraceOperation``'s fields of the same names;
    ``sglang_version`` moves the findings the divergence registry records for
    that release to ``report.divergences``. Bad arguments raise
    ContractViolation naming the argument. See docs/engines.md.
    """
    validate_page_keys(chain, field="check_trace.chain")
    if prefix_keys is not None:
        if isinstance(prefix_keys, (str, bytes)) or not isinstance(prefix_keys, Sequence):
            raise ContractViolation(
                "check_trace.prefix_keys", "must be None or a sequence of page keys", prefix_keys, "PFX-1"
            )
        validate_page_keys(
            prefix_keys if isinstance(prefix_keys, (list, tuple, PrefixKeys)) else tuple(prefix_keys),
            field="check_trace.prefix_keys",
        )
    initial, after_known, after = resolve_operation_prefix(calls, prefix_keys, tuple(chain))
    fields: dict[str, Any] = {
        "operation_id": operation_id,
        "chain": tuple(chain),
        "prefix_keys": None if initial is None else tuple(initial),
        "batch_size": batch_size,
        "page_size": page_size,
        "agreed_pages": agreed_pages,
        "terminated_before_slice": terminated_before_slice,
        "backup_completed_tokens": backup_completed_tokens,
        "acks": acks,
    }
    if after_known:
        fields["prefix_keys_after"] = None if after is None else tuple(after)
    # Validated below by check_trace's own rules (named check_trace.*), not as a trace file's operation.
    return _run(TraceOperation.model_construct(**fields), calls, sglang_version)


def check_operation(operation: TraceOperation, *, sglang_version: Optional[str] = None) -> TraceReport:
    """Return the verdict on one operation of a trace file (``sglang_version`` as for ``check_trace``)."""
    return _run(operation, operation.calls, sglang_version)


def _run(operation: TraceOperation, calls: Sequence[Any], sglang_version: Optional[str]) -> TraceReport:
    _validate(operation, calls, sglang_version)
    checker = _Checker(operation, calls)
    locate(checker)
    check_prefixes(checker)
    check_same_batch(checker)
    check_sizes(checker)
    hit = check_hit_query(checker)
    agreed = operation.agreed_pages
    if agreed is None and hit is not None:
        read_any = bool(checker.of_kind(KV_READ))
        # No read and no termination: the operation was revoked before IO (CTL-3), so nothing was agreed.
        agreed = hit if read_any or operation.terminated_before_slice is not None else 0
    asked, loaded, stopped = read_slices(checker, agreed)
    kv_complete = bool(asked) and not stopped and (agreed is None or sum(loaded) == agreed)
    check_sidecar_reads(checker, kv_complete, sum(loaded))
    check_backup(checker)
    report = checker.report()
    if operation.acks is not None:
        page_size = operation.page_size
        assert page_size is not None  # _validate asks for page_size with acks
        if agreed is not None:
            slice_pages = tuple(end - start for start, end in plan_batches(agreed, checker.batch_size))
        else:
            slice_pages = tuple(asked)
        # A read that broke a slicing rule was reported above; here it counts at most its slice's pages.
        loaded_pages = tuple(min(got, asked) for got, asked in zip(loaded, slice_pages))
        report = report.merged(
            check_acks(
                operation.acks,
                slice_pages=slice_pages,
                loaded_pages=loaded_pages,
                page_size=page_size,
                operation_id=operation.operation_id,
            )
        )
        report = report.merged(check_unconfirmed_acks(operation.acks, checker.confirmed_pages * page_size))
    if sglang_version is not None:
        kinds_by_index = {call.index: checker.kind(call) for call in checker.calls}
        report = _split_divergences(report, kinds_by_index, sglang_version)
    return report


def _validate(operation: TraceOperation, calls: Any, sglang_version: Optional[str]) -> None:
    """Raise ContractViolation, naming the ``check_trace`` argument, for settings the checker cannot use."""
    if sglang_version is not None:
        try:
            check_release(sglang_version)
        except UnknownReleaseError as error:
            raise ContractViolation(
                "check_trace.sglang_version", f"must be a pinned SGLang release ({error})", sglang_version, "PFX-2"
            ) from None
    check_int("check_trace.batch_size", operation.batch_size, 1, "CTL-2", optional=False)
    check_int("check_trace.page_size", operation.page_size, 1, "CTL-5")
    check_int("check_trace.agreed_pages", operation.agreed_pages, 0, "RANK-2")
    check_int("check_trace.terminated_before_slice", operation.terminated_before_slice, 0, "CTL-4")
    check_int("check_trace.backup_completed_tokens", operation.backup_completed_tokens, 0, "CTL-7")
    agreed_pages, chain = operation.agreed_pages, operation.chain
    if agreed_pages is not None and agreed_pages > len(chain):
        raise ContractViolation(
            "check_trace.agreed_pages", f"must be <= len(chain) = {len(chain)}", agreed_pages, "RANK-2"
        )
    if operation.page_size is None and (operation.acks is not None or operation.backup_completed_tokens is not None):
        raise ContractViolation(
            "check_trace.page_size", "must be given with acks or backup_completed_tokens", operation.page_size, "CTL-5"
        )
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        raise ContractViolation("check_trace.calls", "must be a list of recorded calls (rec.calls)", calls, "PFX-2")
    for position, call in enumerate(calls):
        if not hasattr(call, "method") or not hasattr(call, "extra_info_state"):
            raise ContractViolation(
                f"check_trace.calls[{position}]", "must be a RecordedCall or TraceCall", call, "PFX-2"
            )


# The SGLang function a divergence entry names, and the kinds of call it makes.
_KINDS_BY_FUNCTION = {
    "_storage_hit_query": (HIT_QUERY,),
    "_page_transfer": (KV_READ, DERIVED_READ, SIDECAR_READ),
    "_page_transfer_kv_batch": (KV_READ, DERIVED_READ),
    "_page_transfer_sidecar": (SIDECAR_READ,),
    "_page_backup": (KV_WRITE, SIDECAR_WRITE),
    "_page_backup_with_stable_layout": (KV_WRITE, SIDECAR_WRITE),
    "submit_prefetch": (HIT_QUERY, KV_READ, DERIVED_READ, SIDECAR_READ),
    "get_prefix_hash_values": (),  # DIV-20: the anchor's pages left out of the prefix no trace can show
    "trim_prefetch_full_head": (KV_READ, DERIVED_READ),
    "prefetch_thread_func": (HIT_QUERY,),
    "prefetch_io_aux_func": (KV_READ, DERIVED_READ, SIDECAR_READ),
    "backup_thread_func": (KV_WRITE, SIDECAR_WRITE),
    "count_pool_hits": (DERIVED_READ, SIDECAR_READ),
    "_trigger_backup": (KV_WRITE, SIDECAR_WRITE),
}


def _split_divergences(report: TraceReport, kinds_by_index: dict[int, Optional[str]], version: str) -> TraceReport:
    """Move the findings the registry records for release ``version`` from violations to divergences."""
    recorded = divergences_for_release(version)
    violations, diverging = [], []
    for violation in report.violations:
        entries = [item for item in recorded if item.clause_id == violation.clause]
        kind = None if violation.call_index is None else kinds_by_index.get(violation.call_index)
        # A call's finding: the entries whose function makes that kind of call; an operation's: those whose
        # function makes a kind of call the trace holds (a prefetch's, not a backup's), when there are such.
        wanted = {kind} if kind is not None else set(kinds_by_index.values()) - {None}
        narrowed = [
            item for item in entries if wanted & set(_KINDS_BY_FUNCTION.get(item.function.rsplit(".", 1)[-1], wanted))
        ]
        if kind is not None or narrowed:
            entries = narrowed
        if entries:
            diverging.append(
                violation.model_copy(update={"divergence": tuple(item.id for item in entries), "release": version})
            )
        else:
            violations.append(violation)
    return report.model_copy(
        update={"violations": tuple(violations), "divergences": report.divergences + tuple(diverging)}
    )
