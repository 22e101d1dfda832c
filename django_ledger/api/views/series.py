"""A queue's counters over time: the series the admin's charts draw, as JSON.

The same numbers, names and bucket edges as the worker's Prometheus metrics
(``ledger_tasks`` by ``outcome``, ``ledger_task_seconds``, ``ledger_queue_depth`` and
``ledger_queue_records`` by state), read from the counters the workers flush
(``core/counters.py``) in one script call (one more per further shard).
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...conf import ledger_settings
from ...core.counters import EDGES, OUTCOMES, WINDOWS, Counters, Depth, Stat, rounded
from ...core.records import ms_to_datetime
from ..errors import invalid
from ..schema import QUEUE, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["SeriesViewSet"]

WINDOW = OpenApiParameter(
    "window",
    str,
    OpenApiParameter.QUERY,
    required=False,
    enum=list(WINDOWS),
    description="hour: 60 one-minute buckets; day: 24 one-hour buckets; week: 168 one-hour buckets",
)


class OutcomesSerializer(serializers.Serializer[Any]):
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    retry = serializers.IntegerField()
    lost = serializers.IntegerField()
    dead = serializers.IntegerField()


class QuantilesSerializer(serializers.Serializer[Any]):
    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    p99 = serializers.FloatField(allow_null=True)


class RecordsSerializer(serializers.Serializer[Any]):
    pending_due = serializers.IntegerField()
    claimed = serializers.IntegerField()
    dead = serializers.IntegerField()


class PointSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField()
    ledger_tasks = OutcomesSerializer()
    ledger_task_seconds = QuantilesSerializer(help_text="Run time of the attempts, seconds")
    ledger_wait_seconds = QuantilesSerializer(help_text="Due to start of ended ones, seconds")


class BucketSerializer(PointSerializer):
    ledger_queue_depth = serializers.IntegerField(
        allow_null=True,
        help_text="PENDING records (due and later): the most a worker's sample saw in the "
        "bucket; null when no worker sampled the queue in it",
    )
    ledger_queue_records = RecordsSerializer(
        allow_null=True,
        help_text="Records by state, each the most a sample saw in the bucket (the depth "
        "chart's lines); null when no worker sampled the queue in it",
    )


class TaskSeriesSerializer(PointSerializer):
    start = None  # type: ignore[assignment]
    task = serializers.CharField()
    failure_rate = serializers.FloatField(allow_null=True)


class SeriesSerializer(serializers.Serializer[Any]):
    queue = serializers.CharField()
    window = serializers.ChoiceField(choices=list(WINDOWS))
    bucket_seconds = serializers.IntegerField()
    now = serializers.DateTimeField()
    bucket_edges = serializers.ListField(child=serializers.FloatField())
    buckets = BucketSerializer(many=True)
    tasks = TaskSeriesSerializer(many=True)


def _depth(depth: Depth | None) -> dict[str, Any]:
    if depth is None:
        return {"ledger_queue_depth": None, "ledger_queue_records": None}
    return {
        "ledger_queue_depth": depth.pending,
        "ledger_queue_records": {
            "pending_due": depth.due,
            "claimed": depth.claimed,
            "dead": depth.dead,
        },
    }


def _point(stat: Stat) -> dict[str, Any]:
    q = stat.quantiles()
    return {
        "ledger_tasks": {name: stat.counts[name] for name in OUTCOMES},
        "ledger_task_seconds": {f"p{p}": rounded(q[f"run_p{p}"]) for p in (50, 95, 99)},
        "ledger_wait_seconds": {f"p{p}": rounded(q[f"wait_p{p}"]) for p in (50, 95, 99)},
    }


class SeriesViewSet(LedgerViewSet):
    action_rules = {"series": ("view_queue", "read")}

    @extend_schema(
        operation_id="series",
        summary="A queue's outcomes, times and depth over the last hour, day or week",
        tags=["queues"],
        parameters=[QUEUE, WINDOW],
        responses={200: SeriesSerializer, **errors(400, 404)},
    )
    def series(self, request: Request, queue: str) -> Response:
        """Counts by outcome, run and wait time quantiles and depth per bucket; per task."""
        window = request.query_params.get("window", "hour")
        if window not in WINDOWS:
            raise invalid(
                {
                    "window": [
                        gettext("must be one of %(windows)s") % {"windows": ", ".join(WINDOWS)}
                    ]
                }
            )
        ledger = self.ledger
        with ledger.translate_errors():
            series = Counters(ledger.redis, ledger_settings.namespace).read(
                queue, window, shards=getattr(ledger, "shard_count", 1)
            )
        body = {
            "queue": queue,
            "window": window,
            "bucket_seconds": series.bucket_seconds,
            "now": ms_to_datetime(series.now_ms),
            "bucket_edges": list(EDGES),
            "buckets": [
                {"start": ms_to_datetime(start), **_point(stat), **_depth(depth)}
                for start, stat, depth in zip(
                    series.starts, series.buckets, series.depth, strict=True
                )
            ],
            "tasks": [
                {"task": name, "failure_rate": rounded(stat.failure_rate), **_point(stat)}
                for name, stat in series.tasks().items()
            ],
        }
        return Response(SeriesSerializer(body).data)
