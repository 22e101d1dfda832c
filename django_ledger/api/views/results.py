"""Read a task's result: the task as Django's ``TaskResult`` shows it, by its id.

The same permission as reading a record (``view`` on the queue): a result is the
record's, read with its stored result document (``django_ledger.tasks.state``), so any
language can follow a task it enqueued through the API.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.jobs import payload_problem
from ...tasks.state import TaskState
from ...tasks.store import read_tasks
from ..errors import ApiError, check_request_id, record_not_found
from ..schema import QUEUE, REQUEST_ID, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["TaskResultSerializer", "TaskResultViewSet", "result_data"]

TASK_STATUSES = ["READY", "RUNNING", "SUCCESSFUL", "FAILED"]


class TaskErrorSerializer(serializers.Serializer[Any]):
    """One attempt's error, as Django's ``TaskError``."""

    exception_class_path = serializers.CharField()
    traceback = serializers.CharField()


class ProgressSerializer(serializers.Serializer[Any]):
    """What a task last reported with ``context.set_progress``."""

    done = serializers.FloatField(help_text="How much is done.")
    total = serializers.FloatField(allow_null=True, help_text="Out of how much (null: unknown).")
    note = serializers.CharField(allow_blank=True)
    fraction = serializers.FloatField(
        allow_null=True, help_text="done / total, 0 to 1 (null while the total is unknown)."
    )
    fence = serializers.IntegerField(
        help_text="The fence of the attempt that wrote it: another than the record's is an "
        "earlier attempt's."
    )
    at = serializers.IntegerField(help_text="When it was written, epoch ms (Redis clock).")


class TaskResultSerializer(serializers.Serializer[Any]):
    """A task's result; instants in epoch milliseconds (Redis clock), null until known."""

    request_id = serializers.CharField(help_text="The task's id (Django's TaskResult.id).")
    queue = serializers.CharField()
    task = serializers.CharField(help_text="The task's dotted path.")
    status = serializers.ChoiceField(choices=TASK_STATUSES)
    # A plain string: an enum here would clash with the record's in the schema's names.
    record_state = serializers.CharField(
        help_text="The ledger record's state: PENDING, CLAIMED, COMPLETED, FAILED or DEAD "
        "(its last worker died)."
    )
    args = serializers.ListField(child=serializers.JSONField())
    kwargs = serializers.DictField(child=serializers.JSONField())
    options = serializers.DictField(
        child=serializers.JSONField(), help_text="The options set for this call in its payload."
    )
    enqueued_at = serializers.IntegerField(allow_null=True)
    started_at = serializers.IntegerField(allow_null=True)
    last_attempted_at = serializers.IntegerField(allow_null=True)
    finished_at = serializers.IntegerField(allow_null=True)
    attempts = serializers.IntegerField(help_text="Attempts so far, the running one included.")
    worker_ids = serializers.ListField(
        child=serializers.CharField(), help_text="One per attempt, in order."
    )
    # DRF takes declared fields off the class: Serializer.errors stays what it is.
    errors = TaskErrorSerializer(many=True, help_text="One per attempt that raised, in order.")  # type: ignore[assignment]
    has_return_value = serializers.BooleanField(help_text="True once the task returned.")
    return_value = serializers.JSONField(allow_null=True, help_text="What the task returned.")
    progress = ProgressSerializer(
        allow_null=True, help_text="The task's last progress report (null: none yet)."
    )
    metadata = serializers.DictField(
        child=serializers.JSONField(), help_text="The task's metadata (context.metadata)."
    )


def result_data(state: TaskState) -> dict[str, Any]:
    """Return ``state`` as ``TaskResultSerializer`` documents it."""
    payload = state.payload
    assert payload is not None
    return {
        "request_id": state.request_id,
        "queue": state.queue,
        "task": payload.task,
        "status": state.status,
        "record_state": state.record.state.value,
        "args": payload.args,
        "kwargs": payload.kwargs,
        "options": payload.options,
        "enqueued_at": state.enqueued_at,
        "started_at": state.started_at,
        "last_attempted_at": state.last_attempted_at,
        "finished_at": state.finished_at,
        "attempts": len(state.worker_ids),
        "worker_ids": state.worker_ids,
        "errors": [
            {
                "exception_class_path": str(error.get("exception_class_path", "")),
                "traceback": str(error.get("traceback", "")),
            }
            for error in state.errors
        ],
        "has_return_value": state.has_return_value,
        "return_value": state.return_value,
        "progress": None if state.progress is None else state.progress.as_dict(),
        "metadata": {} if state.progress is None else state.progress.metadata,
    }


@extend_schema(tags=["tasks"])
class TaskResultViewSet(LedgerViewSet):
    action_rules = {"retrieve": ("view", "read")}

    @extend_schema(
        operation_id="task_result",
        summary="Read a task's result by its id",
        description=(
            "A task's status, times, attempts, errors and return value, as Django's "
            "TaskResult holds them ('Tasks' in the django-ledger docs). 404 "
            "`record_not_found` for an unknown id, 404 `not_a_task` for a record whose "
            "payload is not a task document this version reads (`details.reason` says why)."
        ),
        parameters=[QUEUE, REQUEST_ID],
        responses={200: TaskResultSerializer, **errors(400, 404, 409)},
    )
    def retrieve(self, request: Request, queue: str, request_id: str) -> Response:
        """Read one task's result, from its record and its stored result document."""
        check_request_id(request_id)
        state = read_tasks([self.ledger], [request_id])[0]  # corrupt: 409 record_corrupt
        if state is None:
            raise record_not_found(request_id)
        if state.payload is None:
            reason = payload_problem(state.record.payload) or gettext("it changed while read")
            raise ApiError(
                404,
                "not_a_task",
                gettext(
                    "The record's payload is not a task document (see 'Keys and record "
                    "encoding' in the django-ledger docs): %(reason)s."
                )
                % {"reason": reason},
                {"request_id": request_id, "reason": reason},
            )
        return Response(result_data(state))
