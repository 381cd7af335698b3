"""Host pools built from a pinned SGLang release's own host-pool classes, on CPU, with the suite's hooks.

With a release importable, the suite registers with a backend the host pools that release builds:
``MHATokenToKVPoolHost`` for an MHA model (separate ``k_buffer`` / ``v_buffer``, its layer-first page
ranges k0, v0, k1, v1, ...), ``MLATokenToKVPoolHost`` for an MLA model, in the layout asked
(``layer_first``, ``page_first``, ``page_first_direct``), each over a CPU device pool of the release
(``MHATokenToKVPool`` / ``MLATokenToKVPool``). Sidecar pools are built as the release builds them
for the model: an MHA model's SWA pool is an MHA host pool (``pool_host/mha.py``), an MLA model's an
MLA one. The constructors differ between releases: 0.5.20-0.5.22 take the device pool, 0.5.23 the
device pool's buffer info with ``device_capacity_tokens`` and the layer range.

Each pool is an instance of a subclass of the release's class with ``PoolHooks`` mixed in first, so
the suite can make its page helpers fail or hold (BE-5, BE-7) and reads and writes pages itself
through the release's own helpers (``peek`` / ``poke``).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import torch

from hicache_spec import KV
from hicache_contracts.conformance.session.pools import PoolHooks

__all__ = ["LAYOUTS", "release_host_pool", "release_mamba_host_pool", "release_pools_available"]

LAYOUTS: tuple[str, ...] = ("layer_first", "page_first", "page_first_direct")
"""The host-pool layouts every pinned release's MHA and MLA host pools build on CPU."""

HOST_TO_DEVICE_RATIO = 2.0
"""Host tokens per device token (the host pool's size is this ratio of its device pool's)."""


class _SuiteAccess:
    """What the suite reads of a pool besides SGLang's page helpers (``HostPagePool`` has the same names)."""

    size: int
    page_size: int

    @property
    def page_element_count(self) -> int:
        """Elements of one flat page (what ``get_dummy_flat_data_page`` returns)."""
        page: torch.Tensor = super().get_dummy_flat_data_page()  # type: ignore[misc]
        return int(page.numel())

    @property
    def page_count(self) -> int:
        """Whole pages the pool holds."""
        return int(self.size) // int(self.page_size)

    @property
    def page_bytes(self) -> int:
        """Bytes of one page."""
        page: torch.Tensor = super().get_dummy_flat_data_page()  # type: ignore[misc]
        return int(page.numel() * page.element_size())


_CLASSES: dict[type, type] = {}
_AVAILABLE: dict[str, bool] = {}


def release_pools_available() -> bool:
    """Whether the loaded SGLang has its host-pool modules (a stand-in holding only the storage module has not)."""
    module = importlib.import_module("sys").modules.get("sglang")
    key = str(getattr(module, "__file__", None))
    if key not in _AVAILABLE:
        try:
            importlib.import_module("sglang.srt.mem_cache.memory_pool")
            importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
            importlib.import_module("sglang.srt.mem_cache.pool_host.mla")
        except ImportError:
            _AVAILABLE[key] = False
        else:
            _AVAILABLE[key] = True
    return _AVAILABLE[key]


def _hooked(cls: type, kind: str) -> type:
    """Return the release class ``cls`` with the suite's hooks mixed in (one subclass per class)."""
    made = _CLASSES.get(cls)
    if made is None:

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            cls.__init__(self, *args, **kwargs)  # type: ignore[misc]
            self._init_hooks()

        made = type(cls.__name__, (PoolHooks, _SuiteAccess, cls), {"__init__": __init__, "__module__": __name__})
        _CLASSES[cls] = made
    return made


def release_host_pool(
    *,
    kind: str,
    layout: str,
    pages: int,
    page_size: int,
    layer_num: int,
    head_num: int,
    head_dim: int,
    dtype: torch.dtype = torch.float16,
    label: str = KV,
) -> Any:
    """Return the loaded release's host pool for ``kind`` (``mha`` / ``mla``) with at least ``pages`` pages, on CPU.

    Raises ValueError naming the field for a kind or layout no release builds.
    """
    if kind not in ("mha", "mla"):
        raise ValueError(f"release_host_pool.kind: must be 'mha' or 'mla' (got {kind!r})")
    if layout not in LAYOUTS:
        raise ValueError(f"release_host_pool.layout: must be one of {', '.join(LAYOUTS)} (got {layout!r})")
    memory_pool = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    device_tokens = -(-pages * page_size // int(HOST_TO_DEVICE_RATIO))
    device_tokens = -(-device_tokens // page_size) * page_size
    last = layer_num - 1
    if kind == "mha":
        device = memory_pool.MHATokenToKVPool(
            device_tokens, page_size, dtype, head_num, head_dim, layer_num, "cpu", False, start_layer=0, end_layer=last
        )
        host_class = importlib.import_module("sglang.srt.mem_cache.pool_host.mha").MHATokenToKVPoolHost
        extra: dict[str, Any] = {}
    else:
        device = memory_pool.MLATokenToKVPool(
            device_tokens, page_size, dtype, head_dim, head_dim // 2 or 1, layer_num, "cpu", False, 0, last
        )
        host_class = importlib.import_module("sglang.srt.mem_cache.pool_host.mla").MLATokenToKVPoolHost
        extra = {"target_layer_num": layer_num}
    cls = _hooked(host_class, kind)
    if "buffer_info" in inspect.signature(host_class.__init__).parameters:  # 0.5.23
        pool = cls(
            device.get_device_pool_infos()[0].buffer_info,
            HOST_TO_DEVICE_RATIO,
            0,
            page_size,
            layout,
            pin_memory=False,
            device_capacity_tokens=device.size,
            start_layer=0,
            end_layer=last,
            pool_label=label,
            **extra,
        )
    else:  # 0.5.20-0.5.22
        pool = cls(device, HOST_TO_DEVICE_RATIO, 0, page_size, layout, pin_memory=False, pool_label=label)
    pool.kind = kind
    pool.device_pool = device
    return pool


def release_mamba_host_pool(*, slots: int, layers: int = 2, layout: str = "page_first") -> Any:
    """Return the loaded release's Mamba host pool (``MambaPoolHost``, one state per page) over a CPU ``MambaPool``.

    The device pool holds ``slots`` states of a small Mamba2 model (``Mamba2CacheParams``); 0.5.20-0.5.21
    build the host pool from the device pool, 0.5.22+ from its buffer info with ``device_capacity``.
    Mamba host pools have no ``layer_first`` layout. Raises ValueError naming the field for another layout.
    """
    if layout not in LAYOUTS[1:]:
        raise ValueError(f"release_mamba_host_pool.layout: must be one of {', '.join(LAYOUTS[1:])} (got {layout!r})")
    mamba_utils = importlib.import_module("sglang.srt.configs.mamba_utils")
    memory_pool = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    host_class = importlib.import_module("sglang.srt.mem_cache.pool_host.mamba").MambaPoolHost
    shape = mamba_utils.Mamba2StateShape.create(
        tp_world_size=1, intermediate_size=16, n_groups=1, num_heads=2, head_dim=8, state_size=4, conv_kernel=4
    )
    params = mamba_utils.Mamba2CacheParams(
        shape=shape,
        dtype=mamba_utils.Mamba2StateDType(conv=torch.float16, temporal=torch.float32),
        layers=list(range(layers)),
    )
    device = memory_pool.MambaPool(
        size=slots, spec_state_size=0, cache_params=params, mamba_layer_ids=list(range(layers)), device="cpu"
    )
    if "buffer_info" in inspect.signature(host_class.__init__).parameters:  # 0.5.22+
        info = device.get_device_pool_infos()[0].buffer_info
        pool = host_class(info, HOST_TO_DEVICE_RATIO, 0, device_capacity=device.size, pin_memory=False, layout=layout)
    else:  # 0.5.20-0.5.21
        pool = host_class(device, HOST_TO_DEVICE_RATIO, 0, pin_memory=False, layout=layout)
    pool.device_pool = device
    return pool
