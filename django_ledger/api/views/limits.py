"""A queue's flow limits: read them with their use, change them at run time.

``GET queues/<queue>/limits/`` needs ``view_queue``; ``POST queues/<queue>/limits/change/``
needs ``limit`` (the
``limit_queue`` permission) and is logged on ``django_ledger.limits`` with the user, as
the admin's change is. docs/limits.md describes the model.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from ...core.limits import LimitUse
from ...permissions import can
from ...services.limits import KEEP, LimitChange, change_limits, parse_rate
from ..errors import invalid
from ..schema import QUEUE, errors, extend_schema
from .base import LedgerViewSet

__all__ = ["LimitsViewSet"]


class RateSerializer(serializers.Serializer[Any]):
    limit = serializers.IntegerField(min_value=1)
    period_ms = serializers.IntegerField(min_value=1)
    burst = serializers.IntegerField(min_value=1)


class KeyUseSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    due = serializers.IntegerField(help_text="its due records waiting in its turn")
    slots_taken = serializers.IntegerField(help_text="its records claimed (under a concurrency)")
    tokens_left = serializers.FloatField(allow_null=True)


class KeyLimitsSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    rate = RateSerializer(
        source="limits.rate", allow_null=True, help_text="its own rate (null: the queue's)"
    )
    concurrency = serializers.IntegerField(
        source="limits.concurrency",
        allow_null=True,
        help_text="its own concurrency (null: the queue's)",
    )
    set_by = serializers.CharField(source="source", help_text="'settings' or 'operator'")


class LimitUseSerializer(serializers.Serializer[Any]):
    queue = serializers.CharField()
    rate = RateSerializer(allow_null=True)
    concurrency = serializers.IntegerField(allow_null=True)
    key = serializers.CharField(allow_null=True, help_text="the KEY: limits hold per key")
    set_by = serializers.CharField(allow_null=True, help_text="'settings' or 'operator'")
    tokens_left = serializers.FloatField(allow_null=True)
    slots_taken = serializers.IntegerField()
    due_now = serializers.IntegerField()
    held = serializers.IntegerField(help_text="due records the limits hold now")
    keys_waiting = serializers.IntegerField()
    keys = KeyUseSerializer(many=True, help_text="the first keys in turn")
    key_limits = KeyLimitsSerializer(
        many=True, help_text="keys with limits of their own (KEY_LIMITS, set_key_limits)"
    )


#: The figures of a queue's use (``view_queue``): a change answers them only to a caller
#: who may read them.
USE_FIELDS = ("tokens_left", "slots_taken", "due_now", "held", "keys_waiting", "keys")


class LimitChangedSerializer(LimitUseSerializer):
    """The limits after a change; their use only for a caller with ``view_queue``."""

    def get_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = super().get_fields()
        for name in USE_FIELDS:
            fields[name].required = False
        return fields


class LimitChangeSerializer(serializers.Serializer[Any]):
    """Absent: keep what is stored; null: remove that limit."""

    rate = serializers.CharField(
        required=False, allow_null=True, max_length=40, help_text="LIMIT/PERIOD[/BURST]"
    )
    concurrency = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=1_000_000_000
    )
    reset = serializers.BooleanField(required=False, default=False)

    def validate_rate(self, value: str | None) -> Any:
        if value is None:
            return None
        try:
            return parse_rate(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc


def _body(queue: str, use: LimitUse) -> dict[str, Any]:
    limits = use.limits
    return {
        "queue": queue,
        "rate": limits.rate,
        "concurrency": limits.concurrency,
        "key": limits.key,
        "set_by": use.source,
        "tokens_left": use.tokens_left,
        "slots_taken": use.slots_taken,
        "due_now": use.due_now,
        "held": use.held,
        "keys_waiting": use.keys_waiting,
        "keys": use.keys,
        "key_limits": use.key_limits,
    }


@extend_schema(tags=["queues"])
class LimitsViewSet(LedgerViewSet):
    action_rules = {"read": ("view_queue", "read"), "change": ("limit", "operate")}

    @extend_schema(
        operation_id="limits",
        summary="A queue's flow limits and their use now",
        parameters=[QUEUE],
        responses={200: LimitUseSerializer, **errors(404)},
    )
    def read(self, request: Request, queue: str) -> Response:
        """Return each limit, its use (tokens left, slots taken, keys waiting) and what
        it holds."""
        return Response(LimitUseSerializer(_body(queue, self.ledger.limits())).data)

    @extend_schema(
        operation_id="limits_change",
        summary="Change a queue's flow limits for every worker, with no restart",
        request=LimitChangeSerializer,
        parameters=[QUEUE],
        responses={200: LimitChangedSerializer, **errors(400, 404)},
    )
    def change(self, request: Request, queue: str) -> Response:
        """Change the stored limits (kept over the settings until ``reset``); the answer
        carries their use (tokens, slots, due records, keys) only for a caller who may
        read it (``view_queue``)."""
        data = self.validated_body(LimitChangeSerializer, 1024)
        change = LimitChange(
            data.get("rate", KEEP), data.get("concurrency", KEEP), data.get("reset", False)
        )
        try:
            use = change_limits(queue, change, actor=f"API user {request.user.get_username()}")
        except (ValueError, ImproperlyConfigured) as exc:
            raise invalid({"limits": [str(exc)]}) from exc
        data = LimitUseSerializer(_body(queue, use)).data
        if not can(request.user, "view_queue", queue):
            for name in USE_FIELDS:
                del data[name]
        return Response(data)
