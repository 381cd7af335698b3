"""``RecordingBackend``: wraps any storage backend and records every call the engine makes.

The recorder sits between an engine's controller and its storage backend::

    controller ──calls──▶ RecordingBackend ──forwards──▶ inner backend
                               │
                               └── rec.calls: one RecordedCall per call, in start order

What the engine sees does not change:

- the same methods, with the same signatures (``inspect.signature`` and the
  capability detector read the inner method through ``__wrapped__``), and only
  those: a method the inner object lacks is missing on the recorder too, so
  ``hasattr`` probing still works; ``isinstance(rec, InnerClass)`` holds;
- the same return objects, and the same exceptions re-raised;
- every other attribute (``registered_pools``, ``mem_pool_host``, ...) read and
  written through to the inner object.

What a call records (``RecordedCall``): the method, its keys (per transfer for
v2 calls), the ``extra_info`` object itself and a snapshot of its
``prefix_keys`` taken at call time, a summary of the result or the exception,
the thread and ``time.monotonic()`` at start and end. Recording never raises
into the engine: a value it cannot read is noted on the call instead.

Objects are read by attribute name (duck typing), so SGLang's own
``HiCacheStorageExtraInfo`` and ``PoolTransfer`` dataclasses are recorded as
well as the contract models.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from hicache_spec.values import is_numpy_scalar
from hicache_contracts.capabilities import EXTRA_INFO_METHODS
from hicache_contracts.engine._calls import (
    EXTRA_INFO_ABSENT,
    EXTRA_INFO_NONE,
    EXTRA_INFO_PRESENT,
    RecordedCall,
    RecordedTransfer,
    _keys_tuple,
    _name_of,
    snapshot_prefix,
)
from hicache_contracts.engine._list_snapshots import SHORTEST, ListSnapshots
from hicache_contracts.prefix_keys import PrefixKeys


__all__ = [
    "EXTRA_INFO_ABSENT",
    "EXTRA_INFO_NONE",
    "EXTRA_INFO_PRESENT",
    "RecordedCall",
    "RecordedTransfer",
    "RecordingBackend",
    "snapshot_prefix",
]

_KEYS_METHODS = frozenset({"batch_exists", "batch_get_v1", "batch_set_v1", "batch_exists_v2", "batch_get", "batch_set"})
"""Methods whose first argument is the list of page keys."""
_KEY_METHODS = frozenset({"get", "set", "exists"})
"""Legacy methods whose first argument is one key."""
_TRANSFER_METHODS = {
    "batch_get_v2": (0, "transfers"),
    "batch_set_v2": (0, "transfers"),
    "batch_exists_v2": (1, "pool_transfers"),
}
"""v2 methods, with the position and keyword of their PoolTransfer list."""
_NOT_GIVEN = object()
_OWN_ATTRIBUTES = frozenset({"_recording_inner", "_recording_calls", "_recording_lock", "_recording_snapshots"})


_REUSE_LOOKBACK = 8
"""How many of the latest calls are searched for a snapshot of the same list."""
_SAMPLES = 48
"""Elements compared by identity before an earlier snapshot of the same list is reused."""


def _reused_snapshot(prefix: Any, earlier: Sequence[RecordedCall]) -> Optional[tuple[Any, ...]]:
    """Return an earlier call's snapshot of this very list if the list still looks the same, else None.

    Engines hand one list to several calls (SGLang: one per batch, to its
    exists, get and sidecar calls). The list counts as unchanged when it has
    the snapshot's length and its first and last 8 elements and 32 more at a
    random stride offset are the same objects. A change in place that this
    misses is still seen by ``current_prefix`` of the earlier call, which
    compares its snapshot with the whole list (PFX-5).
    """
    if type(prefix) is not list or len(prefix) < SHORTEST:
        return None
    for call in reversed(earlier):
        if call.prefix_object is prefix:
            snapshot = call.prefix_keys
            if type(snapshot) is not tuple or len(snapshot) != len(prefix):
                return None
            count = len(prefix)
            step = count // (_SAMPLES - 16)
            positions = itertools.chain(range(8), range(count - 8, count), range(random.randrange(step), count, step))
            if all(prefix[position] is snapshot[position] for position in positions):
                return snapshot
            return None
    return None


def _summarize_v1(result: Any) -> Any:
    return tuple(result) if isinstance(result, (list, tuple)) else result


def _summarize_v2(result: Any) -> Any:
    if isinstance(result, Mapping):
        return {
            _name_of(name): tuple(flags) if isinstance(flags, (list, tuple)) else flags
            for name, flags in result.items()
        }
    return result


def _summarize_exists_v2(result: Any) -> Any:
    hits = getattr(result, "kv_hit_pages", _NOT_GIVEN)
    if hits is _NOT_GIVEN:
        return result
    extra = getattr(result, "extra_pool_hit_pages", None) or {}
    return {"kv_hit_pages": hits, "extra_pool_hit_pages": {_name_of(k): v for k, v in dict(extra).items()}}


def _summarize_get(result: Any) -> Any:
    return tuple(item is not None for item in result) if isinstance(result, (list, tuple)) else result


_PLAIN_TYPES = (bool, int, float, str, type(None))
"""Results kept as they are (immutable plain values)."""


def _summarize_plain(result: Any) -> Any:
    return result if isinstance(result, _PLAIN_TYPES) or is_numpy_scalar(result) else None


_SUMMARIES: dict[str, Callable[[Any], Any]] = {
    "batch_get_v1": _summarize_v1,
    "batch_set_v1": _summarize_v1,
    "batch_get_v2": _summarize_v2,
    "batch_set_v2": _summarize_v2,
    "batch_exists_v2": _summarize_exists_v2,
    "batch_get": _summarize_get,
    "get": lambda result: result is not None,
}
"""How each method's result is summarized; any other method keeps a plain value (bool, int, float, str, None, a
numpy scalar)."""


_KEYS_LIST, _KEY_ONE = 1, 2
_PLANS: dict[str, tuple[int, Optional[tuple[int, str]], Optional[int]]] = {
    method: (
        _KEYS_LIST if method in _KEYS_METHODS else _KEY_ONE if method in _KEY_METHODS else 0,
        _TRANSFER_METHODS.get(method),
        EXTRA_INFO_METHODS.get(method),
    )
    for method in _KEYS_METHODS | _KEY_METHODS | _TRANSFER_METHODS.keys() | EXTRA_INFO_METHODS.keys()
}
"""Per method: how its keys come (a list, one key, none), where its transfers are, where its extra_info is."""


def _record_arguments(
    call: RecordedCall,
    plan: tuple[int, Optional[tuple[int, str]], Optional[int]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    earlier: Sequence[RecordedCall] = (),
    snapshots: Optional[ListSnapshots] = None,
    position: Optional[int] = None,
) -> None:
    """Fill ``call`` with the keys, transfers and extra_info of a call, by the contract's positions (``plan``:
    its method's entry in ``_PLANS``).

    ``earlier`` are the latest calls before it, whose snapshot of the same prefix list may be reused (with
    ``position``, the call's place in ``earlier``, the whole call list: only the 8 calls before it are read);
    ``snapshots`` the latest copies of long list prefixes, which a new list that starts with one extends.
    """
    keys_kind, transfer_place, info_position = plan
    if keys_kind == _KEYS_LIST:
        keys = args[0] if args else kwargs.get("keys")
        call.keys = tuple(keys) if type(keys) is list else _keys_tuple(keys)  # a list: the common case, checked fast
    elif keys_kind == _KEY_ONE:
        key = args[0] if args else kwargs.get("key", _NOT_GIVEN)
        call.keys = () if key is _NOT_GIVEN else (key,)
    if transfer_place is not None:
        place, keyword = transfer_place
        transfers = args[place] if len(args) > place else kwargs.get(keyword)
        if isinstance(transfers, Sequence):  # never iterate an iterator the backend has yet to read
            call.transfers = tuple(RecordedTransfer.from_object(transfer) for transfer in transfers)
    if info_position is None:
        return
    if len(args) > info_position:
        extra_info = args[info_position]
    else:
        extra_info = kwargs.get("extra_info", _NOT_GIVEN)
        if extra_info is _NOT_GIVEN:
            return
    if extra_info is None:
        call.extra_info_state = EXTRA_INFO_NONE
        return
    call.extra_info_state = EXTRA_INFO_PRESENT
    call.extra_info = extra_info
    prefix: Any = getattr(extra_info, "prefix_keys", _NOT_GIVEN)
    if prefix is _NOT_GIVEN:
        call.prefix_keys_problem = f"extra_info ({type(extra_info).__name__}) has no prefix_keys attribute"
        return
    call.prefix_object = prefix
    kind = type(prefix)
    if kind is PrefixKeys or kind is tuple:  # immutable: kept as it is (snapshot_prefix's answer, inlined)
        call.prefix_keys = prefix
        return
    if kind is not list or len(prefix) < SHORTEST:  # a short list, anything else: at once
        call.prefix_keys, call.prefix_keys_problem = snapshot_prefix(prefix)
        return
    if position is not None:
        earlier = earlier[max(0, position - _REUSE_LOOKBACK) : position]
    reused = _reused_snapshot(prefix, earlier)
    if reused is not None:
        call.prefix_keys = reused
        return
    if snapshots is not None:
        built = snapshots.find(prefix)
        if built is not None:
            call.prefix_keys = built
            return
        call.prefix_keys, call.prefix_keys_problem = snapshot_prefix(prefix)
        snapshots.add(call.prefix_keys)
        return
    call.prefix_keys, call.prefix_keys_problem = snapshot_prefix(prefix)


class RecordingBackend:
    """Wraps a storage backend, forwards every call to it unchanged, and records each one.

    ``RecordingBackend(inner)`` returns an instance of a class built once per
    inner class, whose methods are exactly the public methods of that class.
    Attributes that are not methods are read and written through to ``inner``.

    Recorder attributes (chosen so as not to clash with a backend's):
    ``calls`` (a list copy, in start order), ``inner``, ``clear_calls()``,
    ``to_trace(...)``.
    """

    __slots__ = (
        "_recording_inner",
        "_recording_calls",
        "_recording_lock",
        "_recording_snapshots",
    )
    _recording_proxies: dict[type, type] = {}
    _recording_proxies_lock = threading.Lock()

    def __new__(cls, inner: Any) -> RecordingBackend:
        if inner is None:
            raise ValueError("RecordingBackend.inner: must be a storage backend object (got None) [BE-24]")
        if isinstance(inner, RecordingBackend):
            raise ValueError(
                f"RecordingBackend.inner: must not itself be a RecordingBackend (got {type(inner).__name__}) [BE-24]"
            )
        proxy_class = cls._proxy_class_for(type(inner))
        instance: RecordingBackend = object.__new__(proxy_class)
        object.__setattr__(instance, "_recording_inner", inner)
        object.__setattr__(instance, "_recording_calls", [])
        object.__setattr__(instance, "_recording_lock", threading.Lock())
        object.__setattr__(instance, "_recording_snapshots", ListSnapshots())
        return instance

    @classmethod
    def _proxy_class_for(cls, inner_class: type) -> type:
        with cls._recording_proxies_lock:
            proxy = cls._recording_proxies.get(inner_class)
            if proxy is None:
                proxy = _build_proxy_class(cls, inner_class)
                cls._recording_proxies[inner_class] = proxy
            return proxy

    # ------------------------------------------------------------ recorder API
    @property
    def inner(self) -> Any:
        """The wrapped backend."""
        return self._recording_inner

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call recorded so far, in the order the calls started (a new list each time)."""
        with self._recording_lock:
            return list(self._recording_calls)

    def clear_calls(self) -> None:
        """Forget every recorded call and restart the numbering at 0 (between operations, or to free memory)."""
        with self._recording_lock:
            self._recording_calls.clear()
        self._recording_snapshots.clear()

    def to_trace(self, *, chain: Any, prefix_keys: Any, **operation: Any) -> Any:
        """Return a ``TraceDocument`` of the recorded calls as one operation (see ``hicache_contracts.engine``)."""
        from hicache_contracts.engine._trace import trace_document_from_calls

        return trace_document_from_calls(self.calls, chain=chain, prefix_keys=prefix_keys, **operation)

    # ------------------------------------------------------------ forwarding
    def _recording_call(
        self,
        method: str,
        plan: Optional[tuple[int, Optional[tuple[int, str]], Optional[int]]],
        summarize: Callable[[Any], Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Record one call of ``method`` (``plan`` and ``summarize``: its entries in ``_PLANS`` and ``_SUMMARIES``,
        looked up once per method), forward it, and return what the inner backend returned."""
        target = getattr(self._recording_inner, method)
        call = None
        try:
            lock = self._recording_lock
            lock.acquire()  # cheaper than ``with`` on this path, which every call takes
            try:
                calls = self._recording_calls
                position = len(calls)  # the call's index: clear_calls empties the list and so restarts it at 0
                call = RecordedCall(position, method, args, kwargs)
                calls.append(call)
            finally:
                lock.release()
            if plan is not None:
                _record_arguments(call, plan, args, kwargs, calls, self._recording_snapshots, position)
        except Exception as error:  # recording must never break the engine's call
            if call is not None:
                call.recording_problem = f"{type(error).__name__}: {error}"
        try:
            returned = target(*args, **kwargs)
        except BaseException as error:
            if call is not None:
                call.finished = time.monotonic()
                call.raised = f"{type(error).__name__}: {error}"
            raise
        if call is not None:
            call.finished = time.monotonic()
            call.returned = returned
            try:
                call.result = summarize(returned)
            except Exception as error:
                call.recording_problem = f"{type(error).__name__}: {error}"
        return returned

    def __getattr__(self, name: str) -> Any:
        if name in _OWN_ATTRIBUTES:
            raise AttributeError(name)
        return getattr(self._recording_inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN_ATTRIBUTES:
            object.__setattr__(self, name, value)
        else:
            setattr(self._recording_inner, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._recording_inner, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._recording_inner)) | {"calls", "inner", "clear_calls", "to_trace"})

    def __repr__(self) -> str:
        return f"RecordingBackend({self._recording_inner!r}, calls={len(self._recording_calls)})"


def _public_methods(inner_class: type) -> dict[str, Any]:
    """Return the public methods an inner class defines or inherits: name → the function found on the class."""
    methods = {}
    for name in dir(inner_class):
        if name.startswith("_"):
            continue
        try:
            raw = inspect.getattr_static(inner_class, name)
        except AttributeError:
            continue
        if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw) or inspect.ismethoddescriptor(raw):
            if callable(getattr(inner_class, name, None)):
                methods[name] = getattr(inner_class, name)
    return methods


def _make_method(name: str, target: Any, static: bool = False) -> Any:
    plan, summarize = _PLANS.get(name), _SUMMARIES.get(name, _summarize_plain)

    def method(self: RecordingBackend, *args: Any, **kwargs: Any) -> Any:
        return self._recording_call(name, plan, summarize, args, kwargs)

    try:
        functools.update_wrapper(method, target)
    except (AttributeError, TypeError):
        pass
    method.__name__ = name
    method.__dict__["__wrapped__"] = getattr(
        target, "__func__", target
    )  # signature and stub detection read the inner method
    if static:
        # A staticmethod has no self: the proxy's method does, so binding it must drop that self, not the first
        # parameter of the inner function.
        try:
            inner_signature = inspect.signature(target)
        except (TypeError, ValueError):
            return method
        self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        method.__dict__["__signature__"] = inner_signature.replace(
            parameters=[self_parameter, *inner_signature.parameters.values()]
        )
    return method


def _build_proxy_class(base: type, inner_class: type) -> type:
    namespace: dict[str, Any] = {"__slots__": (), "__module__": base.__module__}
    reserved = set(vars(RecordingBackend)) | {"calls", "inner", "clear_calls", "to_trace"}
    for name, target in _public_methods(inner_class).items():
        if name in reserved:
            continue  # a backend method named like the recorder's API stays reachable through rec.inner
        static = isinstance(inspect.getattr_static(inner_class, name, None), staticmethod)
        namespace[name] = _make_method(name, target, static)
    if hasattr(inner_class, "hicache_levels"):
        namespace["hicache_levels"] = inner_class.hicache_levels
    namespace["__class__"] = property(lambda self: inner_class)  # isinstance(rec, InnerClass) holds
    return type(f"RecordingBackend[{inner_class.__qualname__}]", (base,), namespace)
