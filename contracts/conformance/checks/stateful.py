"""The stateful tier: a hypothesis state machine drives one backend instance against a model of a lossy
write-once store, and shrinks any failure to the shortest sequence of calls that shows it.

The model (``attempted``, ``confirmed``, ``cleared`` sets of keys):

- a set may return False (the page is then maybe stored, maybe not);
- a backend that may evict can drop a confirmed page at any time;
- a hit is never stale or corrupt: it carries exactly the key's bytes, for a
  key written since the last ``clear()``;
- without eviction, every confirmed page is found, at every step.

Rules follow the backend's mode, as SGLang's controller calls it: the v1
rules run on a backend that claims v1, the legacy rules (``batch_set`` /
``batch_get``) on any other, gated by ``@precondition``; each run builds its own
instance (fresh namespace, fresh keys) in ``@initialize`` and clears it in
``teardown``.

There is one machine class, at module level; a run binds it to its context (``bound_run``) for the length
of the check, so hypothesis' per-class tables hold one class however many runs a process makes, and no
run's context outlives it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from hypothesis import note, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from hicache_spec import count_leading_run
from hicache_contracts.conformance.session.context import Instance, SuiteContext
from hicache_contracts.conformance.checks.core_hits import misses_never_raise
from hicache_contracts.conformance.framework import conformance_check, expect, fail
from hicache_contracts.conformance.session.pools import describe_page_difference
from hicache_contracts.conformance.session.properties import run_machine

KEY_COUNT = 4
"""Keys one run of the machine plays with: few, so that rules meet the same keys often."""

picks = st.lists(st.integers(0, KEY_COUNT - 1), min_size=1, max_size=4, unique=True)
"""Which keys a rule touches, as indices into the run's keys."""


class _Run(threading.local):
    """The run the machine plays against, bound per thread for the length of one check (hypothesis runs the
    machine in the thread that asked for it); ``None`` outside a run, so no context outlives its run."""

    suite: Optional[SuiteContext] = None
    seen: Optional[list[str]] = None


_RUN = _Run()


@contextmanager
def bound_run(suite: SuiteContext, seen: list[str]) -> Iterator[None]:
    """Bind the machine to ``suite`` (each hit it meets, a page read back or a key counted, is appended to
    ``seen``) for the ``with`` block, and unbind it after, whatever happened."""
    _RUN.suite, _RUN.seen = suite, seen
    try:
        yield
    finally:
        _RUN.suite, _RUN.seen = None, None


def _suite() -> SuiteContext:
    suite = _RUN.suite
    assert suite is not None, "the state machine runs only inside bound_run()"
    return suite


def _uses_v1(_machine: object) -> bool:
    return _suite().claims("v1")


def _uses_legacy(_machine: object) -> bool:
    return not _suite().claims("v1")


class LossyWriteOnceStore(RuleBasedStateMachine):
    """A backend instance next to a model of what it may and must hold."""

    def __init__(self) -> None:
        super().__init__()
        self.suite = _suite()
        self.hits: list[str] = _RUN.seen if _RUN.seen is not None else []
        self.instance: Optional[Instance] = None
        self.keys: list[str] = []
        self.attempted: set[str] = set()
        self.confirmed: dict[str, str] = {}
        self.cleared: set[str] = set()

    @initialize()
    def build_instance(self) -> None:
        self.instance = self.suite.instances.build(
            self.suite.instances.config(model_name=self.suite.names.namespace("machine")), pages=16, tag="state machine"
        )
        self.keys = self.suite.names.new_keys(KEY_COUNT)
        note(f"keys: {self.suite.names.show(self.keys)}")

    @property
    def built(self) -> Instance:
        """The instance under test; rules run only after ``build_instance``."""
        assert self.instance is not None
        return self.instance

    def chosen(self, indices: list[int]) -> list[str]:
        return [self.keys[index] for index in indices]

    def record_writes(self, keys: list[str], results: list[bool], path: str) -> None:
        for key, stored in zip(keys, results):
            self.attempted.add(key)
            self.cleared.discard(key)
            if stored:
                self.confirmed[key] = path

    def check_reads(self, keys: list[str], pages: list[Any], path: str) -> None:
        read_clause = "BE-15" if path == "v1" else "BE-9"
        for key, page in zip(keys, pages):
            if page is not None:
                self.hits.append(key)
                if key in self.cleared:
                    fail("BE-11", f"{self.suite.names.label(key)} reads back after clear() and no new write")
                expect(
                    key in self.attempted,
                    read_clause,
                    f"{self.suite.names.label(key)} reads back but was never written",
                )
                expect(
                    self.suite.io.holds(key, self.built.pool, page),
                    read_clause,
                    f"{self.suite.names.label(key)} reads back as "
                    f"{describe_page_difference(self.suite.pages.page_for(key, self.built.pool), page)}",
                )
            elif key in self.confirmed and not self.suite.may_evict:
                whole = all(item in self.confirmed for item in keys)  # no miss in the batch to answer it all or nothing
                if not whole and self.reads_alone(key, path):
                    continue
                writer = self.confirmed[key]
                fail(
                    "BE-17" if writer == "v1" else "BE-9",
                    f"{self.suite.names.label(key)} was stored (set returned True through {writer}) but {path} reads "
                    f"miss it{'' if whole else ', also when it is read alone'}",
                )

    def reads_alone(self, key: str, path: str) -> bool:
        """Whether ``key``, missed by a read of several keys one of which was never stored, reads back when read
        alone: a backend may answer a batch with a miss in it all or nothing (SGLang keeps only the leading run of
        hits), and that says nothing of whether the set was true. A page read alone is judged like any other hit."""
        if path == "v1":
            pages = self.suite.io.read(self.built, [key], pages=[15], path="v1", clause_id="BE-15")
        else:
            pages = self.suite.io.read(self.built, [key], path="legacy", clause_id="BE-9")
        if pages[0] is None:
            return False
        self.check_reads([key], pages, path)
        return True

    @precondition(_uses_legacy)
    @rule(indices=picks)
    def set_pages(self, indices: list[int]) -> None:
        keys = self.chosen(indices)
        self.record_writes(keys, self.suite.io.write(self.built, keys, path="legacy", clause_id="BE-9"), "legacy")

    @precondition(_uses_v1)
    @rule(indices=picks)
    def set_pages_v1(self, indices: list[int]) -> None:
        keys = self.chosen(indices)
        results = self.suite.io.write(self.built, keys, pages=list(range(len(keys))), path="v1", clause_id="BE-17")
        self.record_writes(keys, results, "v1")

    def misses_answered(self, keys: list[str]) -> Any:
        """A lookup or read that raises while ``keys`` hold one never stored is BE-4's (``misses_never_raise``)."""
        return misses_never_raise([self.suite.names.label(key) for key in keys if key not in self.confirmed])

    @precondition(_uses_legacy)
    @rule(indices=picks)
    def get_pages(self, indices: list[int]) -> None:
        keys = self.chosen(indices)
        with self.misses_answered(keys):
            pages = self.suite.io.read(self.built, keys, path="legacy", clause_id="BE-9")
        self.check_reads(keys, pages, "legacy")

    @precondition(_uses_v1)
    @rule(indices=picks)
    def get_pages_v1(self, indices: list[int]) -> None:
        keys = self.chosen(indices)
        with self.misses_answered(keys):
            pages = self.suite.io.read(
                self.built, keys, pages=list(range(8, 8 + len(keys))), path="v1", clause_id="BE-15"
            )
        self.check_reads(keys, pages, "v1")

    @rule(indices=st.lists(st.integers(0, KEY_COUNT - 1), max_size=KEY_COUNT, unique=True))
    def query(self, indices: list[int]) -> None:
        keys = self.chosen(indices)
        with self.misses_answered(keys):
            count = self.suite.io.count(self.built, keys)
        self.hits.extend(keys[:count])
        upper = count_leading_run(tuple(key in self.attempted for key in keys))
        lower = 0 if self.suite.may_evict else count_leading_run(tuple(key in self.confirmed for key in keys))
        if count > upper and keys[upper] in self.cleared:
            fail("BE-11", f"batch_exists counts {self.suite.names.label(keys[upper])}, cleared and not written since")
        expect(
            lower <= count <= upper,
            "BE-2",
            f"batch_exists({self.suite.names.show(keys)}) returned {count}; the model allows {lower}..{upper}",
        )

    @rule()
    def clear(self) -> None:
        if self.suite.io.clear(self.built):
            self.cleared |= self.attempted
            self.attempted.clear()
        self.confirmed.clear()  # a clear that raised failed somewhere: any page may be gone, any may be left

    @invariant()
    def confirmed_pages_are_found(self) -> None:
        if self.instance is None or self.suite.may_evict:
            return
        for key, writer in self.confirmed.items():
            if self.suite.io.count(self.instance, [key]) != 1:
                fail(
                    "BE-17" if writer == "v1" else "BE-9",
                    f"{self.suite.names.label(key)} was stored (set returned True through {writer}) but batch_exists "
                    "no longer finds it",
                )

    def teardown(self) -> None:
        if self.instance is not None and self.suite.calls.timed_out is None:
            self.suite.io.clear(self.instance)
            close = getattr(self.instance.backend, "close", None)
            if callable(close):
                self.suite.calls.call("BE-11", close)
            self.suite.instances.forget(self.instance)


@conformance_check("BE-2", "BE-9", "BE-11", "BE-15", "BE-17", requires=("core",), tier="stateful")
def stateful_model_of_a_lossy_write_once_store(suite: SuiteContext) -> None:
    """Random sequences of set, get, batch_exists and clear never contradict a lossy write-once store."""
    seen: list[str] = []
    examples = scaled_examples(suite)
    with bound_run(suite, seen):
        run_machine(suite.seed, LossyWriteOnceStore, "BE-2", examples, suite.profile.stateful_steps)
    suite.io.require_seen(bool(seen), "how the store behaves over a sequence of calls")


STATEFUL_BUDGET_S = 20.0
"""Seconds the state machine's examples may take at the backend's measured call time (shrinking is capped apart)."""
CALLS_PER_STEP = 3
"""Backend calls one step of the machine makes, about: the rule's call, and the invariant's lookups."""
TIMED_CALLS = 5
"""Lookups timed to measure the backend's call time before the machine runs."""


def call_time_s(suite: SuiteContext) -> float:
    """The median time of a lookup of four keys, in seconds, on an instance built for it and closed after (as the
    machine's own are: a backend may allow few instances open at once)."""
    instance = suite.instances.build(
        suite.instances.config(model_name=suite.names.namespace("timing")), pages=4, tag="call timing"
    )
    # keys of their own, never written: fresh names would shift the labels every later message shows
    keys = [hashlib.sha256(f"{suite.run_id}-timing-{index}".encode()).hexdigest() for index in range(4)]
    times = []
    try:
        for _ in range(TIMED_CALLS):
            started = time.perf_counter()
            suite.io.count(instance, keys)
            times.append(time.perf_counter() - started)
    finally:
        if suite.calls.timed_out is None:
            close = getattr(instance.backend, "close", None)
            if callable(close):
                suite.calls.call("BE-29", close)
            suite.instances.forget(instance)
    return sorted(times)[len(times) // 2]


def scaled_examples(suite: SuiteContext) -> int:
    """The profile's number of examples, fewer when they would not fit ``STATEFUL_BUDGET_S`` at the backend's
    measured call time (never under 3); the run's notes say when it was scaled, and why."""
    wanted, steps = suite.profile.stateful_examples, suite.profile.stateful_steps
    per_call = call_time_s(suite)
    fitting = int(STATEFUL_BUDGET_S / max(per_call * steps * CALLS_PER_STEP, 1e-9))
    examples = max(3, min(wanted, fitting))
    if examples < wanted:
        notes = getattr(suite, "run_notes", None)
        if notes is not None:
            notes.append(
                f"stateful check: {examples} of the profile's {wanted} examples ({steps} steps each), scaled to "
                f"{STATEFUL_BUDGET_S:g} s at the backend's measured call time of {per_call * 1000:.1f} ms"
            )
    return examples
