"""Reading a trace one operation at a time, so memory stays a small multiple of the file's size.

``iter_trace_operations(source)`` yields the same ``TraceOperation`` objects
``load_trace(source).operations`` holds and raises the same
``TraceFormatError`` for a malformed trace (same field, rule and value), but
builds one operation at a time: the file's text is kept (once), each
operation is parsed, validated, handed out and dropped. ``load_trace``
builds every operation before the first is checked, several times the
file's size for a large trace.

How: the top-level object and its ``operations`` array are walked with the
JSON scanner, value by value, recording where each operation's text lies;
the document without its operations but the first is validated as a
``TraceDocument`` (so the format tag, unknown fields, an empty or missing
list and operation 0 are judged exactly as before), then every other
operation's text as a ``TraceOperation``, its errors named
``TraceDocument.operations[N]...``. Text that is not an object at the top,
not UTF-8, or not valid JSON in the walk's own punctuation is handed to
``load_trace``, which then gives the whole document's verdict or error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator, Optional, Union

from hicache_contracts.engine._trace import MAX_NESTING, TraceDocument, TraceOperation, load_trace
from hicache_contracts.engine._trace_errors import TraceFormatError
from hicache_contracts.engine._trace_source import MAX_TRACE_BYTES, check_max_bytes, read_trace_file
from hicache_contracts.json_depth import nesting_depth

__all__ = ["iter_trace_operations"]

_SPACE = re.compile(r"[ \t\n\r]*")
"""What JSON counts as whitespace."""


class _NotWalkable(Exception):
    """The text is not what the walk reads (the whole-document path judges it)."""


def _source_text(source: Union[str, Path, bytes], max_bytes: Optional[int]) -> Union[str, bytes]:
    if isinstance(source, Path) or (
        isinstance(source, str) and source.strip() and not source.lstrip().startswith(("{", "["))
    ):
        return read_trace_file(source, max_bytes)
    return source


def _walk(text: str) -> tuple[dict[str, tuple[int, int]], Optional[list[tuple[int, int]]]]:
    """Return where each top-level member's value lies and, when ``operations`` is an array, where each item lies."""
    decoder = json.JSONDecoder()
    members: dict[str, tuple[int, int]] = {}
    items: Optional[list[tuple[int, int]]] = None

    def skip(position: int) -> int:
        return _SPACE.match(text, position).end()  # type: ignore[union-attr]

    position = skip(0)
    if text[position : position + 1] != "{":
        raise _NotWalkable
    position = skip(position + 1)
    if text[position : position + 1] == "}":
        position += 1
    else:
        while True:
            if text[position : position + 1] != '"':
                raise _NotWalkable
            name, position = decoder.raw_decode(text, position)
            position = skip(position)
            if text[position : position + 1] != ":":
                raise _NotWalkable
            start = position = skip(position + 1)
            if name == "operations" and text[start : start + 1] == "[":
                items, position = _array_items(text, start, decoder, skip)
            else:
                items = None if name == "operations" else items
                position = decoder.raw_decode(text, start)[1]  # parsed to check it, then dropped
            members[name] = (start, position)
            position = skip(position)
            if text[position : position + 1] == "}":
                position += 1
                break
            if text[position : position + 1] != ",":
                raise _NotWalkable
            position = skip(position + 1)
    if skip(position) != len(text):
        raise _NotWalkable
    return members, items


def _array_items(text: str, start: int, decoder: json.JSONDecoder, skip: object) -> tuple[list[tuple[int, int]], int]:
    """Return where each item of the array at ``start`` lies (each parsed once, then dropped) and where it ends."""
    items: list[tuple[int, int]] = []
    position = skip(start + 1)  # type: ignore[operator]
    if text[position : position + 1] == "]":
        return items, position + 1
    while True:
        end = decoder.raw_decode(text, position)[1]
        items.append((position, end))
        position = skip(end)  # type: ignore[operator]
        if text[position : position + 1] == "]":
            return items, position + 1
        if text[position : position + 1] != ",":
            raise _NotWalkable
        position = skip(position + 1)  # type: ignore[operator]


def _renamed(error: TraceFormatError, number: int) -> TraceFormatError:
    """The error of operation ``number`` validated alone, named as the whole document's validation names it."""
    field = error.field
    if field == "TraceOperation" or field.startswith(("TraceOperation.", "TraceOperation[")):
        field = f"TraceDocument.operations[{number}]{field[len('TraceOperation') :]}"
    return TraceFormatError(field, error.rule, error.value, error.clause_id)


def iter_trace_operations(
    source: Union[str, Path, bytes], *, max_bytes: Optional[int] = MAX_TRACE_BYTES
) -> Iterator[TraceOperation]:
    """Yield the operations of the trace in a file (a path) or a JSON text, one at a time (see the module docstring).

    A file is read by ``read_trace_file`` (regular files only, at most
    ``max_bytes``). Raises TraceFormatError as ``load_trace`` does; an
    operation is yielded only once every one before it was valid.
    """
    check_max_bytes(max_bytes)
    raw = _source_text(source, max_bytes)
    if nesting_depth(raw, MAX_NESTING) > MAX_NESTING:
        yield from load_trace(raw).operations  # raises the nesting error
        return
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        members, items = _walk(text)
    except (_NotWalkable, UnicodeDecodeError, ValueError, RecursionError):
        yield from load_trace(raw).operations  # the whole document's verdict, or its error
        return
    del raw
    parts = [f"{json.dumps(name)}: {text[start:end]}" for name, (start, end) in members.items() if name != "operations"]
    if "operations" in members:
        if items is None:  # not an array: judged as it is
            start, end = members["operations"]
            parts.append(f'"operations": {text[start:end]}')
        else:  # only the first operation, so the document's own rules are judged with it
            parts.append(f'"operations": [{text[items[0][0] : items[0][1]]}]' if items else '"operations": []')
    document = TraceDocument.model_validate_json("{" + ", ".join(parts) + "}")
    yield document.operations[0]
    del document
    for number, (start, end) in enumerate(items or (), start=0):
        if number == 0:
            continue  # yielded above
        try:
            operation = TraceOperation.model_validate_json(text[start:end])
        except TraceFormatError as error:
            raise _renamed(error, number) from None
        yield operation
