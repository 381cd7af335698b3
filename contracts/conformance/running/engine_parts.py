"""What the engine-driven tier's plain and hybrid controllers share: the pools' sizes, the waits, the stand-ins.

The tier (``engine_tier``) and its hybrid scenarios (``engine_hybrid`` over ``hybrid_engine``) build a
release's controller on CPU the same way: the project's smallest stand-ins for the token-to-KV allocator
and the process groups, ``torch.cpu`` as the controller's device module without a CUDA device, the in-tree
file backend's folder, one wait for a prefetch's final ack, and the SGLang functions that make a call.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from pathlib import Path
from queue import Empty
from typing import Any, Iterator, Optional

import torch

__all__ = [
    "EXTRA_PAGES",
    "FILE_DIR_ENV",
    "HOST_PAGES",
    "PAGE_SIZE",
    "STORED_PAGES",
    "WAIT_S",
    "Allocator",
    "await_prefetch",
    "callers",
    "cpu_device_module",
    "engine_process",
    "file_dir",
    "read_method",
]

WAIT_S = 60.0
"""How long one controller step may take (the storage threads poll their queues each second)."""
PAGE_SIZE = 4
"""Tokens per page of the tier's pools."""
STORED_PAGES = 150
"""Pages backed up per scenario: more than one storage batch (128 pages), so reads come in several slices."""
EXTRA_PAGES = 50
"""Pages a partial-hit prefetch asks for beyond the stored ones."""
HOST_PAGES = 1024
"""Pages of the host pool."""
FILE_DIR_ENV = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"
"""Where SGLang's in-tree file backend keeps its files (read when it is built)."""


class Allocator:
    """The token-to-KV allocator the controller asks for its device pool (``get_kvcache()``)."""

    def __init__(self, device_pool: Any) -> None:
        self.device_pool = device_pool

    def get_kvcache(self) -> Any:
        return self.device_pool


@contextlib.contextmanager
def engine_process(controller_module: Any, tp_rank: int = 0, tp_size: int = 1) -> Iterator[None]:
    """TP rank ``tp_rank`` of ``tp_size``, DP attention off, for building and attaching (the release's own override)."""
    runtime = importlib.import_module("sglang.srt.runtime_context")
    fields = getattr(runtime, "_PARALLEL_FIELDS", None) or runtime._parallel_fields()
    single = {
        "tp_rank": tp_rank,
        "tp_size": tp_size,
        "pp_rank": 0,
        "pp_size": 1,
        "attn_dcp_rank": 0,
        "attn_dcp_size": 1,
    }
    dp_attention = controller_module.is_dp_attention_enabled
    controller_module.is_dp_attention_enabled = lambda: False
    try:
        with runtime.get_parallel().override(**{name: value for name, value in single.items() if name in fields}):
            yield
    finally:
        controller_module.is_dp_attention_enabled = dp_attention


def cpu_device_module() -> None:
    """Without a CUDA device, point 0.5.20-0.5.22's controller and L2 modules at ``torch.cpu``."""
    if torch.cuda.is_available():
        return
    for name in ("sglang.srt.managers.cache_controller", "sglang.srt.mem_cache.l2_transfer"):
        with contextlib.suppress(ImportError):
            module: Any = importlib.import_module(name)
            module.device_module = torch.cpu


@contextlib.contextmanager
def file_dir(folder: Optional[str]) -> Iterator[None]:
    """SGLang's in-tree file backend keeps its files under ``folder`` while the backend is built."""
    saved = os.environ.get(FILE_DIR_ENV)
    if folder is not None:
        os.environ[FILE_DIR_ENV] = folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(FILE_DIR_ENV, None)
        else:
            os.environ[FILE_DIR_ENV] = saved


def await_prefetch(controller: Any, operation: Any) -> int:
    """Hand ``operation`` to the controller's prefetch thread; return the tokens its acks report loaded by the final
    ack (an ``AssertionError`` when none comes within ``WAIT_S``)."""
    controller.prefetch_buffer.put(operation)
    loaded: int = 0
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            ack = controller.ack_prefetch_queue.get(timeout=1)
        except Empty:
            continue
        if getattr(ack, "completed_tokens", None) is not None:
            loaded = ack.completed_tokens
        if getattr(ack, "completed_req", False):
            return loaded
    raise AssertionError(f"no final prefetch ack within {WAIT_S:g} s")


def callers(method: str) -> str:
    """The SGLang functions that call ``method`` on the backend, read from the loaded release's source."""
    from hicache_contracts.conformance.session.call_shapes import scan_release

    root = Path(importlib.import_module("sglang").__file__ or ".").resolve().parent.parent
    record = scan_release(root, "loaded")
    found = sorted({call["function"] for call in record["calls"] if call["method"] == method})
    return " / ".join(found) or "?"


def read_method(engine: Any) -> str:
    """The KV read the engine's controller makes: ``batch_get_v1`` (zero copy) or ``batch_get``."""
    return "batch_get_v1" if engine.controller.page_get_func.__name__ == "_page_get_zero_copy" else "batch_get"
