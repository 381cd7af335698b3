"""The ``hicache-conform`` command line.

Subcommands:
  clauses   print the clause registry summary (count per family and level)
  spec      render docs/spec.md from the registry (``--check`` fails when stale)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

__all__ = ["main", "register_subcommand"]

_EXTRA_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def register_subcommand(installer: Callable[[argparse._SubParsersAction], None]) -> None:
    """Register a function that adds a subcommand parser (its ``func`` default runs it)."""
    _EXTRA_SUBCOMMANDS.append(installer)


def _cmd_clauses(args: argparse.Namespace) -> int:
    from hicache_spec.render import summarize

    print(summarize())
    return 0


def _cmd_spec(args: argparse.Namespace) -> int:
    from hicache_spec.render import render_markdown

    text = render_markdown()
    if args.check:
        path = Path(args.check)
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(
                f"{path}: stale; regenerate with `hicache-conform spec --write {path}`",
                file=sys.stderr,
            )
            return 1
        print(f"{path}: up to date")
        return 0
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write}")
        return 0
    sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hicache-conform",
        description="Check HiCache L3 storage backends and engines against the contract.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    clauses_parser = sub.add_parser("clauses", help="print the clause registry summary")
    clauses_parser.set_defaults(func=_cmd_clauses)
    spec_parser = sub.add_parser("spec", help="render the normative document from the registry")
    group = spec_parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", help="write the document to PATH")
    group.add_argument("--check", metavar="PATH", help="exit 1 if PATH differs from a fresh render")
    spec_parser.set_defaults(func=_cmd_spec)
    _install_optional_subcommands(sub)
    return parser


def _install_optional_subcommands(sub: argparse._SubParsersAction) -> None:
    for module_name in ("hicache_contracts.conformance.cli", "hicache_contracts.engine.cli"):
        try:
            module = __import__(module_name, fromlist=["install"])
        except ModuleNotFoundError as error:
            if error.name != module_name:
                raise
            continue
        module.install(sub)
    for installer in _EXTRA_SUBCOMMANDS:
        installer(sub)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
