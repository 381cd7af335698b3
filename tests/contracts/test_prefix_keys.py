"""PrefixKeys: an immutable, persistent sequence that reads like a read-only list.

The central property runs a random program of list operations against a
PrefixKeys and against a plain list (the model), and checks after every step
that every value built so far still equals its snapshot (PFX-5). Planted-bug
variants at the end of the file show that the property catches an in-place
``+=`` and an extension that writes into storage shared with its parent.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Sequence
from typing import Any, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from hicache_contracts import ContractViolation, PageKeys, PrefixKeys, PrefixKeysField

KEY = st.sampled_from(["a", "b", "c", "k0", "k1", "0" * 64])
"""A small alphabet, so that ``in``, ``index`` and ``count`` meet repeated keys."""
BATCH = st.lists(KEY, max_size=6)
INDEX = st.integers(min_value=-12, max_value=12)
BOUND = st.one_of(st.none(), st.integers(min_value=-12, max_value=12))
STEP = st.one_of(st.none(), st.integers(min_value=-3, max_value=3).filter(lambda step: step != 0))

OPERATION = st.one_of(
    st.tuples(st.just("extended"), BATCH),
    st.tuples(st.just("index"), INDEX),
    st.tuples(st.just("slice"), BOUND, BOUND, STEP),
    st.tuples(st.just("add"), BATCH),
    st.tuples(st.just("radd"), BATCH),
    st.tuples(st.just("iadd"), BATCH),
    st.tuples(st.just("contains"), KEY),
    st.tuples(st.just("count"), KEY),
    st.tuples(st.just("equal"), BATCH),
    st.tuples(st.just("back_to"), st.integers(min_value=0, max_value=50)),
    st.tuples(st.just("branch"), st.integers(min_value=0, max_value=50), BATCH),
)


def check_behaves_like_list(cls: type, initial: list, operations: list) -> None:
    """Apply ``operations`` to a ``cls`` and to a list; both must agree, and no value may ever change.

    ``history`` holds every value the program built, with a snapshot of its
    keys taken when it was built; after each step each must still equal its
    snapshot (PFX-5: a prefix handed out never changes).
    """
    current = cls(initial)
    model = list(initial)
    history = [(current, tuple(model))]
    for operation in operations:
        name, *arguments = operation
        if name == "extended":
            current = current.extended(arguments[0])
            model = model + arguments[0]
            history.append((current, tuple(model)))
        elif name == "index":
            try:
                expected = model[arguments[0]]
            except IndexError:
                with pytest.raises(IndexError):
                    current[arguments[0]]
            else:
                assert current[arguments[0]] == expected
        elif name == "slice":
            window = slice(*arguments)
            result = current[window]
            assert type(result) is list and result == model[window]
        elif name == "add":
            result = current + arguments[0]
            assert type(result) is list and result == model + arguments[0]
        elif name == "radd":
            result = arguments[0] + current
            assert type(result) is list and result == arguments[0] + model
        elif name == "iadd":
            rebound = current
            rebound += arguments[0]  # rebinds the name; must not touch ``current``
            assert rebound == model + arguments[0]
        elif name == "contains":
            assert (arguments[0] in current) == (arguments[0] in model)
        elif name == "count":
            assert current.count(arguments[0]) == model.count(arguments[0])
        elif name == "equal":
            assert current == model and model == current and current == tuple(model)
            assert (current == arguments[0]) == (model == arguments[0])
            assert (current != model + ["zz"]) and not (current != model)
        elif name == "back_to":  # continue from an older value: a branch of the persistent structure
            current, snapshot = history[arguments[0] % len(history)]
            model = list(snapshot)
        elif name == "branch":  # extend an older value, as two operations sharing an anchor do
            older, snapshot = history[arguments[0] % len(history)]
            current = older.extended(arguments[1])
            model = list(snapshot) + arguments[1]
            history.append((current, tuple(model)))
        for value, snapshot in history:
            assert tuple(value) == snapshot and len(value) == len(snapshot), "a value changed after it was built"
        assert len(current) == len(model)
        assert list(current) == model
        assert list(reversed(current)) == model[::-1]


@pytest.mark.clause("PFX-1", "PFX-4", "PFX-5")
@given(initial=BATCH, operations=st.lists(OPERATION, max_size=25))
def test_prefix_keys_behaves_like_a_list_and_never_changes(initial: list, operations: list) -> None:
    """Scenario: random extends, reads, concatenations and branches.

    Expected: every read agrees with a plain list, and every value ever built keeps its keys.
    Why: backends treat prefix_keys as a list; the engine shares one prefix across batches.
    """
    check_behaves_like_list(PrefixKeys, initial, operations)


@pytest.mark.clause("PFX-4", "PFX-5")
@given(prefix=BATCH, batches=st.lists(BATCH, max_size=8))
def test_extending_an_empty_prefix_accumulates_and_leaves_parents_unchanged(prefix: list, batches: list) -> None:
    """The prefix of each batch is the operation's prefix plus every earlier batch, [] included (PFX-4)."""
    current = PrefixKeys(prefix)
    expected = list(prefix)
    handed_out = []
    for batch in batches:
        handed_out.append((current, list(expected)))
        current = current.extended(batch)
        expected = expected + batch
    assert current == expected
    for value, snapshot in handed_out:
        assert value == snapshot


@pytest.mark.clause("PFX-5")
def test_extended_shares_the_parent_and_is_a_new_value() -> None:
    parent = PrefixKeys(["a", "b"])
    child = parent.extended(["c"])
    assert child is not parent and child._parent is parent
    assert parent == ["a", "b"] and child == ["a", "b", "c"]
    assert parent.extended([]) is parent  # nothing to add: the same immutable value


@pytest.mark.clause("PFX-5", "PFX-6")
def test_no_mutating_method_exists() -> None:
    """Scenario: look for every list mutator. Expected: none exists, attributes cannot be set."""
    prefix = PrefixKeys(["a"])
    mutators = set(dir(list)) - set(dir(tuple)) - {"copy", "__reversed__"}  # what a list has and a tuple lacks
    assert len(mutators) == 12  # append ... sort, __setitem__, __delitem__, __iadd__, __imul__
    for name in sorted(mutators):
        assert not hasattr(prefix, name), name
    with pytest.raises(TypeError):
        prefix[0] = "b"  # type: ignore[index]
    with pytest.raises(AttributeError, match="immutable"):
        prefix._flat = ("b",)  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del prefix._flat
    assert prefix == ["a"]


@pytest.mark.clause("PFX-6")
def test_copies_and_slices_are_new_lists() -> None:
    """A backend that keeps a copy (PFX-6) gets a list it may change without touching the prefix."""
    prefix = PrefixKeys(["a", "b"]).extended(["c"])
    for kept in (prefix.copy(), prefix[:], list(prefix)):
        assert type(kept) is list
        kept.append("x")
        assert prefix == ["a", "b", "c"]
    assert copy.copy(prefix) is prefix and copy.deepcopy(prefix) is prefix


def test_indexing_like_a_list() -> None:
    prefix = PrefixKeys(["a", "b"]).extended(["c", "d"]).extended(["e"])
    assert [prefix[i] for i in range(-5, 5)] == ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"]
    assert prefix._flat is None or prefix[-1] == "e"
    for outside in (5, -6):
        with pytest.raises(IndexError, match="^PrefixKeys index out of range$"):
            prefix[outside]
    with pytest.raises(TypeError, match="^PrefixKeys indices must be integers or slices, not str$"):
        prefix["a"]  # type: ignore[index]
    assert prefix.index("c") == 2 and prefix[True] == "b"
    with pytest.raises(ValueError):
        prefix.index("zz")


def test_last_key_is_read_without_flattening() -> None:
    """prefix[-1] is read from the last chunk: O(1) however long the prefix."""
    prefix = PrefixKeys(["a"] * 1000).extended(["b", "c"])
    assert prefix[-1] == "c" and prefix[-2] == "b"
    assert prefix._flat is None
    assert prefix[0] == "a" and prefix._flat is not None  # an older key builds and caches the flat tuple


def test_equality_hash_pickle_and_repr() -> None:
    prefix = PrefixKeys(["a"]).extended(["b"])
    assert prefix == ["a", "b"] and prefix == ("a", "b") and prefix == PrefixKeys(["a", "b"])
    assert prefix != ["a"] and prefix != ["b", "a"] and prefix != "ab" and prefix != 3
    assert hash(prefix) == hash(("a", "b")) == hash(PrefixKeys(("a", "b")))
    assert {prefix: 1}[("a", "b")] == 1  # type: ignore[index]  # a tuple finds the equal prefix
    restored = pickle.loads(pickle.dumps(prefix))
    assert restored == prefix and type(restored) is PrefixKeys
    assert repr(prefix) == "PrefixKeys(['a', 'b'])"
    assert eval(repr(prefix)) == prefix
    assert repr(PageKeys([])) == "PageKeys([])" and eval(repr(PageKeys(["x"]))) == ["x"]
    assert not PrefixKeys([]) and PrefixKeys([]) == [] and PrefixKeys([]) is not None


def test_registered_as_a_sequence() -> None:
    assert isinstance(PrefixKeys([]), Sequence) and isinstance(PageKeys(["a"]), Sequence)
    assert issubclass(PageKeys, PrefixKeys)


@pytest.mark.clause("KEY-2")
@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["a", 1], "PrefixKeys.keys[1]: page key must be a non-empty str (got 1) [KEY-2]"),
        (["a", ""], "PrefixKeys.keys[1]: page key must be a non-empty str (got '') [KEY-2]"),
        ([None], "PrefixKeys.keys[0]: page key must be a non-empty str (got None) [KEY-2]"),
        ("abc", "PrefixKeys.keys: must be a list, tuple or key sequence of str (got 'abc') [PFX-1]"),
        ({"a"}, "PrefixKeys.keys: must be a list, tuple or key sequence of str (got {'a'}) [PFX-1]"),
    ],
)
def test_bad_keys_are_rejected_with_the_field(keys: object, message: str) -> None:
    with pytest.raises(ContractViolation) as caught:
        PrefixKeys(keys)  # type: ignore[arg-type]
    assert str(caught.value) == message


@pytest.mark.clause("KEY-2", "PFX-5")
def test_extended_rejects_bad_keys_and_builds_nothing() -> None:
    prefix = PrefixKeys(["a"])
    with pytest.raises(ContractViolation) as caught:
        prefix.extended(["b", 7])
    assert str(caught.value) == "batch[1]: page key must be a non-empty str (got 7) [KEY-2]"
    assert prefix == ["a"] and prefix._parent is None


class _Holder(BaseModel):
    prefix_keys: PrefixKeysField = None


@pytest.mark.clause("PFX-1", "PFX-4")
@pytest.mark.parametrize("given_value", [None, [], (), PrefixKeys([]), ["a"], ("a", "b"), PrefixKeys(["a"])])
def test_field_keeps_the_three_states(given_value: Optional[Sequence[str]]) -> None:
    """None stays None, [] stays empty (never None), lists become PrefixKeys; JSON keeps all three."""
    holder = _Holder(prefix_keys=given_value)
    if given_value is None:
        assert holder.prefix_keys is None
    else:
        assert type(holder.prefix_keys) is PrefixKeys and holder.prefix_keys == list(given_value)
    if isinstance(given_value, PrefixKeys):
        assert holder.prefix_keys is given_value  # no copy of a value already checked
    text = holder.model_dump_json()
    assert text == (
        '{"prefix_keys":null}'
        if given_value is None
        else '{"prefix_keys":' + str(list(given_value)).replace("'", '"').replace(" ", "") + "}"
    )
    assert _Holder.model_validate_json(text) == holder
    assert (_Holder.model_validate_json(text).prefix_keys is None) == (given_value is None)


# ---------------------------------------------------------------- planted bugs
class InPlaceAddPrefixKeys(PrefixKeys):
    """Planted bug: ``+=`` extends in place, as SGLang releases did with the prefix list (PFX-5)."""

    __slots__ = ()

    def __iadd__(self, batch: Any) -> InPlaceAddPrefixKeys:  # type: ignore[misc]  # the planted in-place +=
        flat = self.as_tuple() + tuple(batch)
        for name, value in (("_flat", flat), ("_chunk", flat), ("_length", len(flat)), ("_parent", None)):
            object.__setattr__(self, name, value)
        return self


class SharedStorageKeys:
    """Planted bug: ``extended`` appends to a list shared with the parent (a forgotten copy)."""

    def __init__(self, keys: Sequence[str] = (), _storage: list | None = None, _length: int | None = None) -> None:
        self._storage = list(keys) if _storage is None else _storage
        self._length = len(self._storage) if _length is None else _length

    def extended(self, batch: list) -> SharedStorageKeys:
        del self._storage[self._length :]  # reuse the tail: overwrites a sibling branch
        self._storage.extend(batch)
        return SharedStorageKeys(_storage=self._storage, _length=len(self._storage))

    def _keys(self) -> list:
        return self._storage[: self._length]

    def __len__(self) -> int:
        return self._length

    def __iter__(self):
        return iter(self._keys())

    def __reversed__(self):
        return reversed(self._keys())

    def __getitem__(self, index):
        return self._keys()[index]

    def __contains__(self, key: object) -> bool:
        return key in self._keys()

    def count(self, key: object) -> int:
        return self._keys().count(key)

    def __add__(self, other: list) -> list:
        return self._keys() + list(other)

    def __radd__(self, other: list) -> list:
        return list(other) + self._keys()

    def __eq__(self, other: object) -> bool:
        return self._keys() == list(other)  # type: ignore[call-overload]


@pytest.mark.clause("PFX-5")
def test_planted_in_place_iadd_is_caught() -> None:
    """The list-model property must fail for a variant whose += changes the value in place."""
    with pytest.raises(AssertionError, match="a value changed after it was built"):
        check_behaves_like_list(InPlaceAddPrefixKeys, ["a"], [("extended", ["b"]), ("iadd", ["c"])])
    with pytest.raises(AssertionError):  # and hypothesis finds it on its own
        given(initial=BATCH, operations=st.lists(OPERATION, max_size=25))(
            lambda initial, operations: check_behaves_like_list(InPlaceAddPrefixKeys, initial, operations)
        )()


@pytest.mark.clause("PFX-5")
def test_planted_shared_storage_is_caught() -> None:
    """The property must fail for a variant whose branches overwrite each other's keys."""
    with pytest.raises(AssertionError):
        given(initial=BATCH, operations=st.lists(OPERATION, max_size=25))(
            lambda initial, operations: check_behaves_like_list(SharedStorageKeys, initial, operations)
        )()
    check_behaves_like_list(SharedStorageKeys, ["a"], [("extended", ["b"])])  # linear use looks fine
