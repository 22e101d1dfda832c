"""A workflow as one outbox row (kind ``workflow``): its encoding, and its delivery.

``tasks/workflows.py`` stages such a row; ``delivery.py`` hands the rows of that kind
here, and each is admitted whole with the core's ``admit_workflow``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..core.errors import LedgerError
from ..core.flows import FlowStep, admit_workflow
from ..core.results import AdmissionStatus
from ..queues import queues

__all__ = ["ROW_MARK", "admit_workflow_rows", "row_id", "row_of"]

logger = logging.getLogger("django_ledger.outbox")

#: How the payload of a workflow row starts: ``{"workflow": {"id": ..., "steps": [...]}}``.
ROW_MARK = '{"workflow":'


def row_of(flow_id: str, steps: list[FlowStep]) -> str:
    spec = [
        [s.name, s.payload, list(s.parents), s.on_failure, s.inputs, s.head, s.tail] for s in steps
    ]
    return ROW_MARK + json.dumps({"id": flow_id, "steps": spec}, ensure_ascii=False) + "}"


def row_id(flow_id: str) -> str:
    """The outbox row id of a staged workflow."""
    return "workflow:" + flow_id


def admit_workflow_rows(rows: Iterable[Any]) -> tuple[list[str], list[str]]:
    """Admit outbox rows that hold workflows; return the row ids done with and those kept.

    As ``delivery.admit_rows`` for tasks: admitted or duplicate are done, a
    conflict is logged and done, Redis away or a full queue keeps the row for the relay.
    """
    done: list[str] = []
    kept: list[str] = []
    for row in rows:
        try:
            spec = json.loads(row.payload[len(ROW_MARK) : -1])
            steps = [
                FlowStep(name, payload, tuple(parents), on_failure, inputs, head, tail)
                for name, payload, parents, on_failure, inputs, head, tail in spec["steps"]
            ]
            ledger = queues.get(row.queue).ledger
            if len(ledger.shards) != 1:  # staged by an earlier version: never deliverable
                logger.error(
                    "outbox: workflow row %r is for queue %r, which has %d shards: workflows "
                    "need a queue of one shard; its row is dropped",
                    row.id,
                    row.queue,
                    len(ledger.shards),
                )
                done.append(row.id)
                continue
            answer = admit_workflow(ledger, spec["id"], steps)
        except (LedgerError, ImproperlyConfigured, ValueError, TypeError, KeyError) as exc:
            if isinstance(exc, LedgerError | ImproperlyConfigured):  # kept, as for tasks
                logger.warning("outbox: workflow row %r kept: %s", row.id, exc)
                kept.append(row.id)
            else:
                logger.error("outbox: workflow row %r is not a workflow (%s); dropped", row.id, exc)
                done.append(row.id)
            continue
        if answer.status is AdmissionStatus.FULL:
            kept.append(row.id)
            continue
        if answer.status is AdmissionStatus.CONFLICT:
            logger.error(
                "outbox: workflow %r refused (%s); its row is dropped", row.id, answer.reason
            )
        done.append(row.id)
    return done, kept
