"""Finding Redis servers for the tests, and starting private ones.

Each mode's server comes from the environment when it names one, and is
started by the tests otherwise:

    HICACHE_REDIS_URL            a standalone server to use; unset: the session starts one on a free loopback port
    HICACHE_REDIS_CLUSTER_NODES  a cluster to use; unset: the session starts a 3-master cluster on free loopback ports
    HICACHE_REQUIRE_REDIS        "1": a server that cannot be reached or started fails the test instead of skipping it
    HICACHE_NO_REDIS             "1": start nothing; tests without a named server skip

The session's servers start on the first test that needs them and stop when
the session ends (``stop_session_servers``, called from tests/conftest.py).
Private servers (``RedisServer``, ``RedisClusterServers``) run ``redis-server``
from PATH on free loopback ports, as children of the test process, so a test
can kill and restart them; they keep nothing on disk.

Isolation: every test gets its own key prefix (``unique_key_prefix``) and
model name (``unique_model_name``), and cleans up only the keys under its
prefix (SCAN + UNLINK, never FLUSHDB), so tests and CI jobs sharing a server
never see or remove each other's keys.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Any, NoReturn, Optional

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

MODES = ("standalone", "cluster")
"""The two deployments every correctness test runs against."""

_PROBE_TIMEOUT = 1.0
"""Seconds to wait for a shared server to answer before declaring it unreachable."""


# ================================================================ reachability
def redis_required() -> bool:
    """Whether an unreachable server must fail the test (CI sets HICACHE_REQUIRE_REDIS=1)."""
    return os.environ.get("HICACHE_REQUIRE_REDIS", "") == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason`` — or fail it when HICACHE_REQUIRE_REDIS=1, so CI cannot skip silently."""
    if redis_required():
        pytest.fail(f"{reason} (HICACHE_REQUIRE_REDIS=1: Redis tests must run)", pytrace=False)
    pytest.skip(reason)


_ENV = {"standalone": "HICACHE_REDIS_URL", "cluster": "HICACHE_REDIS_CLUSTER_NODES"}
"""Mode → the variable naming an external server of that mode."""


def _split_nodes(text: str) -> list[str]:
    return [node.strip() for node in text.split(",") if node.strip()]


def _probe_standalone(url: str) -> Optional[str]:
    try:
        client = redis.Redis.from_url(url, socket_timeout=_PROBE_TIMEOUT, socket_connect_timeout=_PROBE_TIMEOUT)
        client.ping()
        client.close()
    except Exception as error:
        return f"no Redis server at {url} (HICACHE_REDIS_URL; {type(error).__name__}: {error})"
    return None


def _probe_cluster(nodes: list[str]) -> Optional[str]:
    try:
        client = RedisCluster(
            startup_nodes=[ClusterNode(*_host_port(node)) for node in nodes],
            socket_timeout=_PROBE_TIMEOUT,
            socket_connect_timeout=_PROBE_TIMEOUT,
        )
        state = client.cluster_info(target_nodes=RedisCluster.RANDOM).get("cluster_state")
        client.close()
    except Exception as error:
        return f"no Redis cluster at {','.join(nodes)} (HICACHE_REDIS_CLUSTER_NODES; {type(error).__name__}: {error})"
    if state != "ok":
        return f"the Redis cluster at {','.join(nodes)} reports cluster_state:{state}"
    return None


def _host_port(node: str) -> tuple[str, int]:
    host, _, port = node.rpartition(":")
    return host, int(port)


class SessionServers:
    """Each mode's server for a test session: the one the environment names, else one started here.

    ``extra(mode)`` returns the extra config reaching it, or the reason there is
    none; it resolves each mode once. ``close`` stops what this object started.
    """

    _ATTEMPTS = 3
    """Starts tried per mode (a free port can be taken between choosing it and binding it)."""

    def __init__(self, environ: Optional[Any] = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.started: dict[str, Any] = {}
        self._resolved: dict[str, Any] = {}
        self._owner = os.getpid()

    def extra(self, mode: str) -> Any:
        """Return ``{"redis_url": ...}`` / ``{"redis_cluster_nodes": [...]}`` for ``mode``, or a reason (str)."""
        if mode not in _ENV:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mode not in self._resolved:
            self._resolved[mode] = self._resolve(mode)
        return self._resolved[mode]

    def _resolve(self, mode: str) -> Any:
        named = self.environ.get(_ENV[mode]) or ""
        if named:
            if mode == "standalone":
                return _probe_standalone(named) or {"redis_url": named}
            nodes = _split_nodes(named)
            return _probe_cluster(nodes) or {"redis_cluster_nodes": nodes}
        if self.environ.get("HICACHE_NO_REDIS", "") == "1":
            return f"HICACHE_NO_REDIS=1 and {_ENV[mode]} is unset: no {mode} Redis server"
        if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
            return (
                f"redis-server and redis-cli are not installed, so no {mode} Redis server can be started "
                f"(bash scripts/setup.sh installs them where it can; or apt-get install redis-server), "
                f"and {_ENV[mode]} names none"
            )
        return self._start(mode)

    def _start(self, mode: str) -> Any:
        error: Optional[BaseException] = None
        for _ in range(self._ATTEMPTS):
            servers = RedisServer() if mode == "standalone" else RedisClusterServers()
            try:
                servers.start()
            except Exception as caught:  # a port taken meanwhile, a server that would not start
                servers.close()
                error = caught
                continue
            self.started[mode] = servers
            if isinstance(servers, RedisServer):
                return {"redis_url": servers.url}
            return {"redis_cluster_nodes": servers.nodes}
        return f"could not start a {mode} Redis server on loopback ({type(error).__name__}: {error})"

    def close(self) -> None:
        """Stop every server this object started (in the process that started them; a forked child leaves them)."""
        if os.getpid() != self._owner:
            return
        for servers in self.started.values():
            servers.close()
        self.started.clear()
        self._resolved.clear()


_SESSION = SessionServers()
"""This test process's servers."""


def stop_session_servers() -> None:
    """Stop the servers the session started (tests/conftest.py calls this when the session ends)."""
    _SESSION.close()


atexit.register(stop_session_servers)


def require_mode(mode: str) -> dict:
    """Return the extra config that reaches the session's server of ``mode``, or skip/fail the test."""
    extra = _SESSION.extra(mode)
    if isinstance(extra, str):
        unavailable(extra)
    return dict(extra)


def require_redis_server_binary() -> str:
    """Return the path of ``redis-server``, or skip/fail when it is not installed."""
    path = shutil.which("redis-server")
    if path is None or shutil.which("redis-cli") is None:
        unavailable("redis-server and redis-cli are not installed (apt-get install redis-server redis-tools)")
    return path


# ================================================================ isolation
def unique_model_name(stem: str = "test") -> str:
    """Return a model name no other test uses."""
    return f"{stem}-{uuid.uuid4().hex[:12]}"


def unique_key_prefix() -> str:
    """Return a key prefix no other test uses (a valid ``key_prefix``: no braces, no glob characters)."""
    return f"hicache-test-{uuid.uuid4().hex[:12]}:"


def raw_clients(extra: dict) -> list[Any]:
    """Return a plain redis-py client per master of the servers ``extra`` names (a backdoor for tests)."""
    if "redis_cluster_nodes" in extra:
        nodes = extra["redis_cluster_nodes"]
        nodes = nodes.split(",") if isinstance(nodes, str) else nodes
        cluster = RedisCluster(
            startup_nodes=[ClusterNode(*_host_port(node)) for node in nodes],
            socket_timeout=5,
            require_full_coverage=False,
        )
        try:
            return [redis.Redis(host=node.host, port=node.port, socket_timeout=5) for node in cluster.get_primaries()]
        finally:
            cluster.close()
    return [redis.Redis.from_url(extra["redis_url"], socket_timeout=5)]


def delete_prefix(extra: dict, prefix: str) -> int:
    """Delete every key under ``prefix`` on every master of ``extra``'s servers; return how many."""
    deleted = 0
    for client in raw_clients(extra):
        try:
            keys = list(client.scan_iter(match=prefix + "*", count=1000))
            for key in keys:
                deleted += client.unlink(key)
        except redis.RedisError:
            pass  # a master a fault test killed holds nothing to clean
        finally:
            client.close()
    return deleted


# ================================================================ private servers
def free_port(cluster_bus: bool = False) -> int:
    """Return a loopback port nothing listens on (and, for a cluster node, whose bus port +10000 is free too)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if not cluster_bus:
            return port
        if port + 10000 < 65536 and _is_free(port + 10000):
            return port
    raise RuntimeError("free_port: found no free loopback port")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise TimeoutError(f"{what} within {timeout} s")


class RedisServer:
    """A private ``redis-server`` on one loopback port, a child of this process: start, kill, restart.

    No persistence (``--save ''``, no AOF); its working directory is a fresh
    temporary directory removed by ``close``.
    """

    def __init__(self, port: Optional[int] = None, *extra_arguments: str) -> None:
        self.binary = require_redis_server_binary()
        self.port = port or free_port(cluster_bus="--cluster-enabled" in extra_arguments)
        self.extra_arguments = extra_arguments
        self.directory = tempfile.mkdtemp(prefix=f"hicache-redis-{self.port}-")
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def start(self) -> RedisServer:
        """Start the server (again, on the same port) and wait until it answers PING."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.process = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.directory,
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
                *self.extra_arguments,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_until(self._answers, 10.0, f"redis-server on port {self.port} did not answer PING")
        return self

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"redis-server on port {self.port} exited with {self.process.returncode}")
        try:
            client = self.client()
            try:
                return bool(client.ping())
            finally:
                client.close()
        except redis.RedisError:
            return False

    def kill(self) -> None:
        """Kill the server at once (SIGKILL, as a crash would) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class RedisClusterServers:
    """A private Redis Cluster of ``size`` masters on free loopback ports (no replicas).

    Built with ``redis-cli --cluster create``; ``cluster-require-full-coverage
    no`` lets the surviving masters serve their slots after one is killed.
    """

    def __init__(self, size: int = 3, node_timeout_ms: int = 1000) -> None:
        self.servers = [
            RedisServer(
                None,
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(node_timeout_ms),
                "--cluster-require-full-coverage",
                "no",
            )
            for _ in range(size)
        ]

    @property
    def nodes(self) -> list[str]:
        return [server.address for server in self.servers]

    def start(self) -> RedisClusterServers:
        for server in self.servers:
            server.start()
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *self.nodes, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout}{created.stderr}")
        _wait_until(self._is_ok, 20.0, "the private Redis cluster did not reach cluster_state:ok")
        return self

    def _is_ok(self) -> bool:
        for server in self.servers:
            client = server.client()
            try:
                if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                    return False
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def owner_of(self, key: str) -> RedisServer:
        """Return the server whose slots hold ``key``."""
        slot = key_slot(key.encode())
        client = self.servers[0].client()
        try:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    port = int(master[1])
                    return next(server for server in self.servers if server.port == port)
        finally:
            client.close()
        raise LookupError(f"no master owns slot {slot}")

    def _node_ids(self) -> dict[int, bytes]:
        """Return {port: node id} as the first server sees the cluster."""
        client = self.servers[0].client()
        try:
            return {
                int(line.split()[1].split(b":")[1].split(b"@")[0]): line.split()[0]
                for line in client.execute_command("CLUSTER", "NODES").splitlines()
                if line.strip()
            }
        finally:
            client.close()

    def _owner_port_seen_by(self, server: RedisServer, slot: int) -> Optional[int]:
        client = server.client()
        try:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return int(master[1])
            return None
        finally:
            client.close()

    def move_empty_slot(self, slot: int, target: RedisServer, timeout: float = 20.0) -> None:
        """Give the empty ``slot`` to ``target`` and return once every server agrees it owns it.

        The target takes the slot first and bumps its config epoch, so that its
        claim outranks the old owner's in the gossip: a late heartbeat from the
        old owner can no longer hand the slot back to it on some nodes while
        others follow the target (which would leave the two answering MOVED to
        each other).
        """
        target_id = self._node_ids()[target.port]
        ordered = [target] + [server for server in self.servers if server is not target]
        for server in ordered:
            client = server.client()
            try:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
                if server is target:
                    client.execute_command("CLUSTER", "BUMPEPOCH")
            finally:
                client.close()
        _wait_until(
            lambda: all(self._owner_port_seen_by(server, slot) == target.port for server in self.servers),
            timeout,
            f"the servers did not agree that slot {slot} moved to port {target.port}",
        )

    def close(self) -> None:
        for server in self.servers:
            server.close()

    def __enter__(self) -> RedisClusterServers:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
