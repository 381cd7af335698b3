"""Run every benchmark, write one JSON of all their figures and ratios, and draw the scaling curves as PNGs.

    python benchmarks/run_all.py [--quick] [--json PATH] [--figures DIR] [--skip NAME ...]

- Scripts with a ``run(quick)`` function (bench_controller,
  bench_controller_prefix, bench_memory_scaling, bench_redis,
  bench_file_backend, bench_recorder, bench_strategies) are called in this process and their figures go into
  the JSON as they return them.
- The others are run as scripts (``--quick`` passed; one without a quick
  mode, bench_host_pool, is left out of a ``--quick`` run);
  their output is kept, and every ratio they print (``1.23x``) is listed
  with the line it is on.
- The conformance suite against the reference backends is timed per
  profile (``--quick``: smoke; otherwise smoke and standard).
- Charts (PNG, in ``--figures``, default benchmarks/figures): memory backend
  throughput against pages (1k-64k), the controller's per-call prefix cost
  against prefix depth and against the number of slices, suite time per
  profile. Drawn with matplotlib when it is installed (the ``bench``
  extra), else with the built-in PNG writer of ``_plot.py``.

It reports; it never fails on a ratio. A benchmark that cannot run (no
Redis server, a broken import) is recorded with its error and the run goes
on; the exit status is 0 unless the runner itself breaks, or, with
``--strict`` (CI), a benchmark crashed. bench_redis uses
``$HICACHE_REDIS_URL`` when it is set, else starts its own ``redis-server``
on a free loopback port. The last lines list every ratio that has a target, its value
in this run, and whether it is met.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _plot import chart_engine, line_chart  # noqa: E402  (the benchmarks folder is not a package)

IN_PROCESS = (
    "bench_controller_prefix",
    "bench_memory_scaling",
    "bench_controller",
    "bench_redis",
    "bench_file_backend",
    "bench_recorder",
    "bench_strategies",
)
"""Benchmarks with a ``run(quick)`` function."""
AS_SCRIPTS = {
    "bench_prefix_keys": True,
    "bench_validation": True,
    "bench_host_pool": False,
    "bench_config_limits": True,
}
"""Benchmarks run as scripts, and whether each takes ``--quick``."""
PROFILES = ("smoke", "standard")
TARGETS = (
    # (name, benchmark, path into its figures, ">=" or "<=", target)
    (
        "prefix cost, last / first slice at 1,024 slices (worst depth)",
        "bench_controller_prefix",
        ("worst_last_over_first_at_1024",),
        "<=",
        1.5,
    ),
    ("controller backup / torch copy (two threads)", "bench_controller", ("backup", "over_torch_copy"), ">=", 0.8),
    ("controller prefetch / torch copy (two threads)", "bench_controller", ("prefetch", "over_torch_copy"), ">=", 0.8),
    ("Redis backup / raw SET (hiredis)", "bench_redis", ("hiredis", "backup_over_raw_set"), ">=", 0.9),
    ("Redis prefetch / raw GET (hiredis)", "bench_redis", ("hiredis", "prefetch_over_raw_get"), ">=", 0.9),
    *(
        (f"file {name}", "bench_file_backend", ("ratios", figure), ">=", target)
        for name, figure, target in (
            ("write / plain os.write", "write / plain write", 0.9),
            ("read / plain os.readv into the pool's pages", "read / plain read into pool", 0.9),
            ("write / plain os.write, CPU time", "cpu: write / plain write", 0.9),
            ("read / plain os.readv into the pool's pages, CPU time", "cpu: read / plain read into pool", 0.9),
            ("write / HiCacheFile write", "write / HiCacheFile write", 1.2),
            ("read / HiCacheFile read", "read / HiCacheFile read", 2.0),
            ("write / plain os.write, median of per-round ratios", "paired: write / plain write", 0.9),
            (
                "read / plain os.readv into the pool's pages, median of per-round ratios",
                "paired: read / plain read into pool",
                0.9,
            ),
            ("write / HiCacheFile write, median of per-round ratios", "paired: write / HiCacheFile write", 1.2),
            ("read / HiCacheFile read, median of per-round ratios", "paired: read / HiCacheFile read", 2.0),
        )
    ),
    *(
        (
            f"recorder / bare, {name}, batch_exists ({shown})",
            "bench_recorder",
            ("calls", f"64 KiB pages, batch_exists, {case}", measure),
            "<=",
            target,
        )
        for name, case, (shown, measure), target in (
            ("PrefixKeys prefix", "PrefixKeys", ("isolated", "isolated"), 1.05),
            ("16k-key list prefix", "list", ("isolated", "isolated"), 1.5),
            ("new 16k-key list each call", "new list", ("isolated", "isolated"), 1.5),
            ("growing list (prefix + batch)", "growing list", ("isolated", "isolated"), 1.5),
            ("new 16k-key list each call", "new list", ("isol., CPU", "isolated_cpu"), 1.5),
            ("growing list (prefix + batch)", "growing list", ("isol., CPU", "isolated_cpu"), 1.5),
        )
    ),
)
"""The ratios with a target (issue: performance), read from the in-process benchmarks' figures."""
_RATIO = re.compile(r"(\d+(?:\.\d+)?)x\b")


def run_in_process(name: str, quick: bool) -> dict:
    started = time.perf_counter()
    try:
        figures = importlib.import_module(name).run(quick)
        return {"figures": figures, "seconds": time.perf_counter() - started}
    except Exception as error:  # recorded, never raised: the runner reports
        return {
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
            "seconds": time.perf_counter() - started,
        }


def run_script(name: str, takes_quick: bool, quick: bool) -> dict:
    command = [sys.executable, os.path.join(HERE, f"{name}.py")] + (["--quick"] if quick and takes_quick else [])
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    lines = completed.stdout.splitlines()
    ratios = [
        {"line": line.strip(), "ratios": [float(value) for value in _RATIO.findall(line)]}
        for line in lines
        if _RATIO.search(line)
    ]
    result: dict = {
        "returncode": completed.returncode,
        "seconds": time.perf_counter() - started,
        "ratios": ratios,
        "output": completed.stdout,
    }
    if completed.returncode:
        result["error"] = completed.stderr[-2000:]
    return result


def time_suite(profile: str) -> dict:
    command = [sys.executable, "-m", "hicache_contracts.cli", "run", "--profile", profile, "--no-color", "--quiet"]
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    return {"profile": profile, "seconds": time.perf_counter() - started, "returncode": completed.returncode}


def summarize(results: dict) -> list[dict]:
    """Return one row per target: its ratio in this run (None when its benchmark did not run), and whether met."""
    rows = []
    for name, benchmark, path, sense, target in TARGETS:
        value: Any = results["benchmarks"].get(benchmark, {}).get("figures")
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        met = None if not isinstance(value, (int, float)) else (value >= target if sense == ">=" else value <= target)
        rows.append({"name": name, "benchmark": benchmark, "ratio": value, "target": f"{sense} {target}", "met": met})
    return rows


def draw(results: dict, directory: str) -> list[str]:
    """Draw every chart the results allow; return the files written."""
    os.makedirs(directory, exist_ok=True)
    written = []
    scaling = results["benchmarks"].get("bench_memory_scaling", {}).get("figures")
    if scaling:
        rows = scaling["by_pages"]
        path = os.path.join(directory, "memory_scaling.png")
        line_chart(
            path,
            f"memory backend, {scaling['page_bytes'] // 1024} KiB pages: throughput vs pages",
            "pages",
            "GB/s",
            {
                "batch_set_v1 (write)": [(int(p), row["write_gb_s"]) for p, row in rows.items()],
                "batch_get_v1 (read)": [(int(p), row["read_gb_s"]) for p, row in rows.items()],
                "torch copy_": [(int(p), row["torch_copy_gb_s"]) for p, row in rows.items()],
            },
            log_x=True,
        )
        written.append(path)
    prefix = results["benchmarks"].get("bench_controller_prefix", {}).get("figures")
    if prefix:
        controller, rebuilt = prefix["controller"], prefix["rebuilt"]

        def series(table: dict, slices: int = None, depth: int = None) -> list:
            points = []
            for label, row in table.items():
                count, prefix_depth = (int(part) for part in label.split("x"))
                if slices is not None and count == slices:
                    points.append((max(prefix_depth, 1), row["mean_us"]))
                if depth is not None and prefix_depth == depth:
                    points.append((count, row["mean_us"]))
            return points

        for name, title, x_label, lines in (
            (
                "prefix_cost_vs_depth.png",
                "controller extra info per call vs prefix depth (1 = no prefix)",
                "prefix pages",
                {"1024 slices": series(controller, slices=1024), "64 slices": series(controller, slices=64)},
            ),
            (
                "prefix_cost_vs_slices.png",
                "extra info per call vs slices (no prefix)",
                "slices of 128 pages",
                {"controller": series(controller, depth=0), "rebuilt per call": series(rebuilt, depth=0)},
            ),
        ):
            path = os.path.join(directory, name)
            line_chart(path, title, x_label, "us per call", lines, log_x=True)
            written.append(path)
    suite = results.get("suite_time")
    if suite:
        path = os.path.join(directory, "suite_time.png")
        line_chart(
            path,
            "conformance suite time (1 = smoke, 2 = standard, 3 = exhaustive)",
            "profile",
            "seconds",
            {
                "reference backends + engine": [
                    (PROFILES.index(row["profile"]) + 1, row["seconds"]) for row in suite if row["profile"] in PROFILES
                ]
            },
        )
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark's quick mode; smoke profile only")
    parser.add_argument("--json", default=os.path.join(HERE, "results.json"), help="where the JSON goes")
    parser.add_argument("--figures", default=os.path.join(HERE, "figures"), help="where the PNGs go")
    parser.add_argument("--skip", nargs="*", default=[], help="benchmarks (or 'suite') to leave out")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a benchmark crashed (never for a ratio); for CI"
    )
    arguments = parser.parse_args()
    results: dict[str, Any] = {
        "quick": arguments.quick,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "benchmarks": {},
    }
    for name in IN_PROCESS:
        if name not in arguments.skip:
            print(f"== {name}", flush=True)
            results["benchmarks"][name] = run_in_process(name, arguments.quick)
    for name, takes_quick in AS_SCRIPTS.items():
        if arguments.quick and not takes_quick:
            continue  # a script without a quick mode stays out of the smoke run
        if name not in arguments.skip:
            print(f"== {name}", flush=True)
            results["benchmarks"][name] = run_script(name, takes_quick, arguments.quick)
    if "suite" not in arguments.skip:
        results["suite_time"] = []
        for profile in PROFILES[:1] if arguments.quick else PROFILES:
            print(f"== conformance suite, profile {profile}", flush=True)
            results["suite_time"].append(time_suite(profile))
    results["load_average_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    results["summary"] = summarize(results)
    results["chart_engine"] = chart_engine()
    results["figures"] = draw(results, arguments.figures)
    os.makedirs(os.path.dirname(os.path.abspath(arguments.json)), exist_ok=True)
    with open(arguments.json, "w") as handle:
        json.dump(results, handle, indent=1, default=str)
    for name, outcome in results["benchmarks"].items():
        state = (
            f"error: {outcome['error'].splitlines()[-1] if outcome['error'] else ''}" if outcome.get("error") else "ok"
        )
        print(f"{name:28s} {outcome['seconds']:7.1f} s  {state}")
    for row in results["summary"]:
        shown = "not run" if row["ratio"] is None else f"{row['ratio']:.3f}"
        state = "" if row["met"] is None else ("met" if row["met"] else "missed")
        print(f"  {row['name']:70s} {shown:>8s}  target {row['target']:7s} {state}")
    print(f"results: {arguments.json}; figures ({results['chart_engine']}): {', '.join(results['figures']) or 'none'}")
    crashed = [name for name, outcome in results["benchmarks"].items() if outcome.get("error")]
    crashed += [f"suite {row['profile']}" for row in results.get("suite_time", []) if row["returncode"] not in (0, 1)]
    if crashed:
        print(f"crashed: {', '.join(crashed)}")
        if arguments.strict:
            sys.exit(1)


if __name__ == "__main__":
    main()
