"""``hicache-conform run``: the backend suite from the command line.

    hicache-conform run --backend my_pkg.store:MyStore --extra-config '{"endpoint": "..."}'
    hicache-conform run --extra-config @sglang-extra-config.json   # module_path + class_name inside
    hicache-conform run                                            # the reference backends

Exit status: 0 when no clause failed, 1 when one did, 2 for a usage error
(bad option, backend not importable, a report file that cannot be written),
130 when the run was stopped with Ctrl-C (the partial report is printed and
written, marked interrupted; nothing is left in temporary directories or in
the backend's store).

Whatever the backend does, the run ends with a report. The command runs the
suite in a child process (``--isolation process``, the default of the
``hicache-conform`` command) and bounds it end to end by ``--deadline`` plus
a grace: a backend that ends that process (``os._exit``, a signal), blocks
it where no per-call deadline reaches (an endless iterator, a blocking
``__del__``), leaves a non-daemon thread or forks is stopped with the whole
process group it made, and the report holds what was reached, the check
under way failed with the reason, marked interrupted; the exit status is 1
(130 after a Ctrl-C). Output paths are made absolute before anything runs.

Secrets in the extra config (URL passwords, password and token options) are
redacted in every output (see ``redaction``).

``--certify DIR`` makes the run a certification run and writes its bundle
there; ``--known-failures FILE`` reports the clauses it names without
failing on them (see ``certify``). On a terminal, stderr shows a live line:
the check under way and how long it has been running.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import pickle
import random
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn, Optional, TextIO

from hicache_contracts.errors import bad_value
from hicache_contracts.sglang_release import ReleaseError, describe_choice, resolve_release
from hicache_contracts.conformance.framework import ordered_checks
from hicache_contracts.conformance.levels import BACKEND_LEVELS, parse_levels
from hicache_contracts.conformance.session.loading import parse_extra_config, resolve_factory
from hicache_contracts.conformance.running.main_job import MainJob, Subjects, load_main_job
from hicache_contracts.conformance.session.options import PROFILES, SuiteOptions, check_path
from hicache_contracts.conformance.reporting.redaction import redact, secret_values
from hicache_contracts.conformance.reporting.report import FAIL, SuiteReport
from hicache_contracts.conformance.running.runner import SuiteRunner
from hicache_contracts.conformance.session.deadline import raised_by_backend, watching_interrupts
from hicache_contracts.host_pool import KINDS, LAYOUTS

__all__ = ["build_options", "install", "run_command"]


def install(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` subcommand to ``hicache-conform``."""
    parser = subparsers.add_parser(
        "run",
        help="check a storage backend against the contract (default: the reference backends)",
        description="Run the backend conformance suite. Without --backend (and without module_path/class_name "
        "in --extra-config) it checks the reference memory and file backends.",
    )
    parser.add_argument(
        "--backend",
        metavar="MODULE:CLASS",
        help="the backend class, built as cls(storage_config, {}) like an SGLang dynamic backend",
    )
    parser.add_argument(
        "--extra-config",
        metavar="JSON|@FILE",
        help="the object SGLang's --hicache-storage-backend-extra-config takes: JSON text, or "
        "@path to a .json, .toml or .yaml file; may hold module_path and class_name",
    )
    parser.add_argument(
        "--model-name",
        default="hicache-conform",
        help="base of the run's model name; a random run suffix is always added (default: %(default)s)",
    )
    parser.add_argument("--page-size", type=int, default=64, help="tokens per page (default: %(default)s)")
    parser.add_argument("--layout", choices=LAYOUTS, default="layer_first", help="host pool layout")
    parser.add_argument("--kind", choices=sorted(KINDS), default="mha", help="host pool kind")
    parser.add_argument(
        "--levels",
        metavar="LEVEL,...",
        help=f"levels the backend claims, from {','.join(BACKEND_LEVELS)} (default: the class "
        "attribute hicache_levels, else probed)",
    )
    parser.add_argument(
        "--profile", choices=list(PROFILES), default="standard", help="how hard to look (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, help="seed of every random choice (default: a fresh one, printed)")
    parser.add_argument(
        "--may-evict",
        action="store_true",
        default=None,
        help="the backend may drop pages it accepted (default: class attribute hicache_may_evict)",
    )
    parser.add_argument(
        "--check",
        action="append",
        metavar="NAME",
        dest="checks",
        help="run only this check (repeatable; see --list-checks)",
    )
    parser.add_argument("--list-checks", action="store_true", help="list the checks and their clauses, then exit")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="bound on any wait for the backend (default: %(default)s)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="bound on the whole run, plus a grace to write the report of what was reached (default: "
        + ", ".join(f"{seconds / 3600:g} h for {name}" for name, seconds in RUN_DEADLINES_S.items())
        + "; needs --isolation process)",
    )
    parser.add_argument(
        "--isolation",
        choices=("process", "none"),
        help="process: run the backend in a child process, so that nothing it does keeps the run from ending "
        "(the default of the hicache-conform command); none: in this process",
    )
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON")
    parser.add_argument("--junit-xml", metavar="PATH", help="write the report as JUnit XML (a test case per clause)")
    parser.add_argument("--markdown", metavar="PATH", help="write the report as a Markdown table")
    parser.add_argument(
        "--no-engine", action="store_true", help="without --backend: skip the reference controller's engine check"
    )
    parser.add_argument(
        "--sglang-version",
        metavar="VERSION|none",
        help="whose objects the backend receives: a pinned SGLang release (installed, or its wheel "
        "fetched into the cache), or none for the contract models (default: the installed "
        "SGLang, else the contract models)",
    )
    parser.add_argument(
        "--sglang-config",
        metavar="JSON|@FILE",
        help="a dynamic backend as SGLang loads it: the JSON of --hicache-storage-backend-extra-config "
        "(backend_name, module_path, class_name, interface_v1, the backend's own keys); the pinned "
        "release's StorageBackendFactory builds it, its host-pool classes hold the pages, and the "
        "interface SGLang would drive is the one checked",
    )
    from hicache_contracts.conformance.reporting.submit import add_arguments as add_certify_arguments

    add_certify_arguments(parser)  # --certify, --known-failures and the product manifest
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
                raise bad_value("--check", "must name a check from --list-checks", name)
    try:
        return SuiteOptions(
            model_name=args.model_name,
            page_size=args.page_size,
            layout=args.layout,
            kind=args.kind,
            levels=parse_levels(args.levels, field="--levels"),
            profile=args.profile,
            seed=args.seed,
            may_evict=args.may_evict,
            checks=checks,
            timeout_s=args.timeout,
            sglang_version=getattr(args, "sglang_version", None),
            extra={"backend": args.backend} if args.backend else {},
        )
    except ValueError as error:  # name the option, not the field it sets
        text = str(error)
        for field_name, option in _OPTION_OF_FIELD.items():
            if text.startswith(f"SuiteOptions.{field_name}: "):
                raise ValueError(option + text[len("SuiteOptions." + field_name) :]) from None
        raise


_OPTION_OF_FIELD = {
    "model_name": "--model-name",
    "page_size": "--page-size",
    "layout": "--layout",
    "kind": "--kind",
    "levels": "--levels",
    "profile": "--profile",
    "seed": "--seed",
    "may_evict": "--may-evict",
    "checks": "--check",
    "timeout_s": "--timeout",
    "sglang_version": "--sglang-version",
}
"""The option that sets each ``SuiteOptions`` field: a usage error names what the user typed."""

_PATH_OPTIONS = (
    ("json", "--json"),
    ("junit_xml", "--junit-xml"),
    ("markdown", "--markdown"),
    ("certify", "--certify"),
    ("known_failures", "--known-failures"),
)
"""The options that name a file or folder: checked, and made absolute, before anything runs."""


def _check_paths(args: argparse.Namespace) -> None:
    """Refuse a path no file system could hold (a NUL byte, bytes that are not UTF-8), naming its option."""
    for attribute, option in _PATH_OPTIONS:
        value = getattr(args, attribute, None)
        if value:
            check_path(option, os.fspath(value))


def _make_paths_absolute(args: argparse.Namespace) -> None:
    """Make every output path absolute, so that a backend changing the working directory moves no report."""
    for attribute, _ in _PATH_OPTIONS[:4]:  # --known-failures is read before anything runs
        value = getattr(args, attribute, None)
        if value:
            setattr(args, attribute, os.path.abspath(os.fspath(value)))


class _ProgressPrinter:
    """Prints one line per check, or, on a terminal, one line rewritten in place; ``live_line`` shows the running one."""

    def __init__(self, stream: TextIO, quiet: bool, live_stream: Optional[TextIO] = None) -> None:
        from hicache_contracts.conformance.running.live import LiveLine

        self.stream = stream
        self.quiet = quiet
        self.live = hasattr(stream, "isatty") and stream.isatty()
        self.live_line = LiveLine(live_stream if live_stream is not None else sys.stderr, enabled=not quiet)

    def starting(self, position: int, total: int, check: Any) -> None:
        self.live_line.start(f"[{position:>2}/{total}] running {check.name}")

    def announce(self, title: str) -> None:
        if not self.quiet:
            print(f"checking {title} ...", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def __call__(self, position: int, total: int, check: Any, outcome: Any) -> None:
        self.live_line.clear()
        if self.quiet:
            return
        clauses = ",".join(check.clauses)
        line = f"  [{position:>2}/{total}] {outcome.status:<4} {outcome.duration_s:6.2f} s  {check.name} ({clauses})"
        if self.live:
            end = "\n" if position == total or outcome.status == FAIL else ""
            print("\r\033[K" + line[:150], end=end, file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)


def _vendor_factory(backend: Optional[str], extra_config: Any, sglang_config: Any, release: Optional[str]) -> Any:
    """Return the vendor backend's factory: SGLang's own dynamic loading for --sglang-config, else --backend / --extra-config.

    ``release``: the SGLang release the run loaded (None: none, as with ``--sglang-version none``)."""
    if not sglang_config:
        return resolve_factory(backend, extra_config)
    from hicache_contracts.conformance.running.sglang_dynamic import dynamic_factory

    if backend or extra_config:
        raise bad_value(
            "--sglang-config", "must be given alone: it names the backend and holds its extra config", backend
        )
    if release is None:
        raise bad_value(
            "--sglang-config",
            "needs a pinned SGLang release to build the backend with its own StorageBackendFactory; this run loads "
            "none (--sglang-version none, or no SGLang installed): name one with --sglang-version",
            sglang_config.get("backend_name") if isinstance(sglang_config, dict) else sglang_config,
        )
    return dynamic_factory(sglang_config)


def run_command(args: argparse.Namespace, *, stream: Optional[TextIO] = None) -> int:
    """Run the suite as the arguments say; print the report; write the files asked for; return the exit status."""
    stream = stream or sys.stdout
    if args.list_checks:
        for check in ordered_checks():
            print(f"{check.name:<56} {','.join(check.clauses):<28} {check.summary}", file=stream)
        return 0
    secrets: tuple[str, ...] = ()
    try:
        _check_paths(args)
        extra_config = parse_extra_config(args.extra_config)
        sglang_config = parse_extra_config(getattr(args, "sglang_config", None), field_name="--sglang-config")
        secrets = secret_values(extra_config or sglang_config)
        options = build_options(args)
        _check_output_paths(args)
        _make_paths_absolute(args)
        isolated, deadline_s = _isolation(args, options)
        uses_vendor = bool(args.backend) or bool(
            extra_config and (extra_config.get("module_path") or extra_config.get("class_name"))
        )
        release = resolve_release(options.sglang_version)  # first: a backend module may import sglang
        factory = (
            _vendor_factory(args.backend, extra_config, sglang_config, release)
            if uses_vendor or sglang_config
            else None
        )
        job = None if uses_vendor or sglang_config else load_main_job()
        known_failures = _read_known_failures(getattr(args, "known_failures", None))
        if getattr(args, "certify", None):
            from hicache_contracts.conformance.reporting.submit import read_product

            read_product(args)  # a bad PRODUCT.yaml is a usage error before anything runs
    except ValueError as error:
        print(f"hicache-conform run: {redact(str(error), secrets)}", file=sys.stderr)
        return 2
    except ReleaseError as error:
        print(f"hicache-conform run: --sglang-version: {error}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(describe_choice(release), file=stream, flush=True)
    printer = _ProgressPrinter(stream, args.quiet)
    try:
        if isolated:
            report, stopped = _run_isolated(
                factory, job, options, printer, include_engine=not args.no_engine, deadline_s=deadline_s
            )
        else:
            report, stopped = _run(factory, job, options, printer, include_engine=not args.no_engine)
    finally:
        printer.live_line.stop()
    if stopped is not None:
        return _finish_stopped(report.with_secrets(secrets), stopped, args, options, known_failures, stream)
    report = report.with_secrets(secrets)
    print(file=stream)
    print(report.render_text(color=False if args.no_color else None), file=stream)
    if not _write_files(report, args, stream):
        return 2
    return _verdict(report, args, options, known_failures, stream)


def _verdict(
    report: SuiteReport, args: argparse.Namespace, options: SuiteOptions, known: tuple[Any, ...], stream: TextIO
) -> int:
    """Return the exit status, after the expected failures and the certification bundle, if asked for."""
    from hicache_contracts.conformance.reporting.submit import finish_run

    return finish_run(report, args, options, known, stream)


def _read_known_failures(path: Optional[str]) -> tuple[Any, ...]:
    """Return the expected failures of the file at ``path`` (none without one); raise ValueError naming what is wrong."""
    from hicache_contracts.conformance.reporting.submit import read_expected

    return read_expected(path)


_OUTPUTS = (("json", "--json"), ("junit_xml", "--junit-xml"), ("markdown", "--markdown"))
"""The report files a run may write: the argument's attribute and its option."""


def _check_output_paths(args: argparse.Namespace) -> None:
    """Raise ValueError naming the option when a report file could not be written, before anything runs.

    Nothing is left behind: an existing file is opened for appending and
    closed untouched; for a new one, a probe file is created in its nearest
    existing folder (where the missing folders would be made) and removed.
    """
    for attribute, option in _OUTPUTS:
        path = getattr(args, attribute, None)
        if not path:
            continue
        target = os.path.abspath(os.fspath(path))
        problem = None
        if os.path.isdir(target):
            problem = "it is a directory"
        elif os.path.lexists(target):
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_APPEND))  # opened, not changed
            except OSError as error:
                problem = f"it cannot be opened for writing ({error.strerror or error})"
        else:
            folder = os.path.dirname(target)
            while not os.path.lexists(folder):
                folder = os.path.dirname(folder)
            if not os.path.isdir(folder):
                problem = f"{folder} is not a folder"
            else:
                try:  # a probe file, removed at once: the only sure test (root passes every access check)
                    descriptor, probe = tempfile.mkstemp(prefix=".hicache-conform-probe-", dir=folder)
                    os.close(descriptor)
                    os.unlink(probe)
                except OSError as error:
                    problem = f"nothing can be created in {folder} ({error.strerror or error})"
        if problem is not None:
            raise bad_value(option, f"must be a file the report can be written to; {problem}", path)


ISOLATE_BY_DEFAULT = False
"""Whether ``run`` isolates the backend when --isolation is not given: the ``hicache-conform`` command sets it
(``hicache_contracts.cli.entry``); ``main()`` called from Python runs in process unless told."""
RUN_DEADLINES_S = {"smoke": 3600.0, "standard": 4 * 3600.0, "exhaustive": 12 * 3600.0}
"""The default bound on a whole isolated run, per profile (--deadline)."""
STOP_GRACE_S = 5.0
"""After asking the child to stop (the deadline, Ctrl-C): how long it has, besides twice min(--timeout, 10 s) (its
cleanup calls and the run's threads), to send the report of what it reached before it is killed."""
EXIT_GRACE_S = 5.0
"""After the child sent its report: how long it has to end by itself before its process group is killed."""
_STOP_REASON = "\x00why the run stopped\x00"
"""Stands for the reason in the reports the child sends ahead (the parent writes the reason in)."""


def _isolation(args: argparse.Namespace, options: SuiteOptions) -> tuple[bool, float]:
    """Return whether to run the backend in a child process, and the run's deadline; raise ValueError naming
    the option when they do not fit."""
    isolation = getattr(args, "isolation", None)
    isolated = (isolation == "process" or (isolation is None and ISOLATE_BY_DEFAULT)) and hasattr(os, "fork")
    deadline = getattr(args, "deadline", None)
    if deadline is None:
        return isolated, RUN_DEADLINES_S[options.profile]
    if not math.isfinite(deadline) or not 0 < deadline <= 7 * 86_400:
        raise bad_value("--deadline", "must be a finite number of seconds > 0 and <= 604800 (a week)", deadline)
    if not isolated:
        raise bad_value(
            "--deadline",
            "needs --isolation process (in one process nothing can stop a backend that never returns)",
            deadline,
        )
    return isolated, float(deadline)


def _run_isolated(
    factory: Any,
    job: Optional[MainJob],
    options: SuiteOptions,
    printer: _ProgressPrinter,
    *,
    include_engine: bool,
    deadline_s: float,
) -> tuple[SuiteReport, Optional[str]]:
    """``_run`` in a child process of its own process group, bounded by ``deadline_s`` plus a grace.

    The child sends, before each check, the report as it would read were the
    run to end then, and at its end the report; the parent keeps the latest.
    Past the deadline, or on Ctrl-C, the child is asked to stop (SIGINT) and
    given a grace to send what it reached; then, and once its report is in,
    its whole process group is killed (anything the backend forked or left
    running goes with it), and the temporary directory is removed.
    """
    if _cuda_initialised():  # a forked child cannot use CUDA the parent initialised
        print(
            "hicache-conform run: CUDA is initialised in this process (by the backend's module?), so the backend "
            "runs in it: nothing bounds a backend that never returns (--deadline does not apply)",
            file=sys.stderr,
        )
        return _run(factory, job, options, printer, include_engine=include_engine)
    if job is not None and options.seed is None:  # one seed for every section, so that one --seed replays the run
        options = dataclasses.replace(options, seed=random.SystemRandom().randrange(2**31))
    directory = tempfile.mkdtemp(prefix="hicache-conform-") if job is not None else None
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(write_end, factory, job, options, printer, include_engine, directory)
    os.close(write_end)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also done by the child: whichever runs first
    try:
        return _supervise(pid, _Frames(read_end), options, deadline_s)
    finally:
        os.close(read_end)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def _cuda_initialised() -> bool:
    """Whether this process initialised CUDA (torch imported and its CUDA state made)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def _child(
    channel_fd: int,
    factory: Any,
    job: Optional[MainJob],
    options: SuiteOptions,
    printer: _ProgressPrinter,
    include_engine: bool,
    directory: Optional[str],
) -> NoReturn:
    """Run the suite, sending reports to the parent; end with ``os._exit`` (no thread or finaliser can hold it)."""
    status = 0
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        channel = _Channel(channel_fd)
        report, stopped = _run(
            factory, job, options, printer, include_engine=include_engine, directory=directory, watch=channel
        )
        printer.live_line.stop()
        _flush_standard_streams()
        channel.send("report", (report, stopped))
    except BaseException:  # the parent reports the run from what was sent
        status = 70
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        _flush_standard_streams()
        os._exit(status)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


class _Channel:
    """The child's end of the pipe: length-prefixed pickles, and the report as it would read were the run to stop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, kind: str, value: Any) -> None:
        data = pickle.dumps((kind, value), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(data).to_bytes(8, "big") + data)
        while view:
            view = view[os.write(self.fd, view) :]

    def update(self, runners: list[SuiteRunner], check: Any) -> None:
        """Send the reports a stop now would give: with ``check`` under way failed, and of what ran (Ctrl-C)."""
        stopping = tuple(
            runner.section_if_stopped(check if runner is runners[-1] else None, _STOP_REASON) for runner in runners
        )
        reached = tuple(runner.section() for runner in runners if _started(runner))
        try:
            self.send("fallback", (SuiteReport(stopping), SuiteReport(reached)))
        except (pickle.PicklingError, TypeError, AttributeError):  # a report that cannot travel: keep the last one
            pass

    def starting(self, printer: _ProgressPrinter, runners: list[SuiteRunner]) -> Any:
        """The runner's ``starting`` callback: the live line, then the reports a stop during this check gives."""

        def starting(position: int, total: int, check: Any) -> None:
            printer.starting(position, total, check)
            self.update(runners, check)

        return starting


class _Frames:
    """The parent's end of the pipe: what the child sent, as it arrives."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.ended = False

    def read(self, timeout_s: float) -> list[tuple[str, Any]]:
        """Wait at most ``timeout_s`` for data; return every whole message received."""
        if self.ended:
            time.sleep(max(0.0, min(timeout_s, 0.05)))
        elif select.select([self.fd], [], [], max(0.0, timeout_s))[0]:
            chunk = os.read(self.fd, 1 << 20)
            self.buffer += chunk
            self.ended = not chunk
        messages = []
        while len(self.buffer) >= 8:
            size = int.from_bytes(self.buffer[:8], "big")
            if len(self.buffer) < 8 + size:
                break
            try:
                messages.append(pickle.loads(bytes(self.buffer[8 : 8 + size])))
            except Exception:  # something else wrote into the pipe (a backend's stray write): read no further
                self.buffer.clear()
                self.ended = True
                break
            del self.buffer[: 8 + size]
        return messages

    def drain(self) -> list[tuple[str, Any]]:
        """Every whole message still in the pipe, without waiting."""
        messages: list[tuple[str, Any]] = []
        while not self.ended and select.select([self.fd], [], [], 0)[0]:
            messages += self.read(0)
        return messages


def _supervise(
    pid: int, frames: _Frames, options: SuiteOptions, deadline_s: float
) -> tuple[SuiteReport, Optional[str]]:
    """Follow the child until its report arrives, it ends, or its deadline (plus grace) passes; stop its process
    group; return the report and, for a run that did not reach its end for another reason than Ctrl-C, why."""
    fallback = (SuiteReport(), SuiteReport())
    final: Optional[tuple[SuiteReport, Optional[str]]] = None
    reason: Optional[str] = None
    interrupted = False
    wait_status: Optional[int] = None
    deadline = time.monotonic() + deadline_s
    kill_at: Optional[float] = None
    grace = 2 * min(options.timeout_s, 10.0) + STOP_GRACE_S
    while final is None:
        try:
            now = time.monotonic()
            if kill_at is None and now >= deadline:
                reason = f"it did not end within its deadline of {deadline_s:g} s (--deadline)"
                kill_at = _ask_to_stop(pid, grace)
            if kill_at is not None and now >= kill_at:
                if reason is not None:
                    reason += f", nor within {grace:g} s more after it was asked to stop"
                break
            messages = frames.read(min((kill_at or deadline) - now, 0.5))
            if wait_status is None:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    wait_status = status
                    messages += frames.drain()
            for kind, value in messages:
                if kind == "fallback":
                    fallback = value
                elif kind == "report":
                    final = value
            if final is None and wait_status is not None:
                break
        except KeyboardInterrupt:
            interrupted = True
            if kill_at is None:
                kill_at = _ask_to_stop(pid, grace)
    previous = _ignore_interrupts()
    try:
        if final is not None and wait_status is None:
            wait_status = _wait(pid, EXIT_GRACE_S)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # what the backend forked or left behind, the child if still there
        if wait_status is None:
            wait_status = _wait(pid, None)
    finally:
        _restore_interrupts(previous)
    if reason is None and final is not None:
        report, stopped = final
        return (report.marked_interrupted() if interrupted else report), stopped  # a Ctrl-C the backend swallowed
    if interrupted and reason is None:
        return fallback[1].marked_interrupted(), None
    if reason is None:  # the child ended before its end (past the deadline, reason says so)
        code = os.waitstatus_to_exitcode(wait_status) if wait_status is not None else -signal.SIGKILL
        reason = (
            f"the process running the backend exited with status {code} before the run's end"
            if code >= 0
            else f"the process running the backend was killed by {signal.Signals(-code).name} before the run's end"
        )
    return _with_reason(fallback[0], reason).marked_interrupted(), reason  # the check under way failed, naming why


def _ask_to_stop(pid: int, grace_s: float) -> float:
    """Send the child's process group SIGINT (the child writes the report of what it reached); return when to kill."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGINT)
    return time.monotonic() + grace_s


def _wait(pid: int, timeout_s: Optional[float]) -> Optional[int]:
    """Reap the child within ``timeout_s`` (None: however long); return its wait status, None if still running."""
    end = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            done, status = os.waitpid(pid, 0 if end is None else os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        if end is not None and time.monotonic() >= end:
            return None
        time.sleep(0.02)


def _with_reason(value: Any, reason: str) -> Any:
    """``value`` (a report and the dataclasses, tuples, lists and dicts in it) with the stop reason written in."""
    if isinstance(value, str):
        return value.replace(_STOP_REASON, reason)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            item.name: _with_reason(getattr(value, item.name), reason)
            for item in dataclasses.fields(value)
            if item.init
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, (tuple, list)):
        return type(value)(_with_reason(item, reason) for item in value)
    if isinstance(value, dict):
        return {key: _with_reason(item, reason) for key, item in value.items()}
    return value


def _finish_stopped(
    report: SuiteReport, stopped: str, args: argparse.Namespace, options: SuiteOptions, known: Any, stream: TextIO
) -> int:
    """Print and write the partial report of a run that did not reach its end (``stopped`` says why); return 1
    at least: such a run never passes, whatever its checks so far said."""
    print(file=stream)
    print(report.render_text(color=False if args.no_color else None), file=stream)
    print(f"hicache-conform run: the run did not reach its end: {redact(stopped, report.secrets)}", file=sys.stderr)
    if not _write_files(report, args, stream):
        return 2
    status = _verdict(report, args, options, known, stream)
    return 1 if status in (0, 130) else status


def _release_loaded() -> bool:
    """Whether a pinned SGLang release's controllers are importable in this process (the engine tier can run)."""
    from hicache_contracts.conformance.session.release_pools import release_pools_available
    from hicache_contracts.sglang_release import active_release

    return active_release() is not None and release_pools_available()


def _run(
    factory: Any,
    job: Optional[MainJob],
    options: SuiteOptions,
    printer: _ProgressPrinter,
    *,
    include_engine: bool,
    directory: Optional[str] = None,
    watch: Optional[_Channel] = None,
) -> tuple[SuiteReport, Optional[str]]:
    """Run the vendor's backend (``factory``) or the main job's subjects; return the report and, for a run that
    did not reach its end for another reason than Ctrl-C, why.

    On Ctrl-C the check under way is abandoned, every instance is cleared
    and closed, the threads the run started are given ``options.timeout_s``
    (at most 10 s) to stop, the temporary directory is removed, and the
    report of what ran is marked interrupted. A second Ctrl-C during that cleanup
    is ignored. A ``BaseException`` the backend raised in a check fails the
    check (``SuiteRunner``); one it raised anywhere else (``SystemExit``, a
    ``KeyboardInterrupt`` no Ctrl-C caused, ...) ends the run the same way
    as a Ctrl-C, and is returned as the reason.
    """
    threads_before = set(threading.enumerate())
    runners: list[SuiteRunner] = []
    subjects: Subjects = ()
    interrupted = False
    stopped: Optional[str] = None
    engine: Optional[SuiteReport] = None
    try:
        with watching_interrupts():
            try:
                if job is None:
                    subjects = [(f"backend {factory.name}", factory)]
                else:
                    if options.seed is None:  # one seed for every section, so that one --seed replays the whole run
                        options = dataclasses.replace(options, seed=random.SystemRandom().randrange(2**31))
                    directory = directory or tempfile.mkdtemp(prefix="hicache-conform-")
                    subjects = job.subjects(directory)
                for title, made in subjects:
                    printer.announce(title)
                    runner = SuiteRunner(made, options, title=title)
                    runners.append(runner)
                    if watch is not None:
                        watch.update(runners, None)
                    runner.run_all(printer, printer.starting if watch is None else watch.starting(printer, runners))
                    if watch is not None:
                        watch.update(runners, None)
                    runner.close()
                if include_engine and job is not None and job.engine_section is not None:
                    printer.announce("reference controller (engine conformance)")
                    engine = SuiteReport((job.engine_section(),))
                elif include_engine and job is None and factory is not None and _release_loaded():
                    from hicache_contracts.conformance.running.engine_tier import (
                        as_dynamic_factory,
                        engine_tier_report,
                        loader_refusal,
                    )

                    claimed = runners[0].decision.claimed if runners and runners[0].decision else frozenset()
                    driven = as_dynamic_factory(factory, v1="v1" in claimed)
                    refusal = loader_refusal(driven.extra_config)
                    if refusal:  # nothing SGLang's controller could drive: said, and no section of no verdicts
                        printer.note(f"the engine-driven tier did not run: {refusal}")
                    else:
                        printer.announce("the release's HiCacheController (engine-driven tier)")
                        engine = engine_tier_report(driven)
            except BaseException as error:
                if isinstance(error, KeyboardInterrupt) and not raised_by_backend():
                    raise
                stopped = f"the backend raised {type(error).__name__} outside a check: {error}"
    except KeyboardInterrupt:
        interrupted = True
    finally:
        previous = _ignore_interrupts()
        try:
            _cleanup(runners, threads_before, directory, options, interrupted)
            if job is not None:
                job.release(subjects)
            lingering = _lingering_threads(threads_before, options)
            if lingering and not interrupted and stopped is None:
                stopped = (
                    f"the backend left {len(lingering)} non-daemon thread{'s' if len(lingering) != 1 else ''} "
                    f"running after every instance was closed ({', '.join(lingering[:5])}); a process running it "
                    "could not exit"
                )
        finally:
            _restore_interrupts(previous)
    report = SuiteReport(tuple(runner.section() for runner in runners if _started(runner)))
    if engine is not None:
        report = report.merged(engine)
    return (report.marked_interrupted() if interrupted or stopped else report), stopped


def _lingering_threads(threads_before: set[threading.Thread], options: SuiteOptions) -> list[str]:
    """The names of the non-daemon threads the run started that are still running, after a short wait for them."""
    started = [thread for thread in threading.enumerate() if thread not in threads_before and not thread.daemon]
    end = time.monotonic() + min(options.timeout_s, 2.0)
    for thread in started:
        thread.join(max(0.0, end - time.monotonic()))
    return [thread.name for thread in started if thread.is_alive()]


def _started(runner: SuiteRunner) -> bool:
    """Whether the runner got as far as a verdict: the levels decided, the backend found unbuildable or the run's
    configuration one it declares it does not serve."""
    return (
        runner.decision is not None
        or runner.startup_failure is not None
        or getattr(runner, "run_not_applicable", None) is not None
    )


def _cleanup(
    runners: list[Any],
    threads_before: set[threading.Thread],
    directory: Optional[str],
    options: SuiteOptions,
    interrupted: bool,
) -> None:
    """Clear and close every instance, let the run's threads stop, remove the temporary directory.

    Closing first makes the threads of an abandoned check finish at once (a
    closed reference backend answers without doing anything), and a write
    they still had under way leaves nothing behind.
    """
    for runner in runners:
        runner.close()  # clear() on the instances it built, then close(); safe to repeat
    if interrupted:
        bound = time.monotonic() + min(options.timeout_s, 10.0)
        for thread in set(threading.enumerate()) - threads_before:
            thread.join(max(0.0, bound - time.monotonic()))
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def _ignore_interrupts() -> Any:
    """Ignore SIGINT until ``_restore_interrupts`` (only in the main thread, where signals arrive)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def _restore_interrupts(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


def _write_files(report: SuiteReport, args: argparse.Namespace, stream: TextIO) -> bool:
    """Write the report files asked for; on a failure say which and why on stderr and return False."""
    written = True
    for (attribute, option), render in zip(_OUTPUTS, (report.to_json, report.to_junit_xml, report.to_markdown)):
        path = getattr(args, attribute, None)
        if not path:
            continue
        target = Path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(render(), encoding="utf-8")
        except OSError as error:
            print(
                f"hicache-conform run: {option}: the report could not be written "
                f"({error.strerror or error}) (got {str(path)!r})",
                file=sys.stderr,
            )
            written = False
            continue
        print(f"wrote {target}", file=stream)
    return written
