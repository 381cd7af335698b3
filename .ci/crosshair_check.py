"""Run CrossHair over the spec (no counterexample allowed) and over the planted variants (each must be refuted).

Usage: python .ci/crosshair_check.py [--per-condition-timeout S] [--budget S]
Exit status 0 only if the spec is clean and every planted function is refuted
by one of its ``post`` lines: a counterexample that makes the line false, or an
argument it changed that the line marks immutable (``post[]``). An exception
raised while evaluating a line (a name the contract cannot resolve) refutes
nothing. ``tests/spec/test_planted_contracts.py`` checks that those lines are
the planted spec function's own.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "spec" / "planted_spec.py"


def crosshair(target: str, per_condition_timeout: float, budget: float) -> tuple[int, str]:
    executable = shutil.which("crosshair") or str(Path(sys.executable).with_name("crosshair"))
    command = [
        executable,
        "check",
        "--analysis_kind=PEP316",
        f"--per_condition_timeout={per_condition_timeout}",
        target,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=budget, cwd=ROOT)
    except subprocess.TimeoutExpired as expired:
        output = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        print(f"crosshair: {target} exceeded the budget of {budget:.0f} s", file=sys.stderr)
        return 124, output
    return done.returncode, done.stdout + done.stderr


POST_LINE = re.compile(r"^\s*post(\[[^\]]*\])?:")
ERROR = re.compile(r"planted_spec\.py:(\d+): error: (.*)")


def refuting_functions(functions: list[ast.FunctionDef], lines: list[str], output: str) -> set[str]:
    """Return the planted functions CrossHair refuted through one of their post lines."""
    refuted = set()
    for number, message in ERROR.findall(output):
        line = int(number)
        if "is not marked as mutable" in message:
            pass  # a post[] line broken: CrossHair names the function's first line
        elif not (POST_LINE.match(lines[line - 1]) and message.startswith("false when calling")):
            continue  # not a post line, or the condition raised: nothing was refuted
        refuted |= {node.name for node in functions if node.lineno <= line <= (node.end_lineno or node.lineno)}
    return refuted


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-condition-timeout", type=float, default=3.0)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds allowed for each of the two runs")
    args = parser.parse_args()

    started = time.monotonic()
    status, output = crosshair("spec", args.per_condition_timeout, args.budget)
    spec_seconds = time.monotonic() - started
    if status != 0:
        print(output)
        print(f"crosshair: counterexample or failure in spec/ (exit {status})", file=sys.stderr)
        return 1
    print(f"crosshair: spec/ clean in {spec_seconds:.1f} s (per-condition timeout {args.per_condition_timeout} s)")

    functions = [node for node in ast.parse(PLANTED.read_text()).body if isinstance(node, ast.FunctionDef)]
    planted = [node.name for node in functions]
    started = time.monotonic()
    status, output = crosshair(str(PLANTED.relative_to(ROOT)), args.per_condition_timeout, args.budget)
    lines = PLANTED.read_text().splitlines()
    refuted = refuting_functions(functions, lines, output)
    for node in functions:  # CrossHair's search is not deterministic: a miss gets one more, longer try alone
        if node.name not in refuted:
            target = f"{PLANTED.relative_to(ROOT)}:{node.lineno}"
            _, again = crosshair(target, 3 * args.per_condition_timeout, args.budget)
            refuted |= refuting_functions(functions, lines, again) & {node.name}
            output += again
    missed = [name for name in planted if name not in refuted]
    print(f"crosshair: planted variants run in {time.monotonic() - started:.1f} s")
    for name in planted:
        print(f"  {'refuted' if name in refuted else 'NOT REFUTED'}: {name}")
    if missed:
        print(output)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
