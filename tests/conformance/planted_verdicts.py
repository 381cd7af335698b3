"""Backends that show whose failure a finding is: a defect must fail the clause it breaks, and no other.

Each planted backend here breaks one clause (or none) in a way that used to be reported on another clause:
``test_one_cause.py`` runs the suite on each and names the only clauses it may fail.
"""

from __future__ import annotations

import time
from typing import Any

from tests.conformance.correct_backend import CorrectBackend


class RaisesOnAnEmptyV1Write(CorrectBackend):
    """Planted (BE-14): batch_set_v1 of no keys raises, where it must return []. SGLang never writes an empty
    batch, so only BE-14's own empty-input case sees it; BE-2's setup must not report it as a miscount."""

    def batch_set_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list[bool]:
        if not keys:
            raise ValueError("nothing to write")
        return super().batch_set_v1(keys, host_indices, extra_info)


class AnswersAllOrNothing(CorrectBackend):
    """Correct: a read of a batch with a miss in it loads nothing (every result False). SGLang keeps only the
    leading run of hits, so this loses hits, never bytes; no set lied, so no BE-17 (nor BE-9) failure."""

    def batch_get_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list[bool]:
        if not all(self.exists(key) for key in keys):
            return [False] * len(keys)
        return super().batch_get_v1(keys, host_indices, extra_info)

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        if not all(self.exists(key) for key in keys):
            return [None] * len(keys)
        return super().batch_get(keys, target_locations, target_sizes)


class RaisesOnAPartialHit(CorrectBackend):
    """Planted (BE-4): a legacy batch read of stored and missing keys together raises, where each missing key
    must be a miss; the read's own clause (BE-9, result shapes) is not what it breaks."""

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        present = [self.exists(key) for key in keys]
        if any(present) and not all(present):
            raise KeyError(f"{present.count(False)} of {len(keys)} keys are missing")
        return super().batch_get(keys, target_locations, target_sizes)


class RefusesMla(CorrectBackend):
    """Refuses to be built for an MLA model, by design (a store for MHA KV only); declares nothing."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        if getattr(storage_config, "is_mla_model", False):
            raise ValueError("this store serves MHA models only")
        super().__init__(storage_config, kwargs)


class DeclaresNoMla(RefusesMla):
    """Correct: refuses MLA by design, and says so (``hicache_not_supported``)."""

    hicache_not_supported = ("mla",)


class DeclaresNoPageFirst(CorrectBackend):
    """Correct: does not serve the page_first host pool layout, and says so."""

    hicache_not_supported = ("page_first",)


class DeclaresAnUnknownConfiguration(CorrectBackend):
    """Declares a configuration the suite does not know."""

    hicache_not_supported = ("fp8",)


class TwoMillisecondLookups(CorrectBackend):
    """Correct, and slow: every lookup takes 2 ms, as a networked store's may."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        time.sleep(0.002)
        return super().batch_exists(keys, extra_info)
