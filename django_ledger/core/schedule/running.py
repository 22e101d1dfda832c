"""What each scheduler node runs, published to Redis at each tick so every page sees it.

A node's document lives under ``{namespace}:scheduler:NODE`` with a TTL its ticks
refresh (``PUBLISH_TTL_MS``, or more for a slow loop), indexed by the sorted set
``{namespace}:schedulers``; a node that stops is gone once its TTL passes. The document
is bounded: at most ``MAX_PUBLISHED`` schedules, each field cut to ``MAX_FIELD``
characters. ``ScheduleStore.publish`` writes it in one script call per tick;
``ScheduleStore.running`` reads every node's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Final

__all__ = [
    "MAX_PUBLISHED",
    "PUBLISH_TTL_MS",
    "Running",
    "decode_running",
    "encode_running",
    "published_at",
    "running_index_key",
    "running_key",
]

#: How long a node's document outlives its last tick, at least.
PUBLISH_TTL_MS: Final = 30_000
#: Schedules one document holds at most; a node running more says so (``truncated``).
MAX_PUBLISHED: Final = 1_000
#: Characters each text field keeps at most.
MAX_FIELD: Final = 200


def running_key(namespace: str, node: str) -> str:
    """Return the key of ``node``'s document."""
    return "{%s}:scheduler:%s" % (namespace, node)  # noqa: UP031 - braces are the hash tag


def running_index_key(namespace: str) -> str:
    """Return the key of the index of publishing nodes."""
    return "{%s}:schedulers" % namespace  # noqa: UP031 - braces are the hash tag


@dataclass(frozen=True)
class Running:
    """One schedule as one node runs it, at that node's last tick."""

    key: str
    task: str
    queue: str
    cron: str | None
    every: int | None
    timezone: str
    #: Its next fire after that tick (epoch seconds), ``None`` for none or disabled.
    next_fire: int | None
    enabled: bool
    node: str = ""


def encode_running(node: str, now_ms: int, schedules: list[Running]) -> str:
    """Return ``node``'s document: its schedules, bounded, at ``now_ms``."""
    kept = schedules[:MAX_PUBLISHED]
    entries = []
    for entry in kept:
        data = asdict(entry)
        del data["node"]
        for name in ("key", "task", "queue", "cron", "timezone"):
            if isinstance(data[name], str):
                data[name] = data[name][:MAX_FIELD]
        entries.append(data)
    document = {
        "node": node[:MAX_FIELD],
        "at": now_ms,
        "truncated": len(schedules) > len(kept),
        "schedules": entries,
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def published_at(text: str | bytes) -> int | None:
    """Return when a document was published (epoch ms, the server's clock), if it says."""
    try:
        at = json.loads(text)["at"]
    except (ValueError, KeyError, TypeError):
        return None
    return at if isinstance(at, int) and not isinstance(at, bool) else None


def decode_running(text: str | bytes) -> list[Running]:
    """Return the schedules of one document; nothing for one no scheduler wrote."""
    try:
        document: Any = json.loads(text)
        node = str(document["node"])
        return [_entry(data, node) for data in document["schedules"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def _entry(data: dict[str, Any], node: str) -> Running:
    every, next_fire = data.get("every"), data.get("next_fire")
    return Running(
        key=str(data["key"]),
        task=str(data["task"]),
        queue=str(data["queue"]),
        cron=None if data.get("cron") is None else str(data["cron"]),
        every=every if isinstance(every, int) else None,
        timezone=str(data.get("timezone") or "UTC"),
        next_fire=next_fire if isinstance(next_fire, int) else None,
        enabled=bool(data.get("enabled", True)),
        node=node,
    )
