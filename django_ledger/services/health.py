"""``ledger_status --worker ID`` and ``--worker-of QUEUE``: is a worker alive and turning?

Read from the workers' heartbeats (``core/worker/heartbeat.py``): one GET, or the
namespace's list of workers. A fresh worker's heartbeat is there and its main loop
turned within ``max_age`` seconds (``core/worker/health.py``).
"""

from __future__ import annotations

import math
import time

from django.core.management.base import CommandError
from django.utils.translation import gettext
from redis.exceptions import RedisError

from ..core.errors import LedgerError
from ..core.worker.health import loop_age_s
from .scheduler import store
from .worker import heartbeats

__all__ = ["probe", "probe_scheduler"]


def probe(worker_id: str | None, queue: str | None, max_age: float) -> str:
    """Say that the worker (or one of the queue's) is fresh; ``CommandError`` if not."""
    if not (math.isfinite(max_age) and max_age > 0):
        raise CommandError(gettext("--max-age must be more than 0 seconds"))
    try:
        live = heartbeats(counters=False).live()
    except (LedgerError, RedisError) as exc:
        raise CommandError(
            gettext("cannot read the heartbeats: %(error)s") % {"error": exc}
        ) from exc
    now_ms = int(time.time() * 1000)
    if worker_id is not None:
        chosen = [info for info in live if info.worker_id == worker_id]
        if not chosen:
            raise CommandError(
                gettext("worker %(worker)s has no heartbeat: it is not running")
                % {"worker": worker_id}
            )
    else:
        chosen = [info for info in live if queue in info.queues]
        if not chosen:
            raise CommandError(
                gettext("no worker of queue %(queue)s has a heartbeat") % {"queue": queue}
            )
    fresh = [info for info in chosen if loop_age_s(info, now_ms) <= max_age]
    if not fresh:
        info = min(chosen, key=lambda found: loop_age_s(found, now_ms))
        raise CommandError(
            gettext(
                "worker %(worker)s is stale: its loop last turned %(age).1f s ago, "
                "more than %(max_age)g"
            )
            % {"worker": info.worker_id, "age": loop_age_s(info, now_ms), "max_age": max_age}
        )
    return gettext("worker %(worker)s is fresh: its loop turned %(age).1f s ago") % {
        "worker": fresh[0].worker_id,
        "age": loop_age_s(fresh[0], now_ms),
    }


def probe_scheduler(node: str, max_age: float) -> str:
    """Say that scheduler ``node`` ticked within ``max_age`` s; ``CommandError`` if not.

    Read from what the node publishes at every tick (``core/schedule/running.py``), on
    the Redis server's clock: no clock of this machine is compared with it.
    """
    if not (math.isfinite(max_age) and max_age > 0):
        raise CommandError(gettext("--max-age must be more than 0 seconds"))
    try:
        schedule_store = store()
        at = schedule_store.published_at(node)
        now_ms = schedule_store.server_time_ms()
    except (LedgerError, RedisError) as exc:
        raise CommandError(
            gettext("cannot read the schedulers: %(error)s") % {"error": exc}
        ) from exc
    if at is None:
        raise CommandError(
            gettext("scheduler %(node)s has published nothing: it is not running") % {"node": node}
        )
    age = max(0, now_ms - at) / 1000
    if age > max_age:
        raise CommandError(
            gettext(
                "scheduler %(node)s is stale: it last ticked %(age).1f s ago, more than %(max_age)g"
            )
            % {"node": node, "age": age, "max_age": max_age}
        )
    return gettext("scheduler %(node)s is fresh: it ticked %(age).1f s ago") % {
        "node": node,
        "age": age,
    }
