"""A YAML alias bomb given to ``--extra-config``: the safe loader versus reading it whole.

A bomb of ``levels`` lines stands for 9**levels strings once its aliases are
expanded (the 10-line one of the reliability tests: 3.5 billion).

- baseline: what the command did before: ``yaml.safe_load`` (cheap: aliases
  are shared objects) and then a walk of the config looking for secrets that
  follows every alias (the old ``secret_values``), which expands the bomb;
- loader: ``options.load_config`` followed by ``redaction.secret_values``:
  the node graph is sized once per node and the bomb refused before any
  object is built (a small config loads; its walk visits each shared
  container once).

Printed per size: both times and the ratio baseline / loader. The baseline
grows ninefold per line; the loader stays flat. The full 10-line bomb is
timed for the loader only (the baseline held the command for over 120 s).

Run: ``python benchmarks/bench_config_limits.py`` (``--quick`` for fewer sizes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from hicache_contracts.conformance.reporting.redaction import is_secret_key, secret_values
from hicache_contracts.conformance.session.options import load_config


def bomb(levels: int) -> str:
    """A YAML document of ``levels`` lines standing for 9**levels strings, the last one under ``password``."""
    names = [chr(ord("a") + index) for index in range(levels - 1)]
    lines = [f"{names[0]}: &{names[0]} [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{this}: &{this} [{', '.join(['*' + last] * 9)}]" for last, this in zip(names, names[1:])]
    lines.append(f"password: [{', '.join(['*' + names[-1]] * 9)}]")
    return "\n".join(lines) + "\n"


def old_walk(config: Any) -> int:
    """The old secret walk: every alias followed (returns how many strings it looked at)."""
    seen = 0

    def walk(value: Any, secret: bool) -> None:
        nonlocal seen
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, secret or is_secret_key(key))
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, secret)
        elif isinstance(value, str):
            seen += 1

    walk(config, False)
    return seen


def baseline(path: Path) -> float:
    started = time.perf_counter()
    with path.open() as stream:
        old_walk(yaml.safe_load(stream))
    return time.perf_counter() - started


def loader(path: Path) -> float:
    started = time.perf_counter()
    try:
        secret_values(load_config(f"@{path}"))
    except ValueError:  # refused: too many values once expanded
        pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 6 lines only")
    arguments = parser.parse_args()
    sizes = range(3, 7 if arguments.quick else 8)
    with tempfile.TemporaryDirectory() as folder:
        print(f"{'lines':>5} {'strings':>14} {'baseline s':>11} {'loader s':>9} {'ratio':>8}")
        for levels in sizes:
            path = Path(folder) / f"bomb{levels}.yaml"
            path.write_text(bomb(levels))
            old, new = baseline(path), min(loader(path) for _ in range(3))
            print(f"{levels:>5} {9**levels:>14,} {old:>11.4f} {new:>9.4f} {old / new:>7.1f}x")
        path = Path(folder) / "bomb10.yaml"
        path.write_text(bomb(10))
        print(f"10-line bomb ({9**10:,} strings): loader {min(loader(path) for _ in range(3)):.4f} s (refused)")


if __name__ == "__main__":
    main()
