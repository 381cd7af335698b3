"""Whatever a backend does, ``hicache-conform run`` ends with a report and an honest exit status.

In process: a backend whose batch_get_v1 calls ``sys.exit(0)`` or raises
``SystemExit``, ``KeyboardInterrupt`` (no Ctrl-C behind it),
``asyncio.CancelledError`` or ``GeneratorExit``. Expected: the check under
way fails with the whole message naming the exception and the backend's
frame, the report is printed and written, the exit status is 1 (also under
``--certify``, which is refused), and the run's pages are cleared.

The command (a subprocess, the backend in its child process, ``--deadline
3``): a backend that ends that process (``os._exit(0)``), blocks it in a
``__del__``, leaves a non-daemon thread, forks, or changes the working
directory. Expected: the run ends within the deadline plus its grace, the
report holds what was reached with the check under way failed naming why,
the exit status is 1 (0 when every claimed clause passed: fork, chdir), the
reports are where the command line said, no temporary directory is left,
and a copy the backend forked is stopped with the run.

Why this matters: before, ``sys.exit(0)`` made the run exit 0 with no
report, also under ``--certify``, so a CI trusting the exit status recorded
a pass; the other exceptions gave a traceback and no report; a blocking
``__del__``, a non-daemon thread or a fork kept the run from ever ending;
after a ``chdir`` the report landed elsewhere.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from hicache_contracts.cli import main
from tests.conformance.correct_backend import STORES
from tests.conformance.helpers import PROJECT
from tests.reliability import backends

HOSTILE = "tests.reliability.backends:Hostile"
CHECK = "v1_pages_round_trip_bit_for_bit"
RAISED = ["sys.exit", "SystemExit", "KeyboardInterrupt", "CancelledError", "GeneratorExit"]


def line_of(text: str) -> int:
    """The line of ``backends.py`` that holds ``text``."""
    lines, first = inspect.getsourcelines(backends.Hostile)
    return first + next(number for number, line in enumerate(lines) if line.strip() == text)


def expected_message(how: str) -> str:
    if how == "sys.exit":
        return (
            f"the check stopped on SystemExit: 0 (in the backend's batch_get_v1, backends.py:{line_of('sys.exit(0)')})"
        )
    line = line_of('raise _RAISED[how]("planted by the backend")')
    name = how
    return f"the check stopped on {name}: planted by the backend (in the backend's batch_get_v1, backends.py:{line})"


def hostile_run(tmp_path: Any, how: str, *extra: str) -> tuple[int, dict, str]:
    store = f"hostile-{how}-{tmp_path.name}"
    backends.Hostile.gets = 0
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        status = main(
            [
                "run",
                "--backend",
                HOSTILE,
                "--extra-config",
                json.dumps({"hostile": how, "store": store}),
                "--levels",
                "core,v1",
                "--profile",
                "standard",
                "--seed",
                "0",
                "--quiet",
                "--no-color",
                "--check",
                CHECK,
                "--json",
                str(tmp_path / "report.json"),
                *extra,
            ]
        )
    assert STORES[store] == {}  # every page the run wrote is cleared
    return status, json.loads((tmp_path / "report.json").read_text()), output.getvalue()


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("how", RAISED)
def test_a_base_exception_from_the_backend_fails_its_check_with_a_report(how: str, tmp_path: Any) -> None:
    status, report, output = hostile_run(tmp_path, how)
    assert status == 1
    assert report["passed"] is False and report["interrupted"] is False
    [check] = report["sections"][0]["checks"]
    assert (check["check"], check["status"], check["clause"]) == (CHECK, "fail", "BE-15")
    assert check["message"] == expected_message(how)
    assert "FAILED: 0 passed, 1 failed" in output


@pytest.mark.parametrize("how", ["sys.exit", "KeyboardInterrupt"])
def test_a_certification_run_is_refused_with_a_non_zero_exit(how: str, tmp_path: Any) -> None:
    bundle = tmp_path / "bundle"
    status, report, output = hostile_run(tmp_path, how, "--certify", str(bundle))
    assert status == 1 and report["passed"] is False
    assert "\nnot certified (" in output and "\ncertified:" not in output
    assert json.loads((bundle / "submission.json").read_text())["certified"] is False


def test_planted_runner_that_lets_base_exceptions_through_is_caught(tmp_path: Any, monkeypatch: Any) -> None:
    from hicache_contracts.conformance.session import deadline

    monkeypatch.setattr(deadline, "raised_by_backend", lambda: False)  # every KeyboardInterrupt taken for Ctrl-C
    with pytest.raises(AssertionError):
        test_a_base_exception_from_the_backend_fails_its_check_with_a_report("KeyboardInterrupt", tmp_path)


# ---------------------------------------------------------------- the command: the backend in a child process
ISOLATED = {
    "os._exit": (
        1,
        "fail",
        "the run stopped during this check: the process running the backend exited with status 0 before the run's end",
        "hicache-conform run: the run did not reach its end: the process running the backend exited with status 0 "
        "before the run's end",
    ),
    "del": (
        1,
        "fail",
        "the run stopped during this check: it did not end within its deadline of 3 s (--deadline), nor within 7 s "
        "more after it was asked to stop",
        "hicache-conform run: the run did not reach its end: it did not end within its deadline of 3 s (--deadline), "
        "nor within 7 s more after it was asked to stop",
    ),
    "thread": (
        1,
        "pass",
        None,
        "hicache-conform run: the run did not reach its end: the backend left 1 non-daemon thread running after every "
        "instance was closed (hostile-forever); a process running it could not exit",
    ),
    "fork": (0, "pass", None, None),
    "chdir": (0, "pass", None, None),
}
"""Per hostile behaviour: the exit status, the check's status and message, the last line on stderr."""


def command(tmp_path: Any, how: str, *extra_arguments: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``hicache-conform run`` in a subprocess from ``tmp_path/work`` against the hostile backend."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    extra = {"hostile": how, "store": "s", "to": str(elsewhere), "pidfile": str(tmp_path / "pid")}
    arguments = ["--backend", HOSTILE, "--extra-config", json.dumps(extra), "--levels", "core,v1"]
    arguments += ["--profile", "smoke", "--seed", "0", "--quiet", "--no-color", "--check", CHECK, "--timeout", "1"]
    arguments += ["--json", "r.json", "--markdown", "out/r.md", "--deadline", "3", *extra_arguments]
    environment = dict(os.environ, PYTHONPATH=str(PROJECT), TMPDIR=str(tmp_path))
    process = subprocess.run(
        [sys.executable, "-m", "hicache_contracts.cli", "run", *arguments],
        cwd=work,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert sorted(os.listdir(elsewhere)) == [], process.stderr  # a backend changing directory moved no report
    assert sorted(os.listdir(work)) == sorted(["out", "r.json", *extra_arguments[1:2]]), process.stdout + process.stderr
    assert os.listdir(work / "out") == ["r.md"]
    leftovers = [name for name in os.listdir(tmp_path) if name.startswith("hicache-conform-")]
    assert leftovers == []
    return process, json.loads((work / "r.json").read_text())


@pytest.mark.parametrize("how", list(ISOLATED))
def test_the_command_ends_with_a_report_whatever_the_backend_does(how: str, tmp_path: Any) -> None:
    status, check_status, message, last_line = ISOLATED[how]
    process, report = command(tmp_path, how)
    assert process.returncode == status, process.stdout + process.stderr
    assert report["passed"] is (status == 0) and report["interrupted"] is (status != 0)
    [check] = report["sections"][0]["checks"]
    assert (check["check"], check["status"], check["message"]) == (CHECK, check_status, message)
    if last_line is None:
        assert "the run did not reach its end" not in process.stderr
    else:
        assert process.stderr.rstrip().splitlines()[-1] == last_line
    assert "wrote " + str(tmp_path / "work" / "r.json") in process.stdout
    if how == "fork":  # the copy the backend forked was stopped with the run
        copy = int((tmp_path / "pid").read_text())
        with pytest.raises(ProcessLookupError):
            for _ in range(50):  # it is killed before the command returns; init may take a moment to reap it
                os.kill(copy, 0)
                time.sleep(0.1)


def test_a_certification_run_whose_backend_ends_its_process_is_refused(tmp_path: Any) -> None:
    process, report = command(tmp_path, "os._exit", "--certify", "bundle")
    assert process.returncode == 1 and report["interrupted"] is True
    assert "\nnot certified (" in process.stdout and "\ncertified:" not in process.stdout
    submission = json.loads((tmp_path / "work" / "bundle" / "submission.json").read_text())
    assert submission["certified"] is False


def test_ctrl_c_ends_the_command_with_130_even_when_the_backend_swallows_it(tmp_path: Any) -> None:
    """SIGINT to the command while the backend blocks in a ``__del__`` (where a KeyboardInterrupt is swallowed):
    the child is asked to stop, then killed after the grace; the report of what ran is marked interrupted."""
    extra = json.dumps({"hostile": "del", "store": "s"})
    arguments = ["--backend", HOSTILE, "--extra-config", extra, "--levels", "core,v1", "--profile", "smoke"]
    arguments += ["--seed", "0", "--no-color", "--check", CHECK, "--timeout", "1", "--json", "r.json"]
    environment = dict(os.environ, PYTHONPATH=str(PROJECT), TMPDIR=str(tmp_path), PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "hicache_contracts.cli", "run", *arguments],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background job starts with it ignored
    )
    assert process.stdout is not None
    lines = [process.stdout.readline()]
    while lines[-1] and not lines[-1].startswith("checking backend"):
        lines.append(process.stdout.readline())
    time.sleep(2)  # the check is under way, blocked in the __del__
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=120)
    assert process.returncode == 130, "".join(lines) + rest
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["interrupted"] is True and report["passed"] is False
    assert [name for name in os.listdir(tmp_path) if name.startswith("hicache-conform-")] == []


def test_in_one_process_a_non_daemon_thread_ends_the_command_with_exit_1(tmp_path: Any) -> None:
    extra = json.dumps({"hostile": "thread", "store": "s"})
    arguments = ["--backend", HOSTILE, "--extra-config", extra, "--levels", "core,v1", "--profile", "smoke"]
    arguments += ["--seed", "0", "--quiet", "--no-color", "--check", CHECK, "--isolation", "none"]
    process = subprocess.run(
        [sys.executable, "-m", "hicache_contracts.cli", "run", *arguments, "--json", "r.json"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(PROJECT)),
        capture_output=True,
        text=True,
        timeout=180,  # the interpreter would wait for the thread for ever
    )
    assert process.returncode == 1, process.stdout + process.stderr
    assert process.stderr.rstrip().splitlines()[-1] == ISOLATED["thread"][3]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["interrupted"] is True and report["passed"] is False


def test_with_cuda_initialised_the_backend_runs_in_process_and_says_so(
    tmp_path: Any, monkeypatch: Any, capsys: Any
) -> None:
    """A forked child cannot use CUDA its parent initialised: the run stays in process, with a line saying so."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    store = f"cuda-{tmp_path.name}"
    extra = json.dumps({"hostile": "none", "after": 10**9, "store": store})
    arguments = ["run", "--backend", HOSTILE, "--extra-config", extra, "--levels", "core,v1", "--quiet"]
    arguments += ["--profile", "smoke", "--seed", "0", "--no-color", "--check", CHECK, "--isolation", "process"]
    backends.Hostile.gets = 0
    assert main(arguments) == 0
    assert capsys.readouterr().err == (
        "hicache-conform run: CUDA is initialised in this process (by the backend's module?), so the backend runs in "
        "it: nothing bounds a backend that never returns (--deadline does not apply)\n"
    )
    assert backends.Hostile.gets > 0  # the calls were made in this process
