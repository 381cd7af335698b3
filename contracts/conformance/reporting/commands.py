"""``hicache-conform verify-submission`` and ``hicache-conform matrix``: reading results bundles.

hicache-conform verify-submission DIR      # exit 0: intact and certified; 1: each problem named
hicache-conform matrix DIR... --markdown docs/matrix.md --html docs/matrix.html [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

if TYPE_CHECKING:
    from hicache_contracts.conformance.reporting.bundle import SuiteExpectations

__all__ = ["install"]


def install(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    suites: Optional[Mapping[str, SuiteExpectations]] = None,
) -> None:
    """Add ``verify-submission`` and ``matrix`` to ``hicache-conform``; ``suites``: what sections of the other suites
    must hold (``bundle.verify_bundle``)."""
    verify = subparsers.add_parser(
        "verify-submission",
        help="re-check a results bundle: schema, digests, no skipped claimed clause, JUnit and JSON agree",
        description="Re-check a results bundle written by `hicache-conform run --certify DIR`: the manifest's "
        "schema and provenance, each file's SHA-256, the clause registry's digest against this suite's, "
        "every claimed clause ran and passed, junit.xml and report.json agree, the expected failures are "
        "well-formed. Exit 0 when it is intact and certified, 1 naming each problem.",
    )
    verify.add_argument("directory", metavar="DIR", help="the bundle's folder")
    verify.set_defaults(func=_cmd_verify, suites=suites or {})
    matrix = subparsers.add_parser(
        "matrix",
        help="render results bundles into one Markdown and one HTML page (backend x release x level)",
        description="Render results bundles into a matrix: a row per backend and SGLang release, a column per "
        "level, each cell linking its failures. Without --markdown or --html the Markdown is printed.",
    )
    matrix.add_argument("directories", metavar="DIR", nargs="+", help="bundle folders (or folders of bundles)")
    matrix.add_argument("--markdown", metavar="PATH", help="write the Markdown page to PATH")
    matrix.add_argument("--html", metavar="PATH", help="write the HTML page to PATH")
    matrix.add_argument("--title", default="Conformance results", help="the pages' title (default: %(default)s)")
    matrix.add_argument(
        "--check", action="store_true", help="exit 1 if --markdown or --html differ from a fresh render (write nothing)"
    )
    matrix.set_defaults(func=_cmd_matrix)


def _cmd_verify(args: argparse.Namespace) -> int:
    from hicache_contracts.conformance.reporting.bundle import verify_bundle

    problems = verify_bundle(args.directory, args.suites)
    if problems:
        print(f"{args.directory}: refused ({len(problems)} problem{'s' if len(problems) != 1 else ''}):")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(f"{args.directory}: verified: intact, and every check of every claimed level ran and passed")
    return 0


def _cmd_matrix(args: argparse.Namespace) -> int:
    from hicache_contracts.conformance.reporting.matrix import find_bundles, load_rows, render_html, render_markdown

    try:
        rows = load_rows(find_bundles(args.directories))
    except ValueError as error:
        print(f"hicache-conform matrix: {error}", file=sys.stderr)
        return 2
    outputs = []
    if args.markdown:
        outputs.append((Path(args.markdown), render_markdown(rows, args.title, _relative(args.markdown))))
    if args.html:
        outputs.append((Path(args.html), render_html(rows, args.title, _relative(args.html))))
    if not outputs:
        if args.check:
            print("hicache-conform matrix: --check needs --markdown or --html", file=sys.stderr)
            return 2
        sys.stdout.write(render_markdown(rows, args.title, _relative(".")))
        return 0
    stale = False
    for path, text in outputs:
        if args.check:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                print(f"{path}: stale; regenerate: run the same command without --check", file=sys.stderr)
                stale = True
            else:
                print(f"{path}: up to date")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 1 if stale else 0


def _relative(output: str) -> Path:
    """The folder the page is written into: links to bundles are made relative to it."""
    return Path(output).resolve().parent if output != "." else Path.cwd()
