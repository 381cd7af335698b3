"""Immutable, persistent key sequences: ``PrefixKeys`` and its sibling ``PageKeys``.

A ``PrefixKeys`` is the ordered keys of every page before a call's first key
(PFX-1). The engine hands one to a backend with every batch of an operation,
and the prefix of batch ``i + 1`` is the prefix of batch ``i`` followed by
batch ``i``'s keys (PFX-2). Rebuilding a list per batch costs O(prefix length)
per batch; ``PrefixKeys.extended(batch)`` costs O(len(batch)) and shares the
parent's keys, so the prefix handed to a backend can never change afterwards
(PFX-5) without anyone copying it.

Representation: a chain of immutable nodes, each holding one tuple chunk, a
link to its parent and the total length. The flat tuple of all keys is built
the first time a caller indexes or iterates, and cached on the node; building
it walks back only to the nearest node that already has one.

For backends it reads like a read-only list:

- ``len``, iteration, ``in``, ``reversed``, ``index``, ``count``;
- indexing, negative too; the last chunk is read without building the flat
  tuple, so ``prefix[-1]`` stays O(1);
- slicing returns a new ``list`` (a copy: changing it cannot touch the prefix);
- ``prefix + keys`` and ``keys + prefix`` return a new ``list``, as a list
  would; ``p += keys`` therefore rebinds ``p`` to a new ``list`` and leaves the
  original prefix untouched (there is no ``__iadd__``);
- ``copy()`` returns a new ``list``, like ``list.copy``;
- it equals any list, tuple or key sequence holding the same keys, hashes like
  the tuple of its keys, pickles, and its ``repr`` is valid Python.

It has no mutating method at all: no ``append``, ``extend``, ``insert``,
``remove``, ``pop``, ``clear``, ``sort``, ``reverse``, ``__setitem__``,
``__delitem__`` or ``__iadd__``. The O(1) extension is named ``extended`` so
that it cannot be mistaken for ``list.extend``. ``json.dumps`` needs a real
list: pass ``list(prefix)`` (pydantic models serialise it to a JSON list).

``PageKeys`` is the same structure by another name, for the keys of a
transfer (``PoolTransfer.keys``), which are one key per page rather than a
history.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, Callable, Optional, Union

from pydantic_core import core_schema

from hicache_contracts.errors import ContractViolation

__all__ = [
    "KeysInput",
    "PageKeys",
    "PageKeysField",
    "PrefixKeys",
    "PrefixKeysField",
    "find_key_problem",
]

KeysInput = Union[list[Any], tuple[Any, ...], "PrefixKeys"]
"""What a key-sequence field accepts: a list, a tuple or a key sequence of str."""

_set_attribute = object.__setattr__
_new = object.__new__
_join = "".join

_RULE_KEY = "page key must be a non-empty str"
"""The KEY-2 rule for a key outside strict mode."""


def find_key_problem(keys: tuple[Any, ...]) -> Optional[int]:
    """Return the index of the first key that is not a non-empty str, or None if all are. Clause: KEY-2.

    Fast path in C for the common case: ``str.join`` accepts only str, ``all``
    finds an empty one.
    """
    try:
        "".join(keys)
    except TypeError:
        pass
    else:
        if all(keys):
            return None
    for index, key in enumerate(keys):
        if not isinstance(key, str) or not key:
            return index
    return None


def _as_key_tuple(keys: object, field: str, container_clause: str = "PFX-1") -> tuple[str, ...]:
    """Return ``keys`` (a list, tuple or key sequence) as a checked tuple; raise ContractViolation otherwise.

    A container of the wrong kind breaks ``container_clause``; a bad key breaks KEY-2.
    """
    if isinstance(keys, (list, tuple)):
        flat = tuple(keys)
    elif isinstance(keys, PrefixKeys):
        return keys.as_tuple()  # checked when it was built
    else:
        raise ContractViolation(field, "must be a list, tuple or key sequence of str", keys, container_clause)
    try:  # the fast path of find_key_problem, inlined: this runs once per batch
        "".join(flat)
    except TypeError:
        pass
    else:
        if all(flat):
            return flat
    bad = find_key_problem(flat)
    if bad is not None:
        raise ContractViolation(f"{field}[{bad}]", _RULE_KEY, flat[bad], "KEY-2")
    return flat


def _checked_node(cls: type[PrefixKeys], value: Any) -> Optional[PrefixKeys]:
    """Return a root node over a list or tuple of non-empty str, or None for anything else (KEY-2).

    The common case of a model field, in C: ``str.join`` accepts only str,
    ``all`` finds an empty one. None sends the value to ``_as_key_tuple``,
    which says what is wrong.
    """
    kind = type(value)
    if kind is not list and kind is not tuple:
        return None
    flat: tuple[Any, ...] = tuple(value)
    try:
        _join(flat)
    except TypeError:
        return None
    if not all(flat):
        return None
    return _root_node(cls, flat)


def _root_node(cls: type[PrefixKeys], flat: tuple[str, ...]) -> PrefixKeys:
    """A root node over ``flat``, whose keys have already been checked."""
    node = _new(cls)
    _set_parent(node, None)
    _set_chunk(node, flat)
    _set_length(node, len(flat))
    _set_flat(node, flat)
    _set_hash(node, None)
    return node


class PrefixKeys:
    """An immutable, persistent sequence of page keys that reads like a read-only list. Clauses: PFX-1, PFX-5."""

    __slots__ = ("_parent", "_chunk", "_length", "_flat", "_hash")

    _parent: Optional[PrefixKeys]
    _chunk: tuple[str, ...]
    _length: int
    _flat: Optional[tuple[str, ...]]
    _hash: Optional[int]

    _container_clause = "PFX-1"
    """The clause a container of the wrong kind breaks: PFX-1, the prefix is a list or None."""

    def __init__(self, keys: KeysInput = ()) -> None:
        """Build from a list, tuple or key sequence of non-empty str; raise ContractViolation otherwise (KEY-2)."""
        flat = _as_key_tuple(keys, f"{type(self).__name__}.keys", self._container_clause)
        _set_attribute(self, "_parent", None)
        _set_attribute(self, "_chunk", flat)
        _set_attribute(self, "_length", len(flat))
        _set_attribute(self, "_flat", flat)
        _set_attribute(self, "_hash", None)

    # ------------------------------------------------------------ building
    @classmethod
    def _from_checked_tuple(cls, flat: tuple[str, ...]) -> PrefixKeys:
        """Return a root node over ``flat``, whose keys have already been checked."""
        return _root_node(cls, flat)

    def extended(self, batch: KeysInput) -> PrefixKeys:
        """Return a new sequence: these keys followed by ``batch``. Clauses: PFX-2, PFX-4, PFX-5.

        O(len(batch)), whatever the length of ``self``; ``self`` is unchanged
        and shared. An empty batch returns ``self`` (the value is the same and
        neither can change). Raises ContractViolation for a non-str or empty key.
        """
        chunk = _as_key_tuple(batch, "batch", self._container_clause)
        if not chunk:
            return self
        node = object.__new__(type(self))
        # The slot descriptors write past the __setattr__ guard at half the cost of object.__setattr__.
        _set_parent(node, self)
        _set_chunk(node, chunk)
        _set_length(node, self._length + len(chunk))
        _set_flat(node, None)
        _set_hash(node, None)
        return node

    def as_tuple(self) -> tuple[str, ...]:
        """Return every key as one tuple, built once and cached (O(n) the first time, O(1) after)."""
        flat = self._flat
        if flat is not None:
            return flat
        chunks: list[tuple[str, ...]] = []
        node: Optional[PrefixKeys] = self
        while node is not None and node._flat is None:
            chunks.append(node._chunk)
            node = node._parent
        base = node._flat if node is not None and node._flat is not None else ()
        chunks.append(base)
        chunks.reverse()
        flat = tuple(chain.from_iterable(chunks))
        _set_attribute(self, "_flat", flat)
        return flat

    def copy(self) -> list[str]:
        """Return a new list of the keys, like ``list.copy`` (PFX-6: what a backend keeps)."""
        return list(self.as_tuple())

    # ------------------------------------------------------------ sequence
    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_tuple())

    def __reversed__(self) -> Iterator[str]:
        return reversed(self.as_tuple())

    def __contains__(self, key: object) -> bool:
        return key in self.as_tuple()

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self.as_tuple()[index])  # a copy, never a view
        try:
            position = operator.index(index)
        except TypeError:
            raise TypeError(
                f"{type(self).__name__} indices must be integers or slices, not {type(index).__name__}"
            ) from None
        length = self._length
        if position < 0:
            position += length
        if not 0 <= position < length:
            raise IndexError(f"{type(self).__name__} index out of range")
        chunk = self._chunk
        last_start = length - len(chunk)
        if position >= last_start:  # the last chunk: no flat tuple needed
            return chunk[position - last_start]
        return self.as_tuple()[position]

    def index(self, key: object, start: int = 0, stop: int = 2**63 - 1) -> int:
        """Return the first index of ``key`` (ValueError if absent), like ``list.index``."""
        return self.as_tuple().index(key, start, stop)

    def count(self, key: object) -> int:
        """Return how many times ``key`` occurs, like ``list.count``."""
        return self.as_tuple().count(key)

    # ------------------------------------------------------------ operators
    def __add__(self, other: object) -> Any:
        """Return a new list: these keys followed by ``other`` (a list, tuple or key sequence)."""
        if isinstance(other, (list, tuple, PrefixKeys)):
            return [*self.as_tuple(), *other]
        return NotImplemented

    def __radd__(self, other: object) -> Any:
        """Return a new list: ``other`` (a list or tuple) followed by these keys."""
        if isinstance(other, (list, tuple)):
            return [*other, *self.as_tuple()]
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, PrefixKeys):
            return self._length == other._length and self.as_tuple() == other.as_tuple()
        if isinstance(other, tuple):
            return self._length == len(other) and self.as_tuple() == other
        if isinstance(other, list):
            return self._length == len(other) and self.as_tuple() == tuple(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        cached = self._hash
        if cached is None:
            cached = hash(self.as_tuple())  # equal to the hash of the equal tuple
            _set_attribute(self, "_hash", cached)
        return cached

    # ------------------------------------------------------------ immutability
    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use extended() to build a longer one")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __copy__(self) -> PrefixKeys:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PrefixKeys:
        return self

    def __reduce__(self) -> tuple[Callable[[tuple[str, ...]], PrefixKeys], tuple[tuple[str, ...]]]:
        return (type(self)._from_checked_tuple, (self.as_tuple(),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.as_tuple())!r})"

    # ------------------------------------------------------------ pydantic
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        """Validate a list, tuple or key sequence of non-empty str into ``cls``; serialise to a list."""

        def from_python(value: object) -> PrefixKeys:
            if type(value) is cls:
                return value  # already checked when it was built
            node = _checked_node(cls, value)
            if node is not None:
                return node
            return cls._from_checked_tuple(_as_key_tuple(value, "", cls._container_clause))

        def from_json(value: list[Any]) -> PrefixKeys:
            return cls._from_checked_tuple(_as_key_tuple(value, "", cls._container_clause))

        return core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_after_validator_function(
                from_json, core_schema.list_schema(core_schema.any_schema())
            ),
            python_schema=core_schema.no_info_plain_validator_function(from_python),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda value: list(value.as_tuple()), return_schema=core_schema.list_schema(core_schema.str_schema())
            ),
        )


# The slot descriptors' setters (vars() gives the descriptors themselves, as PrefixKeys._parent does at run time).
_set_parent: Callable[[PrefixKeys, Optional[PrefixKeys]], None] = vars(PrefixKeys)["_parent"].__set__
_set_chunk: Callable[[PrefixKeys, tuple[str, ...]], None] = vars(PrefixKeys)["_chunk"].__set__
_set_length: Callable[[PrefixKeys, int], None] = vars(PrefixKeys)["_length"].__set__
_set_flat: Callable[[PrefixKeys, Optional[tuple[str, ...]]], None] = vars(PrefixKeys)["_flat"].__set__
_set_hash: Callable[[PrefixKeys, Optional[int]], None] = vars(PrefixKeys)["_hash"].__set__


class PageKeys(PrefixKeys):
    """The keys of a transfer, one per page: the same immutable list-like structure as PrefixKeys. Clause: KEY-2."""

    __slots__ = ()

    _container_clause = "KEY-2"
    """The clause a container of the wrong kind breaks: KEY-2, keys come as a list of str."""


Sequence.register(PrefixKeys)

PrefixKeysField = Optional[PrefixKeys]
"""A model field for a tri-state prefix (PFX-1): None stays None, [] stays an empty PrefixKeys, a list or tuple of str becomes a PrefixKeys."""

PageKeysField = Optional[PageKeys]
"""A model field for a transfer's keys: None, or a list, tuple or key sequence of non-empty str (KEY-2)."""
