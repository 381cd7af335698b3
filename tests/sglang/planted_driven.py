"""Backends for the engine-built runs: each built, fed and called as the loaded SGLang release would.

Imported only inside a release's run (this module imports ``sglang`` at its top, as many real
backends do):

- ``ImportsSGLang``: the reference memory backend in a module that imports SGLang first; loads
  with ``--sglang-version V`` (the release is on the path before the module is imported);
- ``InstallsSignalHandler``: its constructor installs a signal handler, as SGLang's own 3FS
  backend does; Python allows that only on the main thread, where SGLang builds backends;
- ``LegacyIgnoresRank``: configured without ``interface_v1``, so SGLang drives its legacy
  ``batch_get``/``batch_set``; those file pages under the model name only, ignoring the TP rank
  (its v1 methods are correct, so a suite that drives v1 would miss it): NS-1 fails;
- ``WantsSGLangMHAPool``: refuses a KV or SWA host pool of an MHA model that is not shaped as
  SGLang's MHA host pool (separate ``k_buffer`` / ``v_buffer``): passes when the pools are the
  release's own (the stand-in's SWA pool is MLA-shaped);
- ``LooksUpTrailingKeys``: answers ``batch_exists_v2`` by looking up each transfer's ``keys``,
  which SGLang's hit query fills with placeholders (trailing pools) or None (KV-derived pools).
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Optional

import sglang.srt.mem_cache.hicache_storage  # noqa: F401  (a real backend imports SGLang first)

from hicache_reference.sglang_adapter import SGLangMemoryBackend

__all__ = ["ImportsSGLang", "InstallsSignalHandler", "LegacyIgnoresRank", "LooksUpTrailingKeys", "WantsSGLangMHAPool"]


class ImportsSGLang(SGLangMemoryBackend):
    """The reference memory backend, in a module that imports SGLang at its top."""


class InstallsSignalHandler(SGLangMemoryBackend):
    """Installs a SIGUSR1 handler in its constructor (``signal.signal`` raises ValueError off the main thread)."""

    built_on: list = []

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        type(self).built_on.append(threading.current_thread().name)
        self._previous = signal.signal(signal.SIGUSR1, lambda number, frame: None)
        super().__init__(storage_config, extra_config)

    def close(self) -> None:
        if threading.current_thread() is threading.main_thread() and self._previous is not None:
            signal.signal(signal.SIGUSR1, self._previous)
            self._previous = None
        parent = getattr(super(), "close", None)
        if callable(parent):
            parent()


_SHARED: dict = {}
"""``LegacyIgnoresRank``'s store: (model name, key) -> page; the TP rank is not part of it."""


class LegacyIgnoresRank(SGLangMemoryBackend):
    """Its legacy calls file pages under (model name, key): two TP ranks overwrite each other's pages (NS-1)."""

    hicache_levels = ("core", "legacy", "namespacing")  # type: ignore[assignment]  # fewer than MemoryBackend's

    def _slot(self, key: str) -> tuple:
        return (getattr(self.storage_config, "model_name", None), key)

    def exists(self, key: str) -> bool:
        return self._slot(key) in _SHARED

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        run = 0
        for key in keys:
            if self._slot(key) not in _SHARED:
                break
            run += 1
        return run

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        page = _SHARED.get(self._slot(key))
        if page is None:
            return None
        if target_location is not None:
            target_location.reshape(-1).copy_(page.reshape(-1).view(target_location.dtype))
            return target_location
        return page.clone()

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        if value is None:
            return False
        _SHARED[self._slot(key)] = value.detach().clone().reshape(-1)
        return True

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        targets = target_locations if target_locations is not None else [None] * len(keys)
        return [self.get(key, target) for key, target in zip(keys, targets)]

    def batch_set(self, keys: list, values: Any = None, target_locations: Any = None, target_sizes: Any = None) -> bool:
        return all(self.set(key, value) for key, value in zip(keys, values or []))

    def clear(self) -> None:
        model = getattr(self.storage_config, "model_name", None)
        for slot in [slot for slot in _SHARED if slot[0] == model]:
            del _SHARED[slot]
        super().clear()


class WantsSGLangMHAPool(SGLangMemoryBackend):
    """Refuses a KV host pool without SGLang's MHA shape (``k_buffer`` and ``v_buffer``) for an MHA model."""

    def _require_mha(self, pool: Any, what: str) -> None:
        if not getattr(self.storage_config, "is_mla_model", False):
            for name in ("k_buffer", "v_buffer"):
                if getattr(pool, name, None) is None:
                    raise TypeError(f"an MHA model's {what} must have {name}, as SGLang's MHATokenToKVPoolHost")

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self._require_mha(mem_pool_host, "KV host pool")
        super().register_mem_pool_host(mem_pool_host)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        name = getattr(host_pool_name, "value", host_pool_name)
        if name in ("kv", "swa"):
            self._require_mha(host_pool, f"{name} host pool")
        super().register_mem_host_pool_v2(host_pool, host_pool_name)


class LooksUpTrailingKeys(SGLangMemoryBackend):
    """Answers a trailing pool's hit from ``transfer.keys`` (SGLang sends placeholders there): never a hit."""

    def batch_exists_v2(self, keys: list, pool_transfers: Optional[list] = None, extra_info: Optional[Any] = None):
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)
        for transfer in pool_transfers or []:
            if transfer.keys is None or any(self._slot_missing(transfer, key) for key in transfer.keys):
                return type(result)(kv_hit_pages=0, extra_pool_hit_pages={})
        return result

    def _slot_missing(self, transfer: Any, key: str) -> bool:
        return not self.exists(key)


class ShiftsReads(SGLangMemoryBackend):
    """Its ``batch_get_v1`` loads each page one page further along the host slots than asked."""

    def batch_get_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list:
        page = self.mem_pool_host.page_size
        return super().batch_get_v1(keys, host_indices + page, extra_info)
