"""A misconfigured Redis shows: every failure counted, its cause logged once and named, no secret in the log.

Scenario: the reference Redis backend against private ``redis-server``s set
up wrong, each the way users get it wrong: a wrong password, no password for
a protected server, an ACL user without rights, a server out of memory, a
key under the prefix holding a string, a read-only replica, a cluster node
given as a standalone ``redis_url``. Four pages are written, then read.
Expected: every failed page counts in ``storage_errors`` (error replies as
much as dead connections); ``errors.counts`` sorts them into one cause; the
``hicache_reference.backends.redis`` logger says so once, in a whole
message naming the cause and what to check, with no password in it. TLS
keys the backend cannot honour (any ``ssl`` key with a cluster, ``ssl`` with
a ``redis://`` URL) are refused at construction, naming the key.

Why this matters: before, all of these were silent misses with
``storage_errors`` at 0, and a cluster's ``ssl`` option was ignored: the
connection went out without TLS.

Skips, with the reason, when ``redis-server`` is not installed (CI refuses
the skip with HICACHE_REQUIRE_REDIS=1).
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Optional

import pytest
import redis

from hicache_reference.backends.redis_backend import RedisBackend
from hicache_reference.backends.redis_errors import CAUSES, cause_of, redact
from tests.redis_support import RedisServer, require_mode, unique_key_prefix, unique_model_name
from tests.reference.backend_checks import config, make_pool, page_keys, write_pages

KEYS = page_keys(4)
PASSWORD = "s3cret-pw-not-for-logs"
FAST = {"socket_timeout": 2.0, "socket_connect_timeout": 1.0, "reconnect_interval_seconds": 0.0}
LOGGER = "hicache_reference.backends.redis"


class ProtectedServer(RedisServer):
    """A private server that asks for ``PASSWORD`` (its admin client gives it)."""

    def __init__(self) -> None:
        super().__init__(None, "--requirepass", PASSWORD)

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, password=PASSWORD, socket_timeout=2, socket_connect_timeout=2
        )


@pytest.fixture(scope="module")
def protected() -> Iterator[ProtectedServer]:
    server = ProtectedServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def plain() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.close()


def backend_at(url: str) -> RedisBackend:
    backend = RedisBackend(
        config(model_name=unique_model_name("misconfigured"), enable_storage_metrics=True),
        {"redis_url": url, "key_prefix": unique_key_prefix(), **FAST},
    )
    backend.register_mem_pool_host(make_pool())
    return backend


def exercise(backend: RedisBackend) -> tuple[list[bool], int]:
    """Write the four pages, then ask for them; return the writes' results and the hit."""
    written = [bool(flag) for flag in write_pages(backend, KEYS, [0, 1, 2, 3])]
    return written, backend.batch_exists(KEYS)


def expected_message(cause: str, where: str, detail: str) -> str:
    return (
        f"RedisBackend: {cause} error at {where}: {CAUSES[cause]} ({detail}); every such failure is a miss or a "
        "failed write, counted in storage_errors (logged once per cause)"
    )


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def check_failures(
    backend: RedisBackend, caplog: pytest.LogCaptureFixture, cause: str, detail: str, failed_units: Optional[int]
) -> None:
    """Every failed unit counted, sorted into ``cause`` and logged once, whole, without the password."""
    stats = backend.get_stats()
    assert stats is not None
    if failed_units is not None:
        assert stats.storage_errors == failed_units
    assert stats.storage_errors >= 1
    assert backend.errors.counts == {cause: stats.storage_errors}
    where = redact(backend.settings.url or "", [PASSWORD])
    assert logged(caplog) == [expected_message(cause, where, detail)]
    assert backend.storage_error_messages() == logged(caplog)  # what a report can show
    assert PASSWORD not in caplog.text


@pytest.mark.clause("BE-5")
def test_a_wrong_password_is_an_authentication_error(
    protected: ProtectedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    url = f"redis://:wrong-{PASSWORD}@127.0.0.1:{protected.port}/0"
    backend = backend_at(url)
    assert exercise(backend) == ([False] * 4, 0)
    stats = backend.get_stats()
    assert stats is not None and stats.storage_errors >= 2
    assert backend.errors.counts == {"authentication": stats.storage_errors}
    assert logged(caplog) == [
        expected_message(
            "authentication",
            f"redis://:***@127.0.0.1:{protected.port}/0",
            "ConnectFailed: invalid username-password pair or user is disabled.",
        )
    ]
    assert PASSWORD not in caplog.text
    backend.close()


@pytest.mark.clause("BE-5")
def test_no_password_for_a_protected_server_is_an_authentication_error(
    protected: ProtectedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    backend = backend_at(protected.url)
    assert exercise(backend) == ([False] * 4, 0)
    check_failures(
        backend,
        caplog,
        "authentication",
        "ConnectFailed: HELLO must be called with the client already authenticated, otherwise the HELLO AUTH "
        "<user> <pass> option can be used to authenticate the client and select the RESP protocol version at the "
        "same time",
        None,
    )
    backend.close()


@pytest.mark.clause("BE-5")
def test_an_acl_user_without_rights_is_a_permission_error(
    protected: ProtectedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    admin = protected.client()
    admin.execute_command("ACL", "SETUSER", "pinger", "on", f">{PASSWORD}", "~*", "-@all", "+ping", "+client")
    backend = backend_at(f"redis://pinger:{PASSWORD}@127.0.0.1:{protected.port}/0")
    assert exercise(backend) == ([False] * 4, 0)
    check_failures(
        backend,
        caplog,
        "permission",
        "NoPermissionError: this user has no permissions to run the 'hset' command",
        None,
    )
    backend.close()
    admin.close()


@pytest.mark.clause("BE-5")
def test_a_server_out_of_memory_is_a_memory_error(plain: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    admin = plain.client()
    admin.config_set("maxmemory", 1)  # and the default policy, noeviction: every write refused
    backend = backend_at(plain.url)
    assert exercise(backend) == ([False] * 4, 0)
    check_failures(
        backend,
        caplog,
        "memory",
        "OutOfMemoryError: command not allowed when used memory > 'maxmemory'.",
        4,  # the four writes; the hit query's reads of absent keys are allowed
    )
    admin.close()
    backend.close()


@pytest.mark.clause("BE-5")
def test_a_key_of_another_type_under_the_prefix_is_a_wrong_type_error(
    plain: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    backend = backend_at(plain.url)
    admin = plain.client()
    for key in KEYS:
        admin.set(backend.storage_location(key)[0], b"another application's value")
    assert exercise(backend) == ([False] * 4, 0)
    check_failures(
        backend,
        caplog,
        "wrong type",
        "ResponseError: WRONGTYPE Operation against a key holding the wrong kind of value",
        8,  # four writes, four size reads
    )
    admin.close()
    backend.close()


@pytest.mark.clause("BE-5")
def test_a_read_only_replica_is_named(plain: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    replica = RedisServer(None, "--replicaof", "127.0.0.1", str(plain.port))
    try:
        replica.start()
        backend = backend_at(replica.url)
        assert exercise(backend) == ([False] * 4, 0)
        check_failures(
            backend, caplog, "read-only replica", "ReadOnlyError: You can't write against a read only replica.", 4
        )
        backend.close()
    finally:
        replica.close()


@pytest.mark.clause("BE-5")
def test_a_cluster_node_as_a_standalone_server_is_a_cluster_redirection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    node = require_mode("cluster")["redis_cluster_nodes"][0]
    keys = page_keys(32)
    pool = make_pool(page_count=32)
    backend = RedisBackend(
        config(model_name=unique_model_name("misconfigured"), enable_storage_metrics=True),
        {"redis_url": f"redis://{node}/0", "key_prefix": unique_key_prefix(), **FAST},
    )
    backend.register_mem_pool_host(pool)
    written = write_pages(backend, keys, list(range(32)))
    refused = written.count(False)
    assert refused >= 1  # 32 keys over 3 masters: most live on another node
    stats = backend.get_stats()
    assert stats is not None and stats.storage_errors == refused
    assert backend.errors.counts == {"cluster redirection": refused}
    [message] = logged(caplog)
    assert message.startswith(
        f"RedisBackend: cluster redirection error at redis://{node}/0: {CAUSES['cluster redirection']} (MovedError: "
    )
    backend.clear()
    backend.close()


@pytest.mark.parametrize(
    "error, cause",
    [
        (redis.AuthenticationError("invalid username-password pair or user is disabled."), "authentication"),
        (redis.exceptions.NoPermissionError("no permissions"), "permission"),
        (redis.exceptions.OutOfMemoryError("command not allowed"), "memory"),
        (redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), "wrong type"),
        (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), "read-only replica"),
        (redis.exceptions.MovedError("3999 127.0.0.1:6381"), "cluster redirection"),
        (redis.exceptions.ClusterDownError("The cluster is down"), "cluster redirection"),
        (redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused."), "connection"),
        (redis.TimeoutError("Timeout reading from socket"), "timeout"),
        (redis.ResponseError("ERR unknown command 'HSTRLEN'"), "server error"),
        (redis.exceptions.RedisClusterException("cannot connect: WRONGPASS invalid"), "authentication"),
    ],
)
def test_each_failure_is_sorted_into_its_cause(error: BaseException, cause: str) -> None:
    assert cause_of(error) == cause
    wrapped = redis.ConnectionError("no node answered")
    wrapped.__cause__ = error
    assert cause_of(wrapped) == cause  # a wrapped error keeps its cause


def test_secrets_are_redacted() -> None:
    assert redact("at redis://user:pa55@host:1/0 and rediss://:x@h:2", ["pa55"]) == (
        "at redis://user:***@host:1/0 and rediss://:***@h:2"
    )
    assert redact("password hunter2 seen", ["hunter2"]) == "password *** seen"


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            {"redis_cluster_nodes": ["127.0.0.1:7000"], "ssl": True},
            "RedisBackend.extra_config.ssl: TLS to a Redis Cluster is not supported by this backend (it would "
            "connect without TLS); reach the cluster over a trusted network or a TLS tunnel, and remove the key "
            "(got True)",
        ),
        (
            {"redis_cluster_nodes": ["127.0.0.1:7000"], "ssl_ca_certs": "/etc/ca.pem"},
            "RedisBackend.extra_config.ssl_ca_certs: TLS to a Redis Cluster is not supported by this backend (it "
            "would connect without TLS); reach the cluster over a trusted network or a TLS tunnel, and remove the "
            "key (got '/etc/ca.pem')",
        ),
        (
            {"redis_url": "redis://127.0.0.1:6379/0", "ssl": True},
            "RedisBackend.extra_config.ssl: TLS is chosen by a rediss:// redis_url, its options given in the URL's "
            "query (rediss://host:port/0?ssl_ca_certs=/path/ca.pem), not by this key (got True)",
        ),
        (
            {"redis_url": "rediss://127.0.0.1:6379/0", "ssl_password": "hunter2"},
            "RedisBackend.extra_config.ssl_password: TLS is chosen by a rediss:// redis_url, its options given in "
            "the URL's query (rediss://host:port/0?ssl_ca_certs=/path/ca.pem), not by this key (got '***')",
        ),
    ],
)
def test_tls_keys_the_backend_cannot_honour_are_refused(extra: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        RedisBackend(config(), extra)
    assert str(raised.value) == message


def test_tls_keys_that_change_nothing_are_accepted() -> None:
    RedisBackend(config(), {"redis_url": "rediss://127.0.0.1:6379/0", "ssl": True}).close()
    RedisBackend(config(), {"redis_cluster_nodes": ["127.0.0.1:7000"], "ssl": False}).close()


def _counts_only_dead_nodes(self: RedisBackend, units: Any, sinks: Any = None) -> list[Any]:
    """The old count: a unit whose node failed, not one the server answered with an error."""
    outcomes = self.nodes.execute(units, sinks)
    failed = sum(1 for outcome in outcomes if isinstance(outcome, BaseException))
    if failed:
        self._counters.add(storage_errors=failed)
    return outcomes


def test_planted_backend_counting_only_dead_nodes_is_caught(
    plain: RedisServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RedisBackend, "_execute", _counts_only_dead_nodes)
    with pytest.raises(AssertionError):
        test_a_server_out_of_memory_is_a_memory_error(plain, caplog)
