"""The shapes of the storage calls each pinned SGLang release makes, and the suite's calls held against them.

A release's record (``docs/call-shapes/<release>.json``) is read from the release's wheel, without
importing it: every call its controllers and tree make on ``storage_backend`` (the method, how many
arguments go positionally, which by keyword, whether ``extra_info`` is positional, a keyword or
absent, and the SGLang function making the call), and every ``PoolTransfer`` its tree's components
build without host slots — the transfers of a hit query (``keys`` real, placeholders or None,
``indices_from_pool``). Regenerate with one command::

    python -m hicache_contracts.conformance.session.call_shapes --write docs/call-shapes
    python -m hicache_contracts.conformance.session.call_shapes --check docs/call-shapes

``ShapeRecorder`` wraps a backend and notes the shape of every call the suite sends it;
``violations(shapes, record)`` lists those no release sends: a hit-query transfer of a trailing pool
carrying real keys (the release sends one placeholder per window page), of a KV-derived pool
carrying keys (it sends None), with host slots, or an ``extra_info`` form the release never uses.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from hicache_contracts.capabilities import EXTRA_INFO_METHODS
from hicache_spec import ALL_PAGES, KV, TRAILING_PAGES

__all__ = [
    "CallShape",
    "PLACEHOLDER",
    "STORAGE_METHODS",
    "recording_class",
    "load_record",
    "main",
    "scan_release",
    "transfer_shape",
    "violations",
]

PLACEHOLDER = "__placeholder__"
"""The key SGLang's tree puts in a trailing pool's hit-query transfer, once per window page."""

STORAGE_METHODS: tuple[str, ...] = (
    "exists",
    "get",
    "set",
    "batch_exists",
    "batch_get",
    "batch_set",
    "batch_get_v1",
    "batch_set_v1",
    "batch_exists_v2",
    "batch_get_v2",
    "batch_set_v2",
    "clear",
    "register_mem_pool_host",
    "register_mem_host_pool_v2",
)
"""The backend methods whose call sites a record lists."""

HIT_QUERY_BUILDERS: tuple[str, ...] = ("build_hicache_transfers", "_build_sidecar_transfers")
"""The tree functions that build the sidecar transfers of a storage prefetch (its hit query among them)."""

KV_PREFETCH_KEYS = "none"
"""The keys of the KV transfer a prefetch's KV-derived sidecars take theirs from (``keys=kv_xfer.keys`` in
``_build_sidecar_transfers``): none, in every pinned release (CONTRACT §9; the real keys reach the backend
as ``batch_exists_v2``'s first argument)."""

SOURCES: tuple[str, ...] = (
    "sglang/srt/managers/cache_controller.py",
    "sglang/srt/mem_cache/hybrid_cache/hybrid_cache_controller.py",
    "sglang/srt/mem_cache/unified_radix_cache.py",
    "sglang/srt/mem_cache/unified_cache",
)
"""Where a release's controllers and tree make storage calls and build transfers (files, or folders of them)."""


# ---------------------------------------------------------------- reading a release
def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for source in SOURCES:
        path = root / source
        if path.is_dir():
            found += sorted(path.rglob("*.py"))
        elif path.is_file():
            found.append(path)
    return found


class _Scanner(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.scope: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.transfers: list[dict[str, Any]] = []

    def _visit_scope(self, node: Any) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = _visit_scope
    visit_FunctionDef = _visit_scope
    visit_AsyncFunctionDef = _visit_scope

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        where = ".".join(self.scope) or "<module>"
        if (
            isinstance(function, ast.Attribute)
            and function.attr in STORAGE_METHODS
            and "storage_backend" in ast.unparse(function.value)
        ):
            keywords = sorted(keyword.arg for keyword in node.keywords if keyword.arg)
            position = EXTRA_INFO_METHODS.get(function.attr)
            if position is None:
                form = None
            elif "extra_info" in keywords:
                form = "keyword"
            elif len(node.args) > position:
                form = "positional"
            else:
                form = "absent"
            self.calls.append(
                {
                    "method": function.attr,
                    "positional": len(node.args),
                    "keywords": keywords,
                    "extra_info": form,
                    "function": where,
                    "file": self.file,
                }
            )
        name = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
        if name == "PoolTransfer" and self.scope and self.scope[-1] in HIT_QUERY_BUILDERS:
            given = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
            if "host_indices" not in given:  # no host slots: a hit query's transfer
                self.transfers.append(
                    {
                        "keys": _keys_kind(given.get("keys")),
                        "indices_from_pool": _source_kind(given.get("indices_from_pool")),
                        "hit_policy": _policy_kind(given.get("hit_policy")),
                        "function": where,
                        "file": self.file,
                    }
                )
        self.generic_visit(node)


def _keys_kind(value: Optional[ast.expr]) -> str:
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return "none"
    if PLACEHOLDER in ast.unparse(value):
        return "placeholder"
    if isinstance(value, ast.Attribute) and value.attr == "keys":
        return "source"  # the keys of the transfer whose slots it reuses
    return "real"


def _source_kind(value: Optional[ast.expr]) -> str:
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return "none"
    text = ast.unparse(value)
    return KV if text.endswith(".KV") else "other"


def _policy_kind(value: Optional[ast.expr]) -> str:
    if value is None:
        return ALL_PAGES
    text = ast.unparse(value)
    for policy in ("TRAILING_PAGES", "ALL_PAGES", "BLOCK_GROUPS"):
        if text.endswith(policy):
            return policy.lower()
    return "other"


def scan_release(root: Path, version: str) -> dict[str, Any]:
    """Return release ``version``'s record, read from its unpacked wheel under ``root`` (the folder holding ``sglang/``)."""
    calls: list[dict[str, Any]] = []
    transfers: list[dict[str, Any]] = []
    for path in _files(root):
        relative = path.relative_to(root).as_posix()
        scanner = _Scanner(relative)
        scanner.visit(ast.parse(path.read_text(encoding="utf-8")))
        calls += scanner.calls
        transfers += scanner.transfers
    return {
        "release": version,
        "source": "read from the release's wheel (python -m hicache_contracts.conformance.session.call_shapes)",
        "calls": calls,
        "hit_query_transfers": transfers,
    }


def load_record(folder: Path, version: str) -> dict[str, Any]:
    """Return the stored record of release ``version`` under ``folder``."""
    loaded: dict[str, Any] = json.loads((folder / f"{version}.json").read_text(encoding="utf-8"))
    return loaded


# ---------------------------------------------------------------- what the suite sends
@dataclass(frozen=True)
class CallShape:
    """The shape of one call a backend received."""

    method: str
    extra_info: Optional[str]
    """``positional``, ``keyword`` or ``absent`` for a method that takes it; None otherwise."""
    transfers: tuple[tuple[str, str, bool, str], ...] = ()
    """For ``batch_exists_v2``: per transfer ``(keys kind, hit policy, host slots given, indices_from_pool kind)``."""


def _value(item: Any) -> str:
    return str(getattr(item, "value", item)).lower()


def transfer_shape(transfer: Any) -> tuple[str, str, bool, str]:
    """Return ``(keys kind, hit policy, host slots given, indices_from_pool kind)`` of a transfer object."""
    keys = getattr(transfer, "keys", None)
    if keys is None:
        kind = "none"
    elif not len(keys):
        kind = "empty"
    elif all(key == PLACEHOLDER for key in keys):
        kind = "placeholder"
    else:
        kind = "real"
    source = getattr(transfer, "indices_from_pool", None)
    return (
        kind,
        _value(getattr(transfer, "hit_policy", ALL_PAGES)),
        getattr(transfer, "host_indices", None) is not None,
        "none" if source is None else (KV if _value(source) == KV else "other"),
    )


def shape_of(method: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> CallShape:
    """Return the shape of the call ``method(*args, **kwargs)``."""
    position = EXTRA_INFO_METHODS.get(method)
    if position is None:
        form = None
    elif "extra_info" in kwargs:
        form = "keyword"
    elif len(args) > position:
        form = "positional"
    else:
        form = "absent"
    transfers: tuple[tuple[str, str, bool, str], ...] = ()
    if method == "batch_exists_v2":
        given = kwargs.get("pool_transfers", args[1] if len(args) > 1 else None)
        transfers = tuple(transfer_shape(transfer) for transfer in given or ())
    return CallShape(method, form, transfers)


def recording_class(cls: type, shapes: list[CallShape]) -> type:
    """Return a subclass of backend class ``cls`` that notes in ``shapes`` the shape of every storage call it gets."""
    members: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    for method in STORAGE_METHODS:
        if not callable(getattr(cls, method, None)):
            continue

        def noted(self: Any, *args: Any, _method: str = method, **kwargs: Any) -> Any:
            shapes.append(shape_of(_method, args, kwargs))
            return getattr(super(made, self), _method)(*args, **kwargs)

        members[method] = functools.wraps(getattr(cls, method))(noted)  # the signature stays the backend's
    made = type(cls.__name__, (cls,), members)
    return made


def violations(shapes: Iterable[CallShape], record: Mapping[str, Any]) -> list[str]:
    """Return each call shape the record's release never sends, as one line naming what differs."""
    forms: dict[str, set[str]] = {}
    for call in record["calls"]:
        if call["extra_info"] is not None:
            forms.setdefault(call["method"], set()).add(call["extra_info"])
    query_keys: dict[tuple[str, str], set[str]] = {}
    for transfer in record["hit_query_transfers"]:
        if transfer["keys"] == "source":  # a pool reusing another's slots; the KV transfer's keys are none
            for policy in (ALL_PAGES, TRAILING_PAGES):
                query_keys.setdefault((policy, KV), set()).add(KV_PREFETCH_KEYS)
        elif transfer["hit_policy"] != ALL_PAGES or transfer["keys"] != "none":
            query_keys.setdefault((transfer["hit_policy"], transfer["indices_from_pool"]), set()).add(transfer["keys"])
    found: list[str] = []
    release = record["release"]
    for shape in shapes:
        allowed = forms.get(shape.method)
        if shape.extra_info is not None and allowed and shape.extra_info not in allowed:
            found.append(
                f"{shape.method}: extra_info {shape.extra_info}, but SGLang {release} passes it "
                f"{' or '.join(sorted(allowed))}"
            )
        for keys, policy, slots, source in shape.transfers:
            if policy == ALL_PAGES and source == "none":
                continue  # a pool with keys of its own: none in a pinned release's hit query
            if slots:
                found.append(f"batch_exists_v2: a {policy} transfer with host slots; SGLang {release} sends none")
            expected = query_keys.get((policy, source))
            if expected and keys not in expected:
                found.append(
                    f"batch_exists_v2: a {policy} transfer (indices_from_pool {source}) with {keys} keys; "
                    f"SGLang {release} sends {' or '.join(sorted(expected))}"
                )
    return found


# ---------------------------------------------------------------- the calls as a guide shows them
MARKDOWN_BEGIN = (
    "<!-- call-shapes:begin (generated by python -m hicache_contracts.conformance.session.call_shapes "
    "--markdown docs/vendor-calls.md) -->"
)
MARKDOWN_END = "<!-- call-shapes:end -->"


def _call_cell(call: Mapping[str, Any]) -> str:
    extra = call.get("extra_info")
    form = f"{call['positional']} positional"
    if call.get("keywords"):
        form += ", " + ", ".join(f"`{name}=`" for name in call["keywords"])
    return form if extra is None else f"{form}; extra_info {extra}"


def render_markdown(records: Mapping[str, Mapping[str, Any]]) -> str:
    """The calls each pinned release makes on a storage backend, and the pool transfers of its hit queries, as
    Markdown tables (one column per release) from the stored records."""
    releases = list(records)
    lines = [
        "Every call a pinned release's controllers make on a storage backend, read from its wheel: the SGLang "
        "function that makes it and how its arguments are passed (· where that release makes no such call).",
        "",
        "| method | SGLang function | " + " | ".join(releases) + " |",
        "|---|---|" + "---|" * len(releases),
    ]
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for release, record in records.items():
        for call in record.get("calls", ()):
            rows.setdefault((call["method"], call["function"]), {})[release] = _call_cell(call)
    for (method, function), cells in sorted(rows.items()):
        shown = " | ".join(cells.get(release, "·") for release in releases)
        lines.append(f"| `{method}` | `{function}` | {shown} |")
    lines += [
        "",
        "The pool transfers a hit query (`batch_exists_v2`) carries, as each release builds them: their keys "
        '(`placeholder`: `["__placeholder__"] * N`; `none`: None; `source`: the keys the pool is given), '
        "`indices_from_pool` and the hit policy; no transfer of a hit query carries host slots.",
        "",
        "| SGLang function | hit policy | keys | indices_from_pool | " + " | ".join(releases) + " |",
        "|---|---|---|---|" + "---|" * len(releases),
    ]
    transfers: dict[tuple[str, str, str, str], set[str]] = {}
    for release, record in records.items():
        for item in record.get("hit_query_transfers", ()):
            key = (item["function"], item["hit_policy"], item["keys"], item["indices_from_pool"])
            transfers.setdefault(key, set()).add(release)
    for (function, policy, keys, derived), present in sorted(transfers.items()):
        shown = " | ".join("✓" if release in present else "·" for release in releases)
        lines.append(f"| `{function}` | {policy} | {keys} | {derived} | {shown} |")
    return "\n".join(lines) + "\n"


def with_rendered_block(text: str, block: str) -> str:
    """``text`` with the generated block between its markers replaced by ``block``; ValueError without markers."""
    start, end = text.find(MARKDOWN_BEGIN), text.find(MARKDOWN_END)
    if start < 0 or end < start:
        raise ValueError(f"the markers {MARKDOWN_BEGIN!r} ... {MARKDOWN_END!r} are missing")
    return text[: start + len(MARKDOWN_BEGIN)] + "\n" + block + text[end:]


def stored_records(folder: Path) -> dict[str, dict[str, Any]]:
    """Every pinned release's stored record under ``folder``, in release order."""
    from hicache_spec.releases import SGLANG_RELEASES

    return {version: load_record(folder, version) for version in SGLANG_RELEASES}


# ---------------------------------------------------------------- the command
def main(argv: Optional[Sequence[str]] = None) -> int:
    """Write or check ``<folder>/<release>.json`` for every pinned release; 1 when a stored record is stale."""
    from hicache_contracts.sglang_release import ReleaseError, fetch_release
    from hicache_spec.releases import SGLANG_RELEASES

    parser = argparse.ArgumentParser(prog="python -m hicache_contracts.conformance.session.call_shapes")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FOLDER", help="write the records into FOLDER")
    mode.add_argument("--check", metavar="FOLDER", help="fail when a record in FOLDER is not what the wheels give")
    mode.add_argument(
        "--markdown",
        metavar="FILE",
        help="render the stored records (docs/call-shapes) into FILE's generated block (no wheel needed)",
    )
    args = parser.parse_args(argv)
    if args.markdown:
        target = Path(args.markdown)
        records = stored_records(target.parent / "call-shapes")
        target.write_text(with_rendered_block(target.read_text(encoding="utf-8"), render_markdown(records)))
        print(f"wrote {target}")
        return 0
    folder = Path(args.write or args.check)
    stale = []
    for version in SGLANG_RELEASES:
        try:
            root = fetch_release(version)
        except ReleaseError as error:
            print(f"call_shapes: {error}", file=sys.stderr)
            return 2
        text = json.dumps(scan_release(root, version), indent=1, sort_keys=True) + "\n"
        target = folder / f"{version}.json"
        if args.write:
            folder.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target}")
        elif not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(str(target))
    if stale:
        print(f"call_shapes: stale: {', '.join(stale)} (regenerate with --write {folder})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
