"""The trace as a documented JSON format, so that any engine can record one and have it checked.

A trace file holds one or more operations; each operation holds what the
checker needs to know about it and the calls its controller made::

    {
      "format": "hicache-trace/1",
      "operations": [
        {
          "operation_id": "req-7",
          "chain": ["<64 hex>", ...],          # the operation's page keys, in order
          "prefix_keys": [] | null | [...],    # the operation's prefix when it started (tri-state)
          "batch_size": 128,
          "page_size": 64,                     # needed when acks or backup_completed_tokens are given
          "calls": [
            {"index": 0, "method": "batch_exists", "keys": [...],
             "extra_info_state": "present", "prefix_keys": [...], "result": 128,
             "thread": "hit-query", "started": 12.5, "finished": 12.6},
            {"index": 1, "method": "batch_get_v2",
             "transfers": [{"name": "indexer", "keys": [...], "indices_from_pool": "kv"}],
             "extra_info_state": "present", "prefix_keys": [...], "result": {"indexer": [true, ...]}},
            ...
          ],
          "acks": [{"kind": "progress", "operation_id": "req-7", "slice_index": 0, "tokens": 8192},
                   {"kind": "final", "operation_id": "req-7", "tokens": 8192}]
        }
      ]
    }

Optional fields are read selectively: a field left out means "not recorded",
which is not the same as ``null``.

Limits, so that no file can crash or flood the checker: ``method`` must be a
method of the backend interface (``TRACE_METHODS``; a recorded call of any
other public method of the backend is left out of the trace); no value may
nest deeper than ``MAX_NESTING`` arrays and objects; an ``operation_id``
longer than ``MAX_OPERATION_ID_LENGTH`` characters is kept shortened, with
its length, so reports never print it whole. A file that is not a valid trace
raises ``TraceFormatError`` naming the field and the rule, tagged with the
clause that governs the value (a page key KEY-2, a prefix PFX-1, a batch
size CTL-2, an ack's fields their ack's clause ...) or with none when the
rule is the format's own (JSON, nesting, a missing or unknown field, a
method name). ``prefix_keys_after`` on a call (the value
the object handed to the backend holds once the operation is over) and on the
operation (the operation's own prefix afterwards) enable the PFX-5 checks.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, Optional, TypeVar, Union

from pydantic import BaseModel, ValidationError, field_validator, model_serializer, model_validator

from hicache_spec import STORAGE_BATCH_SIZE
from hicache_contracts.capabilities import ALL_METHODS
from hicache_contracts.errors import ContractViolation, _short_repr
from hicache_contracts.models import (
    FIELD_CLAUSE,
    Ack,
    ContractModel,
    FinalAck,
    PoolHitsAck,
    ProgressAck,
    validate_page_keys,
)
from hicache_contracts.engine._calls import (
    EXTRA_INFO_ABSENT,
    EXTRA_INFO_PRESENT,
    RecordedCall,
    call_keys,
    snapshot_prefix,
)

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


def _nesting_depth(text: Union[str, bytes]) -> int:
    """Return how deep arrays and objects nest in JSON ``text``, without parsing it (strings are skipped)."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    depth = deepest = 0
    inside = escaped = False
    for byte in data:
        if inside:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                inside = False
        elif byte == 0x22:
            inside = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    return deepest
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _without_unrecorded(model: Any, data: Any) -> Any:
    """Leave ``prefix_keys_after`` out of a dump when it was not recorded (it is selective)."""
    if isinstance(data, dict) and "prefix_keys_after" not in model.model_fields_set:
        data.pop("prefix_keys_after", None)
    return data


# ==================================================================== validation errors
class TraceFormatError(ContractViolation):
    """A trace that is not valid: ``field: rule (got value)``, with `` [CLAUSE]`` when a clause governs the value."""

    def __init__(self, field: str, rule: str, value: Any, clause_id: Optional[str]) -> None:
        self.field, self.rule, self.value = field, rule, value
        self.clause_id = clause_id  # type: ignore[assignment]  # None: a rule of the format's own, no clause
        tag = f" [{clause_id}]" if clause_id else ""
        ValueError.__init__(self, f"{field}: {rule} (got {_short_repr(value)}){tag}")


class _Nothing:
    def __repr__(self) -> str:
        return "nothing"


_ACK_MODELS: dict[str, type[ContractModel]] = {"progress": ProgressAck, "pool_hits": PoolHitsAck, "final": FinalAck}


def _location_text(location: tuple[Union[int, str], ...]) -> str:
    """``('operations', 0, 'acks', 1, 'final', 'tokens')`` as ``operations[0].acks[1].tokens`` (no union tag)."""
    text = ""
    for position, part in enumerate(location):
        if part in _ACK_MODELS and position >= 2 and location[position - 2] == "acks":
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _walk(root: type[BaseModel], location: tuple[Union[int, str], ...]) -> tuple[Any, Optional[str], int, Any]:
    """Follow ``location`` through the trace models.

    Returns the model declaring the last field reached, that field (None if
    none), how many parts of ``location`` lead to it, and the model holding
    the value ``location`` ends at (None when it is not an object).
    """
    model: Union[type[BaseModel], str, None] = root
    owner, field, depth = root, None, 0
    for position, part in enumerate(location):
        if isinstance(part, int):
            continue
        if model == "ack" and part in _ACK_MODELS:  # a tagged union: the tag names the ack's model
            model = _ACK_MODELS[part]
        elif isinstance(model, type) and part in model.model_fields:  # a model, not None or "ack"
            owner, field, depth = model, part, position + 1
            model = getattr(owner, "_children", {}).get(part)
        else:
            break
    return owner, field, depth, model


def _field_clause(model: Any, field: Optional[str]) -> Optional[str]:
    """The clause that governs ``model.field``'s value, or None where the rule is the format's own."""
    if field is None:
        return None
    if model in _ACK_MODELS.values():
        ack: type[ContractModel] = model
        return ack._field_clauses.get(field, ack._default_clause)
    clauses: dict[str, str] = getattr(model, "_trace_clauses", {})
    return clauses.get(field)


def trace_error(root: type, error: ValidationError) -> TraceFormatError:
    """Return the TraceFormatError of the first error of ``error``, raised while building trace model ``root``."""
    first = error.errors(include_url=False)[0]
    location = tuple(first["loc"])
    path = _location_text(location)
    where = f"{root.__name__}.{path}" if path else root.__name__
    owner, field, depth, holder = _walk(root, location)
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ContractViolation):  # a validator's own rule
        if cause.field and not cause.field.startswith("["):  # a model validator, naming a field of its model
            owner, field = holder, cause.field
            where = f"{where}.{cause.field}"
        else:
            where += cause.field
        clause_id = _field_clause(owner, field) if cause.clause_id == FIELD_CLAUSE else cause.clause_id
        return TraceFormatError(where, cause.rule, cause.value, clause_id)
    if first["type"] == "missing":
        return TraceFormatError(where, "is required", _Nothing(), None)
    if first["type"] == "extra_forbidden":
        container = _walk(root, location[:-1])[3]
        known = ", ".join(getattr(container, "model_fields", {}))
        return TraceFormatError(
            where,
            f"is not a field of {getattr(container, '__name__', 'this object')} (its fields: {known})",
            first.get("input"),
            None,
        )
    within = all(isinstance(part, int) for part in location[depth:])  # the field itself, or an item of it
    rule = first["msg"][:1].lower() + first["msg"][1:]
    return TraceFormatError(where, rule, first.get("input"), _field_clause(owner, field) if within else None)


_Trace = TypeVar("_Trace", bound="_TraceModel")


class _TraceModel(ContractModel):
    """A trace model: validation errors become TraceFormatError, tagged per ``_trace_clauses``."""

    _trace_clauses: ClassVar[dict[str, str]] = {}
    """The clause governing each field's value; a field not listed is the format's own (no clause)."""
    _children: ClassVar[dict[str, Any]] = {}
    """The model of each field that holds nested trace objects."""

    def __init__(self, /, **data: Any) -> None:
        try:
            self.__pydantic_validator__.validate_python(data, self_instance=self)
        except ValidationError as error:
            raise trace_error(type(self), error) from None

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls: type[_Trace], obj: Any, *args: Any, **kwargs: Any) -> _Trace:
        try:
            return super(ContractModel, cls).model_validate(obj, *args, **kwargs)  # pydantic's own, not ContractModel's
        except ValidationError as error:
            raise trace_error(cls, error) from None

    @classmethod
    def model_validate_json(cls: type[_Trace], json_data: Any, *args: Any, **kwargs: Any) -> _Trace:
        try:
            return super(ContractModel, cls).model_validate_json(json_data, *args, **kwargs)
        except ValidationError as error:
            raise trace_error(cls, error) from None


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


class TraceCall(_TraceModel):
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

    @property
    def all_keys(self) -> Keys:
        """The call's keys; for a v2 read or write, the keys of its first transfer."""
        return call_keys(self.keys, self.transfers)

    def current_prefix(self) -> tuple[bool, Any, Optional[str]]:
        """Return ``(changed, value, problem)`` from ``prefix_keys_after``; unchanged when it was not recorded."""
        if "prefix_keys_after" not in self.model_fields_set or self.extra_info_state != EXTRA_INFO_PRESENT:
            return False, self.prefix_keys, None
        return self.prefix_keys_after != self.prefix_keys, self.prefix_keys_after, None

    @classmethod
    def from_recorded(cls, call: RecordedCall) -> "TraceCall":
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
    """Return ``value`` with tuples as lists and only JSON types; anything else becomes its repr."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
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
    def _check_settings(self) -> "TraceOperation":
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
    def _check_not_empty(self) -> "TraceDocument":
        if not self.operations:
            raise ContractViolation(
                "operations",
                "must hold at least one operation (an empty trace checks nothing)",
                self.operations,
                FIELD_CLAUSE,
            )
        return self


def resolve_operation_prefix(calls: Any, prefix_keys: Any) -> tuple[Any, bool, Any]:
    """Return ``(initial, after_known, after)`` for the live operation prefix ``prefix_keys``. Clause: PFX-5.

    The caller passes the live object the controller used as the operation's
    prefix. Its value now is ``after``. If a call received that very object,
    the snapshot the recorder took at that call is the value the operation had
    when it started (``initial``); otherwise ``initial`` is the value now and
    nothing can be said about a change (``after_known`` is False).
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
    return now, False, now


def trace_document_from_calls(
    calls: Any, *, chain: Any, prefix_keys: Any, operation_id: Any = None, acks: Any = None, **operation: Any
) -> TraceDocument:
    """Return a one-operation ``TraceDocument`` of recorded calls (see ``RecordingBackend.to_trace``)."""
    initial, after_known, after = resolve_operation_prefix(calls, prefix_keys)
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


def load_trace(source: Union[str, Path, bytes]) -> TraceDocument:
    """Return the TraceDocument in a file (a path) or a JSON text; raise TraceFormatError for a malformed one."""
    if isinstance(source, Path) or (
        isinstance(source, str) and source.strip() and not source.lstrip().startswith(("{", "["))
    ):
        path = Path(source)
        try:
            text: Union[str, bytes] = path.read_bytes()
        except OSError as error:
            raise TraceFormatError(
                "TraceDocument", f"must be a readable file ({error.strerror})", str(path), None
            ) from None
    else:
        text = source
    depth = _nesting_depth(text)
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
