"""Page replies received straight into host memory (redis_replies.py), over a scripted socket.

Scenario: pipelines of replies to page reads (a whole page, no value in RESP2
and RESP3, a value of another size, an error, a redirection), delivered by
a socket in chunks of every size; a connection that breaks mid-page; a reply
no page read gets; bytes past the last reply.
Expected: a page of exactly the sink's size lands whole in its views and is
True; no value is None; another size is False and writes nothing (BE-13);
an error is its exception; a break or a surprise raises (ConnectionError,
TimeoutError) having written only into the views of the page it was receiving (BE-15,
BE-16). The parser's path (``sink_reply``) answers the same.
A request of many buffers goes out whole and in order over a socket that
takes it in parts (``redis_nodes._send``).
Planted: a reader that writes a wrong-size value into the views, one that
drops the bytes it received with a header, and a sender that sends a buffer
taken in part again from its start, are caught.
"""

from __future__ import annotations

import itertools
import random
import socket
import ssl
import threading
from typing import Any, Optional

import pytest
import redis
from redis.exceptions import MovedError

from hicache_reference.backends import redis_nodes
from hicache_reference.backends.redis_replies import _Replies, can_read_directly, sink_reply

PAGE = 1000
"""Bytes per page; each page is two views of 400 and 600 bytes."""


class ScriptedSocket:
    """A socket that hands out ``data`` in chunks of random sizes (or whole, without a seed); raises or ends as told.

    It has ``recv_into`` only; ``ScatteringSocket`` adds ``recvmsg_into``.
    """

    def __init__(self, data: bytes, seed: Optional[int] = None, fail: Optional[BaseException] = None) -> None:
        self._data = memoryview(data)
        self._chooser = random.Random(seed)
        self._fail = fail
        self._seeded = seed is not None

    def recv_into(self, buffer: Any, count: int = 0) -> int:
        if not self._data:
            if self._fail is not None:
                raise self._fail
            return 0
        target = memoryview(buffer).cast("B")
        limit = min(len(target), count or len(target), len(self._data))
        size = self._chooser.randint(1, limit) if self._seeded else limit
        target[:size] = self._data[:size]
        self._data = self._data[size:]
        return size


class ScatteringSocket(ScriptedSocket):
    """The same, with a scattering receive: one chunk spread over the buffers in turn."""

    def recvmsg_into(self, buffers: list[Any]) -> tuple[int, list[Any], int, Any]:
        targets = [memoryview(buffer).cast("B") for buffer in buffers]
        size = self.recv_into(bytearray(sum(len(target) for target in targets)))
        chunk, self._data = self._taken, self._data  # what recv_into just handed out
        offset = 0
        for target in targets:
            part = min(len(target), size - offset)
            target[:part] = chunk[offset : offset + part]
            offset += part
        return size, [], 0, None

    def recv_into(self, buffer: Any, count: int = 0) -> int:
        before = self._data
        size = super().recv_into(buffer, count)
        self._taken = before[:size]
        return size


def page(number: int) -> bytes:
    return bytes((number * 7 + index) % 251 for index in range(PAGE))


def bulk(data: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(data), data)


def sinks(count: int) -> tuple[list[bytearray], list[list[memoryview]]]:
    memory = [bytearray(b"\xee" * PAGE) for _ in range(count)]
    return memory, [[memoryview(block)[:400], memoryview(block)[400:]] for block in memory]


SCRIPT = [
    (bulk(page(0)), True),
    (b"$-1\r\n", None),
    (bulk(page(2)[:999]), False),  # one byte short: a miss, nothing written
    (b"_\r\n", None),  # RESP3's null
    (bulk(page(4) + b"x"), False),  # one byte long
    (b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", redis.ResponseError),
    (b"-MOVED 3999 127.0.0.1:6381\r\n", MovedError),
    (bulk(page(7)), True),
    (bulk(b""), False),
]


def check_reader(reader: type = _Replies, sockets: tuple[type, ...] = (ScriptedSocket, ScatteringSocket)) -> None:
    wire = b"".join(reply for reply, _ in SCRIPT)
    for seed, kind in itertools.product([None, *range(30)], sockets):
        memory, views = sinks(len(SCRIPT))
        try:
            answers = reader(kind(wire, seed)).read(views)
        except redis.ConnectionError as error:
            raise AssertionError(f"seed {seed}: a well-formed pipeline broke the reader: {error}") from error
        for index, ((_, expected), answer, block) in enumerate(zip(SCRIPT, answers, memory)):
            if isinstance(expected, type):
                assert isinstance(answer, expected), (seed, index, answer)
            else:
                assert answer is expected, (seed, index, answer)
            assert bytes(block) == (page(index) if expected is True else b"\xee" * PAGE), (seed, index)


@pytest.mark.clause("BE-13", "BE-15", "BE-16")
def test_replies_land_whole_in_their_views_and_nothing_else_is_written() -> None:
    check_reader()


@pytest.mark.clause("BE-13", "BE-16")
def test_the_parsers_path_answers_the_same() -> None:
    replies: list[Any] = [page(0), None, page(2)[:999], None, page(4) + b"x", redis.ResponseError("WRONGTYPE")]
    memory, views = sinks(len(replies))
    answers = [sink_reply(reply, sink) for reply, sink in zip(replies, views)]
    assert answers[:5] == [True, None, False, None, False] and isinstance(answers[5], redis.ResponseError)
    assert bytes(memory[0]) == page(0)
    assert all(bytes(block) == b"\xee" * PAGE for block in memory[1:])


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize("fail", [None, TimeoutError("timed out"), ConnectionResetError("reset")])
def test_a_break_mid_page_raises_having_written_only_that_page(fail: Optional[BaseException]) -> None:
    wire = bulk(page(0)) + bulk(page(1))[:600]
    memory, views = sinks(3)
    with pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        _Replies(ScriptedSocket(wire, 3, fail)).read(views)  # type: ignore[arg-type]
    assert bytes(memory[0]) == page(0)
    assert bytes(memory[1][:400]) == page(1)[:400]  # part of the page being received: its own views only
    assert bytes(memory[2]) == b"\xee" * PAGE


@pytest.mark.parametrize(
    "wire", [b":1\r\n", b"+OK\r\n", b">3\r\n$10\r\ninvalidate\r\n*0\r\n_\r\n", bulk(page(0)) + b"$-1\r\n"]
)
def test_anything_else_breaks_the_round_trip(wire: bytes) -> None:
    _, views = sinks(1)
    with pytest.raises(redis.ConnectionError):
        _Replies(ScriptedSocket(wire)).read(views)  # type: ignore[arg-type]


def test_only_a_parser_with_nothing_buffered_is_bypassed() -> None:
    class Reader:
        def __init__(self, buffered: bool) -> None:
            self.buffered = buffered

        def has_data(self) -> bool:
            return self.buffered

    class Parser:
        def __init__(self, buffered: bool) -> None:
            self._reader = Reader(buffered)

    class Connection:
        def __init__(self, buffered: bool, protocol: Any = 2, sock: Any = "a socket") -> None:
            self._parser, self.protocol, self._sock = Parser(buffered), protocol, sock

    assert can_read_directly(Connection(False)) and can_read_directly(Connection(False, 3))
    assert not can_read_directly(Connection(True))
    assert not can_read_directly(Connection(False, sock=None))
    assert not can_read_directly(Connection(False, protocol=4))


class WritesWrongSizes(_Replies):
    """Planted: a value of another size is written into the views as far as it goes."""

    def _skip_value(self, count: int, sink: Any) -> None:
        while len(self._held) < count:
            self._receive(count - len(self._held))
        room = min(count, sink[0].nbytes)
        sink[0][:room] = self._held[:room]
        del self._held[:count]


class DropsHeldBytes(_Replies):
    """Planted: bytes received together with a header are not copied into the page."""

    def _fill(self, sink: Any, tail: int = 0) -> None:
        del self._held[:]
        super()._fill(sink, tail)


class DropsTheTail(_Replies):
    """Planted: the bytes a scattering receive took past a page (its CRLF, the next header) are dropped."""

    def _recv_with_tail(self, view: memoryview, tail: int) -> int:
        received = super()._recv_with_tail(view, tail)
        del self._held[:]
        return received


@pytest.mark.parametrize("planted", [WritesWrongSizes, DropsHeldBytes])
def test_planted_readers_are_caught(planted: type) -> None:
    with pytest.raises(AssertionError):
        check_reader(planted)


@pytest.mark.parametrize("planted", [DropsTheTail])
def test_planted_scattering_readers_are_caught(planted: type) -> None:
    check_reader(planted, sockets=(ScriptedSocket,))  # without a scattering receive, the planted code never runs
    with pytest.raises(AssertionError):
        check_reader(planted, sockets=(ScatteringSocket,))


def test_a_scattering_receive_saves_a_receive_per_page() -> None:
    """Whole pages arriving at once take one receive each (the CRLF and next header come with the page)."""
    pages = 16
    wire = b"".join(bulk(page(index)) for index in range(pages))
    memory = [bytearray(PAGE) for _ in range(pages)]
    views = [[memoryview(block)] for block in memory]
    counted = {"recv_into": 0, "recvmsg_into": 0}

    class Counting(ScatteringSocket):
        def recv_into(self, buffer: Any, count: int = 0) -> int:
            counted["recv_into"] += 1
            return super().recv_into(buffer, count)

        def recvmsg_into(self, buffers: list[Any]) -> tuple[int, list[Any], int, Any]:
            counted["recvmsg_into"] += 1
            counted["recv_into"] -= 1  # its own recv_into is the same receive
            return super().recvmsg_into(buffers)

    assert _Replies(Counting(wire)).read(views) == [True] * pages  # type: ignore[arg-type]
    assert [bytes(block) for block in memory] == [page(index) for index in range(pages)]
    assert counted == {"recv_into": 1, "recvmsg_into": pages}, counted


def test_over_tls_the_plain_receive_is_used() -> None:
    context = ssl.create_default_context()
    with (
        socket.socket() as plain,
        context.wrap_socket(plain, server_hostname="localhost", do_handshake_on_connect=False) as wrapped,
    ):
        assert _Replies(wrapped)._scatter is None
    with socket.socket() as plain:
        assert _Replies(plain)._scatter is not None


def send_and_receive(parts: list[bytes]) -> bytes:
    """Send ``parts`` by ``redis_nodes._send`` over a socket pair with small buffers; return what arrived.

    The receiver stops (and closes its end, which fails the send) past twice the request's size, so a sender
    that never ends cannot hang the test.
    """
    left, right = socket.socketpair()
    for end in (left, right):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    left.settimeout(10)
    right.settimeout(10)
    received = bytearray()
    limit = 2 * sum(map(len, parts))

    def receive() -> None:  # until the sender shuts its end, or too much arrived
        try:
            while len(received) <= limit and (chunk := right.recv(1500)):
                received.extend(chunk)
        finally:
            right.close()

    class Connection:
        _sock = left

        def disconnect(self) -> None:
            left.close()

    reader = threading.Thread(target=receive)
    reader.start()
    try:
        redis_nodes._send(Connection(), parts)
        left.shutdown(socket.SHUT_WR)
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        pass  # the receiver gave up: what arrived tells
    finally:
        reader.join(20)
        left.close()
    return bytes(received)


PARTS = [bytes([index % 251]) * size for index, size in enumerate([7, 70_000, 2, 1, 33_000, 5, 120_000, 3] * 3)]


def test_a_request_is_sent_whole_and_in_order_however_the_socket_takes_it() -> None:
    # Partial sends happen: the pair's buffers hold a few KiB, the request is some 700 KiB.
    assert send_and_receive(PARTS) == b"".join(PARTS)


def skips_the_rest(views: list[memoryview], index: int, sent: int) -> int:
    """Planted: a buffer sent in part counts as sent whole."""
    while sent and index < len(views):
        size = views[index].nbytes
        index += 1
        if sent < size:
            return index
        sent -= size
    return index


def sends_it_again(views: list[memoryview], index: int, sent: int) -> int:
    """Planted: a buffer sent in part is sent again from its start."""
    while sent and index < len(views):
        if sent < views[index].nbytes:
            return index
        sent -= views[index].nbytes
        index += 1
    return index


@pytest.mark.parametrize("planted", [skips_the_rest, sends_it_again])
def test_the_send_check_catches_a_buffer_sent_in_part_mishandled(monkeypatch: pytest.MonkeyPatch, planted: Any) -> None:
    monkeypatch.setattr(redis_nodes, "_advance", planted)
    assert send_and_receive(PARTS) != b"".join(PARTS)
