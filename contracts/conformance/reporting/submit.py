"""What ``hicache-conform run`` adds for certification: the options, reading them, and the end of a run.

``add_arguments`` gives ``run`` its ``--certify``, ``--known-failures`` and
product manifest options; ``finish_run`` reads the report against the
expected failures (``expected``), decides certification (``certify``) and
writes the results bundle (``bundle``).
"""

from __future__ import annotations

from typing import Any, Optional

from hicache_contracts.conformance.reporting.bundle import Product, expected_failure_passes, write_bundle
from hicache_contracts.conformance.reporting.certify import certification_problems
from hicache_contracts.conformance.reporting.expected import (
    ExpectedFailure,
    compare_with_baseline,
    parse_expected_failures,
)
from hicache_contracts.conformance.reporting.redaction import redact
from hicache_contracts.conformance.reporting.report import SuiteReport

__all__ = ["PRODUCT_FLAGS", "add_arguments", "finish_run", "read_expected", "read_product"]


PRODUCT_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("vendor", "--vendor", "who makes the product"),
    ("product", "--product-name", "the product's name"),
    ("version", "--product-version", "the product version checked"),
    ("repository", "--repository", "where its source or release notes are"),
    ("contact", "--contact", "whom to ask about this result"),
)
"""The product manifest's fields, each with its ``run`` flag (``--product PRODUCT.yaml`` gives them all)."""


def add_arguments(parser: Any) -> None:
    """Add ``--certify``, ``--known-failures`` and the product manifest's options to ``hicache-conform run``."""
    parser.add_argument(
        "--certify",
        metavar="DIR",
        help="a certification run: every check of every claimed level must run and pass (no skip, no "
        "failure, no --check, not smoke, levels declared, product named); write the results bundle "
        "(submission.json, report.json, junit.xml, report.md) into DIR",
    )
    parser.add_argument(
        "--known-failures",
        metavar="FILE",
        help="expected failures, a YAML list of {clause or check, reason, link, until, note}: reported, not "
        "fatal; one that now passes fails the run (see docs/certification.md)",
    )
    group = parser.add_argument_group("product manifest (for --certify)")
    group.add_argument("--product", metavar="PRODUCT.yaml", dest="product_file", help="vendor, product, version, ...")
    for name, flag, text in PRODUCT_FLAGS:
        group.add_argument(flag, dest=f"product_{name}", metavar="TEXT", help=text)


def read_expected(path: Optional[str]) -> tuple[ExpectedFailure, ...]:
    """Return the entries of an expected-failures file (none without one); raise ValueError naming what is wrong."""
    if not path:
        return ()
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(
            f"--known-failures: must be a readable file ({error.strerror or error}) (got {path!r})"
        ) from None
    return parse_expected_failures(text)


def read_product(args: Any) -> Product:
    """Return the product manifest the run's arguments give; raise ValueError naming what is wrong."""
    flags = {name: getattr(args, f"product_{name}", None) for name, _, _ in PRODUCT_FLAGS}
    return Product.load(getattr(args, "product_file", None), **flags)


def finish_run(report: SuiteReport, args: Any, options: Any, expected: tuple[ExpectedFailure, ...], stream: Any) -> int:
    """Return a run's exit status after its expected failures and its certification bundle, if asked for.

    A report with no section, or one of a run that ended early, never exits 0.
    """
    status = report.exit_code
    baseline = None
    if getattr(args, "known_failures", None):
        baseline = compare_with_baseline(report, expected)
        for line in baseline.lines():
            print(line, file=stream)
        if not report.interrupted:
            status = baseline.exit_code or (3 if any(section.errored for section in report.sections) else 0)
    if not report.sections and status == 0:
        status = 1
    if getattr(args, "certify", None):
        product = read_product(args)
        problems = certification_problems(report, profile=options.profile, checks=options.checks, expected=expected)
        problems += [expected_failure_passes(target) for target in (baseline.now_passing if baseline else ())]
        problems = [redact(problem, report.secrets) for problem in problems]
        problems += [
            f"the product manifest has no {name} (--product PRODUCT.yaml or {flag})"
            for name, flag, _ in PRODUCT_FLAGS
            if name in product.missing()
        ]
        for path in write_bundle(report, args.certify, problems, product=product, expected=expected, baseline=baseline):
            print(f"wrote {path}", file=stream)
        if problems:
            print(f"not certified ({len(problems)} problem{'s' if len(problems) != 1 else ''}):", file=stream)
            for problem in problems[:40]:
                print(f"  - {problem}", file=stream)
            if len(problems) > 40:
                print(f"  ... and {len(problems) - 40} more (submission.json lists them all)", file=stream)
            return max(status, 1)
        print("certified: every check of every claimed level ran and passed", file=stream)
    return status
