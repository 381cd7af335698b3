"""The page strategies of the reference backends keep the same clauses: the vendor suite's verdicts agree.

Scenario: the vendor suite (smoke profile, one seed) against each reference
backend once per page strategy it can use (reference/backends/strategies.py):
memory with ``SLAB_ROWS`` (its default), ``BATCHED`` and ``PER_PAGE``; file
and Redis (standalone and cluster) with ``BATCHED`` (their default) and
``PER_PAGE``.
Expected: every strategy passes, and its verdict on every clause and every
check (status and reason) is the one the plain ``PER_PAGE`` path gets.
Why it matters: the batch paths are optimisations of the per-page path that
reads like the clauses; a fast path that changed a verdict would be a
different backend.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Optional

import pytest

from hicache_contracts.conformance import BackendFactory, SuiteOptions, run_suite
from hicache_reference.backdoors import FileBackdoor, MemoryBackdoor
from hicache_reference.backends import FileBackend, MemoryBackend, forget_shared_memory_store
from hicache_reference.backends.strategies import BATCHED, PER_PAGE, SLAB_ROWS, PageStrategy
from tests.reference.backend_checks import config, make_pool, page_keys, slots_of, write_pages

STRATEGIES = {
    "memory": (SLAB_ROWS, BATCHED, PER_PAGE),
    "file": (BATCHED, PER_PAGE),
    "redis": (BATCHED, PER_PAGE),
}
"""The strategies each reference backend is run with; its default comes first."""

_runs = itertools.count()


def with_strategy(backend_class: type, strategy: PageStrategy) -> type:
    """Return ``backend_class`` moving pages with ``strategy`` (same name, so reports read the same)."""
    return type(
        backend_class.__name__,
        (backend_class,),
        {"strategy": strategy, "__module__": backend_class.__module__, "__qualname__": backend_class.__qualname__},
    )


def verdicts(factory: BackendFactory) -> tuple[tuple, tuple, bool]:
    """Run the suite against ``factory``; return every clause's and check's verdict, and whether it failed."""
    report = run_suite(factory, SuiteOptions(profile="smoke", seed=0), title="reference backend")
    (section,) = report.sections
    clauses = tuple(sorted((item.clause_id, item.status, item.reason) for item in section.clauses))
    checks = tuple(sorted((item.check, item.status) for item in section.checks))
    return clauses, checks, report.failed


def assert_same_verdicts(factories: dict[str, BackendFactory], cleanup: Optional[Any] = None) -> None:
    """Run every factory; all pass, and all give the verdicts of the ``per-page`` one."""
    results = {}
    for name, factory in factories.items():
        try:
            results[name] = verdicts(factory)
        finally:
            if cleanup is not None:
                cleanup(factory)
    plain = results[PER_PAGE.name]
    assert plain[0] and plain[1], "the suite gave no verdicts"
    for name, (clauses, checks, failed) in results.items():
        assert not failed, f"{name}: the suite failed"
        assert clauses == plain[0], f"{name}: clause verdicts differ: {sorted(set(clauses) ^ set(plain[0]))}"
        assert checks == plain[1], f"{name}: check verdicts differ: {sorted(set(checks) ^ set(plain[1]))}"


def test_memory_backend_strategies_give_the_same_verdicts() -> None:
    def factory(strategy: PageStrategy) -> BackendFactory:
        store = f"strategies-{os.getpid()}-{next(_runs)}"
        target = with_strategy(MemoryBackend, strategy)
        return BackendFactory(
            target, {"store": store}, "hicache_reference.backends:MemoryBackend", backdoor=MemoryBackdoor()
        )

    assert MemoryBackend.strategy is SLAB_ROWS
    assert_same_verdicts(
        {strategy.name: factory(strategy) for strategy in STRATEGIES["memory"]},
        cleanup=lambda used: forget_shared_memory_store(used.extra_config["store"]),
    )


def test_file_backend_strategies_give_the_same_verdicts(tmp_path: Any) -> None:
    def factory(strategy: PageStrategy) -> BackendFactory:
        target = with_strategy(FileBackend, strategy)
        directory = tmp_path / strategy.name
        return BackendFactory(
            target, {"path": str(directory)}, "hicache_reference.backends:FileBackend", backdoor=FileBackdoor()
        )

    assert FileBackend.strategy is BATCHED
    assert_same_verdicts({strategy.name: factory(strategy) for strategy in STRATEGIES["file"]})


@pytest.mark.redis
@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_redis_backend_strategies_give_the_same_verdicts(mode: str) -> None:
    from hicache_reference.backends.redis_backend import RedisBackend
    from tests.redis_support import delete_prefix, require_mode, unique_key_prefix

    server_extra = require_mode(mode)

    def factory(strategy: PageStrategy) -> BackendFactory:
        target = with_strategy(RedisBackend, strategy)
        extra = {**server_extra, "key_prefix": unique_key_prefix()}
        return BackendFactory(target, extra, "hicache_reference.backends:RedisBackend")

    assert RedisBackend.strategy is BATCHED
    assert_same_verdicts(
        {strategy.name: factory(strategy) for strategy in STRATEGIES["redis"]},
        cleanup=lambda used: delete_prefix(server_extra, used.extra_config["key_prefix"]),
    )


SINGLE_FORMS = ("_object_size", "_read_object_into", "_read_object_into_ranges", "_write_object")
BATCH_FORMS = ("_object_sizes", "_read_objects_into", "_read_objects_into_ranges", "_write_objects")


@pytest.mark.parametrize("strategy", [PER_PAGE, BATCHED], ids=lambda strategy: strategy.name)
def test_each_strategy_takes_its_own_path(tmp_path: Any, strategy: PageStrategy) -> None:
    """PER_PAGE calls only the single-object primitives, BATCHED their batch forms: the suite above compares two
    different paths, not one path twice."""
    called: list[str] = []

    def recording(name: str) -> Any:
        original = getattr(FileBackend, name)

        def method(self: Any, *arguments: Any) -> Any:
            called.append(name)
            return original(self, *arguments)

        return method

    target = type(
        "Recording",
        (with_strategy(FileBackend, strategy),),
        {name: recording(name) for name in SINGLE_FORMS + BATCH_FORMS},
    )
    backend = target(config(), {"path": str(tmp_path)})
    backend.register_mem_pool_host(make_pool(8))
    keys = page_keys(4)
    assert write_pages(backend, keys, [0, 1, 2, 3]) == [True] * 4
    assert backend.batch_exists(keys) == 4
    assert backend.batch_get_v1(keys, slots_of(backend.mem_pool_host, [4, 5, 6, 7])) == [True] * 4
    if strategy is PER_PAGE:
        assert not set(called) & set(BATCH_FORMS), called
        assert {"_write_object", "_object_size", "_read_object_into_ranges"} <= set(called), called
    else:  # the batch forms, which may loop over a single form the store has no batch form of (sizes, here)
        assert {"_write_objects", "_object_sizes", "_read_objects_into_ranges"} <= set(called), called
        assert not {"_write_object", "_read_object_into", "_read_object_into_ranges"} & set(called), called
