"""The Redis servers one backend talks to: requests packed uncopied, one pipeline per node, failures contained.

``RedisNodes`` routes commands by key (standalone: one client; cluster: the
master owning the key's slot), sends each node its part of a batch as one
pipeline (nodes in parallel), and never raises: a node that fails, times out
or redirects turns its part into exceptions in place of replies, and is
skipped for ``reconnect_interval_seconds``. ``_pack`` writes the Redis
protocol so that a large value (a page, or its parts) goes out from its own
memory. See redis_backend.py and docs/distributed.md.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence

import hicache_reference.backends._redis_client  # noqa: F401  (without the redis extra: a clear error)
import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, TryAgainError
from redis.retry import Retry

from hicache_reference.backends.redis_replies import Sink, can_read_directly, read_into_sinks, sink_reply
from hicache_reference.backends.redis_settings import RedisSettings

__all__ = ["ConnectFailed", "NodeSkipped", "RedisNodes", "Unit"]

_SCAN_COUNT = 1000
"""Keys asked per SCAN step in ``clear()``."""
_UNLINK_BATCH = 512
"""Keys deleted per pipeline in ``clear()``."""


class NodeSkipped(redis.ConnectionError):
    """A node failed recently and is skipped until its reconnect interval has passed."""


class ConnectFailed(redis.ConnectionError):
    """No connection to a node could be made (refused, unreachable, or closed again at once)."""


_REDIRECTIONS = (AskError, ClusterDownError, TryAgainError)
"""Replies that mean the slot map is out of date (MOVED is an AskError) or the cluster is changing."""

Unit = tuple[str, Sequence[tuple]]
"""Commands for one key: (the key they route by, [command arguments, ...]), run in order on one connection."""


_SMALL_PART = 16 * 1024
"""Arguments up to this size are copied into the packed request; larger ones are sent from where they are."""


def _byte_length(data: Any) -> int:
    """Return the size of a value: one bytes-like object, or a sequence of them sent back to back."""
    if isinstance(data, (list, tuple)):
        return sum(memoryview(part).nbytes for part in data)
    return memoryview(data).nbytes


def _pack(units: Sequence[Unit]) -> list[Any]:
    """Return every command of ``units`` in the Redis protocol, as buffers to send one after the other.

    Small arguments are gathered into shared chunks; a large value (a page, or
    the parts of a page as a sequence) is sent from its own memory, uncopied.
    """
    parts: list[Any] = []
    chunk = bytearray()
    for _, commands in units:
        for arguments in commands:
            chunk += b"*%d\r\n" % len(arguments)
            for argument in arguments:
                if type(argument) is str:  # a command, key or field: the most common argument
                    argument = argument.encode()
                    chunk += b"$%d\r\n%b\r\n" % (len(argument), argument)
                    continue
                if isinstance(argument, str):
                    argument = argument.encode()
                elif isinstance(argument, int):
                    argument = b"%d" % argument
                if isinstance(argument, bytes) and len(argument) <= _SMALL_PART:  # keys, fields, numbers
                    chunk += b"$%d\r\n%b\r\n" % (len(argument), argument)
                    continue
                pieces = argument if isinstance(argument, (list, tuple)) else (argument,)
                chunk += b"$%d\r\n" % _byte_length(pieces)
                for piece in pieces:
                    if memoryview(piece).nbytes > _SMALL_PART:
                        parts.append(bytes(chunk))
                        chunk = bytearray()
                        parts.append(piece)
                    else:
                        chunk += piece
                chunk += b"\r\n"
    if chunk:
        parts.append(bytes(chunk))
    return parts


_MOST_BUFFERS_PER_SEND = 1024
"""Most buffers handed to one ``sendmsg`` (the usual IOV_MAX)."""


def _send(connection: Any, parts: list[Any]) -> None:
    """Send ``parts`` one after the other on ``connection``: by ``sendmsg`` over many at once on a plain socket.

    redis-py sends each buffer by its own ``sendall``; a write's request is
    several buffers per page (its header, then each contiguous part of it).
    A TLS socket, or one not yet connected, goes through redis-py.
    """
    sock = getattr(connection, "_sock", None)
    if type(sock) is not socket.socket:
        connection.send_packed_command(parts, check_health=False)
        return
    views = [memoryview(part).cast("B") for part in parts]
    index = 0
    try:
        while index < len(views):
            index = _advance(views, index, sock.sendmsg(views[index : index + _MOST_BUFFERS_PER_SEND]))
    except TimeoutError as error:
        connection.disconnect()
        raise redis.TimeoutError("Timeout writing to socket") from error
    except OSError as error:
        connection.disconnect()
        raise redis.ConnectionError(f"Error while writing to socket: {error}") from error


def _advance(views: list[memoryview], index: int, sent: int) -> int:
    """Return the index of the first buffer not sent whole after ``sent`` more bytes went from ``views[index:]``;
    the buffer sent in part is cut to what is left of it."""
    while sent and index < len(views):
        size = views[index].nbytes
        if sent < size:
            views[index] = views[index][sent:]
            return index
        sent -= size
        index += 1
    return index


def _round_trip(client: redis.Redis, units: Sequence[Unit], sinks: Optional[Sequence[Sink]] = None) -> list[Any]:
    """Send every command of ``units`` on one pooled connection, then read one reply per command.

    An error reply comes back as an exception instance in its place; a broken
    connection raises (and is dropped from the pool, so the next call gets a
    fresh one). With ``sinks`` (one per unit, each unit one command reading a
    value), each reply lands in its unit's sink: received straight into it
    where the connection allows (redis_replies.py), else copied from the
    parser's reply; a unit's reply is then what ``read_into_sinks`` says.
    """
    pool = client.connection_pool
    try:
        connection = pool.get_connection()  # checks a pooled connection first, reconnecting a stale one
    except redis.ConnectionError as error:
        raise ConnectFailed(str(error)) from error
    try:
        _send(connection, _pack(units))
        if sinks is not None and can_read_directly(connection):
            return read_into_sinks(connection, sinks)
        replies: list[Any] = []
        for _, commands in units:
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as error:
                    replies.append(error)
        if sinks is not None:
            return [sink_reply(reply, sink) for reply, sink in zip(replies, sinks)]
        return replies
    except BaseException:
        connection.disconnect()  # replies may still be in flight: never hand this connection out again
        raise
    finally:
        pool.release(connection)


def _part(items: Any, indices: list[int]) -> Any:
    """Return the items at ``indices`` (all of them as they are when that is every item; None stays None)."""
    if items is None or len(indices) == len(items):
        return items
    return [items[index] for index in indices]


class RedisNodes:
    """The Redis servers one backend talks to: routes commands by key and never raises.

    Standalone: one client. Cluster: the masters of a ``RedisCluster`` slot map;
    commands are grouped by the master owning their key's slot and sent as one
    pipeline per master, in parallel. A node that fails is skipped for
    ``reconnect_interval_seconds``; a redirection or a node failure refreshes
    the slot map (at most once per interval).
    """

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings
        """The checked extra config."""
        self._lock = threading.Lock()
        self._skip_until: dict[str, float] = {}
        self._skip_causes: dict[str, Optional[BaseException]] = {}
        self._cluster: Optional[RedisCluster] = None
        self._cluster_retry_at = 0.0
        self._cluster_error: Optional[BaseException] = None
        """Why the cluster client could not be built last time (its cause is logged)."""
        self._topology_stale = False
        self._executor: Optional[ThreadPoolExecutor] = None
        self._closed = False
        self._standalone: Optional[redis.Redis] = None
        if not settings.is_cluster:
            assert settings.url is not None  # RedisSettings holds a url or cluster nodes
            # No retry inside redis-py: this class retries a broken pooled connection once itself.
            self._standalone = redis.Redis.from_url(
                settings.url,
                socket_timeout=settings.socket_timeout,
                socket_connect_timeout=settings.socket_connect_timeout,
                retry=Retry(NoBackoff(), 0),
            )

    # ------------------------------------------------------------ clients
    def _cluster_client(self) -> Optional[RedisCluster]:
        """Return the cluster client, building it (or refreshing its slot map) when due; None if unreachable."""
        settings = self.settings
        with self._lock:
            now = time.monotonic()
            if self._cluster is None:
                if now < self._cluster_retry_at or self._closed:
                    return None
                try:
                    self._cluster = RedisCluster(
                        startup_nodes=[ClusterNode(host, port) for host, port in settings.cluster_nodes],
                        socket_timeout=settings.socket_timeout,
                        socket_connect_timeout=settings.socket_connect_timeout,
                        retry=Retry(NoBackoff(), 0),
                        require_full_coverage=False,
                        username=settings.username,
                        password=settings.password,
                    )
                    self._topology_stale = False
                except Exception as error:  # BE-5: no node reachable yet; try again after the interval
                    self._cluster_retry_at = now + settings.reconnect_interval_seconds
                    self._cluster_error = error
                    return None
            elif self._topology_stale and now >= self._cluster_retry_at:
                self._cluster_retry_at = now + settings.reconnect_interval_seconds
                try:
                    self._cluster.nodes_manager.initialize()
                    self._topology_stale = False
                except Exception:  # BE-5: keep the old map until a node answers
                    pass
            return self._cluster

    def _unreachable(self) -> NodeSkipped:
        """The error of a call made while no cluster client can be built: it names, and keeps, the last cause."""
        cause = self._cluster_error
        detail = "" if cause is None else f" ({type(cause).__name__}: {cause})"
        error = NodeSkipped(f"no node of the Redis cluster answered{detail}")
        error.__cause__ = cause
        return error

    def _mark_failed(self, node_name: str) -> None:
        with self._lock:
            self._skip_until[node_name] = time.monotonic() + self.settings.reconnect_interval_seconds
            self._topology_stale = True

    def _is_skipped(self, node_name: str) -> bool:
        with self._lock:
            until = self._skip_until.get(node_name)
            if until is None:
                return False
            if time.monotonic() >= until:
                del self._skip_until[node_name]
                return False
            return True

    def _groups(self, units: Sequence[Unit]) -> tuple[dict[str, tuple[Any, list[int]]], dict[int, Exception]]:
        """Return {node name: (client, unit indices)} and the units that could not be routed."""
        if self._standalone is not None:
            return {"standalone": (self._standalone, list(range(len(units))))}, {}
        cluster = self._cluster_client()
        if cluster is None:
            error = self._unreachable()
            return {}, {index: error for index in range(len(units))}
        groups: dict[str, tuple[Any, list[int]]] = {}
        unrouted: dict[int, Exception] = {}
        manager = cluster.nodes_manager
        for index, (routing_key, _) in enumerate(units):
            try:
                node = manager.get_node_from_slot(key_slot(routing_key.encode()))
                entry = groups.get(node.name)
                if entry is None:
                    client = node.redis_connection or cluster.get_redis_connection(node)
                    entry = groups[node.name] = (client, [])
                entry[1].append(index)
            except Exception as error:  # a slot no master covers: a miss for this unit
                unrouted[index] = error
                with self._lock:
                    self._topology_stale = True
        return groups, unrouted

    # ------------------------------------------------------------ execution
    def execute(self, units: Sequence[Unit], sinks: Optional[Sequence[Sink]] = None) -> list[Any]:
        """Run every unit; return, per unit, its list of replies or the exception that stopped it. Never raises.

        A reply that is an error (for example a redirection) appears in the
        unit's list as an exception instance. ``sinks``: one per unit, each
        unit one command reading a value that lands there (``_round_trip``).
        """
        if not units:
            return []
        results: list[Any] = [None] * len(units)
        try:
            groups, unrouted = self._groups(units)
        except Exception as error:  # BE-5
            return [error] * len(units)
        for index, problem in unrouted.items():
            results[index] = problem
        jobs = [(name, client, indices) for name, (client, indices) in groups.items()]
        if len(jobs) == 1:
            name, client, indices = jobs[0]
            outcomes = [self._run_on_node(name, client, _part(units, indices), _part(sinks, indices))]
        else:
            executor = self._pool()
            futures = [
                executor.submit(self._run_on_node, name, client, _part(units, indices), _part(sinks, indices))
                for name, client, indices in jobs
            ]
            outcomes = [future.result() for future in futures]
        for (_, _, indices), outcome in zip(jobs, outcomes):
            for index, unit_result in zip(indices, outcome):
                results[index] = unit_result
        return results

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="hicache-redis")
            return self._executor

    def _run_on_node(
        self, node_name: str, client: Any, units: Sequence[Unit], sinks: Optional[Sequence[Sink]] = None
    ) -> list[Any]:
        """Send ``units`` to one node as one pipeline; split the replies back per unit. Never raises."""
        if self._is_skipped(node_name):
            with self._lock:
                cause = self._skip_causes.get(node_name)
            detail = "" if cause is None else f" ({type(cause).__name__}: {cause})"
            skipped = NodeSkipped(f"Redis node {node_name} failed recently{detail}")
            skipped.__cause__ = cause  # the failure's own cause, not "skipped", is what is logged
            return [skipped] * len(units)
        replies: Any = None
        for attempt in range(2):
            try:
                replies = _round_trip(client, units, sinks)
                break
            except redis.ConnectionError as error:
                # A connection that broke after it was handed out (the server restarted or dropped it
                # mid-request) is retried once on a fresh one; a node that refuses connections is not.
                if attempt == 0 and not isinstance(error, (ConnectFailed, redis.AuthenticationError)):
                    continue
                self._skip_causes[node_name] = error  # what a call skipping the node names as its cause
                self._mark_failed(node_name)
                return [error] * len(units)
            except Exception as error:  # timeouts and anything else: this node's part fails (BE-5)
                self._skip_causes[node_name] = error  # what a call skipping the node names as its cause
                self._mark_failed(node_name)
                return [error] * len(units)
        out: list[Any] = []
        position = 0
        redirected = False
        for _, commands in units:
            unit_replies = replies[position : position + len(commands)]
            position += len(commands)
            redirected = redirected or any(isinstance(reply, _REDIRECTIONS) for reply in unit_replies)
            out.append(unit_replies)
        if redirected:
            with self._lock:
                self._topology_stale = True
        return out

    # ------------------------------------------------------------ housekeeping
    def masters(self) -> list[tuple[str, Any]]:
        """Return (name, client) of every master; raises when the cluster cannot be reached."""
        if self._standalone is not None:
            return [("standalone", self._standalone)]
        cluster = self._cluster_client()
        if cluster is None:
            raise self._unreachable()
        return [
            (node.name, node.redis_connection or cluster.get_redis_connection(node))
            for node in cluster.nodes_manager.get_nodes_by_server_type("primary")
        ]

    def delete_matching(self, pattern: str) -> int:
        """Delete every key matching the glob ``pattern`` on every master (SCAN, then UNLINK); return how many.

        Masters that fail are skipped and reported by a ConnectionError at the
        end, after the others were cleared.
        """
        deleted = 0
        failures = []
        for name, client in self.masters():
            try:
                batch: list[bytes] = []
                for key in client.scan_iter(match=pattern, count=_SCAN_COUNT):
                    batch.append(key)
                    if len(batch) >= _UNLINK_BATCH:
                        deleted += self._unlink(client, batch)
                        batch = []
                deleted += self._unlink(client, batch)
            except Exception as error:  # one master down must not keep the others from clearing
                failures.append(f"{name}: {error}")
        if failures:
            raise redis.ConnectionError("clear could not reach " + "; ".join(failures))
        return deleted

    @staticmethod
    def _unlink(client: Any, keys: list[bytes]) -> int:
        if not keys:
            return 0
        pipeline = client.pipeline(transaction=False)
        for key in keys:  # one key per command: in a cluster, keys of one node span slots
            pipeline.execute_command("UNLINK", key)
        return sum(1 for reply in pipeline.execute() if reply)

    def close(self) -> None:
        """Close every connection; later calls fail without raising."""
        with self._lock:
            self._closed = True
            cluster, self._cluster = self._cluster, None
            executor, self._executor = self._executor, None
        closers: list[Optional[Callable[[], None]]] = [
            None if self._standalone is None else self._standalone.close,
            None if cluster is None else cluster.close,
            None if executor is None else lambda: executor.shutdown(wait=False),
        ]
        for closing in closers:
            if closing is None:
                continue
            try:
                closing()
            except Exception:  # closing is best effort
                pass
