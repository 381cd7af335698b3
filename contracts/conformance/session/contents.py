"""The pages the suite writes: random bytes fixed per seed, key and variant; and where in a host pool they go."""

from __future__ import annotations

import hashlib
import random
from typing import Optional

import torch

from hicache_contracts.conformance.session.pools import ConformancePool, pages_equal

__all__ = ["Pages"]


class Pages:
    """The run's page contents and the random choices of its checks, both from ``seed``."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        """The seed of every page and random choice."""
        self.rng = random.Random(seed)
        """Random choices of the checks."""
        self._pages: dict[tuple[str, int, torch.dtype, int], torch.Tensor] = {}

    def page_for(self, key: str, pool: ConformancePool, variant: int = 0) -> torch.Tensor:
        """Return the page the suite stores under ``key`` in ``pool``: random, but fixed per key and variant."""
        cache_key = (key, pool.page_element_count, pool.dtype, variant)
        page = self._pages.get(cache_key)
        if page is None:
            digest = hashlib.sha256(f"{self.seed}/{key}/{pool.page_element_count}/{variant}".encode()).digest()
            generator = torch.Generator().manual_seed(int.from_bytes(digest[:7], "little"))
            page = pool.random_page(generator)
            self._pages[cache_key] = page
        return page

    def same_page(self, key: str, pool: ConformancePool, page: Optional[torch.Tensor], variant: int = 0) -> bool:
        """Whether ``page`` holds exactly the suite's page for ``key``."""
        return pages_equal(self.page_for(key, pool, variant), page)

    def spread(self, count: int, *, start: int = 0, stride: int = 1) -> list[int]:
        """Return ``count`` page numbers ``start, start + stride, ...`` in a random order."""
        pages = [start + index * stride for index in range(count)]
        self.rng.shuffle(pages)
        return pages
