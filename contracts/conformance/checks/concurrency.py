"""The concurrency tier (BE-23): the threads SGLang runs on one backend instance, on overlapping keys, plus a
get_stats thread, with every call recorded and checked per key against a lossy write-once store.

The threads are those of one controller (each attach builds its own backend): one IO thread reading
(get), one backup thread writing (set) and hit queries (exists) from the hit-query thread and, past
three threads, from other engine threads (BE-30). Two reads, or two writes, never run at once.

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

One cause, one failure: a call that raised, or a history the model forbids,
is replayed alone once the threads have ended (the same call; for a history,
fresh keys stored the way the call found them). What the replay shows
without any other thread running is no race: it is reported on the clause a
single call breaks (BE-2, BE-4, BE-15, BE-17, ...), as a finding of this
check's setup, and BE-23 is not reached. Only what the replay does not show
fails BE-23.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from hicache_spec import count_leading_run
from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.checks.core_hits import misses_never_raise
from hicache_contracts.conformance.framework import (
    CallTimedOut,
    CheckSkipped,
    ClauseFailure,
    PreconditionFailed,
    conformance_check,
    expect,
    fail,
)

PAGES_PER_THREAD = 4
"""Host pages each worker owns (it writes from and reads into its own pages only)."""
MAX_STATS_CALLS = 100_000
"""Upper bound on get_stats calls, whatever the workers do."""
ROLES = ("exists", "get", "set")
"""The calls of SGLang's threads on one instance: the hit-query thread, the IO thread, the backup thread; threads
past these three are further hit-query threads (other engine threads ask for hits too)."""


def role_of(index: int) -> str:
    """The calls worker ``index`` makes."""
    return ROLES[index] if index < len(ROLES) else "exists"


@dataclass(frozen=True)
class Problem:
    """A call of a worker that raised, or broke a clause of a single call."""

    thread: int
    operation: str
    keys: tuple[str, ...]
    start: int
    failure: ClauseFailure


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
    """Worker threads mixing exists/get/set on shared keys, plus get_stats, never raise, corrupt or lose a page.

    A race (a failure of BE-23 itself) depends on how the threads interleave: the same threads run a second round,
    on fresh keys, within what is left of the run's timeout, and the failure says whether it showed again."""
    profile = suite.profile
    workers = max(len(ROLES), profile.concurrency_threads)
    bound = suite.options.timeout_s
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("threads")),
        pages=(workers + 1) * PAGES_PER_THREAD + 1,
        tag="concurrency",
    )
    suite.io.require_round_trip(instance)  # one thread moves pages: what fails below comes from the threads
    deadline = time.monotonic() + bound  # both rounds together: the check waits no longer than the run's timeout
    began = time.monotonic()
    stuck: list[str] = []
    try:
        _round(suite, instance, workers, deadline, stuck)
        return
    except CallTimedOut:
        raise
    except ClauseFailure as failure:
        if failure.clause_id != "BE-23" or stuck:  # a single call's clause, or threads still running: told as is
            raise
        first = failure
    took = time.monotonic() - began
    left = deadline - time.monotonic()
    if left < took:
        fail(
            "BE-23",
            f"{first.message}; not retried: {max(left, 0.0):.1f} s of the run's timeout ({bound} s) were left, "
            f"the round took {took:.1f} s, so whether it is reproducible is not known",
            first.counterexample,
        )
    try:
        _round(suite, instance, workers, deadline, stuck)
    except CallTimedOut:
        raise
    except CheckSkipped as skipped:
        second = f"a second round of the same calls on fresh keys checked nothing ({skipped})"
        verdict = "not reproducible"
    except ClauseFailure as failure:
        if failure.clause_id != "BE-23":  # what a single call breaks is the root cause
            raise
        fail(
            "BE-23",
            f"{first.message}; a second round of the same calls on fresh keys failed too: {failure.message}; "
            "reproducible",
            f"{first.counterexample}\nsecond round:\n{failure.counterexample}",
        )
    else:
        second = "a second round of the same calls on fresh keys passed"
        verdict = "not reproducible (it depends on how the threads interleave)"
    fail("BE-23", f"{first.message}; {second}: {verdict}", first.counterexample)


def _round(suite: SuiteContext, instance: Any, workers: int, deadline: float, stuck: list[str]) -> None:
    """Run the threads once on fresh keys and judge what they did; every wait ends by ``deadline`` (monotonic s).
    Threads still running at the end are named in ``stuck``."""
    profile = suite.profile
    bound = suite.options.timeout_s

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    keys = suite.names.new_keys(profile.concurrency_keys)
    events: list[Event] = []
    problems: list[Problem] = []
    stats_problems: list[str] = []
    barrier = threading.Barrier(workers + 1)
    finished = threading.Event()
    paced = threading.Condition()
    writes_begun = [0]  # how many calls the writing thread has begun
    writer_done = threading.Event()
    origin = time.monotonic_ns()

    def worker(index: int) -> None:
        rng = random.Random(suite.seed * 7919 + index)
        own_pages = list(range(index * PAGES_PER_THREAD, (index + 1) * PAGES_PER_THREAD))
        try:
            barrier.wait(left())
        except threading.BrokenBarrierError:
            return
        operation = role_of(index)
        try:
            for turn in range(profile.concurrency_operations):
                chosen = rng.sample(keys, rng.randint(1, min(PAGES_PER_THREAD, len(keys))))
                if operation == "set":
                    with paced:
                        writes_begun[0] = turn + 1
                        paced.notify_all()
                else:  # keep pace with the backup thread, so that lookups and reads meet its writes
                    with paced:
                        paced.wait_for(lambda: writes_begun[0] > turn or writer_done.is_set(), timeout=left())
                start = time.monotonic_ns()
                try:
                    outcome: Any = _guarded_call(suite, instance, operation, chosen, own_pages[: len(chosen)])
                except ClauseFailure as failure:
                    problems.append(Problem(index, operation, tuple(chosen), start, failure))
                    continue
                events.append(Event(index, operation, tuple(chosen), start, time.monotonic_ns(), outcome))
        finally:
            if operation == "set":  # the others stop keeping pace, however the writer ended
                with paced:
                    writer_done.set()
                    paced.notify_all()

    def stats() -> None:
        calls = 0
        while not finished.is_set() and calls < MAX_STATS_CALLS:
            try:
                instance.backend.get_stats()
            except Exception as error:
                stats_problems.append(f"get_stats raised {type(error).__name__}: {error} while IO ran")
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
        barrier.wait(left())
        started = True
    except threading.BrokenBarrierError:  # a worker or this thread waited out the deadline: every worker returns
        started = False
    for thread in threads:
        thread.join(left())
    finished.set()
    watcher.join(left())
    if not started:
        raise CheckSkipped(
            f"the {workers} worker threads did not all start within {bound} s (the interpreter stalled), so they "
            "made no call; nothing was checked"
        )
    stuck.extend(thread.name for thread in [*threads, watcher] if thread.is_alive())
    shown = (
        f"{workers} threads (one reading, one writing, {workers - 2} asking for hits) x "
        f"{profile.concurrency_operations} calls over {len(keys)} shared keys, plus get_stats"
    )
    alive = [thread.name for thread in threads if thread.is_alive()]
    expect(not alive, "BE-23", f"{len(alive)} worker thread(s) did not finish within {bound} s (deadlock?)", shown)
    expect(not watcher.is_alive(), "BE-23", f"get_stats did not return within {bound} s after the workers ended", shown)
    if stats_problems:
        fail("BE-23", f"{stats_problems[0]} ({len(stats_problems)} problem(s) in all)", shown)
    if problems:
        _judge_problem(suite, instance, events, problems[0], len(problems), shown, spare=_spare_pages(workers))
    spare = _spare_pages(workers)
    _check_histories(
        suite,
        events,
        keys,
        origin,
        shown,
        replay=lambda operation, pattern: _replay(suite, instance, operation, pattern, spare),
    )
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


def _read_clause(suite: SuiteContext) -> str:
    return "BE-15" if suite.io.io_path() == "v1" else "BE-9"


def _write_clause(suite: SuiteContext) -> str:
    return "BE-17" if suite.io.io_path() == "v1" else "BE-9"


def _call(suite: SuiteContext, instance: Any, operation: str, keys: list[str], pages: list[int]) -> Any:
    """Make one worker call (``exists``, ``get`` or ``set``) and return what the history records; a call that
    raises, or a read that brings corrupt bytes, fails the clause a single such call breaks."""
    if operation == "set":
        return suite.io.write(instance, keys, pages=pages, clause_id=_write_clause(suite))
    if operation == "get":
        read = suite.io.read(instance, keys, pages=pages, clause_id=_read_clause(suite))
        for key, page in zip(keys, read):
            if page is not None and not suite.io.holds(key, instance.pool, page):
                fail(_read_clause(suite), f"a read brought {suite.names.label(key)} with corrupt bytes")
        return [page is not None for page in read]
    return suite.io.count(instance, keys, clause_id="BE-2")


def _guarded_call(suite: SuiteContext, instance: Any, operation: str, keys: list[str], pages: list[int]) -> Any:
    """``_call``, an error the suite's helpers did not name (one raised while reading a result, say) failing the
    clause of the call as that call raising."""
    try:
        return _call(suite, instance, operation, keys, pages)
    except ClauseFailure:
        raise
    except Exception as error:  # the suite's own helpers wrap backend calls; this is a last resort
        clause_id = {"set": _write_clause(suite), "get": _read_clause(suite)}.get(operation, "BE-2")
        raise ClauseFailure(clause_id, f"{operation} raised {type(error).__name__}: {error}") from error


def _spare_pages(workers: int) -> list[int]:
    """Host pages no worker uses: the replays read and write there."""
    return list(range(workers * PAGES_PER_THREAD, (workers + 1) * PAGES_PER_THREAD))


def _not_a_race(failure: ClauseFailure, what: str) -> PreconditionFailed:
    return PreconditionFailed(
        failure.clause_id,
        f"{failure.message} (also {what} with no other call running: no race)",
        failure.counterexample,
    )


def _confirmed_at(events: list[Event]) -> dict[str, int]:
    """When each key's first set that returned True ended (monotonic ns)."""
    confirmed_at: dict[str, int] = {}
    for event in events:
        if event.operation == "set":
            for key, stored in zip(event.keys, event.outcome):
                if stored:
                    confirmed_at[key] = min(confirmed_at.get(key, event.end), event.end)
    return confirmed_at


def _judge_problem(
    suite: SuiteContext,
    instance: Any,
    events: list[Event],
    problem: Problem,
    total: int,
    shown: str,
    *,
    spare: list[int],
) -> None:
    """Replay the call a worker saw fail alone, on fresh keys stored the way the call found them: failing again,
    it is the single call's clause; else a race."""
    confirmed_at = _confirmed_at(events)
    size = len(problem.keys)
    # what the call may have found stored: what was confirmed before it began, what was by the end, or (a write
    # running meanwhile) any one key
    patterns = [
        [confirmed_at.get(key, problem.start) < problem.start for key in problem.keys],
        [key in confirmed_at for key in problem.keys],
        *([index == one for index in range(size)] for one in range(size)),
    ]
    for pattern in dict.fromkeys(tuple(pattern) for pattern in patterns):
        fresh = suite.names.new_keys(size)
        missing = [suite.names.label(key) for key, here in zip(fresh, pattern) if not here]
        try:
            with misses_never_raise(missing if problem.operation != "set" else []):
                _replay(suite, instance, problem.operation, list(pattern), spare, fresh)
        except ClauseFailure as again:
            stored = "".join("S" if here else "-" for here in pattern)
            raise _not_a_race(
                again, f"for {problem.operation} made alone on fresh keys stored '{stored}' (S stored)"
            ) from None
    fail(
        "BE-23",
        f"thread {problem.thread}: {problem.failure.message} ({total} problem(s) in all); the same call made alone "
        "does not fail",
        shown,
    )


def _replay(
    suite: SuiteContext,
    instance: Any,
    operation: str,
    stored: list[bool],
    spare: list[int],
    fresh: Optional[list[str]] = None,
) -> Optional[tuple[list[str], Any]]:
    """Make ``operation`` alone on fresh keys (``fresh``, else new ones), those marked ``stored`` written first;
    return the keys and what the call gave, or None when the backend refused the write (nothing to replay)."""
    fresh = fresh if fresh is not None else suite.names.new_keys(len(stored))
    written = [key for key, here in zip(fresh, stored) if here]
    if written and not all(_guarded_call(suite, instance, "set", written, spare[: len(written)])):
        return None
    instance.pool.fill(spare, value=-1.0)
    return fresh, _guarded_call(suite, instance, operation, fresh, spare[: len(fresh)])


def _check_histories(
    suite: SuiteContext,
    events: list[Event],
    keys: list[str],
    origin: int,
    shown: str,
    *,
    replay: Optional[Callable[[str, list[bool]], Optional[tuple[list[str], Any]]]] = None,
) -> None:
    """Check every recorded call against the model, key by key; a call the model forbids is replayed alone
    (``replay(operation, stored)``: on fresh keys stored the way it found them) and fails BE-23 only when the
    replay does not show the same (without ``replay``, it fails BE-23)."""

    def _replay_alone(operation: str, pattern: list[bool]) -> Optional[tuple[list[str], Any]]:
        return None if replay is None else replay(operation, pattern)

    first_set_start: dict[str, int] = {}
    for event in events:
        if event.operation == "set":
            for key in event.keys:
                first_set_start[key] = min(first_set_start.get(key, event.start), event.start)
    confirmed_at = _confirmed_at(events)

    def stored_before(event: Event) -> list[bool]:
        return [confirmed_at.get(key, event.start) < event.start for key in event.keys]

    def hits_of(operation: str, outcome: Any, size: int) -> list[bool]:
        return list(outcome) if operation == "get" else [index < outcome for index in range(size)]

    for event in sorted(events, key=lambda item: item.start):
        if event.operation == "set":
            continue
        hits = hits_of(event.operation, event.outcome, len(event.keys))
        for index, (key, hit) in enumerate(zip(event.keys, hits)):
            began: Optional[int] = first_set_start.get(key)
            if hit and (began is None or began > event.end):
                history = shown + "\n" + _history(suite, events, key, origin)
                alone = None
                # what the call may have found stored: what was confirmed before it began, or by the end
                for pattern in (stored_before(event), [item in confirmed_at for item in event.keys]):
                    pattern[index] = False
                    alone = _replay_alone(event.operation, pattern)
                    if alone is not None and hits_of(event.operation, alone[1], len(pattern))[index]:
                        break
                    alone = None
                if alone is not None:
                    clause_id = "BE-2" if event.operation == "exists" else _read_clause(suite)
                    raise _not_a_race(
                        ClauseFailure(
                            clause_id,
                            f"{event.operation} found {suite.names.label(alone[0][index])}, never written",
                            history,
                        ),
                        "on fresh keys stored the same way",
                    )
                fail(
                    "BE-23",
                    f"{event.operation} by thread {event.thread} found {suite.names.label(key)} before any write of it began",
                    history,
                )
        if suite.may_evict:
            continue
        pattern = stored_before(event)
        if event.operation == "get":
            if not all(pattern):  # a read with a miss in it may be answered all or nothing
                continue
            for index, (key, hit) in enumerate(zip(event.keys, hits)):
                if hit:
                    continue
                history = shown + "\n" + _history(suite, events, key, origin)
                alone = _replay_alone("get", pattern)
                if alone is not None and not alone[1][index]:
                    raise _not_a_race(
                        ClauseFailure(
                            _write_clause(suite),
                            f"a read misses {suite.names.label(alone[0][index])}, whose set returned True",
                            history,
                        ),
                        "on fresh keys stored the same way",
                    )
                fail(
                    "BE-23",
                    f"get by thread {event.thread} missed {suite.names.label(key)}, stored (set returned "
                    "True) before the get began",
                    history,
                )
        else:
            lower = count_leading_run(tuple(pattern))
            if event.outcome < lower:
                key = event.keys[event.outcome]
                history = shown + "\n" + _history(suite, events, key, origin)
                alone = _replay_alone("exists", pattern)
                if alone is not None and alone[1] < lower:
                    raise _not_a_race(
                        ClauseFailure(
                            "BE-2", f"batch_exists counts {alone[1]} of a leading run of {lower} stored pages", history
                        ),
                        "on fresh keys stored the same way",
                    )
                fail(
                    "BE-23",
                    f"batch_exists by thread {event.thread} returned {event.outcome}, but the first {lower} "
                    "keys were stored before it began",
                    history,
                )
