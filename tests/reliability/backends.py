"""Backends the reliability tests hand to ``hicache-conform run`` by name."""

from __future__ import annotations

import threading
from typing import Any, Optional

from hicache_reference.backends import FileBackend


class RefusesToBuild:
    """Raises on construction, showing the config it was given (as a vendor's constructor may)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        raise RuntimeError(f"cannot connect with {storage_config.extra_config!r}")


class InterruptedFileBackend(FileBackend):
    """A file backend whose ``INTERRUPT_AT``-th ``batch_set_v1`` in the main thread raises KeyboardInterrupt once
    its pages are written, as a Ctrl-C landing in the middle of a check would."""

    INTERRUPT_AT = 12
    writes = 0

    def batch_set_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        result = super().batch_set_v1(keys, host_indices, extra_info)
        if threading.current_thread() is threading.main_thread():
            type(self).writes += 1
            if type(self).writes == self.INTERRUPT_AT:
                raise KeyboardInterrupt
        return result
