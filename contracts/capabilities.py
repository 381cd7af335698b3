"""Capability detection: which generations of the interface an object really implements.

``detect_capabilities(backend)`` looks at every method of the three
generations (``hicache_contracts.protocols``) and reports, per method:

- whether it is present (a callable attribute);
- whether it is a stub: its body does nothing but raise ``NotImplementedError``
  (read from the source, or from the bytecode when there is no source) —
  inherited stubs count, as SGLang's base class ships them (BE-18);
- what a safe probe with empty inputs did (``batch_get_v1([], empty int64
  tensor)``, ``batch_exists([])``, ...): returned, returned None, raised
  ``NotImplementedError`` or raised something else. A probe never raises out
  of detection. Returning None is a BE-18 violation: an unimplemented method
  must raise ``NotImplementedError``;
- whether it accepts ``extra_info`` positionally and by keyword, read from
  ``inspect.signature``; ``*args``/``**kwargs`` count as accepting. BE-8 asks
  only for the forms a pinned release uses (``hicache_spec.call_forms``).

Levels and what they need (``LEVEL_METHODS``):

    core    get, set, exists, batch_get, batch_set, batch_exists
    v1      batch_get_v1, batch_set_v1
    v2      batch_exists_v2, batch_get_v2, batch_set_v2, register_mem_host_pool_v2
    prefix  batch_exists, and every implemented v1/v2 IO method, accept extra_info as releases pass it

A backend class may declare what it claims with a class attribute
``hicache_levels = ("core", "v1")``; ``declared_levels`` reads it.
"""

from __future__ import annotations

import ast
import dis
import inspect
import textwrap
import types
from dataclasses import dataclass
from typing import Any, Callable

import torch

from hicache_contracts.errors import bad_value
from hicache_contracts.protocols import LegacyBackend, PoolAwareV2Backend, ZeroCopyV1Backend, protocol_methods
from hicache_spec import LEVELS
from hicache_spec.call_forms import ABSENT, EXTRA_INFO_FORMS, POSITIONAL, extra_info_forms

__all__ = [
    "ALL_METHODS",
    "CAPABILITY_LEVELS",
    "EXTRA_INFO_METHODS",
    "LEGACY_METHODS",
    "LEVEL_METHODS",
    "PROBED_METHODS",
    "V1_METHODS",
    "V2_METHODS",
    "Capabilities",
    "MethodCapability",
    "ProbeOutcome",
    "declared_levels",
    "detect_capabilities",
    "is_not_implemented_stub",
]

LEGACY_METHODS: tuple[str, ...] = protocol_methods(LegacyBackend)
"""The first generation, with its housekeeping calls (CONTRACT.md §2), as ``LegacyBackend`` declares them."""

V1_METHODS: tuple[str, ...] = protocol_methods(ZeroCopyV1Backend)
"""The zero-copy generation."""

V2_METHODS: tuple[str, ...] = protocol_methods(PoolAwareV2Backend)
"""The pool-aware generation."""

HOUSEKEEPING_METHODS: tuple[str, ...] = ("clear", "get_stats", "register_mem_pool_host")
"""Legacy-generation calls that no level needs implemented (SGLang's base class has them)."""

ALL_METHODS: tuple[str, ...] = LEGACY_METHODS + V1_METHODS + V2_METHODS
"""Every method detection reports on, in a fixed order."""

LEVEL_METHODS: dict[str, tuple[str, ...]] = {
    "core": tuple(name for name in LEGACY_METHODS if name not in HOUSEKEEPING_METHODS),
    "v1": V1_METHODS,
    "v2": V2_METHODS,
}
"""The methods each interface level needs present and implemented."""

CAPABILITY_LEVELS: tuple[str, ...] = ("core", "v1", "v2", "prefix")
"""The levels ``Capabilities.missing_for`` answers for."""

EXTRA_INFO_METHODS: dict[str, int] = {
    "batch_exists": 1,
    "batch_get_v1": 2,
    "batch_set_v1": 2,
    "batch_exists_v2": 2,
    "batch_get_v2": 1,
    "batch_set_v2": 1,
}
"""Methods that take ``extra_info``, with how many arguments come before it (BE-8)."""

PROBED_METHODS: dict[str, Callable[[], tuple[Any, ...]]] = {
    "batch_exists": lambda: ([], None),
    "batch_get_v1": lambda: ([], torch.empty(0, dtype=torch.int64), None),
    "batch_set_v1": lambda: ([], torch.empty(0, dtype=torch.int64), None),
    "batch_exists_v2": lambda: ([], [], None),
    "batch_get_v2": lambda: ([],),
    "batch_set_v2": lambda: ([],),
}
"""Methods probed with empty inputs, and the arguments of each probe (built fresh per call).

Empty inputs are defined by the contract (``batch_exists([])`` is 0, a v1 call
on no keys returns ``[]``), touch no page and need no registered pool; ``extra_info``
goes where SGLang puts it (``hicache_spec.call_forms``)."""

_RETURN_OPCODES = frozenset({"RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "RETURN_GENERATOR"})


class ProbeOutcome:
    """What a probe with empty inputs did (string constants, stable in reports)."""

    NOT_PROBED = "not_probed"
    """The method is absent, a known stub, not probeable, or probing was off."""
    RETURNED = "returned"
    """It returned a value other than None."""
    RETURNED_NONE = "returned_none"
    """It returned None: an unimplemented method that fails to raise (BE-18)."""
    RAISED_NOT_IMPLEMENTED = "raised_not_implemented"
    """It raised NotImplementedError: unimplemented, as the contract asks."""
    RAISED = "raised"
    """It raised another exception; the probe says nothing about implementation."""


@dataclass(frozen=True)
class MethodCapability:
    """What detection found about one method of one backend."""

    name: str
    """The method name (SGLang's wire name)."""
    present: bool
    """The object has a callable attribute of this name."""
    defined_in: str | None
    """The class whose body defines it (``module.QualName``), or None when absent or not found."""
    stub: bool | None
    """Its body only raises NotImplementedError; None when it could not be read."""
    probe: str
    """A ``ProbeOutcome`` constant."""
    probe_detail: str | None
    """The exception raised by the probe (``Type: message``), when it raised."""
    extra_info_positional: bool | None
    """It accepts extra_info as a positional argument; None when not applicable or unreadable."""
    extra_info_keyword: bool | None
    """It accepts ``extra_info=`` by keyword; None when not applicable or unreadable."""

    @property
    def implemented(self) -> bool:
        """Present, not a stub, and its probe neither raised NotImplementedError nor returned None."""
        return (
            self.present
            and self.stub is not True
            and self.probe not in (ProbeOutcome.RAISED_NOT_IMPLEMENTED, ProbeOutcome.RETURNED_NONE)
        )

    @property
    def returns_none_when_probed(self) -> bool:
        """The probe returned None: a BE-18 violation (unimplemented must raise NotImplementedError)."""
        return self.probe == ProbeOutcome.RETURNED_NONE

    @property
    def accepts_extra_info(self) -> bool | None:
        """Accepts extra_info in every form a pinned release hands it to this method (BE-8: positionally, by
        keyword, see ``extra_info_forms``); None when unknown or not applicable."""
        if self.name not in EXTRA_INFO_FORMS:
            return None
        needed = [
            self.extra_info_positional if form == POSITIONAL else self.extra_info_keyword
            for form in extra_info_forms(self.name)
            if form != ABSENT
        ]
        if any(accepted is None for accepted in needed):
            return None
        return all(needed)

    @property
    def problem(self) -> str | None:
        """One sentence on why the method does not count as implemented, or None."""
        where = f" (defined in {self.defined_in})" if self.defined_in else ""
        if not self.present:
            return f"{self.name} is absent"
        if self.stub is True:
            return f"{self.name} only raises NotImplementedError{where}"
        if self.probe == ProbeOutcome.RAISED_NOT_IMPLEMENTED:
            return f"{self.name} raised NotImplementedError on empty input{where}"
        if self.probe == ProbeOutcome.RETURNED_NONE:
            return f"{self.name} returned None on empty input instead of raising NotImplementedError{where} [BE-18]"
        return None


@dataclass(frozen=True)
class Capabilities:
    """What one backend implements, method by method and level by level."""

    methods: tuple[MethodCapability, ...]
    """One entry per name of ``ALL_METHODS``, in that order."""
    declared: tuple[str, ...] | None
    """The levels the class declares in ``hicache_levels``, or None."""

    def method(self, name: str) -> MethodCapability:
        """Return the entry for method ``name``."""
        for entry in self.methods:
            if entry.name == name:
                return entry
        raise bad_value("Capabilities.method", f"must be one of {list(ALL_METHODS)}", name)

    def missing_for(self, level: str) -> tuple[str, ...]:
        """Return the names of the methods ``level`` needs that are absent, unimplemented or,
        for ``prefix``, do not accept extra_info in a form a release hands it (BE-8)."""
        if level not in CAPABILITY_LEVELS:
            raise bad_value("Capabilities.level", f"must be one of {list(CAPABILITY_LEVELS)}", level)
        if level != "prefix":
            return tuple(name for name in LEVEL_METHODS[level] if not self.method(name).implemented)
        missing = []
        for name in EXTRA_INFO_METHODS:
            entry = self.method(name)
            required = name == "batch_exists"
            if not entry.implemented:
                if required:
                    missing.append(name)
                continue
            if entry.accepts_extra_info is False:
                missing.append(name)
        return tuple(missing)

    def supports(self, level: str) -> bool:
        """Return whether nothing is missing for ``level``."""
        return not self.missing_for(level)

    @property
    def legacy(self) -> bool:
        """Every core (legacy) data method is implemented."""
        return self.supports("core")

    @property
    def v1(self) -> bool:
        """Both zero-copy v1 methods are implemented."""
        return self.supports("v1")

    @property
    def v2(self) -> bool:
        """Every pool-aware v2 method is implemented."""
        return self.supports("v2")

    @property
    def prefix(self) -> bool:
        """batch_exists and every implemented v1/v2 IO method accept extra_info in the forms releases hand it."""
        return self.supports("prefix")

    @property
    def returning_none(self) -> tuple[str, ...]:
        """Names of methods whose probe returned None (BE-18 violations)."""
        return tuple(entry.name for entry in self.methods if entry.returns_none_when_probed)


# ---------------------------------------------------------------- static reading
def _plain_function(method: Any) -> types.FunctionType | None:
    """Return the Python function behind a bound method or decorated function, if any."""
    function = getattr(method, "__func__", method)
    try:
        function = inspect.unwrap(function)
    except ValueError:  # a cycle of __wrapped__
        return None
    return function if isinstance(function, types.FunctionType) else None


def _raises_not_implemented(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.Raise) or statement.exc is None:
        return False
    raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
    if isinstance(raised, ast.Name):
        return raised.id == "NotImplementedError"
    return isinstance(raised, ast.Attribute) and raised.attr == "NotImplementedError"


def _can_return(node: ast.AST) -> bool:
    """Whether a function body contains a return or yield of its own (nested scopes excluded)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(child, (ast.Return, ast.Yield, ast.YieldFrom)) or _can_return(child):
            return True
    return False


def _stub_from_source(function: types.FunctionType) -> bool | None:
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) or definition.name != function.__name__:
        return None
    return _raises_not_implemented(definition.body[-1]) and not _can_return(definition)


def _stub_from_bytecode(function: types.FunctionType) -> bool:
    code = function.__code__
    opnames = {instruction.opname for instruction in dis.get_instructions(code)}
    return "NotImplementedError" in code.co_names and "RAISE_VARARGS" in opnames and not opnames & _RETURN_OPCODES


def is_not_implemented_stub(method: Any) -> bool | None:
    """Return whether ``method`` can only end by raising NotImplementedError (BE-18).

    True when its body ends in ``raise NotImplementedError`` and has no
    ``return`` or ``yield`` (read from the source, else from the bytecode);
    False when it can return; None when it is not a Python function.
    """
    function = _plain_function(method)
    if function is None:
        return None
    from_source = _stub_from_source(function)
    return _stub_from_bytecode(function) if from_source is None else from_source


def _defining_class(backend: Any, name: str) -> str | None:
    for klass in type(backend).__mro__:
        if name in vars(klass):
            return f"{klass.__module__}.{klass.__qualname__}"
    return None


def _binds(signature: inspect.Signature, *args: Any, **kwargs: Any) -> bool:
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _extra_info_acceptance(method: Any, name: str) -> tuple[bool | None, bool | None]:
    """Return (positional, keyword) acceptance of extra_info for ``method`` (BE-8)."""
    if name not in EXTRA_INFO_METHODS:
        return None, None
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return None, None
    leading = [None] * EXTRA_INFO_METHODS[name]
    return _binds(signature, *leading, None), _binds(signature, *leading, extra_info=None)


def _probe(method: Any, name: str) -> tuple[str, str | None]:
    """Call ``method`` with empty inputs; never raise (a broken backend must not break detection)."""
    try:
        result = method(*PROBED_METHODS[name]())
    except NotImplementedError:
        return ProbeOutcome.RAISED_NOT_IMPLEMENTED, None
    except Exception as error:  # any failure is a fact to report, not a reason to stop
        return ProbeOutcome.RAISED, f"{type(error).__name__}: {error}"
    if result is None:
        return ProbeOutcome.RETURNED_NONE, None
    return ProbeOutcome.RETURNED, None


def _detect_method(backend: Any, name: str, probe: bool) -> MethodCapability:
    try:
        method = getattr(backend, name, None)
    except Exception:  # a property that raises counts as absent
        method = None
    if method is None or not callable(method):
        return MethodCapability(name, False, None, None, ProbeOutcome.NOT_PROBED, None, None, None)
    stub = is_not_implemented_stub(method)
    outcome, detail = ProbeOutcome.NOT_PROBED, None
    if probe and stub is not True and name in PROBED_METHODS:
        outcome, detail = _probe(method, name)
    positional, keyword = _extra_info_acceptance(method, name)
    return MethodCapability(name, True, _defining_class(backend, name), stub, outcome, detail, positional, keyword)


# ---------------------------------------------------------------- public entry points
def declared_levels(backend: Any) -> tuple[str, ...] | None:
    """Return the ``hicache_levels`` class attribute of ``backend`` (an instance or a class), or None.

    Raises ValueError naming the attribute when it is not a tuple or list of
    known level names (a bare string such as ``"core"`` is the usual mistake).
    """
    klass = backend if isinstance(backend, type) else type(backend)
    levels = getattr(klass, "hicache_levels", None)
    if levels is None:
        return None
    field = f"{klass.__qualname__}.hicache_levels"
    if not isinstance(levels, (tuple, list)) or not all(isinstance(level, str) for level in levels):
        raise bad_value(field, "must be a tuple of level names", levels)
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise bad_value(field, f"must name levels from {sorted(LEVELS)}", unknown[0])
    return tuple(levels)


def detect_capabilities(backend: Any, *, probe: bool = True) -> Capabilities:
    """Return what ``backend`` (an instance) implements, per method and per level.

    With ``probe=True`` (the default), methods in ``PROBED_METHODS`` that are
    not already known stubs are called once with empty inputs; pass
    ``probe=False`` for an object that must not be called at all. Detection
    never raises because of the backend's behaviour; a malformed
    ``hicache_levels`` is reported by ``declared_levels`` as ValueError.
    """
    methods = tuple(_detect_method(backend, name, probe) for name in ALL_METHODS)
    return Capabilities(methods=methods, declared=declared_levels(backend))
