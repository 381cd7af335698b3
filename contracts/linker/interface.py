"""The UnifiedCacheLinker interface of each pinned SGLang release, and a loadability verdict per release.

``INTERFACES`` holds, per release, what SGLang's source says (LNK-1 to LNK-6):
the abstract methods with their parameters, the attributes the wrapper reads,
the concrete helpers, and the call SGLang's loader makes (0.5.23's dynamic
backend; earlier releases construct only their in-tree linkers).
``read_release_interface`` derives the same record from a wheel's source (the
tests compare the two, so the table cannot go stale), and
``check_loadability(cls, version)`` names every method, parameter or keyword a
class lacks for that release without importing SGLang.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from hicache_spec.releases import SGLANG_RELEASES

__all__ = [
    "INTERFACES",
    "LinkerInterface",
    "LoadabilityVerdict",
    "check_loadability",
    "interface_table",
    "read_release_interface",
]

LINKER_SOURCE = "sglang/srt/mem_cache/unified_cache/unified_cache_linker.py"
FACTORY_SOURCE = "sglang/srt/mem_cache/unified_cache/linker_factory.py"


@dataclass(frozen=True)
class LinkerInterface:
    """One release's linker interface."""

    release: str
    abstract: tuple[tuple[str, tuple[str, ...]], ...]
    """(method, its parameters after self) in source order; a parameter with a default ends in '='."""
    attributes: tuple[str, ...]
    """Attributes the class declares (the wrapper or the loader reads them)."""
    concrete: tuple[str, ...]
    """Methods the ABC itself provides."""
    loader_keywords: Optional[tuple[str, ...]]
    """Keywords the dynamic loader passes after (server_args, params); None: no out-of-tree loading."""

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.abstract)


_COMMON = (
    ("lookup", ("rid", "transfers")),
    ("load", ("rid", "transfers")),
    ("start_layer_wise_loading", ()),
)
_OLD = _COMMON + (
    ("cancel_queued_load", ("rid",)),
    ("num_completed_loads", ()),
    ("pop_completed_load", ()),
    ("offload", ("transfers",)),
)
_NEW = _COMMON + (
    ("finish_layer_wise_loading", ("counter_index",)),
    ("cancel_queued_load", ("rid",)),
)
_TAIL = (
    ("num_completed_offloads", ()),
    ("pop_completed_offload", ()),
    ("reset", ()),
    ("close", ()),
)

INTERFACES: dict[str, LinkerInterface] = {
    "0.5.20": LinkerInterface("0.5.20", _OLD + _TAIL, ("layer_done_counter",), (), None),
    "0.5.21": LinkerInterface("0.5.21", _OLD + _TAIL, ("layer_done_counter",), (), None),
    "0.5.22": LinkerInterface(
        "0.5.22", _NEW + (("offload", ("transfers",)),) + _TAIL, ("layer_done_counter",), (), None
    ),
    "0.5.23": LinkerInterface(
        "0.5.23",
        _NEW + (("offload", ("transfers", "session_id=")),) + _TAIL,
        ("layer_done_counter", "pools", "forward_stream"),
        ("record_offload_ready",),
        ("components", "extra_config", "forward_stream"),
    ),
}
"""Every pinned release's linker interface, as its wheel defines it (checked against the wheels by the tests)."""


def _parameters(node: ast.FunctionDef) -> tuple[str, ...]:
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    names = [a.arg + ("=" if d is not None else "") for a, d in zip(positional, defaults)][1:]
    names += [a.arg + ("=" if d is not None else "") for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return tuple(names)


def read_release_interface(root: Path, release: str) -> LinkerInterface:
    """Return the interface release ``release``'s unpacked wheel under ``root`` defines (read, not imported)."""
    tree = ast.parse((root / LINKER_SOURCE).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "UnifiedCacheLinker")
    abstract, concrete, attributes = [], [], []
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            marked = any(getattr(d, "id", getattr(d, "attr", "")) == "abstractmethod" for d in node.decorator_list)
            (abstract if marked else concrete).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            attributes.append(node.target.id)
    keywords: Optional[tuple[str, ...]] = None
    factory = root / FACTORY_SOURCE
    if factory.is_file():
        for node in ast.walk(ast.parse(factory.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "linker_cls":
                keywords = tuple(k.arg for k in node.keywords if k.arg)
                break
    return LinkerInterface(
        release,
        tuple((n.name, _parameters(n)) for n in abstract),
        tuple(attributes),
        tuple(n.name for n in concrete),
        keywords,
    )


@dataclass(frozen=True)
class LoadabilityVerdict:
    """Whether a class answers one release's interface; ``problems`` name each gap, one line each."""

    release: str
    problems: tuple[tuple[str, str], ...]
    """(clause ID, what is missing or refused)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _accepts(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[str]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # a builtin or C callable: nothing to compare
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        return str(error)
    return None


def check_loadability(cls: type, release: str) -> LoadabilityVerdict:
    """Return whether ``cls`` implements release ``release``'s linker interface, naming each gap (LNK-1 to LNK-4)."""
    interface = INTERFACES[release]
    methods_clause = "LNK-1" if release in ("0.5.20", "0.5.21") else "LNK-2"
    problems: list[tuple[str, str]] = []
    missing = []
    for name, parameters in interface.abstract:
        member = getattr(cls, name, None)
        if member is None or not callable(member) or getattr(member, "__isabstractmethod__", False):
            missing.append(name)
            continue
        placeholders = tuple(object() for p in parameters if not p.endswith("="))
        if name == "offload" and release == "0.5.23":
            refused = _accepts(member, (object(), object()), {"session_id": None})
            if refused:
                problems.append(("LNK-3", f"offload(transfers, session_id=None) is refused: {refused}"))
            continue
        refused = _accepts(member, (object(),) + placeholders, {})
        if refused:
            problems.append((methods_clause, f"{name}({', '.join(parameters)}) is refused: {refused}"))
    if missing:
        problems.insert(0, (methods_clause, f"missing methods for {release}: {', '.join(missing)}"))
    if interface.loader_keywords is not None:
        keywords = {k: None for k in interface.loader_keywords}
        refused = _accepts(cls.__init__, (object(), object(), object()), keywords)
        if refused:
            wanted = ", ".join(interface.loader_keywords)
            problems.append(("LNK-4", f"constructor refuses (server_args, params, *, {wanted}): {refused}"))
    return LoadabilityVerdict(release, tuple(problems))


def interface_table(releases: tuple[str, ...] = SGLANG_RELEASES) -> str:
    """Return the per-release interface as a Markdown table (docs/linkers.md holds it, generated)."""
    lines = [
        "| release | abstract methods | `offload` | attributes | loader call (dynamic backend) |",
        "|---|---|---|---|---|",
    ]
    for release in releases:
        interface = INTERFACES[release]
        offload = dict(interface.abstract)["offload"]
        shown = ", ".join(p.rstrip("=") + ("=None" if p.endswith("=") else "") for p in offload)
        call = (
            "`Linker(server_args, params, *, " + ", ".join(interface.loader_keywords) + ")`"
            if interface.loader_keywords
            else "none (in-tree linkers only)"
        )
        attributes = ", ".join(f"`{a}`" for a in interface.attributes)
        if interface.concrete:
            attributes += "; concrete " + ", ".join(f"`{c}()`" for c in interface.concrete)
        methods = ", ".join(f"`{m}`" for m in interface.methods)
        lines.append(
            f"| {release} | {len(interface.methods)}: {methods} | `offload({shown})` | {attributes} | {call} |"
        )
    return "\n".join(lines) + "\n"
