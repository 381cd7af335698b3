"""The SGLang releases the contract is pinned to: one list, in one place.

Adding a release is one line here, then fixing what its tests reveal. The list
is ordered oldest first; ``LATEST_RELEASE`` is the one the contract models
cover completely and the default when nothing else decides.
"""

from __future__ import annotations

__all__ = ["LATEST_RELEASE", "SGLANG_RELEASES", "UnknownReleaseError", "check_release", "release_key"]

SGLANG_RELEASES: tuple[str, ...] = ("0.5.20", "0.5.21", "0.5.22", "0.5.23")
"""Pinned SGLang releases, oldest first."""

LATEST_RELEASE: str = SGLANG_RELEASES[-1]
"""The newest pinned release: the models cover it field for field."""


class UnknownReleaseError(ValueError):
    """A release was named that the project does not pin."""


def release_key(version: str) -> tuple[int, ...]:
    """Return a version string as a tuple of ints, for ordering (``"0.5.21"`` → ``(0, 5, 21)``)."""
    parts = version.strip().split("+", 1)[0].split(".")
    try:
        return tuple(int(part) for part in parts)
    except ValueError:
        raise UnknownReleaseError(
            f"sglang version {version!r}: expected numbers separated by dots, e.g. 0.5.23"
        ) from None


def check_release(version: str) -> str:
    """Return ``version`` if it is pinned, else raise UnknownReleaseError naming the pinned list."""
    if version not in SGLANG_RELEASES:
        raise UnknownReleaseError(
            f"sglang version {version!r} is not a pinned release; pinned: {', '.join(SGLANG_RELEASES)}"
        )
    return version
