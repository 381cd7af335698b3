"""The trace checker: does one operation's recorded calls (and acks) follow the engine-side clauses?

The spec functions are the oracle; nothing here re-derives a rule:

    expected_prefixes / prefix_before   the prefix each call must carry (PFX-2)
    plan_batches                        the slices of an operation (CTL-2)
    confirmed_pages / confirmed_hit     pages a call confirmed (CTL-11, hicache_spec.confirmation)
    compute_prefetch_acks               the progress ack after each slice (CTL-5)
    compute_backup_progress             the tokens a backup completed (CTL-7)
    compute_trailing_window             the pages a TRAILING_PAGES sidecar reads (HYB-3)

Calls are told apart by method (and, for ``batch_get_v2``, by whether its
transfers are KV-derived):

    hit query        batch_exists, batch_exists_v2
    KV read          batch_get_v1, batch_get (legacy)
    KV-derived read  batch_get_v2 whose transfers all have indices_from_pool = kv
    sidecar read     batch_get_v2 with no KV-derived transfer
    KV write         batch_set_v1, batch_set (legacy)
    sidecar write    batch_set_v2

Other methods (get, set, exists, clear, get_stats, register_*) are not checked.

How SGLang 0.5.23 calls backends, and so what the checker accepts:

- the hit query (CTL-1) is one call over the whole chain (``batch_exists_v2``
  with the pool transfers, else ``batch_exists``) or slice by slice, stopping
  after the first slice not fully hit; it is not held to CTL-2's size limit;
- sidecar v2 reads and writes (HYB-2, HYB-5) are one call per trailing-length
  group (``plan_sidecar_groups``), not sliced by batch_size; each call's
  prefix joins its transfers' keys (PFX-9). A controller that instead splits
  a long pool into batch_size parts (as few as CTL-2 needs) is accepted too;
- KV reads, KV-derived reads and KV writes are the only calls sliced by
  batch_size (CTL-2).

A ``batch_get_v2`` is a KV-derived read when every transfer says
``indices_from_pool = kv``, or when none is TRAILING_PAGES and it follows the
KV read of a slice on the same thread with that read's keys in every transfer:
SGLang builds each slice's KV-derived transfers afresh, without
``indices_from_pool`` (``HiCacheController._page_transfer_kv_batch``).

``chain`` may stop at the hit (SGLang cuts ``operation.hash_value`` to it
after the query): when it is a strict start of the keys the recorded hit query
asked for, and no longer than the hit that query found, the checker takes the
queried keys as the chain.

Page confirmation (CTL-11) is ``hicache_spec.confirmation``: the rule the
reference controller counts by.

With ``sglang_version=V``, a finding whose clause the divergence registry
(``hicache_spec.divergences``) records for release V — for a call, by an entry
whose SGLang function makes that kind of call — moves from ``violations`` to
``divergences``, naming the entries; it is shown but does not fail the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from hicache_spec import (
    STORAGE_BATCH_SIZE,
    compute_backup_progress,
    compute_prefetch_acks,
    compute_trailing_window,
    expected_prefixes,
    plan_batches,
    prefix_before,
)

# PFX-9's grouping rule (hicache_spec.plan_sidecar_groups) is applied per call below: a call's
# prefix is the operation's prefix followed by the chain up to its transfers' first key.
from hicache_spec.confirmation import confirmed_hit, confirmed_pages
from hicache_spec.divergences import divergences_for_release
from hicache_spec.releases import UnknownReleaseError, check_release
from hicache_contracts.capabilities import EXTRA_INFO_METHODS
from hicache_contracts.errors import ContractViolation
from hicache_contracts.prefix_keys import PrefixKeys
from hicache_contracts.models import FinalAck, PoolHitsAck, ProgressAck, validate_ack, validate_page_keys
from hicache_contracts.engine._recorder import EXTRA_INFO_ABSENT, EXTRA_INFO_PRESENT
from hicache_contracts.engine._report import TraceReport, TraceViolation
from hicache_contracts.engine._trace import TraceOperation, resolve_operation_prefix

__all__ = ["check_acks", "check_operation", "check_trace"]

HIT_QUERY = "hit query"
KV_READ = "KV read"
DERIVED_READ = "KV-derived read"
SIDECAR_READ = "sidecar read"
KV_WRITE = "KV write"
SIDECAR_WRITE = "sidecar write"

_KIND_BY_METHOD = {
    "batch_exists": HIT_QUERY,
    "batch_exists_v2": HIT_QUERY,
    "batch_get_v1": KV_READ,
    "batch_get": KV_READ,
    "batch_set_v1": KV_WRITE,
    "batch_set": KV_WRITE,
    "batch_set_v2": SIDECAR_WRITE,
}
_SLICED_KINDS = (HIT_QUERY, KV_READ, DERIVED_READ, KV_WRITE)
"""Kinds whose keys are a run of the chain, so that the call has an offset."""
_KV = "kv"
_TRAILING_PAGES = "trailing_pages"


def _kind_of(call: Any) -> Optional[str]:
    """Return the role of a call in its operation, or None for a call the checker does not look at."""
    if call.method == "batch_get_v2":
        transfers = call.transfers or ()
        if transfers and all(transfer.indices_from_pool == _KV for transfer in transfers):
            return DERIVED_READ
        return SIDECAR_READ
    return _KIND_BY_METHOD.get(call.method)


def _kinds_of(calls: Sequence[Any]) -> dict[int, Optional[str]]:
    """Return each call's role (by ``id``), a batch_get_v2 that reads a slice's KV keys counted as KV-derived."""
    kinds = {id(call): _kind_of(call) for call in calls}
    last_kv_read: dict[Any, Any] = {}
    for call in calls:
        kind = kinds[id(call)]
        if kind == KV_READ:
            last_kv_read[call.thread_id] = call
        elif kind == SIDECAR_READ:
            read = last_kv_read.get(call.thread_id)
            transfers = call.transfers or ()
            if (
                read is not None
                and transfers
                and all(
                    transfer.hit_policy != _TRAILING_PAGES and tuple(transfer.keys or ()) == tuple(read.all_keys)
                    for transfer in transfers
                )
            ):
                kinds[id(call)] = DERIVED_READ
        if kind not in (KV_READ, None):
            last_kv_read.pop(call.thread_id, None)
    return kinds


def _queried_chain(calls: Sequence[Any], kinds: dict[int, Optional[str]], chain: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return ``chain``, or the keys the hit query asked for when ``chain`` stops at the hit they found."""
    queried: list[Any] = []
    hit = 0
    for call in calls:
        if kinds[id(call)] != HIT_QUERY:
            continue
        keys = tuple(call.all_keys)
        found = _hit_count(call)
        queried.extend(keys)
        hit += found
        if found < len(keys):
            break
    queried_keys = tuple(queried)
    if len(chain) < len(queried_keys) and len(chain) <= hit and queried_keys[: len(chain)] == chain:
        return queried_keys
    return chain


# The SGLang function a divergence entry names, and the kinds of call it makes.
_KINDS_BY_FUNCTION = {
    "_storage_hit_query": (HIT_QUERY,),
    "_page_transfer": (KV_READ, DERIVED_READ, SIDECAR_READ),
    "_page_transfer_kv_batch": (KV_READ, DERIVED_READ),
    "_page_transfer_sidecar": (SIDECAR_READ,),
    "_page_backup": (KV_WRITE, SIDECAR_WRITE),
    "_page_backup_with_stable_layout": (KV_WRITE, SIDECAR_WRITE),
    "submit_prefetch": (HIT_QUERY, KV_READ, DERIVED_READ, SIDECAR_READ),
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


def _describe(keys: Any) -> str:
    if keys is None:
        return "None"
    return f"{len(keys)} key(s)" if len(keys) != 1 else "1 key"


def _first_difference(received: Sequence[Any], expected: Optional[Sequence[Any]]) -> str:
    for position, (got, wanted) in enumerate(zip(received, expected or ())):
        if got != wanted:
            return f"; first difference at position {position}"
    return ""


def _leading_flags(result: Any, count: int) -> int:
    """Return the pages a v1/v2/legacy read or write confirmed, by the controller's rule (CTL-11).

    The recorder keeps a list result as a tuple copy, so either is taken as the list the engine received.
    """
    return confirmed_pages(result, count, snapshot=True)


def _written_pages(call: Any, count: int) -> int:
    """Return the pages a KV write confirmed; a legacy ``batch_set`` confirms its whole batch with one ``True``."""
    if call.raised is not None:
        return 0
    if call.method == "batch_set":
        return count if call.result is True else 0
    return _leading_flags(call.result, count)


def _hit_count(call: Any) -> int:
    """Return the pages a hit-query call reported, clamped to its keys; a raise or a malformed result is 0 (CTL-11)."""
    if call.raised is not None:
        return 0
    result = call.result
    if isinstance(result, dict):
        result = result.get("kv_hit_pages")
    return confirmed_hit(result, len(call.all_keys))


def _check_int(name: str, value: Any, minimum: int, clause_id: str, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if type(value) is not int or value < minimum:
        raise ContractViolation(name, f"must be an int >= {minimum}", value, clause_id)


class _Checker:
    """The checks of one operation; ``run`` returns its report."""

    def __init__(
        self,
        calls: Sequence[Any],
        chain: tuple[Any, ...],
        initial: Optional[tuple[Any, ...]],
        after_known: bool,
        after: Any,
        batch_size: int,
        page_size: Optional[int],
        acks: Optional[Sequence[Any]],
        agreed_pages: Optional[int],
        terminated_before_slice: Optional[int],
        backup_completed_tokens: Optional[int],
        operation_id: Any,
        sglang_version: Optional[str] = None,
    ) -> None:
        self.calls = list(calls)
        self.kinds = _kinds_of(self.calls)
        chain = _queried_chain(self.calls, self.kinds, chain)
        self.chain = chain
        self.sglang_version = sglang_version
        self.initial = initial
        self.after_known = after_known
        self.after = after
        self.batch_size = batch_size
        self.page_size = page_size
        self.acks = acks
        self.agreed_pages = agreed_pages
        self.terminated_before_slice = terminated_before_slice
        self.backup_completed_tokens = backup_completed_tokens
        self.operation_id = operation_id
        self.violations: list[TraceViolation] = []
        self.checked: dict[str, None] = {}
        self.position: dict[str, int] = {}
        for index, key in enumerate(chain):
            self.position.setdefault(key, index)
        self.expected_by_slice = None if initial is None else expected_prefixes(initial, chain, batch_size)
        self.offsets: dict[int, Optional[int]] = {}
        self.confirmed_pages = 0
        """Pages every KV read confirmed, the reads that broke a rule included (CTL-11)."""

    # ------------------------------------------------------------ helpers
    def fail(self, clause_id: str, message: str, call: Any = None, ack_index: Optional[int] = None) -> None:
        self.violations.append(
            TraceViolation(
                clause=clause_id,
                message=message,
                call_index=None if call is None else call.index,
                ack_index=ack_index,
            )
        )

    def check(self, *clause_ids: str) -> None:
        for clause_id in clause_ids:
            self.checked[clause_id] = None

    def of_kind(self, kind: str) -> list[Any]:
        return [call for call in self.calls if self.kinds[id(call)] == kind]

    def expected_prefix(self, offset: int) -> Optional[tuple[str, ...]]:
        if offset % self.batch_size == 0 and self.expected_by_slice is not None:
            slot = offset // self.batch_size
            if slot < len(self.expected_by_slice):
                return self.expected_by_slice[slot]
        return prefix_before(self.initial, self.chain, offset)

    def slice_keys(self, slice_index: int) -> tuple[Any, ...]:
        start = slice_index * self.batch_size
        return self.chain[start : start + self.batch_size]

    # ------------------------------------------------------------ offsets (CTL-2)
    def locate(self) -> None:
        """Find each sliced call's offset in the chain; a call whose keys are not a run of it breaks CTL-2."""
        for call in self.calls:
            kind = self.kinds[id(call)]
            if kind not in _SLICED_KINDS:
                continue
            keys = call.all_keys
            if kind == DERIVED_READ:
                for transfer in call.transfers[1:]:
                    if transfer.keys != keys:
                        self.fail(
                            "HYB-1",
                            f"{kind} {call.method}: transfer {transfer.name!r} has other keys than "
                            f"transfer {call.transfers[0].name!r}; every KV-derived transfer of a slice "
                            "reads the slice's KV keys",
                            call,
                        )
                        self.check("HYB-1")
            if not keys:
                self.offsets[id(call)] = None
                continue
            offset = self.position.get(keys[0])
            if offset is None or tuple(keys) != self.chain[offset : offset + len(keys)]:
                where = (
                    "its first key is not in the operation's chain"
                    if offset is None
                    else (f"its keys are not the run of the chain that starts at page {offset}")
                )
                self.fail("CTL-2", f"{kind} {call.method} with {_describe(keys)}: {where}", call)
                self.offsets[id(call)] = None
                continue
            self.offsets[id(call)] = offset

    # ------------------------------------------------------------ prefix metadata
    def check_prefixes(self) -> None:
        """PFX-1, PFX-2, PFX-3, PFX-4, PFX-7, PFX-9 per call; PFX-5 on calls and on the operation's prefix."""
        for call in self.calls:
            if call.method not in EXTRA_INFO_METHODS:
                continue
            kind = self.kinds[id(call)]
            state = call.extra_info_state
            self.check("PFX-1")
            if call.prefix_keys_problem is not None:
                self.fail(
                    "PFX-1",
                    f"{kind} {call.method}: {call.prefix_keys_problem}; prefix_keys must be None or a sequence of keys",
                    call,
                )
                continue
            if self.initial is None:
                self.check("PFX-3")
                if state == EXTRA_INFO_PRESENT and call.prefix_keys is not None:
                    self.fail(
                        "PFX-3",
                        f"{kind} {call.method}: the operation's prefix is None (feature off) but the "
                        f"call received prefix_keys with {_describe(call.prefix_keys)}",
                        call,
                    )
                continue
            self.check("PFX-7", "PFX-4")
            if state != EXTRA_INFO_PRESENT:
                how = "no extra_info argument" if state == EXTRA_INFO_ABSENT else "extra_info=None"
                self.fail(
                    "PFX-7",
                    f"{kind} {call.method}: the feature is on (operation prefix of "
                    f"{_describe(self.initial)}) but the call passed {how}",
                    call,
                )
                continue
            if call.prefix_keys is None:
                collapsed = "[] collapsed to None" if not self.initial else "a list turned into None"
                self.fail(
                    "PFX-4",
                    f"{kind} {call.method}: received prefix_keys=None while the feature is on ({collapsed})",
                    call,
                )
                continue
            self.check_prefix_value(call, kind)
        self.check_prefix_immutability()

    def check_prefix_value(self, call: Any, kind: Optional[str]) -> None:
        received = call.prefix_keys
        if kind in (SIDECAR_READ, SIDECAR_WRITE):
            self.check_sidecar_prefix(call, kind, received)
            return
        offset = self.offsets.get(id(call))
        if offset is None and kind == HIT_QUERY and not call.all_keys:
            offset = 0  # an empty hit query asks about the operation's start
        if offset is None:
            return
        self.check("PFX-2")
        expected = self.expected_prefix(offset)
        if received == expected:
            return
        if not self.initial and len(received) == 0 and expected:
            self.fail(
                "PFX-4",
                f"{kind} {call.method} at page {offset}: received [] but {_describe(expected)} "
                "precede its first key; an empty prefix must grow like any list",
                call,
            )
            return
        self.fail(
            "PFX-2",
            f"{kind} {call.method} at page {offset}: received a prefix of {_describe(received)}, "
            f"expected the operation's prefix ({_describe(self.initial)}) followed by chain[:{offset}] "
            f"= {_describe(expected)}{_first_difference(received, expected)}",
            call,
        )

    def check_sidecar_prefix(self, call: Any, kind: Optional[str], received: Any) -> None:
        """PFX-9: a sidecar call's prefix is the operation's prefix followed by the chain before its transfers' keys."""
        self.check("PFX-9")
        starts = {}
        for transfer in call.transfers or ():
            keys = tuple(transfer.keys or ())
            if not keys:
                continue  # an empty transfer joins any prefix
            start = self.position.get(keys[0])
            if start is None or keys != self.chain[start : start + len(keys)]:
                continue  # keys outside the chain are HYB-2/HYB-3 findings, not prefix ones
            starts[start] = transfer.name
        if len(starts) > 1:
            self.fail(
                "PFX-9",
                f"{kind} {call.method}: transfers whose keys start at pages {sorted(starts)} share "
                "one prefix, which cannot join all of them; one call per trailing-length group",
                call,
            )
            return
        if not starts:
            return
        ((start, name),) = starts.items()
        expected = prefix_before(self.initial, self.chain, start)
        if received != expected:
            self.fail(
                "PFX-9",
                f"{kind} {call.method}: received a prefix of {_describe(received)}; transfer "
                f"{name!r} starts at page {start}, so its prefix is the operation's prefix followed by "
                f"chain[:{start}] = {_describe(expected)}{_first_difference(received, expected)}",
                call,
            )

    def check_prefix_immutability(self) -> None:
        for call in self.calls:
            if call.extra_info_state != EXTRA_INFO_PRESENT or call.prefix_keys is None:
                continue
            self.check("PFX-5")
            changed, value, problem = call.current_prefix()
            if changed:
                now = problem or _describe(value)
                self.fail(
                    "PFX-5",
                    f"{call.method}: the prefix handed to the backend changed after the call: "
                    f"{_describe(call.prefix_keys)} at call time, {now} now",
                    call,
                )
        if self.after_known:
            self.check("PFX-5")
            if self.after != self.initial:
                self.fail(
                    "PFX-5",
                    f"the operation's own prefix changed during the operation: "
                    f"{_describe(self.initial)} when first handed out, {_describe(self.after)} now",
                )

    def check_same_batch(self) -> None:
        """PFX-8: a KV-derived v2 read carries the prefix of the KV read of its slice."""
        kv_reads_by_offset: dict[int, Any] = {}
        for call in self.calls:
            kind = self.kinds[id(call)]
            offset = self.offsets.get(id(call))
            if kind == KV_READ and offset is not None and call.method in EXTRA_INFO_METHODS:
                kv_reads_by_offset[offset] = call
            elif kind == DERIVED_READ and offset is not None and offset in kv_reads_by_offset:
                kv_read = kv_reads_by_offset[offset]
                self.check("PFX-8")
                mine = call.prefix_keys if call.extra_info_state == EXTRA_INFO_PRESENT else None
                theirs = kv_read.prefix_keys if kv_read.extra_info_state == EXTRA_INFO_PRESENT else None
                if (mine is None) != (theirs is None) or (mine is not None and mine != theirs):
                    self.fail(
                        "PFX-8",
                        f"KV-derived read at page {offset} carries a prefix of {_describe(mine)} "
                        f"({call.extra_info_state} extra_info) but the KV read of that slice (call "
                        f"#{kv_read.index}) carries {_describe(theirs)}",
                        call,
                    )

    # ------------------------------------------------------------ slicing
    def check_sizes(self) -> None:
        """CTL-2: no call carries more than batch_size keys; IO and backup calls start at multiples of it."""
        for call in self.calls:
            kind = self.kinds[id(call)]
            if kind is None:
                continue
            self.check("CTL-2")
            counts = [len(call.keys)] if call.keys is not None else []
            counts += [len(transfer.keys) for transfer in call.transfers or () if transfer.keys is not None]
            largest = max(counts, default=0)
            if kind in (HIT_QUERY, SIDECAR_READ, SIDECAR_WRITE):
                continue  # not sliced: the whole-chain hit query and the trailing-length groups (module docstring)
            if largest > self.batch_size:
                self.fail(
                    "CTL-2",
                    f"{kind} {call.method} carries {largest} keys, more than batch_size {self.batch_size}",
                    call,
                )
            offset = self.offsets.get(id(call))
            if kind in (KV_READ, DERIVED_READ, KV_WRITE) and offset is not None and offset % self.batch_size:
                self.fail(
                    "CTL-2",
                    f"{kind} {call.method} starts at page {offset}, not a multiple of batch_size {self.batch_size}",
                    call,
                )

    def check_hit_query(self) -> Optional[int]:
        """CTL-1; return the hit the query found (pages), or None when the trace holds no hit query."""
        queries = self.of_kind(HIT_QUERY)
        if not queries:
            return None
        self.check("CTL-1")
        hit = 0
        short_slice: Optional[int] = None
        covered = 0
        for slice_index, call in enumerate(queries):
            keys = call.all_keys
            if short_slice is not None:
                self.fail(
                    "CTL-1",
                    f"hit query continued with pages [{self.offsets.get(id(call))}...) after slice "
                    f"{short_slice} was not fully hit",
                    call,
                )
                continue
            if tuple(keys) != self.slice_keys(slice_index) and not (
                slice_index == 0 and tuple(keys) == self.chain  # one call over the whole chain
            ):
                self.fail(
                    "CTL-1",
                    f"hit query call {slice_index} asks for {_describe(keys)} at page "
                    f"{self.offsets.get(id(call))}; slice {slice_index} is pages "
                    f"[{slice_index * self.batch_size}, "
                    f"{slice_index * self.batch_size + len(self.slice_keys(slice_index))})",
                    call,
                )
            found = _hit_count(call)
            hit += found
            covered += len(keys)
            if found < len(keys):
                short_slice = slice_index
        if short_slice is None and covered < len(self.chain):
            self.fail(
                "CTL-1",
                f"hit query stopped after {covered} of {len(self.chain)} pages although every slice was fully hit",
                queries[-1],
            )
        return hit

    def read_slices(self, agreed: Optional[int]) -> tuple[list[int], list[int], bool]:
        """CTL-4, HYB-1, RANK-2; return (pages asked per slice read, pages loaded per slice read, stopped early)."""
        reads = self.of_kind(KV_READ)
        derived = self.of_kind(DERIVED_READ)
        derived_by_offset: dict[int, list[Any]] = {}
        for call in derived:
            offset = self.offsets.get(id(call))
            if offset is not None:
                derived_by_offset.setdefault(offset, []).append(call)
        asked: list[int] = []
        loaded: list[int] = []
        stop: Optional[str] = None
        read_offsets = set()
        if reads:
            self.check("CTL-4")
            if agreed is not None:
                self.check("RANK-2")
        terminated = self.terminated_before_slice
        for slice_index, call in enumerate(reads):
            offset = self.offsets.get(id(call))
            keys = call.all_keys
            got = 0 if call.raised is not None else _leading_flags(call.result, len(keys))
            self.confirmed_pages += got
            if stop is None and terminated is not None and slice_index >= terminated:
                stop = f"the operation was terminated before slice {terminated}"
            if stop is not None:
                self.fail("CTL-4", f"KV read of pages [{offset}...) after {stop}", call)
                continue
            start = slice_index * self.batch_size
            end = start + self.batch_size if agreed is None else min(start + self.batch_size, agreed)
            last = slice_index == len(reads) - 1
            in_order = offset == start and (
                len(keys) == end - start or (agreed is None and last and len(keys) < end - start)
            )
            if (
                offset is not None
                and offset % self.batch_size == 0
                and not in_order
                and start < (len(self.chain) if agreed is None else agreed)
            ):
                self.fail(
                    "CTL-4",
                    f"KV read {slice_index} reads pages [{offset}, {offset + len(keys)}) but slice "
                    f"{slice_index} of the agreed keys is pages [{start}, {end})",
                    call,
                )
            if agreed is not None and offset is not None and offset + len(keys) > agreed:
                self.fail(
                    "RANK-2",
                    f"KV read of pages [{offset}, {offset + len(keys)}) goes beyond the agreed hit of {agreed} pages",
                    call,
                )
            for sidecar in () if offset is None else derived_by_offset.get(offset, ()):
                self.check("HYB-1")
                for transfer in sidecar.transfers:
                    flags = (sidecar.result or {}).get(transfer.name) if isinstance(sidecar.result, dict) else None
                    sidecar_got = 0 if sidecar.raised is not None else _leading_flags(flags, len(transfer.keys or ()))
                    got = min(got, sidecar_got)
            if offset is not None:
                read_offsets.add(offset)
            asked.append(len(keys))
            loaded.append(got)
            if got < len(keys):
                stop = f"slice {slice_index} loaded {got} of {len(keys)} pages"
        for call in derived:
            offset = self.offsets.get(id(call))
            if offset is not None and offset not in read_offsets:
                self.check("HYB-1")
                self.fail(
                    "HYB-1",
                    f"KV-derived read of pages [{offset}...) has no KV read of the same slice "
                    "(or follows the end of IO)",
                    call,
                )
        stopped = stop is not None or (terminated is not None and terminated <= len(asked))
        if reads and agreed is not None and not stopped and sum(asked) < agreed:
            self.fail(
                "CTL-4",
                f"IO read {sum(asked)} of the {agreed} agreed pages and stopped although no slice "
                "was short and the operation was not terminated",
                reads[-1],
            )
        return asked, loaded, stopped

    def check_sidecar_reads(self, kv_complete: bool, loaded_pages: int) -> None:
        """HYB-2 (once, after KV completed) and HYB-3 (trailing windows end at the hit), read with CTL-2.

        The read may be split into as few batch_get_v2 calls as CTL-2 needs
        for the longest pool's pages, one after the other; a pool's window is
        the keys of its transfers joined in call order.
        """
        sidecars = self.of_kind(SIDECAR_READ)
        if not sidecars:
            return
        self.check("HYB-2")
        last_kv = max(
            (call.index for call in self.calls if self.kinds[id(call)] in (KV_READ, DERIVED_READ)), default=-1
        )
        keys_per_pool: dict[Any, list[Any]] = {}
        policy_per_pool: dict[Any, Any] = {}
        for call in sidecars:
            for transfer in call.transfers or ():
                keys_per_pool.setdefault(transfer.name, []).extend(transfer.keys or ())
                policy_per_pool[transfer.name] = transfer.hit_policy
        needed = self.sidecar_calls_allowed(keys_per_pool)
        for number, call in enumerate(sidecars):
            if number >= needed:
                self.fail(
                    "HYB-2",
                    f"sidecar read number {number + 1}: other sidecars are read once per prefetch "
                    f"(in {needed} call(s): one per trailing-length group, or as few as CTL-2 needs to "
                    "split the longest pool)",
                    call,
                )
            if not kv_complete:
                self.fail(
                    "HYB-2",
                    "sidecar read although KV IO did not complete (a short slice, termination or a partial read)",
                    call,
                )
            if call.index < last_kv:
                self.fail("HYB-2", f"sidecar read before KV IO finished (KV call #{last_kv} comes later)", call)
        for name, keys in keys_per_pool.items():
            if len(set(keys)) != len(keys):
                self.fail(
                    "HYB-2",
                    f"sidecar pool {name!r} had a page read twice; other sidecars are read once per prefetch",
                    sidecars[-1],
                )
            if policy_per_pool[name] != _TRAILING_PAGES or not keys:
                continue
            self.check("HYB-3")
            start, end = compute_trailing_window(loaded_pages, len(keys))
            if tuple(keys) != self.chain[start:end]:
                where = self.position.get(keys[0])
                self.fail(
                    "HYB-3",
                    f"TRAILING_PAGES transfer {name!r} reads {_describe(keys)} from page {where}; "
                    f"its window is pages [{start}, {end}), ending at the hit of {loaded_pages} pages",
                    sidecars[0],
                )

    def sidecar_calls_allowed(self, keys_per_pool: dict[Any, list[Any]]) -> int:
        """How many sidecar v2 calls an operation may make: one per trailing-length group (PFX-9), or CTL-2's split."""
        groups = len({len(set(keys)) for keys in keys_per_pool.values()})
        longest = max((len(set(keys)) for keys in keys_per_pool.values()), default=0)
        return max(1, groups, len(plan_batches(longest, self.batch_size)))

    def check_backup(self) -> None:
        """CTL-7, CTL-13, HYB-5."""
        writes = self.of_kind(KV_WRITE)
        sidecar_writes = self.of_kind(SIDECAR_WRITE)
        if sidecar_writes:
            self.check("HYB-5")
            first_kv = min((call.index for call in writes), default=None)
            keys_per_pool: dict[Any, list[Any]] = {}
            for call in sidecar_writes:
                for transfer in call.transfers or ():
                    keys_per_pool.setdefault(transfer.name, []).extend(transfer.keys or ())
            needed = self.sidecar_calls_allowed(keys_per_pool)
            for number, call in enumerate(sidecar_writes):
                if number >= needed:
                    self.fail(
                        "HYB-5",
                        f"sidecar write number {number + 1}: sidecars are written in {needed} "
                        "batch_set_v2 call(s): one per trailing-length group, or as few as CTL-2 needs to "
                        "split the longest pool",
                        call,
                    )
                if first_kv is not None and call.index > first_kv:
                    self.fail("HYB-5", f"sidecar write after the KV write call #{first_kv}; sidecars go first", call)
            for name, keys in keys_per_pool.items():
                if len(set(keys)) != len(keys):
                    self.fail(
                        "HYB-5",
                        f"sidecar pool {name!r} had a page written twice; each sidecar page is written once per backup",
                        sidecar_writes[-1],
                    )
        if not writes:
            return
        self.check("CTL-7", "CTL-13")
        slice_ok: list[bool] = []
        failed: Optional[int] = None
        covered = 0
        for slice_index, call in enumerate(writes):
            keys = call.all_keys
            offset = self.offsets.get(id(call))
            if failed is not None:
                self.fail("CTL-7", f"backup wrote pages [{offset}...) after slice {failed} failed", call)
                continue
            if tuple(keys) != self.slice_keys(slice_index):
                self.fail(
                    "CTL-7",
                    f"backup write {slice_index} writes pages [{offset}...) but slice {slice_index} "
                    f"is pages [{slice_index * self.batch_size}...)",
                    call,
                )
            ok = _written_pages(call, len(keys)) == len(keys)
            slice_ok.append(ok)
            covered += len(keys)
            if not ok:
                failed = slice_index
        if failed is None and covered < len(self.chain):
            self.fail(
                "CTL-13",
                f"backup stopped after {covered} of {len(self.chain)} pages without a failed slice",
                writes[-1],
            )
        if self.backup_completed_tokens is not None:
            assert self.page_size is not None  # check_trace asks for page_size with backup_completed_tokens
            slice_pages = tuple(end - start for start, end in plan_batches(len(self.chain), self.batch_size))
            expected = compute_backup_progress(slice_pages, tuple(slice_ok[: len(slice_pages)]), self.page_size)
            if self.backup_completed_tokens != expected:
                self.fail(
                    "CTL-7",
                    f"backup reported {self.backup_completed_tokens} completed tokens; its writes completed {expected}",
                )

    # ------------------------------------------------------------ run
    def run(self) -> TraceReport:
        self.locate()
        self.check_prefixes()
        self.check_same_batch()
        self.check_sizes()
        hit = self.check_hit_query()
        agreed = self.agreed_pages
        if agreed is None and hit is not None:
            read_any = bool(self.of_kind(KV_READ))
            # No read and no termination: the operation was revoked before IO (CTL-3), so nothing was agreed.
            agreed = hit if read_any or self.terminated_before_slice is not None else 0
        asked, loaded, stopped = self.read_slices(agreed)
        kv_complete = bool(asked) and not stopped and (agreed is None or sum(loaded) == agreed)
        self.check_sidecar_reads(kv_complete, sum(loaded))
        self.check_backup()
        report = TraceReport(
            violations=tuple(self.violations), checked=tuple(self.checked), operation_id=self.operation_id
        )
        if self.acks is not None:
            assert self.page_size is not None  # check_trace asks for page_size with acks
            if agreed is not None:
                slice_pages = tuple(end - start for start, end in plan_batches(agreed, self.batch_size))
            else:
                slice_pages = tuple(asked)
            # A read that broke a slicing rule was reported above; here it counts at most its slice's pages.
            loaded_pages = tuple(min(got, asked) for got, asked in zip(loaded, slice_pages))
            report = report.merged(
                check_acks(
                    self.acks,
                    slice_pages=slice_pages,
                    loaded_pages=loaded_pages,
                    page_size=self.page_size,
                    operation_id=self.operation_id,
                )
            )
            report = report.merged(self.check_unconfirmed_acks())
        if self.sglang_version is not None:
            kinds_by_index = {call.index: self.kinds[id(call)] for call in self.calls}
            report = _split_divergences(report, kinds_by_index, self.sglang_version)
        return report

    def check_unconfirmed_acks(self) -> TraceReport:
        """CTL-11: no ack counts more tokens than every page the backend confirmed in this trace."""
        assert self.acks is not None and self.page_size is not None  # called only for a trace with acks
        bound = self.confirmed_pages * self.page_size
        violations = []
        for position, ack in enumerate(self.acks):
            ack = ack if isinstance(ack, (ProgressAck, PoolHitsAck, FinalAck)) else validate_ack(ack)
            tokens = getattr(ack, "tokens", None)
            if tokens is not None and tokens > bound:
                violations.append(
                    TraceViolation(
                        clause="CTL-11",
                        ack_index=position,
                        message=f"{ack.kind} ack counts {tokens} tokens but the backend confirmed only {bound} "
                        "(a raise, a False or a malformed result is a failure at that page)",
                    )
                )
        return TraceReport(violations=tuple(violations), checked=("CTL-11",))


def _keys_argument(value: Any, name: str) -> tuple[Any, ...]:
    validate_page_keys(value, field=f"check_trace.{name}")
    return tuple(value)


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

    ``chain`` is the operation's ordered page keys, after its prefix; a call's
    offset is where its first key sits in it. A chain cut at the hit (SGLang's
    ``operation.hash_value`` once the query ran) is completed from the recorded
    hit query. ``prefix_keys`` is the
    operation's prefix: pass the live object the controller used (for
    example ``operation.prefix_keys``), not a copy, so that a change the
    controller made to it can be seen (PFX-5); when a call received that very
    object, the recorder's snapshot at that call is taken as the operation's
    starting prefix.

    Optional: ``acks`` (the prefetch's ProgressAck/PoolHitsAck/FinalAck, or
    dicts) with ``page_size`` to check the ack schedule; ``agreed_pages``
    (default: the hit the recorded hit query found, or 0 when no KV read
    happened and no termination is given: a prefetch revoked before IO);
    ``terminated_before_slice``
    (no read may start for a later slice); ``backup_completed_tokens`` with
    ``page_size``; ``sglang_version`` (a pinned release: findings the
    divergence registry records for it are reported in ``report.divergences``,
    not as violations). Bad arguments raise ContractViolation naming the argument.
    """
    chain_keys = _keys_argument(chain, "chain")
    if prefix_keys is not None:
        if isinstance(prefix_keys, (str, bytes)) or not isinstance(prefix_keys, Sequence):
            raise ContractViolation(
                "check_trace.prefix_keys", "must be None or a sequence of page keys", prefix_keys, "PFX-1"
            )
        validate_page_keys(
            prefix_keys if isinstance(prefix_keys, (list, tuple, PrefixKeys)) else tuple(prefix_keys),
            field="check_trace.prefix_keys",
        )
    initial, after_known, after = resolve_operation_prefix(calls, prefix_keys)
    return _run(
        calls,
        chain_keys,
        None if initial is None else tuple(initial),
        after_known,
        None if after is None else tuple(after),
        batch_size,
        page_size,
        acks,
        agreed_pages,
        terminated_before_slice,
        backup_completed_tokens,
        operation_id,
        sglang_version,
    )


def check_operation(operation: TraceOperation, *, sglang_version: Optional[str] = None) -> TraceReport:
    """Return the verdict on one operation of a trace file (``sglang_version`` as for ``check_trace``)."""
    after_known = "prefix_keys_after" in operation.model_fields_set
    return _run(
        operation.calls,
        operation.chain,
        operation.prefix_keys,
        after_known,
        operation.prefix_keys_after,
        operation.batch_size,
        operation.page_size,
        operation.acks,
        operation.agreed_pages,
        operation.terminated_before_slice,
        operation.backup_completed_tokens,
        operation.operation_id,
        sglang_version,
    )


def _run(
    calls: Sequence[Any],
    chain: tuple[Any, ...],
    initial: Optional[tuple[Any, ...]],
    after_known: bool,
    after: Any,
    batch_size: int,
    page_size: Optional[int],
    acks: Optional[Sequence[Any]],
    agreed_pages: Optional[int],
    terminated_before_slice: Optional[int],
    backup_completed_tokens: Optional[int],
    operation_id: Any,
    sglang_version: Optional[str] = None,
) -> TraceReport:
    if sglang_version is not None:
        try:
            check_release(sglang_version)
        except UnknownReleaseError as error:
            raise ContractViolation(
                "check_trace.sglang_version", f"must be a pinned SGLang release ({error})", sglang_version, "PFX-2"
            ) from None
    _check_int("check_trace.batch_size", batch_size, 1, "CTL-2", optional=False)
    _check_int("check_trace.page_size", page_size, 1, "CTL-5")
    _check_int("check_trace.agreed_pages", agreed_pages, 0, "RANK-2")
    _check_int("check_trace.terminated_before_slice", terminated_before_slice, 0, "CTL-4")
    _check_int("check_trace.backup_completed_tokens", backup_completed_tokens, 0, "CTL-7")
    if agreed_pages is not None and agreed_pages > len(chain):
        raise ContractViolation(
            "check_trace.agreed_pages", f"must be <= len(chain) = {len(chain)}", agreed_pages, "RANK-2"
        )
    if page_size is None and (acks is not None or backup_completed_tokens is not None):
        raise ContractViolation(
            "check_trace.page_size", "must be given with acks or backup_completed_tokens", page_size, "CTL-5"
        )
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        raise ContractViolation("check_trace.calls", "must be a list of recorded calls (rec.calls)", calls, "PFX-2")
    for position, call in enumerate(calls):
        if not hasattr(call, "method") or not hasattr(call, "extra_info_state"):
            raise ContractViolation(
                f"check_trace.calls[{position}]", "must be a RecordedCall or TraceCall", call, "PFX-2"
            )
    checker = _Checker(
        calls,
        chain,
        initial,
        after_known,
        after,
        batch_size,
        page_size,
        acks,
        agreed_pages,
        terminated_before_slice,
        backup_completed_tokens,
        operation_id,
        sglang_version,
    )
    return checker.run()


# ==================================================================== acks
def _validated_pages(name: str, values: Any) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ContractViolation(f"check_acks.{name}", "must be a sequence of ints", values, "CTL-5")
    for position, value in enumerate(values):
        if type(value) is not int or value < 0:
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
    _check_int("check_acks.page_size", page_size, 1, "CTL-5", optional=False)
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
    parsed = [ack if isinstance(ack, (ProgressAck, PoolHitsAck, FinalAck)) else validate_ack(ack) for ack in acks]

    expected = compute_prefetch_acks(slices, loaded, page_size)
    kv_complete = len(loaded) == len(slices) and all(got == asked for got, asked in zip(loaded, slices))
    violations: list[TraceViolation] = []
    checked = {"CTL-5": None, "CTL-6": None, "RANK-3": None}

    def fail(clause_id: str, message: str, ack_index: Optional[int] = None) -> None:
        violations.append(TraceViolation(clause=clause_id, message=message, ack_index=ack_index))

    owner = operation_id if operation_id is not None else (parsed[0].operation_id if parsed else None)
    for position, ack in enumerate(parsed):
        if ack.operation_id != owner:
            fail("CTL-5", f"{ack.kind} ack for operation {ack.operation_id!r} among the acks of {owner!r}", position)

    progress = [(position, ack) for position, ack in enumerate(parsed) if isinstance(ack, ProgressAck)]
    pool_hits = [(position, ack) for position, ack in enumerate(parsed) if isinstance(ack, PoolHitsAck)]
    finals = [(position, ack) for position, ack in enumerate(parsed) if isinstance(ack, FinalAck)]

    if len(progress) != len(expected):
        fail(
            "CTL-5",
            f"{len(progress)} progress ack(s) for {len(expected)} slice(s); one per slice, also after a "
            "short slice or termination",
        )
        fail(
            "RANK-3",
            f"{len(progress)} progress ack(s) where every rank emits {len(expected)}; the all-reduce of "
            "the missing or extra acks never matches across ranks",
        )
    previous = 0
    for number, (position, ack) in enumerate(progress):
        if ack.slice_index != number:
            fail("CTL-5", f"progress ack number {number} names slice {ack.slice_index}", position)
        if ack.tokens < previous:
            fail(
                "CTL-5",
                f"progress ack for slice {ack.slice_index} reports {ack.tokens} tokens, fewer than the "
                f"{previous} before it; acks are cumulative and non-decreasing",
                position,
            )
        previous = max(previous, ack.tokens)
        if number < len(expected) and ack.tokens != expected[number]:
            fail(
                "CTL-5",
                f"progress ack for slice {number} reports {ack.tokens} tokens, expected "
                f"{expected[number]} (cumulative loaded tokens, frozen after the first short slice or "
                "termination)",
                position,
            )
    last_progress = max((position for position, _ in progress), default=-1)
    if pool_hits:
        checked["HYB-2"] = None
    for number, (position, ack) in enumerate(pool_hits):
        if number:
            fail("HYB-2", "a second pool-hits ack; the sidecars are read and acked once", position)
        if position < last_progress:
            fail("HYB-2", "pool-hits ack before the last progress ack; sidecars are read after KV", position)
        if not kv_complete and any(hits for hits in ack.pool_hits.values()):
            fail(
                "HYB-2",
                f"pool-hits ack reports {dict(ack.pool_hits)} although KV did not complete; the "
                "sidecars are not read then",
                position,
            )
    if not finals:
        fail(
            "CTL-6",
            "no final ack; every prefetch ends with one, also when the backend raised or the operation was terminated",
        )
    for number, (position, ack) in enumerate(finals):
        if number:
            fail("CTL-6", "a second final ack; there is exactly one", position)
        elif position != len(parsed) - 1:
            fail("CTL-6", f"the final ack is ack {position} of {len(parsed)}; it must be the last", position)
        expected_total = expected[-1] if expected else 0
        if number == 0 and ack.tokens != expected_total:
            fail("CTL-6", f"the final ack reports {ack.tokens} tokens; the operation loaded {expected_total}", position)
    return TraceReport(violations=tuple(violations), checked=tuple(checked), operation_id=owner)
