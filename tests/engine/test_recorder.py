"""RecordingBackend: the engine sees the wrapped backend unchanged, and every call is recorded as it was made.

Each property is a ``check_*`` function run on the real recorder and on a
planted recorder that breaks it (``pytest.raises(AssertionError)``), so every
check is seen to fail.

One module, though over 450 lines: each ``check_*`` sits beside the planted recorder it must catch.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Optional

import pytest

from hicache_contracts import HiCacheStorageExtraInfo, PoolName, PoolTransfer, PrefixKeys
from hicache_contracts.capabilities import ALL_METHODS, detect_capabilities
from hicache_contracts.engine import RecordingBackend
from hicache_contracts.engine import _recorder
from hicache_contracts.engine._recorder import EXTRA_INFO_ABSENT, EXTRA_INFO_NONE, EXTRA_INFO_PRESENT
from tests.sglang_standin import make_storage_module

KEYS = [f"{number:064x}" for number in range(1, 6)]


# ================================================================== backends to wrap
class LegacyOnlyBackend:
    """A first-generation backend: no v1 or v2 method at all."""

    hicache_levels = ("core",)

    def __init__(self) -> None:
        self.pages: dict[str, Any] = {}
        self.mem_pool_host = None

    def get(self, key, target_location=None, target_sizes=None):
        return self.pages.get(key)

    def set(self, key, value=None, target_location=None, target_sizes=None):
        self.pages[key] = value
        return True

    def exists(self, key):
        return key in self.pages

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        return [self.pages.get(key) for key in keys]

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        self.pages.update(zip(keys, values or [None] * len(keys)))
        return True

    def batch_exists(self, keys, extra_info=None):
        count = 0
        for key in keys:
            if key not in self.pages:
                break
            count += 1
        return count

    def clear(self):
        self.pages.clear()

    def get_stats(self):
        return None

    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host


class StubbedV1Backend(LegacyOnlyBackend):
    """SGLang's base-class shape: v1 methods present but unimplemented (BE-18)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError()

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError()


class PoolAwareBackend(LegacyOnlyBackend):
    """v1 and v2, returning fresh objects the tests compare by identity."""

    def __init__(self) -> None:
        super().__init__()
        self.registered_pools: dict[str, Any] = {}
        self.last_result: Any = None
        self.failure: Optional[BaseException] = None

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        if self.failure is not None:
            raise self.failure
        self.last_result = [True] * len(keys)
        return self.last_result

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        self.last_result = [True] * len(keys)
        return self.last_result

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        self.last_result = type("Result", (), {"kv_hit_pages": len(keys), "extra_pool_hit_pages": {}})()
        return self.last_result

    def batch_get_v2(self, transfers, extra_info=None):
        self.last_result = {transfer.name: [True] * len(transfer.keys) for transfer in transfers}
        return self.last_result

    def batch_set_v2(self, transfers, extra_info=None):
        return self.batch_get_v2(transfers, extra_info)

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        self.registered_pools[str(host_pool_name)] = host_pool


class HelperMethodsBackend(PoolAwareBackend):
    """A backend with a static and a class method beside its instance methods."""

    @staticmethod
    def page_bytes(page_size, layer_num, bytes_per_token=2):
        return page_size * layer_num * bytes_per_token

    @classmethod
    def from_config(cls, config, *, strict=False):
        return cls()


# ================================================================== SGLang-shaped objects (duck typing)
_SGLANG = make_storage_module()
SGLangPoolName = _SGLANG.PoolName
"""SGLang's own PoolName enum: a str enum of another class than ours."""
SGLangExtraInfo = _SGLANG.HiCacheStorageExtraInfo
"""SGLang's HiCacheStorageExtraInfo: a mutable dataclass holding the caller's list."""
SGLangPoolTransfer = _SGLANG.PoolTransfer
"""SGLang's PoolTransfer dataclass."""


# ================================================================== checks (each with a planted recorder below)
Factory = Callable[[Any], Any]


def public_methods(obj: Any) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_") and callable(getattr(obj, name, None))}


def check_same_surface(make: Factory) -> None:
    """The recorder has exactly the inner object's methods, with the same signatures and capabilities."""
    for inner in (LegacyOnlyBackend(), StubbedV1Backend(), PoolAwareBackend(), HelperMethodsBackend()):
        recorder = make(inner)
        recorder_methods = public_methods(recorder) - {"clear_calls", "to_trace"}
        assert recorder_methods == public_methods(inner), type(inner).__name__
        for name in public_methods(inner):
            assert inspect.signature(getattr(recorder, name)) == inspect.signature(getattr(inner, name)), name
        mine = detect_capabilities(recorder, probe=False)
        theirs = detect_capabilities(inner, probe=False)
        for entry, expected in zip(mine.methods, theirs.methods):
            assert (entry.name, entry.present, entry.stub, entry.extra_info_positional, entry.extra_info_keyword) == (
                expected.name,
                expected.present,
                expected.stub,
                expected.extra_info_positional,
                expected.extra_info_keyword,
            ), entry.name
        assert mine.declared == theirs.declared
        assert isinstance(recorder, type(inner))


def check_results_and_exceptions_pass_through(make: Factory) -> None:
    """The engine gets the very object the backend returned, and the very exception it raised."""
    inner = PoolAwareBackend()
    recorder = make(inner)
    assert recorder.batch_get_v1(KEYS, None) is inner.last_result
    transfers = [PoolTransfer(name="indexer", keys=KEYS[:2], indices_from_pool="kv")]  # type: ignore[arg-type]
    assert recorder.batch_get_v2(transfers) is inner.last_result
    assert recorder.batch_exists_v2(KEYS) is inner.last_result
    failure = RuntimeError("node down")
    inner.failure = failure
    with pytest.raises(RuntimeError) as raised:
        recorder.batch_get_v1(KEYS, None)
    assert raised.value is failure
    assert recorder.calls[-1].raised == "RuntimeError: node down"
    assert recorder.calls[-1].result is None


def check_attributes_forwarded(make: Factory) -> None:
    """Attributes that are not methods are read and written on the inner object."""
    inner = PoolAwareBackend()
    recorder = make(inner)
    recorder.register_mem_host_pool_v2("pool object", PoolName.INDEXER)
    assert recorder.registered_pools is inner.registered_pools
    assert recorder.registered_pools == {"indexer": "pool object"}
    recorder.mem_pool_host = "host pool"
    assert inner.mem_pool_host == "host pool"
    assert recorder.inner is inner


def check_snapshot_taken_at_call_time(make: Factory) -> None:
    """The recorded prefix is the value at call time, whatever the engine does to its list afterwards."""
    inner = PoolAwareBackend()
    recorder = make(inner)
    shared = [KEYS[0]]
    info = SGLangExtraInfo(prefix_keys=shared)
    recorder.batch_get_v1(KEYS[1:3], None, info)
    shared += KEYS[1:3]  # the engine's in-place += after the call
    call = recorder.calls[-1]
    assert call.prefix_keys == (KEYS[0],)
    assert call.extra_info is info and call.prefix_object is shared
    assert call.current_prefix() == (True, tuple(KEYS[:3]), None)


# ================================================================== planted recorders
class EveryMethodRecorder:
    """Planted: a hand-written proxy that defines every method of every generation, whatever the inner has."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


for _name in ALL_METHODS:
    setattr(
        EveryMethodRecorder,
        _name,
        lambda self, *args, _name=_name, **kwargs: getattr(self._inner, _name)(*args, **kwargs),
    )


def swallowing_recorder(inner: Any) -> Any:
    """Planted: returns a copy of the result and turns exceptions into None."""
    recorder = RecordingBackend(inner)
    recorder_class: Any = type(recorder)

    class Swallowing(recorder_class):
        __slots__ = ()

        def _recording_call(self, method, plan, summarize, args, kwargs):
            try:
                result = RecordingBackend._recording_call(self, method, plan, summarize, args, kwargs)
            except Exception:
                return None
            return list(result) if isinstance(result, list) else result

    swallowing = object.__new__(Swallowing)
    for name in RecordingBackend.__slots__:
        object.__setattr__(swallowing, name, getattr(recorder, name))
    return swallowing


def reference_keeping_recorder(monkeypatch: pytest.MonkeyPatch) -> Factory:
    """Planted: the 'snapshot' keeps a reference to the engine's list."""
    monkeypatch.setattr(_recorder, "snapshot_prefix", lambda value: (value, None))
    return RecordingBackend


def write_swallowing_recorder(inner: Any) -> Any:
    """Planted: attribute writes land on the recorder's side, not the inner object."""
    recorder = RecordingBackend(inner)
    recorder_class: Any = type(recorder)
    holder = {}

    class Local(recorder_class):
        __slots__ = ()

        def __setattr__(self, name, value):
            holder[name] = value

    local = object.__new__(Local)
    for name in RecordingBackend.__slots__:
        object.__setattr__(local, name, getattr(recorder, name))
    return local


# ================================================================== tests
def test_recorder_keeps_the_inner_surface():
    check_same_surface(RecordingBackend)


def test_surface_check_catches_a_recorder_that_adds_methods():
    with pytest.raises(AssertionError):
        check_same_surface(EveryMethodRecorder)


def test_static_and_class_methods_keep_their_signature_and_are_recorded():
    recorder = RecordingBackend(HelperMethodsBackend())
    assert str(inspect.signature(recorder.page_bytes)) == "(page_size, layer_num, bytes_per_token=2)"
    assert str(inspect.signature(recorder.from_config)) == "(config, *, strict=False)"
    assert recorder.page_bytes(4, 2) == 16
    assert isinstance(recorder.from_config(None), HelperMethodsBackend)
    assert [call.method for call in recorder.calls] == ["page_bytes", "from_config"]


def test_surface_check_catches_a_recorder_that_shifts_a_static_methods_signature(monkeypatch):
    make_method = _recorder._make_method
    monkeypatch.setattr(_recorder, "_make_method", lambda name, target, static=False: make_method(name, target))
    monkeypatch.setattr(RecordingBackend, "_recording_proxies", {})
    with pytest.raises(AssertionError, match="page_bytes"):
        check_same_surface(RecordingBackend)


def test_results_and_exceptions_pass_through():
    check_results_and_exceptions_pass_through(RecordingBackend)


def test_pass_through_check_catches_a_swallowing_recorder():
    with pytest.raises(AssertionError):
        check_results_and_exceptions_pass_through(swallowing_recorder)


def test_attributes_are_forwarded():
    check_attributes_forwarded(RecordingBackend)


def test_forwarding_check_catches_a_recorder_that_keeps_writes():
    with pytest.raises(AssertionError):
        check_attributes_forwarded(write_swallowing_recorder)


@pytest.mark.clause("PFX-5")
def test_prefix_snapshot_is_taken_at_call_time():
    check_snapshot_taken_at_call_time(RecordingBackend)


@pytest.mark.clause("PFX-5")
def test_snapshot_check_catches_a_recorder_that_keeps_the_reference(monkeypatch):
    with pytest.raises(AssertionError):
        check_snapshot_taken_at_call_time(reference_keeping_recorder(monkeypatch))


@pytest.mark.clause("PFX-1")
@pytest.mark.parametrize("how", ["positional", "keyword"])
@pytest.mark.parametrize(
    "info,state,prefix",
    [
        ("absent", EXTRA_INFO_ABSENT, None),
        (None, EXTRA_INFO_NONE, None),
        (HiCacheStorageExtraInfo(), EXTRA_INFO_PRESENT, None),
        (HiCacheStorageExtraInfo(prefix_keys=[]), EXTRA_INFO_PRESENT, ()),  # type: ignore[arg-type]
        (HiCacheStorageExtraInfo(prefix_keys=KEYS[:2]), EXTRA_INFO_PRESENT, tuple(KEYS[:2])),  # type: ignore[arg-type]
        (SGLangExtraInfo(prefix_keys=[]), EXTRA_INFO_PRESENT, ()),
        (SGLangExtraInfo(prefix_keys=KEYS[:2]), EXTRA_INFO_PRESENT, tuple(KEYS[:2])),
    ],
)
def test_extra_info_is_recorded_positional_or_keyword(how, info, state, prefix):
    recorder = RecordingBackend(PoolAwareBackend())
    transfers = [SGLangPoolTransfer(name=SGLangPoolName.INDEXER, keys=KEYS[2:4], indices_from_pool=SGLangPoolName.KV)]
    if info == "absent":
        recorder.batch_exists(KEYS)
        recorder.batch_get_v1(KEYS, None)
        recorder.batch_get_v2(transfers)
    elif how == "positional":
        recorder.batch_exists(KEYS, info)
        recorder.batch_get_v1(KEYS, None, info)
        recorder.batch_get_v2(transfers, info)
    else:
        recorder.batch_exists(KEYS, extra_info=info)
        recorder.batch_get_v1(keys=KEYS, host_indices=None, extra_info=info)
        recorder.batch_get_v2(transfers=transfers, extra_info=info)
    exists, get_v1, get_v2 = recorder.calls
    for call in (exists, get_v1, get_v2):
        assert call.extra_info_state == state
        assert call.prefix_keys == prefix
        assert call.extra_info is (None if info == "absent" else info)
    assert exists.keys == tuple(KEYS) and get_v1.keys == tuple(KEYS) and get_v2.keys is None
    (transfer,) = get_v2.transfers
    assert (transfer.name, transfer.keys, transfer.indices_from_pool) == ("indexer", tuple(KEYS[2:4]), "kv")
    assert get_v2.all_keys == tuple(KEYS[2:4])
    assert exists.result == 0 and get_v1.result == (True,) * 5 and get_v2.result == {"indexer": (True, True)}


@pytest.mark.clause("PFX-1")
@pytest.mark.parametrize(
    "value,problem",
    [
        ("abc", "prefix_keys is a str, not a sequence of keys"),
        ({KEYS[0]}, "prefix_keys is a set, not a sequence of keys"),
        (7, "prefix_keys is a int, not a sequence of keys"),
    ],
)
def test_a_prefix_that_is_not_a_sequence_is_noted(value, problem):
    recorder = RecordingBackend(PoolAwareBackend())
    recorder.batch_exists(KEYS, SGLangExtraInfo(prefix_keys=value))
    assert recorder.calls[0].prefix_keys_problem == problem


@pytest.mark.clause("PFX-5")
def test_immutable_prefixes_are_kept_without_a_copy():
    recorder = RecordingBackend(PoolAwareBackend())
    prefix = PrefixKeys(KEYS[:3])
    recorder.batch_exists(KEYS, HiCacheStorageExtraInfo(prefix_keys=prefix))
    call = recorder.calls[0]
    assert call.prefix_keys is call.extra_info.prefix_keys
    assert call.current_prefix() == (False, prefix, None)


@pytest.mark.clause("PFX-5")
def test_rebinding_the_prefix_attribute_is_seen():
    recorder = RecordingBackend(PoolAwareBackend())
    info = SGLangExtraInfo(prefix_keys=[KEYS[0]])
    recorder.batch_exists(KEYS[1:], info)
    info.prefix_keys = KEYS[:3]  # rebinding the field of an info already handed out
    assert recorder.calls[0].current_prefix() == (True, tuple(KEYS[:3]), None)


def test_calls_from_several_threads_are_recorded_with_their_thread_and_times():
    recorder = RecordingBackend(PoolAwareBackend())
    barrier = threading.Barrier(3)

    def work(name: str) -> None:
        barrier.wait()
        for _ in range(20):
            recorder.batch_exists(KEYS, None)

    threads = [
        threading.Thread(target=work, args=(f"worker-{number}",), name=f"worker-{number}") for number in range(3)
    ]
    for thread in threads:
        thread.start()
    idents = {thread.name: thread.ident for thread in threads}
    for thread in threads:
        thread.join()
    calls = recorder.calls
    assert [call.index for call in calls] == list(range(60))
    assert {call.thread for call in calls} == {"worker-0", "worker-1", "worker-2"}
    assert all(call.thread_id == idents[call.thread] for call in calls)
    assert all(call.started <= call.finished for call in calls)
    recorder.clear_calls()
    recorder.batch_exists(KEYS)
    assert [call.index for call in recorder.calls] == [0]


def test_fields_a_call_did_not_fill_read_as_their_defaults():
    recorder = RecordingBackend(PoolAwareBackend())
    recorder.exists(KEYS[0])  # one key, no extra_info: most fields stay unset until read
    call = recorder.calls[0]
    assert (call.keys, call.transfers, call.extra_info_state, call.extra_info) == ((KEYS[0],), None, "absent", None)
    assert (call.prefix_object, call.prefix_keys, call.prefix_keys_problem) == (None, None, None)
    assert (call.raised, call.recording_problem, call.result) == (None, None, False)
    assert call.finished is not None
    with pytest.raises(AttributeError):  # a read never stores: it could race the recording thread's own store
        type(call).raised.__get__(call)
    with pytest.raises(AttributeError, match="'RecordedCall' object has no attribute 'no_such_field'"):
        call.no_such_field  # noqa: B018 -- an unknown name is not a field with a default


def test_arguments_are_kept_as_passed():
    recorder = RecordingBackend(PoolAwareBackend())
    info = HiCacheStorageExtraInfo()
    recorder.batch_exists(KEYS, info)
    recorder.batch_exists(KEYS, extra_info=info)
    positional, keyword = recorder.calls
    assert positional.args == (KEYS, info) and dict(positional.kwargs) == {}
    assert keyword.args == (KEYS,) and keyword.kwargs == {"extra_info": info}
    with pytest.raises(TypeError):  # the empty mapping of a call without keywords is shared: it must be read-only
        positional.kwargs["extra_info"] = info  # type: ignore[index]


def test_iterators_are_not_consumed_by_recording():
    inner = PoolAwareBackend()
    recorder = RecordingBackend(inner)
    seen = []

    def reader(transfers, extra_info=None):
        seen.extend(transfer.name for transfer in transfers)
        return {}

    inner.batch_get_v2 = reader  # an instance attribute shadows the method; the recorder forwards to it
    recorder.batch_get_v2(iter([PoolTransfer(name="kv", keys=KEYS[:1])]))
    assert seen == [PoolName.KV]
    assert recorder.calls[0].transfers is None


def test_recording_problems_never_reach_the_engine():
    class Exploding:
        @property
        def prefix_keys(self):
            raise RuntimeError("boom")

    recorder = RecordingBackend(PoolAwareBackend())
    assert recorder.batch_exists(KEYS, Exploding()) == 0
    assert recorder.calls[0].recording_problem == "RuntimeError: boom"


def test_bad_inner_objects_are_rejected():
    with pytest.raises(ValueError) as none_error:
        RecordingBackend(None)
    assert str(none_error.value) == "RecordingBackend.inner: must be a storage backend object (got None) [BE-24]"
    recorder = RecordingBackend(PoolAwareBackend())
    with pytest.raises(ValueError) as nested_error:
        RecordingBackend(recorder)
    assert str(nested_error.value) == (
        "RecordingBackend.inner: must not itself be a RecordingBackend (got RecordingBackend[PoolAwareBackend]) [BE-24]"
    )
