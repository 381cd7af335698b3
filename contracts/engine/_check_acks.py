"""The trace checker's ack rules: ``check_acks`` (CTL-5, CTL-6, RANK-3, HYB-2) and ``check_unconfirmed_acks`` (CTL-11).

See docs/engines.md ("The ack schedule").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

from hicache_spec import compute_prefetch_acks
from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import FinalAck, PoolHitsAck, ProgressAck, validate_ack
from hicache_contracts.engine._check_base import _Findings, check_int
from hicache_contracts.engine._report import TraceReport
from hicache_spec.values import is_count

__all__ = ["check_acks", "check_unconfirmed_acks"]


def _parsed(ack: Any) -> Union[ProgressAck, PoolHitsAck, FinalAck]:
    return ack if isinstance(ack, (ProgressAck, PoolHitsAck, FinalAck)) else validate_ack(ack)


def _validated_pages(name: str, values: Any) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ContractViolation(f"check_acks.{name}", "must be a sequence of ints", values, "CTL-5")
    for position, value in enumerate(values):
        if not is_count(value):
            raise ContractViolation(f"check_acks.{name}[{position}]", "must be an int >= 0", value, "CTL-5")
    return tuple(values)


def check_acks(
    acks: Sequence[Any],
    *,
    slice_pages: Sequence[int],
    loaded_pages: Sequence[int],
    page_size: int,
    operation_id: Any = None,
) -> TraceReport:
    """Return the verdict on a prefetch's acks. Clauses: CTL-5, CTL-6, RANK-3, HYB-2.

    ``slice_pages[i]`` is how many pages slice i of the agreed keys asked
    for; ``loaded_pages`` holds, for the slices that were read, how many pages
    each loaded (shorter when IO stopped). The expected progress acks are
    ``hicache_spec.compute_prefetch_acks(slice_pages, loaded_pages, page_size)``;
    then at most one pool-hits ack (nonzero hits only when KV completed),
    then exactly one final ack, last, reporting the last progress ack's tokens.
    ``acks`` are ProgressAck / PoolHitsAck / FinalAck objects or dicts.
    """
    slices = _validated_pages("slice_pages", slice_pages)
    loaded = _validated_pages("loaded_pages", loaded_pages)
    check_int("check_acks.page_size", page_size, 1, "CTL-5", optional=False)
    if any(count < 1 for count in slices):
        raise ContractViolation("check_acks.slice_pages", "must hold ints >= 1", slices, "CTL-5")
    if len(loaded) > len(slices):
        raise ContractViolation(
            "check_acks.loaded_pages", f"must hold at most len(slice_pages) = {len(slices)} entries", loaded, "CTL-5"
        )
    for position, (got, asked) in enumerate(zip(loaded, slices)):
        if got > asked:
            raise ContractViolation(
                f"check_acks.loaded_pages[{position}]", f"must be <= slice_pages[{position}] = {asked}", got, "CTL-5"
            )
    if isinstance(acks, (str, bytes)) or not isinstance(acks, Sequence):
        raise ContractViolation("check_acks.acks", "must be a sequence of acks", acks, "CTL-5")
    parsed = [_parsed(ack) for ack in acks]

    expected = compute_prefetch_acks(slices, loaded, page_size)
    kv_complete = len(loaded) == len(slices) and all(got == asked for got, asked in zip(loaded, slices))
    owner = operation_id if operation_id is not None else (parsed[0].operation_id if parsed else None)
    findings = _Findings(owner)
    findings.check("CTL-5", "CTL-6", "RANK-3")
    for position, ack in enumerate(parsed):
        if ack.operation_id != owner:
            findings.fail(
                "CTL-5",
                f"{ack.kind} ack for operation {ack.operation_id!r} among the acks of {owner!r}",
                None,
                position,
            )
    progress = [(position, ack) for position, ack in enumerate(parsed) if isinstance(ack, ProgressAck)]
    _check_progress(findings, progress, expected)
    last_progress = max((position for position, _ in progress), default=-1)
    pool_hits = [(position, ack) for position, ack in enumerate(parsed) if isinstance(ack, PoolHitsAck)]
    if pool_hits:
        findings.check("HYB-2")
    for number, (position, ack) in enumerate(pool_hits):
        if number:
            findings.fail("HYB-2", "a second pool-hits ack; the sidecars are read and acked once", None, position)
        if position < last_progress:
            findings.fail(
                "HYB-2", "pool-hits ack before the last progress ack; sidecars are read after KV", None, position
            )
        if not kv_complete and any(hits for hits in ack.pool_hits.values()):
            findings.fail(
                "HYB-2",
                f"pool-hits ack reports {dict(ack.pool_hits)} although KV did not complete; the "
                "sidecars are not read then",
                None,
                position,
            )
    finals = [(position, ack) for position, ack in enumerate(parsed) if isinstance(ack, FinalAck)]
    _check_final(findings, finals, len(parsed), expected[-1] if expected else 0)
    return findings.report()


def _check_progress(findings: _Findings, progress: list[tuple[int, ProgressAck]], expected: Sequence[int]) -> None:
    """CTL-5 and RANK-3: one progress ack per slice, each naming its slice, with the expected cumulative tokens."""
    if len(progress) != len(expected):
        findings.fail(
            "CTL-5",
            f"{len(progress)} progress ack(s) for {len(expected)} slice(s); one per slice, also after a "
            "short slice or termination",
        )
        findings.fail(
            "RANK-3",
            f"{len(progress)} progress ack(s) where every rank emits {len(expected)}; the all-reduce of "
            "the missing or extra acks never matches across ranks",
        )
    previous = 0
    for number, (position, ack) in enumerate(progress):
        if ack.slice_index != number:
            findings.fail("CTL-5", f"progress ack number {number} names slice {ack.slice_index}", None, position)
        if ack.tokens < previous:
            findings.fail(
                "CTL-5",
                f"progress ack for slice {ack.slice_index} reports {ack.tokens} tokens, fewer than the "
                f"{previous} before it; acks are cumulative and non-decreasing",
                None,
                position,
            )
        previous = max(previous, ack.tokens)
        if number < len(expected) and ack.tokens != expected[number]:
            findings.fail(
                "CTL-5",
                f"progress ack for slice {number} reports {ack.tokens} tokens, expected "
                f"{expected[number]} (cumulative loaded tokens, frozen after the first short slice or "
                "termination)",
                None,
                position,
            )


def _check_final(findings: _Findings, finals: list[tuple[int, FinalAck]], count: int, expected_total: int) -> None:
    """CTL-6: exactly one final ack, the last of ``count``, reporting ``expected_total`` tokens."""
    if not finals:
        findings.fail(
            "CTL-6",
            "no final ack; every prefetch ends with one, also when the backend raised or the operation was terminated",
        )
    for number, (position, ack) in enumerate(finals):
        if number:
            findings.fail("CTL-6", "a second final ack; there is exactly one", None, position)
        elif position != count - 1:
            findings.fail("CTL-6", f"the final ack is ack {position} of {count}; it must be the last", None, position)
        if number == 0 and ack.tokens != expected_total:
            findings.fail(
                "CTL-6",
                f"the final ack reports {ack.tokens} tokens; the operation loaded {expected_total}",
                None,
                position,
            )


def check_unconfirmed_acks(acks: Sequence[Any], bound: int) -> TraceReport:
    """CTL-11: no ack counts more than ``bound`` tokens (every page the backend confirmed in the trace)."""
    findings = _Findings()
    findings.check("CTL-11")
    for position, ack in enumerate(acks):
        ack = _parsed(ack)
        tokens = getattr(ack, "tokens", None)
        if tokens is not None and tokens > bound:
            findings.fail(
                "CTL-11",
                f"{ack.kind} ack counts {tokens} tokens but the backend confirmed only {bound} "
                "(a raise, a False or a malformed result is a failure at that page)",
                None,
                position,
            )
    return findings.report()
