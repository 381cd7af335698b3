"""Reading a trace file safely: regular files only, never blocking, within a size limit.

``read_trace_file(path, max_bytes)`` opens the path without blocking
(``O_NONBLOCK``: a FIFO with no writer would otherwise hold the open for
ever), looks at what it is before reading a byte, and refuses anything but
a regular file (a FIFO, a device such as ``/dev/zero``, a directory, a
socket) and a file larger than ``max_bytes`` (``MAX_TRACE_BYTES`` unless
told; None reads any size). Each refusal is a ``TraceFormatError`` naming
the rule and the path. See docs/engines.md ("The trace file").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final, Optional, Union

from hicache_contracts.engine._trace_errors import TraceFormatError
from hicache_spec.values import is_count

__all__ = ["MAX_TRACE_BYTES", "check_max_bytes", "read_trace_file"]

MAX_TRACE_BYTES: Final = 1 << 30
"""Largest trace file read unless told otherwise (1 GiB): a prefetch of 128 pages records about 60 KB, so this
holds over 10,000 operations; ``max_bytes`` (``--max-bytes`` on the command line) allows more."""
_READ_CHUNK: Final = 1 << 20
"""Bytes read at a time past the size the file had when it was opened (a file that grows while read)."""
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_max_bytes(max_bytes: Optional[int]) -> Optional[int]:
    """Return ``max_bytes`` when it is None or an int >= 1; raise TraceFormatError naming it otherwise."""
    if max_bytes is not None and not is_count(max_bytes, 1):
        raise TraceFormatError("load_trace.max_bytes", "must be None or an int >= 1", max_bytes, None)
    return max_bytes


def _too_large(path: Path, size: int, max_bytes: int) -> TraceFormatError:
    return TraceFormatError(
        "TraceDocument",
        f"must be a file of at most {max_bytes} bytes (pass max_bytes, or --max-bytes on the command line, "
        "to read a larger one)",
        f"{path}: {size} bytes",
        None,
    )


def read_trace_file(path: Union[str, Path], max_bytes: Optional[int] = MAX_TRACE_BYTES) -> bytes:
    """Return the bytes of the regular file ``path``; raise TraceFormatError for anything else or a larger file."""
    path = Path(path)
    check_max_bytes(max_bytes)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        reason = error.strerror if isinstance(error, OSError) else "the path holds a NUL byte"
        raise TraceFormatError("TraceDocument", f"must be a readable file ({reason})", str(path), None) from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):  # looked at before a byte is read
            kind = next((name for test, name in _KINDS if test(status.st_mode)), "no regular file")
            raise TraceFormatError("TraceDocument", f"must be a regular file, not {kind}", str(path), None)
        if max_bytes is not None and status.st_size > max_bytes:
            raise _too_large(path, status.st_size, max_bytes)
    except BaseException:
        os.close(descriptor)
        raise
    with os.fdopen(descriptor, "rb", buffering=0) as handle:
        try:
            os.set_blocking(descriptor, True)  # a regular file: reads never block anyway
            data = handle.readall() if max_bytes is None else _read_at_most(handle, status.st_size, max_bytes)
        except OSError as error:
            raise TraceFormatError(
                "TraceDocument", f"must be a readable file ({error.strerror})", str(path), None
            ) from None
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(path, len(data), max_bytes)  # it grew while read
    return data


def _read_at_most(handle: object, size: int, max_bytes: int) -> bytes:
    """Read the file's ``size`` bytes, then whatever it grew by, stopping once past ``max_bytes``."""
    read = handle.read  # type: ignore[attr-defined]
    chunks = [read(size)] if size else []
    total = sum(map(len, chunks))
    while total <= max_bytes:
        chunk = read(min(_READ_CHUNK, max_bytes + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
