"""The Redis backend's extra config, checked once: ``RedisSettings`` (see redis_backend.py for the keys).

Every bad value is a ValueError naming the key and the rule; unknown keys are
ignored (BE-1). See docs/distributed.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, overload

import hicache_reference.backends._redis_client  # noqa: F401  (without the redis extra: a clear error)
import redis

from hicache_contracts.errors import FieldErrors

__all__ = ["DEFAULT_REDIS_URL", "RedisSettings"]

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
"""The server used when the extra config names none."""

_CLASS = "RedisBackend"
_UNSAFE_PREFIX = re.compile(r"[{}*?\[\]\\\s]")
"""Characters a key prefix must not hold: braces would become a cluster hash tag, the rest are glob patterns."""
_NAMESPACE_CHARACTER = re.compile(r"[A-Za-z0-9._%/-]")
"""Characters an escaped namespace may hold; a key prefix must not end with one, or two could meet."""


_ERRORS = FieldErrors(f"{_CLASS}.extra_config")
"""The errors of the backend's extra config, each naming ``RedisBackend.extra_config.<field>``."""


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
        raise _ERRORS.bad(field, rule, value)
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
        raise _ERRORS.bad(field, "must be a 'host:port' string", text)
    host, separator, port = text.strip().rpartition(":")
    if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _ERRORS.bad(field, "must be a 'host:port' string", text)
    return host, int(port)


def _check_tls(extra: Mapping, url: Optional[str], cluster: bool) -> None:
    """Refuse TLS keys the backend would otherwise ignore: never a plaintext connection the user asked to encrypt.

    Standalone, TLS is chosen by a ``rediss://`` URL (its options in the URL's
    query); a Redis Cluster is reached without TLS by this backend, so any TLS
    key with it is refused.
    """
    for field in sorted(key for key in extra if isinstance(key, str) and (key == "ssl" or key.startswith("ssl_"))):
        value = extra[field]
        if value is None or value is False:
            continue
        if "password" in field or "key" in field:
            value = "***"  # never shown
        if cluster:
            raise _ERRORS.bad(
                field,
                "TLS to a Redis Cluster is not supported by this backend (it would connect without TLS); reach the "
                "cluster over a trusted network or a TLS tunnel, and remove the key",
                value,
            )
        if field == "ssl" and value is True and isinstance(url, str) and url.startswith("rediss://"):
            continue  # what the URL says already
        raise _ERRORS.bad(
            field,
            "TLS is chosen by a rediss:// redis_url, its options given in the URL's query "
            "(rediss://host:port/0?ssl_ca_certs=/path/ca.pem), not by this key",
            value,
        )


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
    def from_extra_config(cls, extra: Mapping) -> RedisSettings:
        """Read and check the Redis keys of ``extra``; unknown keys are ignored (BE-1).

        Raises ValueError naming the key and the rule for a bad value.
        """
        url = extra.get("redis_url")
        nodes_value = extra.get("redis_cluster_nodes")
        if url is not None and nodes_value is not None:
            raise _ERRORS.bad(
                "redis_cluster_nodes", "give either redis_url or redis_cluster_nodes, not both", nodes_value
            )
        nodes: tuple[tuple[str, int], ...] = ()
        if nodes_value is not None:
            items = nodes_value.split(",") if isinstance(nodes_value, str) else nodes_value
            if not isinstance(items, (list, tuple)) or not items:
                raise _ERRORS.bad("redis_cluster_nodes", "must be a non-empty list of 'host:port' strings", nodes_value)
            nodes = tuple(_parse_node(item, index) for index, item in enumerate(items))
        elif url is None:
            url = DEFAULT_REDIS_URL
        if url is not None and not _is_redis_url(url):
            raise _ERRORS.bad("redis_url", "must be a URL such as 'redis://host:port/0'", url)
        prefix = extra.get("key_prefix", "hicache:")
        if not isinstance(prefix, str) or _UNSAFE_PREFIX.search(prefix):
            raise _ERRORS.bad("key_prefix", "must be a str without braces, glob characters or spaces", prefix)
        if prefix and _NAMESPACE_CHARACTER.fullmatch(prefix[-1]):
            # "hc" + namespace "1m/..." and "hc1" + namespace "m/..." would be the same keys (NS-8).
            raise _ERRORS.bad(
                "key_prefix", "must be empty or end with a character no namespace holds, such as ':'", prefix
            )
        _check_tls(extra, url, bool(nodes))
        credentials = {}
        for field in ("redis_username", "redis_password"):
            value = extra.get(field)
            if value is not None and not isinstance(value, str):
                raise _ERRORS.bad(field, "must be a str or null", value)
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
