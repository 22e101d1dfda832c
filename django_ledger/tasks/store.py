"""Reads of tasks: records with their result documents and progress, in one round trip."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.records import decode_record
from ..core.sharded import AnyLedger
from .state import TaskState, task_state

__all__ = ["read_tasks"]


def read_tasks(ledgers: Sequence[AnyLedger], request_ids: Iterable[str]) -> list[TaskState | None]:
    """Return each id's task from the first of ``ledgers`` that holds it, in one round trip.

    On one Redis the reads are one transaction (MULTI), so a record and its result
    document are always of the same moment; on a cluster they are not, and a settlement
    between the two reads may show a result one attempt ahead of its record.
    """
    ids = list(request_ids)
    if not ledgers or not ids:
        return [None] * len(ids)
    client = ledgers[0].redis
    cluster = type(client).__name__ == "RedisCluster"
    with ledgers[0].translate_errors():
        pipe = client.pipeline(transaction=not cluster)
        for request_id in ids:
            for ledger in ledgers:
                shard = ledger.shard_for(request_id)  # a sharded queue: the id's shard
                pipe.hget(shard.records_key, request_id)
                pipe.hget(shard.results_key, request_id)
                pipe.hget(shard.runner.keys.progress, request_id)
        replies = pipe.execute()
    found: list[TaskState | None] = []
    width = 3 * len(ledgers)
    for position, request_id in enumerate(ids):
        row = replies[position * width : (position + 1) * width]
        state = None
        for index, ledger in enumerate(ledgers):
            raw, result, progress = row[3 * index : 3 * index + 3]
            if raw is not None:
                state = task_state(ledger.queue, decode_record(request_id, raw), result, progress)
                break
        found.append(state)
    return found
