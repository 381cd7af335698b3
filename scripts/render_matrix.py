"""Render the results matrix of SGLang's in-tree backends on every pinned release into ``docs/``.

    .venv/bin/python scripts/render_matrix.py                    # every pinned release, then the pages
    .venv/bin/python scripts/render_matrix.py --release 0.5.23   # one release, then the pages

Each release runs in a process of its own (one SGLang per process): its
built-in ``file``, ``sim`` and ``shm`` backends, built as SGLang's factory
builds them (``hicache_contracts.conformance.running.sglang_in_tree``), go
through the vendor suite with the release's own objects (smoke profile,
seed 0), each read against its expected failures
(``hicache_contracts.conformance.reporting.expected.in_tree_expected``: the
divergence registry's entries for the class, and what it is by design no
backend for). Each run writes a results bundle into
``docs/matrix/<backend>-<release>/``; ``docs/matrix.md`` and
``docs/matrix.html`` are rendered from the bundles
(``hicache-conform matrix``). An expected failure that now passes, or a
failure none names, makes the script exit 1 after writing everything, so a
fixed defect or a new one is seen at once; then bring the divergence
registry up to date and run it again. ``tests/conformance/reporting/test_matrix.py``
fails when the pages differ from the bundles or a bundle holds such a flip.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
BUNDLES = ROOT / "docs" / "matrix"
PRODUCTS = {"file": "HiCacheFile (file)", "sim": "SimHiCacheStorage (sim)", "shm": "HiCacheShm (shm)"}


def run_release(release: str) -> list[str]:
    """Run every in-tree backend of ``release`` in this process and write its bundle; return what is off."""
    from hicache_contracts.conformance import SuiteOptions, run_suite
    from hicache_contracts.conformance.reporting.bundle import Product, expected_failure_passes, write_bundle
    from hicache_contracts.conformance.reporting.certify import certification_problems
    from hicache_contracts.conformance.reporting.expected import compare_with_baseline, in_tree_expected
    from hicache_contracts.conformance.running.sglang_in_tree import IN_TREE_BACKENDS, in_tree_factory
    from hicache_contracts.sglang_release import use_release

    use_release(release)
    off = []
    for name, entry in IN_TREE_BACKENDS.items():
        options = SuiteOptions(profile="smoke", seed=0, sglang_version=release, timeout_s=20)
        with tempfile.TemporaryDirectory(prefix="hicache-in-tree-") as directory:
            report = run_suite(in_tree_factory(name, directory=directory), options)
        expected = in_tree_expected(entry.module, entry.class_name, release)
        baseline = compare_with_baseline(report, expected, release=release)
        problems = certification_problems(report, profile=options.profile, checks=None, expected=expected)
        problems += [expected_failure_passes(target) for target in baseline.now_passing]
        product = Product(
            vendor="SGLang (in-tree)",
            product=PRODUCTS.get(name, name),
            version=release,
            repository="https://github.com/sgl-project/sglang",
            contact="https://github.com/sgl-project/sglang/issues",
        )
        folder = BUNDLES / f"{name}-{release}"
        write_bundle(report, str(folder), problems, product=product, expected=expected, baseline=baseline)
        off += [f"{name} on {release}: {line}" for line in baseline.lines() if "(fatal" in line.lower()]
        print(f"{name} on {release}: {report.counts()}", flush=True)
    return off


def main(argv: Optional[Sequence[str]] = None) -> int:
    from hicache_spec.releases import SGLANG_RELEASES

    parser = argparse.ArgumentParser(description="Render the results matrix of SGLang's in-tree backends.")
    parser.add_argument("--release", action="append", help="only this pinned release (repeatable; default: all)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    releases = args.release or list(SGLANG_RELEASES)
    if args.in_process:
        off = run_release(releases[0])
        for line in off:
            print(line, file=sys.stderr)
        return 1 if off else 0
    status = 0
    for release in releases:
        done = subprocess.run([sys.executable, __file__, "--in-process", "--release", release], cwd=ROOT)
        status = max(status, done.returncode)
    from hicache_contracts.conformance.reporting.matrix import render_pages

    for path, text in render_pages(BUNDLES, ROOT / "docs").items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
