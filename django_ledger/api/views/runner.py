"""Run due tasks in the request: ``POST queues/<queue>/run/``, for hosts with no worker.

Off unless the project mounts it (``django_ledger.api.runner_urls``, apart from the rest
of the API). It needs the ``claim`` permission on the queue, as claiming over the API
does; ``services/serverless.py`` runs the tasks with the worker's own runtime.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...conf import ledger_settings
from ...services.serverless import MAX_LIMIT, budget_for, run_due
from ..errors import ApiError
from ..schema import QUEUE, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["RunnerViewSet"]

#: A run's body holds two numbers.
SMALL_BODY = 1024


class RunRequestSerializer(serializers.Serializer[Any]):
    limit = serializers.IntegerField(
        min_value=1, max_value=MAX_LIMIT, default=10, help_text="the most tasks to claim"
    )
    budget = serializers.FloatField(
        required=False,
        min_value=0.001,
        help_text="seconds to claim for, less than the queue's lease (default: half of it)",
    )


class RanSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    outcome = serializers.ChoiceField(["completed", "failed", "retry", "lost"])
    attempt = serializers.IntegerField()
    fence = serializers.IntegerField()


class RunCountsSerializer(serializers.Serializer[Any]):
    claimed = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    retried = serializers.IntegerField()
    lost = serializers.IntegerField()
    unfinished = serializers.IntegerField(
        help_text="claimed, still running when the request ended: left to their leases"
    )


class RunReportSerializer(serializers.Serializer[Any]):
    queue = serializers.CharField()
    worker_id = serializers.CharField()
    budget = serializers.FloatField()
    seconds = serializers.FloatField()
    counts = RunCountsSerializer()
    ran = RanSerializer(many=True)


@extend_schema(tags=["runner"])
class RunnerViewSet(LedgerViewSet):
    action_rules = {"run": ("claim", "claim")}

    @extend_schema(
        operation_id="run",
        summary="Claim up to `limit` due tasks and run them in this request",
        request=RunRequestSerializer,
        parameters=[QUEUE],
        responses={200: RunReportSerializer, **errors(400, 404)},
    )
    def run(self, request: Request, queue: str) -> Response:
        """Run due tasks of the queue within a budget; say what ran."""
        data = self.validated_body(RunRequestSerializer, SMALL_BODY)
        try:
            budget = budget_for(queue, data.get("budget"))
        except ValueError:
            raise ApiError(
                400,
                "invalid_budget",
                gettext("The budget must be more than 0 seconds and less than the lease."),
                {"lease": ledger_settings.queue(queue).lease.total_seconds()},
            ) from None
        try:
            report = run_due(queue, data["limit"], budget)
        except (ValueError, ImproperlyConfigured):
            raise ApiError(
                400,
                "not_runnable",
                gettext("This queue's tasks cannot run here: its handler does not load."),
            ) from None
        return Response(report.as_data())
