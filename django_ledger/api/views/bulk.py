"""Act on everything a filter matches: ``POST /api/queues/{q}/records/bulk/``.

The filter is the records list's (states, a task, time ranges), validated by the one
parser every face shares (``services/bulk_filter.py``). ``"preview": true`` only counts;
otherwise a run starts and goes on for about two seconds of pages: the answer is 200
when it has ended, else 202 with the run, which the client steps on by posting
``{"run": id}`` until it has. Each action needs its own permission on the queue
(retry, fail, purge; cancel: operate).
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.bulk import ACTIONS
from ...core.cancelling import MAX_REASON_BYTES
from ...core.records import State
from ...permissions import can
from ...services.bulk import BulkBusy, load_run, preview, start_run, step_run
from ...services.bulk_filter import PERMISSION, BulkForbidden, BulkRefused, parse_filter
from ..errors import ApiError
from ..schema import QUEUE, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["BulkViewSet"]

#: Seconds of pages one call runs before it answers 202.
STEP_SECONDS = 2.0


def _time(help_text: str = "") -> serializers.CharField:
    return serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=40, help_text=help_text
    )


class BulkRequestSerializer(serializers.Serializer[Any]):
    action = serializers.ChoiceField(choices=list(ACTIONS), required=False)
    state = serializers.ListField(
        child=serializers.CharField(max_length=20),
        required=False,
        max_length=len(State),
        help_text="States to act on: PENDING, CLAIMED, COMPLETED, FAILED, DEAD (default: "
        "every state the action applies to).",
    )
    task = serializers.CharField(required=False, allow_blank=True, max_length=250)
    due_after = _time("ISO 8601 (UTC) or epoch ms; inclusive.")
    due_before = _time()
    lease_after = _time()
    lease_before = _time()
    ended_after = _time()
    ended_before = _time()
    preview = serializers.BooleanField(required=False, default=False)
    run = serializers.RegexField(
        r"^[0-9a-f]{32}$", required=False, help_text="Step on this run instead."
    )
    reason = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=MAX_REASON_BYTES // 4
    )


class BulkRunSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    filter = serializers.DictField()
    by = serializers.CharField()
    reason = serializers.CharField()
    created = serializers.IntegerField(help_text="When it started (epoch ms).")
    matched = serializers.IntegerField(help_text="What the filter matched when it started.")
    state = serializers.CharField(help_text="`running`, or `finished` once it has ended.")
    done = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="Records that had moved on meanwhile.")
    finished_at = serializers.IntegerField(allow_null=True)


class BulkPreviewSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    filter = serializers.DictField()


class BulkViewSet(LedgerViewSet):
    action_rules = {"bulk": ("view", "operate")}

    @extend_schema(
        operation_id="records_bulk",
        summary="Retry, fail, purge or cancel every record a filter matches",
        description=(
            "Each record changes by compare-and-set on the bytes matched: one that moved "
            "on meanwhile is skipped and counted. 200: the run has ended; 202: it goes on "
            '(post `{"run": id}` to step it on). 400 `invalid_filter`, 403 for an action '
            "the caller may not take on the queue, 409 `run_busy` while another call steps "
            "the run."
        ),
        request=BulkRequestSerializer,
        parameters=[QUEUE],
        responses={
            200: BulkRunSerializer,
            202: BulkRunSerializer,
            **errors(400, 403, 404, 409),
        },
    )
    def bulk(self, request: Request, queue: str) -> Response:
        """Preview, start or step a bulk run."""
        data = self.validated_body(BulkRequestSerializer, 4096)
        user = request.user
        try:
            if data.get("run"):
                run = load_run(queue, data["run"])
                action = run.filter.action
                if not can(user, PERMISSION[action], queue):
                    raise BulkForbidden(
                        gettext("you may not %(action)s records of queue %(queue)r")
                        % {"action": action, "queue": queue}
                    )
            else:
                if not data.get("action"):
                    raise BulkRefused(gettext("name the action (or the run to step on)"))
                spec = parse_filter(
                    queue,
                    data["action"],
                    may=lambda permission, name: can(user, permission, name),
                    states=data.get("state") or None,
                    task=data.get("task") or None,
                    bounds={
                        "due_at": (data.get("due_after"), data.get("due_before")),
                        "lease_until": (data.get("lease_after"), data.get("lease_before")),
                        "updated_at": (data.get("ended_after"), data.get("ended_before")),
                    },
                )
                if data["preview"]:
                    body = {"count": preview(spec), "filter": spec.as_dict()}
                    return Response(BulkPreviewSerializer(body).data)
                by = str(user.get_username()) if hasattr(user, "get_username") else str(user)
                run = start_run(spec, by=by, user_id=user.pk, reason=data["reason"])
            run = step_run(queue, run.id, seconds=STEP_SECONDS)
        except BulkForbidden as exc:
            raise ApiError(403, "permission_denied", str(exc)) from exc
        except BulkBusy as exc:
            raise ApiError(409, "run_busy", str(exc)) from exc
        except BulkRefused as exc:
            raise ApiError(400, "invalid_filter", str(exc)) from exc
        return Response(BulkRunSerializer(run.as_dict()).data, status=200 if run.finished else 202)
