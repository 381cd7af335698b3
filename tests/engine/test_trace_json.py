"""The trace file format and ``hicache-conform trace``: a recording written as JSON is checked like a live one.

Scenario: a reference (or planted) prefetch recorded in process, written with
``to_trace`` and read back; a file written by hand, as an engine in another
language would. Expected: the same verdict in process, from the file and from
the command line (exit code 1 on any violation, 2 on a malformed file).
"""

from __future__ import annotations

import json

import pytest

from hicache_contracts import ContractViolation
from hicache_contracts.cli import main
from hicache_contracts.engine import TRACE_FORMAT, TraceDocument, check_operation, load_trace
from hicache_contracts.engine import EngineScenario as Scenario
from hicache_contracts.engine._scenario import PAGE_SIZE
from hicache_reference.engine_check import run_scenario
from tests import planted_controllers as planted
from tests.engine.traces import CHAIN, PREFIX


def recorded_document(scenario: Scenario, controller_class=None) -> tuple:
    outcome = run_scenario(scenario, controller_class)
    operation = outcome.operation
    document = outcome.recorder.to_trace(
        chain=scenario.chain,
        prefix_keys=operation.base_info.prefix_keys,
        operation_id=operation.operation_id,
        page_size=PAGE_SIZE,
        acks=operation.acks,
    )
    return outcome, document


@pytest.mark.clause("PFX-2", "PFX-8", "PFX-9", "HYB-1", "CTL-5")
def test_a_reference_trace_round_trips_and_conforms():
    outcome, document = recorded_document(Scenario("prefetch", 300, "anchor", hybrid=True))
    text = document.model_dump_json()
    loaded = load_trace(text)
    assert loaded == document
    assert json.loads(text)["format"] == TRACE_FORMAT
    report = check_operation(loaded.operations[0])
    assert report.ok, report.format_table()
    assert report.checked == outcome.check().checked


@pytest.mark.clause("PFX-5", "PFX-2")
def test_a_planted_trace_gives_the_same_verdict_from_json():
    outcome, document = recorded_document(Scenario("prefetch", 300, "anchor"), planted.PrefixGrownInPlaceController)
    live = outcome.check()
    from_file = check_operation(load_trace(document.model_dump_json()).operations[0])
    assert live.violated == from_file.violated == ("PFX-5",)
    assert [str(violation) for violation in live.violations] == [str(violation) for violation in from_file.violations]


HAND_WRITTEN = {
    "format": "hicache-trace/1",
    "operations": [
        {
            "operation_id": "req-1",
            "chain": list(CHAIN[:4]),
            "prefix_keys": list(PREFIX),
            "batch_size": 2,
            "page_size": 16,
            "calls": [
                {
                    "index": 0,
                    "method": "batch_exists",
                    "keys": list(CHAIN[:2]),
                    "extra_info_state": "present",
                    "prefix_keys": list(PREFIX),
                    "result": 2,
                },
                {
                    "index": 1,
                    "method": "batch_exists",
                    "keys": list(CHAIN[2:4]),
                    "extra_info_state": "present",
                    "prefix_keys": list(PREFIX + CHAIN[:2]),
                    "result": 2,
                },
                {
                    "index": 2,
                    "method": "batch_get_v1",
                    "keys": list(CHAIN[:2]),
                    "extra_info_state": "present",
                    "prefix_keys": list(PREFIX),
                    "result": [True, True],
                    "prefix_keys_after": list(PREFIX),
                },
                {
                    "index": 3,
                    "method": "batch_get_v1",
                    "keys": list(CHAIN[2:4]),
                    "extra_info_state": "present",
                    "prefix_keys": list(PREFIX + CHAIN[:2]),
                    "result": [True, True],
                },
            ],
            "acks": [
                {"kind": "progress", "operation_id": "req-1", "slice_index": 0, "tokens": 32},
                {"kind": "progress", "operation_id": "req-1", "slice_index": 1, "tokens": 64},
                {"kind": "final", "operation_id": "req-1", "tokens": 64},
            ],
        }
    ],
}


def write(tmp_path, document) -> str:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.clause("PFX-2", "CTL-1", "CTL-4", "CTL-5", "CTL-6")
def test_cli_accepts_a_conforming_hand_written_trace(tmp_path, capsys):
    assert main(["trace", write(tmp_path, HAND_WRITTEN)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("operation req-1:\ntrace conforms (checked: ")
    assert out.endswith("1 of 1 operation(s) conform\n")


def broken_document() -> dict:
    """The hand-written trace with an empty prefix that never grows (PFX-4) and no final ack (CTL-6)."""
    document = json.loads(json.dumps(HAND_WRITTEN))
    operation = document["operations"][0]
    operation["prefix_keys"] = []
    for call, before in zip(operation["calls"], [[], list(CHAIN[:2]), [], []]):
        call["prefix_keys"] = before
    operation["calls"][2].pop("prefix_keys_after")
    operation["acks"].pop()
    return document


@pytest.mark.clause("PFX-4", "CTL-6")
def test_cli_prints_a_table_and_exits_1_on_violations(tmp_path, capsys):
    assert main(["trace", write(tmp_path, broken_document()), "--statements"]) == 1
    out = capsys.readouterr().out
    assert (
        "PFX-4   call #3    KV read batch_get_v1 at page 2: received [] but 2 key(s) precede its first key; an "
        "empty prefix must grow like any list\n"
    ) in out
    assert (
        "                   rule: An empty prefix [] accumulates like any list, and a list is never turned into None.\n"
        in out
    )
    assert "CTL-6   operation  no final ack; every prefetch ends with one" in out
    assert out.endswith("0 of 1 operation(s) conform\n")


def test_cli_json_output(tmp_path, capsys):
    assert main(["trace", write(tmp_path, HAND_WRITTEN), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["violations"] == [] and report["operation_id"] == "req-1"


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda document: document.update(format="hicache-trace/9"),
            "TraceDocument.format: input should be 'hicache-trace/1' (got 'hicache-trace/9')",
        ),
        (
            lambda document: document["operations"][0].pop("chain"),
            "TraceDocument.operations[0].chain: is required (got nothing)",
        ),
        (
            lambda document: document["operations"][0]["calls"][0].update(extra_info_state="maybe"),
            "TraceDocument.operations[0].calls[0].extra_info_state: input should be 'absent', 'none' or 'present' "
            "(got 'maybe') [PFX-7]",
        ),
        (
            lambda document: document.update(operations=[]),
            "TraceDocument.operations: must hold at least one operation (an empty trace checks nothing) (got ())",
        ),
        (
            lambda document: document["operations"][0].update(page_size=0),
            "TraceDocument.operations[0].page_size: must be >= 1 (got 0) [CTL-5]",
        ),
        (
            lambda document: document["operations"][0].pop("page_size"),
            "TraceDocument.operations[0].page_size: must be given with acks (got None) [CTL-5]",
        ),
        (
            lambda document: document["operations"][0].update(batch_size=0),
            "TraceDocument.operations[0].batch_size: must be >= 1 (got 0) [CTL-2]",
        ),
        (
            lambda document: document["operations"][0].update(agreed_pages=5),
            "TraceDocument.operations[0].agreed_pages: must be <= len(chain) = 4 (got 5) [RANK-2]",
        ),
        (
            lambda document: document["operations"][0].update(terminated_before_slice=-1),
            "TraceDocument.operations[0].terminated_before_slice: must be >= 0 (got -1) [CTL-4]",
        ),
    ],
)
def test_malformed_documents_are_named_and_exit_2(tmp_path, capsys, change, message):
    document = json.loads(json.dumps(HAND_WRITTEN))
    change(document)
    with pytest.raises(ContractViolation) as error:
        load_trace(json.dumps(document))
    assert str(error.value) == message
    path = write(tmp_path, document)
    assert main(["trace", path]) == 2
    assert capsys.readouterr().err == f"{path}: not a valid trace: {message}\n"


def test_unreadable_and_invalid_json_files_exit_2(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    assert main(["trace", str(missing)]) == 2
    assert (
        "not a valid trace: TraceDocument: must be a readable file (No such file or directory)"
        in capsys.readouterr().err
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["trace", str(broken)]) == 2
    assert "TraceDocument: must be valid JSON" in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert main(["trace", str(empty)]) == 2
    assert "TraceDocument: must be valid JSON" in capsys.readouterr().err


def test_document_schema_is_published():
    schema = TraceDocument.model_json_schema()
    assert set(schema["properties"]) == {"format", "operations"}
