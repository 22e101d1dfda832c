"""The suite's throwaway redis-server: the testing kit's (``django_ledger/testing/redis.py``)."""

from django_ledger.testing.redis import (
    FORBIDDEN_PORT,
    PORT_ATTEMPTS,
    RedisServer,
    RedisServerError,
    delete_namespace,
    find_binary,
    free_port,
)

__all__ = [
    "FORBIDDEN_PORT",
    "PORT_ATTEMPTS",
    "RedisServer",
    "RedisServerError",
    "delete_namespace",
    "find_binary",
    "free_port",
]
