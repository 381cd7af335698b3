"""``--certify`` and ``--known-failures``: a run that may stand as a certificate, and a baseline of unfixed clauses.

Scenario: the correct in-test backend with declared levels at the standard
profile; the same with probed levels, a --check selection or the smoke
profile; a planted bug run with and without its clause on a known-failures
list; malformed lists.
Expected: a clean declared run is certified and writes the bundle (the
JSON, JUnit and Markdown reports and submission.json with the declared
levels, seed and versions); any skip of a claimed clause (other than "not
applicable"), probed levels, a selection or smoke refuses certification
with exit 1 and says why; a known failure is reported and not fatal, an
unknown one still is; an ID that names no clause is a usage error naming
the line.
Why it matters: a vendor publishes a certificate only when the suite looked
at everything it claims, and a baseline lets CI stay green while known bugs
wait, without hiding new ones.
"""

from __future__ import annotations

import functools
import json

import pytest

from hicache_contracts.conformance import BACKEND_LEVELS
from hicache_contracts.conformance.reporting.certify import parse_known_failures
from tests.conformance import helpers
from tests.conformance.helpers import backend_arguments

PLANTED_BE12 = "tests.conformance.planted_backends:StatsAsDict"
run_cli = functools.partial(helpers.run_cli, profile=None)  # the standard profile unless a test names one


@pytest.mark.clause("BE-2", "BE-14")
def test_a_clean_declared_run_is_certified_and_writes_the_bundle(tmp_path, capsys) -> None:
    status = run_cli(
        *backend_arguments(),
        "--levels",
        ",".join(BACKEND_LEVELS),
        "--certify",
        str(tmp_path / "bundle"),
    )
    output = capsys.readouterr().out
    assert status == 0, output
    assert "certified: every check ran, every claimed clause passed" in output
    names = sorted(path.name for path in (tmp_path / "bundle").iterdir())
    assert names == ["junit.xml", "report.json", "report.md", "submission.json"]
    document = json.loads((tmp_path / "bundle" / "submission.json").read_text())
    assert document["certified"] is True and document["problems"] == []
    section = document["sections"][0]
    assert section["declared_levels"] == list(BACKEND_LEVELS)
    assert section["seed"] == 0 and section["profile"] == "standard"
    assert set(document["versions"]) == {"hicache-conform", "python", "torch", "platform"}


@pytest.mark.clause("BE-2")
@pytest.mark.parametrize(
    "arguments, problem",
    [
        (["--profile", "smoke", "--levels", "core,v1"], "the smoke profile is for CI"),
        (["--profile", "smoke"], "were probed, not declared"),
        (
            ["--profile", "smoke", "--levels", "core,v1", "--check", "batch_exists_counts_the_leading_run"],
            "only some checks ran",
        ),
    ],
)
def test_certification_is_refused_for_a_partial_or_undeclared_run(
    arguments: list, problem: str, tmp_path, capsys
) -> None:
    status = run_cli(
        *backend_arguments(),
        *arguments,
        "--certify",
        str(tmp_path / "bundle"),
    )
    output = capsys.readouterr().out
    assert status == 1
    assert "not certified (" in output and problem in output
    assert json.loads((tmp_path / "bundle" / "submission.json").read_text())["certified"] is False


@pytest.mark.clause("BE-12")
def test_a_known_failure_is_reported_and_not_fatal_an_unknown_one_is(tmp_path, capsys) -> None:
    arguments = [
        "--profile",
        "smoke",
        *backend_arguments(PLANTED_BE12),
        "--check",
        "get_stats_returns_none_or_an_object",
        "--check",
        "batch_exists_has_no_side_effects",
    ]
    known = tmp_path / "known.txt"
    known.write_text("# not fixed yet\nBE-12  stats are a dict until release 2\nBE-3\n")
    assert run_cli(*arguments, "--known-failures", str(known)) == 0
    output = capsys.readouterr().out
    assert "BE-12   FAIL" in output
    assert "known failures (reported, not fatal): BE-12" in output
    assert "known failures that now pass (remove them from --known-failures): BE-3" in output
    known.write_text("BE-3\n")
    assert run_cli(*arguments, "--known-failures", str(known)) == 1
    assert "failures not on --known-failures (fatal): BE-12" in capsys.readouterr().out


@pytest.mark.clause("BE-12")
def test_a_known_failures_line_without_a_clause_is_a_usage_error(tmp_path, capsys) -> None:
    known = tmp_path / "known.txt"
    known.write_text("BE-12\nnot-a-clause because\n")
    assert run_cli("--known-failures", str(known)) == 2
    assert capsys.readouterr().err.strip() == (
        "hicache-conform run: --known-failures: line 2 must start with a clause ID (got 'not-a-clause')"
    )


def test_parse_known_failures_keeps_order_and_drops_comments() -> None:
    assert parse_known_failures("BE-5 x\n\n  # c\nNS-8\nBE-5\n") == ("BE-5", "NS-8")
