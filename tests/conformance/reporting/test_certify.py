"""``--certify`` and ``--known-failures``: a certificate that cannot lie, and strict expected failures.

Scenario: the correct in-test backend with the backdoor hooks and declared
levels at the standard profile, and a legacy-only and a legacy-and-v2 one
(SGLang drives neither through v1); the correct backend without the
backdoor hooks; reports with a skip, an error, a clause a failing check did
not reach, a failure on the expected list; expected-failure files, good and
malformed; an expected failure whose clause now passes.
Expected: a clean declared run is certified and writes the bundle; each
skip, error or not-reached clause of a claimed level, and each check of a
claimed level that did not run, refuses certification and is named; what
only v1 calls can show (BE-7) and checks that need an unclaimed level do
not block a backend SGLang never drives that way; an expected failure is
reported and not fatal, a failure no entry names is, and an entry that now
passes fails the run; a malformed entry is a usage error naming the entry,
the field and the rule.
Why it matters: a vendor publishes a certificate only when the suite looked
at everything it claims, and a baseline lets CI stay green while known bugs
wait, without hiding new ones or keeping fixed ones listed.
"""

from __future__ import annotations

import functools
import json

import pytest

from hicache_contracts.conformance.reporting.bundle import verify_bundle
from hicache_contracts.conformance.reporting.certify import certification_problems
from hicache_contracts.conformance.reporting.expected import (
    ExpectedFailure,
    compare_with_baseline,
    parse_expected_failures,
)
from hicache_contracts.conformance.reporting.report import (
    CheckOutcome,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
    SuiteReport,
)
from tests.conformance import certify_backends, helpers
from tests.conformance.helpers import backend_arguments

PLANTED_BE12 = "tests.conformance.planted_backends:StatsAsDict"
WITH_BACKDOOR = "tests.conformance.planted_backdoor:CorrectWithBackdoor"
PRODUCT = [
    "--vendor",
    "Example Storage Inc.",
    "--product-name",
    "example-kv",
    "--product-version",
    "1.2.3",
    "--repository",
    "https://example.com/example-kv",
    "--contact",
    "conformance@example.com",
]
run_cli = functools.partial(helpers.run_cli, profile=None)  # the standard profile unless a test names one


@pytest.mark.clause("BE-2", "BE-14")
def test_a_clean_declared_run_is_certified_and_writes_a_bundle_that_verifies(tmp_path, capsys) -> None:
    bundle = tmp_path / "bundle"
    status = run_cli(
        *backend_arguments(WITH_BACKDOOR), "--levels", ",".join(helpers.ALL_LEVELS), *PRODUCT, "--certify", str(bundle)
    )
    output = capsys.readouterr().out
    assert status == 0, output
    assert "certified: every check of every claimed level ran and passed" in output
    names = sorted(path.name for path in bundle.iterdir())
    assert names == ["junit.xml", "report.json", "report.md", "submission.json"]
    document = json.loads((bundle / "submission.json").read_text())
    assert document["certified"] is True and document["problems"] == []
    assert document["product"]["vendor"] == "Example Storage Inc."
    assert document["seed"] == 0 and document["profile"] == "standard"
    assert document["sections"][0]["declared_levels"] == list(helpers.ALL_LEVELS)
    assert len(document["suite"]["registry_sha256"]) == 64
    assert set(document["files"]) == {"report.json", "junit.xml", "report.md"}
    assert verify_bundle(str(bundle)) == []


@pytest.mark.clause("BE-4", "BE-13", "BE-22")
def test_checks_that_did_not_run_refuse_certification_each_named(tmp_path, capsys) -> None:
    status = run_cli(
        *backend_arguments(), "--levels", ",".join(helpers.ALL_LEVELS), *PRODUCT, "--certify", str(tmp_path)
    )
    output = capsys.readouterr().out
    assert status == 1
    assert "certified:" not in output
    problems = json.loads((tmp_path / "submission.json").read_text())["problems"]
    for check in (
        "planted_short_objects_are_misses",
        "a_removed_object_is_never_read_as_a_hit",
        "a_removed_kv_derived_sidecar_is_never_read_as_a_hit",
    ):
        assert any(f"check {check} " in problem and "no backdoor hooks" in problem for problem in problems), problems


@pytest.mark.clause("BE-7", "BE-9")
@pytest.mark.parametrize(
    "backend, levels",
    [
        ("LegacyOnlyWithBackdoor", "core,legacy,namespacing,concurrency,durability,robustness"),
        ("LegacyAndV2WithBackdoor", "core,legacy,v2,namespacing,concurrency,durability,robustness"),
    ],
)
def test_a_backend_without_v1_certifies_for_what_sglang_drives_it_through(backend, levels) -> None:
    report = helpers.run(getattr(certify_backends, backend), profile="standard", levels=tuple(levels.split(",")))
    assert certification_problems(report, profile="standard", checks=None) == []
    (section,) = report.sections
    assert {verdict.clause_id: verdict.status for verdict in section.clauses}["BE-7"] == "skip"


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
        (["--profile", "smoke", "--levels", "core,v1", "--vendor", ""], "the product manifest has no vendor"),
    ],
)
def test_certification_is_refused_for_a_partial_or_undeclared_run(
    arguments: list, problem: str, tmp_path, capsys
) -> None:
    status = run_cli(*backend_arguments(WITH_BACKDOOR), *PRODUCT, *arguments, "--certify", str(tmp_path / "bundle"))
    output = capsys.readouterr().out
    assert status == 1
    assert "not certified (" in output and problem in output
    assert json.loads((tmp_path / "bundle" / "submission.json").read_text())["certified"] is False


# ------------------------------------------------------------ certification on planted reports
def _level(name: str, claimed: bool = True) -> LevelVerdict:
    return LevelVerdict(name, claimed, "declared", None if claimed else "not declared")


def _report(*clauses: ClauseVerdict, checks: tuple = (), levels: tuple = ("core", "legacy")) -> SuiteReport:
    claimed = tuple(_level(name) for name in levels) + tuple(
        _level(name, False) for name in ("v1", "v2") if name not in levels
    )
    options = {"seed": 0, "profile": "standard", "checks": None, "sglang_release": None}
    return SuiteReport((ReportSection("backend shop:Store", "shop:Store", claimed, clauses, checks, options),))


def _clause(clause_id: str, status: str, level: str = "core", **fields) -> ClauseVerdict:
    return ClauseVerdict(clause_id, level, "", status, **fields)


@pytest.mark.clause("BE-2")
@pytest.mark.parametrize(
    "verdict, named",
    [
        (_clause("BE-3", "skip", reason="no check covers it"), "BE-3 (level core) was skipped: no check covers it"),
        (
            _clause("BE-3", "skip", reason="not reached: a_check stopped at BE-2"),
            "BE-3 (level core) was not reached: not reached: a_check stopped at BE-2",
        ),
        (_clause("BE-3", "error", reason="hypothesis health check"), "BE-3 was not judged: the suite broke"),
        (
            _clause("BE-3", "fail", failures=(Failure("a_check", "wrong bytes"),)),
            "BE-3 failed (a_check)",
        ),
    ],
)
def test_each_skip_error_not_reached_or_failure_of_a_claimed_level_is_named(verdict, named) -> None:
    problems = certification_problems(_report(_clause("BE-2", "pass"), verdict), profile="standard", checks=None)
    assert any(named in problem for problem in problems), problems


@pytest.mark.clause("BE-7")
def test_what_only_unclaimed_calls_can_show_does_not_block() -> None:
    checks = (
        CheckOutcome("pages_are_invisible_until_fully_written", ("BE-7",), "skip", message="v1 is not claimed"),
        CheckOutcome("clear_removes_every_pool", ("BE-11",), "skip", message="level v2 not claimed"),
    )
    verdicts = (_clause("BE-7", "skip", reason="v1 is not claimed"), _clause("BE-11", "pass"))
    assert certification_problems(_report(*verdicts, checks=checks), profile="standard", checks=None) == []
    claimed_v1 = _report(*verdicts, checks=checks, levels=("core", "v1"))
    problems = certification_problems(claimed_v1, profile="standard", checks=None)
    assert any("BE-7 (level core) was skipped" in problem for problem in problems), problems


@pytest.mark.clause("BE-12")
def test_an_expected_failure_is_still_no_certificate() -> None:
    entry = ExpectedFailure("BE-12", "backend defect", "https://tracker.example.com/12")
    report = _report(_clause("BE-2", "pass"), _clause("BE-12", "fail", failures=(Failure("stats", "a dict"),)))
    (problem,) = certification_problems(report, profile="standard", checks=None, expected=(entry,))
    assert "BE-12 failed (stats); an expected failure (backend defect, https://tracker.example.com/12)" in problem


@pytest.mark.clause("BE-2")
def test_a_run_where_nothing_applied_is_no_certificate() -> None:
    skipped = _clause("BE-2", "skip", reason="not applicable: declared: the backend does not serve MLA models")
    (problem,) = certification_problems(_report(skipped), profile="standard", checks=None)
    assert problem.endswith("no clause of a claimed level passed: nothing was certified to hold")


# ------------------------------------------------------------ expected failures
KNOWN = """\
- clause: BE-12
  reason: backend defect
  link: https://tracker.example.com/store/12
  note: stats are a dict until our release 2
- clause: BE-3
  reason: suite bug
  link: example/hicache-spec#7
"""


@pytest.mark.clause("BE-12")
def test_an_expected_failure_is_reported_and_not_fatal_an_unexpected_one_is(tmp_path, capsys) -> None:
    arguments = [
        "--profile",
        "smoke",
        *backend_arguments(PLANTED_BE12),
        "--check",
        "get_stats_returns_none_or_an_object",
    ]
    known = tmp_path / "known.yaml"
    known.write_text(KNOWN)
    assert run_cli(*arguments, "--known-failures", str(known)) == 0
    output = capsys.readouterr().out
    assert "BE-12   FAIL" in output
    assert "expected failures (reported, not fatal): BE-12" in output
    assert "expected failures not checked in this run: BE-3" in output
    known.write_text(KNOWN.split("- clause: BE-3")[0].replace("BE-12", "BE-5"))
    assert run_cli(*arguments, "--known-failures", str(known)) == 1
    assert "failures no expected failure names (fatal): BE-12" in capsys.readouterr().out


@pytest.mark.clause("BE-3")
def test_an_expected_failure_that_now_passes_fails_the_run(tmp_path, capsys) -> None:
    known = tmp_path / "known.yaml"
    known.write_text(KNOWN)
    arguments = ["--profile", "smoke", *backend_arguments(), "--check", "batch_exists_has_no_side_effects"]
    assert run_cli(*arguments, "--known-failures", str(known)) == 1
    output = capsys.readouterr().out
    assert "EXPECTED FAILURES THAT NOW PASS (fatal: the defect is fixed, remove the entry): BE-3" in output


def test_an_entry_past_its_release_excuses_nothing() -> None:
    entry = ExpectedFailure("BE-12", "backend defect", "https://t.example.com/1", until="0.5.21")
    report = _report(_clause("BE-12", "fail", failures=(Failure("stats", "a dict"),)))
    assert compare_with_baseline(report, (entry,), release="0.5.21").exit_code == 0
    later = compare_with_baseline(report, (entry,), release="0.5.22")
    assert (later.expired, later.unexpected, later.exit_code) == (("BE-12",), ("BE-12",), 1)


def test_a_check_entry_excuses_only_that_checks_failures() -> None:
    entry = ExpectedFailure("get_stats_returns_none_or_an_object", "backend defect", "DIV-1", is_check=True)
    alone = _report(_clause("BE-12", "fail", failures=(Failure("get_stats_returns_none_or_an_object", "x"),)))
    assert compare_with_baseline(alone, (entry,)).unexpected == ()
    both = _report(
        _clause("BE-12", "fail", failures=(Failure("get_stats_returns_none_or_an_object", "x"), Failure("other", "y")))
    )
    assert compare_with_baseline(both, (entry,)).unexpected == ("BE-12",)


@pytest.mark.parametrize(
    "text, message",
    [
        ("BE-12 stats are a dict\n", "entries: must be a list of entries (clause or check, reason, link)"),
        ("- clause: XX-1\n  reason: suite bug\n  link: DIV-1\n", "entry 1: clause: must be a clause ID"),
        ("- clause: BE-12\n  reason: flaky\n  link: DIV-1\n", "entry 1: reason: must be one of backend defect"),
        ("- clause: BE-12\n  reason: suite bug\n", "entry 1: link: must be a URL, owner/repo#N, DIV-N"),
        ("- clause: BE-12\n  reason: suite bug\n  link: see ticket\n", "entry 1: link: must be a URL"),
        ("- clause: BE-12\n  reason: suite bug\n  link: DIV-1\n  until: 0.4.0\n", "entry 1: until: must be a pinned"),
        ("- check: no_such_check\n  reason: suite bug\n  link: DIV-1\n", "entry 1: check: must name a check"),
        ("- clause: BE-12\n  check: x\n  reason: suite bug\n  link: DIV-1\n", "exactly one of clause and check"),
        ("- clause: BE-12\n  reason: suite bug\n  link: DIV-1\n  ticket: 4\n", "entry 1: ticket: is not a field"),
    ],
)
def test_a_malformed_entry_names_the_entry_the_field_and_the_rule(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_expected_failures(text)
    assert message in str(caught.value)


@pytest.mark.clause("BE-12")
def test_a_malformed_known_failures_file_is_a_usage_error(tmp_path, capsys) -> None:
    known = tmp_path / "known.yaml"
    known.write_text("- clause: BE-12\n  reason: flaky\n  link: DIV-1\n")
    assert run_cli("--known-failures", str(known)) == 2
    assert capsys.readouterr().err.strip() == (
        "hicache-conform run: --known-failures: entry 1: reason: must be one of backend defect, not applicable, "
        "suite bug (got 'flaky')"
    )


def test_an_expected_failure_a_check_did_not_reach_has_not_flipped() -> None:
    entry = ExpectedFailure("BE-21", "backend defect", "DIV-5")
    checks = (
        CheckOutcome("a_whole_chain", ("BE-21",), "pass"),
        CheckOutcome("folds", ("BE-26", "BE-21"), "fail", clause_id="BE-26", message="no restorable lengths"),
    )
    report = _report(_clause("BE-21", "pass", level="v2"), checks=checks, levels=("core", "v2"))
    baseline = compare_with_baseline(report, (entry,))
    assert (baseline.now_passing, baseline.not_checked) == ((), ("BE-21",))
    reached = compare_with_baseline(_report(_clause("BE-21", "pass", level="v2"), checks=checks[:1]), (entry,))
    assert reached.now_passing == ("BE-21",)
