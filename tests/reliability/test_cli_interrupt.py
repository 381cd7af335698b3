"""Ctrl-C ends ``hicache-conform run`` with exit 130, a partial report marked interrupted, and nothing left behind.

In process: a backend sends its own process a SIGINT from the main thread
in the middle of a check (a Ctrl-C landing there), after it wrote pages (a
KeyboardInterrupt the backend merely raises is its check's failure instead:
test_hostile_backends.py). Then for
real: SIGINT to a ``hicache-conform run`` subprocess during the file
backend's concurrency check, with the temporary directory pointed at a
folder of the test's own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.conformance.helpers import run_cli
from tests.reliability.backends import InterruptedFileBackend

PROJECT = Path(__file__).resolve().parents[2]
"""The repository root: the subprocesses import the project's tests from it, whatever pytest's folder."""


def files_under(path: Any) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(folder, name), path)
        for folder, folders, files in os.walk(path)
        for name in folders + files
    )


@pytest.mark.clause("BE-11")
def test_an_interrupt_in_a_check_gives_exit_130_a_partial_report_and_a_clean_store(tmp_path: Any, capsys: Any) -> None:
    root = tmp_path / "store"
    InterruptedFileBackend.writes = 0
    status = run_cli(
        "--backend",
        "tests.reliability.backends:InterruptedFileBackend",
        "--extra-config",
        json.dumps({"path": str(root)}),
        "--json",
        str(tmp_path / "r.json"),
        "--markdown",
        str(tmp_path / "r.md"),
    )
    output = capsys.readouterr().out
    assert status == 130
    assert InterruptedFileBackend.writes == InterruptedFileBackend.INTERRUPT_AT  # pages were written first
    assert output.rstrip().splitlines()[-3] == (
        "INTERRUPTED: THE RUN WAS STOPPED BEFORE ITS END; THIS REPORT HOLDS ONLY WHAT RAN UNTIL THEN"
    )
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["interrupted"] is True and document["passed"] is False
    assert 0 < len(document["sections"][0]["checks"])  # the checks that ran before are in it
    assert (tmp_path / "r.md").read_text().startswith("**INTERRUPTED: ")
    assert files_under(root) == []  # every page cleared, no empty directory left


def test_a_report_not_marked_interrupted_is_caught(tmp_path: Any, capsys: Any, monkeypatch: Any) -> None:
    from hicache_contracts.conformance.reporting.report import SuiteReport

    monkeypatch.setattr(SuiteReport, "marked_interrupted", lambda self: self)
    with pytest.raises(AssertionError):
        test_an_interrupt_in_a_check_gives_exit_130_a_partial_report_and_a_clean_store(tmp_path, capsys)


def test_sigint_during_the_concurrency_check_leaves_no_temporary_files(tmp_path: Any) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    environment = dict(os.environ, TMPDIR=str(temporary), PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hicache_contracts.cli",
            "run",
            "--check",
            "concurrent_calls_keep_every_key_consistent",
            "--profile",
            "exhaustive",
            "--no-engine",
            "--no-color",
            "--seed",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        cwd=PROJECT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # a background job starts with it ignored
    lines = []
    deadline = time.monotonic() + 120
    assert process.stdout is not None
    for line in process.stdout:  # wait until the file backend's check has started
        lines.append(line)
        if line.startswith("checking reference backend: file") or time.monotonic() > deadline:
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=120)
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    assert "INTERRUPTED" in output
    assert files_under(temporary) == [], output
