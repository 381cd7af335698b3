"""The networked reference backend: pages in Redis, standalone or Redis Cluster, shared between machines.

``RedisBackend`` serves both deployments; its extra config (``redis_url`` for one server,
``redis_cluster_nodes`` for a cluster, ``key_prefix``, ``ttl_seconds``, the socket timeouts and
``reconnect_interval_seconds``) is validated in redis_settings.py. Every generation of the interface comes
from ``PageStoreBackend`` (base.py); this module supplies its object primitives over Redis: all pools of one
page in one Redis hash, one pipeline per node and batch, pages sent from and received into the host pool's
byte ranges, and failures turned into misses and failed writes (BE-5). The servers, routing and requests are
in redis_nodes.py, the reply reader in redis_replies.py.

docs/distributed.md holds the layout, the round trips, the failure table and the extra config's reference.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence
from urllib.parse import unquote, urlparse

from hicache_contracts.models import pool_value
from hicache_reference.backends.base import PageStoreBackend
from hicache_reference.backends.namespace import ObjectName, plain_keys
from hicache_reference.backends.redis_errors import RedisErrors
from hicache_reference.backends.redis_nodes import RedisNodes, Unit, _byte_length
from hicache_reference.backends.redis_settings import DEFAULT_REDIS_URL, RedisSettings
from hicache_spec import KV

__all__ = ["DEFAULT_REDIS_URL", "RedisBackend", "RedisNodes", "RedisSettings"]


def _is_exception(value: Any) -> bool:
    return isinstance(value, BaseException)


class RedisBackend(PageStoreBackend):
    """Pages in Redis (standalone or cluster), one hash per page holding every pool. See the module docstring.

    Built the SGLang way: ``RedisBackend(storage_config, extra_config)``; the
    constructor checks the extra config (ValueError naming the key) and does
    not contact the servers, so a server that is down at start-up only makes
    the first calls miss.
    """

    hicache_levels = (*PageStoreBackend.hicache_levels, "durability")
    """The capability levels the backend claims."""
    reads_into_ranges = True
    """Replies are copied straight into the host page ranges where the pool lists them (one copy per page)."""
    writes_from_ranges = True
    """Pages are sent from the host pool's own memory, as the list of their byte ranges (no copy)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self.settings = RedisSettings.from_extra_config(self.extra_config)
        """The checked Redis part of the extra config."""
        self.nodes = RedisNodes(self.settings)
        """The servers, with routing and failure handling."""
        settings = self.settings
        where = settings.url or "the Redis cluster at " + ",".join(
            f"{host}:{port}" for host, port in settings.cluster_nodes
        )
        self.errors = RedisErrors(where, secrets=(settings.password, _url_password(settings.url)))
        """Every failure by cause (``errors.counts``, ``errors.summary()``); each cause's first is logged once."""
        self._ttl_milliseconds = (
            None if self.settings.ttl_seconds is None else max(1, round(self.settings.ttl_seconds * 1000))
        )

    # ------------------------------------------------------------ layout
    def storage_location(self, key: str, pool: Any = KV) -> tuple[str, str]:
        """Return the (Redis key, hash field) that hold page ``key`` of ``pool`` for this instance."""
        return self._locate(ObjectName(self.namespace, pool_value(pool), key))

    def _name(self, key: str, pool: str = KV) -> ObjectName:
        return ObjectName(self.namespace, pool, key)  # the primitives locate it (``_locate``)

    def _names(self, keys: Sequence[str], pool: str) -> list[ObjectName]:
        namespace = self.namespace
        return [ObjectName(namespace, pool, key) for key in keys]

    def _locate(self, name: Any) -> tuple[str, str]:
        """Return the (Redis key, hash field) of an ``ObjectName`` (or its ``to_str()``): see the module docstring."""
        if not isinstance(name, ObjectName):
            name = ObjectName.parse(name)
        return f"{self.settings.key_prefix}{name.namespace}/{name.escaped_key}", name.escaped_pool

    def namespace_pattern(self, namespace: Optional[str] = None) -> str:
        """Return the SCAN pattern that matches every key of ``namespace`` (this instance's when None) and no other
        (NS-8)."""
        # The namespace is escaped to [A-Za-z0-9._%-] and '/', so it holds no glob character;
        # the prefix was checked. The trailing '/' keeps sibling namespaces out.
        return f"{self.settings.key_prefix}{self.namespace if namespace is None else namespace}/*"

    # ------------------------------------------------------------ primitives (batch forms: one pipeline per node)
    def _units(self, command: str, names: Sequence[Any]) -> list[Unit]:
        """Return one unit per name: ``command`` with the name's Redis key and hash field (a read or a size)."""
        first = names[0] if names else None
        if type(first) is ObjectName:  # a batch of plain keys of one namespace and pool: located at once
            keys = [name.key for name in names]
            namespace, pool = first.namespace, first.pool
            if plain_keys("".join(keys)) and all(
                type(name) is ObjectName and name.namespace == namespace and name.pool == pool for name in names
            ):
                head, field = self._locate(ObjectName(namespace, pool, ""))
                return [(redis_key, ((command, redis_key, field),)) for redis_key in [head + key for key in keys]]
        units: list[Unit] = []
        for name in names:
            redis_key, field = self._locate(name)
            units.append((redis_key, ((command, redis_key, field),)))
        return units

    def _object_sizes(self, names: Sequence[ObjectName]) -> list[Optional[int]]:
        units = self._units("HSTRLEN", names)
        sizes: list[Optional[int]] = []
        for outcome in self._execute(units):
            reply = None if _is_exception(outcome) else outcome[0]
            sizes.append(reply if isinstance(reply, int) and reply > 0 else None)
        return sizes

    def _read_objects_into(self, names: Sequence[ObjectName], buffers: Sequence[memoryview]) -> list[bool]:
        return self._read_objects_into_ranges(names, [[buffer] for buffer in buffers])

    def _read_objects_into_ranges(
        self, names: Sequence[ObjectName], page_views: Sequence[Sequence[memoryview]]
    ) -> list[bool]:
        """Read each object into its views (BE-13: only one of exactly their size; nothing else is written)."""
        units = self._units("HGET", names)
        return [not _is_exception(outcome) and outcome[0] is True for outcome in self._execute(units, page_views)]

    def _write_objects(
        self, names: Sequence[ObjectName], datas: Sequence[Optional[memoryview]], groups: Sequence[Any]
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

    def _object_size(self, name: ObjectName) -> Optional[int]:
        return self._object_sizes([name])[0]

    def _read_object_into(self, name: ObjectName, buffer: memoryview) -> bool:
        return self._read_objects_into([name], [buffer])[0]

    def _read_object_into_ranges(self, name: ObjectName, views: Sequence[memoryview]) -> bool:
        return self._read_objects_into_ranges([name], [list(views)])[0]

    def _write_object(self, name: ObjectName, data: memoryview, group: Any) -> bool:
        return self._write_objects([name], [data], [group])[0]

    def _clear_namespace(self, namespace: str) -> None:
        try:
            self.nodes.delete_matching(self.namespace_pattern(namespace))  # NS-8: SCAN + UNLINK, never FLUSHDB
        except Exception as error:  # counted by the caller (BE-5); its cause is logged here
            self.errors.record(error)
            raise

    def _execute(self, units: Sequence[Unit], sinks: Optional[Sequence[Sequence[memoryview]]] = None) -> list[Any]:
        """Run ``units``; count every unit that failed, whether the node failed or the server answered an error."""
        outcomes = self.nodes.execute(units, sinks)
        failed = 0
        first_error = RedisErrors.first_error
        for outcome in outcomes:
            error = first_error(outcome)
            if error is not None:  # BE-5: a miss or a failed write, counted, its cause logged once
                failed += 1
                self.errors.record(error)
        if failed:
            self._counters.add(storage_errors=failed)
        return outcomes

    # ------------------------------------------------------------ housekeeping
    def storage_error_messages(self) -> list[str]:
        """The message logged for each cause of failure seen so far (passwords redacted), for a report to show."""
        return list(self.errors.messages.values())

    def close(self) -> None:
        """Stop serving and close every connection; later calls miss or fail without raising."""
        super().close()
        self.nodes.close()


def _url_password(url: Optional[str]) -> Optional[str]:
    """The password in a Redis URL, if any (never logged)."""
    if not url:
        return None
    try:
        password = urlparse(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def _failed(reply: Any) -> bool:
    """Whether one reply of a write unit says it did not happen (an error, or an aborted transaction)."""
    if reply is None or _is_exception(reply):
        return True
    if isinstance(reply, list):  # EXEC: the replies of the transaction's commands
        return any(_is_exception(item) for item in reply)
    return False
