"""Errors raised when a value breaks the contract.

Hierarchy::

    ValueError                      (builtin: what callers already catch)
     └── ContractViolation          a value breaks a clause; carries clause_id, field, value
    ImportError
     └── MissingExtra               an optional dependency is missing; names the extra that installs it

Every message has one shape, so that a test can compare it whole and a
reader can find the rule::

    Class.field: rule (got value) [CLAUSE]

for example ``PoolTransfer.keys[3]: page key must be a non-empty str (got 7) [KEY-2]``.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "ContractViolation",
    "FieldErrors",
    "MissingExtra",
    "bad_value",
    "format_problem",
    "format_violation",
    "missing_extra",
]

_MAX_VALUE_REPR = 120
"""Characters of ``repr(value)`` kept in a message; longer reprs are cut with an ellipsis."""


def _short_repr(value: Any) -> str:
    """Return ``repr(value)``, cut to ``_MAX_VALUE_REPR`` characters."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:  # a tensor: its repr is long and spans lines
        return f"{type(value).__name__}(shape={tuple(shape)}, dtype={dtype})"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} object>"
    text = " ".join(text.split()) if "\n" in text else text
    if len(text) > _MAX_VALUE_REPR:
        text = text[: _MAX_VALUE_REPR - 3] + "..."
    return text


def format_problem(field: str, rule: str, value: Any) -> str:
    """Return the message ``field: rule (got value)``: the one shape of every bad-input message."""
    return f"{field}: {rule} (got {_short_repr(value)})"


def format_violation(field: str, rule: str, value: Any, clause_id: str) -> str:
    """Return the message ``field: rule (got value) [clause_id]``; ``field`` is ``Class.field``."""
    return f"{format_problem(field, rule, value)} [{clause_id}]"


def bad_value(field: str, rule: str, value: Any) -> ValueError:
    """Return the ValueError for a bad input no clause governs (an option, a setting): ``field: rule (got value)``."""
    return ValueError(format_problem(field, rule, value))


class FieldErrors:
    """The errors for the inputs of one owner (a class, a set of options), each field named ``owner.field``.

    ``FieldErrors("HostPagePool").violation("indices", rule, value, "BE-15")``
    is the ContractViolation ``HostPagePool.indices: rule (got value) [BE-15]``;
    ``.bad(field, rule, value)`` the ValueError for an input no clause governs.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def violation(self, field: str, rule: str, value: Any, clause_id: str) -> ContractViolation:
        """Return the ContractViolation ``owner.field: rule (got value) [clause_id]``."""
        return ContractViolation(f"{self.owner}.{field}", rule, value, clause_id)

    def bad(self, field: str, rule: str, value: Any) -> ValueError:
        """Return the ValueError ``owner.field: rule (got value)``."""
        return bad_value(f"{self.owner}.{field}", rule, value)


class ContractViolation(ValueError):
    """A value broke a clause of the contract at a boundary.

    ``field`` is the dotted place of the value (``Class.field``, with an index
    such as ``keys[3]`` where one applies), ``rule`` the requirement in words,
    ``value`` the offending value and ``clause_id`` the clause it breaks.
    """

    def __init__(self, field: str, rule: str, value: Any, clause_id: str) -> None:
        self.field = field
        self.rule = rule
        self.value = value
        self.clause_id = clause_id
        super().__init__(format_violation(field, rule, value, clause_id))

    def __reduce__(self) -> tuple[Any, ...]:  # keep the attributes across pickling (multiprocessing, pytest-xdist)
        return (type(self), (self.field, self.rule, self.value, self.clause_id))


class MissingExtra(ImportError):
    """An optional dependency is not installed: the message names what needs it and the extra that installs it.

    ``extra`` is the extra's name (``redis``), ``module`` the missing module.
    """

    def __init__(self, extra: str, purpose: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f"{purpose} needs the {module!r} package, which the {extra!r} extra installs: "
            f"pip install 'hicache-spec[{extra}]' (or pip install -e '.[{extra}]' in a clone)",
            name=module,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_missing_extra, (self.extra, str(self), self.name))


def _rebuild_missing_extra(extra: str, message: str, module: Optional[str]) -> MissingExtra:
    error = MissingExtra.__new__(MissingExtra)
    ImportError.__init__(error, message, name=module)
    error.extra = extra
    return error


def missing_extra(extra: str, purpose: str, error: ImportError) -> MissingExtra:
    """Return the MissingExtra for ``error`` (raised importing an optional dependency), for ``raise ... from error``."""
    return MissingExtra(extra, purpose, error.name or str(error))
