"""Conversion between the contract models and SGLang's own classes, for every pinned release.

``to_sglang(model)`` builds the class of the same name from SGLang's storage
module (the imported one, or ``storage_module=``); ``from_sglang(obj)`` reads
one back. Releases differ in their fields (``dp_rank`` since 0.5.21, the DCP
fields and ``logical_page_size`` in 0.5.23, ``block_pages``/``group_pages``
since 0.5.22) and in their enum members, so each direction applies one rule
to a field the other side lacks: it is dropped when it holds its default,
and otherwise refused with a ContractViolation naming the field and the
release. Nothing is ever silently lost, and nothing raises a traceback.

The tri-state prefix survives both ways (PFX-1): None stays None and ``[]``
stays empty. SGLang gets plain lists and dicts (new copies), as its
dataclasses expect; tensors are passed through, never copied.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Sequence
from enum import Enum
from typing import Any, Optional

from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import (
    ContractModel,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolTransfer,
    PoolTransferResult,
    pool_value,
)
from hicache_contracts.sglang_release import STORAGE_MODULE, release_of

__all__ = ["SGLANG_STORAGE_MODULE", "MODELS", "from_sglang", "is_sglang_available", "to_sglang"]

SGLANG_STORAGE_MODULE = STORAGE_MODULE
"""The SGLang module that defines the storage interface's classes."""

MODELS: dict[str, type[ContractModel]] = {
    model.__name__: model for model in (HiCacheStorageExtraInfo, HiCacheStorageConfig, PoolTransfer, PoolTransferResult)
}
"""The contract models that have an SGLang class of the same name."""

_ENUM_FIELDS = {"name": "PoolName", "indices_from_pool": "PoolName", "hit_policy": "PoolHitPolicy"}
"""Fields whose values are members of an SGLang enum, and the enum's name."""

_MISSING = object()


def is_sglang_available() -> bool:
    """Return whether SGLang's storage module can be imported."""
    try:
        importlib.import_module(SGLANG_STORAGE_MODULE)
    except Exception:
        return False
    return True


def _release_name(module: Any) -> str:
    found = release_of(module)
    return f"SGLang {found}" if found else "this SGLang"


def _class_fields(cls: type) -> Optional[dict[str, Any]]:
    """Return a dataclass's field names (in order) with their defaults (``_MISSING`` when required)."""
    if not dataclasses.is_dataclass(cls):
        return None
    fields = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            fields[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            fields[field.name] = field.default_factory()
        else:
            fields[field.name] = _MISSING
    return fields


def _plain(value: Any) -> Any:
    """Return what SGLang's dataclasses hold: enum values as members later, sequences as lists, mappings as dicts."""
    if isinstance(value, Enum):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, list)):
        return list(value)
    if hasattr(value, "keys") and hasattr(value, "items") and not isinstance(value, dict):
        return dict(value.items())
    if isinstance(value, dict):
        return dict(value)
    return value


def _kind_of(obj: Any) -> type[ContractModel]:
    model = MODELS.get(type(obj).__name__)
    if model is not None:
        return model
    if hasattr(obj, "prefix_keys"):
        return HiCacheStorageExtraInfo
    if hasattr(obj, "tp_rank"):
        return HiCacheStorageConfig
    if hasattr(obj, "name") and hasattr(obj, "hit_policy"):
        return PoolTransfer
    if hasattr(obj, "kv_hit_pages"):
        return PoolTransferResult
    raise ContractViolation(
        "from_sglang.obj",
        "must be an extra info, a storage config, a pool transfer or a pool transfer result",
        obj,
        "BE-8",
    )


def _clause_of(model: type[ContractModel], field: str) -> str:
    return model._field_clauses.get(field, model._default_clause)


def _to_member(enum: Any, value: Any, model: type[ContractModel], field: str, module: Any) -> Any:
    raw = getattr(value, "value", value)
    try:
        return enum(raw)
    except ValueError:
        raise ContractViolation(
            f"{model.__name__}.{field}",
            f"{_release_name(module)} has no {enum.__name__} member {raw!r}",
            raw,
            _clause_of(model, field),
        ) from None


def to_sglang(model: Any, *, storage_module: Any = None) -> Any:
    """Return SGLang's object for a contract model, importing SGLang only now.

    ``storage_module`` replaces ``sglang.srt.mem_cache.hicache_storage`` (any
    object with the classes and enums as attributes, e.g. a release loaded
    with ``hicache_contracts.sglang_release``). A field the release's class
    lacks is dropped when it holds the model's default; otherwise a
    ContractViolation names the field and the release.
    """
    if model is None:
        return None
    kind = MODELS.get(type(model).__name__)
    if kind is None or not isinstance(model, kind):
        raise ContractViolation(
            "to_sglang.model",
            "must be an extra info, a storage config, a pool transfer or a pool transfer result",
            model,
            "BE-8",
        )
    module = storage_module if storage_module is not None else importlib.import_module(SGLANG_STORAGE_MODULE)
    cls = getattr(module, kind.__name__, None)
    if cls is None:
        raise ContractViolation(
            f"{kind.__name__}", f"{_release_name(module)} has no class {kind.__name__}", None, kind._default_clause
        )
    theirs = _class_fields(cls)
    arguments = {}
    for field, info in kind.model_fields.items():
        value = getattr(model, field)
        if theirs is not None and field not in theirs:
            if value == info.default:
                continue
            raise ContractViolation(
                f"{kind.__name__}.{field}",
                f"is not a field of {_release_name(module)}'s "
                f"{kind.__name__}; it can only be dropped while it holds its default "
                f"{info.default!r}",
                value,
                _clause_of(kind, field),
            )
        if field in _ENUM_FIELDS and value is not None:
            value = _to_member(getattr(module, _ENUM_FIELDS[field]), value, kind, field, module)
        arguments[field] = _plain(value)
    try:
        return cls(**arguments)
    except (TypeError, ValueError) as error:
        raise ContractViolation(
            f"{kind.__name__}", f"{_release_name(module)} refused it: {error}", None, kind._default_clause
        ) from None


def _enum_value(value: Any) -> Any:
    """Return an enum member's value (SGLang's or ours), or ``value`` itself for the model to validate (a pool
    name normalised for a lookup is ``pool_value``'s)."""
    return getattr(value, "value", value)


def from_sglang(obj: Any) -> Any:
    """Return the contract model for an SGLang object (or a stand-in with the same attributes).

    None gives None. A field of the release that the model lacks is dropped
    when it holds the release's default and otherwise refused. The result is
    validated like any model: bad values raise ContractViolation naming the field.
    """
    if obj is None:
        return None
    kind = _kind_of(obj)
    theirs = _class_fields(type(obj))
    if theirs is not None:
        for field, default in theirs.items():
            if field in kind.model_fields:
                continue
            value = getattr(obj, field)
            if default is not _MISSING and value == default:
                continue
            module = sys.modules.get(type(obj).__module__)
            raise ContractViolation(
                f"{kind.__name__}.{field}",
                f"is a field of {_release_name(module)}'s "
                f"{kind.__name__} that the contract does not model; it can only be dropped "
                f"while it holds its default {default if default is not _MISSING else None!r}",
                value,
                kind._default_clause,
            )
    fields = {name: getattr(obj, name) for name in kind.model_fields if hasattr(obj, name)}
    for name in _ENUM_FIELDS:
        if fields.get(name) is not None:
            fields[name] = _enum_value(fields[name])
    if kind is HiCacheStorageExtraInfo:
        prefix = fields.get("prefix_keys")
        if prefix is not None and not isinstance(prefix, (list, tuple)) and type(prefix).__name__ != "PrefixKeys":
            fields["prefix_keys"] = list(prefix)
    if kind is PoolTransfer and fields.get("keys") is not None and not isinstance(fields["keys"], (list, tuple)):
        fields["keys"] = list(fields["keys"])
    if kind is PoolTransferResult and fields.get("extra_pool_hit_pages") is not None:
        fields["extra_pool_hit_pages"] = {
            pool_value(name): hits for name, hits in dict(fields["extra_pool_hit_pages"]).items()
        }
    return kind(**fields)
