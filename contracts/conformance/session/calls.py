"""Backend calls under the run's deadline, failing the clause they serve, written to the check's transcript."""

from __future__ import annotations

import collections
import inspect
from typing import Any, Callable, Optional

from hicache_spec.call_forms import EXTRA_INFO_FORMS, POSITIONAL, extra_info_forms
from hicache_contracts.capabilities import EXTRA_INFO_METHODS
from hicache_contracts.conformance.session.deadline import DeadlineRunner
from hicache_contracts.conformance.framework import CallTimedOut, ClauseFailure, record_assertions
from hicache_contracts.conformance.session.names import Names

__all__ = ["CLEANUP_TIMEOUT_S", "Calls", "TRANSCRIPT_CALLS"]

TRANSCRIPT_CALLS = 12
"""How many of a check's last backend calls a failure shows."""
CLEANUP_TIMEOUT_S = 5.0
"""The deadline of clear() and close() at the end of a run whose backend already missed a deadline."""


class Calls:
    """Runs backend calls (``call``, ``call_as``) under a per-call deadline of ``timeout_s`` seconds."""

    def __init__(self, names: Names, timeout_s: float) -> None:
        self.names = names
        """How the transcript shows arguments and results."""
        self.timeout_s = timeout_s
        """The deadline of each call (``--timeout``)."""
        self.transcript: collections.deque[str] = collections.deque(maxlen=TRANSCRIPT_CALLS)
        """The last backend calls of the running check, as ``name(arguments) -> result``."""
        self.asserted: set[str] = set()
        """Clause IDs whose ``expect`` ran in the running check."""
        self.timed_out: Optional[CallTimedOut] = None
        """The first call that missed its deadline; once set, every later call fails at once."""
        self._deadline = DeadlineRunner()
        self._labels: dict[int, tuple[Any, str]] = {}

    def label(self, backend: Any, text: str) -> None:
        """Name ``backend`` in the running check's transcript: each of its calls shows as ``text: call -> result``
        (a check with several instances says which made each call); forgotten when the next check begins."""
        self._labels[id(backend)] = (backend, text)

    def _made_by(self, function: Callable[..., Any]) -> str:
        """The ``label`` of the instance ``function`` is a method of, with its separator; empty when unlabelled."""
        owner = getattr(function, "__self__", None)
        entry = self._labels.get(id(owner)) if owner is not None else None
        return f"{entry[1]}: " if entry is not None and entry[0] is owner else ""

    def call(self, clause_id: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a backend method under the deadline; an exception out of it is a failure of ``clause_id``."""
        return self.call_as(clause_id, getattr(function, "__name__", "call"), function, *args, **kwargs)

    def call_as(self, clause_id: str, name: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call``, showing the call as ``name(...)`` (for a function whose own name says nothing)."""
        args, kwargs = _as_sglang_hands_extra_info(name, args, kwargs)
        shown = self.names.describe_named(name, args, kwargs)
        made_by = self._made_by(function)
        if self.timed_out is not None:
            raise CallTimedOut(clause_id, shown, self.timeout_s)
        try:
            finished, value = self._deadline.run(function, args, kwargs, self.timeout_s)
        except ClauseFailure:
            raise
        except Exception as error:
            self.transcript.append(f"{made_by}{shown} raised {type(error).__name__}: {error}")
            if isinstance(error, TypeError) and not _accepts(function, args, kwargs) and name in EXTRA_INFO_METHODS:
                raise ClauseFailure(
                    "BE-8",
                    f"{shown} raised {type(error).__name__}: {error}; its signature does "
                    "not take extra_info the way SGLang passes it",
                ) from error
            raise ClauseFailure(clause_id, f"{shown} raised {type(error).__name__}: {error}") from error
        if not finished:
            self.timed_out = CallTimedOut(clause_id, shown, self.timeout_s)
            self.transcript.append(f"{made_by}{shown} -> did not return within {self.timeout_s:g} s")
            raise self.timed_out
        self.transcript.append(f"{made_by}{shown} -> {self.names.show(value)}")
        return value

    def untraced(self, clause_id: str, shown: str, function: Callable[..., Any], *args: Any) -> Any:
        """Run ``function`` under the deadline, out of the transcript; past it, stop the run (``CallTimedOut``)."""
        finished, value = self._deadline.run(function, args, {}, self.timeout_s)
        if not finished:
            self.timed_out = CallTimedOut(clause_id, shown, self.timeout_s)
            raise self.timed_out
        return value

    def begin_check(self) -> None:
        """Start a fresh transcript and record of asserted clauses (the runner calls this before each check)."""
        self.transcript.clear()
        self._labels.clear()
        self.asserted = record_assertions()

    @property
    def cleanup_timeout_s(self) -> float:
        """The deadline of each cleanup call: short once the backend has missed a deadline."""
        return self.timeout_s if self.timed_out is None else min(self.timeout_s, CLEANUP_TIMEOUT_S)

    def cleanup(self, function: Callable[[], Any], timeout_s: float) -> bool:
        """Run ``function()`` under ``timeout_s``; return whether it finished (its exception propagates)."""
        finished, _ = self._deadline.run(function, (), {}, timeout_s)
        return finished

    def close(self) -> None:
        """Let go of the deadline's worker."""
        self._deadline.close()


def _as_sglang_hands_extra_info(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of a call to ``name`` with ``extra_info`` in a form SGLang hands it (BE-8, call_forms):
    moved to a keyword, or to its place, and given (None) where a release always passes one."""
    if name not in EXTRA_INFO_FORMS or "extra_info" in kwargs:
        return args, kwargs
    leading = EXTRA_INFO_METHODS[name]
    forms = extra_info_forms(name)
    given = args[leading : leading + 1]
    if POSITIONAL in forms:
        return (*args[:leading], *(given or (None,))), kwargs
    if len(args) > leading:  # a keyword form: as SGLang 0.5.21-0.5.23 pass it
        return args[:leading], {**kwargs, "extra_info": args[leading]}
    return args, kwargs


def _accepts(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``function``'s signature binds these arguments (True when it cannot be read)."""
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError:
        return False
    except ValueError:
        return True
    return True
