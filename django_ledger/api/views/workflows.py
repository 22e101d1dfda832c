"""Read a workflow's status: its steps in order, with states, return values and errors.

A page of steps at a time (``offset``, ``limit``: ``PAGE_SIZE`` by default, at most
``MAX_PAGE_SIZE``); the workflow's totals cover every step. The same permission as
reading a record (``view`` on the queue). Mounted with
``path(Q + "workflows/<ledger_request_id:workflow_id>/", WorkflowViewSet.as_view({"get":
"retrieve"}), name="workflow")`` in ``api/urls.py`` (docs/workflows.md).
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.flows import read_workflow
from ...tasks.workflow_state import STEP_STATES, WorkflowState, state_of
from ..conf import api_settings
from ..errors import ApiError, check_request_id, invalid
from ..schema import QUEUE, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["WorkflowSerializer", "WorkflowViewSet", "workflow_data"]

WORKFLOW_ID = OpenApiParameter(
    "workflow_id",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The workflow id given to enqueue (or the one it made), percent-encoded.",
    pattern=r"^[^\x00-\x1f\x7f/.][^\x00-\x1f\x7f/]{0,255}$",
)
OFFSET = OpenApiParameter(
    "offset",
    OpenApiTypes.INT,
    OpenApiParameter.QUERY,
    description="The position of the first step to answer (0, the default: the first).",
)
LIMIT = OpenApiParameter(
    "limit",
    OpenApiTypes.INT,
    OpenApiParameter.QUERY,
    description="How many steps to answer (the API's PAGE_SIZE by default, at most MAX_PAGE_SIZE).",
)


class WorkflowStepSerializer(serializers.Serializer[Any]):
    """One step of a workflow."""

    name = serializers.CharField()
    task_id = serializers.CharField(help_text="The step's task id (its request id).")
    task = serializers.CharField(allow_null=True, help_text="The task's dotted path.")
    parents = serializers.ListField(child=serializers.CharField(), help_text="Step names.")
    on_failure = serializers.ChoiceField(choices=["cancel", "continue"])
    state = serializers.ChoiceField(choices=list(STEP_STATES))
    attempts = serializers.IntegerField()
    waiting_for = serializers.IntegerField(
        allow_null=True, help_text="Parents not ended yet, while WAITING."
    )
    cancelled_by = serializers.CharField(
        allow_null=True, help_text="The parent step id that cancelled it ('' the operator)."
    )
    return_value = serializers.JSONField(allow_null=True)
    # DRF takes declared fields off the class: Serializer.errors stays what it is.
    errors = serializers.ListField(  # type: ignore[assignment]
        child=serializers.CharField(), help_text="Each error's last line, oldest first."
    )


class WorkflowSerializer(serializers.Serializer[Any]):
    """A workflow: its steps in the order they were given."""

    workflow_id = serializers.CharField()
    queue = serializers.CharField()
    finished = serializers.BooleanField(help_text="Every step has ended.")
    successful = serializers.BooleanField(help_text="Every step COMPLETED.")
    cancelled = serializers.BooleanField()
    total_steps = serializers.IntegerField(help_text="How many steps the workflow has.")
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="State -> how many steps are in it (all)."
    )
    offset = serializers.IntegerField(help_text="The position of the first step answered.")
    next_offset = serializers.IntegerField(
        allow_null=True, help_text="The offset of the next page of steps; null after the last."
    )
    steps = WorkflowStepSerializer(many=True, help_text="One page of steps, in the order given.")


def workflow_data(state: WorkflowState) -> dict[str, Any]:
    """Return ``state`` (one page of its steps) as ``WorkflowSerializer`` documents it."""
    after = state.offset + len(state.steps)
    return {
        "workflow_id": state.id,
        "queue": state.queue,
        "finished": state.finished,
        "successful": state.successful,
        "cancelled": state.cancelled,
        "total_steps": state.total,
        "counts": dict(sorted(state.counts.items())),
        "offset": state.offset,
        "next_offset": after if after < state.total else None,
        "steps": WorkflowStepSerializer(state.steps, many=True).data,
    }


@extend_schema(tags=["tasks"])
class WorkflowViewSet(LedgerViewSet):
    action_rules = {"retrieve": ("view", "read")}

    @extend_schema(
        operation_id="workflow",
        summary="Read a workflow's status by its id",
        description=(
            "Its steps in the order given, each with its state (WAITING, PENDING, CLAIMED, "
            "COMPLETED, FAILED, DEAD, CANCELLED, GONE), return value and errors "
            "(see 'Workflows' in the django-ledger docs), a page at a time (`offset`, "
            "`limit`; `next_offset` leads on). 404 `workflow_not_found` for an id the queue "
            "does not hold."
        ),
        parameters=[QUEUE, WORKFLOW_ID, OFFSET, LIMIT],
        responses={200: WorkflowSerializer, **errors(400, 404)},
    )
    def retrieve(self, request: Request, queue: str, workflow_id: str) -> Response:
        """Read one workflow's steps from the queue's flows hash and their records."""
        check_request_id(workflow_id, gettext("The workflow id is not usable (%(problem)s)."))
        offset = _number(request, "offset", 0)
        limit = min(_number(request, "limit", api_settings.page_size), api_settings.max_page_size)
        if limit < 1:
            raise invalid({"limit": [gettext("A positive integer is required.")]})
        if len(self.ledger.shards) != 1:
            status = None  # a sharded queue holds no workflows
        else:
            status = read_workflow(self.ledger, workflow_id, offset=offset, limit=limit)
        if status is None:
            raise ApiError(
                404,
                "workflow_not_found",
                gettext("No workflow has this id on this queue."),
                {"workflow_id": workflow_id},
            )
        return Response(workflow_data(state_of(status)))


def _number(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise invalid(
            {name: [gettext("An integer of at least 0 (and at most 999,999,999) is required.")]}
        )
    return int(raw)
