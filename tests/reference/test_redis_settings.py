"""The Redis reference backend's settings: bad ``extra_config`` names its key, the defaults and forms, no server.

Building a backend never contacts a server; with none reachable every call
is a miss and nothing raises.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from hicache_reference.backends.redis_backend import RedisBackend, RedisSettings
from tests.redis_support import MODES
from tests.reference.backend_checks import config, make_pool, page_keys, slots_of, write_pages
from tests.reference.test_redis_backend import dead_server_extra

pytestmark = pytest.mark.redis


# ================================================================== configuration
@pytest.mark.clause("BE-1")
def test_configuration_errors_name_the_key() -> None:
    cases: list[tuple[Any, str]] = [
        (
            {"redis_url": "redis://h:1/0", "redis_cluster_nodes": ["h:2"]},
            "RedisBackend.extra_config.redis_cluster_nodes: give either redis_url or redis_cluster_nodes, not both "
            "(got ['h:2'])",
        ),
        (
            {"redis_url": 6379},
            "RedisBackend.extra_config.redis_url: must be a URL such as 'redis://host:port/0' (got 6379)",
        ),
        (
            {"redis_cluster_nodes": []},
            "RedisBackend.extra_config.redis_cluster_nodes: must be a non-empty list of 'host:port' strings (got [])",
        ),
        (
            {"redis_cluster_nodes": ["h:1", "nope"]},
            "RedisBackend.extra_config.redis_cluster_nodes[1]: must be a 'host:port' string (got 'nope')",
        ),
        ({"ttl_seconds": 0}, "RedisBackend.extra_config.ttl_seconds: must be a number > 0 or null (got 0)"),
        ({"ttl_seconds": True}, "RedisBackend.extra_config.ttl_seconds: must be a number > 0 or null (got True)"),
        ({"socket_timeout": "5"}, "RedisBackend.extra_config.socket_timeout: must be a number > 0 (got '5')"),
        (
            {"reconnect_interval_seconds": -1},
            "RedisBackend.extra_config.reconnect_interval_seconds: must be a number >= 0 (got -1)",
        ),
        (
            {"key_prefix": "a{b}:"},
            "RedisBackend.extra_config.key_prefix: must be a str without braces, glob characters or spaces "
            "(got 'a{b}:')",
        ),
        ({"redis_password": 7}, "RedisBackend.extra_config.redis_password: must be a str or null (got 7)"),
        (
            {"redis_url": "http://h:1/0"},
            "RedisBackend.extra_config.redis_url: must be a URL such as 'redis://host:port/0' (got 'http://h:1/0')",
        ),
        (
            {"redis_url": "redis://h:port/0"},
            "RedisBackend.extra_config.redis_url: must be a URL such as 'redis://host:port/0' (got 'redis://h:port/0')",
        ),
        (
            {"key_prefix": "hc"},
            "RedisBackend.extra_config.key_prefix: must be empty or end with a character no namespace holds, "
            "such as ':' (got 'hc')",
        ),
        (
            {"key_prefix": "cache/"},
            "RedisBackend.extra_config.key_prefix: must be empty or end with a character no namespace holds, "
            "such as ':' (got 'cache/')",
        ),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError) as raised:
            RedisBackend(config(), extra)
        assert str(raised.value) == message


def test_settings_defaults_and_forms() -> None:
    settings = RedisSettings.from_extra_config({})
    assert settings.url == "redis://127.0.0.1:6379/0" and not settings.is_cluster
    assert settings.key_prefix == "hicache:" and settings.ttl_seconds is None
    cluster = RedisSettings.from_extra_config({"redis_cluster_nodes": "10.0.0.1:7000, 10.0.0.2:7001"})
    assert cluster.is_cluster and cluster.url is None
    assert cluster.cluster_nodes == (("10.0.0.1", 7000), ("10.0.0.2", 7001))


@pytest.mark.clause("BE-5", "BE-1")
@pytest.mark.parametrize("mode", MODES)
def test_unreachable_server_at_start_is_only_a_miss(mode: str) -> None:
    """Building never contacts the servers; with none reachable every call misses at once, nothing raises."""
    backend = RedisBackend(config(), dead_server_extra(mode))
    backend.register_mem_pool_host(make_pool())
    keys = page_keys(2)
    started = time.monotonic()
    assert write_pages(backend, keys, [0, 1]) == [False, False]
    assert backend.batch_exists(keys) == 0
    assert backend.batch_get_v1(keys, slots_of(backend.mem_pool_host, [2, 3])) == [False, False]
    assert backend.get(keys[0]) is None and backend.exists(keys[0]) is False
    backend.clear()
    assert time.monotonic() - started < 5.0, "a refused connection must fail fast"
    backend.close()
