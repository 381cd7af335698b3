"""Capability detection: generations, stubs (BE-18), extra_info acceptance (BE-8), declared levels.

Each backend class below is a scenario; the buggy ones are the planted bugs
the detection must report. Over 450 lines: the scenarios are small classes, one per case, read as a
list.
"""

from __future__ import annotations

import functools
import textwrap

import pytest
import torch

from hicache_contracts.capabilities import (
    ALL_METHODS,
    Capabilities,
    ProbeOutcome,
    declared_levels,
    detect_capabilities,
    is_not_implemented_stub,
)
from tests.conformance.helpers import UnimplementedV1V2


# ------------------------------------------------------------------ scenarios
class LegacyOnly:
    """Implements the first generation and nothing else."""

    def get(self, key, target_location=None, target_sizes=None):
        return None

    def set(self, key, value=None, target_location=None, target_sizes=None):
        return True

    def exists(self, key):
        return False

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        return [None] * len(keys)

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        return True

    def batch_exists(self, keys, extra_info=None):
        return 0

    def clear(self):
        pass

    def get_stats(self):
        return None

    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host


class StorageBase(UnimplementedV1V2, LegacyOnly):
    """Like SGLang's base class: the v1 and v2 methods are stubs that raise NotImplementedError (v1 with a
    docstring, with a message)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        """Read pages into host slots."""
        raise NotImplementedError()

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement batch_set_v1")

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        raise NotImplementedError


class InheritsStubs(StorageBase):
    """Legacy only, with the v1/v2 stubs inherited from the base."""


class EveryGeneration(StorageBase):
    """Overrides every stub."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return [False] * len(keys)

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return [False] * len(keys)

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        return {"kv_hit_pages": 0}

    def batch_get_v2(self, transfers, extra_info=None):
        return {}

    def batch_set_v2(self, transfers, extra_info=None):
        return {}

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        self.pools = {host_pool_name: host_pool}


class V1ReturnsNone(InheritsStubs):
    """Planted bug (BE-18): unimplemented v1 methods that return None instead of raising."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return None

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        pass


class BatchExistsWithoutExtraInfo(LegacyOnly):
    """Planted bug (BE-8): the positional hit-query call raises TypeError."""

    def batch_exists(self, keys):
        return 0


class BatchExistsWithWrongName(LegacyOnly):
    """Planted bug (BE-8): a second parameter, but not named extra_info."""

    def batch_exists(self, keys, info=None):
        return 0


class BatchExistsKeywordOnly(LegacyOnly):
    """Planted bug (BE-8): extra_info is keyword-only, so the positional call fails."""

    def batch_exists(self, keys, *, extra_info=None):
        return 0


class V1WithoutExtraInfo(LegacyOnly):
    """Planted bug (BE-8): implemented v1 methods that take no extra_info."""

    def batch_get_v1(self, keys, host_indices):
        return [False] * len(keys)

    def batch_set_v1(self, keys, host_indices):
        return [False] * len(keys)


class Forwarding(LegacyOnly):
    """Wrappers that forward everything: *args and **kwargs accept extra_info both ways."""

    def batch_exists(self, *args, **kwargs):
        return 0

    def batch_get_v1(self, keys, *args, **kwargs):
        return [False] * len(keys)

    def batch_set_v1(self, *args, **kwargs):
        return []


class NotImplementedWhenDisabled(LegacyOnly):
    """Raises NotImplementedError only on a condition: the source can return, the probe tells."""

    enabled = False

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        if self.enabled:
            return [False] * len(keys)
        raise NotImplementedError("zero-copy is off in this configuration")

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        if self.enabled:
            return [False] * len(keys)
        raise NotImplementedError("zero-copy is off in this configuration")


class NeedsRegisteredPool(LegacyOnly):
    """Implemented v1 methods that fail before registration: a failing probe is not a stub."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return [False] * self.mem_pool_host.page_size

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        raise RuntimeError("storage offline")


class Hostile(LegacyOnly):
    """Attributes that break on access or are not callable; detection must survive them."""

    @property
    def batch_get_v1(self):
        raise RuntimeError("property exploded")

    batch_set_v1 = 5

    def batch_exists(self, keys, extra_info=None):
        raise KeyError("backend bug")


class ProbeRecorder(EveryGeneration):
    calls: list

    def __init__(self):
        self.calls = []

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        self.calls.append(("batch_get_v1", keys, host_indices, extra_info))
        return []

    def clear(self):
        self.calls.append(("clear",))


def _decorate(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs)

    return wrapper


class DecoratedStub(LegacyOnly):
    """A stub behind a decorator (functools.wraps): unwrapped before reading."""

    @_decorate
    def batch_get_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError

    @_decorate
    def batch_set_v1(self, keys, host_indices, extra_info=None):
        return [False] * len(keys)


class Declares(EveryGeneration):
    hicache_levels = ("core", "v1", "prefix")


def sourceless_class() -> type:
    """A class whose methods have no retrievable source: detection falls back to bytecode."""
    namespace: dict = {}
    exec(
        textwrap.dedent(
            """
            class Sourceless:
                def batch_get_v1(self, keys, host_indices, extra_info=None):
                    raise NotImplementedError("no zero-copy")
                def batch_set_v1(self, keys, host_indices, extra_info=None):
                    if keys:
                        return [False] * len(keys)
                    raise NotImplementedError
                def register_mem_host_pool_v2(self, host_pool, host_pool_name):
                    raise NotImplementedError
            """
        ),
        namespace,
    )
    return namespace["Sourceless"]


# ------------------------------------------------------------------ generations
def test_every_generation_detected():
    capabilities = detect_capabilities(EveryGeneration())
    assert (capabilities.legacy, capabilities.v1, capabilities.v2, capabilities.prefix) == (True, True, True, True)
    for level in ("core", "v1", "v2", "prefix"):
        assert capabilities.missing_for(level) == ()
    assert tuple(entry.name for entry in capabilities.methods) == ALL_METHODS
    assert capabilities.declared is None


def test_legacy_only_detected():
    capabilities = detect_capabilities(LegacyOnly())
    assert (capabilities.legacy, capabilities.v1, capabilities.v2, capabilities.prefix) == (True, False, False, True)
    assert capabilities.missing_for("v1") == ("batch_get_v1", "batch_set_v1")
    assert capabilities.missing_for("v2") == (
        "batch_exists_v2",
        "batch_get_v2",
        "batch_set_v2",
        "register_mem_host_pool_v2",
    )
    assert capabilities.method("batch_get_v1").problem == "batch_get_v1 is absent"


def test_missing_core_method_detected():
    partial = type("NoGet", (), {k: v for k, v in vars(LegacyOnly).items() if k != "get"})()
    capabilities = detect_capabilities(partial)
    assert capabilities.missing_for("core") == ("get",)
    assert not capabilities.legacy


@pytest.mark.clause("BE-18")
def test_inherited_not_implemented_stubs_are_not_implemented():
    capabilities = detect_capabilities(InheritsStubs())
    assert capabilities.legacy and not capabilities.v1 and not capabilities.v2
    assert capabilities.missing_for("v1") == ("batch_get_v1", "batch_set_v1")
    assert len(capabilities.missing_for("v2")) == 4
    entry = capabilities.method("batch_get_v1")
    assert (entry.present, entry.stub, entry.implemented, entry.probe) == (True, True, False, ProbeOutcome.NOT_PROBED)
    assert entry.defined_in == f"{__name__}.StorageBase"
    assert entry.problem == f"batch_get_v1 only raises NotImplementedError (defined in {__name__}.StorageBase)"
    assert capabilities.returning_none == ()


@pytest.mark.clause("BE-18")
def test_not_implemented_found_by_the_probe():
    capabilities = detect_capabilities(NotImplementedWhenDisabled())
    entry = capabilities.method("batch_get_v1")
    assert entry.stub is False
    assert entry.probe == ProbeOutcome.RAISED_NOT_IMPLEMENTED
    assert not entry.implemented
    assert capabilities.missing_for("v1") == ("batch_get_v1", "batch_set_v1")


@pytest.mark.clause("BE-18")
def test_method_returning_none_is_reported():
    """The planted bug: an unimplemented method that returns None instead of raising."""
    capabilities = detect_capabilities(V1ReturnsNone())
    assert capabilities.returning_none == ("batch_get_v1", "batch_set_v1")
    entry = capabilities.method("batch_set_v1")
    assert entry.returns_none_when_probed and not entry.implemented
    assert entry.problem == (
        f"batch_set_v1 returned None on empty input instead of raising NotImplementedError "
        f"(defined in {__name__}.V1ReturnsNone) [BE-18]"
    )
    assert not capabilities.v1


@pytest.mark.clause("BE-18")
def test_probe_failing_for_another_reason_is_not_a_stub():
    capabilities = detect_capabilities(NeedsRegisteredPool())
    entry = capabilities.method("batch_get_v1")
    assert entry.probe == ProbeOutcome.RAISED
    assert entry.probe_detail == "AttributeError: 'NeedsRegisteredPool' object has no attribute 'mem_pool_host'"
    assert capabilities.method("batch_set_v1").probe_detail == "RuntimeError: storage offline"
    assert capabilities.v1


@pytest.mark.clause("BE-18")
def test_decorated_stub_is_unwrapped():
    capabilities = detect_capabilities(DecoratedStub())
    assert capabilities.method("batch_get_v1").stub is True
    assert capabilities.method("batch_set_v1").stub is False
    assert capabilities.missing_for("v1") == ("batch_get_v1",)


@pytest.mark.clause("BE-18")
def test_stub_without_source_is_read_from_bytecode():
    backend = sourceless_class()()
    capabilities = detect_capabilities(backend, probe=False)
    assert capabilities.method("batch_get_v1").stub is True
    assert capabilities.method("batch_set_v1").stub is False  # it can return
    assert capabilities.method("register_mem_host_pool_v2").stub is True


def _raises_plain():
    raise NotImplementedError


def _raises_with_message(self):
    """Documented stub."""
    raise NotImplementedError(f"{type(self).__name__} has no v1")


def _logs_then_raises(self):
    print("not supported")
    raise NotImplementedError()


def _raises_qualified():
    import builtins

    raise builtins.NotImplementedError


def _returns_on_a_branch(flag):
    if flag:
        return 1
    raise NotImplementedError


def _raises_something_else():
    raise ValueError("no")


def _does_nothing():
    pass


def _body_is_ellipsis(): ...


def _generator_then_raise():
    yield 1
    raise NotImplementedError


def _nested_return_does_not_count():
    def helper():
        return 1

    raise NotImplementedError(helper())


@pytest.mark.clause("BE-18")
@pytest.mark.parametrize(
    "function, expected",
    [
        (_raises_plain, True),
        (_raises_with_message, True),
        (_logs_then_raises, True),
        (_raises_qualified, True),
        (_nested_return_does_not_count, True),
        (_returns_on_a_branch, False),
        (_raises_something_else, False),
        (_does_nothing, False),
        (_body_is_ellipsis, False),
        (_generator_then_raise, False),
        (lambda: None, False),
        (len, None),
    ],
    ids=lambda value: getattr(value, "__name__", None) if callable(value) else None,
)
def test_is_not_implemented_stub(function, expected):
    assert is_not_implemented_stub(function) is expected


# ------------------------------------------------------------------ extra_info (BE-8)
@pytest.mark.clause("BE-8")
def test_batch_exists_without_extra_info_is_detected():
    capabilities = detect_capabilities(BatchExistsWithoutExtraInfo())
    entry = capabilities.method("batch_exists")
    assert (entry.extra_info_positional, entry.extra_info_keyword, entry.accepts_extra_info) == (False, False, False)
    assert capabilities.legacy  # core needs batch_exists to exist, prefix needs the parameter
    assert capabilities.missing_for("prefix") == ("batch_exists",)
    assert not capabilities.prefix


@pytest.mark.clause("BE-8")
@pytest.mark.parametrize(
    "backend_class, positional, keyword",
    [
        (LegacyOnly, True, True),
        (BatchExistsWithWrongName, True, False),
        (BatchExistsKeywordOnly, False, True),
        (BatchExistsWithoutExtraInfo, False, False),
        (Forwarding, True, True),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_extra_info_positional_and_keyword(backend_class, positional, keyword):
    entry = detect_capabilities(backend_class()).method("batch_exists")
    assert (entry.extra_info_positional, entry.extra_info_keyword) == (positional, keyword)
    assert detect_capabilities(backend_class()).prefix == positional  # every release passes it positionally here


@pytest.mark.clause("BE-8")
def test_forwarding_methods_accept_extra_info():
    capabilities = detect_capabilities(Forwarding())
    for name in ("batch_exists", "batch_get_v1", "batch_set_v1"):
        assert capabilities.method(name).accepts_extra_info is True, name
    assert capabilities.v1 and capabilities.prefix


@pytest.mark.clause("BE-8")
def test_implemented_v1_without_extra_info_breaks_prefix():
    capabilities = detect_capabilities(V1WithoutExtraInfo())
    assert capabilities.v1
    assert capabilities.missing_for("prefix") == ("batch_get_v1", "batch_set_v1")


@pytest.mark.clause("BE-8")
def test_unimplemented_methods_do_not_count_for_prefix():
    """Stubs are not held to BE-8: only methods a backend implements must take extra_info."""

    class StubsWithoutExtraInfo(LegacyOnly):
        def batch_get_v1(self, keys, host_indices):
            raise NotImplementedError

    assert detect_capabilities(StubsWithoutExtraInfo()).missing_for("prefix") == ()


def test_extra_info_not_applicable_to_other_methods():
    entry = detect_capabilities(EveryGeneration()).method("get")
    assert (entry.extra_info_positional, entry.extra_info_keyword, entry.accepts_extra_info) == (None, None, None)


# ------------------------------------------------------------------ probing
def test_probe_uses_empty_inputs_and_touches_nothing_else():
    backend = ProbeRecorder()
    detect_capabilities(backend)
    assert len(backend.calls) == 1
    name, keys, host_indices, extra_info = backend.calls[0]
    assert (name, keys, extra_info) == ("batch_get_v1", [], None)
    assert host_indices.dtype == torch.int64 and host_indices.shape == (0,)


def test_probe_can_be_switched_off():
    backend = ProbeRecorder()
    capabilities = detect_capabilities(backend, probe=False)
    assert backend.calls == []
    assert all(entry.probe == ProbeOutcome.NOT_PROBED for entry in capabilities.methods)
    assert detect_capabilities(V1ReturnsNone(), probe=False).returning_none == ()


def test_detection_never_raises_on_a_hostile_backend():
    capabilities = detect_capabilities(Hostile())
    assert capabilities.method("batch_get_v1").present is False
    assert capabilities.method("batch_set_v1").present is False
    batch_exists = capabilities.method("batch_exists")
    assert (batch_exists.probe, batch_exists.probe_detail) == (ProbeOutcome.RAISED, "KeyError: 'backend bug'")


def test_detection_of_an_arbitrary_object():
    capabilities = detect_capabilities(object())
    assert not any(entry.present for entry in capabilities.methods)
    assert capabilities.missing_for("prefix") == ("batch_exists",)


def test_capabilities_are_frozen():
    capabilities = detect_capabilities(LegacyOnly())
    with pytest.raises(AttributeError):
        capabilities.declared = ("core",)
    with pytest.raises(AttributeError):
        capabilities.methods[0].present = False
    assert isinstance(capabilities, Capabilities)


def test_unknown_level_and_method_are_named():
    capabilities = detect_capabilities(LegacyOnly())
    with pytest.raises(ValueError) as caught:
        capabilities.missing_for("v3")
    assert str(caught.value) == "Capabilities.level: must be one of ['core', 'v1', 'v2', 'prefix'] (got 'v3')"
    with pytest.raises(ValueError) as caught:
        capabilities.method("put")
    assert str(caught.value).startswith("Capabilities.method: must be one of ['get', 'set',")


# ------------------------------------------------------------------ declared levels
def test_declared_levels_read_from_the_class():
    assert declared_levels(Declares()) == ("core", "v1", "prefix")
    assert declared_levels(Declares) == ("core", "v1", "prefix")
    assert declared_levels(LegacyOnly()) is None
    assert detect_capabilities(Declares()).declared == ("core", "v1", "prefix")


@pytest.mark.parametrize(
    "levels, message",
    [
        ("core", "Bad.hicache_levels: must be a tuple of level names (got 'core')"),
        (
            ("core", "v3"),
            "Bad.hicache_levels: must name levels from "
            "['concurrency', 'controller', 'core', 'durability', 'format', 'hybrid', 'legacy', 'linker', "
            "'namespacing', 'prefix', 'ranks', 'robustness', 'v1', 'v2'] "
            "(got 'v3')",
        ),
        ((1,), "Bad.hicache_levels: must be a tuple of level names (got (1,))"),
    ],
)
def test_malformed_declaration_is_named(levels, message):
    bad = type("Bad", (), {"hicache_levels": levels})
    with pytest.raises(ValueError) as caught:
        declared_levels(bad())
    assert str(caught.value) == message
