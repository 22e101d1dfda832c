"""How calls travel to Redis: transport batches, error translation, client checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import redis as redis_py

from .errors import LedgerError, LedgerUnavailable
from .scripts import located

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "Translate",
    "batches",
    "decodes_responses",
    "scanned_id",
    "text_of",
    "unavailable",
    "unavailable_message",
    "utf8_len",
]

#: Most items one script call carries.
MAX_BATCH = 128
#: Most payload and id bytes one script call carries (2 MiB).
MAX_BATCH_BYTES = 2 * 1024 * 1024


#: redis-py's cluster errors that mean "not now": a failover in progress (CLUSTERDOWN,
#: MASTERDOWN, a slot without a master), a resharding (TRYAGAIN, ASK), or redirections
#: (MOVED) that did not settle within the client's budget (``ClusterError``: TTL exhausted).
_CLUSTER_TRANSIENT: tuple[type[BaseException], ...] = (
    redis_py.exceptions.ClusterError,
    redis_py.exceptions.TryAgainError,
    redis_py.exceptions.AskError,
    redis_py.exceptions.SlotNotCoveredError,
)
_OUTAGE: tuple[type[BaseException], ...] = (
    redis_py.ConnectionError,
    redis_py.TimeoutError,
    *_CLUSTER_TRANSIENT,
)


def unavailable(exc: BaseException) -> bool:
    """Say whether ``exc`` means Redis (or the cluster's node for the keys) cannot answer now.

    A plain ``RedisClusterException`` is not a ``RedisError``: redis-py raises it both for
    a cluster it cannot reach (when refreshing the slots after a connection error, which
    it keeps as the cause or context) and for a call it will not send (a blocked
    pipelined command, keys in several slots). Only the first is an outage.
    """
    if isinstance(exc, _OUTAGE):
        return True
    if isinstance(exc, redis_py.exceptions.RedisClusterException):
        if "not covered" in str(exc):
            return True  # the slots have a hole: a master is failing over
        link = exc.__cause__ or exc.__context__
        for _ in range(8):  # a chain is short; a cycle must not hold us
            if link is None:
                break
            if isinstance(link, (*_OUTAGE, OSError)):
                return True
            link = link.__cause__ or link.__context__
    return False


def unavailable_message(subject: object, exc: BaseException) -> str:
    """Say what could not be reached, for what, and why: ``Redis is unavailable at ...``.

    The address is the one the error names (a cluster's node), else the subject's own
    (a ``Runner``'s queue node: ``host:port`` or a unix socket's path); the subject is
    its queue (``namespace:queue``) or what it says of itself; the cause is redis-py's
    own words (``Error 111 connecting to ... Connection refused.``).
    """
    where = _error_address(exc)
    if where is None:
        address = getattr(subject, "address", None)
        where = address() if callable(address) else None
    queue = getattr(subject, "queue_name", None)
    what = f"queue {queue}" if queue else str(subject)
    cause = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ not in cause and not cause.startswith(("Error", "Timeout")):
        cause = f"{type(exc).__name__}: {cause}"
    at = f" at {where}" if where and where != "?" else ""
    return f"Redis is unavailable{at} for {what}: {cause}"


def _error_address(exc: BaseException) -> str | None:
    """The node a redis-py error names (a cluster's errors carry their connection or node)."""
    connection = getattr(exc, "connection", None)
    name = getattr(connection, "name", None)  # a ClusterNode
    if isinstance(name, str) and name:
        return name
    path = getattr(connection, "path", None)
    if isinstance(path, str) and path:
        return path
    host, port = getattr(connection, "host", None), getattr(connection, "port", None)
    return f"{host}:{port}" if host and port else None


class Translate:
    """Context manager turning redis-py errors (cluster errors too) into the ledger's.

    ``LedgerUnavailable`` when Redis cannot answer now (down, stalled, or a cluster in
    failover); ``LedgerError`` when it, or the cluster client, refused the call. Both
    keep the redis-py error as their cause.
    """

    def __init__(self, ledger: object) -> None:
        self.ledger = ledger

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None or isinstance(exc, LedgerError):
            return
        if unavailable(exc):
            raise LedgerUnavailable(unavailable_message(self.ledger, exc)) from exc
        if isinstance(exc, redis_py.ResponseError):
            exc = located(exc)  # a script's error: at its .lua file and line
        if isinstance(exc, redis_py.RedisError | redis_py.exceptions.RedisClusterException):
            raise LedgerError(f"Redis refused a call of {self.ledger!r}: {exc}") from exc


def batches(items: list[Any], size_of: Any) -> Iterator[list[Any]]:
    """Split items into transport batches of at most MAX_BATCH items and MAX_BATCH_BYTES."""
    if len(items) <= MAX_BATCH and sum(map(size_of, items)) <= MAX_BATCH_BYTES:
        if items:
            yield items  # one batch: the common case, sized in one pass
        return
    batch: list[Any] = []
    size = 0
    for item in items:
        item_size = size_of(item)
        if batch and (len(batch) >= MAX_BATCH or size + item_size > MAX_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item_size
    if batch:
        yield batch


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def scanned_id(value: Any) -> str | bytes:
    """Return a scanned id as text, or as bytes when it is not UTF-8 (never ours: corrupt)."""
    if not isinstance(value, bytes):
        return str(value)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def text_of(value: Any) -> str:
    """A Redis reply's bytes as text (what is not UTF-8 replaced), anything else as ``str``."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def decodes_responses(client: Any) -> bool:
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if isinstance(kwargs, dict):
        return bool(kwargs.get("decode_responses"))
    encoder = getattr(client, "get_encoder", None)
    if callable(encoder):
        return bool(getattr(encoder(), "decode_responses", False))
    return False
