"""What the recorder's prefix-snapshot tests record through: SGLang's list-prefix extra info and a backend that hits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class ListExtraInfo:
    """Shaped like SGLang's HiCacheStorageExtraInfo: a mutable list prefix."""

    prefix_keys: Optional[list] = None
    extra_info: Optional[dict] = None


class Answers:
    """A backend whose hit query finds every key."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        return len(keys)
