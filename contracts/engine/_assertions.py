"""``assert_trace_conforms``: the trace checker as a test assertion with a readable failure."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from hicache_contracts.engine._checker import check_trace
from hicache_contracts.engine._report import TraceReport

__all__ = ["assert_trace_conforms", "format_failure"]


def format_failure(report: TraceReport, calls: Sequence[Any] = ()) -> str:
    """Return a failure text: per violation, the clause, its statement and the offending call."""
    by_index = {getattr(call, "index", None): call for call in calls}
    lines = [f"trace breaks {len(report.violated)} clause(s): {', '.join(report.violated)}"]
    for violation in report.violations:
        lines.append(f"  [{violation.clause}] {violation.where}: {violation.message}")
        if violation.statement:
            lines.append(f"      rule: {violation.statement}")
        call = by_index.get(violation.call_index)
        if call is not None:
            lines.append(f"      call: {call!r}")
    return "\n".join(lines)


def assert_trace_conforms(
    recorder_or_calls: Any, *, chain: Sequence[str], prefix_keys: Optional[Sequence[str]], **options: Any
) -> TraceReport:
    """Check a recorder's calls (or a list of calls) and raise AssertionError listing every violation.

    ``options`` are those of ``check_trace`` (``batch_size``, ``acks``,
    ``page_size``, ``agreed_pages`` ...). Returns the report when it is clean.
    """
    __tracebackhide__ = True  # pytest shows the assertion at the caller
    calls = recorder_or_calls.calls if hasattr(recorder_or_calls, "clear_calls") else list(recorder_or_calls)
    report = check_trace(calls, chain=chain, prefix_keys=prefix_keys, **options)
    if not report.ok:
        raise AssertionError(format_failure(report, calls))
    return report
