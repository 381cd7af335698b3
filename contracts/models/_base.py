"""The ContractModel base and the formatting of its validation errors."""

from __future__ import annotations

from typing import Any, Callable, ClassVar, TypeVar, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from hicache_contracts.errors import ContractViolation
from hicache_contracts.models._fields import FIELD_CLAUSE

_set_attribute = object.__setattr__


class _Missing:
    """Stands for a value that was not given, in error messages."""

    def __repr__(self) -> str:
        return "nothing"


_MISSING = _Missing()


def _format_location(location: tuple[Union[int, str], ...]) -> str:
    """Return ``('keys', 3)`` as ``keys[3]`` and ``('a', 'b')`` as ``a.b``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _join_path(path: str, suffix: str) -> str:
    if not suffix:
        return path
    if not path or suffix.startswith("["):
        return path + suffix
    return f"{path}.{suffix}"


def violation_from(model: type[ContractModel], error: ValidationError, location_offset: int = 0) -> ContractViolation:
    """Return a ContractViolation for the first error of ``error``, raised while building ``model``.

    When several fields of the model itself are missing, one violation names them all, under their
    common clause (the model's default clause when they differ).
    """
    errors = error.errors(include_url=False)
    missing = [
        item["loc"][location_offset]
        for item in errors
        if item["type"] == "missing"
        and len(item["loc"]) == location_offset + 1
        and isinstance(item["loc"][location_offset], str)
    ]
    if len(missing) > 1:
        clause_ids = {model._field_clauses.get(str(name), model._default_clause) for name in missing}
        clause_id = clause_ids.pop() if len(clause_ids) == 1 else model._default_clause
        return ContractViolation(
            model.__name__,
            f"is missing {len(missing)} required fields: {', '.join(map(str, missing))}",
            _MISSING,
            clause_id,
        )
    first = errors[0]
    location = tuple(first["loc"])[location_offset:]
    path = _format_location(location)
    cause = (first.get("ctx") or {}).get("error")
    top = location[0] if location and isinstance(location[0], str) else None
    clause_id = model._default_clause if top is None else model._field_clauses.get(top, model._default_clause)
    if isinstance(cause, ContractViolation):
        field = _join_path(path, cause.field)
        clause_id = clause_id if cause.clause_id == FIELD_CLAUSE else cause.clause_id
        return ContractViolation(f"{model.__name__}.{field}", cause.rule, cause.value, clause_id)
    rule = first["msg"]
    rule = rule[:1].lower() + rule[1:]
    value = _MISSING if first["type"] == "missing" else first.get("input")
    return ContractViolation(f"{model.__name__}.{path}" if path else model.__name__, rule, value, clause_id)


_Model = TypeVar("_Model", bound="ContractModel")
_T = TypeVar("_T")


class ContractModel(BaseModel):
    """The base of every contract model: frozen, strict, no unknown fields, errors as ContractViolation.

    A subclass names the clause behind each field in ``_field_clauses`` and a
    fallback in ``_default_clause``; a pydantic error on that field (a wrong
    type, a missing value) is reported under it. A validator raises
    ContractViolation with a field path relative to the value it checks (``""``
    or ``"[3]"``) and a clause ID, or ``FIELD_CLAUSE`` for "this field's clause";
    the model puts ``Class.field`` in front.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        arbitrary_types_allowed=True,
        revalidate_instances="never",
    )

    _field_clauses: ClassVar[dict[str, str]] = {}
    """The clause a field's built-in type errors are reported under."""
    _default_clause: ClassVar[str] = "BE-8"
    """The clause for errors of a field not in ``_field_clauses``."""

    _hide_cause: ClassVar[bool] = False
    """Whether the converted error leaves pydantic's error out of its traceback."""

    @classmethod
    def _invalid(cls, error: ValidationError) -> Exception:
        """Return the exception a validation error of ``cls`` becomes."""
        return violation_from(cls, error)

    @classmethod
    def _converting(cls, validate: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Return ``validate(*args, **kwargs)``; a ValidationError is raised as ``cls._invalid`` converts it."""
        try:
            return validate(*args, **kwargs)
        except ValidationError as error:
            raise cls._invalid(error) from (None if cls._hide_cause else error)

    def __init__(self, /, **data: Any) -> None:
        type(self)._converting(self.__pydantic_validator__.validate_python, data, self_instance=self)

    # Validation does not call this __init__ (it only converts the error), so
    # model_validate_json keeps its JSON-mode validators.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls: type[_Model], obj: Any, *args: Any, **kwargs: Any) -> _Model:
        return cls._converting(super().model_validate, obj, *args, **kwargs)

    @classmethod
    def model_validate_json(cls: type[_Model], json_data: Any, *args: Any, **kwargs: Any) -> _Model:
        return cls._converting(super().model_validate_json, json_data, *args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        """Refuse to assign a field (the model is frozen) or a name that is not one, in the project's error format."""
        if name.startswith("_"):
            super().__setattr__(name, value)
            return
        raise self._refused(name, value)

    def __delattr__(self, name: str) -> None:
        """Refuse to delete a field (the model is frozen), in the project's error format."""
        if name.startswith("_"):
            super().__delattr__(name)
            return
        raise self._refused(name, _MISSING, "deleted")

    def _refused(self, name: str, value: Any, how: str = "assigned") -> ContractViolation:
        cls = type(self)
        fields = cls.model_fields
        if name not in fields:
            rule = f"is not a field of {cls.__name__} (its fields: {', '.join(fields)})"
        else:
            rule = f"cannot be {how}: {cls.__name__} is frozen; build a new {cls.__name__} instead"
        return ContractViolation(
            f"{cls.__name__}.{name}", rule, value, cls._field_clauses.get(name, cls._default_clause)
        )

    def _evolve(self: _Model, **changes: Any) -> _Model:
        """Return a copy with ``changes`` applied, without validation: only for values already validated."""
        new = object.__new__(type(self))
        fields = dict(self.__dict__)
        fields.update(changes)
        _set_attribute(new, "__dict__", fields)
        _set_attribute(new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | changes.keys())
        _set_attribute(new, "__pydantic_extra__", None)
        _set_attribute(new, "__pydantic_private__", None)
        return new


_set_model_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_model_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_model_private = BaseModel.__dict__["__pydantic_private__"].__set__
