"""Replies of page reads received straight into their host memory, without a parser's copy.

A read pipeline's replies are bulk strings, one page each. redis-py's parsers
(hiredis's too) hand each one back as a new ``bytes`` object, which must then
be copied into the page's host byte ranges. ``read_into_sinks`` reads the
replies from the connection's socket itself: the header of each (``$<size>``),
and, when the size is exactly the page's, its bytes by ``recv_into`` into the
page's own views (a "sink"); where the socket can scatter (``recvmsg_into``, not over
TLS), the receive that ends a page also takes the value's CRLF and the next reply's header, so a page that
has arrived whole costs one receive instead of three. A reply of another size is skipped and writes
nothing (BE-13); a page that then fails part way may leave its own views
partly written (only those), and the call's replies are all lost (the
connection raises and is dropped), so that page is False (BE-15, BE-16).

It reads only a connection whose parser has nothing buffered
(``can_read_directly``); otherwise the replies go through the parser and are
copied (``sink_reply``). A reply it does not expect (a RESP3 push, say)
breaks the round trip: the connection is dropped and the call retried once
on a fresh one, as for any broken connection. See redis_nodes.py.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any, Callable, Optional, Sequence

import hicache_reference.backends._redis_client  # noqa: F401  (without the redis extra: a clear error)
import redis
from redis._parsers.base import BaseParser

__all__ = ["can_read_directly", "read_into_sinks", "sink_reply"]

Sink = Sequence[memoryview]
"""The views one reply's bytes land in, one after the other (a page's host byte ranges)."""

_HEADER_ROOM = 32
"""Bytes asked for beyond the expected header when a header is read: the end of one reply and the next header."""
_END = len(b"\r\n")
"""The CRLF that ends a bulk string."""


def _header_length(size: int) -> int:
    """The length of the header of a bulk string of ``size`` bytes (``$<size>`` and its CRLF)."""
    return len(b"$%d\r\n" % size)


def can_read_directly(connection: Any) -> bool:
    """Whether ``connection`` is a connected RESP2 or RESP3 connection whose parser holds no unread bytes."""
    if connection.protocol not in (2, 3, "2", "3", None) or getattr(connection, "_sock", None) is None:
        return False
    parser = getattr(connection, "_parser", None)
    reader = getattr(parser, "_reader", None)
    if reader is not None and callable(getattr(reader, "has_data", None)):  # hiredis
        return not reader.has_data()
    unread = getattr(getattr(parser, "_buffer", None), "unread_bytes", None)  # redis-py's own parser: a SocketBuffer
    return callable(unread) and unread() == 0


def sink_reply(reply: Any, sink: Sink) -> Any:
    """Land one reply the parser returned in its sink: True when it was exactly the sink's size, else as
    ``read_into_sinks`` says (None for no value, False for a value of another size, an error as it is)."""
    if reply is None or isinstance(reply, BaseException):
        return reply
    if not isinstance(reply, bytes) or len(reply) != sum(view.nbytes for view in sink):
        return False  # BE-13: short or long is a miss, and nothing is written
    source = memoryview(reply)
    offset = 0
    for view in sink:
        view[:] = source[offset : offset + view.nbytes]
        offset += view.nbytes
    return True


def read_into_sinks(connection: Any, sinks: Sequence[Sink]) -> list[Any]:
    """Read one bulk-string reply per sink from ``connection``'s socket; return what each was.

    Per reply: True (exactly the sink's size, received into it), None (no
    such value), False (a value of another size: skipped, nothing written) or
    the error reply as an exception instance. Raises redis.ConnectionError /
    redis.TimeoutError when the connection breaks or says something else; the
    caller then drops the connection.
    """
    return _Replies(connection._sock).read(sinks)


def _received(receive: Callable[[Any], Any], buffers: Any) -> int:
    """Return how many bytes ``receive(buffers)`` received (``recv_into``'s count, or ``recvmsg_into``'s first
    item): at least one, else redis's own error (a timeout, a socket error, a closed peer)."""
    try:
        answer = receive(buffers)
    except TimeoutError as error:
        raise redis.TimeoutError("Timeout reading a page reply") from error
    except OSError as error:
        raise redis.ConnectionError(f"Error while reading a page reply: {error}") from error
    received = int(answer if isinstance(answer, int) else answer[0])
    if received == 0:
        raise redis.ConnectionError("the server closed the connection")
    return received


class _Replies:
    """The bytes received from one socket and not yet used."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._held = bytearray()
        self._scatter: Optional[Callable[[list[Any]], tuple[int, Any, int, Any]]] = (
            None if isinstance(sock, ssl.SSLSocket) else getattr(sock, "recvmsg_into", None)
        )
        """The socket's scattering receive, when it has one (not over TLS): see ``_fill``."""

    def read(self, sinks: Sequence[Sink]) -> list[Any]:
        sizes = [sum(view.nbytes for view in sink) for sink in sinks]
        headers = [_header_length(size) for size in sizes]
        # What may follow each value: its CRLF, then the next reply's header when it is the page it should be.
        # Never more than the replies still to come, so a receive cannot wait for bytes that will not arrive.
        tails = [_END + header for header in headers[1:]] + [_END]
        answers = [self._reply(*reply) for reply in zip(sinks, sizes, headers, tails)]
        if self._held:
            raise redis.ConnectionError("more bytes than the replies of the pipeline")
        return answers

    def _reply(self, sink: Sink, size: int, header: int, tail: int) -> Any:
        """Read the next reply, into ``sink`` (``size`` bytes, a header of ``header`` bytes) when it is a value of
        exactly that size; ``tail``: the bytes that may follow such a value (see ``_fill``)."""
        line = self._line(header)
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            length = int(rest)
            if length < 0:
                return None
            if length == size:
                self._fill(sink, tail)
                self._skip_end()
                return True
            self._skip_value(length, sink)
            self._skip_end()
            return False
        if kind == b"-":
            return BaseParser.parse_error(rest.decode("utf-8", "replace"))
        if kind == b"_":  # RESP3's null
            return None
        raise redis.ConnectionError(f"unexpected reply to a page read: {bytes(line[:40])!r}")

    def _recv_into(self, buffer: Any) -> int:
        """Receive into ``buffer`` (at least one byte); a timeout, a socket error or a closed peer raise redis's own."""
        return _received(self._sock.recv_into, buffer)

    def _recv_with_tail(self, view: memoryview, tail: int) -> int:
        """Receive into ``view`` and, past its end, up to ``tail`` bytes into the held bytes (which must be empty);
        return how many landed in ``view``. Without a scattering receive, only into ``view``."""
        if self._scatter is None:
            return self._recv_into(view)
        room = bytearray(tail)
        received = _received(self._scatter, [view, room])
        if received > view.nbytes:
            self._held += room[: received - view.nbytes]
            return view.nbytes
        return received

    def _receive(self, count: int) -> None:
        """Receive up to ``count`` more bytes into the held bytes (at least one)."""
        chunk = bytearray(count)
        received = self._recv_into(chunk)
        self._held += chunk[:received]

    def _line(self, expected: int) -> bytearray:
        """Return the next line without its CRLF, receiving little more than a header of ``expected`` bytes."""
        while True:
            end = self._held.find(b"\r\n")
            if end >= 0:
                line = self._held[:end]
                del self._held[: end + 2]
                return line
            self._receive(max(expected - len(self._held), 0) + _HEADER_ROOM)

    def _fill(self, sink: Sink, tail: int = 0) -> None:
        """Fill ``sink``'s views with the next bytes: first those held, then straight from the socket.

        With ``tail`` and a scattering receive, a receive into the last view also takes up to ``tail`` bytes past
        it into the held bytes: the value's CRLF and the next reply's header, which would each cost a receive of
        their own. Only the views of this page are written, whatever arrives.
        """
        last = len(sink) - 1
        for position, view in enumerate(sink):
            filled = min(len(self._held), view.nbytes)
            if filled:
                view[:filled] = self._held[:filled]
                del self._held[:filled]
            with_tail = position == last and tail > 0
            while filled < view.nbytes:
                if with_tail:
                    filled += self._recv_with_tail(view[filled:], tail)
                else:
                    filled += self._recv_into(view[filled:])

    def _skip_value(self, count: int, sink: Sink) -> None:
        """Drop the next ``count`` bytes, a value of another size than ``sink``'s: none reaches it (BE-13)."""
        while len(self._held) < count:
            self._receive(min(count - len(self._held), 1 << 16))
        del self._held[:count]

    def _skip_end(self) -> None:
        """Drop the CRLF that ends a bulk string."""
        while len(self._held) < 2:
            self._receive(2 - len(self._held) + _HEADER_ROOM)
        if self._held[:2] != b"\r\n":
            raise redis.ConnectionError("a bulk string did not end with CRLF")
        del self._held[:2]
