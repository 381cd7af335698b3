"""The installed version of the project, as reports and certification bundles state it."""

from __future__ import annotations

import importlib.metadata

__all__ = ["tool_version"]


def tool_version() -> str:
    """Return the installed version of the project (``0+unknown`` when it is not installed)."""
    try:
        return importlib.metadata.version("hicache-spec")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
