"""What the trace checker returns: violations, each naming its clause, and a report over them."""

from __future__ import annotations

from typing import ClassVar, Optional, Union

from hicache_spec import UnknownClauseError, clause
from hicache_contracts.models import ContractModel

__all__ = ["TraceReport", "TraceViolation"]


class TraceViolation(ContractModel):
    """One broken rule, found in a trace: the clause, what happened, and where."""

    clause: str
    """The clause ID the trace breaks (``PFX-2``, ``CTL-4``, ...)."""
    message: str
    """What the trace shows, in one sentence, with the values involved."""
    call_index: Optional[int] = None
    """The offending call's ``index`` in the trace, or None when no single call is at fault."""
    ack_index: Optional[int] = None
    """The offending ack's position among the operation's acks, or None."""
    divergence: tuple[str, ...] = ()
    """The divergence registry entries (``DIV-N``) that record this finding for ``release``; empty for a violation."""
    release: Optional[str] = None
    """The SGLang release the finding was judged for, when it is a recorded divergence."""

    _default_clause: ClassVar[str] = "PFX-2"

    @property
    def statement(self) -> str:
        """The clause's normative statement, from the registry (empty for an unknown ID)."""
        try:
            return clause(self.clause).statement
        except UnknownClauseError:
            return ""

    @property
    def where(self) -> str:
        """``call #i``, ``ack #j``, both, or ``operation``."""
        parts = []
        if self.call_index is not None:
            parts.append(f"call #{self.call_index}")
        if self.ack_index is not None:
            parts.append(f"ack #{self.ack_index}")
        return ", ".join(parts) or "operation"

    def __str__(self) -> str:
        recorded = (
            f" (recorded divergence {', '.join(self.divergence)} of SGLang {self.release})" if self.divergence else ""
        )
        return f"[{self.clause}] {self.where}: {self.message}{recorded}"


class TraceReport(ContractModel):
    """The verdict on one operation's trace: every violation found, and which clauses were checked."""

    violations: tuple[TraceViolation, ...] = ()
    """Every violation, in the order the checks found them."""
    checked: tuple[str, ...] = ()
    """The clause IDs the checker had material to check in this trace (a clause not listed was not exercised)."""
    operation_id: Optional[Union[int, str]] = None
    """The operation checked, when the trace names it."""
    divergences: tuple[TraceViolation, ...] = ()
    """Findings the divergence registry records for the release judged (``check_trace(..., sglang_version=V)``):
    shown, each with its entry, but not failing the verdict."""

    @property
    def ok(self) -> bool:
        """Whether the trace breaks no rule (recorded divergences of the release judged do not count)."""
        return not self.violations

    @property
    def violated(self) -> tuple[str, ...]:
        """The clause IDs broken, each once, in the order first found."""
        return tuple(dict.fromkeys(violation.clause for violation in self.violations))

    def for_clause(self, clause_id: str) -> tuple[TraceViolation, ...]:
        """Return the violations of one clause."""
        return tuple(violation for violation in self.violations if violation.clause == clause_id)

    def merged(self, other: TraceReport) -> TraceReport:
        """Return one report holding this report's findings followed by ``other``'s."""
        return TraceReport(
            violations=self.violations + other.violations,
            checked=tuple(dict.fromkeys(self.checked + other.checked)),
            operation_id=self.operation_id if self.operation_id is not None else other.operation_id,
            divergences=self.divergences + other.divergences,
        )

    def _divergence_lines(self) -> list[str]:
        if not self.divergences:
            return []
        lines = [
            f"{len(self.divergences)} recorded divergence(s) of SGLang {self.divergences[0].release} "
            "(not failing the verdict):"
        ]
        lines += [f"  {', '.join(v.divergence)}  {v.clause}  {v.where}  {v.message}" for v in self.divergences]
        return lines

    def format_table(self, *, statements: bool = False) -> str:
        """Return the violations as a plain-text table: clause, where, message (and the statement)."""
        if self.ok:
            checked = ", ".join(self.checked) or "nothing"
            return "\n".join([f"trace conforms (checked: {checked})"] + self._divergence_lines())
        rows = [("clause", "where", "message")]
        rows += [(v.clause, v.where, v.message) for v in self.violations]
        clause_width = max(len(row[0]) for row in rows)
        where_width = max(len(row[1]) for row in rows)
        lines = []
        for number, (clause_id, where, message) in enumerate(rows):
            lines.append(f"{clause_id:<{clause_width}}  {where:<{where_width}}  {message}")
            if number == 0:
                lines.append(f"{'-' * clause_width}  {'-' * where_width}  {'-' * 7}")
            elif statements:
                statement = self.violations[number - 1].statement
                if statement:
                    lines.append(f"{'':<{clause_width}}  {'':<{where_width}}  rule: {statement}")
        lines.append(
            f"{len(self.violations)} violation(s) of {len(self.violated)} clause(s): {', '.join(self.violated)}"
        )
        return "\n".join(lines + self._divergence_lines())
