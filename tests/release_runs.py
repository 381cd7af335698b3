"""The release tier's runs, one pinned SGLang release at a time, started as soon as the tests are collected.

Each run fetches the release's wheel, checks that its HiCache modules import in a fresh process, then
runs ``tests/sglang`` with ``HICACHE_SGLANG_RELEASE`` set. The runs go one after another on a thread of
their own while the rest of the session runs, so a machine with a second core overlaps them with the
other tests; ``tests/test_release_tier.py`` waits for each release's outcome. A session that ends first
stops the run in flight and the ones not started.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from hicache_contracts.sglang_release import HICACHE_MODULES, ReleaseError, fetch_release

ROOT = Path(__file__).resolve().parents[1]
TIER = "tests/sglang"


@dataclass(frozen=True)
class Outcome:
    """How one release's run went: ``unavailable`` says why it could not run; else its exit and output."""

    unavailable: str = ""
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""


_executor: Optional[ThreadPoolExecutor] = None
_futures: dict[str, Future[Outcome]] = {}
_running: set[subprocess.Popen[str]] = set()
_lock = threading.Lock()
_stopped = threading.Event()


def start(versions: list[str]) -> None:
    """Queue a run of each release not queued yet (one at a time, in this order)."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="release-tier")
        for version in versions:
            if version not in _futures:
                _futures[version] = _executor.submit(_run, version)


def outcome(version: str) -> Outcome:
    """Wait for the release's run (queued now if it was not) and return how it went."""
    start([version])
    return _futures[version].result()


def stop() -> None:
    """End the run in flight and drop the queued ones (the session is over)."""
    _stopped.set()
    with _lock:
        for future in _futures.values():
            future.cancel()
        for process in list(_running):
            process.kill()
        if _executor is not None:
            _executor.shutdown(wait=False, cancel_futures=True)


def _run(version: str) -> Outcome:
    try:
        fetch_release(version)
    except ReleaseError as error:
        return Outcome(unavailable=f"cannot fetch SGLang {version}'s wheel: {error}")
    script = (
        "import importlib\n"
        "from hicache_contracts.sglang_release import use_release\n"
        f"use_release({version!r})\n"
        f"for name in {list(HICACHE_MODULES)!r}:\n"
        "    importlib.import_module(name)\n"
    )
    checked = _subprocess([sys.executable, "-c", script], {}, timeout=900)
    if checked.returncode != 0:
        lines = checked.stderr.strip().splitlines()
        reason = lines[-1] if lines else f"exit {checked.returncode}"
        return Outcome(
            unavailable=f"SGLang {version}'s HiCache modules do not import here ({reason}); "
            "set up with: bash scripts/setup.sh --sglang"
        )
    command = [sys.executable, "-m", "pytest", TIER, "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
    return _subprocess(command, {"HICACHE_SGLANG_RELEASE": version}, timeout=1800)


def _subprocess(command: list[str], extra_env: dict[str, str], *, timeout: float) -> Outcome:
    if _stopped.is_set():
        return Outcome(unavailable="the session ended before this release ran")
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, **extra_env),
    )
    with _lock:
        _running.add(process)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        stderr += f"\n(killed after {timeout:.0f} s)"
    finally:
        with _lock:
            _running.discard(process)
    return Outcome(returncode=process.returncode, stdout=stdout, stderr=stderr)
