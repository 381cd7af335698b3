"""``hicache-conform trace FILE.json``: check a recorded engine trace (installed by hicache_contracts.cli).

    hicache-conform trace trace.json --junit-xml trace.xml --markdown TRACE.md
    hicache-conform trace trace.json --sglang-version 0.5.23
    hicache-conform trace --schema > hicache-trace.schema.json

Exit codes: 0 when every operation conforms, 1 when any breaks a clause,
2 when the file cannot be read or is not a valid trace (or no file is given).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from hicache_contracts.engine._trace_source import MAX_TRACE_BYTES
from hicache_contracts.errors import ContractViolation

__all__ = ["install", "run_trace_command"]


def install(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``trace`` subcommand."""
    parser = subparsers.add_parser(
        "trace",
        help="check a recorded engine trace (JSON, format hicache-trace/1) against the engine-side clauses",
        description="Check every operation of a trace file; print clause / where / message for each violation.",
    )
    parser.add_argument(
        "file", metavar="FILE.json", nargs="?", help="the trace file (see docs/engines.md for the format)"
    )
    parser.add_argument("--json", action="store_true", help="print the reports as JSON instead of tables")
    parser.add_argument("--statements", action="store_true", help="print each violated clause's statement")
    parser.add_argument(
        "--junit-xml",
        metavar="PATH",
        help="also write the verdicts as JUnit XML (a test suite per operation, a case per clause)",
    )
    parser.add_argument("--markdown", metavar="PATH", help="also write the verdicts as Markdown tables")
    parser.add_argument(
        "--sglang-version",
        metavar="V",
        help="judge the trace as pinned SGLang release V: findings its divergence registry records "
        "are shown as divergences and do not fail the verdict",
    )
    parser.add_argument(
        "--max-bytes",
        metavar="N",
        type=_max_bytes,
        default=MAX_TRACE_BYTES,
        help=f"largest trace file read, in bytes (default {MAX_TRACE_BYTES}: 1 GiB; 0 reads any size); only "
        "regular files are read, never a FIFO or a device",
    )
    parser.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of the trace format (TraceDocument) and exit"
    )
    parser.set_defaults(func=run_trace_command)


def _max_bytes(text: str) -> Optional[int]:
    """``--max-bytes``: an int >= 0, 0 meaning no limit."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an int >= 0, 0 reading any size (got {text!r})")
    return value or None


def run_trace_command(args: argparse.Namespace) -> int:
    """Check the trace file named by ``args.file``; return the exit code."""
    from hicache_contracts.engine._checker import check_operation
    from hicache_contracts.engine._trace import TraceDocument
    from hicache_contracts.engine._trace_stream import iter_trace_operations
    from hicache_contracts.engine._trace_files import reports_to_junit_xml, reports_to_markdown

    if args.schema:
        print(json.dumps(TraceDocument.model_json_schema(), indent=2))
        return 0
    if not args.file:
        print("hicache-conform trace: FILE.json: must be given (or --schema)", file=sys.stderr)
        return 2
    operations = iter_trace_operations(Path(args.file), max_bytes=getattr(args, "max_bytes", MAX_TRACE_BYTES))
    reports = []  # checked one operation at a time: memory stays a small multiple of the file's size
    while True:
        try:
            operation = next(operations, None)
        except ContractViolation as error:
            print(f"{args.file}: not a valid trace: {error}", file=sys.stderr)
            return 2
        if operation is None:
            break
        try:
            reports.append(check_operation(operation, sglang_version=args.sglang_version))
        except ContractViolation as error:
            print(f"hicache-conform trace: --sglang-version: {error}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps([report.model_dump(mode="json") for report in reports], indent=2))
    else:
        for number, report in enumerate(reports):
            name = report.operation_id if report.operation_id is not None else number
            print(f"operation {name}:")
            print(report.format_table(statements=args.statements))
            print()
        failed = sum(not report.ok for report in reports)
        print(f"{len(reports) - failed} of {len(reports)} operation(s) conform")
    source = Path(args.file).name
    for path, render in ((args.junit_xml, reports_to_junit_xml), (args.markdown, reports_to_markdown)):
        if path:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render(reports, source=source), encoding="utf-8")
            print(f"wrote {target}", file=sys.stderr if args.json else sys.stdout)
    return 0 if all(report.ok for report in reports) else 1
