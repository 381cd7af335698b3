"""``hicache-conform run``: the backend suite from the command line.

    hicache-conform run --backend my_pkg.store:MyStore --extra-config '{"endpoint": "..."}'
    hicache-conform run --extra-config @sglang-extra-config.json   # module_path + class_name inside
    hicache-conform run                                            # the reference backends

Exit status: 0 when no clause failed, 1 when one did, 2 for a usage error
(bad option, backend not importable).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, TextIO

from hicache_contracts.conformance.framework import ordered_checks
from hicache_contracts.conformance.levels import BACKEND_LEVELS, parse_levels
from hicache_contracts.conformance.loading import parse_extra_config, resolve_factory
from hicache_contracts.conformance.options import PROFILES, SuiteOptions
from hicache_contracts.conformance.report import FAIL, SuiteReport
from hicache_contracts.host_pool import KINDS, LAYOUTS

__all__ = ["build_options", "install", "run_command"]


def install(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` subcommand to ``hicache-conform``."""
    parser = subparsers.add_parser(
        "run", help="check a storage backend against the contract (default: the reference backends)",
        description="Run the backend conformance suite. Without --backend (and without module_path/class_name "
                    "in --extra-config) it checks the reference memory and file backends.",
    )
    parser.add_argument("--backend", metavar="MODULE:CLASS",
                        help="the backend class, built as cls(storage_config, {}) like an SGLang dynamic backend")
    parser.add_argument("--extra-config", metavar="JSON|@FILE",
                        help="the object SGLang's --hicache-storage-backend-extra-config takes: JSON text, or "
                             "@path to a .json, .toml or .yaml file; may hold module_path and class_name")
    parser.add_argument("--model-name", default="hicache-conform",
                        help="base of the run's model name; a random run suffix is always added (default: %(default)s)")
    parser.add_argument("--page-size", type=int, default=64, help="tokens per page (default: %(default)s)")
    parser.add_argument("--layout", choices=LAYOUTS, default="layer_first", help="host pool layout")
    parser.add_argument("--kind", choices=sorted(KINDS), default="mha", help="host pool kind")
    parser.add_argument("--levels", metavar="LEVEL,...",
                        help=f"levels the backend claims, from {','.join(BACKEND_LEVELS)} (default: the class "
                             "attribute hicache_levels, else probed)")
    parser.add_argument("--profile", choices=list(PROFILES), default="standard",
                        help="how hard to look (default: %(default)s)")
    parser.add_argument("--seed", type=int, help="seed of every random choice (default: a fresh one, printed)")
    parser.add_argument("--may-evict", action="store_true", default=None,
                        help="the backend may drop pages it accepted (default: class attribute hicache_may_evict)")
    parser.add_argument("--check", action="append", metavar="NAME", dest="checks",
                        help="run only this check (repeatable; see --list-checks)")
    parser.add_argument("--list-checks", action="store_true", help="list the checks and their clauses, then exit")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="bound on any wait for the backend (default: %(default)s)")
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON")
    parser.add_argument("--junit-xml", metavar="PATH", help="write the report as JUnit XML (a test case per clause)")
    parser.add_argument("--markdown", metavar="PATH", help="write the report as a Markdown table")
    parser.add_argument("--no-engine", action="store_true",
                        help="without --backend: skip the reference controller's engine check")
    parser.add_argument("--quiet", action="store_true", help="no progress lines while running")
    parser.add_argument("--no-color", action="store_true", help="no colors in the terminal report")
    parser.set_defaults(func=run_command)


def build_options(args: argparse.Namespace) -> SuiteOptions:
    """Return the suite options the arguments describe; raise ValueError naming the bad one."""
    checks = tuple(args.checks) if args.checks else None
    if checks is not None:
        known = {check.name for check in ordered_checks()}
        for name in checks:
            if name not in known:
                raise ValueError(f"--check: must name a check from --list-checks (got {name!r})")
    return SuiteOptions(
        model_name=args.model_name, page_size=args.page_size, layout=args.layout, kind=args.kind,
        levels=parse_levels(args.levels, field="--levels"), profile=args.profile, seed=args.seed,
        may_evict=args.may_evict, checks=checks, timeout_s=args.timeout,
        extra={"backend": args.backend} if args.backend else {},
    )


class _ProgressPrinter:
    """Prints one line per check, or, on a terminal, one line rewritten in place."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.live = hasattr(stream, "isatty") and stream.isatty()

    def announce(self, title: str) -> None:
        if not self.quiet:
            print(f"checking {title} ...", file=self.stream, flush=True)

    def __call__(self, position: int, total: int, check: Any, outcome: Any) -> None:
        if self.quiet:
            return
        clauses = ",".join(check.clauses)
        line = (f"  [{position:>2}/{total}] {outcome.status:<4} {outcome.duration_s:6.2f} s  "
                f"{check.name} ({clauses})")
        if self.live:
            end = "\n" if position == total or outcome.status == FAIL else ""
            print("\r\033[K" + line[:150], end=end, file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)


def run_command(args: argparse.Namespace, *, stream: Optional[TextIO] = None) -> int:
    """Run the suite as the arguments say; print the report; write the files asked for; return the exit status."""
    stream = stream or sys.stdout
    if args.list_checks:
        for check in ordered_checks():
            print(f"{check.name:<56} {','.join(check.clauses):<28} {check.summary}", file=stream)
        return 0
    try:
        options = build_options(args)
        extra_config = parse_extra_config(args.extra_config)
        uses_vendor = bool(args.backend) or bool(extra_config and (extra_config.get("module_path")
                                                                    or extra_config.get("class_name")))
        factory = resolve_factory(args.backend, extra_config) if uses_vendor else None
    except ValueError as error:
        print(f"hicache-conform run: {error}", file=sys.stderr)
        return 2
    printer = _ProgressPrinter(stream, args.quiet)
    if factory is not None:
        from hicache_contracts.conformance.runner import run_suite

        printer.announce(f"backend {factory.name}")
        report = run_suite(factory, options, progress=printer)
    else:
        from hicache_contracts.conformance.runner import run_reference_suite

        report = run_reference_suite(options, progress=printer, announce=printer.announce)
        if not args.no_engine:
            from hicache_contracts.conformance.engine_section import reference_engine_section

            printer.announce("reference controller (engine conformance)")
            report = report.merged(reference_engine_section())
    print(file=stream)
    print(report.render_text(color=False if args.no_color else None), file=stream)
    _write_files(report, args, stream)
    return report.exit_code


def _write_files(report: SuiteReport, args: argparse.Namespace, stream: TextIO) -> None:
    for path, render in ((args.json, report.to_json), (args.junit_xml, report.to_junit_xml),
                         (args.markdown, report.to_markdown)):
        if path:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render(), encoding="utf-8")
            print(f"wrote {target}", file=stream)

