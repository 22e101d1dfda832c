"""Schedules: list every one, and create, edit, pause, resume and delete stored ones.

``GET schedules/`` and ``GET schedules/<key>/`` need ``view_schedule``; ``POST
schedules/``, ``PUT schedules/<key>/`` and ``DELETE schedules/<key>/`` need
``edit_schedule``; ``POST schedules/<key>/pause/`` and ``.../resume/`` need
``operate_schedule``. A body names the fields of ``LEDGER['SCHEDULES'][key]`` in lower
case (``task``, ``cron``, ``every`` and ``grace`` in seconds, ``at`` in ISO 8601, ...);
a schedule is validated by the rules of the system checks and refused (400, each error
under its field) before anything is stored. An edit or delete carries the ``version``
it read: another change saved since answers 409. docs/scheduler.md tells the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...permissions import can_reach_queue
from ...services import runtime_schedules as runtime
from ...services import scheduler
from ...services.schedule_rows import ScheduleRow, row, rows
from ..errors import ApiError, invalid
from ..schema import errors, extend_schema
from .base import LedgerViewSet

__all__ = ["ScheduleViewSet"]

KEY = OpenApiParameter("key", OpenApiTypes.STR, OpenApiParameter.PATH, description="its key")
#: Body field -> stored field: the fields of ``LEDGER['SCHEDULES'][key]``, in lower case.
FIELDS = {name.lower(): name for name in runtime.FIELDS}
#: The most bytes a schedule's body may take (its payload is bounded by its queue too).
MAX_BODY = 1_048_576


class ScheduleSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    origin = serializers.CharField(help_text="'settings' (changed by a deploy) or 'stored'")
    version = serializers.IntegerField(allow_null=True, help_text="a stored schedule's version")
    schedule = serializers.DictField(help_text="its fields, as LEDGER['SCHEDULES'][key] holds")
    paused = serializers.BooleanField()
    done = serializers.BooleanField(help_text="a one-off schedule that has fired")
    fires = serializers.BooleanField(help_text="whether schedulers run it now")
    why_not = serializers.CharField(allow_blank=True, help_text="why it does not fire")
    saved_by = serializers.CharField(allow_blank=True)


class ScheduleBodySerializer(serializers.Serializer[Any]):
    key = serializers.CharField(required=False, help_text="its name (when creating)")
    version = serializers.IntegerField(required=False, help_text="the version read (edit)")
    task = serializers.JSONField(required=False, allow_null=True)
    cron = serializers.JSONField(required=False, allow_null=True)
    every = serializers.JSONField(required=False, allow_null=True, help_text="seconds")
    at = serializers.JSONField(
        required=False, allow_null=True, help_text="ISO 8601; a one-off schedule"
    )
    timezone = serializers.JSONField(required=False, allow_null=True)
    args = serializers.JSONField(required=False, allow_null=True)
    kwargs = serializers.JSONField(required=False, allow_null=True)
    queue = serializers.JSONField(required=False, allow_null=True)
    priority = serializers.JSONField(required=False, allow_null=True)
    misfire = serializers.JSONField(required=False, allow_null=True)
    grace = serializers.JSONField(required=False, allow_null=True, help_text="seconds")
    enabled = serializers.JSONField(required=False, allow_null=True)


def _body(found: ScheduleRow) -> dict[str, Any]:
    return {
        "key": found.key,
        "origin": found.source,
        "version": found.version,
        "schedule": {name.lower(): value for name, value in found.entry.items()},
        "paused": found.paused,
        "done": found.done,
        "fires": not found.why_not and not found.paused and not found.done,
        "why_not": found.why_not,
        "saved_by": found.by,
    }


@extend_schema(tags=["schedules"])
class ScheduleViewSet(LedgerViewSet):
    action_rules = {
        "list": ("view_schedule", "read"),
        "read": ("view_schedule", "read"),
        "create": ("edit_schedule", "operate"),
        "change": ("edit_schedule", "operate"),
        "remove": ("edit_schedule", "operate"),
        "pause": ("operate_schedule", "operate"),
        "resume": ("operate_schedule", "operate"),
    }

    @extend_schema(
        operation_id="schedules",
        summary="Every schedule: the settings' and the stored ones",
        responses={200: ScheduleSerializer(many=True), **errors()},
    )
    def list(self, request: Request) -> Response:
        """List every schedule, with where it comes from and whether it fires."""
        mine = [_body(r) for r in rows() if _reaches(request.user, r.key, r.entry)]
        return Response(ScheduleSerializer(mine, many=True).data)

    @extend_schema(
        operation_id="schedule",
        summary="One schedule",
        parameters=[KEY],
        responses={200: ScheduleSerializer, **errors(404)},
    )
    def read(self, request: Request, key: str) -> Response:
        """Return one schedule."""
        return Response(ScheduleSerializer(_body(self._row(key))).data)

    @extend_schema(
        operation_id="schedule_create",
        summary="Store a new schedule; it fires from its next fire after now",
        request=ScheduleBodySerializer,
        responses={201: ScheduleSerializer, **errors(400, 409)},
    )
    def create(self, request: Request) -> Response:
        """Store a schedule; every running scheduler picks it up at its next tick."""
        key, _, entry = self._entry(request)
        if not isinstance(key, str):
            raise invalid({"key": [gettext("Give the schedule's key.")]})
        self._may_reach(key, entry)
        with _refusals():
            runtime.create(key, entry, self._who(request))
        return Response(ScheduleSerializer(_body(self._row(key))).data, status=201)

    @extend_schema(
        operation_id="schedule_change",
        summary="Replace a stored schedule; a new timing fires from its next fire after now",
        request=ScheduleBodySerializer,
        parameters=[KEY],
        responses={200: ScheduleSerializer, **errors(400, 404, 409)},
    )
    def change(self, request: Request, key: str) -> Response:
        """Replace every field of a stored schedule (send ``version`` to guard the edit)."""
        _, version, entry = self._entry(request)
        self._stored(key)
        self._may_reach(key, entry)
        with _refusals():
            runtime.edit(key, entry, self._who(request), version)
        return Response(ScheduleSerializer(_body(self._row(key))).data)

    @extend_schema(
        operation_id="schedule_delete",
        summary="Delete a stored schedule: no fire of it is admitted from now",
        parameters=[
            KEY,
            OpenApiParameter("version", OpenApiTypes.INT, description="the version read"),
        ],
        responses={204: None, **errors(404, 409)},
    )
    def remove(self, request: Request, key: str) -> Response:
        """Delete a stored schedule, its pause and its pending fires."""
        self._stored(key)
        text = request.query_params.get("version")
        if text is not None and not text.isdecimal():
            raise invalid({"version": [gettext("A version is a whole number.")]})
        with _refusals():
            runtime.delete(key, self._who(request), None if text is None else int(text))
        return Response(status=204)

    @extend_schema(
        operation_id="schedule_pause",
        summary="Pause a schedule (settings' or stored) on every node",
        request=None,
        parameters=[KEY],
        responses={200: ScheduleSerializer, **errors(404)},
    )
    def pause(self, request: Request, key: str) -> Response:
        """Pause a schedule: from their next tick, no node admits its fires."""
        return self._switch(
            request, key, lambda: scheduler.pause(key, self._who(request)), "paused"
        )

    @extend_schema(
        operation_id="schedule_resume",
        summary="Resume a paused schedule; fires due while paused stay unrun",
        request=None,
        parameters=[KEY],
        responses={200: ScheduleSerializer, **errors(404)},
    )
    def resume(self, request: Request, key: str) -> Response:
        """Resume a schedule."""
        return self._switch(request, key, lambda: scheduler.resume(key), "resumed")

    # -- helpers ----------------------------------------------------------------------

    def _switch(self, request: Request, key: str, act: Callable[[], object], done: str) -> Response:
        """Pause or resume a schedule, logged with who did."""
        # Read (and so check) a body sent where none is needed, as every endpoint does.
        self.check_body_size(1024)
        _ = request.data
        self._row(key)
        act()
        runtime.logger.info("schedule %r %s by %s", key, done, self._who(request))
        return Response(ScheduleSerializer(_body(self._row(key))).data)

    def _who(self, request: Request) -> str:
        return f"API user {request.user.get_username()}"

    def _row(self, key: str) -> ScheduleRow:
        try:
            found = row(key)
        except LookupError as exc:
            raise ApiError(404, "schedule_not_found", str(exc), {"key": key}) from exc
        if not _reaches(self.request.user, key, found.entry):
            message = gettext("There is no schedule %(key)r.") % {"key": key}
            raise ApiError(404, "schedule_not_found", message, {"key": key})
        return found

    def _may_reach(self, key: str, entry: dict[str, Any]) -> None:
        """Refuse a schedule whose fires go to a queue the caller may not reach."""
        queue = runtime.queue_of(key, entry)
        if queue is not None and not can_reach_queue(self.request.user, queue):
            raise ApiError(
                404,
                "queue_not_found",
                gettext("There is no queue %(queue)r for you.") % {"queue": queue},
            )

    def _stored(self, key: str) -> None:
        if self._row(key).source == "settings":
            raise ApiError(
                409,
                "schedule_in_settings",
                gettext(
                    "LEDGER['SCHEDULES'] defines %(key)r: it changes by a deploy, not at run "
                    "time (its pause still works)."
                )
                % {"key": key},
                {"key": key},
            )

    def _entry(self, request: Request) -> tuple[Any, int | None, dict[str, Any]]:
        self.check_body_size(MAX_BODY)
        if not isinstance(request.data, dict):
            raise invalid({"__all__": [gettext("Send a JSON object.")]})
        unknown = sorted(set(request.data) - set(FIELDS) - {"key", "version"})
        if unknown:
            raise invalid({name: [gettext("Unknown field.")] for name in unknown})
        data = self.validated(ScheduleBodySerializer, request.data)
        entry = {FIELDS[name]: value for name, value in data.items() if name in FIELDS}
        return data.get("key"), data.get("version"), entry


def _reaches(user: Any, key: str, entry: dict[str, Any]) -> bool:
    """Whether ``user`` reaches the queue of schedule ``key`` (one with none: superusers)."""
    queue = entry.get("QUEUE") or runtime.queue_of(key, entry)
    if not isinstance(queue, str):
        return bool(getattr(user, "is_superuser", False))
    return can_reach_queue(user, queue)


@contextmanager
def _refusals() -> Iterator[None]:
    """Turn the service's refusals into the API's answers."""
    try:
        yield
    except runtime.ScheduleInvalid as exc:
        details = {name.lower(): words for name, words in exc.errors.items()}
        raise invalid(details) from exc
    except runtime.VersionConflict as exc:
        raise ApiError(
            409,
            "schedule_conflict",
            gettext(
                "Another change to this schedule was saved first (it is at version "
                "%(current)s): read it again."
            )
            % {"current": exc.current},
            {"version": exc.current},
        ) from exc
    except runtime.RuntimeSchedulesOff as exc:
        raise ApiError(409, "runtime_schedules_off", str(exc)) from exc
    except LookupError as exc:
        raise ApiError(404, "schedule_not_found", str(exc)) from exc
