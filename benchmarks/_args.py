"""The command line every benchmark script shares: its description and a ``--quick`` flag."""

from __future__ import annotations

import argparse


def quick_flag(doc: str, help: str) -> bool:
    """Parse the command line of a benchmark whose module docstring is ``doc``; return whether ``--quick`` was given."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=help)
    return parser.parse_args().quick
