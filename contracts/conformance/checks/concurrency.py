"""The concurrency tier (BE-23): worker threads mixing exists, get and set on overlapping keys, plus a
get_stats thread, with every call recorded and checked per key against a lossy write-once store.

The model: each key has one page (the suite's bytes for it). A set may be
refused (False) and, for a backend that may evict, a stored page may later
disappear; but

- a hit always carries exactly the key's bytes (never stale or corrupt);
- a hit, or a key inside batch_exists's leading run, needs a set of that
  key that began before the call ended;
- without eviction, a key whose set returned True is found by every call
  that begins after that set returned, and at the end.

Threads start together at a barrier; nothing waits by sleeping. Every wait
is bounded by the run's ``timeout_s``.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.framework import CheckSkipped, ClauseFailure, conformance_check, expect, fail

PAGES_PER_THREAD = 4
"""Host pages each worker owns (it writes from and reads into its own pages only)."""
MAX_STATS_CALLS = 100_000
"""Upper bound on get_stats calls, whatever the workers do."""


@dataclass(frozen=True)
class Event:
    """One recorded call."""

    thread: int
    operation: str
    keys: tuple[str, ...]
    start: int
    end: int
    outcome: Any


def _history(suite: SuiteContext, events: list[Event], key: str, origin: int) -> str:
    """Return the calls that touched ``key``, in time order, as lines (times in microseconds from the start)."""
    lines = []
    for event in sorted((item for item in events if key in item.keys), key=lambda item: item.start)[:12]:
        lines.append(
            f"  t={(event.start - origin) // 1000:>7}..{(event.end - origin) // 1000:<7} µs  "
            f"thread {event.thread}  {event.operation}({suite.names.show(list(event.keys))}) -> {event.outcome}"
        )
    return "\n".join(lines)


@conformance_check("BE-23", requires=("concurrency",), tier="concurrency")
def concurrent_calls_keep_every_key_consistent(suite: SuiteContext) -> None:
    """Worker threads mixing exists/get/set on shared keys, plus get_stats, never raise, corrupt or lose a page."""
    profile = suite.profile
    workers = max(3, profile.concurrency_threads)
    bound = suite.options.timeout_s
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("threads")),
        pages=workers * PAGES_PER_THREAD + 1,
        tag="concurrency",
    )
    suite.io.require_round_trip(instance)  # one thread moves pages: what fails below comes from the threads
    keys = suite.names.new_keys(profile.concurrency_keys)
    events: list[Event] = []
    problems: list[str] = []
    barrier = threading.Barrier(workers + 1)
    finished = threading.Event()
    origin = time.monotonic_ns()

    def worker(index: int) -> None:
        rng = random.Random(suite.seed * 7919 + index)
        own_pages = list(range(index * PAGES_PER_THREAD, (index + 1) * PAGES_PER_THREAD))
        try:
            barrier.wait(bound)
        except threading.BrokenBarrierError:
            return
        for _ in range(profile.concurrency_operations):
            operation = rng.choice(("exists", "get", "set"))
            chosen = rng.sample(keys, rng.randint(1, min(PAGES_PER_THREAD, len(keys))))
            pages = own_pages[: len(chosen)]
            start = time.monotonic_ns()
            try:
                if operation == "set":
                    outcome: Any = suite.io.write(instance, chosen, pages=pages, clause_id="BE-23")
                elif operation == "get":
                    read = suite.io.read(instance, chosen, pages=pages, clause_id="BE-23")
                    outcome = [page is not None for page in read]
                    for key, page in zip(chosen, read):
                        if page is not None and not suite.io.holds(key, instance.pool, page):
                            problems.append(f"thread {index} read {suite.names.label(key)} with corrupt bytes")
                else:
                    outcome = suite.io.count(instance, chosen, clause_id="BE-23")
            except ClauseFailure as failure:
                problems.append(f"thread {index}: {failure.message}")
                continue
            except Exception as error:  # the suite's own helpers wrap backend calls; this is a last resort
                problems.append(f"thread {index}: {operation} raised {type(error).__name__}: {error}")
                continue
            events.append(Event(index, operation, tuple(chosen), start, time.monotonic_ns(), outcome))

    def stats() -> None:
        calls = 0
        while not finished.is_set() and calls < MAX_STATS_CALLS:
            try:
                instance.backend.get_stats()
            except Exception as error:
                problems.append(f"get_stats raised {type(error).__name__}: {error} while IO ran")
                return
            calls += 1

    threads = [
        threading.Thread(target=worker, args=(index,), name=f"hicache-conform-worker-{index}", daemon=True)
        for index in range(workers)
    ]
    watcher = threading.Thread(target=stats, name="hicache-conform-stats", daemon=True)
    for thread in threads:
        thread.start()
    watcher.start()
    try:
        barrier.wait(bound)
        started = True
    except threading.BrokenBarrierError:  # a worker or this thread waited timeout_s: every worker returns at once
        started = False
    deadline = time.monotonic() + bound
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    finished.set()
    watcher.join(bound)
    if not started:
        raise CheckSkipped(
            f"the {workers} worker threads did not all start within {bound} s (the interpreter stalled), so they "
            "made no call; nothing was checked"
        )
    stuck = [thread.name for thread in threads if thread.is_alive()]
    shown = (
        f"{workers} threads x {profile.concurrency_operations} calls of exists/get/set over "
        f"{len(keys)} shared keys, plus get_stats"
    )
    expect(not stuck, "BE-23", f"{len(stuck)} worker thread(s) did not finish within {bound} s (deadlock?)", shown)
    expect(not watcher.is_alive(), "BE-23", f"get_stats did not return within {bound} s after the workers ended", shown)
    if problems:
        fail("BE-23", f"{problems[0]} ({len(problems)} problem(s) in all)", shown)
    _check_histories(suite, events, keys, origin, shown)
    suite.io.require_seen(
        any(
            event.outcome if event.operation == "exists" else any(event.outcome)
            for event in events
            if event.operation != "set"
        ),
        "how concurrent calls see each other's pages",
    )
    if not suite.may_evict:
        for key in keys:
            confirmed = any(
                event.operation == "set" and event.outcome[event.keys.index(key)]
                for event in events
                if key in event.keys
            )
            if confirmed:
                expect(
                    suite.io.count(instance, [key], clause_id="BE-23") == 1,
                    "BE-23",
                    f"{suite.names.label(key)} was stored (set returned True) but is gone after the threads finished",
                    shown + "\n" + _history(suite, events, key, origin),
                )


def _check_histories(suite: SuiteContext, events: list[Event], keys: list[str], origin: int, shown: str) -> None:
    """Check every recorded call against the model, key by key."""
    first_set_start: dict[str, int] = {}
    confirmed_at: dict[str, int] = {}
    for event in events:
        if event.operation != "set":
            continue
        for key, stored in zip(event.keys, event.outcome):
            first_set_start[key] = min(first_set_start.get(key, event.start), event.start)
            if stored:
                confirmed_at[key] = min(confirmed_at.get(key, event.end), event.end)
    for event in sorted(events, key=lambda item: item.start):
        if event.operation == "set":
            continue
        if event.operation == "get":
            hits = list(event.outcome)
        else:
            hits = [index < event.outcome for index in range(len(event.keys))]
        for key, hit in zip(event.keys, hits):
            began: Optional[int] = first_set_start.get(key)
            if hit and (began is None or began > event.end):
                fail(
                    "BE-23",
                    f"{event.operation} by thread {event.thread} found {suite.names.label(key)} before any write of it began",
                    shown + "\n" + _history(suite, events, key, origin),
                )
        if suite.may_evict:
            continue
        if event.operation == "get":
            for key, hit in zip(event.keys, hits):
                stored_at = confirmed_at.get(key)
                if not hit and stored_at is not None and stored_at < event.start:
                    fail(
                        "BE-23",
                        f"get by thread {event.thread} missed {suite.names.label(key)}, stored (set returned "
                        "True) before the get began",
                        shown + "\n" + _history(suite, events, key, origin),
                    )
        else:
            lower = 0
            for key in event.keys:
                stored_at = confirmed_at.get(key)
                if stored_at is None or stored_at >= event.start:
                    break
                lower += 1
            if event.outcome < lower:
                key = event.keys[event.outcome]
                fail(
                    "BE-23",
                    f"batch_exists by thread {event.thread} returned {event.outcome}, but the first {lower} "
                    "keys were stored before it began",
                    shown + "\n" + _history(suite, events, key, origin),
                )
