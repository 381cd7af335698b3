"""Planted backends only the engine tier's hybrid scenarios catch (SGLang drives them through its HybridCacheController).

Imported only inside a release's run, as a dynamic backend (``module_path`` ``tests.sglang.planted_hybrid``):

- ``MixesWindowPages``: its ``batch_set_v2`` files a TRAILING_PAGES transfer's pages against its keys
  in reverse order (the window's first page under its last key): every page is present, so the hit
  query finds the window, but the window read loads other bytes. The MHA scenarios never call v2.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from hicache_contracts.models import pool_value
from hicache_reference.sglang_adapter import SGLangMemoryBackend

__all__ = ["MixesWindowPages"]


class MixesWindowPages(SGLangMemoryBackend):
    """Writes a trailing window's pages against its keys in reverse order."""

    def batch_set_v2(self, transfers: list, extra_info: Optional[Any] = None) -> Any:
        mixed = []
        for transfer in transfers or []:
            if pool_value(getattr(transfer, "hit_policy", "")) == "trailing_pages" and transfer.keys:
                transfer = copy.copy(transfer)
                transfer.keys = list(reversed(transfer.keys))
            mixed.append(transfer)
        return super().batch_set_v2(mixed, extra_info=extra_info)
