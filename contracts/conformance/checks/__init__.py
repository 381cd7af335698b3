"""The vendor suite's checks, one module per level or subject; importing this package registers them.

``MODULES`` is the registration order, and so the order among checks of one tier and level
(``framework.ordered_checks`` sorts by tier, then by the level of a check's first clause, then by it).
The backdoor checks come last: they need the hooks a backend's fixture may offer.
"""

from __future__ import annotations

import importlib

__all__ = ["MODULES"]

MODULES: tuple[str, ...] = (
    "concurrency",
    "hit_threads",
    "core_hits",
    "core_pages",
    "core_upkeep",
    "engine_calls",
    "namespacing",
    "format_guard",
    "prefix",
    "stateful",
    "v1",
    "v2",
    "backdoor",
)
"""The check modules of this package, in registration order."""

for _name in MODULES:
    importlib.import_module(f"{__name__}.{_name}")
