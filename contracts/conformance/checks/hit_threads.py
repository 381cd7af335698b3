"""The concurrency tier's hit queries from any engine thread (BE-30): pages written on one thread are found by
batch_exists (and batch_exists_v2 where v2 is claimed) from fresh threads, started together while another thread
writes other keys.

SGLang asks for hits from the hit-query thread, the scheduler thread (the PD-decode probe; the pipeline-parallel
submission in 0.5.21-0.5.22) and 0.5.23's pipeline-parallel ticket thread, none of which wrote the pages. Each
thread here calls through its own helper thread (the deadline's), so every query comes from a thread that never
wrote. The answer of the thread that wrote is the baseline; every fresh thread must give it.
"""

from __future__ import annotations

import threading

from hicache_spec.values import is_count
from hicache_contracts.conformance.checks.core_hits import setup_clause
from hicache_contracts.conformance.framework import (
    CheckSkipped,
    ClauseFailure,
    PreconditionFailed,
    conformance_check,
    expect,
    fail,
)
from hicache_contracts.conformance.session.context import Instance, SuiteContext

QUERY_THREADS = 4
"""Fresh threads asking for hits at once."""
STORED_PAGES = 4
"""Pages written before the threads start, all of which every thread must find."""
WRITES = 4
"""Batches of two other pages the writer thread writes while the queries run."""


def _kv_hits(suite: SuiteContext, instance: Instance, keys: list[str]) -> int:
    """``batch_exists_v2(keys, None, None).kv_hit_pages``; fail BE-21 unless it is a count in [0, len(keys)] (``is_count``, loose)."""
    result = suite.calls.call("BE-30", instance.backend.batch_exists_v2, list(keys), None, None)
    hits = getattr(result, "kv_hit_pages", None)
    if not is_count(hits, 0, len(keys), exact=False):
        fail(
            "BE-21",
            f"batch_exists_v2 must return a result whose kv_hit_pages is a count in [0, {len(keys)}], got {hits!r}",
            f"batch_exists_v2({suite.names.show(keys)}, None, None) -> {suite.names.show(result)}",
        )
    return hits


def _answers(suite: SuiteContext, instance: Instance, keys: list[str], v2: bool) -> dict[str, int]:
    answers = {"batch_exists": suite.io.count(instance, keys, clause_id="BE-30")}
    if v2:
        answers["batch_exists_v2 kv_hit_pages"] = _kv_hits(suite, instance, keys)
    return answers


@conformance_check("BE-30", requires=("concurrency",), tier="concurrency")
def hit_queries_agree_from_every_thread(suite: SuiteContext) -> None:
    """Pages written on one thread are found by batch_exists (and batch_exists_v2) from fresh threads started
    together while another thread writes other keys."""
    bound = suite.options.timeout_s
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("hit-threads")),
        pages=STORED_PAGES + 2 * WRITES,
        tag="hit queries from every thread",
    )
    keys = suite.names.new_keys(STORED_PAGES)
    suite.io.store(instance, keys, pages=list(range(STORED_PAGES)), clause_id=setup_clause(suite))
    v2 = suite.claims("v2")
    try:
        baseline = _answers(suite, instance, keys, v2)
    except ClauseFailure as failure:  # the writing thread's own query fails: no thread to compare with
        raise PreconditionFailed(failure.clause_id, failure.message, failure.counterexample) from None
    for what, count in baseline.items():
        if not suite.io.counted(count, STORED_PAGES):
            raise PreconditionFailed(
                "BE-2" if what == "batch_exists" else "BE-21",
                f"{what} on the thread that wrote {STORED_PAGES} pages counts {count}",
                f"write {suite.names.show(keys)}, then {what}({suite.names.show(keys)}) -> {count}",
            )
    others = [suite.names.new_keys(2) for _ in range(WRITES)]
    barrier = threading.Barrier(QUERY_THREADS + 2)
    answers: dict[int, dict[str, int]] = {}
    raised: dict[str, ClauseFailure] = {}

    def query(index: int) -> None:
        try:
            barrier.wait(bound)
        except threading.BrokenBarrierError:
            return
        try:
            answers[index] = _answers(suite, instance, keys, v2)
        except ClauseFailure as failure:
            raised[f"thread {index}"] = failure

    def write() -> None:
        try:
            barrier.wait(bound)
        except threading.BrokenBarrierError:
            return
        for round_, batch in enumerate(others):
            pages = [STORED_PAGES + 2 * round_, STORED_PAGES + 2 * round_ + 1]
            try:
                suite.io.write(instance, batch, pages=pages, clause_id=setup_clause(suite))
            except ClauseFailure as failure:
                raised["the writer"] = failure
                return

    threads = [
        threading.Thread(target=query, args=(index,), name=f"hicache-conform-hits-{index}", daemon=True)
        for index in range(QUERY_THREADS)
    ] + [threading.Thread(target=write, name="hicache-conform-hits-writer", daemon=True)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait(bound)
    except threading.BrokenBarrierError:
        raise CheckSkipped(
            f"the {len(threads)} threads did not all start within {bound} s (the interpreter stalled), so they made "
            "no call; nothing was checked"
        ) from None
    for thread in threads:
        thread.join(bound)
    shown = (
        f"write {suite.names.show(keys)} on one thread ({baseline} there), then {QUERY_THREADS} fresh threads ask "
        f"for them at once while another writes {WRITES} batches of other keys"
    )
    stuck = [thread.name for thread in threads if thread.is_alive()]
    expect(not stuck, "BE-30", f"{stuck} did not finish within {bound} s (deadlock?)", shown)
    if "the writer" in raised:
        writer_failure = raised["the writer"]
        raise PreconditionFailed(
            writer_failure.clause_id, f"the writer thread: {writer_failure.message}", writer_failure.counterexample
        )
    for who, thread_failure in raised.items():
        try:  # the same queries on the thread that wrote: failing there too, it is no matter of threads
            _answers(suite, instance, keys, v2)
        except ClauseFailure as again:
            raise PreconditionFailed(again.clause_id, f"{again.message} (on the writing thread too)", shown) from None
        fail(
            "BE-30",
            f"a hit query from {who} raised: {thread_failure.message}; on the writing thread it does not",
            shown,
        )
    for index in sorted(answers):
        for what, count in answers[index].items():
            agrees = count == baseline[what] if not suite.may_evict else suite.io.counted(count, STORED_PAGES)
            expect(
                agrees,
                "BE-30",
                f"{what} from fresh thread {index} counts {count} of the {STORED_PAGES} pages; the thread that "
                f"wrote them counts {baseline[what]}: hit queries come from any engine thread",
                f"{shown}: {dict(sorted(answers.items()))}",
            )
    suite.io.require_seen(
        any(count for found in answers.values() for count in found.values()),
        "how hit queries from other threads see the pages",
    )
