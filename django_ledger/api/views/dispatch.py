"""The dispatch registry: which node dispatched which cron fire.

Keys are shared like queues: ``LEDGER['DISPATCH']['GROUPS']`` maps key prefixes to
the groups that may use them (``django_ledger.permissions.can_reach_dispatch_key``).
A key the caller may not use answers 403 ``dispatch_key_forbidden`` before the
registry is asked anything, so the answer says nothing about what is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from ... import conf
from ...core.dispatch import CorruptDispatch, Dispatch, DispatchRegistry
from ...permissions import can_reach_dispatch_key
from ..errors import ApiError
from ..schema import errors, extend_schema
from ..serializers import (
    DispatchCheckSerializer,
    DispatchClaimResultSerializer,
    DispatchClaimSerializer,
    DispatchLogSerializer,
    DispatchQuerySerializer,
    DispatchSerializer,
)
from .base import LedgerViewSet

__all__ = ["DispatchViewSet"]

T = TypeVar("T")


@extend_schema(tags=["dispatch"])
class DispatchViewSet(LedgerViewSet):
    action_rules = {
        "log": ("claim", "claim"),
        "claim": ("claim", "claim"),
        "find": ("view", "read"),
        "check": ("view", "read"),
    }

    def fire(
        self, serializer_class: type[Serializer[Any]], data: Any
    ) -> tuple[dict[str, Any], DispatchRegistry]:
        """Validate a fire (key and time), refusing a key the caller may not use; return it
        and the dispatch registry."""
        fire = self.validated(serializer_class, data)
        key = fire["key"]
        if not can_reach_dispatch_key(self.request.user, key):
            raise ApiError(
                403,
                "dispatch_key_forbidden",
                gettext(
                    "The dispatch key %(key)r is not yours to use (LEDGER['DISPATCH']['GROUPS'])."
                )
                % {"key": key},
                {"key": key},
            )
        return fire, conf.get_dispatch_registry()

    @extend_schema(
        operation_id="dispatch_log",
        summary="Record (or overwrite) the dispatch of one cron fire",
        request=DispatchLogSerializer,
        responses={201: DispatchSerializer, **errors(400, 409)},
    )
    def log(self, request: Request) -> Response:
        """Record the dispatch of a fire, by this node unless node_id is given."""
        self.check_body_size(4096)
        data, registry = self.fire(DispatchLogSerializer, request.data)
        node_id = data.get("node_id") or conf.dispatch_node_id()
        dispatch = _call(
            registry.log_dispatch, data["key"], data["fire_time"], node_id, data["status"]
        )
        return Response(dispatch_data(dispatch), status=201)

    @extend_schema(
        operation_id="dispatch_find",
        summary="Find the dispatch of one cron fire",
        parameters=[DispatchQuerySerializer],
        responses={200: DispatchSerializer, **errors(400, 404, 409)},
    )
    def find(self, request: Request) -> Response:
        """Return the kept dispatch of a fire (404 dispatch_not_found if none)."""
        data, registry = self.fire(DispatchQuerySerializer, request.query_params)
        dispatch = _call(registry.find_dispatch, data["key"], data["fire_time"])
        if dispatch is None:
            raise ApiError(404, "dispatch_not_found", gettext("No dispatch of this fire is kept."))
        return Response(dispatch_data(dispatch))

    @extend_schema(
        operation_id="dispatch_check",
        summary="Say whether one cron fire was dispatched",
        parameters=[DispatchQuerySerializer],
        responses={200: DispatchCheckSerializer, **errors(400, 409)},
    )
    def check(self, request: Request) -> Response:
        """Say whether a fire has a kept dispatch."""
        data, registry = self.fire(DispatchQuerySerializer, request.query_params)
        dispatched = _call(registry.is_dispatched, data["key"], data["fire_time"])
        return Response({"dispatched": dispatched})

    @extend_schema(
        operation_id="dispatch_claim",
        summary="Claim one cron fire: exactly one node wins it",
        request=DispatchClaimSerializer,
        responses={
            201: OpenApiResponse(DispatchClaimResultSerializer, description="You won the fire."),
            **errors(400, 409),
        },
    )
    def claim(self, request: Request) -> Response:
        """Claim a fire for a node: 201 for the winner, 409 dispatch_taken for every other."""
        self.check_body_size(4096)
        data, registry = self.fire(DispatchClaimSerializer, request.data)
        node_id = data.get("node_id") or conf.dispatch_node_id()
        key, fire_time = data["key"], data["fire_time"]
        won = _call(registry.claim_dispatch, key, fire_time, node_id)
        holder = _call(registry.find_dispatch, key, fire_time)
        if not won or holder is None:
            raise ApiError(
                409,
                "dispatch_taken",
                gettext("Another node has claimed this fire."),
                {"dispatch": None if holder is None else dispatch_data(holder)},
            )
        return Response({"won": True, "dispatch": dispatch_data(holder)}, status=201)


def dispatch_data(dispatch: Dispatch) -> dict[str, Any]:
    """Return a dispatch as the API shows it: times in epoch seconds."""
    return {
        "key": dispatch.key,
        "fire_time": int(dispatch.fire_time.timestamp()),
        "dispatched_at": int(dispatch.dispatched_at.timestamp()),
        "node_id": dispatch.node_id,
        "status": dispatch.status,
    }


def _call(function: Callable[..., T], *args: Any) -> T:
    """Call the registry, with its refusals in the API's terms."""
    try:
        return function(*args)
    except CorruptDispatch as exc:
        raise ApiError(409, "dispatch_corrupt", str(exc)) from exc
    except (TypeError, ValueError) as exc:
        raise ApiError(400, "invalid", str(exc)) from exc
