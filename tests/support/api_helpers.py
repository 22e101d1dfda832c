"""Helpers shared by the REST API tests (no fixtures here)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def url(queue: str, tail: str) -> str:
    """Return the API path of ``tail`` on ``queue``."""
    return f"/api/queues/{queue}/{tail}"


def error_code(response: Any) -> str:
    """Return the stable code of an error response (and check its shape)."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    code: str = body["error"]["code"]
    return code


def post_raw(client: APIClient, path: str, text: str) -> Any:
    """POST ``text`` as a JSON body as is (for bodies a JSON encoder would refuse)."""
    return client.generic("POST", path, text.encode("utf-8"), content_type="application/json")


def post_json(client: APIClient, path: str, body: Any, **headers: str) -> Any:
    return client.post(path, body, format="json", headers=headers)


def token_client(user: User) -> APIClient:
    """Return a client that authenticates as ``user`` with a DRF token."""
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
