"""Moving the suite's pages: writes, reads, lookups, and the setup writes a check relies on.

Calls follow SGLang's controller for the backend's mode: a backend that
claims v1 moves KV through ``batch_get_v1``/``batch_set_v1`` only (the
legacy methods are never called on it); any other through ``batch_set`` and
``batch_get`` with the host pool's flat pages, as SGLang's generic path
does. KV never travels through v2: v2 IO carries sidecar pools. Lookups go
through ``batch_exists``. A rank that is not the storage writer
(``is_mla_model`` and ``tp_rank != dcp_rank``) never writes KV.

A backend that may evict is never asked to keep a page: every read-back
holds it to ``holds`` (each page a hit with exactly its bytes, or a miss),
every count to ``counted`` (a leading run no longer than the pages written),
and a check whose pages were all gone before it looked is skipped
(``require_seen``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

import torch

from hicache_spec import count_leading_run
from hicache_spec.values import is_count, is_true_flag
from hicache_contracts.conformance.session.calls import Calls
from hicache_contracts.conformance.session.contents import Pages
from hicache_contracts.conformance.framework import CheckSkipped, ClauseFailure, PreconditionFailed, fail
from hicache_contracts.conformance.session.instances import Instance
from hicache_contracts.conformance.session.names import Names
from hicache_contracts.conformance.session.pools import ConformancePool, describe_page_difference
from hicache_contracts.models import pool_value
from hicache_spec import is_storage_writer as spec_is_storage_writer

__all__ = ["FAULT_HOOK", "HOST_POOL_FAULTS", "PageIO", "ROUND_TRIP_PAGES", "ReadBack", "is_storage_writer"]

ROUND_TRIP_PAGES = 4
"""Pages of the round trip every check's setup relies on: enough for a read one page off or every third write
dropped to show."""
FAULT_HOOK = "hicache_storage_faults"
"""A backend method returning a context manager inside which the instance's own storage I/O fails as its store
fails (BE-5); the suite's way to provoke a storage error without knowing the store."""
HOST_POOL_FAULTS = "hicache_host_pool_faults"
"""A class attribute a backend sets True to opt into storage errors provoked by the host pool's page helpers
raising OSError (BE-5), for a backend without a fault hook. SGLang's host pools never raise there."""


def is_storage_writer(config: Any) -> bool:
    """Whether SGLang lets this rank write KV (``hicache_spec.is_storage_writer``), for the project's configuration
    or SGLang's (before 0.5.23 it has no ``dcp_rank``: the writer is TP rank 0)."""
    return spec_is_storage_writer(bool(config.is_mla_model), config.tp_rank, getattr(config, "dcp_rank", 0))


@dataclass(frozen=True)
class ReadBack:
    """Pages written, then read back: the write's flags, which reads hit, and whether every page held."""

    written: list[bool]
    loaded: list[bool]
    works: bool
    """Every write succeeded and every page read back holds (``PageIO.holds``)."""

    @property
    def seen(self) -> bool:
        """Some page was there to look at (a backend that may evict may have dropped them all)."""
        return any(self.loaded)


class PageIO:
    """Writes, reads and looks up the suite's pages on an instance, through the path SGLang would use."""

    def __init__(self, names: Names, pages: Pages, calls: Calls, *, uses_v1: bool, may_evict: bool) -> None:
        self.names = names
        """How messages show keys and values."""
        self.pages = pages
        """The pages written."""
        self.calls = calls
        """Runs every backend call."""
        self.uses_v1 = uses_v1
        """Whether KV moves through v1 (v1 claimed), else through the legacy batch methods."""
        self.may_evict = may_evict
        """Whether the backend may drop pages it accepted."""
        self._round_trips: dict[int, tuple[Instance, Optional[PreconditionFailed]]] = {}
        """Per instance (by id, held so the id stays its own): how its basic round trip went."""

    def io_path(self) -> str:
        """How checks move pages: ``v1`` when v1 is claimed, else ``legacy``."""
        return "v1" if self.uses_v1 else "legacy"

    def write(
        self,
        instance: Instance,
        keys: Sequence[str],
        *,
        pages: Optional[Sequence[int]] = None,
        info: Any = None,
        variant: int = 0,
        path: Optional[str] = None,
        clause_id: str = "BE-17",
        each: bool = False,
    ) -> list[bool]:
        """Write the suite's page for each key; return one success flag per key.

        The pages are placed in host pages ``pages`` (default: the first
        ones); v1 writes them with ``batch_set_v1``, legacy with one
        ``batch_set`` of the host pool's flat pages, as SGLang's generic path
        does (its one bool stands for every page). v1's flags stand only as
        their AND, as SGLang's zero-copy path reads them (a True beside a
        False confirms nothing, BE-17), unless ``each`` asks for the flags as
        the backend gave them (to name the refused keys). A call that raises is a
        failure of ``clause_id``. A rank that is not the storage writer is
        never asked to write KV, as SGLang never asks it.
        """
        keys = list(keys)
        backend, pool = instance.backend, instance.pool
        if not is_storage_writer(instance.config):
            raise RuntimeError(f"suite bug: {instance.tag} is not the storage writer; SGLang never writes KV there")
        pages = list(pages) if pages is not None else list(range(len(keys)))
        for key, page in zip(keys, pages):
            pool.poke(page, self.pages.page_for(key, pool, variant))
        if (path or self.io_path()) == "legacy":
            if not keys:
                return []
            values = [pool.peek(page) for page in pages]
            outcome = self.calls.call(clause_id, backend.batch_set, keys, values)
            return [is_true_flag(outcome)] * len(keys)
        raw = self.calls.call(clause_id, backend.batch_set_v1, keys, pool.slots(pages), info)
        flags = self.v1_flags(raw, keys, "batch_set_v1")
        return flags if each else [all(flags)] * len(flags)

    def read(
        self,
        instance: Instance,
        keys: Sequence[str],
        *,
        pages: Optional[Sequence[int]] = None,
        info: Any = None,
        path: Optional[str] = None,
        clause_id: str = "BE-15",
    ) -> list[Optional[torch.Tensor]]:
        """Read each key; return the page read (bytes as they landed) or None for a miss.

        v1 reads into host pages ``pages`` with ``batch_get_v1`` (the pages after its first False are misses, as
        SGLang reads them); legacy
        calls ``batch_get`` with one dummy flat page per key, as SGLang's
        generic path does, and takes what it returns (None for a miss).
        """
        keys = list(keys)
        backend, pool = instance.backend, instance.pool
        if (path or self.io_path()) == "legacy":
            if not keys:
                return []
            targets = [torch.zeros(pool.page_element_count, dtype=pool.dtype) for _ in keys]
            values = self.calls.call(clause_id, backend.batch_get, keys, targets)
            if values is None:
                return [None] * len(keys)
            if not isinstance(values, (list, tuple)) or len(values) != len(keys):
                fail(
                    "BE-9",
                    f"batch_get must return one tensor-or-None per key ({len(keys)}), got {self.names.show(values)}",
                    f"batch_get({self.names.show(keys)}, <{len(keys)} flat pages>) -> {self.names.show(values)}",
                )
            return [value if isinstance(value, torch.Tensor) else None for value in values]
        pages = list(pages) if pages is not None else list(range(len(keys)))
        pool.fill(pages)
        raw = self.calls.call(clause_id, backend.batch_get_v1, keys, pool.slots(pages), info)
        flags = self.v1_flags(raw, keys, "batch_get_v1")
        # SGLang counts only the leading run of True (_page_get_zero_copy stops at the first miss): a True after a
        # False is never read, so it is taken as the miss SGLang takes it for (BE-15)
        hits = count_leading_run(tuple(flags))
        return [pool.peek(page) if number < hits else None for number, page in enumerate(pages)]

    def v1_flags(self, raw: Any, keys: Sequence[str], method: str) -> list[bool]:
        """Return a v1 result as a list of bools; fail BE-14 unless it is a list of exactly len(keys) bools."""
        if not isinstance(raw, (list, tuple)) or len(raw) != len(keys):
            shown = f"{len(raw)} entries" if isinstance(raw, (list, tuple)) else repr(raw)
            fail(
                "BE-14",
                f"{method} must return a list of exactly len(keys) = {len(keys)} bools, got {shown}",
                f"{method}({self.names.show(list(keys))}, ...) -> {self.names.show(raw)}",
            )
        return self.truths(
            raw, "BE-14", method, lambda: f"{method}({self.names.show(list(keys))}, ...) -> {self.names.show(raw)}"
        )

    def truths(self, flags: Sequence[Any], clause_id: str, method: str, shown: Callable[[], str]) -> list[bool]:
        """Return each flag's truth; fail ``clause_id`` on one that has none (a tensor of several bools, say), as
        SGLang's test of the flag would raise on it. ``shown`` gives the call for the message, only then."""
        try:
            return [bool(flag) for flag in flags]
        except Exception as error:
            problem = error  # find the entry, for the message
        for index, flag in enumerate(flags):
            try:
                bool(flag)
            except Exception as error:
                fail(
                    clause_id,
                    f"{method}'s entry {index} is {self.names.show(flag)}, not a bool ({type(error).__name__}: {error})",
                    shown(),
                )
        raise problem  # reading the flags failed, not a flag's truth

    def v2_flags(self, raw: Any, transfers: Sequence[Any], method: str) -> dict[str, list[bool]]:
        """Return a v2 get/set result by pool name; fail BE-19 unless it has exactly one entry per
        transfer name, each a list of len(keys) bools."""
        shown = f"{method}({self.names.show(list(transfers))}) -> {self.names.show(raw)}"
        if not isinstance(raw, Mapping):
            fail("BE-19", f"{method} must return a dict of pool name -> list of bools, got {type(raw).__name__}", shown)
        by_name = {pool_value(name): flags for name, flags in raw.items()}
        expected = {pool_value(item.name): len(item.keys or ()) for item in transfers}
        for name, length in expected.items():
            flags = by_name.get(name)
            if flags is None:
                fail("BE-19", f"{method} left pool {name!r} out of its result", shown)
            if not isinstance(flags, (list, tuple)) or len(flags) != length:
                got = f"{len(flags)} entries" if isinstance(flags, (list, tuple)) else repr(flags)
                fail(
                    "BE-19", f"{method} must give pool {name!r} a list of len(keys) = {length} bools, got {got}", shown
                )
        unexpected = sorted(set(by_name) - set(expected))
        if unexpected:
            fail("BE-19", f"{method} returned entries for pools it was not asked about: {unexpected}", shown)
        return {
            name: self.truths(by_name[name], "BE-19", f"{method} pool {name!r}", lambda: shown) for name in expected
        }

    def count(self, instance: Instance, keys: Sequence[str], info: Any = None, *, clause_id: str = "BE-2") -> int:
        """Return ``batch_exists(keys, info)``; fail BE-2 unless it is a count in [0, len(keys)] (``is_count``, loose)."""
        raw = self.calls.call(clause_id, instance.backend.batch_exists, list(keys), info)
        if not is_count(raw, 0, len(keys), exact=False):
            fail(
                "BE-2",
                f"batch_exists must return a count n (an int, or an index at least 32 bits wide) with "
                f"0 <= n <= len(keys) = {len(keys)}, got {raw!r}",
                f"batch_exists({self.names.show(list(keys))}) -> {raw!r}",
            )
        return raw

    def clear(self, instance: Instance, *, clause_id: str = "BE-11") -> bool:
        """Call ``instance``'s ``clear()``; return whether it returned. A raise is how a backend says a clear failed
        (SGLang catches it, reports the failure and keeps what it believed, BE-11): no failure, but then nothing
        the clear should have removed can be judged. A call past the deadline still fails ``clause_id``."""
        try:
            self.calls.call(clause_id, instance.backend.clear)
        except ClauseFailure as failure:
            if failure.__cause__ is None:
                raise
            return False
        return True

    def found(self, instance: Instance, keys: Sequence[str], *, clause_id: str = "BE-2") -> list[bool]:
        """Return, per key, whether ``batch_exists([key])`` finds it (the lookup SGLang makes)."""
        return [self.count(instance, [key], clause_id=clause_id) == 1 for key in keys]

    @contextlib.contextmanager
    def storage_faults(self, instance: Instance) -> Iterator[str]:
        """Make the instance's storage fail inside the block, the way its store fails; yield how.

        Through the backend's own fault hook (``hicache_storage_faults()``)
        where it offers one; else through the host pool's page helpers where
        the backend opts in (``hicache_host_pool_faults = True``); else the
        check is skipped: SGLang's host pools never raise, so breaking them
        would test something SGLang never does.
        """
        hook = getattr(instance.backend, FAULT_HOOK, None)
        if callable(hook):
            manager = self.calls.call("BE-5", hook)
            with manager:
                yield f"inside {FAULT_HOOK}()"
            return
        if getattr(instance.backend, HOST_POOL_FAULTS, False) is True:
            with instance.pool.failing():
                yield "while every page helper of the host pool raises OSError (opted in)"
            return
        raise CheckSkipped(
            f"the backend offers no fault hook: define {FAULT_HOOK}() (a context manager inside "
            f"which its storage I/O fails) or set {HOST_POOL_FAULTS} = True (see docs/vendors.md)"
        )

    def write_and_read_back(
        self, instance: Instance, *, clause_id: str, writer: Optional[Instance] = None, pages: int = 2
    ) -> ReadBack:
        """Write ``pages`` fresh keys through ``writer`` (default ``instance``) from its first host pages, read them
        back through ``instance`` into the host pages after those; every call a failure of ``clause_id``."""
        keys = self.names.new_keys(pages)
        written = self.write(writer or instance, keys, clause_id=clause_id)
        read = self.read(instance, keys, pages=list(range(pages, 2 * pages)), clause_id=clause_id)
        holds = all(self.holds(key, instance.pool, page) for key, page in zip(keys, read))
        return ReadBack(written, [page is not None for page in read], all(written) and holds)

    def holds(
        self, key: str, pool: ConformancePool, page: Optional[torch.Tensor], variants: Sequence[int] = (0,)
    ) -> bool:
        """The read-back rule: ``page`` holds exactly the suite's page for ``key`` (one of ``variants``), or it is a
        miss (None) and the backend may evict. A hit with any other bytes never holds."""
        if page is None:
            return self.may_evict
        return any(self.pages.same_page(key, pool, page, variant) for variant in variants)

    def counted(self, count: int, expected: int) -> bool:
        """The lookup rule: batch_exists counts ``expected``, the leading run of the pages written; a backend that
        may evict may have dropped any of them, so it may count a shorter run, never a longer one."""
        return count == expected or (self.may_evict and 0 <= count < expected)

    def require_seen(self, seen: bool, what: str) -> None:
        """Skip the check when the backend may evict and no page it wrote was still there to show ``what``."""
        if self.may_evict and not seen:
            raise CheckSkipped(
                f"every page the check wrote was gone before it could show {what}: the backend may evict, "
                "so each miss was allowed and nothing was checked"
            )

    def store(self, instance: Instance, keys: Sequence[str], **write_options: Any) -> None:
        """Write the pages a check needs, as its setup: they must read back, or the check cannot look.

        The check is skipped when the backend refuses any page (set returned
        False). On the v1 path the pages are then read back into the same
        host pages (overwritten first): a page whose set returned True but
        does not read back raises ``PreconditionFailed`` on BE-17 (unless the
        backend may evict), one that reads back wrong bytes on BE-15, and a
        result of the wrong shape on BE-14. A backend that may evict then
        gets the pages written once more (its answer ignored), since serving
        them may have dropped them. Before all that, whatever the path, the
        instance's basic v1 round trip (``require_round_trip``) must work.
        """
        keys = list(keys)
        path = write_options.get("path") or self.io_path()
        self.require_round_trip(instance)
        with self.setup_step():
            results = self.write(instance, keys, **write_options)
        if not all(results):
            refused = [self.names.label(key) for key, ok in zip(keys, results) if not ok]
            raise CheckSkipped(
                f"the backend refused to store pages the check needs (set returned False for "
                f"{', '.join(refused[:4])}{', ...' if len(refused) > 4 else ''}); nothing to check"
            )
        if path == "v1":
            pages = write_options.get("pages")
            pages = list(pages) if pages is not None else list(range(len(keys)))
            self.verify_stored(
                instance, keys, pages, info=write_options.get("info"), variant=write_options.get("variant", 0)
            )
            if self.may_evict:  # evicted on read, say: the check looks at pages the backend had a chance to keep
                with self.setup_step():
                    self.write(instance, keys, **write_options)  # best effort: a refused rewrite is BE-6's to judge

    def verify_stored(
        self, instance: Instance, keys: Sequence[str], pages: Sequence[int], *, info: Any = None, variant: int = 0
    ) -> None:
        """Read ``keys`` back through v1 into host ``pages``; raise ``PreconditionFailed`` on BE-17 or BE-15
        unless each holds exactly the suite's page (a miss is allowed when the backend may evict)."""
        pool = instance.pool
        pool.fill(pages, value=-1.0)  # what lands can only come from storage
        shown = (
            f"batch_set_v1 then batch_get_v1 of {self.names.show(list(keys))} into the same host pages {list(pages)}"
        )
        with self.setup_step():
            read = self.read(instance, keys, pages=pages, info=info, path="v1")
        for index, (key, page) in enumerate(zip(keys, read)):
            expected = self.pages.page_for(key, pool, variant)
            if self.holds(key, pool, page, (variant,)):
                if page is None:  # evicted: leave the host page as the write found it
                    pool.poke(pages[index], expected)
            elif page is None:
                raise PreconditionFailed(
                    "BE-17",
                    f"batch_set_v1 returned True for {self.names.label(key)} but batch_get_v1 cannot read it back",
                    shown,
                )
            else:
                raise PreconditionFailed(
                    "BE-15",
                    f"batch_get_v1 returned True for {self.names.label(key)} (page {index} "
                    f"of {len(keys)}) but its slots hold "
                    f"{describe_page_difference(expected, page)}",
                    shown,
                )

    def require_round_trip(self, instance: Instance) -> None:
        """Check once per instance that a batch of ``ROUND_TRIP_PAGES`` pages written from host pages reads back
        bit for bit and is counted by batch_exists; raise ``PreconditionFailed`` whenever it did not: on BE-14,
        BE-15 or BE-17 through v1, on BE-9 through the legacy batch_set/batch_get (a backend without v1), on
        BE-2 for the count. A backend that may evict is held to the read-back and lookup rules (``holds``,
        ``counted``): each page a hit with its bytes or a miss, the count no longer than what was written.

        Checks whose subject is something else (a key form, a batch size, a
        rank) call this before moving pages, so that a broken basic read or
        write is reported on its own clause instead of theirs. A backend
        that refuses the round trip's pages is not held to it here.
        """
        path = self.io_path()
        if id(instance) in self._round_trips:
            known = self._round_trips[id(instance)][1]
            if known is not None:
                raise PreconditionFailed(known.clause_id, known.message, known.counterexample)
            return
        keys = self.names.new_keys(ROUND_TRIP_PAGES)
        pages = self.pages.spread(ROUND_TRIP_PAGES)
        try:
            with self.setup_step():
                results = self.write(instance, keys, pages=pages, path=path)
            stored = [(key, page) for key, page, ok in zip(keys, pages, results) if ok]
            if stored:
                if path == "v1":
                    self.verify_stored(instance, [key for key, _ in stored], [page for _, page in stored])
                else:
                    self.verify_stored_legacy(instance, [key for key, _ in stored])
                if len(stored) == len(keys):  # every page reads back: batch_exists must count them all
                    with self.setup_step():
                        counted = self.count(instance, keys)
                    if not self.counted(counted, len(keys)):
                        read = "batch_get_v1" if path == "v1" else "batch_get"
                        # none found: the lookup looks where the write did not put them, a key scheme of its own
                        root = "NS-6" if counted == 0 else "BE-2"
                        raise PreconditionFailed(
                            root,
                            f"batch_exists counts {counted} of {len(keys)} pages that {read} reads back",
                            f"the write, then batch_exists({self.names.show(keys)}) -> {counted}",
                        )
        except PreconditionFailed as failure:
            self._round_trips[id(instance)] = (instance, failure)
            raise
        self._round_trips[id(instance)] = (instance, None)

    def verify_stored_legacy(self, instance: Instance, keys: Sequence[str], *, variant: int = 0) -> None:
        """Read ``keys`` back through the legacy batch_get; raise ``PreconditionFailed`` on BE-9 unless each is
        exactly the suite's page (a miss is allowed when the backend may evict)."""
        shown = f"batch_set then batch_get of {self.names.show(list(keys))}"
        with self.setup_step():
            read = self.read(instance, keys, path="legacy")
        for key, page in zip(keys, read):
            expected = self.pages.page_for(key, instance.pool, variant)
            if self.holds(key, instance.pool, page, (variant,)):
                continue
            if page is None:
                raise PreconditionFailed(
                    "BE-9",
                    f"batch_set returned True for {self.names.label(key)} but batch_get gives None for it",
                    shown,
                )
            raise PreconditionFailed(
                "BE-9",
                f"batch_get gives {self.names.label(key)} as {describe_page_difference(expected, page)}",
                shown,
            )

    @contextlib.contextmanager
    def setup_step(self) -> Iterator[None]:
        """Turn a ``ClauseFailure`` raised inside into ``PreconditionFailed`` on the same clause."""
        try:
            yield
        except ClauseFailure as failure:
            raise PreconditionFailed(failure.clause_id, failure.message, failure.counterexample) from None
