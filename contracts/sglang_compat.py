"""The contract models compared with each pinned SGLang release, field by field.

``describe_models()`` and ``describe_release(module)`` give the same shape —
for each dataclass its fields in order with their defaults, for each enum
its members with their values — one from the project's models, one from a
release's ``hicache_storage`` module. ``compare(project, release, version)``
lists every difference that is neither supported nor a known release
difference:

- the newest pinned release must match exactly (names, order, defaults,
  members and values), except for ``KNOWN_DIFFERENCES``;
- an older release may lack fields and members the project has (interop
  drops such a field while it holds its default, and refuses it otherwise),
  but every field and member it has must be the project's, in the same
  order, with the same default.

``render_table`` writes the release × field / member table kept in
``docs/sglang-compat.md``; ``python -m hicache_contracts.sglang_compat
--check docs/sglang-compat.md`` fails when it is stale. Probing a release
runs in a subprocess per release (one SGLang per process).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

from hicache_spec.releases import LATEST_RELEASE, SGLANG_RELEASES

__all__ = [
    "CLASSES",
    "ENUMS",
    "KNOWN_DIFFERENCES",
    "RELEASE_ONLY_FIELDS",
    "compare",
    "describe_models",
    "describe_release",
    "probe_release",
    "render_table",
]

CLASSES: tuple[str, ...] = (
    "HiCacheStorageConfig",
    "HiCacheStorageExtraInfo",
    "PoolTransfer",
    "PoolTransferResult",
)
"""SGLang's dataclasses the contract models mirror."""

ENUMS: tuple[str, ...] = ("PoolName", "PoolHitPolicy")
"""SGLang's enums the contract mirrors."""

REQUIRED = "<required>"
"""How a field without a default is described."""

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    (
        "PoolTransferResult",
        "extra_pool_hit_pages",
    ): "the project gives it a default (an empty mapping) so a complete miss needs one argument; "
    "SGLang's positional construction is unaffected",
}
"""(class, field) → why the project's default differs from every release's, on purpose."""

RELEASE_ONLY_FIELDS: dict[tuple[str, str, str], str] = {
    (
        "0.5.21",
        "PoolTransfer",
        "anchor_index_parts",
    ): "engine-internal device slots for a dependent allocation, set by the engine's tree after a load and "
    "never read by a backend; gone again in 0.5.22. Interop drops it while None and refuses it otherwise",
}
"""(release, class, field) → why the project does not model a field one release has."""


def _known_difference(name: str, field: str) -> bool:
    """Whether field ``field`` of dataclass ``name`` differs from the release on purpose (KNOWN_DIFFERENCES)."""
    return (name, field) in KNOWN_DIFFERENCES


def _default_text(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value
    if type(value).__name__ == "ReadOnlyMapping":
        value = dict(value)
    return repr(value)


def describe_models() -> dict[str, Any]:
    """Return the project's models and enums in the comparison shape."""
    from hicache_contracts import models

    classes = {}
    for name in CLASSES:
        model = getattr(models, name)
        classes[name] = [
            [field, REQUIRED if info.is_required() else _default_text(info.default)]
            for field, info in model.model_fields.items()
        ]
    enums = {name: [[member.name, member.value] for member in getattr(models, name)] for name in ENUMS}
    return {"classes": classes, "enums": enums}


def describe_release(module: Any) -> dict[str, Any]:
    """Return a release's ``hicache_storage`` module (dataclasses and enums) in the comparison shape."""
    classes = {}
    for name in CLASSES:
        cls = getattr(module, name, None)
        if cls is None or not dataclasses.is_dataclass(cls):
            continue
        fields = []
        for field in dataclasses.fields(cls):
            if field.default is not dataclasses.MISSING:
                default = _default_text(field.default)
            elif field.default_factory is not dataclasses.MISSING:
                default = _default_text(field.default_factory())
            else:
                default = REQUIRED
            fields.append([field.name, default])
        classes[name] = fields
    enums = {
        name: [[member.name, member.value] for member in getattr(module, name)]
        for name in ENUMS
        if getattr(module, name, None) is not None
    }
    return {"classes": classes, "enums": enums}


def compare(project: dict[str, Any], release: dict[str, Any], version: str) -> list[str]:
    """Return each difference between the project's description and a release's that is not allowed.

    ``version`` decides the rule: the newest pinned release must match
    exactly; an older one may only lack what the project has.
    """
    exact = version == LATEST_RELEASE
    problems = []
    for name in CLASSES:
        ours, theirs = project["classes"].get(name), release["classes"].get(name)
        if theirs is None or ours is None:
            problems.append(
                f"{name}: missing in SGLang {version}" if theirs is None else f"{name}: not modelled by the project"
            )
            continue
        theirs = [pair for pair in theirs if (version, name, pair[0]) not in RELEASE_ONLY_FIELDS]
        problems += _compare_items(
            name,
            ours,
            theirs,
            version,
            exact,
            item="field",
            quantity="default",
            show=str,
            allowed=functools.partial(_known_difference, name),
        )
        our_order, their_order = [field for field, _ in ours], [field for field, _ in theirs]
        if [field for field in our_order if field in their_order] != [
            field for field in their_order if field in our_order
        ]:
            problems.append(
                f"{name}: field order differs from SGLang {version}: project {our_order}, release {their_order}"
            )
    for name in ENUMS:
        theirs = release["enums"].get(name)
        if theirs is None:
            problems.append(f"{name}: missing in SGLang {version}")
            continue
        problems += _compare_items(
            name,
            project["enums"].get(name, []),
            theirs,
            version,
            exact,
            item="member",
            quantity="value",
            show=repr,
            allowed=lambda member: False,
        )
    return problems


def _compare_items(
    name: str,
    ours: list[Any],
    theirs: list[Any],
    version: str,
    exact: bool,
    *,
    item: str,
    quantity: str,
    show: Callable[[Any], str],
    allowed: Callable[[str], bool],
) -> list[str]:
    """The differences between two ``[[item, value], ...]`` lists of class ``name`` (fields or enum members)."""
    mine, present = dict(map(tuple, ours)), dict(map(tuple, theirs))
    problems = []
    for key, value in present.items():
        if key not in mine:
            problems.append(f"{name}.{key}: a {item} of SGLang {version} the project lacks")
        elif mine[key] != value and not allowed(key):
            problems.append(
                f"{name}.{key}: {quantity} {show(mine[key])} in the project, {show(value)} in SGLang {version}"
            )
    if exact:
        problems += [
            f"{name}.{key}: a project {item} SGLang {version} does not have" for key in mine if key not in present
        ]
    return problems


def probe_release(version: str, *, timeout: float = 600) -> dict[str, Any]:
    """Describe release ``version`` from a subprocess of its own (fetching its wheel if needed)."""
    done = subprocess.run(
        [sys.executable, "-m", "hicache_contracts.sglang_compat", "--probe", version],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"probing sglang {version} failed: {lines[-1] if lines else done.returncode}")
    probed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return probed


def render_table(project: dict[str, Any], releases: dict[str, dict[str, Any]]) -> str:
    """Return the Markdown compatibility table: one row per field or member, one column per release."""
    versions = list(releases)
    header = "| " + " | ".join(["item", "project", *versions]) + " |"
    rule = "|" + "---|" * (2 + len(versions))
    lines = [
        "# SGLang releases × contract fields",
        "",
        "Generated by `python -m hicache_contracts.sglang_compat --write docs/sglang-compat.md` from each "
        "pinned release's wheel; CI fails when it is stale. A cell holds the field's default (or ✓ for an "
        "enum member); — means the release lacks it. Interop drops a field a release lacks while it holds "
        "its default and refuses it otherwise.",
        "",
    ]
    rows = 0
    for kind, names in (("classes", CLASSES), ("enums", ENUMS)):
        for name in names:
            lines += [f"## {name}", "", header, rule]
            table = _table(
                name,
                project[kind].get(name, []),
                {version: releases[version][kind].get(name, []) for version in versions},
                member=kind == "enums",
            )
            lines += table + [""]
            rows += len(table)
    lines += ["## Known differences", ""]
    for (name, field), why in KNOWN_DIFFERENCES.items():
        lines.append(f"- `{name}.{field}` (default): {why}.")
    for (version, name, field), why in RELEASE_ONLY_FIELDS.items():
        lines.append(f"- `{name}.{field}` (only in {version}): {why}.")
    lines.append("")
    lines.append(f"{rows} rows × {len(versions)} releases.")
    return "\n".join(lines) + "\n"


def _table(name: str, ours: list[Any], theirs: dict[str, list[Any]], *, member: bool) -> list[str]:
    """Return one Markdown row per field (or enum member) of ``name``: the project's column, then each release's."""
    items = [item for item, _ in ours]
    for pairs in theirs.values():
        items += [item for item, _ in pairs if item not in items]
    mine = dict(map(tuple, ours))
    rows = []
    for item in items:
        cells = [f"`{item}`", f"`{mine[item]}`" if item in mine else "—"]
        for pairs in theirs.values():
            present = dict(map(tuple, pairs))
            cells.append("—" if item not in present else ("✓" if member else f"`{present[item]}`"))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _probe_main(version: str) -> int:
    from hicache_contracts.sglang_release import ReleaseError, storage_module

    try:
        module = storage_module(version)
    except ReleaseError as error:
        print(error, file=sys.stderr)
        return 2
    print(json.dumps(describe_release(module)))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hicache_contracts.sglang_compat",
        description="Compare the contract models with the pinned SGLang releases.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--probe", metavar="VERSION", help="print one release's description as JSON")
    group.add_argument("--write", metavar="FILE", help="write the compatibility table")
    group.add_argument("--check", metavar="FILE", help="fail (exit 1) when FILE differs from the table")
    args = parser.parse_args(argv)
    if args.probe:
        return _probe_main(args.probe)
    try:
        releases = {version: probe_release(version) for version in SGLANG_RELEASES}
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 2
    table = render_table(describe_models(), releases)
    path = Path(args.write or args.check)
    if args.write:
        path.write_text(table)
        print(f"wrote {path}")
        return 0
    current = path.read_text() if path.exists() else ""
    if current != table:
        print(f"{path} is stale: run python -m hicache_contracts.sglang_compat --write {path}", file=sys.stderr)
        return 1
    print(f"{path} is up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
