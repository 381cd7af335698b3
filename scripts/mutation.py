"""Mutation testing of the project's contract code, with cosmic-ray's mutation operators.

Mutants never touch a file: each runs in a forked child that holds the mutated code in memory.
The fast path swaps the mutated function's code object into the already-imported function; a
mutant outside any function, or one that survives the fast path, is run again in a child that
imports the project afresh from the mutated source, so a survivor is never an artefact of the swap.
Each mutant runs only the tests that execute its statement (scripts/mutation_coverage.py records which,
once, and caches the map); a mutant no test reaches is a survivor, reported "not covered".

    python scripts/mutation.py --target spec                      # every mutant of spec/
    python scripts/mutation.py --target checker --sample 120 --seed 3 --budget 900
    python scripts/mutation.py --target ci --sample 16 --seed 1 --budget 75   # CI's step

One script over 450 lines: the targets, the mutants and the fork-per-mutant runner read top to bottom;
the coverage map lives in scripts/mutation_coverage.py.

Targets, their tests and score floors are in TARGETS; mutants judged equivalent are listed with a
reason in docs/mutation.md or docs/mutation/<target>.md (a row whose first cell is the mutant's id in backticks) and leave the score.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib.abc
import importlib.util
import json
import os
import random
import re
import signal
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import mutation_coverage

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"spec": "hicache_spec", "contracts": "hicache_contracts", "reference": "hicache_reference"}
PROJECT_PREFIXES = tuple(PACKAGES.values()) + ("tests", "conftest")


@dataclass(frozen=True)
class Target:
    files: tuple[str, ...]
    tests: tuple[str, ...]
    floor: float
    by_file: dict[str, tuple[str, ...]] = field(default_factory=dict)  # narrower tests for one file

    def tests_for(self, path: str) -> tuple[str, ...]:
        return self.by_file.get(path, self.tests)


TARGETS: dict[str, Target] = {
    "spec": Target(
        files=tuple(
            f"spec/{n}.py"
            for n in (
                "batching",
                "clauses",
                "confirmation",
                "divergences",
                "keys",
                "pools",
                "prefix",
                "progress",
                "registry",
                "releases",
                "render",
                "writers",
            )
        ),
        tests=("tests/spec",),
        floor=0.95,
        by_file={
            f"spec/{n}.py": tuple(f"tests/spec/test_{t}.py" for t in (*tests, "boundaries"))
            for n, tests in {
                "batching": ("batching",),
                "clauses": ("registry",),
                "confirmation": ("confirmation",),
                "divergences": ("divergences",),
                "keys": ("keys",),
                "pools": ("pools",),
                "prefix": ("prefix",),
                "progress": ("progress",),
                "registry": ("registry",),
                "releases": ("registry", "divergences"),
                "render": ("registry",),
                "writers": ("writers",),
            }.items()
        },
    ),
    "prefix_keys": Target(
        files=("contracts/prefix_keys.py",),
        floor=0.95,
        tests=(
            "tests/contracts/test_prefix_keys.py",
            "tests/contracts/test_prefix_keys_equality.py",
            "tests/contracts/test_key_fields_fast_path.py",  # the model fields' fast path lives in prefix_keys.py
        ),
    ),
    # CI's sampled step: the fold, the progress rules and the prefix keys against their fastest tests only
    # (so its floor is below the full targets').
    "ci": Target(
        files=("spec/pools.py", "spec/progress.py", "contracts/prefix_keys.py"),
        tests=("tests/spec/test_boundaries.py",),
        floor=0.6,  # seed 1, sample 16, no budget: 8/12 killed (4 equivalent); the full spec tests kill the rest
        by_file={
            "contracts/prefix_keys.py": (
                "tests/contracts/test_prefix_keys.py",
                "tests/contracts/test_prefix_keys_equality.py",
            )
        },
    ),
    "checker": Target(
        files=tuple(
            f"contracts/engine/_check{n}.py" for n in ("er", "_acks", "_backup", "_base", "_hits", "_pages", "_prefix")
        ),
        tests=("tests/engine",),
        floor=0.90,
    ),
    "checks": Target(
        files=tuple(
            f"contracts/conformance/checks/{n}.py"
            for n in (
                "concurrency",
                "core_hits",
                "core_pages",
                "core_upkeep",
                "engine_calls",
                "format_guard",
                "hit_threads",
                "namespacing",
                "prefix",
                "stateful",
                "v1",
                "v2",
            )
        ),
        # Not test_single_check.py: each of its cases reruns the whole suite on a planted bug (several times a
        # mutant's other tests); the check-alone verdicts of test_check_branches.py hold every catalog entry.
        tests=(
            "tests/conformance/checks/test_planted.py",
            "tests/conformance/checks/test_check_branches.py",
            "tests/conformance/checks/test_fold_oracle.py",  # the fold's planted bugs and correct folds
            "tests/conformance/checks/test_check_inputs.py",  # what the properties draw and their examples catch alone
        ),
        floor=0.90,
    ),
    # The controller's own test files (the rest of tests/reference covers the backends), and its hang test.
    "controller": Target(
        files=tuple(
            f"reference/{n}.py"
            for n in (
                "controller",
                "attachment",
                "controller_input",
                "controller_parts",
                "controller_variants",
                "hit_query",
                "prefetch_io",
                "sidecar_reads",
                "backup_writer",
                "workers",
                "settings",
                "sidecar_pools",
            )
        ),
        tests=(
            "tests/reliability/test_controller_hang.py",
            *(
                f"tests/reference/test_controller{n}.py"
                for n in (
                    "",
                    "_agreement",
                    "_faults",
                    "_hybrid",
                    "_observables",
                    "_planted",
                    "_policies",
                    "_prefix_cost",
                    "_ranks",
                    "_settings",
                )
            ),
        ),
        floor=0.85,
    ),
}

# One replacement per operator site (cosmic-ray's full cross product multiplies the run for little).
_KEPT_PAIRS = {
    "ReplaceBinaryOperator": {
        "Add_Sub",
        "Sub_Add",
        "Mul_FloorDiv",
        "Div_Mul",
        "FloorDiv_Mul",
        "Mod_FloorDiv",
        "Pow_Mul",
        "LShift_RShift",
        "RShift_LShift",
        "BitOr_BitAnd",
        "BitAnd_BitOr",
        "BitXor_BitOr",
    },
    "ReplaceComparisonOperator": {
        "Eq_NotEq",
        "NotEq_Eq",
        "Lt_LtE",
        "LtE_Lt",
        "Gt_GtE",
        "GtE_Gt",
        "Is_IsNot",
        "IsNot_Is",
    },
    "ReplaceUnaryOperator": {"USub_UAdd", "UAdd_USub", "Delete_Not", "Invert_UAdd"},
}


def kept_operators() -> list[str]:
    import cosmic_ray.plugins as plugins

    kept = []
    for name in plugins.operator_names():
        if plugins.get_operator(name).arguments():
            continue
        base = name.split("/", 1)[1]
        family, _, pair = base.partition("_")
        if family in _KEPT_PAIRS and pair not in _KEPT_PAIRS[family]:
            continue
        kept.append(name)
    return kept


@dataclass
class Mutant:
    path: str
    operator: str
    occurrence: int
    line: int
    definition: str  # qualname of the outermost enclosing def, "" at module or class level
    ident: str = ""
    source: str = field(default="", repr=False)
    status: str = "pending"
    mode: str = ""
    tests: list[str] | None = field(default=None, repr=False)  # node ids to run; None: all of the target's
    retried: bool = False


def _outermost_defs(tree: ast.Module) -> list[tuple[int, int, str]]:
    """(first line, last line, qualname) of every top-level function and every method of a top-level class."""
    spans = []

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                spans.append((node.lineno, node.end_lineno, prefix + node.name, first))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")

    walk(tree.body, "")
    return spans


def enumerate_mutants(rel_path: str) -> list[Mutant]:
    import cosmic_ray.plugins as plugins
    from cosmic_ray.ast import ast_nodes, get_ast

    text = (ROOT / rel_path).read_text()
    spans = _outermost_defs(ast.parse(text))
    lines = text.splitlines()
    module_ast = get_ast(text)
    mutants: list[Mutant] = []
    for name in kept_operators():
        operator = plugins.get_operator(name)()
        positions = [pos for node in ast_nodes(module_ast) for pos in operator.mutation_positions(node)]
        for occurrence, (start, _end) in enumerate(positions):
            line = start[0]
            definition = next((q for first, last, q, _ in spans if first <= line <= last), "")
            mutants.append(Mutant(rel_path, name, occurrence, line, definition))
    counts: dict[tuple, int] = {}
    for m in mutants:
        shown = lines[m.line - 1].strip()[:60]  # occurrences count among lines that show alike, so ids are unique
        key = (m.path, m.definition, m.operator, shown)
        counts[key] = counts.get(key, 0) + 1
        m.ident = f"{m.path}::{m.definition or '<module>'}::{m.operator.split('/', 1)[1]}::{shown}#{counts[key]}"
    return mutants


def mutated_source(m: Mutant) -> str | None:
    import cosmic_ray.plugins as plugins
    from cosmic_ray.mutating import mutate_code

    return mutate_code((ROOT / m.path).read_text(), plugins.get_operator(m.operator)(), m.occurrence)


def module_name(rel_path: str) -> str:
    top, *rest = Path(rel_path).with_suffix("").parts
    parts = [PACKAGES[top], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# ---------------------------------------------------------------- running one mutant (in a child)


def _find_code(code: types.CodeType, qualname: str) -> types.CodeType | None:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_qualname == qualname:
                return const
            found = _find_code(const, qualname)
            if found is not None:
                return found
    return None


def _live_function(module: types.ModuleType, qualname: str):
    obj = module
    for part in qualname.split("."):
        holder = obj
        obj = holder.__dict__.get(part) if hasattr(holder, "__dict__") else None
        if obj is None:
            obj = getattr(holder, part, None)
        if obj is None:
            return None
    for _ in range(6):
        if isinstance(obj, types.FunctionType):
            return obj
        for attr in ("__func__", "fget", "wrapped", "func", "__wrapped__"):
            inner = getattr(obj, attr, None)
            if inner is not None:
                obj = inner
                break
        else:
            return None
    return None


def swap_in(m: Mutant) -> bool:
    """Install the mutant into the imported module by replacing one function's code; False if it cannot."""
    if not m.definition:
        return False
    module = sys.modules.get(module_name(m.path))
    if module is None:
        return False
    function = _live_function(module, m.definition)
    if function is None or function.__code__.co_qualname != m.definition:
        return False
    try:
        new_code = _find_code(compile(m.source, str(ROOT / m.path), "exec"), m.definition)
    except SyntaxError:
        return False
    if new_code is None or new_code.co_freevars != function.__code__.co_freevars:
        return False
    function.__code__ = new_code
    return True


class _MutatedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, name: str, path: Path, source: str):
        self.name, self.path, self.source = name, path, source

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        is_package = self.path.name == "__init__.py"
        spec = importlib.util.spec_from_loader(fullname, self, origin=str(self.path), is_package=is_package)
        if is_package:
            spec.submodule_search_locations = [str(self.path.parent)]
        spec.has_location = True
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = str(self.path)
        exec(compile(self.source, str(self.path), "exec"), module.__dict__)


def fresh_import(m: Mutant) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in PROJECT_PREFIXES:
            del sys.modules[name]
    sys.meta_path.insert(0, _MutatedFinder(module_name(m.path), ROOT / m.path, m.source))


class _Only:
    """Keeps only the named tests, in collection order; exits 201 if one of them is no longer collected."""

    def __init__(self, wanted: list[str]):
        self.wanted = set(wanted)

    def pytest_collection_modifyitems(self, session, config, items):
        if not self.wanted <= {item.nodeid for item in items}:
            os._exit(201)
        kept = [item for item in items if item.nodeid in self.wanted]
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in self.wanted])
        items[:] = kept


def pytest_args(m: Mutant, tests: tuple[str, ...]) -> tuple[list[str], list]:
    """The paths and plugins that run the mutant's selected tests (all of `tests` when it has none)."""
    if m.tests is None:
        return list(tests), []
    return list(dict.fromkeys(t.split("::", 1)[0] for t in m.tests)), [_Only(m.tests)]


class _Session:
    """A pytest session that collects once and forks a child per mutant after collection, so a swapped-in
    mutant costs only its tests (no configuration, plugin loading or collection per mutant)."""

    def __init__(self, loop):
        self.loop, self.items = loop, []

    def pytest_collection_finish(self, session):
        self.items = list(session.items)
        gc.freeze()

    def pytest_runtestloop(self, session):
        global _SESSION
        _SESSION = self
        try:
            self.loop()
        finally:
            _SESSION = None
        return True

    def fork(self, m: Mutant, tests: tuple[str, ...], mode: str) -> int:
        pid = os.fork()
        if pid:
            return pid
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            if mode == "swap" and not swap_in(m):
                os._exit(200)
            if m.tests is None:
                items = [
                    i
                    for i in self.items
                    if any(i.nodeid == t or i.nodeid.startswith((t + "/", t + "::")) for t in tests)
                ]
            else:
                by_id = {item.nodeid: item for item in self.items}
                if not set(m.tests) <= set(by_id):
                    os._exit(201)
                items = [by_id[t] for t in m.tests]
            from _pytest.runner import runtestprotocol

            for position, item in enumerate(items):
                following = items[position + 1] if position + 1 < len(items) else None
                if any(report.failed for report in runtestprotocol(item, nextitem=following, log=False)):
                    os._exit(1)
            os._exit(0 if items else 5)
        except BaseException:  # noqa: BLE001 - any escape from the test run is a killed mutant
            os._exit(199)


_SESSION: _Session | None = None


def in_session(paths: tuple[str, ...], loop) -> None:
    """Collect `paths` in one pytest session and call `loop()` in place of running its tests."""
    import pytest

    pytest.main([*paths, "-q", "-s", "-p", "no:cacheprovider", "-p", "no:randomly"], plugins=[_Session(loop)])


def run_child(m: Mutant, tests: tuple[str, ...], mode: str, quiet: bool = True) -> int:
    """Fork; the child installs the mutant and runs the tests. Returns the child's exit code (or -1)."""
    if _SESSION is not None and mode in ("swap", "clean"):
        return _SESSION.fork(m, tests, mode)
    pid = os.fork()
    if pid == 0:
        try:
            if quiet:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            if mode == "swap" and not swap_in(m):
                os._exit(200)
            if mode == "fresh":
                fresh_import(m)
            import pytest

            paths, plugins = pytest_args(m, tests)
            code = pytest.main([*paths, "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"], plugins=plugins)
            os._exit(int(code))
        except BaseException:  # noqa: BLE001 - any escape from the test run is a killed mutant
            os._exit(199)
    return pid


CHILD_CPU = [0.0]  # CPU seconds of the children waited for: the cost of a run, whatever the machine's load


def wait_child(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            CHILD_CPU[0] += usage.ru_utime + usage.ru_stime
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.05)


def judge(m: Mutant, tests: tuple[str, ...], timeout: float) -> None:
    """Run the mutant (swapped in, then a survivor afresh). A run past `timeout` is run once more with three
    times the limit (the machine may just be loaded) before it counts as killed by the timeout."""
    for mode in ("swap", "fresh"):
        if mode == "swap" and not m.definition:
            continue
        code = wait_child(run_child(m, tests, mode), timeout)
        if code == 201:  # a selected test is gone (its id changed): run all of the target's tests
            m.tests = None
            code = wait_child(run_child(m, tests, mode), timeout)
        if code is None:
            m.retried = True
            code = wait_child(run_child(m, tests, mode), 3 * timeout + 30)
        if code == 200:
            continue  # the swap could not be made: run it fresh
        m.mode = mode
        if code is None:
            m.status = "timeout"  # counted as killed
            return
        if code == 0:
            m.status = "survived"
            continue  # a swap survivor is confirmed by a fresh import
        if code == 5:
            m.status = "no-tests"
            return
        if mode == "fresh" and code != 1 and not _tree_imports(m, tests, timeout):
            m.status = "error"  # the tree on disk does not import without the mutant either (an edit under way)
            return
        m.status = "killed"
        return


def _tree_imports(m: Mutant, tests: tuple[str, ...], timeout: float) -> bool:
    """Whether the tests pass on a fresh import of the unmutated tree (the files on disk may be mid-edit)."""
    clean = Mutant(m.path, "", 0, 0, "", source=(ROOT / m.path).read_text(), tests=m.tests)
    return wait_child(run_child(clean, tests, "fresh"), 3 * timeout + 30) == 0


# ---------------------------------------------------------------- the run


def equivalents(doc: Path) -> dict[str, str]:
    """Mutant id -> reason, from the rows of docs/mutation.md (and of docs/mutation/*.md, one page per
    target) whose first cell is an id in backticks."""
    found = {}
    pages = [doc] if doc.exists() else []
    pages += sorted((doc.parent / doc.stem).glob("*.md"))
    for page in pages:
        for line in page.read_text().splitlines():
            hit = re.match(r"\|\s*`([^`]+::[^`]+)`\s*\|\s*(.*?)\s*\|\s*$", line)
            if hit:
                found[hit.group(1)] = hit.group(2)
    return found


def preload(tests: tuple[str, ...]) -> float:
    """Import the heavy dependencies, the project and the test modules once; returns the baseline time."""
    import pytest

    started = time.monotonic()
    code = pytest.main([*tests, "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--co"], plugins=[])
    if code != 0:
        raise SystemExit(f"collecting {' '.join(tests)} failed (exit {code})")
    gc.freeze()  # each child's collections (pytest runs several) then skip the preloaded heap
    return time.monotonic() - started


def coverage_map(name: str, target: Target, tests: tuple[str, ...], fresh: bool = False):
    """(map, 0) from the cache, (map, -1) newly recorded (the tests preloaded), or (None, exit code) when
    the tests fail."""
    folder = mutation_coverage.cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{mutation_coverage.cache_key(ROOT, target.files, tests)}.json"
    if path.exists() and not fresh:
        try:
            return mutation_coverage.CoverageMap(json.loads(path.read_text())), 0
        except (ValueError, KeyError):
            pass  # a damaged cache is recorded again
    for heavy in ("torch", "pydantic"):  # third-party and slow to import under coverage's tracer
        try:
            importlib.import_module(heavy)
        except ImportError:
            pass
    imported = mutation_coverage.lines_run(ROOT, target.files, lambda: preload(tests))
    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os._exit(mutation_coverage.record(ROOT, target.files, tests, imported, path))
        except BaseException:  # noqa: BLE001
            os._exit(199)
    code = wait_child(pid, 7200)
    if code != 0:
        return None, code
    return mutation_coverage.CoverageMap(json.loads(path.read_text())), -1


def run_mutants(args, target: Target, mutants: list[Mutant], known: dict, cmap, probe, header: str, started) -> int:
    """Judge each mutant in turn (inside the pytest session); returns 2 when the tests fail without one."""
    if probe is not None:  # a cached map: the tests must still pass without a mutant
        clean = wait_child(run_child(*probe, "clean"), 3600)
        if clean != 0:
            print(f"the tests fail without any mutant (exit {clean})", flush=True)
            return 2
    print(f"{header}; ready in {time.monotonic() - started:.1f}s", flush=True)

    durations: list[float] = []
    for index, m in enumerate(mutants, 1):
        if index % 25 == 0:
            print(f"  {index}/{len(mutants)} ({time.monotonic() - started:.0f}s)", flush=True)
        expected = max(durations, default=0.0)
        if args.budget and time.monotonic() - started + expected > args.budget:
            break  # the budget is spent, or a mutant as slow as the slowest so far would overrun it
        if m.ident in known:
            m.status = "equivalent"
            continue
        m.source = mutated_source(m) or ""
        if not m.source:
            m.status = "no-mutation"
            continue
        if m.tests == []:
            m.status = "not-covered"
            print(f"  not covered: {m.ident}", flush=True)
            continue
        begun = time.monotonic()
        judge(m, target.tests_for(m.path), args.timeout or 2 * cmap.seconds(m.tests) + 20)
        durations.append(time.monotonic() - begun)
        if m.status in ("survived", "error"):
            print(f"  {m.status}: {m.ident}", flush=True)
    return 0


def select(mutants: list[Mutant], args) -> list[Mutant]:
    """The mutants a run judges, in their order: those whose id holds ``--only``, then only the survivors
    (``--rerun``) or the mutants not run in the budget (``--resume``) of an earlier ``--out`` file, then a
    sample of ``--sample`` drawn with ``--seed``."""
    if args.only:
        mutants = [m for m in mutants if args.only in m.ident]
    for earlier, listed in ((args.rerun, "survivors"), (args.resume, "not_run_ids")):
        if earlier:
            items = json.loads(Path(earlier).read_text()).get(listed)
            if items is None:
                raise SystemExit(f"{earlier} lists no {listed} (written by an older script?)")
            wanted = {item["id"] if isinstance(item, dict) else item for item in items}
            mutants = [m for m in mutants if m.ident in wanted]
    if args.sample and args.sample < len(mutants):
        mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.path, m.line))
    return mutants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, choices=sorted(TARGETS))
    parser.add_argument("--sample", type=int, default=0, help="run N mutants drawn with --seed (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=0.0, help="start no mutant after this many seconds (0: none)")
    parser.add_argument(
        "--timeout", type=float, default=0.0, help="seconds per mutant (default: 2x the clean run + 20)"
    )
    parser.add_argument(
        "--floor", type=float, default=None, help="exit 1 below this killed fraction (default: the target's)"
    )
    parser.add_argument("--only", default="", help="run only mutants whose id contains this text")
    parser.add_argument("--rerun", default="", help="run only the survivors listed in this earlier --out file")
    parser.add_argument(
        "--resume", default="", help="run only the mutants an earlier --out file lists as not run in its budget"
    )
    parser.add_argument("--out", default="mutation-survivors.json", help="where the survivors list is written")
    parser.add_argument("--fresh-map", action="store_true", help="record the coverage map even if one is cached")
    args = parser.parse_args(argv)

    target = TARGETS[args.target]
    os.chdir(ROOT)
    started = time.monotonic()
    mutants = [m for path in target.files for m in enumerate_mutants(path)]
    total = len(mutants)
    mutants = select(mutants, args)
    known = equivalents(ROOT / "docs" / "mutation.md")

    all_tests = tuple(dict.fromkeys(t for path in target.files for t in target.tests_for(path)))
    cmap, recorded = coverage_map(args.target, target, all_tests, fresh=args.fresh_map)
    if cmap is None:
        print(f"the tests fail without any mutant (exit {recorded}): {' '.join(all_tests)}")
        return 2
    trees = {path: ast.parse((ROOT / path).read_text()) for path in target.files}
    for m in mutants:
        m.tests = cmap.select(m.path, trees[m.path], m.line)
    every = any(m.tests is None for m in mutants if m.ident not in known)
    needed = all_tests if every else tuple(dict.fromkeys(t for m in mutants if m.tests for t in m.tests))
    paths = all_tests if every else tuple(dict.fromkeys(t.split("::", 1)[0] for t in needed))
    probe = None
    if not recorded and needed:
        probe = (Mutant("", "", 0, 0, "", tests=None if every else list(needed)), all_tests)
    header = (
        f"{args.target}: {len(mutants)} of {total} mutants; coverage map {'recorded' if recorded else 'cached'}, "
        f"{len(cmap.tests)} tests"
    )
    outcome: list[int] = []
    if paths:
        in_session(
            paths, lambda: outcome.append(run_mutants(args, target, mutants, known, cmap, probe, header, started))
        )
    if outcome and outcome[0]:
        return outcome[0]
    ran = [m for m in mutants if m.status in ("killed", "timeout", "survived", "not-covered")]
    killed = [m for m in ran if m.status in ("killed", "timeout")]
    survivors = [m for m in ran if m.status in ("survived", "not-covered")]
    score = len(killed) / len(ran) if ran else 0.0
    floor = target.floor if args.floor is None else args.floor
    elapsed = time.monotonic() - started
    summary = {
        "target": args.target,
        "mutants": total,
        "drawn": len(mutants),
        "ran": len(ran),
        "killed": len(killed),
        "survived": len(survivors),
        "not_covered": sum(m.status == "not-covered" for m in mutants),
        "timeouts": sum(m.status == "timeout" for m in mutants),
        "equivalent": sum(m.status == "equivalent" for m in mutants),
        "not_run": sum(m.status == "pending" for m in mutants),
        "errors": [m.ident for m in mutants if m.status == "error"],
        "score": round(score, 4),
        "floor": floor,
        "seconds": round(elapsed, 1),
        "child_cpu_seconds": round(CHILD_CPU[0], 1),
        "seed": args.seed,
        "sample": args.sample,
        "survivors": [{"id": m.ident, "line": m.line, "covered": m.status != "not-covered"} for m in survivors],
        "not_run_ids": [m.ident for m in mutants if m.status == "pending"],
    }
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"{args.target}: {len(killed)}/{len(ran)} killed ({score:.1%}; {summary['timeouts']} by a timeout, "
        f"{summary['not_covered']} survivors not covered), {summary['equivalent']} equivalent, "
        f"{summary['not_run']} not run in the budget, {elapsed:.0f}s; survivors in {args.out}"
    )
    if not ran:
        print("no mutant ran")
        return 1
    if score < floor:
        print(f"below the floor of {floor:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
