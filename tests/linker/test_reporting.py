"""The linker suite's report, bundle and replay are the backend suite's: one section, a verdict per LNK clause.

Scenario: the reference memory linker and a planted linker run directly (no SGLang in this
process); their reports turned into the backend suite's SuiteReport, rendered by the CLI as JSON,
JUnit XML and Markdown, written as a results bundle and re-checked by ``verify-submission``.
Expected: a verdict for every linker clause (not applicable where the clause does not hold for
the target release); the reference linker's bundle verifies; a planted linker's failure names its
clause, the rationale and a replay command that reruns the check alone and fails it again; a
bundle changed after the run, or claiming certification it lacks, is refused; ``--certify``
without the release imported is refused before the run.
Why it matters: a third party must be able to re-check a linker's certificate exactly as a
backend's, and a vendor must be able to rerun the one check that failed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from hicache_contracts.cli import main
from hicache_contracts.conformance.reporting.bundle import Product, write_bundle
from hicache_contracts.conformance.reporting import bundle as backend_bundle
from hicache_contracts.linker.reporting import verify_bundle
from hicache_contracts.conformance.reporting.certify import certification_problems
from hicache_contracts.linker.checks import CHECKS
from hicache_contracts.linker.reporting import linker_clause_ids
from hicache_contracts.linker.suite import run_linker_suite
from hicache_reference.linker import MemoryLinker
from tests.linker.planted import NewestFirstOffloadLinker

PRODUCT = Product("vendor", "product", "1", "https://example.com/repo", "team@example.com")


def bundle_of(report, folder: Path) -> list[str]:
    suite = report.suite_report()
    problems = certification_problems(suite, profile="standard", checks=None)
    write_bundle(suite, str(folder), problems, product=PRODUCT)
    return problems


@pytest.mark.clause("LNK-16")
def test_a_verdict_per_linker_clause_and_release_scoped_ones_not_applicable() -> None:
    report = run_linker_suite(MemoryLinker, release="0.5.22", mode="direct")
    (section,) = report.suite_report().sections
    verdicts = {verdict.clause_id: verdict for verdict in section.clauses}
    assert tuple(verdicts) == linker_clause_ids()
    assert verdicts["LNK-14"].status == "skip" and verdicts["LNK-14"].reason.startswith("not applicable: ")
    assert verdicts["LNK-16"].status == "pass"
    assert {check.name for check in CHECKS} <= {outcome.check for outcome in section.checks}
    assert section.options["suite"] == "linker" and section.options["release"] == "0.5.22"


@pytest.mark.clause("LNK-16")
def test_the_reference_linkers_bundle_verifies(tmp_path: Path) -> None:
    report = run_linker_suite(MemoryLinker, release="0.5.22", mode="direct")
    assert bundle_of(report, tmp_path) == []
    assert verify_bundle(str(tmp_path)) == []
    assert backend_bundle.verify_bundle(str(tmp_path)) == [  # told nothing of the linker suite: refused, never passed
        "report.json: linker hicache_reference.linker.linkers:MemoryLinker: a section of the linker suite, which this "
        "verification does not know"
    ]
    (tmp_path / "report.md").write_text("changed\n")
    assert any("report.md: its SHA-256 does not match" in p for p in verify_bundle(str(tmp_path)))


@pytest.mark.clause("LNK-16")
def test_a_planted_linkers_bundle_names_its_clause_and_verify_agrees(tmp_path: Path) -> None:
    report = run_linker_suite(NewestFirstOffloadLinker, release="0.5.22", mode="direct")
    problems = bundle_of(report, tmp_path)
    assert any("LNK-16 failed (offload_results_in_order)" in p for p in problems), problems
    found = verify_bundle(str(tmp_path))
    assert found == [f"not certifiable: {p}" for p in problems], found
    manifest = json.loads((tmp_path / "submission.json").read_text())
    manifest["certified"] = True
    (tmp_path / "submission.json").write_text(json.dumps(manifest))
    assert any("certified is true, but the report shows" in p for p in verify_bundle(str(tmp_path)))


@pytest.mark.clause("LNK-16")
def test_a_failure_carries_the_rationale_and_a_replay_that_fails_again(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_linker_suite(NewestFirstOffloadLinker, release="0.5.23", mode="direct")
    (section,) = report.suite_report().sections
    (failure,) = next(v for v in section.clauses if v.clause_id == "LNK-16").failures
    assert "why it matters: The wrapper pairs the n-th result" in failure.counterexample
    replay = failure.counterexample.splitlines()[-1].removeprefix("replay: ")
    assert replay == report.replay_command("offload_results_in_order")
    assert f"replay: {replay}" in report.render()
    words = shlex.split(replay)
    assert words[:2] == ["hicache-conform", "linker"] and "--checks" in words
    assert main(words[1:]) == 1
    out = capsys.readouterr().out
    assert "FAIL LNK-16  offload_results_in_order" in out and "PASS LNK-7" not in out


@pytest.mark.clause("LNK-7")
def test_cli_writes_json_junit_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = {kind: tmp_path / f"report.{kind}" for kind in ("json", "xml", "md")}
    argv = ["linker", "--linker", "hicache_reference.linker:MemoryLinker", "--release", "0.5.21"]
    argv += ["--json", str(paths["json"]), "--junit-xml", str(paths["xml"]), "--markdown", str(paths["md"])]
    assert main(argv) == 0
    document = json.loads(paths["json"].read_text())
    assert document["passed"] and document["sections"][0]["options"]["suite"] == "linker"
    assert 'name="LNK-7"' in paths["xml"].read_text()
    assert "| LNK-14 | linker | ✅ pass |" in paths["md"].read_text()


def test_certify_without_the_release_imported_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["linker", "--linker", "hicache_reference.linker:MemoryLinker", "--certify", str(tmp_path / "b")]
    assert main(argv) == 2
    assert "--certify: a linker certificate is made through the release's own wrapper" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_unknown_check_names_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["linker", "--linker", "hicache_reference.linker:MemoryLinker", "--checks", "no_such_check"]
    assert main(argv) == 2
    assert "checks: no check named no_such_check" in capsys.readouterr().err
