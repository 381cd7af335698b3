"""The main job's subjects: what ``hicache-conform run`` checks when no backend is named.

The contracts package knows no backend or controller of its own. A package
that has some (``hicache_reference``) publishes a ``MainJob`` under the entry
point group ``hicache_spec.main_job``; ``load_main_job`` finds it::

    [project.entry-points."hicache_spec.main_job"]
    reference = "hicache_reference.main_job:MAIN_JOB"
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from hicache_contracts.conformance.session.loading import BackendFactory
from hicache_contracts.conformance.reporting.report import ReportSection

__all__ = ["ENTRY_POINT_GROUP", "MainJob", "Subjects", "load_main_job"]

ENTRY_POINT_GROUP = "hicache_spec.main_job"
"""The entry point group a ``MainJob`` is published under."""

Subjects = Sequence[tuple[str, BackendFactory]]
"""Backends to check, each with the title of its report section."""


@dataclass(frozen=True)
class MainJob:
    """The default subjects of ``hicache-conform run``."""

    subjects: Callable[[str], Subjects]
    """Backends to check, given a fresh temporary folder they may write into."""
    release: Callable[[Subjects], None]
    """Let go of what ``subjects`` set up (shared stores) once the run is over."""
    engine_section: Optional[Callable[[], ReportSection]] = None
    """The engine half: a controller's traces, as a report section (None: no engine half)."""


def load_main_job(group: str = ENTRY_POINT_GROUP) -> MainJob:
    """Return the ``MainJob`` published under ``group``; raise ValueError when there is none or several."""
    # Every distribution's metadata, not the first per name: a stale egg-info of an editable checkout on the
    # path (the working directory) must not hide the installed one's entry points.
    points = {
        point.value: point
        for distribution in importlib.metadata.distributions()
        for point in distribution.entry_points
        if point.group == group
    }
    found = sorted(points.values(), key=lambda point: point.name)
    if len(found) != 1:
        names = ", ".join(point.value for point in found) or "none"
        raise ValueError(
            f"main job: exactly one entry point in group {group!r} must name the default subjects "
            f"(got {names}); install hicache_reference, or name a backend with --backend"
        )
    job = found[0].load()
    if not isinstance(job, MainJob):
        raise ValueError(f"main job: entry point {found[0].value} must name a MainJob (got {type(job).__name__})")
    return job
