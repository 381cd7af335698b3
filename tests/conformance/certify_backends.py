"""In-test backends for certification: correct ones of every mode SGLang drives, and ones that cannot be certified.

``CorrectWithBackdoor`` (planted_backdoor) is the full backend; these drop
generations SGLang's base class leaves unimplemented, so that a backend
SGLang drives only through ``batch_get``/``batch_set`` (legacy), or through
v2 and the legacy calls, can show it certifies for what it is driven through.
"""

from __future__ import annotations

from tests.conformance.helpers import UnimplementedV1V2
from tests.conformance.planted_backdoor import CorrectWithBackdoor


class UnimplementedV1:
    """SGLang's base-class stubs of the v1 data methods: they only raise NotImplementedError (mix in first)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError


class LegacyOnlyWithBackdoor(UnimplementedV1V2, CorrectWithBackdoor):
    """Implements the legacy generation only (SGLang's HiCacheFile shape before v2), with the backdoor hooks."""


class LegacyAndV2WithBackdoor(UnimplementedV1, CorrectWithBackdoor):
    """Implements the legacy and v2 generations, no v1 (SGLang's HiCacheFile shape from 0.5.22), with the hooks."""
