"""Conversion between the contract models and SGLang's own classes.

``from_sglang(obj)`` reads an object by attribute names, so SGLang's
``HiCacheStorageExtraInfo``, ``HiCacheStorageConfig`` and ``PoolTransfer``
convert, and so does any stand-in with the same attributes. ``to_sglang(model)``
builds SGLang's class from ``sglang.srt.mem_cache.hicache_storage``; it imports
SGLang only when called, so nothing here needs SGLang installed until then.

What kind of object ``from_sglang`` sees is decided by its class name when it
is one of the three, else by its attributes (``prefix_keys`` → extra info,
``tp_rank`` → config, ``name`` with ``hit_policy`` → transfer).

The tri-state prefix survives both ways (PFX-1): None stays None and ``[]``
stays empty. ``to_sglang`` hands SGLang plain lists and dicts (new copies), as
SGLang's dataclasses expect; tensors are passed through, never copied.
"""

from __future__ import annotations

import importlib
from typing import Any, Optional

from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import (
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolTransfer,
)

__all__ = ["SGLANG_STORAGE_MODULE", "from_sglang", "is_sglang_available", "to_sglang"]

SGLANG_STORAGE_MODULE = "sglang.srt.mem_cache.hicache_storage"
"""The SGLang module that defines the storage interface's classes."""

_CONFIG_FIELDS = tuple(HiCacheStorageConfig.model_fields)
_TRANSFER_FIELDS = tuple(PoolTransfer.model_fields)


def is_sglang_available() -> bool:
    """Return whether SGLang's storage module can be imported."""
    try:
        importlib.import_module(SGLANG_STORAGE_MODULE)
    except ImportError:
        return False
    return True


def _sglang_module(storage_module: Any = None) -> Any:
    if storage_module is not None:
        return storage_module
    return importlib.import_module(SGLANG_STORAGE_MODULE)


def _enum_value(value: Any) -> Any:
    """Return an enum member's value (SGLang's or ours), or ``value`` itself."""
    return getattr(value, "value", value)


def _plain_list(value: Any) -> Optional[list]:
    return None if value is None else list(value)


def _plain_dict(value: Any) -> Optional[dict]:
    return None if value is None else dict(value)


def _kind_of(obj: Any) -> str:
    name = type(obj).__name__
    if name in ("HiCacheStorageExtraInfo", "HiCacheStorageConfig", "PoolTransfer"):
        return name
    if hasattr(obj, "prefix_keys"):
        return "HiCacheStorageExtraInfo"
    if hasattr(obj, "tp_rank"):
        return "HiCacheStorageConfig"
    if hasattr(obj, "name") and hasattr(obj, "hit_policy"):
        return "PoolTransfer"
    raise ContractViolation("from_sglang.obj", "must be an extra info, a storage config or a pool transfer",
                            obj, "BE-8")


def from_sglang(obj: Any) -> Any:
    """Return the contract model for an SGLang object (or a stand-in with the same attributes).

    None gives None. The result is validated like any model: bad values raise
    ContractViolation naming the field.
    """
    if obj is None:
        return None
    kind = _kind_of(obj)
    if kind == "HiCacheStorageExtraInfo":
        prefix = obj.prefix_keys
        return HiCacheStorageExtraInfo(
            prefix_keys=None if prefix is None else (prefix if isinstance(prefix, tuple) else list(prefix)),
            extra_info=getattr(obj, "extra_info", None),
        )
    if kind == "HiCacheStorageConfig":
        fields = {name: getattr(obj, name) for name in _CONFIG_FIELDS if hasattr(obj, name)}
        return HiCacheStorageConfig(**fields)
    fields = {name: getattr(obj, name) for name in _TRANSFER_FIELDS if hasattr(obj, name)}
    fields["name"] = _enum_value(fields["name"])
    if "hit_policy" in fields:
        fields["hit_policy"] = _enum_value(fields["hit_policy"])
    if fields.get("indices_from_pool") is not None:
        fields["indices_from_pool"] = _enum_value(fields["indices_from_pool"])
    if fields.get("keys") is not None and not isinstance(fields["keys"], (list, tuple)):
        fields["keys"] = list(fields["keys"])
    return PoolTransfer(**fields)


def to_sglang(model: Any, *, storage_module: Any = None) -> Any:
    """Return SGLang's object for a contract model, importing SGLang only now.

    ``storage_module`` replaces ``sglang.srt.mem_cache.hicache_storage`` (any
    object with the three classes and the two enums as attributes); it lets
    the conversion run against stand-ins.
    """
    if model is None:
        return None
    module = _sglang_module(storage_module)
    if isinstance(model, HiCacheStorageExtraInfo):
        return module.HiCacheStorageExtraInfo(
            prefix_keys=_plain_list(model.prefix_keys), extra_info=_plain_dict(model.extra_info)
        )
    if isinstance(model, HiCacheStorageConfig):
        fields = {name: getattr(model, name) for name in _CONFIG_FIELDS}
        fields["extra_config"] = _plain_dict(model.extra_config)
        return module.HiCacheStorageConfig(**fields)
    if isinstance(model, PoolTransfer):
        pool_name = module.PoolName
        hit_policy = module.PoolHitPolicy
        return module.PoolTransfer(
            name=pool_name(model.name.value),
            host_indices=model.host_indices,
            device_indices=model.device_indices,
            keys=_plain_list(model.keys),
            hit_policy=hit_policy(model.hit_policy.value),
            nodes_to_load=model.nodes_to_load,
            indices_from_pool=None if model.indices_from_pool is None else pool_name(model.indices_from_pool.value),
        )
    raise ContractViolation("to_sglang.model", "must be an extra info, a storage config or a pool transfer",
                            model, "BE-8")
