"""One JSON shape for every refusal, with a stable code, and the handler that makes it.

Every error the API answers reads ``{"error": {"code": ..., "message": ...,
"details": ...}}``: ``code`` is stable (clients branch on it), ``message`` is for
people, ``details`` is an object, a list or null.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import redis
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404
from django.utils.translation import gettext
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..core.errors import CorruptRecord, LedgerError, LedgerUnavailable
from ..core.records import id_problem
from .conf import api_settings

__all__ = [
    "ApiError",
    "check_request_id",
    "error_body",
    "exception_handler",
    "invalid",
    "record_not_found",
]

logger = logging.getLogger("django_ledger.api")


class ApiError(exceptions.APIException):
    """A refusal: HTTP status, stable code, message, details and maybe a Retry-After."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        details: Any = None,
        *,
        wait: int | None = None,
    ) -> None:
        super().__init__(message, code)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details = details
        # DRF's handler turns ``wait`` into a Retry-After header.
        self.wait = wait


def check_request_id(
    request_id: str, message: str = "", details: dict[str, Any] | None = None
) -> None:
    """Refuse (400, the problem's code, ``details``) an id the ledger cannot hold.

    ``message`` says so with ``%(problem)s`` and the names in ``details``; by default,
    of a request id.
    """
    problem = id_problem(request_id)
    if problem is not None:
        message = message or gettext("The request id is not usable (%(problem)s).")
        raise ApiError(400, problem, message % {"problem": problem, **(details or {})}, details)


def invalid(details: Any) -> ApiError:
    """The 400 for a request that is not valid, ``details`` saying where."""
    return ApiError(400, "invalid", gettext("The request is not valid: see details."), details)


def record_not_found(request_id: str) -> ApiError:
    """The 404 for an id no record has."""
    return ApiError(
        404, "record_not_found", gettext("No record has this id."), {"request_id": request_id}
    )


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """Return the error document for ``code``."""
    return {"error": {"code": code, "message": message, "details": details}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Answer an exception raised in an API view with the error document."""
    exc = _translate(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    assert isinstance(exc, exceptions.APIException)  # what DRF's handler answers
    response.data = error_body(*_describe(exc))
    return response


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, LedgerUnavailable | redis.ConnectionError | redis.TimeoutError):
        return ApiError(
            503,
            "ledger_unavailable",
            gettext("Redis is unavailable; the outcome is unknown, so retry the same call."),
            wait=api_settings.unavailable_retry_after,
        )
    if isinstance(exc, CorruptRecord):
        return ApiError(
            409,
            "record_corrupt",
            gettext("The stored record of %(request_id)r is corrupt; repair will quarantine it.")
            % {"request_id": exc.request_id},
            {"request_id": exc.request_id, "reason": exc.reason},
        )
    if isinstance(exc, LedgerError | redis.RedisError):
        # What Redis said names scripts, lines and settings: for the log, not the client.
        if isinstance(exc, redis.exceptions.OutOfMemoryError) or isinstance(
            exc.__cause__, redis.exceptions.OutOfMemoryError
        ):
            logger.warning("Redis is out of memory: %s", exc)
            return ApiError(
                507,
                "ledger_out_of_memory",
                gettext(
                    "Redis is out of memory and refuses writes; nothing was written. Retry later."
                ),
                wait=api_settings.full_retry_after,
            )
        logger.error("Redis refused a call of the API", exc_info=exc)
        return ApiError(
            500, "ledger_error", gettext("Redis refused the call; nothing is known to be written.")
        )
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return ApiError(
            400,
            "too_many_fields",
            gettext("The request has more query parameters or form fields than the server reads."),
        )
    if isinstance(exc, RequestDataTooBig):
        return ApiError(
            413, "body_too_large", gettext("The request body is larger than the server reads.")
        )
    if isinstance(exc, SuspiciousOperation):
        return ApiError(400, "bad_request", gettext("The request cannot be read."))
    if isinstance(exc, Http404):
        return ApiError(404, "not_found", gettext("Not found."))
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied()
    return exc


def _describe(exc: exceptions.APIException) -> tuple[str, str, Any]:
    if isinstance(exc, ApiError):
        return exc.code, exc.message, exc.details
    if isinstance(exc, exceptions.ValidationError):
        return "invalid", gettext("The request is not valid: see details."), exc.detail
    if isinstance(exc, exceptions.Throttled):
        seconds = getattr(exc, "wait", None)
        wait = None if seconds is None else math.ceil(seconds)
        return "throttled", gettext("Too many requests; retry later."), {"wait": wait}
    detail = exc.detail
    code = getattr(detail, "code", None) or exc.default_code
    if isinstance(detail, list | dict):
        return str(code), str(exc.default_detail), detail
    return str(code), str(detail), None
