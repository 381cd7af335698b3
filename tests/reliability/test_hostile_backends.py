"""Whatever a backend does, ``hicache-conform run`` ends with a report and an honest exit status.

In process: a backend whose batch_get_v1 calls ``sys.exit(0)`` or raises
``SystemExit``, ``KeyboardInterrupt`` (no Ctrl-C behind it),
``asyncio.CancelledError`` or ``GeneratorExit``. Expected: the check under
way fails with the whole message naming the exception and the backend's
frame, the report is printed and written, the exit status is 1 (also under
``--certify``, which is refused), and the run's pages are cleared.

Why this matters: before, ``sys.exit(0)`` made the run exit 0 with no
report, also under ``--certify``, so a CI trusting the exit status recorded
a pass; the other exceptions gave a traceback and no report.
"""

from __future__ import annotations

import inspect
import io
import json
import contextlib
from typing import Any

import pytest

from hicache_contracts.cli import main
from tests.conformance.correct_backend import STORES
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
