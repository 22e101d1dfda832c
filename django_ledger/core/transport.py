"""How calls travel to Redis: transport batches, error translation, client checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import redis as redis_py

from .errors import LedgerError, LedgerUnavailable

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "Translate",
    "batches",
    "decodes_responses",
    "scanned_id",
    "utf8_len",
]

#: Most items one script call carries.
MAX_BATCH = 128
#: Most payload and id bytes one script call carries (2 MiB).
MAX_BATCH_BYTES = 2 * 1024 * 1024


class Translate:
    """Context manager turning redis-py errors into the ledger's."""

    def __init__(self, ledger: object) -> None:
        self.ledger = ledger

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None or isinstance(exc, LedgerError):
            return
        if isinstance(exc, redis_py.ConnectionError | redis_py.TimeoutError):
            raise LedgerUnavailable(f"Redis is unavailable for {self.ledger!r}: {exc}") from exc
        if isinstance(exc, redis_py.RedisError):
            raise LedgerError(f"Redis refused a call of {self.ledger!r}: {exc}") from exc


def batches(items: list[Any], size_of: Any) -> Iterator[list[Any]]:
    """Split items into transport batches of at most MAX_BATCH items and MAX_BATCH_BYTES."""
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


def decodes_responses(client: Any) -> bool:
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if isinstance(kwargs, dict):
        return bool(kwargs.get("decode_responses"))
    encoder = getattr(client, "get_encoder", None)
    if callable(encoder):
        return bool(getattr(encoder(), "decode_responses", False))
    return False
