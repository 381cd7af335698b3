"""Placeholder, replaced once the reference controller is available."""

from __future__ import annotations

__all__ = ["check_reference_controller"]


def check_reference_controller() -> list:
    """Exercise the reference controller (not yet available)."""
    raise NotImplementedError("the reference controller is not available yet")
