"""Planted bugs that only one check catches: for checks whose other planted bugs some other check sees too.

``SINGLE`` maps each backend to the one check that must catch it, and no other.
"""

from __future__ import annotations

from hicache_spec import STORAGE_BATCH_SIZE
from tests.conformance.correct_backend import CorrectBackend


class FullBatchOfUnknownKeysHitsOnce(CorrectBackend):
    """A full batch of never-written keys counts one page (BE-2): a filter's false positive on its first key."""

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        if count == 0 and len(keys) == STORAGE_BATCH_SIZE and not any(self.exists(key) for key in keys):
            return 1
        return count


class CloseDropsThePages(CorrectBackend):
    """close() deletes what the instance wrote (NS-7): the pages do not survive a restart."""

    def close(self):
        self.clear()


class RootPrefixCapsTheCount(CorrectBackend):
    """With the prefix at the root ([]) batch_exists counts at most 2 pages (PFX-1): an index keyed by prefix
    that holds only the first batch written under []."""

    def batch_exists(self, keys, extra_info=None):
        count = super().batch_exists(keys, extra_info)
        prefix = getattr(extra_info, "prefix_keys", None)
        return min(count, 2) if prefix is not None and len(prefix) == 0 else count


SINGLE: dict[type, str] = {
    FullBatchOfUnknownKeysHitsOnce: "batch_exists_counts_the_leading_run",
    CloseDropsThePages: "pages_survive_a_rebuild",
    RootPrefixCapsTheCount: "prefix_states_none_empty_and_list_all_work",
}
