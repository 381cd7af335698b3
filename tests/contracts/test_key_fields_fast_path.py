"""The key-sequence fields' fast path (``PoolTransfer.keys``, ``HiCacheStorageExtraInfo.prefix_keys``).

Scenario: a model field receives a list or tuple of keys, checked in C
(``str.join`` for the type, ``all`` for emptiness) before the key-by-key loop.
Expected: every bad key is rejected with the same error as the key-by-key
check gives, wherever it sits; a list subclass, a tuple and a list give the
same answer; good keys are held as given.
Planted: a fast path that skips the emptiness check, and one that skips the
type check; both are caught.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from hicache_contracts import ContractViolation, HiCacheStorageExtraInfo, PageKeys, PoolName, PoolTransfer
from hicache_contracts import prefix_keys as prefix_keys_module

KEYS = [f"{index:064x}" for index in range(128)]
BAD = {"an empty key": "", "an int": 7, "None": None, "bytes": b"ab", "a float": 1.5}


class KeyList(list):  # type: ignore[type-arg]
    """A list subclass: not the fast path's exact types."""


def errors(build: Any) -> list[str]:
    """Return the error of each bad key at each position, for list, tuple and list-subclass containers."""
    found = []
    for name, bad in BAD.items():
        for position in (0, 63, 127):
            keys = KEYS[:position] + [bad] + KEYS[position + 1 :]
            for container in (list, tuple, KeyList):
                try:
                    build(container(keys))
                except ContractViolation as error:
                    found.append(str(error))
                else:
                    found.append(f"accepted {name} at {position} in a {container.__name__}")
    return found


def expected(field: str) -> list[str]:
    return [
        f"{field}[{position}]: page key must be a non-empty str (got {bad!r}) [KEY-2]"
        for bad in BAD.values()
        for position in (0, 63, 127)
        for _ in range(3)
    ]


def check_key_fields() -> None:
    assert errors(lambda keys: PoolTransfer(name=PoolName.KV, keys=keys)) == expected("PoolTransfer.keys")
    assert errors(lambda keys: HiCacheStorageExtraInfo(prefix_keys=keys)) == expected(
        "HiCacheStorageExtraInfo.prefix_keys"
    )


@pytest.mark.clause("KEY-2")
def test_every_bad_key_is_rejected_with_the_key_by_key_error() -> None:
    check_key_fields()


@pytest.mark.clause("KEY-2")
@pytest.mark.parametrize("container", [list, tuple, KeyList])
def test_good_keys_are_held(container: type) -> None:
    transfer = PoolTransfer(name=PoolName.KV, keys=container(KEYS))
    assert type(transfer.keys) is PageKeys and transfer.keys == KEYS and len(transfer.keys) == 128
    assert transfer.keys[-1] is KEYS[-1] and hash(transfer.keys) == hash(tuple(KEYS))
    assert PoolTransfer(name=PoolName.KV, keys=[]).keys == []  # type: ignore[arg-type]


def no_emptiness_check(cls: type, value: object) -> Optional[Any]:
    """Planted: the fast path without ``all``."""
    if type(value) not in (list, tuple):
        return None
    flat: tuple[Any, ...] = tuple(value)  # type: ignore[arg-type]
    try:
        "".join(flat)
    except TypeError:
        return None
    return cls._from_checked_tuple(flat)  # type: ignore[attr-defined]


def no_type_check(cls: type, value: object) -> Optional[Any]:
    """Planted: the fast path without ``str.join``."""
    if type(value) not in (list, tuple):
        return None
    flat: tuple[Any, ...] = tuple(value)  # type: ignore[arg-type]
    return cls._from_checked_tuple(flat) if all(flat) else None  # type: ignore[attr-defined]


@pytest.mark.clause("KEY-2")
@pytest.mark.parametrize("planted", [no_emptiness_check, no_type_check])
def test_planted_fast_paths_are_caught(monkeypatch: pytest.MonkeyPatch, planted: Any) -> None:
    monkeypatch.setattr(prefix_keys_module, "_checked_node", planted)
    with pytest.raises(AssertionError):
        check_key_fields()


@pytest.mark.parametrize(
    "value",
    ["ab", b"ab", {KEYS[0]}, {KEYS[0]: 1}],
    ids=["a str", "bytes", "a set", "a dict"],
)
def test_a_container_that_is_no_list_tuple_or_key_sequence_is_refused(value: Any) -> None:
    """The fast path takes lists and tuples alone: a str (whose characters are non-empty str), bytes, a set or a dict
    goes to the key-by-key check, which refuses the container and names the field."""
    with pytest.raises(ContractViolation, match=r"^HiCacheStorageExtraInfo\.prefix_keys: must be a list, tuple"):
        HiCacheStorageExtraInfo(prefix_keys=value)
    with pytest.raises(ContractViolation, match=r"^PoolTransfer\.keys: must be a list, tuple"):
        PoolTransfer(name=PoolName.SWA, keys=value)
