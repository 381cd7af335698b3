"""The legacy generation of the interface (get / set / exists and their batch forms) over the page IO.

Also the key check every generation shares (KEY-2). Clauses: BE-4, BE-5,
BE-6, BE-9, BE-10, BE-13; see docs/backends.md.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import validate_page_keys
from hicache_reference.backends.host_bytes import tensor_bytes
from hicache_reference.backends.page_io import HostPageIO
from hicache_spec import KV

__all__ = ["LegacyCalls"]


class LegacyCalls(HostPageIO):
    """``exists``, ``batch_exists``, ``get``, ``set``, ``batch_get``, ``batch_set``; the key check (KEY-2)."""

    # ============================================================ boundary check
    def _checked_keys(self, keys: Any) -> list[str]:
        """Return ``keys`` as a new list, or raise ContractViolation naming the bad key (KEY-2)."""
        validate_page_keys(keys, field=f"{type(self).__name__}.keys")
        return list(keys)

    # ============================================================ legacy generation
    def exists(self, key: str) -> bool:
        """Return whether the KV page of ``key`` is stored whole. Clauses: BE-4, BE-5, BE-13, NS-6."""
        (key,) = self._checked_keys([key])
        if self._closed:
            return False
        return self._present(KV, [key])[0]

    def batch_exists(self, keys: list[str], extra_info: Optional[Any] = None) -> int:
        """Return the leading run of keys whose KV page is stored whole. Clauses: BE-2, BE-3, BE-8, BE-13."""
        keys = self._checked_keys(keys)
        if self._closed or not keys:
            return 0
        present = self._present(KV, keys)
        run = 0
        for flag in present:
            if not flag:
                break
            run += 1
        return run

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Optional[torch.Tensor]:
        """Return the KV page of ``key`` as a flat tensor, or None. Clauses: BE-4, BE-5, BE-9, BE-13.

        A tensor ``target_location`` receives the bytes (only once they all
        arrived) and is returned. Without one, the page comes back in the
        registered pool's dtype, or as raw uint8 when no pool is registered.
        """
        (key,) = self._checked_keys([key])
        if self._closed:
            return None
        return self._get_one(key, target_location)

    def _get_one(self, key: str, target: Any) -> Optional[torch.Tensor]:
        page_format = self._formats.get(KV)
        name = self._name(key)
        if isinstance(target, torch.Tensor):
            size = target.numel() * target.element_size()
        elif page_format is not None:
            size = page_format.byte_count
        else:
            size = self._guarded(self._object_size, None, name)
        if not isinstance(size, int) or size <= 0:
            self._counters.add(read_misses=1)
            return None
        staging = bytearray(size)
        if self._guarded(self._read_object_into, False, name, memoryview(staging)) is not True:
            self._counters.add(read_misses=1)
            return None
        if isinstance(target, torch.Tensor):
            # Counted as read only once the page is in the target (BE-15): a target that refuses it is a miss.
            if not self._guarded(self._copy_into_target, False, target, staging):
                self._counters.add(read_misses=1)
                return None
            self._counters.add(pages_read=1, bytes_read=size)
            return target
        self._counters.add(pages_read=1, bytes_read=size)
        dtype = page_format.dtype if page_format is not None else torch.uint8
        return torch.frombuffer(staging, dtype=dtype)

    @staticmethod
    def _copy_into_target(target: torch.Tensor, staging: bytearray) -> bool:
        """Copy a whole page from ``staging`` into a legacy get's target tensor (of exactly the page's size)."""
        target.copy_(torch.frombuffer(staging, dtype=target.dtype).view(target.shape))
        return True

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        """Store ``value`` (a tensor) as the KV page of ``key``. Clauses: BE-5, BE-6, BE-7, BE-9.

        With a registered pool the value must be exactly one page; otherwise
        the write is refused (False), since a short object is a miss (BE-13).
        """
        (key,) = self._checked_keys([key])
        if self._closed:
            return False
        return self._set_one(key, value)

    def _set_one(self, key: str, value: Any) -> bool:
        if not isinstance(value, torch.Tensor):
            self._counters.add(write_failures=1)
            return False
        raw = self._guarded(lambda: tensor_bytes(value.detach().cpu().contiguous()), None)
        page_format = self._formats.get(KV)
        if raw is None or len(raw) == 0 or (page_format is not None and len(raw) != page_format.byte_count):
            self._counters.add(write_failures=1)
            return False
        name = self._name(key)
        written = self._guarded(self._write_object, False, name, raw, name) is True
        if written:
            self._counters.add(pages_written=1, bytes_written=len(raw))
        else:
            self._counters.add(write_failures=1)
        return written

    def batch_get(self, keys: list[str], target_locations: Any = None, target_sizes: Any = None) -> list:
        """Return one tensor-or-None per key, in key order. Clauses: BE-4, BE-9, BE-10."""
        keys = self._checked_keys(keys)
        targets = list(target_locations) if target_locations is not None else [None] * len(keys)
        if len(targets) != len(keys):
            raise ContractViolation(
                f"{type(self).__name__}.target_locations", "must hold one entry per key", len(targets), "BE-9"
            )
        if self._closed:
            return [None] * len(keys)
        return [self._get_one(key, target) for key, target in zip(keys, targets)]

    def batch_set(
        self, keys: list[str], values: Any = None, target_locations: Any = None, target_sizes: Any = None
    ) -> bool:
        """Store one value per key; True only if every page was stored. Clauses: BE-6, BE-9, BE-10."""
        keys = self._checked_keys(keys)
        values = list(values) if values is not None else [None] * len(keys)
        if len(values) != len(keys):
            raise ContractViolation(f"{type(self).__name__}.values", "must hold one value per key", len(values), "BE-9")
        if self._closed:
            return False
        results = [self._set_one(key, value) for key, value in zip(keys, values)]
        return all(results)
