"""How a trace file that does not validate is reported: ``TraceFormatError``, and the base of the trace models.

``_TraceModel`` turns pydantic's first error into a ``TraceFormatError``
naming the field (``TraceDocument.operations[0].page_size``), the rule and,
when one governs the value, the clause (a model's ``_trace_clauses``). See
docs/engines.md ("The trace file").
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional, Union

from pydantic import BaseModel, ValidationError

from hicache_contracts.errors import ContractViolation, _short_repr
from hicache_contracts.models import FIELD_CLAUSE, ContractModel, FinalAck, PoolHitsAck, ProgressAck

__all__ = ["TraceFormatError", "trace_error"]


class TraceFormatError(ContractViolation):
    """A trace that is not valid: ``field: rule (got value)``, with `` [CLAUSE]`` when a clause governs the value."""

    def __init__(self, field: str, rule: str, value: Any, clause_id: Optional[str]) -> None:
        self.field, self.rule, self.value = field, rule, value
        self.clause_id = clause_id  # type: ignore[assignment]  # None: a rule of the format's own, no clause
        tag = f" [{clause_id}]" if clause_id else ""
        ValueError.__init__(self, f"{field}: {rule} (got {_short_repr(value)}){tag}")


class _Nothing:
    def __repr__(self) -> str:
        return "nothing"


_ACK_MODELS: dict[str, type[ContractModel]] = {"progress": ProgressAck, "pool_hits": PoolHitsAck, "final": FinalAck}


def _location_text(location: tuple[Union[int, str], ...]) -> str:
    """``('operations', 0, 'acks', 1, 'final', 'tokens')`` as ``operations[0].acks[1].tokens`` (no union tag)."""
    text = ""
    for position, part in enumerate(location):
        if part in _ACK_MODELS and position >= 2 and location[position - 2] == "acks":
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _walk(root: type[BaseModel], location: tuple[Union[int, str], ...]) -> tuple[Any, Optional[str], int, Any]:
    """Follow ``location`` through the trace models.

    Returns the model declaring the last field reached, that field (None if
    none), how many parts of ``location`` lead to it, and the model holding
    the value ``location`` ends at (None when it is not an object).
    """
    model: Union[type[BaseModel], str, None] = root
    owner, field, depth = root, None, 0
    for position, part in enumerate(location):
        if isinstance(part, int):
            continue
        if model == "ack" and part in _ACK_MODELS:  # a tagged union: the tag names the ack's model
            model = _ACK_MODELS[part]
        elif isinstance(model, type) and part in model.model_fields:  # a model, not None or "ack"
            owner, field, depth = model, part, position + 1
            model = getattr(owner, "_children", {}).get(part)
        else:
            break
    return owner, field, depth, model


def _field_clause(model: Any, field: Optional[str]) -> Optional[str]:
    """The clause that governs ``model.field``'s value, or None where the rule is the format's own."""
    if field is None:
        return None
    if model in _ACK_MODELS.values():
        ack: type[ContractModel] = model
        return ack._field_clauses.get(field, ack._default_clause)
    clauses: dict[str, str] = getattr(model, "_trace_clauses", {})
    return clauses.get(field)


def trace_error(root: type, error: ValidationError) -> TraceFormatError:
    """Return the TraceFormatError of the first error of ``error``, raised while building trace model ``root``."""
    first = error.errors(include_url=False)[0]
    location = tuple(first["loc"])
    path = _location_text(location)
    where = f"{root.__name__}.{path}" if path else root.__name__
    owner, field, depth, holder = _walk(root, location)
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ContractViolation):  # a validator's own rule
        if cause.field and not cause.field.startswith("["):  # a model validator, naming a field of its model
            owner, field = holder, cause.field
            where = f"{where}.{cause.field}"
        else:
            where += cause.field
        clause_id = _field_clause(owner, field) if cause.clause_id == FIELD_CLAUSE else cause.clause_id
        return TraceFormatError(where, cause.rule, cause.value, clause_id)
    if first["type"] == "missing":
        return TraceFormatError(where, "is required", _Nothing(), None)
    if first["type"] == "extra_forbidden":
        container = _walk(root, location[:-1])[3]
        known = ", ".join(getattr(container, "model_fields", {}))
        return TraceFormatError(
            where,
            f"is not a field of {getattr(container, '__name__', 'this object')} (its fields: {known})",
            first.get("input"),
            None,
        )
    within = all(isinstance(part, int) for part in location[depth:])  # the field itself, or an item of it
    rule = first["msg"][:1].lower() + first["msg"][1:]
    return TraceFormatError(where, rule, first.get("input"), _field_clause(owner, field) if within else None)


class _TraceModel(ContractModel):
    """A trace model: validation errors become TraceFormatError, tagged per ``_trace_clauses``."""

    _trace_clauses: ClassVar[dict[str, str]] = {}
    """The clause governing each field's value; a field not listed is the format's own (no clause)."""
    _children: ClassVar[dict[str, Any]] = {}
    """The model of each field that holds nested trace objects."""

    _hide_cause: ClassVar[bool] = True

    @classmethod
    def _invalid(cls, error: ValidationError) -> Exception:
        return trace_error(cls, error)
