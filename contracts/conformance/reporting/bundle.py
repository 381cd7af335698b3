"""The results bundle: what a run found, with the provenance a third party needs to re-verify it.

A bundle is a folder::

    submission.json   the manifest (below), with the SHA-256 of each other file
    report.json       the full report (every clause verdict, every check outcome)
    junit.xml         the same verdicts, a test case per clause
    report.md         the same, for a reader

The manifest (``SCHEMA``) holds the product (vendor, product, version,
repository, contact: ``--product PRODUCT.yaml`` or the flags), the suite
(version, git commit when run from a checkout, the SHA-256 of the clause
registry), the SGLang release whose objects the backend received with the
digests of what was used of it, the engine tier (a release's own objects,
or the contract models), the seed and profile, per section the levels
claimed and those not claimed with why (declared non-support), the
validity (the pinned releases the result holds for), the expected failures
and how the run read against them, and whether it is certified (and why
not). ``verify_bundle`` re-checks all of it (``hicache-conform
verify-submission DIR``).
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Optional
from xml.etree import ElementTree

from hicache_contracts.conformance.reporting.certify import section_problems
from hicache_contracts.conformance.reporting.expected import (
    Baseline,
    ExpectedFailure,
    compare_with_baseline,
    entries_from_data,
)
from hicache_contracts.conformance.reporting.report import (
    CheckOutcome,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    STATUSES,
    ReportSection,
    SuiteReport,
)
from hicache_contracts.conformance.reporting.redaction import redact
from hicache_contracts.conformance.reporting.version import tool_version

__all__ = [
    "FILES",
    "MANIFEST",
    "Product",
    "SCHEMA",
    "expected_failure_passes",
    "manifest",
    "registry_digest",
    "sections_from_json",
    "verify_bundle",
    "write_bundle",
]

SCHEMA = "hicache-conformance-bundle/1"
"""The manifest's schema name; a bundle of another schema is refused."""
MANIFEST = "submission.json"
FILES: tuple[str, ...] = ("report.json", "junit.xml", "report.md")
"""The files a bundle holds beside the manifest, each with its digest in the manifest."""
ENGINE_TIERS: tuple[str, ...] = ("sglang-release", "contract-models")
"""What the backend received: a pinned release's own objects, or the contract models (no release importable)."""


@dataclass(frozen=True)
class Product:
    """Who submits what: the product manifest."""

    vendor: str = ""
    product: str = ""
    version: str = ""
    repository: str = ""
    contact: str = ""

    @classmethod
    def load(cls, path: Optional[str] = None, **flags: Optional[str]) -> Product:
        """Return the product of a ``PRODUCT.yaml`` (if given) with the non-empty ``flags`` over it.

        Raises ValueError naming the file and the field when the file is unreadable, not a mapping, or
        has a field that is not one of the manifest's or is not a string.
        """
        names = [item.name for item in fields(cls)]
        values: dict[str, str] = {}
        if path:
            import yaml

            try:
                data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            except OSError as error:
                raise ValueError(
                    f"--product: must be a readable file ({error.strerror or error}) (got {path!r})"
                ) from None
            except yaml.YAMLError as error:
                raise ValueError(f"--product: {path} must be YAML ({error})") from None
            if not isinstance(data, dict):
                raise ValueError(f"--product: {path} must be a mapping of {', '.join(names)} (got {data!r})")
            for key, value in data.items():
                if key not in names:
                    raise ValueError(f"--product: {path}: {key}: is not a field; the fields are {', '.join(names)}")
                if not isinstance(value, (str, int, float)):
                    raise ValueError(f"--product: {path}: {key}: must be a string (got {value!r})")
                values[key] = str(value)
        for key, value in flags.items():
            if key not in names:
                raise ValueError(f"product: {key}: is not a field; the fields are {', '.join(names)}")
            if value:
                values[key] = str(value)
        return cls(**values)

    def missing(self) -> list[str]:
        """The fields a certificate needs that are empty."""
        return [item.name for item in fields(self) if not getattr(self, item.name)]

    def to_dict(self) -> dict[str, str]:
        return {item.name: getattr(self, item.name) for item in fields(self)}


def registry_digest() -> str:
    """Return the SHA-256 of the clause registry (every clause, retired ones included, as canonical JSON)."""
    from hicache_spec import clauses

    items = [
        {
            "id": item.id,
            "level": item.level,
            "role": item.role,
            "statement": item.statement,
            "releases": item.releases,
            "retired": item.retired,
        }
        for item in clauses(include_retired=True)
    ]
    return hashlib.sha256(json.dumps(items, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def suite_commit() -> Optional[dict[str, Any]]:
    """Return the git commit the suite runs from (and whether its tracked files differ), or None outside a checkout."""
    folder = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "modified": bool(status.stdout.strip())}


SGLANG_SOURCES: tuple[str, ...] = ("sglang/srt/mem_cache", "sglang/srt/managers/cache_controller.py")
"""What of a release a backend run uses: its HiCache modules (digested for the bundle)."""


def _sglang_root(release: str) -> Optional[Path]:
    from hicache_contracts.sglang_release import release_dir

    try:
        folder = release_dir(release)
    except ValueError:
        return None
    if (folder / "sglang").is_dir():
        return folder
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is not None and spec.origin:
        return Path(spec.origin).resolve().parents[1]
    return None


def sglang_provenance(release: Optional[str]) -> Optional[dict[str, Any]]:
    """Return the release and the digests of what was used of it (None: the contract models, no release)."""
    if not release:
        return None
    root = _sglang_root(release)
    sources = None
    if root is not None:
        digest = hashlib.sha256()
        for part in SGLANG_SOURCES:
            target = root / part
            paths = sorted(target.rglob("*.py")) if target.is_dir() else [target] if target.is_file() else []
            for path in paths:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        sources = digest.hexdigest()
    return {
        "release": release,
        "hicache_sources_sha256": sources,
        "hicache_sources": list(SGLANG_SOURCES),
        "wheel_sha256": _wheel_digest(root, release),
    }


WHEEL_DIGEST_FILE = "wheel.sha256"
"""Beside an unpacked release's ``sglang`` folder: the SHA-256 of the wheel it was unpacked from, when recorded."""


def _wheel_digest(root: Optional[Path], release: str) -> Optional[str]:
    """The release wheel's SHA-256: recorded beside the unpacked release, or of a wheel file kept beside it."""
    if root is None:
        return None
    recorded = root / WHEEL_DIGEST_FILE
    if recorded.is_file():
        text = recorded.read_text(encoding="utf-8").split()
        if text and len(text[0]) == 64:
            return text[0]
    wheels = sorted(root.glob(f"sglang-{release}-*.whl")) + sorted(root.parent.glob(f"sglang-{release}-*.whl"))
    return hashlib.sha256(wheels[0].read_bytes()).hexdigest() if wheels else None


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _section_entry(section: ReportSection) -> dict[str, Any]:
    counts: dict[str, dict[str, int]] = {}
    for verdict in section.clauses:
        level = counts.setdefault(verdict.level, {status: 0 for status in STATUSES})
        level[verdict.status] = level.get(verdict.status, 0) + 1
    return {
        "title": section.title,
        "subject": section.subject,
        "claimed_levels": [level.level for level in section.levels if level.claimed],
        "declared_levels": [level.level for level in section.levels if level.claimed and level.source != "probed"],
        "not_claimed": {level.level: level.reason or "" for level in section.levels if not level.claimed},
        "not_supported": list(section.options.get("not_supported") or ()),
        "engine": next((note for note in section.notes if note.startswith("engine: ")), None),
        "levels": {
            level.level: {"claimed": level.claimed, "source": level.source, "clauses": counts.get(level.level, {})}
            for level in section.levels
        },
    }


def manifest(
    report: SuiteReport,
    problems: list[str],
    *,
    product: Product,
    expected: tuple[ExpectedFailure, ...] = (),
    baseline: Optional[Baseline] = None,
) -> dict[str, Any]:
    """Return the ``submission.json`` document of ``report`` (without the file digests; every text redacted)."""
    from hicache_spec.releases import SGLANG_RELEASES

    problems = [redact(problem, report.secrets) for problem in problems]

    options = report.sections[0].options if report.sections else {}
    release = next((s.options.get("sglang_release") for s in report.sections if s.options.get("sglang_release")), None)
    versions = {"hicache-conform": tool_version(), "python": sys.version.split()[0], "platform": platform.platform()}
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch"] = str(getattr(torch, "__version__", ""))
    validity = (
        {"releases": [release], "basis": f"the backend received SGLang {release}'s own objects"}
        if release
        else {
            "releases": list(SGLANG_RELEASES),
            "basis": "no release was importable: the contract models stood in for every pinned release",
        }
    )
    return {
        "schema": SCHEMA,
        "kind": "hicache-l3-conformance-submission",
        "product": product.to_dict(),
        "suite": {
            "name": "hicache-spec",
            "version": tool_version(),
            "git": suite_commit(),
            "registry_sha256": registry_digest(),
        },
        "sglang": sglang_provenance(release),
        "engine_tier": ENGINE_TIERS[0] if release else ENGINE_TIERS[1],
        "seed": options.get("seed"),
        "profile": options.get("profile"),
        "checks": options.get("checks"),
        "interrupted": report.interrupted,
        "sections": [_section_entry(section) for section in report.redacted().sections],
        "validity": validity,
        "expected_failures": [entry.to_dict() for entry in expected],
        "baseline": baseline.to_dict() if baseline is not None else None,
        "certified": not problems,
        "problems": problems,
        "versions": versions,
    }


def write_bundle(
    report: SuiteReport,
    directory: str,
    problems: list[str],
    *,
    product: Optional[Product] = None,
    expected: tuple[ExpectedFailure, ...] = (),
    baseline: Optional[Baseline] = None,
) -> list[Path]:
    """Write the results bundle into ``directory`` (made if missing); return the files written, manifest last."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    renders = {"report.json": report.to_json, "junit.xml": report.to_junit_xml, "report.md": report.to_markdown}
    written = []
    digests = {}
    for name in FILES:
        text = renders[name]()
        path = folder / name
        path.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
        digests[name] = _file_digest(path)
        written.append(path)
    document = manifest(report, problems, product=product or Product(), expected=expected, baseline=baseline)
    document["files"] = digests
    path = folder / MANIFEST
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    written.append(path)
    return written


# ------------------------------------------------------------------ verification
def expected_failure_passes(target: str) -> str:
    """The certification problem of an expected failure whose clause or check now passes."""
    return f"the expected failure {target} now passes: the defect is fixed, remove its entry"


def sections_from_json(document: dict[str, Any]) -> tuple[ReportSection, ...]:
    """Return the report sections of a parsed ``report.json``; raise KeyError/TypeError/ValueError when malformed."""
    sections = []
    for item in document["sections"]:
        levels = tuple(
            LevelVerdict(level["level"], bool(level["claimed"]), level["source"], level.get("reason"))
            for level in item["levels"]
        )
        clauses = tuple(
            ClauseVerdict(
                verdict["id"],
                verdict["level"],
                verdict.get("statement", ""),
                verdict["status"],
                verdict.get("reason"),
                tuple(Failure(f["check"], f.get("message", ""), f.get("counterexample")) for f in verdict["failures"]),
                tuple(verdict.get("checks", ())),
            )
            for verdict in item["clauses"]
        )
        checks = tuple(
            CheckOutcome(
                outcome["check"],
                tuple(outcome["clauses"]),
                outcome["status"],
                outcome.get("clause"),
                outcome.get("message"),
                outcome.get("counterexample"),
                float(outcome.get("duration_s", 0.0)),
                outcome.get("needs"),
            )
            for outcome in item.get("checks", ())
        )
        for verdict in clauses:
            if verdict.status not in STATUSES:
                raise ValueError(f"{item['title']}: {verdict.clause_id}: status {verdict.status!r}")
        sections.append(ReportSection(item["title"], item["subject"], levels, clauses, checks, item.get("options", {})))
    return tuple(sections)


def _junit_statuses(text: str) -> dict[str, dict[str, str]]:
    root = ElementTree.fromstring(text)
    found: dict[str, dict[str, str]] = {}
    for suite in root.iter("testsuite"):
        if suite.get("name") == "interrupted":
            continue
        cases = found.setdefault(suite.get("name", ""), {})
        for case in suite.iter("testcase"):
            if case.find("failure") is not None:
                status = "fail"
            elif case.find("error") is not None:
                status = "error"
            elif case.find("skipped") is not None:
                status = "skip"
            else:
                status = "pass"
            cases[case.get("name", "")] = status
    return found


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": str,
    "product": dict,
    "suite": dict,
    "engine_tier": str,
    "profile": str,
    "sections": list,
    "validity": dict,
    "expected_failures": list,
    "certified": bool,
    "problems": list,
    "files": dict,
}


SuiteExpectations = Callable[[], tuple[tuple[str, ...], tuple[str, ...]]]
"""Another suite's (clause IDs, check names) that each section of it must hold a verdict and an outcome for."""


def verify_bundle(directory: str, suites: Optional[Mapping[str, SuiteExpectations]] = None) -> list[str]:
    """Return every problem of the bundle in ``directory`` (empty: it is intact and certified).

    ``suites``: what a section of another suite (its ``suite`` option, e.g. ``linker``) must hold; a section of a
    suite not given is a problem. The backend suite's own needs nothing here."""
    folder = Path(directory)
    path = folder / MANIFEST
    if not folder.is_dir():
        return [f"{directory}: is not a folder"]
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        return [f"{MANIFEST}: cannot be read ({error.strerror or error})"]
    except json.JSONDecodeError as error:
        return [f"{MANIFEST}: is not JSON ({error})"]
    if not isinstance(document, dict):
        return [f"{MANIFEST}: must be a JSON object"]
    problems: list[str] = []
    for key, kind in _REQUIRED.items():
        if not isinstance(document.get(key), kind):
            problems.append(f"{MANIFEST}: {key}: missing or not a {getattr(kind, '__name__', kind)}")
    if problems:
        return problems
    if document["schema"] != SCHEMA:
        return [f"{MANIFEST}: schema: must be {SCHEMA!r} (got {document['schema']!r})"]
    problems += _verify_provenance(document)
    problems += _verify_files(folder, document["files"])
    try:
        entries = entries_from_data(document["expected_failures"], source=f"{MANIFEST}: expected_failures")
    except ValueError as error:
        problems.append(str(error))
        entries = ()
    try:
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        sections = sections_from_json(report)
    except (OSError, ValueError, KeyError, TypeError) as error:
        problems.append(f"report.json: cannot be read as a report ({type(error).__name__}: {error})")
        return problems
    try:
        junit = _junit_statuses((folder / "junit.xml").read_text(encoding="utf-8"))
    except (OSError, ElementTree.ParseError) as error:
        problems.append(f"junit.xml: cannot be read as JUnit XML ({error})")
    else:
        problems += _compare_junit(sections, junit)
    release = (document.get("sglang") or {}).get("release") if isinstance(document.get("sglang"), dict) else None
    fresh = compare_with_baseline(SuiteReport(sections), entries, release=release)
    problems += _verify_verdicts(
        document, report, sections, entries, now_passing=fresh.now_passing, suites=suites or {}
    )
    problems += _verify_baseline(document, fresh)
    return problems


def _verify_baseline(document: dict[str, Any], baseline: Baseline) -> list[str]:
    """Name each list of the manifest's baseline that a fresh reading of report.json against its entries differs from."""
    recorded = document.get("baseline")
    if recorded is None:
        return []
    if not isinstance(recorded, dict):
        return [f"{MANIFEST}: baseline: must be an object or null"]
    fresh = baseline.to_dict()
    return [
        f"{MANIFEST}: baseline.{key}: {recorded.get(key)!r}, but report.json read against the expected failures "
        f"gives {fresh[key]!r}"
        for key in ("still_failing", "now_passing", "unexpected")
        if list(recorded.get(key) or []) != fresh[key]
    ]


def _verify_provenance(document: dict[str, Any]) -> list[str]:
    from hicache_spec.releases import SGLANG_RELEASES

    problems = []
    product = Product(**{k: v for k, v in document["product"].items() if k in Product.__dataclass_fields__})
    for name in product.missing():
        problems.append(
            f"{MANIFEST}: product.{name}: must be given (--product PRODUCT.yaml or --{name.replace('_', '-')})"
        )
    suite = document["suite"]
    digest = registry_digest()
    if suite.get("registry_sha256") != digest:
        problems.append(
            f"{MANIFEST}: suite.registry_sha256: the bundle was made against another clause registry than this "
            f"suite's (bundle {suite.get('registry_sha256')!r}, suite {tool_version()} {digest!r}); verify with "
            f"hicache-spec {suite.get('version')!r}"
        )
    if document["engine_tier"] not in ENGINE_TIERS:
        problems.append(f"{MANIFEST}: engine_tier: must be one of {', '.join(ENGINE_TIERS)}")
    sglang = document.get("sglang")
    if document["engine_tier"] == ENGINE_TIERS[0] and not (isinstance(sglang, dict) and sglang.get("release")):
        problems.append(f"{MANIFEST}: sglang.release: an sglang-release run must name its release")
    releases = document["validity"].get("releases")
    if not isinstance(releases, list) or not releases or any(item not in SGLANG_RELEASES for item in releases):
        problems.append(f"{MANIFEST}: validity.releases: must list pinned SGLang releases (got {releases!r})")
    elif isinstance(sglang, dict) and sglang.get("release") and releases != [sglang.get("release")]:
        problems.append(f"{MANIFEST}: validity.releases: a run with SGLang {sglang.get('release')} holds for it only")
    return problems


def _verify_files(folder: Path, digests: dict[str, Any]) -> list[str]:
    problems = []
    for name in FILES:
        path = folder / name
        if name not in digests:
            problems.append(f"{MANIFEST}: files.{name}: no digest recorded")
        elif not path.is_file():
            problems.append(f"{name}: missing from the bundle")
        elif _file_digest(path) != digests[name]:
            problems.append(f"{name}: its SHA-256 does not match {MANIFEST} (the file was changed after the run)")
    for name in sorted(set(digests) - set(FILES)):
        problems.append(f"{MANIFEST}: files.{name}: not a file of a bundle")
    return problems


def _compare_junit(sections: tuple[ReportSection, ...], junit: dict[str, dict[str, str]]) -> list[str]:
    problems = []
    titles = {section.title for section in sections}
    for name in sorted(set(junit) - titles):
        problems.append(f"junit.xml and report.json disagree: test suite {name!r} is not a section of report.json")
    for section in sections:
        cases = junit.get(section.title)
        if cases is None:
            problems.append(f"junit.xml and report.json disagree: no test suite for {section.title!r}")
            continue
        json_statuses = {verdict.clause_id: verdict.status for verdict in section.clauses}
        for clause_id in sorted(set(json_statuses) | set(cases)):
            left, right = cases.get(clause_id, "absent"), json_statuses.get(clause_id, "absent")
            if left != right:
                problems.append(
                    f"junit.xml and report.json disagree: {section.title}: {clause_id} is {left} in junit.xml, "
                    f"{right} in report.json"
                )
    return problems


def _verify_verdicts(
    document: dict[str, Any],
    report: dict[str, Any],
    sections: tuple[ReportSection, ...],
    entries: Any,
    *,
    now_passing: tuple[str, ...] = (),
    suites: Mapping[str, SuiteExpectations],
) -> list[str]:
    problems = []
    recomputed: list[str] = [expected_failure_passes(target) for target in now_passing]
    if document["profile"] == "smoke":
        recomputed.append("the smoke profile is for CI; certify with --profile standard or exhaustive")
    if document.get("checks"):
        recomputed.append("only some checks ran; certify runs every check")
    if report.get("interrupted") or document.get("interrupted"):
        recomputed.append("the run was interrupted")
    for section in sections:
        if not section.title.startswith("reference controller"):
            recomputed += section_problems(section, {entry.target: entry for entry in entries})
            problems += _missing_from(section, selection=bool(document.get("checks")), suites=suites)
        options = section.options
        for key in ("seed", "profile"):
            if key in options and options.get(key) != document.get(key):
                problems.append(
                    f"{MANIFEST}: {key}: {document.get(key)!r}, but report.json's {section.title} ran with "
                    f"{options.get(key)!r}"
                )
    manifest_titles = [item.get("title") for item in document["sections"] if isinstance(item, dict)]
    if manifest_titles != [section.title for section in sections]:
        problems.append(f"{MANIFEST}: sections: {manifest_titles} are not report.json's sections")
    else:
        for entry, section in zip(document["sections"], sections):
            claimed = [level.level for level in section.levels if level.claimed]
            if entry.get("claimed_levels") != claimed:
                problems.append(
                    f"{MANIFEST}: {section.title}: claimed_levels {entry.get('claimed_levels')} are not the levels "
                    f"report.json claims ({claimed})"
                )
    if document["certified"] and recomputed:
        problems.append(f"{MANIFEST}: certified is true, but the report shows {len(recomputed)} problem(s):")
    problems += [f"not certifiable: {item}" for item in dict.fromkeys(recomputed)]
    if not document["certified"] and not recomputed and not problems:
        problems.append(f"{MANIFEST}: certified is false although the report shows no problem")
    return problems


def _missing_from(section: ReportSection, *, selection: bool, suites: Mapping[str, SuiteExpectations]) -> list[str]:
    """Name each clause of a claimed level, and each check of the suite, that the report does not hold."""
    from hicache_contracts.conformance.framework import ordered_checks
    from hicache_contracts.conformance.levels import BACKEND_LEVELS, level_clause_ids

    problems = []
    present = {verdict.clause_id for verdict in section.clauses}
    suite = section.options.get("suite")
    if suite is not None and suite not in suites:
        return [f"report.json: {section.title}: a section of the {suite} suite, which this verification does not know"]
    other = suites[suite]() if suite is not None else None  # another suite's clauses and checks
    for level in section.levels:
        if not level.claimed or (level.level not in BACKEND_LEVELS and other is None):
            continue
        for clause_id in other[0] if other is not None else level_clause_ids(level.level):
            if clause_id not in present:
                problems.append(
                    f"report.json: {section.title}: {clause_id} of claimed level {level.level} has no verdict"
                )
    if not selection:
        ran = {outcome.check for outcome in section.checks}
        for name in other[1] if other is not None else [check.name for check in ordered_checks()]:
            if name not in ran:
                problems.append(f"report.json: {section.title}: check {name} has no outcome")
    return problems
