"""Trace validation errors: each names the field and the rule, tagged with the clause that governs the value or none.

Scenario: the hand-written trace of the engine tests, broken one way per
error kind: the file itself (unreadable, not JSON, too deep), the format (a
missing field, an unknown field of each object, an unknown method, a wrong
type on a field no clause governs), and values a clause governs (page keys,
prefixes, the extra-info state, the checker's settings, KV-derived transfers,
each kind of ack).
Expected: the whole message, ``Class.field: rule (got value)`` with
`` [CLAUSE]`` only where a clause governs the value; an unknown field lists
the object's fields, a misspelt method gets the nearest method name; the CLI
prints the same message and exits 2.
Why it matters: an engine developer fixing their trace writer must see what
is wrong with the file, not a prefix clause it has nothing to do with.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from hicache_spec import clause
from hicache_contracts.cli import main
from hicache_contracts.engine import TraceCall, TraceDocument, TraceOperation, TraceTransfer, load_trace
from hicache_contracts.engine._trace import TraceFormatError
from tests.engine.test_trace_json import HAND_WRITTEN, write

OPERATION = "TraceDocument.operations[0]"
CALL = f"{OPERATION}.calls[0]"


def op(document: dict) -> dict:
    return document["operations"][0]


def call(document: dict) -> dict:
    return op(document)["calls"][0]


CASES: list[tuple[str, Callable[[dict], Any], str]] = [
    # ---------------------------------------------------------------- the format's own rules: no clause
    (
        "unknown document field",
        lambda d: d.update(colour="red"),
        "TraceDocument.colour: is not a field of TraceDocument (its fields: format, operations) (got 'red')",
    ),
    (
        "unknown operation field",
        lambda d: op(d).update(batchsize=2),
        f"{OPERATION}.batchsize: is not a field of TraceOperation (its fields: operation_id, chain, prefix_keys, "
        "prefix_keys_after, batch_size, page_size, agreed_pages, terminated_before_slice, backup_completed_tokens, "
        "calls, acks) (got 2)",
    ),
    (
        "unknown call field",
        lambda d: call(d).update(extra_info="present"),
        f"{CALL}.extra_info: is not a field of TraceCall (its fields: index, method, keys, transfers, "
        "extra_info_state, prefix_keys, prefix_keys_problem, prefix_keys_after, result, raised, thread, thread_id, "
        "started, finished) (got 'present')",
    ),
    (
        "unknown transfer field",
        lambda d: call(d).update(transfers=[{"name": "indexer", "policy": "all_pages"}]),
        f"{CALL}.transfers[0].policy: is not a field of TraceTransfer (its fields: name, keys, indices_from_pool, "
        "hit_policy) (got 'all_pages')",
    ),
    (
        "unknown ack field",
        lambda d: op(d)["acks"][0].update(slice=0),
        f"{OPERATION}.acks[0].slice: is not a field of ProgressAck (its fields: kind, operation_id, slice_index, "
        "tokens) (got 0)",
    ),
    (
        "misspelt method",
        lambda d: call(d).update(method="batch_exist"),
        f"{CALL}.method: must be a method of the backend interface (did you mean batch_exists?) (got 'batch_exist')",
    ),
    (
        "method in capitals",
        lambda d: call(d).update(method="BATCH_GET_V1"),
        f"{CALL}.method: must be a method of the backend interface (did you mean batch_get_v1?) (got 'BATCH_GET_V1')",
    ),
    (
        "unknown method",
        lambda d: call(d).update(method="drop_table"),
        f"{CALL}.method: must be a method of the backend interface, such as batch_exists, batch_get_v1 or "
        "batch_set_v2 (got 'drop_table')",
    ),
    (
        "method of a wrong type",
        lambda d: call(d).update(method=["batch_exists"]),
        f"{CALL}.method: input should be a valid string (got ['batch_exists'])",
    ),
    ("missing field", lambda d: op(d).pop("prefix_keys"), f"{OPERATION}.prefix_keys: is required (got nothing)"),
    ("missing call index", lambda d: call(d).pop("index"), f"{CALL}.index: is required (got nothing)"),
    (
        "wrong format",
        lambda d: d.update(format="hicache-trace/2"),
        "TraceDocument.format: input should be 'hicache-trace/1' (got 'hicache-trace/2')",
    ),
    (
        "no operations",
        lambda d: d.update(operations=[]),
        "TraceDocument.operations: must hold at least one operation (an empty trace checks nothing) (got ())",
    ),
    (
        "thread of a wrong type",
        lambda d: call(d).update(thread=7),
        f"{CALL}.thread: input should be a valid string (got 7)",
    ),
    (
        "unknown ack kind",
        lambda d: op(d)["acks"].__setitem__(0, {"kind": "partial"}),
        f"{OPERATION}.acks[0]: input tag 'partial' found using 'kind' does not match any of the expected tags: "
        "'progress', 'pool_hits', 'final' (got {'kind': 'partial'})",
    ),
    (
        "transfer name of a wrong type",
        lambda d: call(d).update(transfers=[{"name": 1}]),
        f"{CALL}.transfers[0].name: input should be a valid string (got 1)",
    ),
    # ---------------------------------------------------------------- values a clause governs
    (
        "empty chain key",
        lambda d: op(d)["chain"].__setitem__(1, ""),
        f"{OPERATION}.chain[1]: page key must be a non-empty str (got '') [KEY-2]",
    ),
    (
        "call key of a wrong type",
        lambda d: call(d)["keys"].__setitem__(0, 7),
        f"{CALL}.keys[0]: input should be a valid string (got 7) [KEY-2]",
    ),
    (
        "transfer key empty",
        lambda d: call(d).update(transfers=[{"name": "indexer", "keys": [""]}]),
        f"{CALL}.transfers[0].keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    ),
    (
        "kv-derived source of a wrong type",
        lambda d: call(d).update(transfers=[{"name": "indexer", "indices_from_pool": 0}]),
        f"{CALL}.transfers[0].indices_from_pool: input should be a valid string (got 0) [HYB-1]",
    ),
    (
        "operation prefix a str",
        lambda d: op(d).update(prefix_keys="k"),
        f"{OPERATION}.prefix_keys: input should be a valid array (got 'k') [PFX-1]",
    ),
    (
        "call prefix of ints",
        lambda d: call(d).update(prefix_keys=[1]),
        f"{CALL}.prefix_keys[0]: input should be a valid string (got 1) [PFX-1]",
    ),
    (
        "prefix afterwards a number",
        lambda d: op(d).update(prefix_keys_after=3),
        f"{OPERATION}.prefix_keys_after: input should be a valid array (got 3) [PFX-5]",
    ),
    (
        "extra-info state unknown",
        lambda d: call(d).update(extra_info_state="maybe"),
        f"{CALL}.extra_info_state: input should be 'absent', 'none' or 'present' (got 'maybe') [PFX-7]",
    ),
    ("batch size 0", lambda d: op(d).update(batch_size=0), f"{OPERATION}.batch_size: must be >= 1 (got 0) [CTL-2]"),
    (
        "batch size a str",
        lambda d: op(d).update(batch_size="2"),
        f"{OPERATION}.batch_size: input should be a valid integer (got '2') [CTL-2]",
    ),
    ("page size 0", lambda d: op(d).update(page_size=0), f"{OPERATION}.page_size: must be >= 1 (got 0) [CTL-5]"),
    (
        "acks without page size",
        lambda d: op(d).pop("page_size"),
        f"{OPERATION}.page_size: must be given with acks (got None) [CTL-5]",
    ),
    (
        "completed tokens without page size",
        lambda d: (op(d).pop("page_size"), op(d).pop("acks"), op(d).update(backup_completed_tokens=0)),
        f"{OPERATION}.page_size: must be given with backup_completed_tokens (got None) [CTL-7]",
    ),
    (
        "agreed pages beyond the chain",
        lambda d: op(d).update(agreed_pages=9),
        f"{OPERATION}.agreed_pages: must be <= len(chain) = 4 (got 9) [RANK-2]",
    ),
    (
        "terminated before a negative slice",
        lambda d: op(d).update(terminated_before_slice=-1),
        f"{OPERATION}.terminated_before_slice: must be >= 0 (got -1) [CTL-4]",
    ),
    (
        "progress ack tokens a str",
        lambda d: op(d)["acks"][0].update(tokens="32"),
        f"{OPERATION}.acks[0].tokens: input should be a valid integer (got '32') [CTL-5]",
    ),
    (
        "pool-hits ack hits a list",
        lambda d: op(d)["acks"].insert(2, {"kind": "pool_hits", "operation_id": "req-1", "pool_hits": [1]}),
        f"{OPERATION}.acks[2].pool_hits: input should be an object (got [1]) [HYB-2]",
    ),
    (
        "final ack tokens negative",
        lambda d: op(d)["acks"][-1].update(tokens=-1),
        f"{OPERATION}.acks[2].tokens: input should be greater than or equal to 0 (got -1) [CTL-6]",
    ),
]


@pytest.mark.parametrize("label, change, message", CASES, ids=[case[0] for case in CASES])
def test_each_trace_error_names_the_field_the_rule_and_its_clause_or_none(
    label: str, change: Callable, message: str
) -> None:
    document = copy.deepcopy(HAND_WRITTEN)
    change(document)
    with pytest.raises(TraceFormatError) as raised:
        load_trace(json.dumps(document))
    assert str(raised.value) == message
    tag = message.rsplit(" [", 1)[1].rstrip("]") if message.endswith("]") else None
    assert raised.value.clause_id == tag
    if tag is not None:
        clause(tag)  # a registered clause


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"format": ',
            "TraceDocument: must be valid JSON (Expecting value: line 1 column 12 (char 11)) (got '{\"format\": ')",
        ),
        (
            "[" * 70 + "]" * 70,
            "TraceDocument: must not nest arrays and objects more than 64 deep (got 'more than 64 levels')",
        ),
        ("[]", "TraceDocument: input should be an object (got [])"),
    ],
    ids=["not JSON", "too deep", "not an object"],
)
def test_a_text_that_is_no_trace_document_has_no_clause(text: str, message: str) -> None:
    with pytest.raises(TraceFormatError) as raised:
        load_trace(text)
    assert (str(raised.value), raised.value.clause_id) == (message, None)


def test_a_file_that_cannot_be_read_has_no_clause(tmp_path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(TraceFormatError) as raised:
        load_trace(missing)
    assert str(raised.value) == f"TraceDocument: must be a readable file (No such file or directory) (got '{missing}')"


def test_the_models_built_in_python_report_the_same_way() -> None:
    with pytest.raises(TraceFormatError) as raised:
        TraceCall(index=0, method="batch_sets_v1")
    assert str(raised.value) == (
        "TraceCall.method: must be a method of the backend interface (did you mean batch_set_v1?) (got 'batch_sets_v1')"
    )
    with pytest.raises(TraceFormatError) as raised:
        TraceOperation(chain=("a",), prefix_keys=None, page=1)  # type: ignore[call-arg]
    assert str(raised.value).startswith("TraceOperation.page: is not a field of TraceOperation (its fields: ")
    with pytest.raises(TraceFormatError) as raised:
        TraceTransfer(name="indexer", keys=("",))
    assert str(raised.value) == "TraceTransfer.keys[0]: page key must be a non-empty str (got '') [KEY-2]"
    with pytest.raises(TraceFormatError) as raised:
        TraceDocument.model_validate({"operations": ({"chain": (), "prefix_keys": None, "batch_size": -1},)})
    assert str(raised.value) == "TraceDocument.operations[0].batch_size: must be >= 1 (got -1) [CTL-2]"


def test_the_trace_command_prints_the_message_and_exits_2(tmp_path, capsys) -> None:
    document = copy.deepcopy(HAND_WRITTEN)
    call(document)["method"] = "batch_exist"
    path = write(tmp_path, document)
    assert main(["trace", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"{path}: not a valid trace: {CALL}.method: must be a method of the backend interface "
        "(did you mean batch_exists?) (got 'batch_exist')\n"
    )


def test_every_clause_a_trace_field_names_is_registered() -> None:
    named = [
        clause_id
        for model in (TraceDocument, TraceOperation, TraceCall, TraceTransfer)
        for clause_id in model._trace_clauses.values()
    ]
    assert named and [clause(clause_id).id for clause_id in named] == named
