"""The ``hicache-conform`` command line.

Subcommands:
  clauses   print the clause registry summary (clause count per family and the levels it spans)
  spec      render docs/spec.md from the registry (``--check`` fails when stale)
  divergences  render docs/divergences.md from the divergence registry (``--check`` fails when stale)
  methods   render docs/backend-methods.md from the protocols (``--check`` fails when stale)
  init      write a backend skeleton to fill in with storage calls
  run       the backend suite (``conformance.cli``)
  trace     check a recorded trace file (``engine.cli``)
  linker    the linker suite against a UnifiedCacheLinker (``linker.suite``)
  verify-submission  re-check a results bundle (``conformance.reporting.bundle``)
  matrix    render results bundles into a backend x release x level page (``conformance.reporting.matrix``)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from hicache_contracts.conformance.cli import install as install_run
from hicache_contracts.engine.cli import install as install_trace
from hicache_contracts.conformance.reporting.commands import install as install_bundles
from hicache_contracts.linker.suite import install as install_linker
from hicache_contracts.linker.reporting import SUITES as LINKER_SUITES

__all__ = ["main"]


def _cmd_clauses(args: argparse.Namespace) -> int:
    from hicache_spec.releases import UnknownReleaseError, check_release
    from hicache_spec.render import summarize

    version = getattr(args, "sglang_version", None)
    if version is not None:
        try:
            check_release(version)
        except UnknownReleaseError as error:
            print(f"hicache-conform clauses: --sglang-version: {error}", file=sys.stderr)
            return 2
    print(summarize(version))
    return 0


def _cmd_divergences(args: argparse.Namespace) -> int:
    from hicache_spec.divergences import render_divergences

    return _render_command(args, render_divergences(), "divergences")


def _cmd_spec(args: argparse.Namespace) -> int:
    from hicache_spec.render import render_markdown
    from hicache_contracts.clause_tests import TestMapError, clause_test_files

    if args.tests is not None and not Path(args.tests).is_dir():
        print(f"hicache-conform spec: --tests must name a folder of tests (got {args.tests!r})", file=sys.stderr)
        return 2
    try:
        tests = None if args.tests is None else clause_test_files(args.tests)
    except TestMapError as error:
        print(f"hicache-conform spec: --tests: {error}", file=sys.stderr)
        return 1
    return _render_command(args, render_markdown(tests=tests), "spec")


def _cmd_methods(args: argparse.Namespace) -> int:
    from hicache_contracts.methods import render_backend_methods

    return _render_command(args, render_backend_methods(), "methods")


def _cmd_init(args: argparse.Namespace) -> int:
    from hicache_contracts.linker.scaffold import LINKER_STORAGE_CALLS, write_linker_skeleton
    from hicache_contracts.scaffold import STORAGE_CALLS, class_name_for, write_skeleton

    write, calls = (write_linker_skeleton, LINKER_STORAGE_CALLS) if args.linker else (write_skeleton, STORAGE_CALLS)
    try:
        path = write(args.name, args.directory, args.class_name)
    except (ValueError, OSError) as error:
        print(f"hicache-conform init: {error}", file=sys.stderr)
        return 2
    class_name = args.class_name or class_name_for(args.name)
    command = (
        f"linker --linker {args.name}:{class_name}"
        if args.linker
        else (f"run --backend {args.name}:{class_name} --extra-config '{{}}'")
    )
    print(f"wrote {path}")
    print(
        f"next: fill in the {len(calls)} storage calls at the end of {path.name} ({', '.join(calls)}), "
        f"then run\n  hicache-conform {command}"
    )
    return 0


def _render_command(args: argparse.Namespace, text: str, command: str) -> int:
    """Write ``text`` to ``--write``, compare it with ``--check`` (1 when stale), or print it."""
    if args.check:
        path = Path(args.check)
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(
                f"{path}: stale; regenerate with `hicache-conform {command} --write {path}`",
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


def _add_render_command(
    sub: Any, name: str, help_text: str, func: Callable[..., int], what: str = "the document"
) -> Any:
    """A subcommand that renders a generated document: ``--write PATH`` or ``--check PATH`` (exit 1 if stale)."""
    command = sub.add_parser(name, help=help_text)
    group = command.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", help=f"write {what} to PATH")
    group.add_argument("--check", metavar="PATH", help="exit 1 if PATH differs from a fresh render")
    command.set_defaults(func=func)
    return command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hicache-conform",
        description="Check HiCache L3 storage backends and engines against the contract.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    clauses_parser = sub.add_parser(
        "clauses", help="print the clause count per family and the levels each family spans"
    )
    clauses_parser.add_argument(
        "--sglang-version",
        metavar="V",
        help="list the clauses that hold for pinned SGLang release V, with their releases",
    )
    clauses_parser.set_defaults(func=_cmd_clauses)
    _add_render_command(sub, "divergences", "render where released SGLang diverges from the clauses", _cmd_divergences)
    spec_parser = _add_render_command(sub, "spec", "render the normative document from the registry", _cmd_spec)
    spec_parser.add_argument(
        "--tests",
        metavar="DIR",
        help="list under each clause the test files in DIR that name it (the project's tests/)",
    )
    _add_render_command(
        sub, "methods", "render the backend-method reference from the protocols", _cmd_methods, "the reference"
    )
    init_parser = sub.add_parser(
        "init",
        help="write a backend skeleton NAME.py to fill in with storage calls",
        description="Write NAME.py: a backend class that follows the contract, and declares every level a "
        "backend of its shape passes, once its five storage calls (connect, store, fetch, contains, "
        "delete_namespace) are filled in.",
    )
    init_parser.add_argument("name", metavar="NAME", help="the module name, such as my_store")
    init_parser.add_argument(
        "--class", dest="class_name", metavar="CLASS", help="the class name (default: NAME in CamelCase)"
    )
    init_parser.add_argument("--directory", default=".", metavar="DIR", help="where to write (default: .)")
    init_parser.add_argument(
        "--linker",
        action="store_true",
        help="write a UnifiedCacheLinker skeleton instead, over five storage calls (connect, put_page, get_page, "
        "has_page, disconnect); check it with `hicache-conform linker`",
    )
    init_parser.set_defaults(func=_cmd_init)
    install_run(sub)
    install_trace(sub)
    install_linker(sub)
    install_bundles(sub, LINKER_SUITES)  # verify-submission (backend and linker bundles), matrix
    return parser


class _ReaderGoneStream:
    """Standard output that turns quiet once its reader has gone (``hicache-conform run ... | head``).

    The first write or flush that meets a broken pipe points the file
    descriptor at the null device, and every later write is dropped, so a
    run goes on to its end and exits with its own status.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                written: int = self._stream.write(text)
                return written
            except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
                self._silence()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                self._silence()

    def isatty(self) -> bool:
        return not self.reader_gone and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _silence(self) -> None:
        self.reader_gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())  # what is still buffered goes nowhere, quietly, at exit
            os.close(null)
        except (OSError, ValueError):
            pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command ``argv`` names; return its exit status (a closed or broken stdout does not change it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    original = sys.stdout
    if original is None:  # started with stdout closed: nothing is printed, the status still counts
        return int(args.func(args) or 0)
    guarded = _ReaderGoneStream(original)
    sys.stdout = guarded
    try:
        status = int(args.func(args) or 0)
        guarded.flush()
    finally:
        sys.stdout = original
    return status


INTERRUPTED = 130
"""The exit status of a run stopped by Ctrl-C."""


def entry() -> None:
    """The console script: ``main()``'s status as the process's exit status.

    An interrupted run ends the process at once (``os._exit``) once its
    report is out: a thread abandoned inside a backend call (possibly inside
    torch's native code) cannot be finalised safely, and letting the
    interpreter try can abort the process instead of exiting with 130. So
    does a run that leaves a non-daemon thread behind (the interpreter
    would wait for it for ever). ``run`` isolates the backend in a child
    process here (``--isolation process`` is the command's default).
    """
    import threading

    from hicache_contracts.conformance import cli as run_cli

    run_cli.ISOLATE_BY_DEFAULT = True
    status = main()
    lingering = [
        thread for thread in threading.enumerate() if not thread.daemon and thread is not threading.main_thread()
    ]
    if status == INTERRUPTED or lingering:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    entry()
