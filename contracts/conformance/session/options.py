"""What a conformance run is told: the profile (how hard to look) and the options (what to build).

Profiles size the work, not the rules: every profile checks every clause of
the claimed levels; a larger one tries more examples, longer state-machine
runs and more concurrent operations.

    smoke       a few examples per property; meant for CI on every change
    standard    the default; the numbers a vendor should publish
    exhaustive  many more examples and operations, for a nightly run
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from hicache_contracts.errors import bad_value
from hicache_contracts.host_pool import KINDS, LAYOUTS
from hicache_contracts.conformance.levels import BACKEND_LEVELS
from hicache_spec import STORAGE_BATCH_SIZE
from hicache_spec.releases import SGLANG_RELEASES

__all__ = ["MAX_MODEL_NAME_LENGTH", "MAX_PAGE_SIZE", "MAX_TIMEOUT_S", "PROFILES", "Profile", "SuiteOptions"]

MAX_PAGE_SIZE = 4096
"""Largest page size the suite runs with: its main pool holds 520 pages, about 68 KiB per token slot of page
size at the suite's shape (0.27 GiB at 4096); SGLang's page sizes are far below it."""
MAX_TIMEOUT_S = 86_400.0
"""Longest wait the suite accepts (a day): the platform's wait primitives overflow on larger values."""
MAX_MODEL_NAME_LENGTH = 100
"""Longest base model name: the run adds a run id and tags (about 40 characters), and a file-backed store keeps
the name as one path component of at most 255 bytes."""


@dataclass(frozen=True)
class Profile:
    """How much work each check does."""

    name: str
    """The profile's name (``smoke``, ``standard``, ``exhaustive``)."""
    examples: int
    """Hypothesis examples per property check."""
    stateful_examples: int
    """Runs of the stateful machine."""
    stateful_steps: int
    """Steps per run of the stateful machine."""
    batch_sizes: tuple[int, ...]
    """Page counts the data checks try, ascending, so the first failure is the smallest; always ends with 128."""
    concurrency_threads: int
    """Worker threads mixing exists/get/set (at least 3), besides the get_stats thread."""
    concurrency_operations: int
    """Operations per worker thread."""
    concurrency_keys: int
    """Distinct keys the workers share (few, so that they overlap)."""


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        examples=6,
        stateful_examples=3,
        stateful_steps=10,
        batch_sizes=(1, 3, STORAGE_BATCH_SIZE),
        concurrency_threads=3,
        concurrency_operations=40,
        concurrency_keys=6,
    ),
    "standard": Profile(
        "standard",
        examples=100,
        stateful_examples=50,
        stateful_steps=30,
        batch_sizes=(1, 2, 5, 17, STORAGE_BATCH_SIZE),
        concurrency_threads=4,
        concurrency_operations=500,
        concurrency_keys=12,
    ),
    "exhaustive": Profile(
        "exhaustive",
        examples=1000,
        stateful_examples=300,
        stateful_steps=60,
        batch_sizes=(1, 2, 3, 5, 17, 64, 127, STORAGE_BATCH_SIZE),
        concurrency_threads=6,
        concurrency_operations=3000,
        concurrency_keys=24,
    ),
}
"""The built-in profiles, by name."""


def _bad(field_name: str, rule: str, value: object) -> ValueError:
    return bad_value(f"SuiteOptions.{field_name}", rule, value)


@dataclass(frozen=True)
class SuiteOptions:
    """The options of one conformance run; every field has a default a vendor may keep."""

    model_name: str = "hicache-conform"
    """Base of the run's model name; the suite appends a random run suffix, so it never meets existing pages."""
    page_size: int = 64
    """Tokens per page of the host pools the suite registers."""
    layout: str = "layer_first"
    """Host pool layout: ``layer_first`` or ``page_first``."""
    kind: str = "mha"
    """Host pool kind: ``mha`` (K and V) or ``mla`` (one latent; the main config sets ``is_mla_model``)."""
    levels: Optional[tuple[str, ...]] = None
    """Levels the vendor claims; None: the class attribute ``hicache_levels``, else what probing finds."""
    profile: str = "standard"
    """A key of ``PROFILES``."""
    seed: Optional[int] = None
    """Seed of every random choice; None: a fresh one, printed in the report so a run can be replayed."""
    may_evict: Optional[bool] = None
    """The backend may drop pages it accepted; None: the class attribute ``hicache_may_evict``, else False."""
    checks: Optional[tuple[str, ...]] = None
    """Run only the checks with these names (see ``hicache-conform run --list-checks``); None: all."""
    timeout_s: float = 60.0
    """Bound on any wait for the backend (threads of the concurrency and visibility checks)."""
    sglang_version: Optional[str] = None
    """Whose objects the backend receives: None picks the installed SGLang (contract models when there is
    none), ``"none"`` the contract models, a pinned version that release (installed, or its cached wheel)."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Free-form notes copied into the report's options (the CLI records the backend spec here)."""

    def __post_init__(self) -> None:
        if (
            self.sglang_version is not None
            and self.sglang_version != "none"
            and self.sglang_version not in SGLANG_RELEASES
        ):
            raise _bad(
                "sglang_version",
                f"must be none or a pinned release ({', '.join(SGLANG_RELEASES)})",
                self.sglang_version,
            )
        if not isinstance(self.model_name, str) or not self.model_name:
            raise _bad("model_name", "must be a non-empty str", self.model_name)
        if len(self.model_name) > MAX_MODEL_NAME_LENGTH or not self.model_name.isprintable():
            shown = self.model_name if len(self.model_name) <= 60 else self.model_name[:57] + "..."
            raise _bad(
                "model_name",
                f"must be at most {MAX_MODEL_NAME_LENGTH} printable characters, {len(self.model_name)} given",
                shown,
            )
        if isinstance(self.page_size, bool) or not isinstance(self.page_size, int) or self.page_size < 1:
            raise _bad("page_size", "must be an int >= 1", self.page_size)
        if self.page_size > MAX_PAGE_SIZE:
            raise _bad(
                "page_size",
                f"must be at most {MAX_PAGE_SIZE} (the suite's pools would not fit in memory)",
                self.page_size,
            )
        if self.layout not in LAYOUTS:
            raise _bad("layout", f"must be one of {list(LAYOUTS)}", self.layout)
        if self.kind not in KINDS:
            raise _bad("kind", f"must be one of {sorted(KINDS)}", self.kind)
        if self.profile not in PROFILES:
            raise _bad("profile", f"must be one of {list(PROFILES)}", self.profile)
        if self.levels is not None:
            if not isinstance(self.levels, tuple) or not all(level in BACKEND_LEVELS for level in self.levels):
                raise _bad("levels", f"must be a tuple of levels from {list(BACKEND_LEVELS)}", self.levels)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise _bad("seed", "must be an int or None", self.seed)
        if self.may_evict is not None and not isinstance(self.may_evict, bool):
            raise _bad("may_evict", "must be a bool or None", self.may_evict)
        if self.checks is not None and (
            not isinstance(self.checks, tuple) or not all(isinstance(name, str) for name in self.checks)
        ):
            raise _bad("checks", "must be a tuple of check names", self.checks)
        if (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, (int, float))
            or not math.isfinite(self.timeout_s)
            or not 0 < self.timeout_s <= MAX_TIMEOUT_S
        ):
            raise _bad("timeout_s", f"must be a finite number of seconds > 0 and <= {MAX_TIMEOUT_S:g}", self.timeout_s)

    @property
    def profile_settings(self) -> Profile:
        """The ``Profile`` named by ``profile``."""
        return PROFILES[self.profile]

    def as_dict(self) -> dict[str, Any]:
        """Return the options as plain data, for reports."""
        return {
            "model_name": self.model_name,
            "page_size": self.page_size,
            "layout": self.layout,
            "kind": self.kind,
            "levels": None if self.levels is None else list(self.levels),
            "profile": self.profile,
            "seed": self.seed,
            "may_evict": self.may_evict,
            "checks": None if self.checks is None else list(self.checks),
            "sglang_version": self.sglang_version,
            **self.extra,
        }
