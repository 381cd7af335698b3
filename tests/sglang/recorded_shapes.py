"""A reference backend that notes the shape of every storage call a release's controllers make on it.

Loaded by the release's own ``StorageBackendFactory`` from a dynamic-backend config naming
``tests.sglang.recorded_shapes:NotedMemoryBackend``; ``SHAPES`` holds what it received
(``hicache_contracts.conformance.session.call_shapes``).
"""

from __future__ import annotations

from hicache_contracts.conformance.session.call_shapes import CallShape, recording_class
from hicache_reference.sglang_adapter import SGLangMemoryBackend

SHAPES: list[CallShape] = []
"""Every call's shape, in the order the engine made them."""

NotedMemoryBackend = recording_class(SGLangMemoryBackend, SHAPES)
