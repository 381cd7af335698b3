"""The trace checker reads regular files only, within a size limit, one operation at a time.

Scenario: ``load_trace``, ``iter_trace_operations`` and ``hicache-conform
trace`` are handed a FIFO with no writer, ``/dev/zero``, a directory, a path
with a NUL byte, a file over the size limit, and a large valid trace.
Expected: each refusal is a ``TraceFormatError`` with the whole message,
given at once (a FIFO never blocks the open, a device is never read); the
limit has an override (``max_bytes=None``, ``--max-bytes 0``); reading
operation by operation gives the same operations and, for every malformed
document of the bad-input matrix, the same error as the whole-document
load, while its peak memory stays under 3x the file's size (the
whole-document load needs more: the planted reader is caught). Why this
matters: ``/dev/zero`` used to grow to gigabytes, a FIFO blocked for ever
and a 231 MB trace took 3.5 GB.
"""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import pytest

from hicache_contracts.cli import main
from hicache_contracts.engine import TraceDocument, load_trace
from hicache_contracts.engine._trace_errors import TraceFormatError
from hicache_contracts.engine._trace_source import MAX_TRACE_BYTES, read_trace_file
from hicache_contracts.engine._trace_stream import iter_trace_operations
from tests.engine.traces import prefetch_trace
from tests.reliability.badinput_rows import TRACE_DOCUMENTS

LIVENESS_S = 20.0
"""A bound only a blocked read reaches; no assertion depends on how fast a refusal came."""


def bounded(function: Callable[[], Any]) -> Any:
    """Run ``function`` on a helper thread and return what it raised (or returned); fail if it blocks."""
    box: list = []

    def run() -> None:
        try:
            box.append(function())
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            box.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIVENESS_S)
    assert box, "the read blocked"
    return box[0]


def trace_text(operations: int) -> str:
    operation = json.loads(prefetch_trace(hybrid=True).model_dump_json())
    return json.dumps({"format": "hicache-trace/1", "operations": [operation] * operations})


READERS = {
    "load_trace": lambda path, **options: load_trace(path, **options),
    "iter_trace_operations": lambda path, **options: tuple(iter_trace_operations(path, **options)),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, reader: str) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    raised = bounded(lambda: READERS[reader](fifo))
    assert isinstance(raised, TraceFormatError)
    assert str(raised) == f"TraceDocument: must be a regular file, not a FIFO (got '{fifo}')"


@pytest.mark.parametrize(
    "path, kind", [("/dev/zero", "a character device"), ("/dev/null", "a character device"), ("/", "a directory")]
)
def test_devices_and_directories_are_refused_before_a_byte_is_read(path: str, kind: str) -> None:
    for reader in READERS.values():
        raised = bounded(lambda: reader(Path(path)))
        assert isinstance(raised, TraceFormatError)
        assert str(raised) == f"TraceDocument: must be a regular file, not {kind} (got '{path}')"


def test_a_nul_byte_in_the_path_is_refused_clearly() -> None:
    with pytest.raises(TraceFormatError) as raised:
        load_trace(Path("trace\0.json"))
    assert str(raised.value) == (
        "TraceDocument: must be a readable file (the path holds a NUL byte) (got 'trace\\x00.json')"
    )


def test_a_file_over_the_limit_is_refused_and_the_override_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(trace_text(2))
    size = path.stat().st_size
    for reader in READERS.values():
        with pytest.raises(TraceFormatError) as raised:
            reader(path, max_bytes=size - 1)
        assert str(raised.value) == (
            f"TraceDocument: must be a file of at most {size - 1} bytes (pass max_bytes, or --max-bytes on the "
            f"command line, to read a larger one) (got '{path}: {size} bytes')"
        )
    assert len(load_trace(path, max_bytes=size).operations) == 2
    assert len(load_trace(path, max_bytes=None).operations) == 2
    assert MAX_TRACE_BYTES == 1 << 30
    with pytest.raises(TraceFormatError) as raised:
        read_trace_file(path, 0)
    assert str(raised.value) == "load_trace.max_bytes: must be None or an int >= 1 (got 0)"


def test_the_command_refuses_a_fifo_and_a_large_file_and_takes_the_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert bounded(lambda: main(["trace", str(fifo)])) == 2
    assert capsys.readouterr().err == (
        f"{fifo}: not a valid trace: TraceDocument: must be a regular file, not a FIFO (got '{fifo}')\n"
    )
    path = tmp_path / "trace.json"
    path.write_text(trace_text(3))
    size = path.stat().st_size
    assert main(["trace", str(path), "--max-bytes", "100"]) == 2
    assert capsys.readouterr().err == (
        f"{path}: not a valid trace: TraceDocument: must be a file of at most 100 bytes (pass max_bytes, or "
        f"--max-bytes on the command line, to read a larger one) (got '{path}: {size} bytes')\n"
    )
    assert main(["trace", str(path), "--max-bytes", "0"]) == 0
    assert capsys.readouterr().out.endswith("3 of 3 operation(s) conform\n")
    with pytest.raises(SystemExit):
        main(["trace", str(path), "--max-bytes", "-1"])
    assert "argument --max-bytes: must be an int >= 0, 0 reading any size (got '-1')" in capsys.readouterr().err


def _error_of(call: Callable[[], Any]) -> str:
    try:
        call()
    except TraceFormatError as error:
        return str(error)
    return "no error"


def _with_valid_operations_before(document: Any) -> Any:
    """``document`` with two valid operations before its first one (when it has a list of operations)."""
    if not isinstance(document, dict) or not isinstance(document.get("operations"), list):
        return None
    valid = json.loads(prefetch_trace().model_dump_json())
    return {**document, "operations": [valid, valid, *document["operations"]]}


@pytest.mark.parametrize("label, document", TRACE_DOCUMENTS, ids=[label for label, _ in TRACE_DOCUMENTS])
def test_reading_by_operation_gives_the_whole_documents_error(label: str, document: Any) -> None:
    text = document if isinstance(document, str) else json.dumps(document)
    whole = _error_of(lambda: load_trace(text))
    assert whole != "no error"
    assert _error_of(lambda: tuple(iter_trace_operations(text))) == whole
    moved = _with_valid_operations_before(document)  # the bad operation third: validated on its own
    if moved is not None:
        text = json.dumps(moved)
        whole_moved = _error_of(lambda: load_trace(text))
        assert _error_of(lambda: tuple(iter_trace_operations(text))) == whole_moved
        if "operations[0]" in whole:
            assert whole_moved == whole.replace("operations[0]", "operations[2]")


@pytest.mark.parametrize(
    "text",
    [
        trace_text(3),
        '  {"operations": [' + prefetch_trace().model_dump_json() + '], "format": "hicache-trace/1"}\n',
        '{"format": "hicache-trace/1", "operations": "x", "operations": [' + prefetch_trace().model_dump_json() + "]}",
    ],
)
def test_reading_by_operation_gives_the_same_operations(text: str) -> None:
    assert tuple(iter_trace_operations(text)) == load_trace(text).operations
    assert tuple(iter_trace_operations(text.encode())) == load_trace(text).operations


def peak_memory_ratio(path: Path, read: Callable[[Path], Any]) -> float:
    """Peak Python memory while every operation of ``path`` is read and dropped, over the file's size."""
    size = path.stat().st_size
    tracemalloc.start()
    try:
        for _operation in read(path):
            pass
        return tracemalloc.get_traced_memory()[1] / size
    finally:
        tracemalloc.stop()


def _whole_document(path: Path) -> Any:
    """The planted reader: builds every operation before handing out the first."""
    return TraceDocument.model_validate_json(path.read_bytes()).operations


def test_memory_stays_within_a_small_multiple_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(trace_text(400))
    assert peak_memory_ratio(path, iter_trace_operations) < 3.0
    assert peak_memory_ratio(path, _whole_document) > 3.0  # the planted whole-document reader is caught
