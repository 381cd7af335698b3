"""``hicache-conform matrix`` and the in-tree backends' matrix in ``docs/``.

Scenario: bundles of a passing backend, of one failing only as its expected
failures say, of one failing unexpectedly, on two releases; the matrix
command over them, then ``--check`` against a stale page; the committed
in-tree bundles under ``docs/matrix/`` and the pages rendered from them;
the in-tree backends' expected failures read from the divergence registry,
and one whose clause now passes.
Expected: each cell shows its state and count and links its findings, the
HTML page opens with an SVG square per cell in the state's colour; a stale
page is named and exits 1; the committed pages equal a fresh render of the
committed bundles, each bundle is intact, and none holds an expected failure
that now passes or a failure none names; a divergence of an in-tree class
is that backend's expected failure on the releases it holds for, and flips
(fails the run) once its clause passes.
Why it matters: readers compare products and releases at a glance, and a
matrix that no longer matches its bundles, or a fixed divergence still
listed, is caught by the tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hicache_spec.releases import SGLANG_RELEASES

from hicache_contracts.cli import main
from hicache_contracts.conformance.reporting.bundle import Product, write_bundle
from hicache_contracts.conformance.reporting.expected import (
    ExpectedFailure,
    compare_with_baseline,
    in_tree_expected,
)
from hicache_contracts.conformance.reporting.matrix import STATES, find_bundles, load_rows, render_pages
from hicache_contracts.conformance.running.sglang_in_tree import IN_TREE_BACKENDS
from hicache_contracts.conformance.reporting.report import (
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
    SuiteReport,
)


ROOT = Path(__file__).resolve().parents[3]
BUNDLES = ROOT / "docs" / "matrix"


def _expected(name: str, release: str) -> tuple[ExpectedFailure, ...]:
    entry = IN_TREE_BACKENDS[name]
    return in_tree_expected(entry.module, entry.class_name, release)


def _report(release: str, be3: str, failure: str = "wrong bytes") -> SuiteReport:
    levels = (LevelVerdict("core", True, "declared"), LevelVerdict("v1", False, "declared", "not declared"))
    failures = (Failure("b_check", failure),) if be3 == "fail" else ()
    clauses = (
        ClauseVerdict("BE-2", "core", "", "pass"),
        ClauseVerdict("BE-3", "core", "", be3, failures=failures),
    )
    options = {"seed": 0, "profile": "standard", "sglang_release": release}
    return SuiteReport((ReportSection("backend shop:Store", "shop:Store", levels, clauses, (), options),))


def _bundles(tmp_path: Path) -> Path:
    entry = ExpectedFailure("BE-3", "backend defect", "https://tracker.example.com/3")
    for name, release, be3, expected in (
        ("good", "0.5.22", "pass", ()),
        ("known", "0.5.22", "fail", (entry,)),
        ("new", "0.5.23", "fail", ()),
    ):
        product = Product("Example", f"kv-{name}", "1", "https://example.com", "qa@example.com")
        report = _report(release, be3)
        write_bundle(report, str(tmp_path / "bundles" / name), [], product=product, expected=expected)
    return tmp_path / "bundles"


def test_the_matrix_shows_each_cell_and_links_its_findings(tmp_path, capsys) -> None:
    folder = _bundles(tmp_path)
    markdown, page = tmp_path / "out" / "matrix.md", tmp_path / "out" / "matrix.html"
    assert main(["matrix", str(folder), "--markdown", str(markdown), "--html", str(page)]) == 0
    text = markdown.read_text()
    assert "| kv-good | [0.5.22](../bundles/good/report.md) | yes | ✅ 2/2 | – |" in text
    assert "| kv-known | [0.5.22](../bundles/known/report.md) | yes | [🟨 1/2](#kv-known-0-5-22-core) | – |" in text
    assert "| kv-new | [0.5.23](../bundles/new/report.md) | yes | [❌ 1/2](#kv-new-0-5-23-core) | – |" in text
    assert '<a id="kv-known-0-5-22-core"></a>**core** (expected)' in text
    assert "- BE-3 fail: b_check: wrong bytes — expected: backend defect, https://tracker.example.com/3" in text
    html = page.read_text()
    assert html.count("<rect ") == 6
    assert f'fill="{STATES["fail"][0]}"' in html and f'fill="{STATES["expected"][0]}"' in html
    assert '<h4 id="kv-new-0-5-23-core">core (fail)</h4>' in html
    capsys.readouterr()
    markdown.write_text(text.replace("kv-good", "kv-old"))
    assert main(["matrix", str(folder), "--markdown", str(markdown), "--html", str(page), "--check"]) == 1
    assert f"{markdown}: stale" in capsys.readouterr().err
    assert "kv-old" in markdown.read_text()  # --check writes nothing


def test_a_folder_without_bundles_is_a_usage_error(tmp_path, capsys) -> None:
    assert main(["matrix", str(tmp_path)]) == 2
    assert "holds no results bundle" in capsys.readouterr().err


REGENERATE = "regenerate with `.venv/bin/python scripts/render_matrix.py`"


def test_the_in_tree_matrix_in_docs_is_fresh_and_its_bundles_intact() -> None:
    from hicache_contracts.conformance.reporting.bundle import verify_bundle

    bundles = find_bundles([str(BUNDLES)])
    for path, text in render_pages(BUNDLES, ROOT / "docs").items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale; {REGENERATE}"
    for folder in bundles:
        integrity = [
            problem
            for problem in verify_bundle(str(folder))
            if any(word in problem for word in ("SHA-256", "disagree", "expected_failures", "baseline."))
        ]
        assert integrity == [], folder
    releases = {row.release for row in load_rows(bundles)}
    assert releases == set(SGLANG_RELEASES), f"the matrix covers {sorted(releases)}; {REGENERATE}"


@pytest.mark.clause("BE-13", "NS-8", "BE-21")
@pytest.mark.parametrize("folder", sorted(path.name for path in BUNDLES.iterdir() if path.is_dir()))
def test_no_in_tree_bundle_holds_a_fixed_or_unrecorded_divergence(folder: str) -> None:
    import json

    baseline = json.loads((BUNDLES / folder / "submission.json").read_text())["baseline"]
    assert baseline["now_passing"] == [], f"{folder}: expected failures now pass; update the divergence registry"
    assert baseline["unexpected"] == [], (
        f"{folder}: failures no expected failure names: record them in the divergence registry (or fix the "
        f"check), then {REGENERATE}"
    )


@pytest.mark.clause("BE-21", "BE-13", "NS-8")
def test_in_tree_expected_failures_come_from_the_divergence_registry() -> None:
    older = {entry.target: entry for entry in _expected("file", "0.5.22")}
    assert (older["BE-21"].reason, older["BE-21"].until, older["BE-21"].link) == (
        "backend defect",
        "0.5.22",
        "sgl-project/sglang#39147",
    )
    assert older["BE-13"].note.startswith("DIV-9: ") and older["NS-8"].note.startswith("DIV-10: ")
    assert "BE-21" not in {entry.target for entry in _expected("file", "0.5.23")}
    sim = {entry.target: entry.reason for entry in _expected("sim", "0.5.23")}
    assert sim["BE-9"] == sim["BE-13"] == "not applicable" and sim["BE-21"] == "backend defect"


@pytest.mark.clause("BE-13")
def test_a_fixed_divergence_flips_the_run() -> None:
    report = SuiteReport(
        (
            ReportSection(
                "backend file",
                "file",
                (LevelVerdict("legacy", True, "required"),),
                (ClauseVerdict("BE-13", "legacy", "", "pass"),),
                (),
                {"sglang_release": "0.5.23"},
            ),
        )
    )
    baseline = compare_with_baseline(report, _expected("file", "0.5.23"))
    assert baseline.now_passing == ("BE-13",) and baseline.exit_code == 1
