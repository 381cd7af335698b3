"""The vendor suite's stand-in for SGLang's failure injector (BE-33's check) behaves as the proxy SGLang builds.

Scenario: the proxy of ``checks.engine_calls`` in front of a recording backend; a plan refuses some data calls.
Expected: it offers exactly the methods BE-33 lists (the spec's tests compare those lists with each release's
injector); a refused call never reaches the backend and answers a miss of the method's shape; a call passed on
reaches it with every argument positional, as SGLang's proxy passes them; the housekeeping always passes.
Why it matters: a check that drives a backend through a proxy unlike SGLang's proves nothing about a backend
run under SGLang's injector.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from hicache_contracts.conformance.checks.engine_calls import FORWARDED, INJECTED, FailureInjector
from hicache_contracts.models import PoolName, PoolTransfer


class Recorder:
    """Answers every call with a hit, recording it as (name, positional arguments, keyword arguments)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return "from the backend"

        return record


def public_methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if inspect.isfunction(value) and not name.startswith("_")}


@pytest.mark.clause("BE-33")
def test_the_proxy_offers_exactly_the_methods_the_clause_lists() -> None:
    assert public_methods(FailureInjector) == set(FORWARDED) | set(INJECTED)
    assert not set(FORWARDED) & set(INJECTED)
    assert not hasattr(FailureInjector(Recorder()), "describe_l3_object_layout")


@pytest.mark.clause("BE-33")
def test_a_refused_call_answers_a_miss_and_never_reaches_the_backend() -> None:
    backend = Recorder()
    proxy = FailureInjector(backend)
    transfer = PoolTransfer(name=PoolName.KV, keys=["a", "b"])  # type: ignore[arg-type]
    misses = {
        "exists": (("a",), False),
        "get": (("a", None, None), None),
        "set": (("a", None), False),
        "batch_get": ((["a", "b"], None), [None, None]),
        "batch_set": ((["a", "b"], None), False),
        "batch_exists": ((["a", "b"], None), 0),
        "batch_get_v1": ((["a", "b"], None), [False, False]),
        "batch_set_v1": ((["a", "b"], None), [False, False]),
        "batch_get_v2": (([transfer], None), {PoolName.KV: [False, False]}),
        "batch_set_v2": (([transfer], None), {PoolName.KV: [False, False]}),
    }
    assert set(misses) | {"batch_exists_v2"} == set(INJECTED)
    for name, (arguments, miss) in misses.items():
        proxy.plan.append(True)
        assert getattr(proxy, name)(*arguments) == miss, name
    proxy.plan.append(True)
    assert proxy.batch_exists_v2(["a"], None, None).kv_hit_pages == 0
    assert backend.calls == [] and proxy.reached == []


@pytest.mark.clause("BE-33")
def test_a_call_passed_on_reaches_the_backend_with_every_argument_positional() -> None:
    backend = Recorder()
    proxy = FailureInjector(backend)
    assert proxy.batch_set(["a"], ["v"]) == "from the backend"
    assert proxy.get("a") == "from the backend"
    assert proxy.batch_exists(["a"]) == "from the backend"
    proxy.clear()
    proxy.close()
    assert backend.calls == [
        ("batch_set", (["a"], ["v"], None, None), {}),
        ("get", ("a", None, None), {}),
        ("batch_exists", (["a"], None), {}),
        ("clear", (), {}),
        ("close", (), {}),
    ]
    assert proxy.reached == ["batch_set", "get", "batch_exists", "clear", "close"]


@pytest.mark.clause("BE-33")
def test_the_housekeeping_passes_whatever_the_plan_says() -> None:
    backend = Recorder()
    proxy = FailureInjector(backend)
    proxy.plan.extend([True] * len(FORWARDED))
    proxy.register_mem_pool_host("pool")
    proxy.register_mem_host_pool_v2("pool", PoolName.KV)
    proxy.on_host_pools_registered()
    proxy.clear()
    assert proxy.get_stats() == "from the backend"
    proxy.close()
    assert [name for name, _, _ in backend.calls] == list(FORWARDED)
    assert list(proxy.plan) == [True] * len(FORWARDED)  # the plan is only for data calls
