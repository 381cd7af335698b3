"""Which tests execute each line of a mutation target, recorded once under coverage and cached.

Lines run while the tests are imported and collected (module constants, defaults, parametrize
arguments) are recorded first, in the parent, and select every test; the tests then run under
coverage in a child, one context per test. Each test's setup and teardown get their own context: a line reached there also selects the
tests sharing a fixture wider than a function with it (such a fixture is built in the first test
that asks for it only). The cache key is a hash of the target files and the test files.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import time
from pathlib import Path

VERSION = 1


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "hicache-spec" / "mutation"


def _test_files(root: Path, tests: tuple[str, ...]) -> set[Path]:
    found: set[Path] = set()
    for test in tests:
        path = root / test
        found |= set(path.rglob("*.py")) if path.is_dir() else {path}
        for parent in [path, *path.parents]:
            if parent == root.parent:
                break
            if (parent / "conftest.py").exists():
                found.add(parent / "conftest.py")
    return {p for p in found if p.exists()}


def cache_key(root: Path, files: tuple[str, ...], tests: tuple[str, ...]) -> str:
    digest = hashlib.sha256(json.dumps([VERSION, files, tests]).encode())
    for path in sorted({root / f for f in files} | _test_files(root, tests)):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _coverage(root: Path, files: tuple[str, ...]):
    import coverage

    by_abs = {os.path.realpath(root / f): f for f in files}
    return coverage.Coverage(data_file=None, include=list(by_abs), config_file=False), by_abs


def lines_run(root: Path, files: tuple[str, ...], run) -> dict[str, list[int]]:
    """The lines of `files` that calling `run()` executes (call it before the project is imported)."""
    cov, by_abs = _coverage(root, files)
    cov.start()
    try:
        run()
    finally:
        cov.stop()
    data = cov.get_data()
    found = {by_abs.get(os.path.realpath(m)): sorted(data.lines(m) or ()) for m in data.measured_files()}
    return {rel: lines for rel, lines in found.items() if rel is not None}


def record(root: Path, files: tuple[str, ...], tests: tuple[str, ...], imported: dict, out: Path) -> int:
    """Run `tests` under coverage, one context per test, and write the map to `out` with the lines run at
    import (`imported`, from lines_run); returns pytest's exit code."""
    import pytest

    cov, by_abs = _coverage(root, files)
    started = time.monotonic()
    ids: list[str] = []
    seconds: list[float] = []
    wide: list[list[str]] = []
    collect = [0.0]

    class Recorder:
        def pytest_collection_finish(self, session):
            collect[0] = time.monotonic() - started

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            ids.append(item.nodeid)
            info = getattr(item, "_fixtureinfo", None)
            defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
            wide.append(sorted(n for n, d in defs.items() if d and d[-1].scope != "function") if info else ["?"])
            begun = time.monotonic()
            yield
            seconds.append(round(time.monotonic() - begun, 4))
            cov.switch_context("")

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_setup(self, item):
            cov.switch_context(f"s{len(ids) - 1}")
            yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item):
            cov.switch_context(f"c{len(ids) - 1}")
            yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_teardown(self, item, nextitem):
            cov.switch_context(f"s{len(ids) - 1}")
            yield

    cov.start()
    try:
        code = pytest.main([*tests, "-q", "-p", "no:cacheprovider", "-p", "no:randomly"], plugins=[Recorder()])
    finally:
        cov.stop()
    if code != 0:
        return int(code)
    data = cov.get_data()
    per_file = {rel: {"import": list(lines), "call": {}, "setup": {}} for rel, lines in imported.items()}
    for measured in data.measured_files():
        rel = by_abs.get(os.path.realpath(measured))
        if rel is None:
            continue
        entry: dict = per_file.setdefault(rel, {"import": [], "call": {}, "setup": {}})
        for line, contexts in (data.contexts_by_lineno(measured) or {}).items():
            for context in contexts:
                if not context:
                    entry["import"].append(line)
                else:
                    kind = "call" if context[0] == "c" else "setup"
                    entry[kind].setdefault(str(line), []).append(int(context[1:]))
        per_file[rel] = entry
    doc = {"tests": ids, "seconds": seconds, "wide": wide, "collect": round(collect[0], 3), "files": per_file}
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, out)  # other runs may read the same cache at the same time
    return 0


def statement_lines(tree: ast.Module, line: int) -> set[int]:
    """The lines of the innermost statement holding `line`, less those of the statements nested in it."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.end_lineno - node.lineno) <= (best.end_lineno - best.lineno):
                best = node
    if best is None:
        return {line}
    own = set(range(best.lineno, best.end_lineno + 1))
    for node in ast.walk(best):
        if node is not best and isinstance(node, ast.stmt):
            own -= set(range(node.lineno, node.end_lineno + 1))
    return own | {line}


class CoverageMap:
    def __init__(self, doc: dict):
        self.doc = doc
        self.tests: list[str] = doc["tests"]
        self.wide = [set(w) for w in doc["wide"]]

    def select(self, path: str, tree: ast.Module, line: int) -> list[str] | None:
        """The tests that run the mutated statement, fastest first; None: every test (it runs at import)."""
        entry = self.doc["files"].get(path, {"import": [], "call": {}, "setup": {}})
        lines = statement_lines(tree, line)
        if lines & set(entry["import"]):
            return None
        chosen: set[int] = set()
        for n in lines:
            chosen.update(entry["call"].get(str(n), ()))
            for index in entry["setup"].get(str(n), ()):
                chosen.add(index)
                if "?" in self.wide[index]:
                    return None
                if self.wide[index]:
                    chosen.update(j for j, w in enumerate(self.wide) if w & self.wide[index])
        seconds = self.doc["seconds"]
        return [self.tests[i] for i in sorted(chosen, key=lambda i: (seconds[i], i))]  # a kill shows soonest

    def seconds(self, tests: list[str] | None) -> float:
        """The recorded time of these tests (all of them for None), collection included."""
        if tests is None:
            return self.doc["collect"] + sum(self.doc["seconds"])
        wanted = set(tests)
        return self.doc["collect"] + sum(s for t, s in zip(self.tests, self.doc["seconds"]) if t in wanted)
