"""What went wrong with Redis, in words a user can act on: each failure's cause, counted and logged once.

Every failure of a Redis backend call (a connection or authentication
failure, an error reply such as ``WRONGPASS``, ``NOPERM``, ``OOM``,
``WRONGTYPE``, ``READONLY`` or ``MOVED``) is a miss or a failed write (BE-5)
and counts in ``storage_errors``; ``RedisErrors`` also sorts it into a cause
(``CAUSES``) and logs the first failure of each cause once, at WARNING, on
the ``hicache_reference.backends.redis`` logger, with a hint at the setting
to look at. Nothing secret is ever logged: the configured passwords and
user names, and the password of any ``scheme://user:password@`` URL in a
message, are replaced by ``***``. See docs/distributed.md ("When Redis
fails").
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Iterable, Optional

import hicache_reference.backends._redis_client  # noqa: F401  (without the redis extra: a clear error)
import redis
from redis import exceptions

__all__ = ["CAUSES", "RedisErrors", "cause_of", "redact"]

_log = logging.getLogger("hicache_reference.backends.redis")

CAUSES: dict[str, str] = {
    "authentication": "the server refused the credentials: check the user and password in redis_url "
    "(or redis_username and redis_password for a cluster)",
    "permission": "the user lacks a right the backend needs: HGET, HSET, HSTRLEN, PEXPIRE, MULTI, EXEC, SCAN and "
    "UNLINK on the keys under key_prefix",
    "memory": "the server is out of memory (maxmemory reached and its policy evicts nothing): writes are refused",
    "wrong type": "a key under key_prefix holds another type than a hash: does another application use the prefix?",
    "read-only replica": "the server is a read-only replica: point redis_url at its master",
    "cluster redirection": "the server redirects to another node (MOVED/ASK) or the cluster is changing: for a "
    "Redis Cluster use redis_cluster_nodes, not redis_url",
    "connection": "the server cannot be reached or dropped the connection",
    "timeout": "the server did not answer within socket_timeout (or socket_connect_timeout)",
    "server error": "the server answered with an error",
}
"""Each cause a failure is sorted into, with the hint logged for it."""

_CODES: tuple[tuple[str, str], ...] = (
    ("WRONGPASS", "authentication"),
    ("NOAUTH", "authentication"),
    ("NOPERM", "permission"),
    ("OOM", "memory"),
    ("WRONGTYPE", "wrong type"),
    ("READONLY", "read-only replica"),
    ("MOVED", "cluster redirection"),
    ("ASK", "cluster redirection"),
    ("TRYAGAIN", "cluster redirection"),
    ("CLUSTERDOWN", "cluster redirection"),
)
"""Error codes (the first word of an error reply) and their cause, for errors redis-py gives no class of its own
(or that reach the backend wrapped in another error's message)."""
_PHRASES: tuple[tuple[str, str], ...] = (
    ("invalid username-password", "authentication"),
    ("invalid password", "authentication"),
    ("authentication required", "authentication"),
    ("no permissions", "permission"),
)
"""Phrases of the servers' messages (lower case) and their cause, where the code itself was cut off."""
_WORD = re.compile(r"[A-Z]+")

_TYPES: tuple[tuple[type, str], ...] = (
    (exceptions.AuthenticationError, "authentication"),
    (exceptions.AuthenticationWrongNumberOfArgsError, "authentication"),
    (exceptions.NoPermissionError, "permission"),
    (exceptions.OutOfMemoryError, "memory"),
    (exceptions.ReadOnlyError, "read-only replica"),
    (exceptions.AskError, "cluster redirection"),  # MOVED too: redis-py's MovedError is an AskError
    (exceptions.TryAgainError, "cluster redirection"),
    (exceptions.ClusterDownError, "cluster redirection"),
    (exceptions.TimeoutError, "timeout"),
)

_URL_PASSWORD = re.compile(r"(\w+://[^:/@\s]*:)[^@\s]+@")


def redact(text: str, secrets: Iterable[Optional[str]] = ()) -> str:
    """Return ``text`` with every one of ``secrets`` and every password of a ``scheme://user:password@`` URL as ***."""
    text = _URL_PASSWORD.sub(r"\1***@", text)
    for secret in sorted((secret for secret in secrets if secret), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes, outermost first (an error wrapping the server's keeps it as ``__cause__``)."""
    seen: list[BaseException] = []
    current: Optional[BaseException] = error
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def cause_of(error: BaseException) -> str:
    """Return the cause (a key of ``CAUSES``) of a failure: by redis-py's class, else by its error code."""
    chain = _chain(error)
    for item in chain:
        for kind, cause in _TYPES:
            if isinstance(item, kind):
                return cause
    for item in chain:
        text = str(item)
        words = set(_WORD.findall(text))
        for code, cause in _CODES:
            if code in words:
                return cause
        lowered = text.lower()
        for phrase, cause in _PHRASES:
            if phrase in lowered:
                return cause
    if any(isinstance(item, exceptions.ResponseError) for item in chain):
        return "server error"  # the server answered: whatever wraps its answer is not the cause
    if any(isinstance(item, (redis.ConnectionError, ConnectionError, OSError)) for item in chain):
        return "connection"
    return "connection" if any("connect" in str(item).lower() for item in chain) else "server error"


class RedisErrors:
    """The failures of one backend by cause: counted, and each cause's first failure logged (redacted) once."""

    def __init__(self, where: str, secrets: Iterable[Optional[str]] = ()) -> None:
        self._secrets = tuple(secret for secret in secrets if secret)
        self.where = redact(where, self._secrets)
        """The server(s), as logged (no password)."""
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        """Failures per cause."""
        self.messages: dict[str, str] = {}
        """The message logged for each cause (its first failure)."""
        self._logged: set[str] = set()

    def message(self, error: BaseException) -> str:
        """The whole message logged for ``error``: the cause, its hint, the error (redacted) and the server."""
        cause = cause_of(error)
        detail = redact(f"{type(error).__name__}: {error}", self._secrets)
        return (
            f"RedisBackend: {cause} error at {self.where}: {CAUSES[cause]} ({detail}); every such failure is a miss "
            "or a failed write, counted in storage_errors (logged once per cause)"
        )

    def record(self, error: BaseException, count: int = 1) -> None:
        """Count ``count`` failures of ``error``'s cause; log the first failure of each cause."""
        cause = cause_of(error)
        with self._lock:
            self.counts[cause] = self.counts.get(cause, 0) + count
            first = cause not in self._logged
            if first:
                self._logged.add(cause)
                self.messages[cause] = self.message(error)
        if first:
            _log.warning("%s", self.messages[cause])

    def summary(self) -> str:
        """One line naming every cause seen and how often (empty when there was none)."""
        with self._lock:
            return "; ".join(f"{cause}: {count}" for cause, count in sorted(self.counts.items()))

    @staticmethod
    def first_error(outcome: Any) -> Optional[BaseException]:
        """The failure in one unit's outcome: the exception in place of its replies, or its first error reply."""
        if isinstance(outcome, BaseException):
            return outcome
        if isinstance(outcome, list):
            for reply in outcome:
                if isinstance(reply, BaseException):
                    return reply
                if isinstance(reply, list):  # EXEC: the replies of the transaction's commands
                    for item in reply:
                        if isinstance(item, BaseException):
                            return item
        return None
