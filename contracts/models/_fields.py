"""Field types of the models: the read-only mapping, index tensors, counts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Optional

import torch
from pydantic import Field
from pydantic_core import core_schema

from hicache_contracts.errors import ContractViolation

_set_attribute = object.__setattr__

FIELD_CLAUSE = "FIELD"
"""Raised inside a field validator as the clause ID, it stands for the clause of the field being
validated (``ContractModel._field_clauses``); ``violation_from`` puts the real ID in."""


# ==================================================================== read-only mapping
class ReadOnlyMapping(Mapping[str, Any]):
    """An immutable mapping with str keys: reads like a dict, equals an equal dict, pickles.

    ``copy()`` returns a new plain dict, like ``dict.copy``. The freeze is
    shallow: values are kept as given.
    """

    __slots__ = ("_data",)

    _data: dict[str, Any]

    def __init__(self, data: Any = ()) -> None:
        _set_attribute(self, "_data", dict(data))

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def copy(self) -> dict[str, Any]:
        """Return a new, mutable dict with the same items."""
        return dict(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlyMapping):
            return self._data == other._data
        if isinstance(other, dict):
            return self._data == other
        return Mapping.__eq__(self, other)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ReadOnlyMapping is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("ReadOnlyMapping is immutable")

    def __reduce__(self) -> tuple[type[ReadOnlyMapping], tuple[dict[str, Any]]]:
        return (ReadOnlyMapping, (self._data,))

    def __repr__(self) -> str:
        return f"ReadOnlyMapping({self._data!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        """Validate a dict (or any mapping) with str keys into a ReadOnlyMapping; serialise to a dict."""

        def from_python(value: object) -> ReadOnlyMapping:
            if type(value) is ReadOnlyMapping:
                return value
            if not isinstance(value, Mapping):
                raise ContractViolation("", "must be a dict with str keys", value, FIELD_CLAUSE)
            data = dict(value)
            for key in data:
                if not isinstance(key, str):
                    raise ContractViolation(f"[{key!r}]", "key must be a str", key, FIELD_CLAUSE)
            return ReadOnlyMapping(data)

        return core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_after_validator_function(
                ReadOnlyMapping, core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
            ),
            python_schema=core_schema.no_info_plain_validator_function(from_python),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda value: dict(value._data)),
        )


# ==================================================================== tensors
_INTEGER_DTYPES = frozenset(
    dtype
    for dtype in (
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        getattr(torch, "uint16", None),
        getattr(torch, "uint32", None),
        getattr(torch, "uint64", None),
    )
    if dtype is not None
)
"""Tensor dtypes that can hold host or device slot indices."""

_RULE_INDEX_TENSOR = "must be a 1-D integer torch.Tensor"


def _index_tensor_problem(value: object) -> Optional[str]:
    """Return why ``value`` is not a 1-D integer tensor, or None if it is."""
    if not isinstance(value, torch.Tensor):
        return _RULE_INDEX_TENSOR
    if value.dtype not in _INTEGER_DTYPES:
        return f"{_RULE_INDEX_TENSOR}, not {value.dtype}"
    if value.dim() != 1:
        return f"{_RULE_INDEX_TENSOR}, not {value.dim()}-D"
    return None


def _check_index_tensor(value: object) -> torch.Tensor:
    problem = _index_tensor_problem(value)
    if problem is not None or not isinstance(value, torch.Tensor):  # no problem: a tensor
        raise ContractViolation("", problem or _RULE_INDEX_TENSOR, value, "BE-15")
    return value  # held as given: never copied


def _index_tensor_from_json(value: list[int]) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.int64)


class _IndexTensorSchema:
    """Annotation: a 1-D integer tensor, held as given; a JSON list of ints in JSON."""

    def __repr__(self) -> str:  # as signatures and help() show the annotation
        return "a 1-D integer tensor"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_after_validator_function(
                _index_tensor_from_json, core_schema.list_schema(core_schema.int_schema(strict=True))
            ),
            python_schema=core_schema.no_info_plain_validator_function(_check_index_tensor),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda tensor: tensor.tolist(), when_used="json"
            ),
        )


IndexTensor = Annotated[torch.Tensor, _IndexTensorSchema()]
"""A 1-D integer tensor of slot indices (host or device), held without a copy."""

NonNegativeInt = Annotated[int, Field(ge=0)]
"""A count that may be zero: pages, tokens, slice indices."""
PositiveInt = Annotated[int, Field(ge=1)]
"""A size that is at least one: page size, batch size."""
