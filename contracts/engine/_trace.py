"""The trace file format ``hicache-trace/1``: pydantic models any engine's recording can be written to and checked.

``TraceDocument`` (operations) > ``TraceOperation`` (settings, calls, acks) >
``TraceCall`` > ``TraceTransfer``; ``load_trace`` reads a file or text,
``trace_document_from_calls`` builds one from recorded calls, and a file that
is not a valid trace raises ``TraceFormatError`` (``_trace_errors``). The
format, its fields, its limits (``TRACE_METHODS``, ``MAX_NESTING``,
``MAX_OPERATION_ID_LENGTH``) and an example that loads are in docs/engines.md
("The trace file").
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, Optional, Union

from pydantic import field_validator, model_serializer, model_validator

from hicache_spec import STORAGE_BATCH_SIZE
from hicache_spec.values import is_numpy_scalar
from hicache_contracts.capabilities import ALL_METHODS
from hicache_contracts.errors import ContractViolation
from hicache_contracts.json_depth import nesting_depth
from hicache_contracts.models import FIELD_CLAUSE, Ack, validate_page_keys
from hicache_contracts.engine._calls import (
    EXTRA_INFO_ABSENT,
    EXTRA_INFO_PRESENT,
    CallView,
    RecordedCall,
    snapshot_prefix,
)
from hicache_contracts.engine._trace_errors import TraceFormatError, _TraceModel
from hicache_contracts.engine._trace_source import MAX_TRACE_BYTES, read_trace_file

__all__ = [
    "MAX_NESTING",
    "MAX_OPERATION_ID_LENGTH",
    "TRACE_FORMAT",
    "TRACE_METHODS",
    "TraceCall",
    "TraceDocument",
    "TraceFormatError",
    "TraceOperation",
    "TraceTransfer",
    "load_trace",
    "resolve_operation_prefix",
    "trace_document_from_calls",
]

TRACE_FORMAT: Final = "hicache-trace/1"
"""The value of a trace file's ``format`` field; bumped on an incompatible change."""

Keys = tuple[str, ...]

TRACE_METHODS: tuple[str, ...] = ALL_METHODS + ("on_host_pools_registered", "close")
"""The backend methods a trace call may name: every generation of the interface and its housekeeping calls."""
MAX_NESTING = 64
"""Deepest nesting of arrays and objects a trace file may hold (a real trace needs fewer than ten levels)."""
MAX_OPERATION_ID_LENGTH = 200
"""Longest operation id kept whole; a longer one is cut (see ``_short_operation_id``)."""


def _short_operation_id(value: Any) -> Any:
    """Return a str operation id longer than ``MAX_OPERATION_ID_LENGTH`` as its start, an ellipsis and its length."""
    if isinstance(value, str) and len(value) > MAX_OPERATION_ID_LENGTH:
        return f"{value[: MAX_OPERATION_ID_LENGTH - 40]}... ({len(value)} characters)"
    return value


def _checked_keys(keys: Keys) -> Keys:
    """Return ``keys`` once every one is a non-empty str (KEY-2); the field's name is added by the model."""
    validate_page_keys(keys, field="")
    return keys


def _without_unrecorded(model: Any, data: Any) -> Any:
    """Leave ``prefix_keys_after`` out of a dump when it was not recorded (it is selective)."""
    if isinstance(data, dict) and "prefix_keys_after" not in model.model_fields_set:
        data.pop("prefix_keys_after", None)
    return data


class TraceTransfer(_TraceModel):
    """One PoolTransfer of a v2 call."""

    name: str
    """The pool name (``"kv"``, ``"indexer"``, ``"swa"``, ...)."""
    keys: Optional[Keys] = None
    """The transfer's keys, in order."""
    indices_from_pool: Optional[str] = None
    """``"kv"`` for a KV-derived sidecar (read in the same slice as KV), else null."""
    hit_policy: Optional[str] = None
    """``"all_pages"`` or ``"trailing_pages"``."""

    _trace_clauses: ClassVar[dict[str, str]] = {"keys": "KEY-2", "indices_from_pool": "HYB-1"}

    @field_validator("keys")
    @classmethod
    def _check_keys(cls, keys: Any) -> Any:
        return keys if keys is None else _checked_keys(keys)


class TraceCall(_TraceModel, CallView):
    """One storage call, as the engine made it."""

    index: int
    """The call's position in the engine's recording (start order)."""
    method: str
    """The backend method (``batch_exists``, ``batch_get_v1``, ``batch_get_v2``, ``batch_set_v1`` ...)."""
    keys: Optional[Keys] = None
    """The page keys of a keyed call; null for batch_get_v2/batch_set_v2, whose keys are per transfer."""
    transfers: Optional[tuple[TraceTransfer, ...]] = None
    """The transfers of a v2 call (for batch_exists_v2, its pool_transfers)."""
    extra_info_state: Literal["absent", "none", "present"] = EXTRA_INFO_ABSENT
    """``absent``: no extra_info argument; ``none``: extra_info=None; ``present``: an object was passed."""
    prefix_keys: Optional[Keys] = None
    """The extra_info's prefix_keys at call time; null when absent, None, or when the info had prefix_keys=None."""
    prefix_keys_problem: Optional[str] = None
    """Why the prefix was not a sequence of keys (a str, no attribute ...), else null."""
    prefix_keys_after: Optional[Keys] = None
    """Selective: the value the same prefix held after the operation; leave out when not recorded."""
    result: Any = None
    """The result: an int (batch_exists), a list of bools (v1), pool → bools (v2), {kv_hit_pages, ...} (exists_v2)."""
    raised: Optional[str] = None
    """``"Type: message"`` when the backend raised; the result is then null."""
    thread: Optional[str] = None
    """The calling thread's name."""
    thread_id: Optional[int] = None
    """The calling thread's identifier."""
    started: Optional[float] = None
    """Monotonic seconds when the call started."""
    finished: Optional[float] = None
    """Monotonic seconds when it returned or raised."""

    _trace_clauses: ClassVar[dict[str, str]] = {
        "keys": "KEY-2",
        "prefix_keys": "PFX-1",
        "prefix_keys_after": "PFX-5",
        "extra_info_state": "PFX-7",
    }
    _children: ClassVar[dict[str, Any]] = {"transfers": TraceTransfer}

    @field_validator("keys", "prefix_keys", "prefix_keys_after")
    @classmethod
    def _check_keys(cls, keys: Any) -> Any:
        return keys if keys is None else _checked_keys(keys)

    @field_validator("method")
    @classmethod
    def _check_method(cls, method: str) -> str:
        if method not in TRACE_METHODS:
            close = difflib.get_close_matches(method.lower(), TRACE_METHODS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ", such as batch_exists, batch_get_v1 or batch_set_v2"
            raise ContractViolation("", f"must be a method of the backend interface{hint}", method, FIELD_CLAUSE)
        return method

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any) -> Any:
        return _without_unrecorded(self, handler(self))

    def current_prefix(self) -> tuple[bool, Any, Optional[str]]:
        """Return ``(changed, value, problem)`` from ``prefix_keys_after``; unchanged when it was not recorded."""
        if "prefix_keys_after" not in self.model_fields_set or self.extra_info_state != EXTRA_INFO_PRESENT:
            return False, self.prefix_keys, None
        return self.prefix_keys_after != self.prefix_keys, self.prefix_keys_after, None

    @classmethod
    def from_recorded(cls, call: RecordedCall) -> TraceCall:
        """Return the JSON form of a recorded call, with ``prefix_keys_after`` read from the live objects now."""
        fields: dict[str, Any] = {
            "index": call.index,
            "method": call.method,
            "keys": None if call.keys is None else tuple(call.keys),
            "transfers": None
            if call.transfers is None
            else tuple(
                TraceTransfer(
                    name=str(transfer.name),
                    keys=None if transfer.keys is None else tuple(transfer.keys),
                    indices_from_pool=transfer.indices_from_pool,
                    hit_policy=transfer.hit_policy,
                )
                for transfer in call.transfers
            ),
            "extra_info_state": call.extra_info_state,
            "prefix_keys": None if call.prefix_keys is None else tuple(call.prefix_keys),
            "prefix_keys_problem": call.prefix_keys_problem,
            "result": _jsonable(call.result),
            "raised": call.raised,
            "thread": call.thread,
            "thread_id": call.thread_id,
            "started": call.started,
            "finished": call.finished,
        }
        if call.extra_info_state == EXTRA_INFO_PRESENT and call.prefix_keys_problem is None:
            changed, value, problem = call.current_prefix()
            if problem is None:
                fields["prefix_keys_after"] = None if value is None else tuple(value)
        return cls(**fields)


def _jsonable(value: Any) -> Any:
    """Return ``value`` with tuples as lists and only JSON types (a numpy scalar as its Python value, which the rules
    read alike: ``is_flag``, ``is_count``); anything else becomes its repr."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if is_numpy_scalar(value):
        return _jsonable(value.item())
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return repr(value)


class TraceOperation(_TraceModel):
    """One operation (a prefetch or a backup): what it was asked to do, the calls it made and its acks."""

    operation_id: Optional[Union[int, str]] = None
    """Names the operation in reports."""
    chain: Keys
    """The operation's page keys, in order, after its prefix; a call's offset is where its first key sits here."""
    prefix_keys: Optional[Keys]
    """The operation's prefix when it started: null (feature off), [] or the keys before chain[0]."""
    prefix_keys_after: Optional[Keys] = None
    """Selective: the operation's own prefix after the operation (PFX-5); leave out when not recorded."""
    batch_size: int = STORAGE_BATCH_SIZE
    """Pages per storage call (CTL-2)."""
    page_size: Optional[int] = None
    """Tokens per page; needed to check acks and backup_completed_tokens."""
    agreed_pages: Optional[int] = None
    """The hit every rank agreed on (RANK-1); by default the recorded hit query's count (0 when nothing was read)."""
    terminated_before_slice: Optional[int] = None
    """The first slice whose read must not start, because the operation was terminated before it (CTL-4)."""
    backup_completed_tokens: Optional[int] = None
    """The completed tokens a backup reported, checked against its writes (CTL-7)."""
    calls: tuple[TraceCall, ...] = ()
    """The storage calls, in start order."""
    acks: Optional[tuple[Ack, ...]] = None
    """The prefetch's acks in emission order (progress, pool_hits, final), when recorded."""

    _trace_clauses: ClassVar[dict[str, str]] = {
        "chain": "KEY-2",
        "prefix_keys": "PFX-1",
        "prefix_keys_after": "PFX-5",
        "batch_size": "CTL-2",
        "page_size": "CTL-5",
        "agreed_pages": "RANK-2",
        "terminated_before_slice": "CTL-4",
        "backup_completed_tokens": "CTL-7",
    }
    _children: ClassVar[dict[str, Any]] = {"calls": TraceCall, "acks": "ack"}

    @field_validator("chain", "prefix_keys", "prefix_keys_after")
    @classmethod
    def _check_keys(cls, keys: Any) -> Any:
        return keys if keys is None else _checked_keys(keys)

    @field_validator("operation_id", mode="before")
    @classmethod
    def _shorten_operation_id(cls, value: Any) -> Any:
        return _short_operation_id(value)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any) -> Any:
        return _without_unrecorded(self, handler(self))

    @model_validator(mode="after")
    def _check_settings(self) -> TraceOperation:
        """The settings the checker needs, checked here so a bad file is named field by field."""
        minimums = (
            ("batch_size", 1, "CTL-2"),
            ("page_size", 1, "CTL-5"),
            ("agreed_pages", 0, "RANK-2"),
            ("terminated_before_slice", 0, "CTL-4"),
            ("backup_completed_tokens", 0, "CTL-7"),
        )
        for name, minimum, clause_id in minimums:
            value = getattr(self, name)
            if value is not None and value < minimum:
                raise ContractViolation(name, f"must be >= {minimum}", value, clause_id)
        if self.agreed_pages is not None and self.agreed_pages > len(self.chain):
            raise ContractViolation(
                "agreed_pages", f"must be <= len(chain) = {len(self.chain)}", self.agreed_pages, "RANK-2"
            )
        if self.page_size is None:
            needs = (
                "acks"
                if self.acks is not None
                else ("backup_completed_tokens" if self.backup_completed_tokens is not None else None)
            )
            if needs is not None:  # the clause the missing page size keeps from being checked
                raise ContractViolation(
                    "page_size", f"must be given with {needs}", None, "CTL-5" if needs == "acks" else "CTL-7"
                )
        return self


class TraceDocument(_TraceModel):
    """A trace file: a format tag and one or more operations."""

    format: Literal["hicache-trace/1"] = TRACE_FORMAT
    """Always ``"hicache-trace/1"``."""
    operations: tuple[TraceOperation, ...]
    """The operations recorded, each checked on its own; at least one (an empty trace checks nothing)."""

    _children: ClassVar[dict[str, Any]] = {"operations": TraceOperation}

    @model_validator(mode="after")
    def _check_not_empty(self) -> TraceDocument:
        if not self.operations:
            raise ContractViolation(
                "operations",
                "must hold at least one operation (an empty trace checks nothing)",
                self.operations,
                FIELD_CLAUSE,
            )
        return self


def resolve_operation_prefix(calls: Any, prefix_keys: Any, chain: Any = None) -> tuple[Any, bool, Any]:
    """Return ``(initial, after_known, after)`` for the live operation prefix ``prefix_keys``. Clause: PFX-5.

    The caller passes the live object the controller used as the operation's
    prefix. Its value now is ``after``. If a call received that very object,
    the snapshot the recorder took at that call is the value the operation had
    when it started (``initial``). If no call did (an extra-info class that
    copies the list, as the project's model does) but the object now holds
    the first call's prefix followed by the start of ``chain`` (the keys
    only a change in place, ``prefix_keys += batch``, puts there: a chain
    key never precedes the chain), that call's prefix is ``initial``.
    Otherwise ``initial`` is the value now and nothing can be said about a
    change (``after_known`` is False).
    """
    now, problem = snapshot_prefix(prefix_keys)
    if problem is not None:
        raise ContractViolation(
            "check_trace.prefix_keys", "must be None or a sequence of page keys", prefix_keys, "PFX-1"
        )
    if prefix_keys is None or isinstance(prefix_keys, tuple) or now is prefix_keys:
        return now, False, now  # immutable: it cannot have changed
    for call in calls:
        if getattr(call, "prefix_object", None) is prefix_keys and call.prefix_keys_problem is None:
            return call.prefix_keys, True, now
    grown_from = _grown_in_place_from(calls, now, chain)
    if grown_from is not None:
        return grown_from, True, now
    return now, False, now


def _grown_in_place_from(calls: Any, now: Any, chain: Any) -> Any:
    """The first prefix-carrying call's prefix, when ``now`` is it followed by the start of ``chain``; else None."""
    if not chain:
        return None
    first = next(
        (
            call
            for call in calls
            if getattr(call, "extra_info_state", None) == EXTRA_INFO_PRESENT
            and getattr(call, "prefix_keys_problem", None) is None
            and getattr(call, "prefix_keys", None) is not None
        ),
        None,
    )
    if first is None:
        return None
    started = tuple(first.prefix_keys)
    grown = len(now) - len(started)
    if grown <= 0 or grown > len(chain) or tuple(now[: len(started)]) != started:
        return None
    return first.prefix_keys if tuple(now[len(started) :]) == tuple(chain[:grown]) else None


def trace_document_from_calls(
    calls: Any, *, chain: Any, prefix_keys: Any, operation_id: Any = None, acks: Any = None, **operation: Any
) -> TraceDocument:
    """Return a one-operation ``TraceDocument`` of recorded calls (see ``RecordingBackend.to_trace``)."""
    initial, after_known, after = resolve_operation_prefix(calls, prefix_keys, tuple(chain))
    fields: dict[str, Any] = {
        "operation_id": operation_id,
        "chain": tuple(chain),
        "prefix_keys": None if initial is None else tuple(initial),
        # A backend's own public methods are recorded too; they are no part of the interface, nor of the trace.
        "calls": tuple(
            TraceCall.from_recorded(call) if isinstance(call, RecordedCall) else call
            for call in calls
            if getattr(call, "method", None) in TRACE_METHODS or not isinstance(call, RecordedCall)
        ),
        **operation,
    }
    if after_known:
        fields["prefix_keys_after"] = None if after is None else tuple(after)
    if acks is not None:
        fields["acks"] = tuple(acks)
    return TraceDocument(operations=(TraceOperation(**fields),))


def load_trace(source: Union[str, Path, bytes], *, max_bytes: Optional[int] = MAX_TRACE_BYTES) -> TraceDocument:
    """Return the TraceDocument in a file (a path) or a JSON text; raise TraceFormatError for a malformed one.

    A file must be a regular file of at most ``max_bytes`` (None: any size; ``_trace_source``).
    ``iter_trace_operations`` reads a large trace one operation at a time.
    """
    if isinstance(source, Path) or (
        isinstance(source, str) and source.strip() and not source.lstrip().startswith(("{", "["))
    ):
        text: Union[str, bytes] = read_trace_file(source, max_bytes)
    else:
        text = source
    depth = nesting_depth(text, MAX_NESTING)
    if depth > MAX_NESTING:
        raise TraceFormatError(
            "TraceDocument",
            f"must not nest arrays and objects more than {MAX_NESTING} deep",
            f"more than {MAX_NESTING} levels",
            None,
        )
    try:
        json.loads(text)
    except (ValueError, RecursionError) as error:
        shown = text[:60].decode("utf-8", "replace") if isinstance(text, bytes) else text[:60]
        raise TraceFormatError("TraceDocument", f"must be valid JSON ({error})", shown, None) from None
    return TraceDocument.model_validate_json(text)
