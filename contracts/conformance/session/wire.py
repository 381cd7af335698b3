"""The objects handed to the backend: SGLang's own when SGLang is importable, else the contract models."""

from __future__ import annotations

import importlib
from typing import Any, Optional, Sequence

import torch

from hicache_contracts.interop import SGLANG_STORAGE_MODULE, to_sglang
from hicache_contracts.models import HiCacheStorageExtraInfo, PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.prefix_keys import PageKeys
from hicache_contracts.sglang_release import resolve_release

__all__ = ["PLACEHOLDER", "POOL_POLICIES", "Wire", "sglang_module"]

PLACEHOLDER = "__placeholder__"
"""The key SGLang's tree puts in a trailing pool's hit-query transfer for each window page (0.5.20-0.5.23)."""

POOL_POLICIES = {PoolName.SWA: PoolHitPolicy.TRAILING_PAGES}
"""The suite's pools whose hit policy is not ALL_PAGES: swa plays the trailing pool (SGLang's sliding-window
state), the indexer a KV-derived all-pages pool."""


class Wire:
    """Turns contract models into what the backend receives (``HiCacheStorageConfig``, ``PoolTransfer``, ...)."""

    def __init__(self, sglang: Any) -> None:
        self.sglang = sglang
        """SGLang's storage module when importable (its objects are handed to the backend), else None."""

    def form(self, model: Any) -> Any:
        """Return ``model`` as the backend receives it: SGLang's object when SGLang is importable."""
        if self.sglang is None or model is None:
            return model
        return to_sglang(model, storage_module=self.sglang)

    def release_has_fields(self, fields: Any) -> bool:
        """Whether the SGLang release whose objects the backend receives has every config field in ``fields``.

        Always true for the contract models; an older release lacks fields (``dp_rank`` before 0.5.21).
        """
        if self.sglang is None:
            return True
        known = getattr(self.sglang.HiCacheStorageConfig, "__dataclass_fields__", None)
        return known is None or all(name in known for name in fields)

    def pool_name(self, name: PoolName) -> Any:
        """Return ``name`` as SGLang's ``PoolName`` when SGLang is importable, else the contract enum."""
        return name if self.sglang is None else self.sglang.PoolName(name.value)

    def info(self, prefix_keys: Any = None, extra_info: Any = None) -> Any:
        """Return an extra info with these fields, in the backend's wire form."""
        return self.form(HiCacheStorageExtraInfo(prefix_keys=prefix_keys, extra_info=extra_info))

    def transfer(
        self,
        name: PoolName,
        keys: Sequence[str],
        host_indices: Optional[torch.Tensor] = None,
        *,
        policy: Optional[PoolHitPolicy] = None,
        derived: bool = False,
        read: bool = False,
    ) -> Any:
        """Return a ``PoolTransfer`` in the backend's wire form; ``derived`` makes it a KV-derived sidecar.

        A KV-derived transfer is marked so (``indices_from_pool`` KV) in queries and writes; a ``read`` of one is
        sent as SGLang 0.5.20-0.5.23 send it with each KV slice, unmarked, over the KV pages' slots
        (``CacheController._page_transfer_kv_batch``): the caller gives those slots.

        ``policy`` defaults to the pool's own (``POOL_POLICIES``): SGLang sends a pool's policy, from its
        pool spec, with every query, write and read of it, so a backend may file pages by it.

        A transfer without host indices that is not a read is part of a hit query (``batch_exists_v2``)
        and goes out as every pinned release's tree sends it (``unified_cache/components/swa.py``,
        ``mamba.py``, ``_build_sidecar_transfers``): a TRAILING_PAGES pool's keys are ``PLACEHOLDER``
        once per window page (the real trailing keys are filled in only for the read), a KV-derived
        pool's keys are None; ``keys`` gives the window's length.
        """
        policy = POOL_POLICIES.get(name, PoolHitPolicy.ALL_PAGES) if policy is None else policy
        sent: Optional[PageKeys] = PageKeys(tuple(keys))
        if host_indices is None and not read:  # a hit query, as SGLang's tree builds it (CONTRACT §9)
            if derived:
                sent = None  # a KV-derived pool's query carries no keys: it is the KV chain's
            elif policy == PoolHitPolicy.TRAILING_PAGES:
                sent = PageKeys((PLACEHOLDER,) * len(keys))  # the window's size; the keys are the chain's last
        model = PoolTransfer(
            name=name,
            keys=sent,
            host_indices=host_indices,
            hit_policy=policy,
            indices_from_pool=PoolName.KV if derived and not read else None,
        )
        return self.form(model)


def sglang_module(choice: Optional[str]) -> Any:
    """Return the storage module of the release ``choice`` selects (see ``SuiteOptions.sglang_version``), or None.

    Raises ReleaseError when the choice cannot be honoured (the CLI checks it before running).
    """
    if resolve_release(choice) is None:
        return None
    return importlib.import_module(SGLANG_STORAGE_MODULE)
