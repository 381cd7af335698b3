"""``hicache-conform`` with its standard output going away: ``... | head`` and a closed stdout.

Scenario: the reader of the command's standard output closes the pipe before
the command has written anything (as ``head`` does once it has its lines),
or the command starts with standard output closed.
Expected: the command runs to its end, prints no traceback, and exits with
its own status: 0 for a passing command, 1 for a failed clause.
Why it matters: exit status 1 means "a clause failed" to CI; a broken pipe
must not look like one, nor hide one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import fresh_store

PROJECT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-c", "import sys; from hicache_contracts.cli import main; sys.exit(main())"]


def run_with_reader_gone(*arguments: str) -> tuple[int, str]:
    """Run the command with its stdout a pipe whose reader has already closed it; return (status, stderr)."""
    environment = dict(os.environ, PYTHONPATH=str(PROJECT))
    process = subprocess.Popen(
        [*COMMAND, *arguments], cwd=PROJECT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the first line
    _, error = process.communicate(timeout=120)
    return process.returncode, error


@pytest.mark.clause("BE-14")
@pytest.mark.parametrize(
    "arguments, status",
    [
        (["spec"], 0),
        (["run", "--list-checks"], 0),
        (
            [
                "run",
                "--backend",
                "tests.conformance.planted_backends:ScalarV1Result",
                "--levels",
                "core,v1",
                "--profile",
                "smoke",
                "--seed",
                "0",
                "--check",
                "v1_results_have_one_bool_per_key",
            ],
            1,
        ),
    ],
)
def test_a_broken_pipe_ends_quietly_with_the_commands_own_status(arguments: list, status: int) -> None:
    if arguments[0] == "run" and "--backend" in arguments:
        arguments = [*arguments, "--extra-config", json.dumps({"store": fresh_store()})]
    returncode, error = run_with_reader_gone(*arguments)
    assert (returncode, error) == (status, "")


def test_a_closed_stdout_ends_quietly_with_the_commands_own_status() -> None:
    environment = dict(os.environ, PYTHONPATH=str(PROJECT))
    result = subprocess.run(
        [*COMMAND, "clauses"],
        cwd=PROJECT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert (result.returncode, result.stderr) == (0, "")


def test_a_broken_pipe_in_process_drops_later_output_and_keeps_the_status(monkeypatch, capsys) -> None:
    from hicache_contracts import cli

    class ReaderGone:
        """A stdout whose reader left after the first write."""

        def __init__(self) -> None:
            self.lines: list[str] = []

        def write(self, text: str) -> int:
            if self.lines:
                raise BrokenPipeError(32, "Broken pipe")
            self.lines.append(text)
            return len(text)

        def flush(self) -> None:
            if len(self.lines) > 1:
                raise BrokenPipeError(32, "Broken pipe")

        def isatty(self) -> bool:
            return False

        def fileno(self) -> int:
            raise ValueError("no file descriptor")

    stream = ReaderGone()
    monkeypatch.setattr(sys, "stdout", stream)
    assert cli.main(["spec", "--check", "/no/such/spec.md"]) == 1  # the status of the command, not of the pipe
    assert cli.main(["clauses"]) == 0
    assert sys.stdout is stream and len(stream.lines) == 1
