"""Names that moved to another package, still importable from their old home for one release (with a warning).

A module lists what moved and hands its ``__getattr__`` to ``moved_names``::

    __getattr__ = moved_names(__name__, {"run_reference_suite": "hicache_reference.main_job"})

The new home is imported by name (``importlib``) only when an old name is
used, so importing the old module never imports the new package: the
layering (``hicache_contracts`` below ``hicache_reference``) holds.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable, Mapping

__all__ = ["moved_names"]


def moved_names(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that serves each name in ``homes`` from its new module, warning once per use."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} moved to {home}.{name}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
