"""The results matrix of SGLang's in-tree backends on every pinned release, rendered into ``docs/``.

    python -m hicache_contracts.conformance.reporting.in_tree_matrix            # every pinned release
    python -m hicache_contracts.conformance.reporting.in_tree_matrix --release 0.5.23 --no-render

Each release runs in a process of its own (one SGLang per process): its
built-in ``file``, ``sim`` and ``shm`` backends, built as SGLang's factory
builds them (``running.sglang_in_tree``), go through the vendor suite with
the release's own objects (smoke profile, seed 0), each with its expected
failures (``expected.in_tree_expected``: the divergence registry's entries
for the class, and what it is by design no backend for). Each run writes a
results bundle into ``docs/matrix/<backend>-<release>/``; the pages
``docs/matrix.md`` and ``docs/matrix.html`` are rendered from the bundles.
An expected failure that now passes, or a failure none names, makes the
command exit 1 after writing everything, so a fixed defect or a new one is
seen at once (then the divergence registry is brought up to date).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["BUNDLES", "PAGES", "main", "render_pages", "run_release"]

ROOT = Path(__file__).resolve().parents[3]
BUNDLES = "docs/matrix"
"""Where the bundles go, relative to the project root."""
PAGES = ("docs/matrix.md", "docs/matrix.html")
MODULE = "hicache_contracts.conformance.reporting.in_tree_matrix"
TITLE = "SGLang's in-tree backends through the vendor suite"
PRODUCTS = {
    "file": "HiCacheFile (file)",
    "sim": "SimHiCacheStorage (sim)",
    "shm": "HiCacheShm (shm)",
}


def run_release(release: str, out: Path) -> list[str]:
    """Run every in-tree backend of ``release`` (this process must hold no other release); return what is off."""
    from hicache_contracts.conformance import SuiteOptions, run_suite
    from hicache_contracts.conformance.reporting.bundle import Product, write_bundle
    from hicache_contracts.conformance.reporting.certify import certification_problems
    from hicache_contracts.conformance.reporting.expected import compare_with_baseline, in_tree_expected
    from hicache_contracts.conformance.running.sglang_in_tree import IN_TREE_BACKENDS, in_tree_factory
    from hicache_contracts.sglang_release import use_release

    use_release(release)
    off = []
    for name in IN_TREE_BACKENDS:
        options = SuiteOptions(profile="smoke", seed=0, sglang_version=release, timeout_s=20)
        with tempfile.TemporaryDirectory(prefix="hicache-in-tree-") as directory:
            report = run_suite(in_tree_factory(name, directory=directory), options)
        expected = in_tree_expected(name, release)
        baseline = compare_with_baseline(report, expected, release=release)
        problems = certification_problems(report, profile=options.profile, checks=None, expected=expected)
        product = Product(
            vendor="SGLang (in-tree)",
            product=PRODUCTS.get(name, name),
            version=release,
            repository="https://github.com/sgl-project/sglang",
            contact="https://github.com/sgl-project/sglang/issues",
        )
        write_bundle(
            report, str(out / f"{name}-{release}"), problems, product=product, expected=expected, baseline=baseline
        )
        off += [f"{name} on {release}: {line}" for line in baseline.lines() if "fatal" in line.lower()]
        print(f"{name} on {release}: {report.counts()}", flush=True)
    return off


def render_pages(root: Path = ROOT) -> dict[str, str]:
    """Return the pages rendered from the bundles under ``root/BUNDLES``: path relative to root → text."""
    from hicache_contracts.conformance.reporting.matrix import find_bundles, load_rows, render_html, render_markdown

    rows = load_rows(find_bundles([str(root / BUNDLES)]))
    base = (root / "docs").resolve()
    return {PAGES[0]: render_markdown(rows, TITLE, base), PAGES[1]: render_html(rows, TITLE, base)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    from hicache_spec.releases import SGLANG_RELEASES

    parser = argparse.ArgumentParser(description="Render the results matrix of SGLang's in-tree backends into docs/.")
    parser.add_argument("--release", action="append", help="only this pinned release (repeatable; default: all)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-render", action="store_true", help="write the bundles only")
    args = parser.parse_args(argv)
    out = ROOT / BUNDLES
    releases = args.release or list(SGLANG_RELEASES)
    if args.in_process:
        (release,) = releases
        off = run_release(release, out)
        for line in off:
            print(line, file=sys.stderr)
        return 1 if off else 0
    status = 0
    for release in releases:
        command = [sys.executable, "-m", MODULE, "--in-process", "--release", release]
        done = subprocess.run(command, cwd=ROOT)
        status = max(status, done.returncode)
    if not args.no_render:
        for path, text in render_pages().items():
            (ROOT / path).write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
