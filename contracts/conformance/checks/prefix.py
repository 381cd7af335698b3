"""Checks of the prefix level: the tri-state prefix (PFX-1) and prefix_keys never mutated nor kept (PFX-6).

PFX-6 is checked the way SGLang hands the prefix over: a plain, mutable
list inside an extra-info dataclass (SGLang's own when importable). The
list is a ``WatchedList``: it records every mutating call; its content is
compared before and after; and the suite holds only a weak reference to it
after the call, so a backend that keeps the list (instead of a copy) is
seen keeping it.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any, Callable

from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.framework import conformance_check, expect, fail
from hicache_contracts.conformance.session.watched import ExtraInfoStandIn, WatchedList
from hicache_contracts.models import PoolName


@conformance_check("PFX-1")
def prefix_states_none_empty_and_list_all_work(suite: SuiteContext) -> None:
    """Pages written in batches with the prefix off (None), at the root ([]) and extended (a list) are found with the same prefixes."""
    instance = suite.instances.main
    seen = False
    for state in ("None", "[] then a list"):
        chain = suite.names.new_keys(4)
        first, second = chain[:2], chain[2:]
        if state == "None":
            infos = (suite.wire.info(prefix_keys=None), suite.wire.info(prefix_keys=None))
            whole = suite.wire.info(prefix_keys=None)
        else:
            infos = (suite.wire.info(prefix_keys=[]), suite.wire.info(prefix_keys=first))
            whole = suite.wire.info(prefix_keys=[])
        for batch, info in zip((first, second), infos):
            if suite.claims("v1"):
                suite.io.store(instance, batch, info=info, path="v1", clause_id="PFX-1")
            else:
                suite.io.store(instance, batch, path="legacy", clause_id="PFX-1")
        shown = (
            f"write {suite.names.show(first)} with {suite.names.show(infos[0])} and {suite.names.show(second)} with "
            f"{suite.names.show(infos[1])}"
        )
        count = suite.io.count(instance, chain, whole, clause_id="PFX-1")
        seen = seen or count > 0
        expect(
            suite.io.counted(count, 4),
            "PFX-1",
            f"batch_exists over the chain with {suite.names.show(whole)} found {count} of 4 pages",
            shown,
        )
        count = suite.io.count(instance, second, infos[1], clause_id="PFX-1")
        seen = seen or count > 0
        expect(
            suite.io.counted(count, 2),
            "PFX-1",
            f"batch_exists over the second batch with {suite.names.show(infos[1])} found {count} of 2 pages",
            shown,
        )
        if suite.claims("v1"):
            # The whole chain, read from its root as a prefetch reads it: the setup read each batch back with the
            # prefix it was written with, so only this read can show a backend placing a page by its prefix.
            pages = suite.io.read(instance, chain, pages=[4, 5, 6, 7], info=whole, path="v1", clause_id="PFX-1")
            seen = seen or any(page is not None for page in pages)
            expect(
                all(suite.io.holds(key, instance.pool, page) for key, page in zip(chain, pages)),
                "PFX-1",
                f"batch_get_v1 over the chain with {suite.names.show(whole)} did not read back every page written",
                shown,
            )
    suite.io.require_seen(seen, "how pages written under each prefix state are found")


def watched_info(suite: SuiteContext, prefix: list[str]) -> tuple[Any, WatchedList]:
    """Return an extra info holding a watched copy of ``prefix``, shaped as SGLang hands it over."""
    watched = WatchedList(prefix)
    if suite.wire.sglang is not None:
        return suite.wire.sglang.HiCacheStorageExtraInfo(prefix_keys=watched, extra_info=None), watched
    return ExtraInfoStandIn(prefix_keys=watched, extra_info=None), watched


PrefixCall = tuple[str, Callable[..., Any], Callable[[], tuple[Any, ...]]]
"""A call taking extra_info: its name, the backend method, and what makes its arguments before the extra info."""


def prefix_calls(suite: SuiteContext) -> list[PrefixCall]:
    """Every call of a claimed level that takes extra_info, as ``(name, method, arguments())``; each writes or asks
    for fresh keys, and its arguments are shown whole in the transcript and the counterexample."""
    backend, pool = suite.instances.main.backend, suite.instances.main.pool
    calls: list[PrefixCall] = [("batch_exists", backend.batch_exists, lambda: (suite.names.new_keys(2),))]
    if suite.claims("v1"):

        def set_v1() -> tuple[Any, ...]:
            keys = suite.names.new_keys(2)
            for key, page in zip(keys, (0, 1)):
                pool.poke(page, suite.pages.page_for(key, pool))
            return keys, pool.slots([0, 1])

        calls += [
            ("batch_set_v1", backend.batch_set_v1, set_v1),
            ("batch_get_v1", backend.batch_get_v1, lambda: (suite.names.new_keys(2), pool.slots([2, 3]))),
        ]
    if suite.claims("v2"):  # v2 carries the sidecar pools
        swa = suite.instances.main.sidecars.get(PoolName.SWA.value, pool)
        calls += [
            ("batch_exists_v2", backend.batch_exists_v2, lambda: (suite.names.new_keys(2), [])),
            (
                "batch_set_v2",
                backend.batch_set_v2,
                lambda: ([suite.wire.transfer(PoolName.SWA, suite.names.new_keys(1), swa.slots([4]))],),
            ),
            (
                "batch_get_v2",
                backend.batch_get_v2,
                lambda: ([suite.wire.transfer(PoolName.SWA, suite.names.new_keys(1), swa.slots([5]))],),
            ),
        ]
    return calls


def shown_call(suite: SuiteContext, name: str, arguments: tuple[Any, ...], prefix: list[str]) -> str:
    """``name(arguments..., extra_info(prefix_keys=[...]))``, every argument shown as the transcript shows it."""
    shown = ", ".join(suite.names.show(argument) for argument in arguments)
    return f"{name}({shown}, extra_info(prefix_keys={suite.names.show(prefix)}))"


@conformance_check("PFX-6")
def prefix_keys_are_never_mutated(suite: SuiteContext) -> None:
    """No call changes the prefix_keys list it receives."""
    for name, method, arguments in prefix_calls(suite):
        prefix = suite.names.new_keys(3)
        info, watched = watched_info(suite, prefix)
        given = arguments()
        suite.calls.call_as("PFX-6", name, method, *given, info)
        changed = list(watched) != prefix
        expect(
            not watched.mutations and not changed,
            "PFX-6",
            f"{name} mutated prefix_keys ({', '.join(watched.mutations) or 'its content changed'})",
            f"{shown_call(suite, name, given, prefix)} left prefix_keys as {suite.names.show(list(watched))}",
        )


@conformance_check("PFX-6")
def prefix_keys_are_copied_if_kept(suite: SuiteContext) -> None:
    """No call keeps the prefix_keys list after it returns (a backend that needs it later keeps a copy)."""
    watchers: list[tuple[str, str, weakref.ref[WatchedList]]] = []
    for name, method, arguments in prefix_calls(suite):
        prefix = suite.names.new_keys(3)
        info, watched = watched_info(suite, prefix)
        given = arguments()
        suite.calls.call_as("PFX-6", name, method, *given, info)
        watched.append("changed-after-the-call")  # a backend reading its kept reference later would see this
        watchers.append((name, shown_call(suite, name, given, prefix), weakref.ref(watched)))
        del info, watched, given
    if any(watcher() is not None for _, _, watcher in watchers):
        gc.collect()  # only when needed: a reference cycle may hold the list until a collection
    for name, shown, watcher in watchers:
        kept = watcher()
        if kept is not None:
            holders = [type(holder).__name__ for holder in gc.get_referrers(kept) if holder is not watchers][:3]
            fail(
                "PFX-6",
                f"{name} kept a reference to the prefix_keys list after returning (held by "
                f"{', '.join(holders) or 'an object'}); a backend must copy what it keeps",
                f"{shown}, then the caller drops the list",
            )
