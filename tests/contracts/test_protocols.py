"""The backend protocols: one per generation, runtime-checkable, with SGLang's method names."""

from __future__ import annotations


import pytest

from hicache_contracts.capabilities import LEGACY_METHODS, LEVEL_METHODS, V1_METHODS, V2_METHODS, detect_capabilities
from hicache_contracts.protocols import LegacyBackend, PoolAwareV2Backend, ZeroCopyV1Backend, protocol_methods
from tests.contracts.test_capabilities import EveryGeneration  # legacy, v1 and v2, every stub overridden

PROTOCOLS = [(LegacyBackend, LEGACY_METHODS), (ZeroCopyV1Backend, V1_METHODS), (PoolAwareV2Backend, V2_METHODS)]
GENERATION_METHODS = {
    LegacyBackend: (
        "get",
        "set",
        "exists",
        "batch_get",
        "batch_set",
        "batch_exists",
        "clear",
        "get_stats",
        "register_mem_pool_host",
    ),
    ZeroCopyV1Backend: ("batch_get_v1", "batch_set_v1"),
    PoolAwareV2Backend: ("batch_exists_v2", "batch_get_v2", "batch_set_v2", "register_mem_host_pool_v2"),
}
"""SGLang's HiCacheStorage methods per generation, written out (the protocols are the project's one list)."""


@pytest.mark.parametrize("protocol, names", PROTOCOLS, ids=lambda value: getattr(value, "__name__", None))
def test_protocol_lists_the_generation_methods(protocol, names):
    """The protocols list SGLang's methods of each generation, and capability detection uses that list."""
    assert protocol_methods(protocol) == GENERATION_METHODS[protocol] == names


def test_the_core_level_needs_the_legacy_page_methods_not_the_housekeeping():
    assert LEVEL_METHODS["core"] == ("get", "set", "exists", "batch_get", "batch_set", "batch_exists")


@pytest.mark.clause("BE-24")
def test_registration_methods_belong_to_their_generations():
    assert "register_mem_pool_host" in protocol_methods(LegacyBackend)
    assert "register_mem_host_pool_v2" in protocol_methods(PoolAwareV2Backend)


def test_full_backend_satisfies_every_protocol():
    backend = EveryGeneration()
    assert isinstance(backend, LegacyBackend)
    assert isinstance(backend, ZeroCopyV1Backend)
    assert isinstance(backend, PoolAwareV2Backend)


@pytest.mark.parametrize("missing", LEGACY_METHODS + V1_METHODS + V2_METHODS)
def test_one_missing_method_fails_its_protocol_only(missing):
    """Planted bug per method: a backend lacking it is not an instance of that generation's protocol."""
    members = {name: value for klass in reversed(EveryGeneration.__mro__[:-1]) for name, value in vars(klass).items()}
    partial = type("Partial", (), {name: value for name, value in members.items() if name != missing})()
    for protocol, names in PROTOCOLS:
        assert isinstance(partial, protocol) == (missing not in names)


@pytest.mark.clause("BE-8")
def test_protocol_signatures_take_extra_info_positionally_and_by_keyword():
    """The protocols themselves model BE-8: every method with extra_info takes it both ways."""

    class Spelled(LegacyBackend, ZeroCopyV1Backend, PoolAwareV2Backend):
        pass

    capabilities = detect_capabilities(Spelled(), probe=False)
    for name in ("batch_exists", "batch_get_v1", "batch_set_v1", "batch_exists_v2", "batch_get_v2", "batch_set_v2"):
        entry = capabilities.method(name)
        assert (entry.extra_info_positional, entry.extra_info_keyword) == (True, True), name


@pytest.mark.clause("BE-18")
def test_inheriting_protocol_bodies_is_reported_as_returning_none():
    """A class that subclasses a protocol without overriding gets bodies that return None: BE-18 flags it."""

    class Unfinished(ZeroCopyV1Backend):
        pass

    capabilities = detect_capabilities(Unfinished())
    assert capabilities.returning_none == ("batch_get_v1", "batch_set_v1")
    assert capabilities.missing_for("v1") == ("batch_get_v1", "batch_set_v1")


@pytest.mark.clause("BE-24")
def test_attach_hook_is_its_own_protocol():
    """on_host_pools_registered (0.5.23) belongs to no generation: a backend without it still satisfies all three."""
    from hicache_contracts.protocols import AttachHooks

    assert protocol_methods(AttachHooks) == ("on_host_pools_registered",)
    assert not isinstance(EveryGeneration(), AttachHooks)
    hooked = type("Hooked", (EveryGeneration,), {"on_host_pools_registered": lambda self: None})()
    assert isinstance(hooked, AttachHooks) and isinstance(hooked, PoolAwareV2Backend)
