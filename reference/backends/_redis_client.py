"""The Redis client library (the ``redis`` extra), imported once here so that its absence is said clearly.

Every module of the Redis backend imports this first: without the client
library, importing them raises ``MissingExtra`` naming the extra to install.
"""

try:
    import redis
except ImportError as error:  # the redis extra is not installed
    from hicache_contracts.errors import missing_extra

    raise missing_extra("redis", "the reference Redis backend (RedisBackend, SGLangRedisBackend)", error) from error

__all__ = ["redis"]
