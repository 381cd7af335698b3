"""The record of one backend call as a recorder keeps it: ``RecordedCall`` and ``RecordedTransfer``.

``RecordingBackend`` (``_recorder``) fills these in; the checker and the trace
format (``_trace``) read them. Every field is a snapshot taken at call time,
except the live objects named on ``RecordedCall``. ``CallView`` is what a
recorded call and a trace file's ``TraceCall`` share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Optional, TypeVar, Union

from hicache_contracts.models import pool_value
from hicache_contracts.prefix_keys import PrefixKeys

__all__ = [
    "EXTRA_INFO_ABSENT",
    "EXTRA_INFO_NONE",
    "EXTRA_INFO_PRESENT",
    "CallView",
    "RecordedCall",
    "RecordedTransfer",
    "call_keys",
    "snapshot_prefix",
]

EXTRA_INFO_ABSENT: Final = "absent"
"""The call passed no extra_info argument at all."""
EXTRA_INFO_NONE: Final = "none"
"""The call passed ``extra_info=None``."""
EXTRA_INFO_PRESENT: Final = "present"
"""The call passed an extra_info object."""


_Keys = TypeVar("_Keys", bound=Sequence[Any])


def call_keys(keys: Optional[_Keys], transfers: Optional[Iterable[Any]]) -> Union[_Keys, tuple[()]]:
    """Return a recorded call's keys: its own, or for a v2 read or write those of its first transfer with keys."""
    if keys is not None:
        return keys
    for transfer in transfers or ():
        found: Optional[_Keys] = transfer.keys
        if found is not None:
            return found
    return ()


class CallView:
    """One storage call as the checker reads it: the base of ``RecordedCall`` and of a trace file's ``TraceCall``.

    The fields below are the ones the checker reads (each class documents
    them); ``all_keys`` is defined once here, ``current_prefix`` by each form.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        index: int
        method: str
        keys: Optional[Sequence[Any]]
        transfers: Optional[Sequence[Any]]
        extra_info_state: str
        prefix_keys: Any
        prefix_keys_problem: Optional[str]
        result: Any
        raised: Optional[str]
        thread_id: Optional[int]

    @property
    def all_keys(self) -> Sequence[Any]:
        """The call's keys; for a v2 read or write, the keys of its first transfer with keys."""
        return call_keys(self.keys, self.transfers)

    def current_prefix(self) -> tuple[bool, Any, Optional[str]]:
        """Return ``(changed, value, problem)``: whether the prefix handed to the backend differs after the call (PFX-5)."""
        raise NotImplementedError


def snapshot_prefix(value: Any) -> tuple[Any, Optional[str]]:
    """Return ``(snapshot, problem)`` for a prefix_keys value, taken so that later changes cannot reach it.

    None stays None; an immutable ``PrefixKeys`` or tuple is kept as is; any
    other sequence is copied into a tuple. ``problem`` says why a value is not
    a sequence of keys (a str, a set, a number), else it is None.
    """
    if value is None:
        return None, None
    if isinstance(value, (PrefixKeys, tuple)):
        return value, None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        return None, f"prefix_keys is a {type(value).__name__}, not a sequence of keys"
    return tuple(value), None


def _name_of(value: Any) -> Any:
    """Return an enum member's value (SGLang's or ours), else ``str(value)``; None stays None."""
    return None if value is None else pool_value(value)


def _keys_tuple(keys: Any) -> Optional[tuple[Any, ...]]:
    """Return a tuple copy of a key sequence; None for None or for an iterator (copying would consume it)."""
    if keys is None:
        return None
    if isinstance(keys, tuple):
        return keys
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        return None
    return tuple(keys)


class RecordedTransfer:
    """One PoolTransfer of a v2 call, as recorded: its pool, keys and how its hit is measured."""

    __slots__ = ("name", "keys", "indices_from_pool", "hit_policy")

    def __init__(
        self,
        name: Optional[str],
        keys: Optional[tuple[Any, ...]],
        indices_from_pool: Optional[str],
        hit_policy: Optional[str],
    ) -> None:
        self.name = name
        """The pool name as a str (``"kv"``, ``"indexer"``, ...)."""
        self.keys = keys
        """The transfer's keys at call time, or None."""
        self.indices_from_pool = indices_from_pool
        """``"kv"`` for a KV-derived sidecar, else None."""
        self.hit_policy = hit_policy
        """``"all_pages"`` or ``"trailing_pages"``, or None when the object has no such attribute."""

    @classmethod
    def from_object(cls, transfer: Any) -> RecordedTransfer:
        """Read a PoolTransfer (ours, SGLang's or any object with those attributes)."""
        return cls(
            _name_of(getattr(transfer, "name", None)),
            _keys_tuple(getattr(transfer, "keys", None)),
            _name_of(getattr(transfer, "indices_from_pool", None)),
            _name_of(getattr(transfer, "hit_policy", None)),
        )

    def __repr__(self) -> str:
        count = None if self.keys is None else len(self.keys)
        return f"RecordedTransfer(name={self.name!r}, keys=<{count}>, indices_from_pool={self.indices_from_pool!r})"


_this_thread = threading.local()
"""Per thread, ``name_and_id``: its name when it made its first recorded call, and its identifier. Read from here,
the name costs a third of reading it from the thread object, on a path every call takes, and every call of a
thread shares one identifier object rather than keeping a new int each (a thread renamed later keeps its first
name in the record)."""


class RecordedCall(CallView):
    """One call the engine made through a RecordingBackend.

    The attribute names match ``TraceCall`` (the JSON form), so the checker
    reads either. ``extra_info``, ``prefix_object``, ``args``, ``kwargs`` and
    ``returned`` are the live objects; everything else is a snapshot.
    """

    __slots__ = (
        "index",
        "method",
        "keys",
        "transfers",
        "extra_info_state",
        "extra_info",
        "prefix_object",
        "prefix_keys",
        "prefix_keys_problem",
        "args",
        "kwargs",
        "returned",
        "result",
        "raised",
        "thread",
        "thread_id",
        "started",
        "finished",
        "recording_problem",
    )

    if TYPE_CHECKING:  # the fields a call starts without: see _UNSET (read through __getattr__ until set)
        keys: Optional[tuple[Any, ...]]
        transfers: Optional[tuple[RecordedTransfer, ...]]
        extra_info_state: str
        extra_info: Any
        prefix_object: Any
        prefix_keys: Any
        prefix_keys_problem: Optional[str]
        returned: Any
        result: Any
        raised: Optional[str]
        finished: Optional[float]
        recording_problem: Optional[str]
        kwargs: Mapping[str, Any]

    def __init__(self, index: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # Only what every call has is stored here; the other fields stay unset until the recorder fills them
        # (most calls fill few), and read as their defaults (``_UNSET``) until then: the recorder's cost per
        # call is mostly stores like these.
        self.index = index
        """Position in the recorder's call list (start order)."""
        self.method = method
        """The backend method called."""
        self.args = args
        """The positional arguments, as passed."""
        if kwargs:  # most calls pass none: an empty dict kept per call would cost a tenth of the recorder's time
            self.kwargs = kwargs
            """The keyword arguments, as passed (a read-only empty mapping when there were none)."""
        try:
            self.thread, self.thread_id = _this_thread.name_and_id
        except AttributeError:  # the thread's first recorded call
            self.thread, self.thread_id = _this_thread.name_and_id = (
                threading.current_thread().name,
                threading.get_ident(),
            )
        """The calling thread's name, as it was at the thread's first recorded call, and its identifier."""
        self.started = time.monotonic()
        """``time.monotonic()`` when the call started."""

    def __getattr__(self, name: str) -> Any:
        # Reached only for a slot not set yet. The default is returned, not stored: a reader storing it could
        # overwrite what the recording thread sets meanwhile (``finished`` of a call in flight).
        try:
            return _UNSET[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}") from None

    def current_prefix(self) -> tuple[bool, Any, Optional[str]]:
        """Return ``(changed, value, problem)``: whether the prefix handed to the backend differs now from its snapshot.

        Two ways to change it are seen: the object itself changed in place
        (``prefix += batch`` on a list), or ``extra_info.prefix_keys`` was
        rebound to another value (PFX-5).
        """
        if self.extra_info_state != EXTRA_INFO_PRESENT or self.prefix_keys_problem is not None:
            return False, self.prefix_keys, None
        if self.prefix_object is not None and self.prefix_object is not self.prefix_keys:
            value, problem = snapshot_prefix(self.prefix_object)
            if problem is not None or value != self.prefix_keys:
                return True, value, problem
        current = getattr(self.extra_info, "prefix_keys", None)
        if current is self.prefix_object:
            return False, self.prefix_keys, None
        value, problem = snapshot_prefix(current)
        if problem is not None or value != self.prefix_keys:
            return True, value, problem
        return False, self.prefix_keys, None

    def __repr__(self) -> str:
        prefix = None if self.prefix_keys is None else f"<{len(self.prefix_keys)} keys>"
        return (
            f"RecordedCall(#{self.index} {self.method}, keys=<{len(self.all_keys)}>, "
            f"extra_info={self.extra_info_state}, prefix_keys={prefix}, thread={self.thread!r})"
        )


_UNSET: Final[dict[str, Any]] = {
    "keys": None,  # the page keys (one for get/set/exists); None for batch_get_v2/batch_set_v2 (see transfers)
    "transfers": None,  # the PoolTransfers of a v2 call, or None
    "extra_info_state": EXTRA_INFO_ABSENT,  # "absent" (no argument), "none" (passed None) or "present"
    "extra_info": None,  # the extra_info object the backend received, or None
    "prefix_object": None,  # the object extra_info.prefix_keys referred to at call time
    "prefix_keys": None,  # snapshot of extra_info.prefix_keys at call time (a tuple or PrefixKeys), or None
    "prefix_keys_problem": None,  # why the prefix could not be read as a sequence of keys, or None
    "returned": None,  # the object the inner backend returned (the engine got this very object)
    "result": None,  # a snapshot of what the checker needs from the result (bools as a tuple, hit counts ...)
    "raised": None,  # "Type: message" when the inner backend raised (the exception was re-raised)
    "finished": None,  # time.monotonic() when it returned or raised; None while in flight
    "recording_problem": None,  # why part of the call could not be recorded (the call itself went through)
    "kwargs": MappingProxyType({}),  # a call that passed no keyword arguments
}
"""The fields of a ``RecordedCall`` that a call starts without, with the value each reads as until it is set."""
