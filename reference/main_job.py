"""The main job's default subjects: the reference backends and the reference controller.

``hicache-conform run`` without a backend finds ``MAIN_JOB`` through the
entry point group ``hicache_spec.main_job`` (see pyproject.toml and
``hicache_contracts.conformance.running.main_job``): the vendor suite over the memory
and file backends, then the engine scenarios over ``CacheController``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
import time
from typing import Callable, Optional

from hicache_contracts.conformance.reporting.engine_section import engine_section
from hicache_contracts.conformance.session.loading import BackendFactory
from hicache_contracts.conformance.running.main_job import MainJob, Subjects
from hicache_contracts.conformance.session.options import SuiteOptions
from hicache_contracts.conformance.reporting.report import ReportSection, SuiteReport
from hicache_contracts.conformance.running.runner import Progress, Starting, run_suite
from hicache_reference.backdoors import FileBackdoor, MemoryBackdoor
from hicache_reference.backends import FileBackend, MemoryBackend, forget_shared_memory_store
from hicache_reference.engine_check import check_reference_controller

__all__ = ["MAIN_JOB", "reference_engine_section", "reference_factories", "release_subjects", "run_reference_suite"]


def reference_factories(directory: str) -> list[tuple[str, BackendFactory]]:
    """Return the reference backends with the extra config and backdoor hooks each needs (files go in ``directory``)."""
    store = f"hicache-conform-{os.path.basename(directory)}"  # one store shared by every instance, as ranks share L3
    return [
        (
            "reference backend: memory",
            BackendFactory(
                MemoryBackend, {"store": store}, "hicache_reference.backends:MemoryBackend", backdoor=MemoryBackdoor()
            ),
        ),
        (
            "reference backend: file",
            BackendFactory(
                FileBackend, {"path": directory}, "hicache_reference.backends:FileBackend", backdoor=FileBackdoor()
            ),
        ),
    ]


def release_subjects(subjects: Subjects) -> None:
    """Forget the shared memory stores ``subjects`` named."""
    for _, factory in subjects:
        store = (factory.extra_config or {}).get("store")
        if isinstance(store, str):
            forget_shared_memory_store(store)


def reference_engine_section(controller_class: Optional[type] = None) -> ReportSection:
    """Run the reference controller (or ``controller_class``) through the engine scenarios; return the verdict per engine clause."""
    started = time.monotonic()
    results = check_reference_controller(controller_class)
    return engine_section(results, subject="hicache_reference.CacheController", duration_s=time.monotonic() - started)


def run_reference_suite(
    options: Optional[SuiteOptions] = None,
    *,
    progress: Optional[Progress] = None,
    starting: Optional[Starting] = None,
    announce: Optional[Callable[[str], None]] = None,
) -> SuiteReport:
    """Run the suite against the reference memory backend and the file backend in a temporary directory."""
    options = options or SuiteOptions()
    if options.seed is None:  # one seed for every section, so that one --seed replays the whole run
        options = dataclasses.replace(options, seed=random.SystemRandom().randrange(2**31))
    report = SuiteReport()
    with tempfile.TemporaryDirectory(prefix="hicache-conform-") as directory:
        for title, factory in reference_factories(directory):
            if announce is not None:
                announce(title)
            report = report.merged(run_suite(factory, options, title=title, progress=progress, starting=starting))
            release_subjects([(title, factory)])
    return report


MAIN_JOB = MainJob(subjects=reference_factories, release=release_subjects, engine_section=reference_engine_section)
"""What ``hicache-conform run`` checks without a backend."""
