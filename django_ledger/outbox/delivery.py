"""Admitting outbox rows: the committer's step on commit and the relay's, the same one.

Admission is idempotent by id, so a row admitted twice (by the committer and a relay,
or by a relay that died before deleting it) answers ``DUPLICATE``: it is delivered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured

from ..core.errors import LedgerError
from ..core.results import AdmissionStatus
from ..tasks.store import queues
from .models import OutboxEntry

__all__ = ["admit_rows", "deliver_ids"]

logger = logging.getLogger("django_ledger.outbox")

#: Ids per ``pk__in`` query: under SQLite's 999 bound variables.
CHUNK = 500


def admit_rows(rows: Iterable[OutboxEntry]) -> tuple[list[str], list[str]]:
    """Admit ``rows``; return the ids done with and the ids to keep for a later try.

    Done: admitted, duplicate (admitted before), or refused for good (another call under
    the id, a refused payload: logged as errors). Kept: Redis away, a full queue, a queue
    not configured here.
    """
    groups: dict[tuple[str, int, int | None, int], list[OutboxEntry]] = {}
    # -- workflows (tasks/workflows.py): a row holding a whole workflow is admitted whole
    rows = list(rows)
    flows = [row for row in rows if row.payload.startswith('{"workflow":')]
    done: list[str] = []
    kept: list[str] = []
    if flows:
        from ..tasks.workflow_rows import admit_workflow_rows  # the queues' face only

        done, kept = admit_workflow_rows(flows)
        rows = [row for row in rows if not row.payload.startswith('{"workflow":')]
    # -- end of workflows
    for row in rows:
        groups.setdefault((row.queue, row.delay_ms, row.run_after_ms, row.priority), []).append(row)
    for (queue, delay_ms, run_after_ms, priority), group in groups.items():
        ids = [row.id for row in group]
        try:
            ledger = queues.get(queue).ledger
            if run_after_ms is not None:
                delay_ms = max(0, run_after_ms - ledger.server_time_ms())
            answers = ledger.admit_many(
                [(row.id, row.payload) for row in group],
                timedelta(milliseconds=delay_ms),
                priority=priority,
            )
        except (LedgerError, ImproperlyConfigured) as exc:
            logger.warning("outbox: %d task(s) of queue %r kept: %s", len(ids), queue, exc)
            kept += ids
            continue
        for answer in answers:
            status = answer.status
            if status in (AdmissionStatus.ADMITTED, AdmissionStatus.DUPLICATE):
                done.append(answer.request_id)
            elif status is AdmissionStatus.FULL:
                kept.append(answer.request_id)
            else:
                logger.error(
                    "outbox: task %r refused by queue %r (%s: %s); its row is dropped",
                    answer.request_id,
                    queue,
                    status.name,
                    answer.reason,
                )
                done.append(answer.request_id)
    return done, kept


def deliver_ids(database: str, ids: Sequence[str]) -> int:
    """Admit the outbox rows of ``ids`` that exist, and delete those delivered.

    Rows of a rolled-back savepoint are gone, so only committed tasks are admitted.
    Return how many were delivered.
    """
    delivered = 0
    manager = OutboxEntry.objects.using(database)
    for start in range(0, len(ids), CHUNK):
        rows = list(manager.filter(pk__in=ids[start : start + CHUNK]))
        done, _ = admit_rows(rows)
        for part in range(0, len(done), CHUNK):
            manager.filter(pk__in=done[part : part + CHUNK]).delete()
        delivered += len(done)
    return delivered
