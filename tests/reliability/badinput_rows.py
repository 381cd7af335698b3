"""The rows of the bad-input matrix: (category, label, action). Messages are pinned in test_bad_input_matrix.py.

Each action takes a ``Scene`` (a backend with pages stored, a working folder)
and does one malformed thing; it must raise (API, trace) or exit 2 (CLI).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import torch

from hicache_contracts import PoolTransfer
from hicache_contracts.conformance.session.options import SuiteOptions
from hicache_contracts.engine._trace import load_trace
from hicache_contracts.host_pool import HostPagePool

KEY = "ab" * 32
PAGE_SIZE = 4


def make_pool(pages: int = 8) -> HostPagePool:
    """A small MHA host pool of ``pages`` pages of PAGE_SIZE tokens (fp16, layer first, not pinned)."""
    return HostPagePool(pages, PAGE_SIZE, layer_num=1, head_num=1, head_dim=2, pin_memory=False)


@dataclass
class Scene:
    backend: Any
    """A reference backend holding two pages (KEY in slots 0..3 and the second key)."""
    folder: str
    """A working folder (the current directory for CLI rows)."""


def slots(count: int = 1) -> torch.Tensor:
    return torch.arange(count * PAGE_SIZE)


def transfer(**fields: Any) -> Any:
    return PoolTransfer(**{"name": "kv", "keys": [KEY], "host_indices": slots(), **fields})


Action = Callable[..., Any]
"""A row's call: it takes the Scene (``...``: the rows bind their loop values as the lambdas' defaults)."""

BACKEND_ACTIONS: list[tuple[str, Action]] = []
"""Calls on a reference backend; each runs on the memory and the file backend."""

BAD_KEYS = [
    ("a str", "abc"),
    ("None", None),
    ("an int", 5),
    ("ints", [1, 2]),
    ("an empty key", [""]),
    ("None inside", [KEY, None]),
    ("bytes inside", [b"k"]),
    ("a dict", {KEY: 1}),
]
for label, keys in BAD_KEYS:
    BACKEND_ACTIONS.append((f"batch_exists keys {label}", lambda scene, keys=keys: scene.backend.batch_exists(keys)))
    BACKEND_ACTIONS.append(
        (f"batch_get_v1 keys {label}", lambda scene, keys=keys: scene.backend.batch_get_v1(keys, slots()))
    )
    BACKEND_ACTIONS.append(
        (f"batch_set_v1 keys {label}", lambda scene, keys=keys: scene.backend.batch_set_v1(keys, slots()))
    )
for label, key in [("int", 5), ("None", None), ("empty", "")]:
    BACKEND_ACTIONS.append((f"exists key {label}", lambda scene, key=key: scene.backend.exists(key)))
    BACKEND_ACTIONS.append((f"get key {label}", lambda scene, key=key: scene.backend.get(key)))
    BACKEND_ACTIONS.append((f"set key {label}", lambda scene, key=key: scene.backend.set(key, torch.zeros(8))))

BAD_SLOTS = [
    ("a list", lambda: [0, 1, 2, 3]),
    ("floats", lambda: torch.arange(4.0)),
    ("2-D", lambda: torch.arange(4).view(2, 2)),
    ("too few", lambda: torch.arange(3)),
    ("misaligned", lambda: torch.arange(1, 5)),
    ("not consecutive", lambda: torch.tensor([0, 2, 1, 3])),
    ("negative", lambda: torch.arange(-4, 0)),
    ("beyond the pool", lambda: torch.arange(4096, 4100)),
    ("on the meta device", lambda: torch.arange(4, device="meta")),
    ("bools", lambda: torch.ones(4, dtype=torch.bool)),
    ("None", lambda: None),
]
for label, make in BAD_SLOTS:
    BACKEND_ACTIONS.append(
        (f"batch_get_v1 host_indices {label}", lambda scene, make=make: scene.backend.batch_get_v1([KEY], make()))
    )
    BACKEND_ACTIONS.append(
        (f"batch_set_v1 host_indices {label}", lambda scene, make=make: scene.backend.batch_set_v1([KEY], make()))
    )

BAD_TRANSFERS = [
    ("a plain dict", lambda: [{"name": "kv", "keys": [KEY]}]),
    ("None inside", lambda: [None]),
    ("a str", lambda: "kv"),
    ("an int inside", lambda: [3]),
    ("one dict", lambda: {"name": "kv"}),
    ("a transfer then a dict", lambda: [transfer(), {"name": "swa"}]),
]
for label, make in BAD_TRANSFERS:
    BACKEND_ACTIONS.append(
        (f"batch_get_v2 transfers {label}", lambda scene, make=make: scene.backend.batch_get_v2(make()))
    )
    BACKEND_ACTIONS.append(
        (f"batch_set_v2 transfers {label}", lambda scene, make=make: scene.backend.batch_set_v2(make()))
    )
    BACKEND_ACTIONS.append(
        (
            f"batch_exists_v2 pool_transfers {label}",
            lambda scene, make=make: scene.backend.batch_exists_v2([KEY], make()),
        )
    )
BACKEND_ACTIONS += [
    ("batch_get_v2 slots short", lambda scene: scene.backend.batch_get_v2([transfer(host_indices=torch.arange(3))])),
    (
        "batch_set_v2 slots misaligned",
        lambda scene: scene.backend.batch_set_v2([transfer(host_indices=torch.arange(1, 5))]),
    ),
    (
        "batch_get_v2 slots beyond the pool",
        lambda scene: scene.backend.batch_get_v2([transfer(host_indices=torch.arange(4096, 4100))]),
    ),
    (
        "register a bogus pool name",
        lambda scene: scene.backend.register_mem_host_pool_v2(scene.backend.mem_pool_host, "bogus"),
    ),
    (
        "register pool name None",
        lambda scene: scene.backend.register_mem_host_pool_v2(scene.backend.mem_pool_host, None),
    ),
    ("register pool name 0", lambda scene: scene.backend.register_mem_host_pool_v2(scene.backend.mem_pool_host, 0)),
    (
        "register pool name in capitals",
        lambda scene: scene.backend.register_mem_host_pool_v2(scene.backend.mem_pool_host, "KV"),
    ),
    ("register a second KV pool", lambda scene: scene.backend.register_mem_pool_host(_second_pool())),
    (
        "register a second KV pool through v2",
        lambda scene: scene.backend.register_mem_host_pool_v2(_second_pool(), "kv"),
    ),
    ("register something that is no pool", lambda scene: scene.backend.register_mem_host_pool_v2(object(), "swa")),
    ("batch_get targets of the wrong length", lambda scene: scene.backend.batch_get([KEY], [None, None])),
    ("batch_set values of the wrong length", lambda scene: scene.backend.batch_set([KEY], [torch.zeros(8)] * 2)),
]


def _second_pool() -> Any:
    from tests.reliability.test_bad_input_matrix import make_pool

    return make_pool()


OPTION_ACTIONS: list[tuple[str, Action]] = [
    (f"SuiteOptions({name}={value!r})", lambda scene, name=name, value=value: SuiteOptions(**{name: value}))
    for name, value in [
        ("page_size", 0),
        ("page_size", -1),
        ("page_size", True),
        ("page_size", 4097),
        ("page_size", 10**9),
        ("page_size", "64"),
        ("page_size", 64.0),
        ("timeout_s", float("nan")),
        ("timeout_s", float("inf")),
        ("timeout_s", -1.0),
        ("timeout_s", 0),
        ("timeout_s", True),
        ("timeout_s", "5"),
        ("timeout_s", 86_401),
        ("model_name", ""),
        ("model_name", "m" * 101),
        ("model_name", "m" * 10_000),
        ("model_name", "a\nb"),
        ("model_name", None),
        ("layout", "row_first"),
        ("kind", "gqa"),
        ("profile", "quick"),
        ("levels", ["core"]),
        ("levels", ("hybrid",)),
        ("seed", "1"),
        ("seed", True),
        ("seed", 1.5),
        ("may_evict", "yes"),
        ("checks", ["a"]),
        ("checks", (1,)),
    ]
]


def _trace(**operation: Any) -> dict:
    base = {
        "operation_id": "op",
        "chain": [KEY],
        "prefix_keys": None,
        "calls": [{"index": 0, "method": "batch_exists", "keys": [KEY], "result": 1}],
    }
    base.update(operation)
    return {"format": "hicache-trace/1", "operations": [base]}


def _call(**fields: Any) -> dict:
    return _trace(calls=[{"index": 0, "method": "batch_exists", "keys": [KEY], "result": 1, **fields}])


def _nested(depth: int) -> str:
    text = json.dumps(_call(result=None))
    return text.replace('"result": null', '"result": ' + "[" * depth + "]" * depth)


TRACE_DOCUMENTS: list[tuple[str, Any]] = [
    ("method rm_rf", _call(method="rm_rf")),
    ("method empty", _call(method="")),
    ("method an int", _call(method=5)),
    ("method with a dot", _call(method="backend.clear")),
    ("method in capitals", _call(method="BATCH_EXISTS")),
    ("result nested 1000 deep", _nested(1000)),
    ("result nested 65 deep", _nested(65)),
    ("format unknown", {**_trace(), "format": "hicache-trace/2"}),
    ("no operations", {"format": "hicache-trace/1"}),
    ("operations empty", {"format": "hicache-trace/1", "operations": []}),
    ("operations an object", {"format": "hicache-trace/1", "operations": {}}),
    ("chain missing", {"format": "hicache-trace/1", "operations": [{"prefix_keys": None}]}),
    ("chain of ints", _trace(chain=[1])),
    ("chain a str", _trace(chain=KEY)),
    ("chain with an empty key", _trace(chain=[""])),
    ("prefix_keys a str", _trace(prefix_keys=KEY)),
    ("prefix_keys missing", {"format": "hicache-trace/1", "operations": [{"chain": [KEY]}]}),
    ("batch_size 0", _trace(batch_size=0)),
    ("batch_size a str", _trace(batch_size="128")),
    ("page_size 0", _trace(page_size=0)),
    ("agreed_pages beyond the chain", _trace(agreed_pages=2)),
    ("agreed_pages negative", _trace(agreed_pages=-1)),
    ("terminated_before_slice negative", _trace(terminated_before_slice=-1)),
    ("backup_completed_tokens without page_size", _trace(backup_completed_tokens=4)),
    ("an unknown operation field", _trace(colour="red")),
    ("an unknown call field", _call(colour="red")),
    ("call index missing", _trace(calls=[{"method": "batch_exists"}])),
    ("call index a str", _call(index="0")),
    ("call keys a str", _call(keys=KEY)),
    ("call keys of ints", _call(keys=[1])),
    ("extra_info_state unknown", _call(extra_info_state="maybe")),
    ("calls an object", _trace(calls={})),
    ("acks without page_size", _trace(acks=[])),
    ("ack kind unknown", _trace(page_size=4, acks=[{"kind": "x"}])),
    ("not JSON", "{not json"),
    ("an array", "[]"),
    ("a number", "7"),
    ("empty text", ""),
]

TRACE_ACTIONS: list[tuple[str, Action]] = [
    (
        label,
        lambda scene, document=document: load_trace(document if isinstance(document, str) else json.dumps(document)),
    )
    for label, document in TRACE_DOCUMENTS
]
