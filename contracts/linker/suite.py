"""The linker conformance suite: ``run_linker_suite(linker_cls)`` and ``hicache-conform linker``.

The run targets one release's interface (the imported SGLang's, else the
newest pinned): each behaviour check whose clause holds for that release runs
on CPU device pools, through the release's own ``UnifiedCacheLinkerWrapper``
when that release is imported, directly otherwise. Before them, a loadability
verdict against every pinned release's interface names each missing method,
parameter or constructor keyword (LNK-1 to LNK-4); verdicts for releases other
than the target are listed and not counted. Each row has its clause, a status
(pass, fail, skip) and why.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional, Sequence

from hicache_contracts.linker.checks import CHECKS, Check, CheckFailed, CheckSkipped, Context
from hicache_contracts.linker.harness import (
    LINKER_MODULE,
    Driver,
    LinkerSetup,
    WrapperDriver,
    default_factory,
    fresh_setup,
    linker_arguments,
)
from hicache_contracts.linker.interface import check_loadability
from hicache_contracts.conformance.reporting.submit import add_arguments as add_certify_arguments
from hicache_contracts.conformance.reporting.submit import finish_run, read_expected, read_product
from hicache_contracts.linker.reporting import FAIL, PASS, PROFILE, SKIP, CheckResult, LinkerReport, certify_refusal
from hicache_spec.registry import clause, holds_for
from hicache_spec.releases import SGLANG_RELEASES

__all__ = ["CheckResult", "LinkerReport", "main", "run_linker_suite"]


def _imported_release() -> Optional[str]:
    if "sglang" not in sys.modules:
        return None
    from hicache_contracts.sglang_release import active_release

    return active_release()


def _loadability_rows(linker_cls: type, target: str) -> list[CheckResult]:
    rows = []
    for release in SGLANG_RELEASES:
        verdict = check_loadability(linker_cls, release)
        wanted = ["LNK-1" if release in ("0.5.20", "0.5.21") else "LNK-2"]
        if release == "0.5.23":
            wanted += ["LNK-3", "LNK-4"]
        for clause_id in wanted:
            problems = [text for cid, text in verdict.problems if cid == clause_id]
            rows.append(
                CheckResult(
                    f"interface_{release}",
                    clause_id,
                    FAIL if problems else PASS,
                    "; ".join(problems),
                    counted=release == target,
                )
            )
    return rows


def _factory_row(linker_cls: type, setup: LinkerSetup, target: str) -> CheckResult:
    """LNK-4 through the release's own factory, when 0.5.23 is the imported release."""
    name = "release_factory_loads"
    if target != "0.5.23" or _imported_release() != "0.5.23":
        return CheckResult(name, "LNK-4", SKIP, "needs SGLang 0.5.23 imported (--sglang-version 0.5.23)")
    try:
        factory = importlib.import_module("sglang.srt.mem_cache.unified_cache.linker_factory")
    except Exception as error:
        return CheckResult(name, "LNK-4", SKIP, f"0.5.23's linker factory does not import here: {error}")
    server_args, params, extra = linker_arguments(setup)
    config = {"linker": linker_cls.__name__, "linker_module_path": linker_cls.__module__, "linker_extra_config": extra}
    try:
        linker = factory.create_unified_cache_linker(
            server_args, params, backend="dynamic", config=config, components=set(), forward_stream=None
        )
    except Exception as error:
        return CheckResult(name, "LNK-4", FAIL, f"0.5.23's dynamic loader refused it: {type(error).__name__}: {error}")
    try:
        linker.close()
    except Exception:
        pass
    return CheckResult(name, "LNK-4", PASS, f"built by create_unified_cache_linker(backend='dynamic') as {config}")


def run_linker_suite(
    linker_cls: Optional[type] = None,
    *,
    factory: Optional[Callable[[LinkerSetup], Any]] = None,
    release: Optional[str] = None,
    mode: str = "auto",
    extra_config: Optional[dict[str, Any]] = None,
    checks: Optional[Sequence[str]] = None,
    workdir: Optional[Path] = None,
) -> LinkerReport:
    """Run the linker suite; return its report.

    ``linker_cls`` is checked for loadability and built by the default factory
    unless ``factory`` (``LinkerSetup -> linker``) is given. ``release`` is the
    interface targeted (default: the imported SGLang's, else the newest
    pinned); ``mode`` is ``"wrapper"``, ``"direct"`` or ``"auto"`` (the
    wrapper when the target release is imported). ``checks`` limits the run
    to those check names.
    """
    if linker_cls is None and factory is None:
        raise ValueError("linker_cls: give a linker class or a factory")
    imported = _imported_release()
    target = release or imported or SGLANG_RELEASES[-1]
    if target not in SGLANG_RELEASES:
        raise ValueError(f"release: not a pinned release (got {target!r}; pinned: {', '.join(SGLANG_RELEASES)})")
    if mode == "auto":
        mode = "wrapper" if imported == target and LINKER_MODULE in sys.modules else "direct"
    elif mode == "wrapper" and not (imported == target and LINKER_MODULE in sys.modules):
        raise ValueError(f"mode: 'wrapper' needs SGLang {target}'s unified_cache_linker imported first")
    elif mode not in ("wrapper", "direct"):
        raise ValueError(f"mode: must be auto, wrapper or direct (got {mode!r})")
    if checks is not None:
        known = {check.name for check in CHECKS} | {f"interface_{r}" for r in SGLANG_RELEASES}
        unknown = [name for name in checks if name not in known | {"release_factory_loads"}]
        if unknown:
            raise ValueError(f"checks: no check named {', '.join(unknown)} (hicache-conform linker --list-checks)")
    build = factory or default_factory(linker_cls)  # type: ignore[arg-type]
    name = f"{linker_cls.__module__}:{linker_cls.__qualname__}" if linker_cls else repr(factory)
    report = LinkerReport(name, target, mode)
    report.invocation = {
        "linker": f"{linker_cls.__module__}:{linker_cls.__qualname__}" if linker_cls else None,
        "factory": _spec_of(factory),
        "extra_config": dict(extra_config or {}),
        "checks": list(checks) if checks is not None else None,
    }
    started = time.monotonic()
    scratch = None
    if workdir is None:
        scratch = tempfile.TemporaryDirectory(prefix="hicache-linker-suite-")
        workdir = Path(scratch.name)
    try:
        if linker_cls is not None:
            report.results += _loadability_rows(linker_cls, target)
            report.results.append(_factory_row(linker_cls, fresh_setup(workdir, extra_config), target))
        driver_cls = WrapperDriver if mode == "wrapper" else Driver
        for number, check in enumerate(CHECKS):
            if checks is not None and check.name not in checks:
                continue
            if not holds_for(clause(check.clause), target):
                report.results.append(
                    CheckResult(check.name, check.clause, SKIP, f"{check.clause} does not hold for {target}")
                )
                continue
            report.results.append(_run_check(check, workdir, extra_config, build, driver_cls, target, number))
    finally:
        if scratch is not None:
            scratch.cleanup()
    report.seconds = time.monotonic() - started
    return report


def _spec_of(function: Optional[Callable[..., Any]]) -> Optional[str]:
    """``module:name`` of an importable function (what ``--factory`` takes), else a placeholder."""
    if function is None:
        return None
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if module and name and "<" not in name:
        return f"{module}:{name}"
    return "<the same factory>"


CHECK_TIMEOUT = 60.0
"""Seconds a check may run before it is reported stuck (its thread is abandoned)."""
CLOSE_TIMEOUT = 10.0
"""Seconds the clean-up close() of a check's linkers may take before it is abandoned."""


def _bounded(function: Callable[[], None], timeout: float) -> Optional[BaseException]:
    """Run ``function`` on a daemon thread; return its exception, or TimeoutError if it did not return."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            function()
        except BaseException as error:  # reported to the caller
            outcome.append(error)

    worker = threading.Thread(target=run, name="linker-suite-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return TimeoutError(f"did not return within {timeout:.0f} s")
    return outcome[0] if outcome else None


def _run_check(
    check: Check,
    workdir: Path,
    extra_config: Optional[dict[str, Any]],
    build: Callable[[LinkerSetup], Any],
    driver_cls: type[Driver],
    target: str,
    number: int,
) -> CheckResult:
    setup = fresh_setup(workdir, extra_config, seed=number)
    built: list[Any] = []
    context = Context(setup, build, lambda linker: driver_cls(linker, target), target, built)
    started = time.monotonic()
    notes: list[str] = []
    error = _bounded(lambda: notes.append(check.run(context) or ""), CHECK_TIMEOUT)
    if error is None:
        status, detail = PASS, notes[0] if notes else ""
    elif isinstance(error, CheckFailed):
        status, detail = FAIL, str(error)
    elif isinstance(error, CheckSkipped):
        status, detail = SKIP, str(error)
    elif isinstance(error, TimeoutError) and error.__traceback__ is None:
        status, detail = FAIL, f"the check {error} (a linker call hung)"
    else:
        where = traceback.extract_tb(error.__traceback__)[-1]
        status = FAIL
        detail = f"{type(error).__name__}: {error} (at {Path(where.filename).name}:{where.lineno})"
    for linker in built:
        _bounded(linker.close, CLOSE_TIMEOUT)
    return CheckResult(check.name, check.clause, status, detail, seconds=round(time.monotonic() - started, 3))


def _load(spec: str, what: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"--{what}: expected module:Name (got {spec!r})")
    from hicache_contracts.conformance.session.loading import import_backend_module

    try:  # the import path first, then the working directory (as `hicache-conform run` does)
        module = import_backend_module(module_name, spec, field_name=f"--{what}")
    except ValueError as error:
        raise SystemExit(str(error)) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SystemExit(f"--{what}: {module_name!r} has no {attribute!r}") from None


def build_parser(parser: Optional[argparse.ArgumentParser] = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="hicache-conform linker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--linker", help="the linker class, module:Class (e.g. hicache_reference.linker:MemoryLinker)")
    parser.add_argument("--factory", help="module:function building the linker from a LinkerSetup (optional)")
    parser.add_argument("--release", help=f"the interface to target ({', '.join(SGLANG_RELEASES)})")
    parser.add_argument(
        "--sglang-version",
        help="import this pinned SGLang release first (its cached wheel) and run through its wrapper; 'none': don't",
    )
    parser.add_argument("--mode", default="auto", choices=("auto", "wrapper", "direct"))
    parser.add_argument("--extra-config", default="{}", help="JSON object added to the linker's extra_config")
    parser.add_argument("--checks", help="comma-separated check names (default: all)")
    parser.add_argument(
        "--json", dest="json_path", metavar="PATH", help="write the report as JSON (the backend suite's report form)"
    )
    parser.add_argument("--junit-xml", metavar="PATH", help="write the report as JUnit XML (a test case per clause)")
    parser.add_argument("--markdown", metavar="PATH", help="write the report as a Markdown table")
    parser.add_argument("--list-checks", action="store_true", help="list the checks and their clauses, then exit")
    add_certify_arguments(parser)  # --certify DIR, --known-failures, the product manifest: as `hicache-conform run`
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``hicache-conform linker``; return the exit status (0 conforms, 1 does not, 2 bad usage)."""
    args = build_parser().parse_args(argv)
    return run_from_args(args)


def run_from_args(args: argparse.Namespace) -> int:
    if args.list_checks:
        for check in CHECKS:
            print(f"{check.clause:7} {check.name}")
        return 0
    if not args.linker and not args.factory:
        print("hicache-conform linker: --linker module:Class is required", file=sys.stderr)
        return 2
    try:
        extra = json.loads(args.extra_config)
    except json.JSONDecodeError as error:
        print(f"--extra-config: not JSON ({error})", file=sys.stderr)
        return 2
    if not isinstance(extra, dict):
        print("--extra-config: must be a JSON object", file=sys.stderr)
        return 2
    if args.sglang_version and args.sglang_version != "none":
        from hicache_contracts.sglang_release import ReleaseError, use_release

        try:
            use_release(args.sglang_version)
            importlib.import_module(LINKER_MODULE)
        except ReleaseError as error:
            print(f"--sglang-version: {error}", file=sys.stderr)
            return 2
        except Exception as error:
            print(
                f"--sglang-version: SGLang {args.sglang_version}'s linker module does not import: {error}",
                file=sys.stderr,
            )
            return 2
    try:
        expected = read_expected(getattr(args, "known_failures", None))
        if getattr(args, "certify", None):
            read_product(args)  # a bad manifest is refused before the run
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    if getattr(args, "certify", None):
        refusal = certify_refusal(args.mode, args.release, _imported_release())
        if refusal:
            print(refusal, file=sys.stderr)
            return 2
    linker_cls = _load(args.linker, "linker") if args.linker else None
    factory = _load(args.factory, "factory") if args.factory else None
    checks = [name for name in args.checks.split(",") if name] if args.checks else None
    try:
        report = run_linker_suite(
            linker_cls, factory=factory, release=args.release, mode=args.mode, extra_config=extra, checks=checks
        )
    except ValueError as error:
        print(f"hicache-conform linker: {error}", file=sys.stderr)
        return 2
    if args.factory:
        report.invocation["factory"] = args.factory  # replayed as given
    print(report.render())
    suite = report.suite_report()
    for path, render in ((args.json_path, suite.to_json), (args.junit_xml, suite.to_junit_xml)):
        if path:
            Path(path).write_text(render() + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(suite.to_markdown(), encoding="utf-8")
    options = SimpleNamespace(profile=PROFILE, checks=tuple(checks) if checks else None)
    return finish_run(suite, args, options, expected, sys.stdout)


def install(sub: Any) -> None:
    """Add the ``linker`` subcommand to ``hicache-conform``'s subparsers."""
    command = sub.add_parser(
        "linker",
        help="run the linker suite against a UnifiedCacheLinker class",
        description="Run the linker conformance suite (CPU device pools) against a UnifiedCacheLinker.",
    )
    build_parser(command)
    command.set_defaults(func=run_from_args)
