"""The run's names: fresh page keys and namespaces, and how messages show keys, values and calls."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence as SequenceType
from typing import Any, Optional, Sequence

import torch

__all__ = ["Names"]


class Names:
    """Makes fresh keys (``k0``, ``k1``, ... in messages) and namespaces under the run's model name."""

    def __init__(self, run_id: str, model_name: str) -> None:
        self.run_id = run_id
        """Random per run; part of every key."""
        self.model_name = model_name
        """The run's model name: every namespace is under it."""
        self._key_numbers = itertools.count()
        self._tags = itertools.count()
        self._labels: dict[str, str] = {}

    def new_keys(self, count: int) -> list[str]:
        """Return ``count`` fresh page keys (64 lowercase hex characters), labelled k0, k1, ... in messages."""
        keys = []
        for _ in range(count):
            number = next(self._key_numbers)
            key = hashlib.sha256(f"hicache-conform/{self.run_id}/{number}".encode()).hexdigest()
            self._labels[key] = f"k{number}"
            keys.append(key)
        return keys

    def namespace(self, tag: str) -> str:
        """Return a fresh model name under the run's namespace, tagged ``tag``."""
        return f"{self.model_name}-{tag}{next(self._tags)}"

    def label(self, key: Any) -> str:
        """Return the short label of a key in messages (``k3``), or its repr if the suite did not make it."""
        return self._labels.get(key, repr(key)) if isinstance(key, str) else repr(key)

    def show(self, value: Any) -> str:
        """Return ``value`` as messages show it: keys by label, tensors by size, infos by their fields."""
        if value is None:
            return "None"
        if isinstance(value, str):
            return self.label(value)
        if isinstance(value, torch.Tensor):
            if value.dim() == 1 and not value.is_floating_point() and value.dtype != torch.bool:
                return f"<{value.numel()} host slots>"  # host indices are 1-D integer tensors
            return f"<tensor {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}>"
        if hasattr(value, "kv_buffer") and hasattr(value, "page_size"):
            return f"<host pool of {getattr(value, 'page_count', '?')} pages>"
        if isinstance(value, SequenceType) and all(isinstance(item, str) for item in value):
            labels = [self.label(item) for item in value]
            if len(labels) > 6:
                return f"[{', '.join(labels[:3])}, ..., {labels[-1]}] ({len(labels)} keys)"
            return f"[{', '.join(labels)}]"
        if hasattr(value, "prefix_keys"):
            return (
                f"{type(value).__name__}(prefix_keys={self.show(value.prefix_keys)}, "
                f"extra_info={getattr(value, 'extra_info', None)!r})"
            )
        if hasattr(value, "hit_policy") and hasattr(value, "name"):
            return (
                f"PoolTransfer({getattr(value.name, 'value', value.name)}, keys={self.show(value.keys)}, "
                f"{getattr(value.hit_policy, 'value', value.hit_policy)})"
            )
        if isinstance(value, (list, tuple)):
            if len(value) > 6:
                return "[" + ", ".join(self.show(item) for item in value[:3]) + f", ...] ({len(value)} items)"
            return "[" + ", ".join(self.show(item) for item in value) + "]"
        text = repr(value)
        return text if len(text) <= 120 else text[:117] + "..."

    def describe_call(self, function: Any, args: Sequence[Any], kwargs: Optional[dict[str, Any]] = None) -> str:
        """Return ``name(arguments)`` as messages show a call."""
        return self.describe_named(getattr(function, "__name__", "call"), args, kwargs)

    def describe_named(self, name: str, args: Sequence[Any], kwargs: Optional[dict[str, Any]] = None) -> str:
        """Return ``name(arguments)`` with the arguments as messages show them."""
        parts = [self.show(argument) for argument in args]
        parts += [f"{key}={self.show(value)}" for key, value in (kwargs or {}).items()]
        return f"{name}({', '.join(parts)})"
