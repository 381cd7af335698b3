"""``hicache-conform verify-submission``: a results bundle a third party can re-verify.

Scenario: a certified bundle written from a clean report; planted bundles:
one that claims a certificate while a claimed clause and a check of it were
skipped, one whose report.json was edited after the run, one whose
junit.xml disagrees with report.json (its digest updated to match), one
with a malformed expected failure, one of another schema, one without a
product, one made against another clause registry.
Expected: the clean bundle verifies (exit 0); each planted one is refused
(exit 1) with its reason named.
Why it matters: a certificate is only worth what a reviewer can check
without trusting the submitter.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Optional

import pytest

from hicache_contracts.cli import main
from hicache_contracts.conformance.framework import ordered_checks
from hicache_contracts.conformance.levels import BACKEND_LEVELS, backend_clauses
from hicache_contracts.conformance.reporting.bundle import Product, verify_bundle, write_bundle
from hicache_contracts.conformance.reporting.report import (
    CheckOutcome,
    ClauseVerdict,
    LevelVerdict,
    ReportSection,
    SuiteReport,
)

PRODUCT = Product("Example Storage Inc.", "example-kv", "1.2.3", "https://example.com/kv", "qa@example.com")


def _report(be3: str = "pass", check: str = "pass") -> SuiteReport:
    """A complete report of a backend claiming core: every core clause and every check of the suite, BE-3 as given."""
    levels = tuple(
        LevelVerdict(level, level == "core", "declared", None if level == "core" else "not declared")
        for level in BACKEND_LEVELS
    )
    reason = "no backdoor hooks" if be3 == "skip" else None
    clauses = tuple(
        ClauseVerdict(
            item.id, item.level, "", be3 if item.id == "BE-3" else "pass", reason=reason if item.id == "BE-3" else None
        )
        if item.level == "core"
        else ClauseVerdict(item.id, item.level, "", "skip", reason=f"level {item.level} not claimed: not declared")
        for item in backend_clauses()
    )
    checks = []
    for item in ordered_checks():
        unclaimed = [level for level in item.requires if level != "core"]
        if unclaimed:
            checks.append(CheckOutcome(item.name, item.clauses, "skip", message=f"level {unclaimed[0]} not claimed"))
        elif "BE-3" in item.clauses:
            checks.append(CheckOutcome(item.name, item.clauses, check, message=reason))
        else:
            checks.append(CheckOutcome(item.name, item.clauses, "pass"))
    options = {"seed": 7, "profile": "standard", "checks": None, "sglang_release": None}
    return SuiteReport((ReportSection("backend shop:Store", "shop:Store", levels, clauses, tuple(checks), options),))


def _bundle(tmp_path: Path, report: Optional[SuiteReport] = None, **overrides) -> Path:
    folder = tmp_path / "bundle"
    write_bundle(report or _report(), str(folder), [], product=overrides.pop("product", PRODUCT), **overrides)
    return folder


def _edit_manifest(folder: Path, change) -> None:
    path = folder / "submission.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=2))


@pytest.mark.clause("BE-2")
def test_a_clean_bundle_verifies(tmp_path, capsys) -> None:
    folder = _bundle(tmp_path)
    assert verify_bundle(str(folder)) == []
    assert main(["verify-submission", str(folder)]) == 0
    assert "verified: intact, and every check of every claimed level ran and passed" in capsys.readouterr().out


@pytest.mark.clause("BE-2")
def test_a_bundle_that_claims_a_certificate_over_a_skipped_claimed_check_is_refused(tmp_path, capsys) -> None:
    folder = _bundle(tmp_path, _report(be3="skip", check="skip"))  # written with no problems: it lies
    problems = verify_bundle(str(folder))
    assert "submission.json: certified is true, but the report shows 2 problem(s):" in problems
    assert "not certifiable: backend shop:Store: BE-3 (level core) was skipped: no backdoor hooks" in problems
    for check in ordered_checks():
        if check.clauses == ("BE-3",):
            assert f"not certifiable: backend shop:Store: check {check.name} (BE-3) did not run: no backdoor hooks" in (
                problems
            )
    assert main(["verify-submission", str(folder)]) == 1
    assert "refused (3 problems):" in capsys.readouterr().out


def test_a_tampered_file_is_refused_by_its_digest(tmp_path) -> None:
    folder = _bundle(tmp_path, _report(be3="fail"))
    report = folder / "report.json"
    report.write_text(report.read_text().replace('"status": "fail"', '"status": "pass"'))
    problems = verify_bundle(str(folder))
    assert "report.json: its SHA-256 does not match submission.json (the file was changed after the run)" in problems


def test_junit_and_json_that_disagree_are_refused(tmp_path) -> None:
    folder = _bundle(tmp_path)
    junit = folder / "junit.xml"
    text = junit.read_text()
    start = text.index('name="BE-3"')
    end = text.index("/>", start)
    junit.write_text(text[:end] + '><failure message="planted" type="BE-3" /></testcase' + text[end + 1 :])
    digest = hashlib.sha256(junit.read_bytes()).hexdigest()
    _edit_manifest(folder, lambda document: document["files"].update({"junit.xml": digest}))
    assert verify_bundle(str(folder)) == [
        "junit.xml and report.json disagree: backend shop:Store: BE-3 is fail in junit.xml, pass in report.json"
    ]


@pytest.mark.parametrize(
    "entry, problem",
    [
        (
            {"clause": "BE-3", "reason": "flaky", "link": "DIV-1"},
            "submission.json: expected_failures: entry 1: reason: must be one of backend defect, not applicable, "
            "suite bug (got 'flaky')",
        ),
        (
            {"clause": "BE-3", "reason": "suite bug"},
            "submission.json: expected_failures: entry 1: link: must be a URL, owner/repo#N, DIV-N or docs/PAGE.md",
        ),
        (
            {"clause": "NOPE-1", "reason": "suite bug", "link": "DIV-1"},
            "submission.json: expected_failures: entry 1: clause: must be a clause ID of the registry",
        ),
    ],
)
def test_a_malformed_expected_failure_is_refused(entry, problem, tmp_path) -> None:
    folder = _bundle(tmp_path)
    _edit_manifest(folder, lambda document: document.update(expected_failures=[entry]))
    problems = verify_bundle(str(folder))
    assert any(item.startswith(problem) for item in problems), problems


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: d.update(schema="other/1"), "submission.json: schema: must be 'hicache-conformance-bundle/1'"),
        (lambda d: d["product"].update(contact=""), "submission.json: product.contact: must be given"),
        (
            lambda d: d["suite"].update(registry_sha256="0" * 64),
            "submission.json: suite.registry_sha256: the bundle was made against another clause registry",
        ),
        (lambda d: d.update(seed=8), "submission.json: seed: 8, but report.json's backend shop:Store ran with 7"),
        (lambda d: d.update(certified=False), "submission.json: certified is false although the report shows"),
        (lambda d: d["files"].pop("report.md"), "submission.json: files.report.md: no digest recorded"),
        (lambda d: d.pop("validity"), "submission.json: validity: missing or not a dict"),
    ],
)
def test_a_manifest_that_does_not_hold_is_refused(change, problem, tmp_path) -> None:
    folder = _bundle(tmp_path)
    _edit_manifest(folder, change)
    problems = verify_bundle(str(folder))
    assert any(item.startswith(problem) for item in problems), problems


def test_a_missing_or_foreign_folder_is_named(tmp_path) -> None:
    assert verify_bundle(str(tmp_path / "none")) == [f"{tmp_path / 'none'}: is not a folder"]
    assert verify_bundle(str(tmp_path)) == ["submission.json: cannot be read (No such file or directory)"]


def test_the_product_manifest_comes_from_a_file_and_flags(tmp_path) -> None:
    path = tmp_path / "PRODUCT.yaml"
    path.write_text("vendor: Example\nproduct: kv\nversion: 2\n")
    assert Product.load(str(path), contact="qa@example.com", version=None) == Product(
        "Example", "kv", "2", "", "qa@example.com"
    )
    path.write_text("vendor: Example\nowner: someone\n")
    with pytest.raises(ValueError, match="owner: is not a field; the fields are vendor, product, version"):
        Product.load(str(path))


def test_the_release_provenance_digests_what_was_used_of_it(tmp_path, monkeypatch) -> None:
    from hicache_contracts.conformance.reporting.bundle import sglang_provenance
    from hicache_contracts.sglang_release import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    folder = tmp_path / "0.5.23"
    (folder / "sglang" / "srt" / "mem_cache").mkdir(parents=True)
    (folder / "sglang" / "srt" / "mem_cache" / "hicache_storage.py").write_text("class HiCacheFile: ...\n")
    (folder / "wheel.sha256").write_text("a" * 64 + "  sglang-0.5.23-py3-none-any.whl\n")
    first = sglang_provenance("0.5.23")
    assert first is not None
    assert first["release"] == "0.5.23" and first["wheel_sha256"] == "a" * 64
    (folder / "sglang" / "srt" / "mem_cache" / "hicache_storage.py").write_text("class HiCacheFile: pass\n")
    again = sglang_provenance("0.5.23")
    assert again is not None and again["hicache_sources_sha256"] != first["hicache_sources_sha256"]
    assert sglang_provenance(None) is None


def test_a_clause_or_check_dropped_from_every_file_is_named(tmp_path) -> None:
    report = _report()
    (section,) = report.sections
    dropped = dataclasses.replace(
        section,
        clauses=tuple(verdict for verdict in section.clauses if verdict.clause_id != "BE-3"),
        checks=section.checks[1:],
    )
    folder = _bundle(tmp_path, SuiteReport((dropped,)))  # digests and JUnit agree: only the registry shows the gap
    problems = verify_bundle(str(folder))
    assert "report.json: backend shop:Store: BE-3 of claimed level core has no verdict" in problems
    assert f"report.json: backend shop:Store: check {section.checks[0].check} has no outcome" in problems


def test_a_baseline_that_the_report_does_not_give_is_refused(tmp_path) -> None:
    from hicache_contracts.conformance.reporting.expected import ExpectedFailure, compare_with_baseline

    entry = ExpectedFailure("BE-3", "backend defect", "https://tracker.example.com/3")
    report = _report()
    folder = _bundle(tmp_path, report, expected=(entry,), baseline=compare_with_baseline(report, (entry,)))
    passes = "not certifiable: the expected failure BE-3 now passes: the defect is fixed, remove its entry"
    assert verify_bundle(str(folder)) == [
        "submission.json: certified is true, but the report shows 1 problem(s):",
        passes,
    ]
    _edit_manifest(folder, lambda document: document["baseline"].update(now_passing=[]))
    assert verify_bundle(str(folder))[-1] == (
        "submission.json: baseline.now_passing: [], but report.json read against the expected failures gives ['BE-3']"
    )


def test_the_manifest_shows_no_secret(tmp_path) -> None:
    report = _report(be3="skip", check="skip")
    (section,) = report.sections
    verdicts = tuple(
        dataclasses.replace(verdict, reason="no hooks for redis://user:hunter2@db:6379")
        if verdict.clause_id == "BE-3"
        else verdict
        for verdict in section.clauses
    )
    secret = SuiteReport((dataclasses.replace(section, clauses=verdicts),)).with_secrets(["hunter2"])
    folder = tmp_path / "bundle"
    write_bundle(secret, str(folder), ["BE-3 was skipped: no hooks for redis://user:hunter2@db:6379"], product=PRODUCT)
    for path in folder.iterdir():
        assert "hunter2" not in path.read_text(), path.name
