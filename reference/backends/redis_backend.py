"""The networked reference backend: pages in Redis, standalone or Redis Cluster, shared between machines.

One ``RedisBackend`` class serves both deployments; the extra config names the
servers (``redis_url`` for one server, ``redis_cluster_nodes`` for a cluster).
Every generation of the interface comes from ``PageStoreBackend`` (base.py);
this module supplies its object primitives over Redis.

Layout (see docs/distributed.md): the base names every object
``storage_name(namespace_for(config), key, pool)``, i.e.
``<namespace>/<pool>/<key>``. Here all pools of one page live in **one Redis
hash**::

    key    <key_prefix><namespace>/<key>      e.g. hicache:llama/pp0of1/cp0of1/tp0of2/3fa9...
    field  <pool>                             kv, indexer, swa, ...
    value  the raw bytes of one flat page of that pool

so a KV page and its KV-derived sidecars sit in one key: they land on one
cluster slot, expire together (one TTL per hash) and are evicted or deleted
together (BE-22); each field is written by one ``HSET`` and is never visible
in part (BE-7); the base writes sidecars before KV, so a reader that finds KV
also finds them, or reports the page missing. The key holds no braces, so a
cluster spreads pages over its slots by the CRC16 of the whole key.

Round trips: every batch call is one pipeline per Redis node (one for
standalone; for a cluster, one per master owning a slot of the batch, sent in
parallel); a read of a whole 128-page slice is one call. Requests are packed
here (``_pack``) so that a page goes out straight from the host pool, each
contiguous part of it one buffer of the request, never copied (the base hands
a write the page's host byte ranges, computed by arithmetic for a
``HostPagePool``: ``writes_from_ranges``); replies are
read on redis-py's pooled connections by redis-py's reply parser — hiredis's C
parser when it is installed (a dependency of the project; 1.4-3.3x the
throughput of the pure-Python one, benchmarks/README.md) — and a page that
arrived whole is copied once, straight into its host byte ranges
(``reads_into_ranges``; the base's staging buffer otherwise).

Failures never leave a call (BE-5): a node that does not answer, times out,
or redirects (MOVED/ASK during resharding) turns its part of the batch into
misses / failed writes, the cluster slot map is refreshed, and a node that
failed is skipped for ``reconnect_interval_seconds`` before it is tried again.
A pooled connection broken by a server restart is retried once on a fresh
connection, so the same instance serves again as soon as the server is back.

Extra config (JSON), all optional:

    redis_url                    "redis://[user:password@]host:port/db"   (default redis://127.0.0.1:6379/0)
    redis_cluster_nodes          ["host:port", ...] or "host:port,host:port"  (cluster mode; excludes redis_url)
    redis_username, redis_password   credentials for cluster nodes (standalone: put them in the URL)
    key_prefix                   "hicache:"        first part of every key; no braces, glob characters or spaces;
                                                   empty or ending with a character no namespace holds (":")
    ttl_seconds                  null              expire a page this long after its last write
    socket_timeout               5.0               seconds to wait for a reply
    socket_connect_timeout       2.0               seconds to wait for a connection
    reconnect_interval_seconds   1.0               how long a failed node is skipped before it is tried again
"""

from __future__ import annotations

import math
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Optional, Sequence, overload

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, TryAgainError
from redis.retry import Retry

from hicache_contracts.errors import bad_value
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.base import PageStoreBackend, pool_key, tensor_bytes
from hicache_reference.backends.namespace import storage_name
from hicache_spec import KV

__all__ = ["DEFAULT_REDIS_URL", "RedisBackend", "RedisNodes", "RedisSettings"]

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
"""The server used when the extra config names none."""

_CLASS = "RedisBackend"
_UNSAFE_PREFIX = re.compile(r"[{}*?\[\]\\\s]")
"""Characters a key prefix must not hold: braces would become a cluster hash tag, the rest are glob patterns."""
_NAMESPACE_CHARACTER = re.compile(r"[A-Za-z0-9._%/-]")
"""Characters an escaped namespace may hold; a key prefix must not end with one, or two could meet."""
_SCAN_COUNT = 1000
"""Keys asked per SCAN step in ``clear()``."""
_UNLINK_BATCH = 512
"""Keys deleted per pipeline in ``clear()``."""


def _config_error(field: str, rule: str, value: Any) -> ValueError:
    return bad_value(f"{_CLASS}.extra_config.{field}", rule, value)


@overload
def _number(extra: Mapping, field: str, default: float, *, minimum: float, allow_none: Literal[False]) -> float: ...
@overload
def _number(
    extra: Mapping, field: str, default: Optional[float], *, minimum: float, allow_none: bool
) -> Optional[float]: ...
def _number(
    extra: Mapping, field: str, default: Optional[float], *, minimum: float, allow_none: bool
) -> Optional[float]:
    value = extra.get(field, default)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        bound = "> 0" if minimum > 0 else ">= 0"
        rule = f"must be a number {bound}" + (" or null" if allow_none else "")
        raise _config_error(field, rule, value)
    return float(value)


def _is_redis_url(url: Any) -> bool:
    """Whether redis-py can build a client from ``url`` (scheme, port and database checked, nothing contacted)."""
    if not isinstance(url, str) or "://" not in url:
        return False
    try:
        redis.connection.parse_url(url)
    except ValueError:
        return False
    return True


def _parse_node(text: Any, index: int) -> tuple[str, int]:
    field = f"redis_cluster_nodes[{index}]"
    if not isinstance(text, str):
        raise _config_error(field, "must be a 'host:port' string", text)
    host, separator, port = text.strip().rpartition(":")
    if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _config_error(field, "must be a 'host:port' string", text)
    return host, int(port)


@dataclass(frozen=True)
class RedisSettings:
    """The extra config of a ``RedisBackend``, checked once."""

    url: Optional[str]
    """The standalone server's URL; None in cluster mode."""
    cluster_nodes: tuple[tuple[str, int], ...]
    """Seed nodes of the cluster; empty in standalone mode."""
    key_prefix: str
    """The first part of every key."""
    ttl_seconds: Optional[float]
    """Pages expire this long after their last write; None keeps them until evicted or cleared."""
    socket_timeout: float
    """Seconds to wait for a reply."""
    socket_connect_timeout: float
    """Seconds to wait for a connection."""
    reconnect_interval_seconds: float
    """Seconds a node that failed is skipped before it is tried again."""
    username: Optional[str] = None
    """Cluster username (standalone: in the URL)."""
    password: Optional[str] = None
    """Cluster password (standalone: in the URL)."""

    @property
    def is_cluster(self) -> bool:
        """Whether the backend talks to a Redis Cluster."""
        return bool(self.cluster_nodes)

    @classmethod
    def from_extra_config(cls, extra: Mapping) -> "RedisSettings":
        """Read and check the Redis keys of ``extra``; unknown keys are ignored (BE-1).

        Raises ValueError naming the key and the rule for a bad value.
        """
        url = extra.get("redis_url")
        nodes_value = extra.get("redis_cluster_nodes")
        if url is not None and nodes_value is not None:
            raise _config_error(
                "redis_cluster_nodes", "give either redis_url or redis_cluster_nodes, not both", nodes_value
            )
        nodes: tuple[tuple[str, int], ...] = ()
        if nodes_value is not None:
            items = nodes_value.split(",") if isinstance(nodes_value, str) else nodes_value
            if not isinstance(items, (list, tuple)) or not items:
                raise _config_error(
                    "redis_cluster_nodes", "must be a non-empty list of 'host:port' strings", nodes_value
                )
            nodes = tuple(_parse_node(item, index) for index, item in enumerate(items))
        elif url is None:
            url = DEFAULT_REDIS_URL
        if url is not None and not _is_redis_url(url):
            raise _config_error("redis_url", "must be a URL such as 'redis://host:port/0'", url)
        prefix = extra.get("key_prefix", "hicache:")
        if not isinstance(prefix, str) or _UNSAFE_PREFIX.search(prefix):
            raise _config_error("key_prefix", "must be a str without braces, glob characters or spaces", prefix)
        if prefix and _NAMESPACE_CHARACTER.fullmatch(prefix[-1]):
            # "hc" + namespace "1m/..." and "hc1" + namespace "m/..." would be the same keys (NS-8).
            raise _config_error(
                "key_prefix", "must be empty or end with a character no namespace holds, such as ':'", prefix
            )
        credentials = {}
        for field in ("redis_username", "redis_password"):
            value = extra.get(field)
            if value is not None and not isinstance(value, str):
                raise _config_error(field, "must be a str or null", value)
            credentials[field] = value
        return cls(
            url=None if nodes else url,
            cluster_nodes=nodes,
            key_prefix=prefix,
            ttl_seconds=_number(extra, "ttl_seconds", None, minimum=0.001, allow_none=True),
            socket_timeout=_number(extra, "socket_timeout", 5.0, minimum=0.001, allow_none=False),
            socket_connect_timeout=_number(extra, "socket_connect_timeout", 2.0, minimum=0.001, allow_none=False),
            reconnect_interval_seconds=_number(extra, "reconnect_interval_seconds", 1.0, minimum=0.0, allow_none=False),
            username=credentials["redis_username"],
            password=credentials["redis_password"],
        )


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


def _round_trip(client: redis.Redis, units: Sequence[Unit]) -> list[Any]:
    """Send every command of ``units`` on one pooled connection, then read one reply per command.

    An error reply comes back as an exception instance in its place; a broken
    connection raises (and is dropped from the pool, so the next call gets a
    fresh one).
    """
    pool = client.connection_pool
    try:
        connection = pool.get_connection()  # checks a pooled connection first, reconnecting a stale one
    except redis.ConnectionError as error:
        raise ConnectFailed(str(error)) from error
    try:
        connection.send_packed_command(_pack(units), check_health=False)
        replies: list[Any] = []
        for _, commands in units:
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as error:
                    replies.append(error)
        return replies
    except BaseException:
        connection.disconnect()  # replies may still be in flight: never hand this connection out again
        raise
    finally:
        pool.release(connection)


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
        self._cluster: Optional[RedisCluster] = None
        self._cluster_retry_at = 0.0
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
                except Exception:  # BE-5: no node reachable yet; try again after the interval
                    self._cluster_retry_at = now + settings.reconnect_interval_seconds
                    return None
            elif self._topology_stale and now >= self._cluster_retry_at:
                self._cluster_retry_at = now + settings.reconnect_interval_seconds
                try:
                    self._cluster.nodes_manager.initialize()
                    self._topology_stale = False
                except Exception:  # BE-5: keep the old map until a node answers
                    pass
            return self._cluster

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
            error = NodeSkipped("no node of the Redis cluster answered")
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
    def execute(self, units: Sequence[Unit]) -> list[Any]:
        """Run every unit; return, per unit, its list of replies or the exception that stopped it. Never raises.

        A reply that is an error (for example a redirection) appears in the
        unit's list as an exception instance.
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
            outcomes = [self._run_on_node(jobs[0][0], jobs[0][1], [units[i] for i in jobs[0][2]])]
        else:
            executor = self._pool()
            futures = [
                executor.submit(self._run_on_node, name, client, [units[i] for i in indices])
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

    def _run_on_node(self, node_name: str, client: Any, units: Sequence[Unit]) -> list[Any]:
        """Send ``units`` to one node as one pipeline; split the replies back per unit. Never raises."""
        if self._is_skipped(node_name):
            return [NodeSkipped(f"Redis node {node_name} failed recently")] * len(units)
        replies: Any = None
        for attempt in range(2):
            try:
                replies = _round_trip(client, units)
                break
            except redis.ConnectionError as error:
                # A connection that broke after it was handed out (the server restarted or dropped it
                # mid-request) is retried once on a fresh one; a node that refuses connections is not.
                if attempt == 0 and not isinstance(error, (ConnectFailed, redis.AuthenticationError)):
                    continue
                self._mark_failed(node_name)
                return [error] * len(units)
            except Exception as error:  # timeouts and anything else: this node's part fails (BE-5)
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
            raise NodeSkipped("no node of the Redis cluster answered")
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


def _is_exception(value: Any) -> bool:
    return isinstance(value, BaseException)


class RedisBackend(PageStoreBackend):
    """Pages in Redis (standalone or cluster), one hash per page holding every pool. See the module docstring.

    Built the SGLang way: ``RedisBackend(storage_config, extra_config)``; the
    constructor checks the extra config (ValueError naming the key) and does
    not contact the servers, so a server that is down at start-up only makes
    the first calls miss.
    """

    hicache_levels = ("core", "legacy", "v1", "v2", "prefix", "namespacing", "concurrency", "durability", "robustness")
    """The capability levels the backend claims."""
    reads_into_ranges = True
    writes_from_ranges = True
    """Replies are copied straight into the host page ranges where the pool lists them (one copy per page)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self.settings = RedisSettings.from_extra_config(self.extra_config)
        """The checked Redis part of the extra config."""
        self.nodes = RedisNodes(self.settings)
        """The servers, with routing and failure handling."""
        self._ttl_milliseconds = (
            None if self.settings.ttl_seconds is None else max(1, round(self.settings.ttl_seconds * 1000))
        )

    # ------------------------------------------------------------ layout
    def storage_location(self, key: str, pool: Any = KV) -> tuple[str, str]:
        """Return the (Redis key, hash field) that hold page ``key`` of ``pool`` for this instance."""
        return self._locate(storage_name(self.namespace, key, pool_key(pool)))

    def _locate(self, name: str) -> tuple[str, str]:
        """Map the object name ``<namespace>/<pool>/<key>`` to (``<prefix><namespace>/<key>``, ``<pool>``)."""
        head, key = name.rsplit("/", 1)
        namespace, pool = head.rsplit("/", 1)
        return f"{self.settings.key_prefix}{namespace}/{key}", pool

    def namespace_pattern(self) -> str:
        """Return the SCAN pattern that matches every key of this namespace and no other (NS-8)."""
        # The namespace is escaped to [A-Za-z0-9._%-] and '/', so it holds no glob character;
        # the prefix was checked. The trailing '/' keeps sibling namespaces out.
        return f"{self.settings.key_prefix}{self.namespace}/*"

    # ------------------------------------------------------------ primitives (batch forms: one pipeline per node)
    def _object_sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        units = []
        for name in names:
            redis_key, field = self._locate(name)
            units.append((redis_key, (("HSTRLEN", redis_key, field),)))
        sizes: list[Optional[int]] = []
        for outcome in self._execute(units):
            reply = None if _is_exception(outcome) else outcome[0]
            sizes.append(reply if isinstance(reply, int) and reply > 0 else None)
        return sizes

    def _read_objects_into(self, names: Sequence[str], buffers: Sequence[memoryview]) -> list[bool]:
        arrived = []
        for data, buffer in zip(self._fetch(names), buffers):
            if isinstance(data, bytes) and len(data) == len(buffer):  # BE-13: short or long is a miss
                buffer[:] = data
                arrived.append(True)
            else:
                arrived.append(False)
        return arrived

    def _read_objects_into_ranges(self, names: Sequence[str], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        arrived = []
        for data, views in zip(self._fetch(names), page_views):
            size = sum(view.nbytes for view in views)
            if not isinstance(data, bytes) or len(data) != size:  # BE-13: write nothing unless it is a whole page
                arrived.append(False)
                continue
            source = memoryview(data)
            offset = 0
            for view in views:
                view[:] = source[offset : offset + view.nbytes]
                offset += view.nbytes
            arrived.append(True)
        return arrived

    def _fetch(self, names: Sequence[str]) -> list[Optional[bytes]]:
        """Return the stored bytes of each object, or None when missing or unreachable: one pipeline per node."""
        units = []
        for name in names:
            redis_key, field = self._locate(name)
            units.append((redis_key, (("HGET", redis_key, field),)))
        return [None if _is_exception(outcome) else outcome[0] for outcome in self._execute(units)]

    def _write_objects(
        self, names: Sequence[str], datas: Sequence[Optional[memoryview]], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        # ``groups`` needs no work here: every pool of a page is a field of the page's one hash (BE-22).
        units = []
        positions = []
        for position, (name, data) in enumerate(zip(names, datas)):
            if data is None or _byte_length(data) == 0:
                continue
            redis_key, field = self._locate(name)
            if self._ttl_milliseconds is None:
                commands: tuple = (("HSET", redis_key, field, data),)
            else:  # the field and the page's new deadline in one transaction on the key's node
                commands = (
                    ("MULTI",),
                    ("HSET", redis_key, field, data),
                    ("PEXPIRE", redis_key, self._ttl_milliseconds),
                    ("EXEC",),
                )
            units.append((redis_key, commands))
            positions.append(position)
        written = [False] * len(names)
        for position, outcome in zip(positions, self._execute(units)):
            written[position] = not _is_exception(outcome) and not any(_failed(reply) for reply in outcome)
        return written

    def _page_bytes(self, pool: Any, page_format: Any, slot: int) -> Any:
        """Return the host page at ``slot`` as the list of its contiguous parts, in flat-page order, uncopied.

        The parts are views of the host pool, sent straight from it (the host
        slots stay allocated until the backup's write returns); other pools
        get the shared copying path.
        """
        if not isinstance(pool, HostPagePool):
            return super()._page_bytes(pool, page_format, slot)
        parts: list[memoryview] = []
        _contiguous_parts(pool.get_data_page(slot, flat=False), parts)
        if sum(part.nbytes for part in parts) != page_format.byte_count:
            return None
        return parts

    def _object_size(self, name: str) -> Optional[int]:
        return self._object_sizes([name])[0]

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        return self._read_objects_into([name], [buffer])[0]

    def _read_object_into_ranges(self, name: str, views: Sequence[memoryview]) -> bool:
        return self._read_objects_into_ranges([name], [list(views)])[0]

    def _write_object(self, name: str, data: memoryview, group: Optional[str]) -> bool:
        return self._write_objects([name], [data], [group])[0]

    def _clear_namespace(self) -> None:
        self.nodes.delete_matching(self.namespace_pattern())  # NS-8: SCAN + UNLINK, never FLUSHDB

    def _execute(self, units: Sequence[Unit]) -> list[Any]:
        outcomes = self.nodes.execute(units)
        failed = sum(1 for outcome in outcomes if _is_exception(outcome))
        if failed:
            self._counters.add(storage_errors=failed)
        return outcomes

    # ------------------------------------------------------------ housekeeping
    def close(self) -> None:
        """Stop serving and close every connection; later calls miss or fail without raising."""
        super().close()
        self.nodes.close()


def _contiguous_parts(tensor: Any, parts: list) -> None:
    """Append the bytes of ``tensor`` to ``parts`` as views of its largest contiguous blocks, in index order."""
    if tensor.is_contiguous():
        parts.append(tensor_bytes(tensor))
        return
    for index in range(tensor.shape[0]):
        _contiguous_parts(tensor[index], parts)


def _failed(reply: Any) -> bool:
    """Whether one reply of a write unit says it did not happen (an error, or an aborted transaction)."""
    if reply is None or _is_exception(reply):
        return True
    if isinstance(reply, list):  # EXEC: the replies of the transaction's commands
        return any(_is_exception(item) for item in reply)
    return False
