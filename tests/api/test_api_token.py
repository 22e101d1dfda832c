"""POST /api/token/: a username and password in, the user's API token out."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.support.api_helpers import error_code, post_json, post_raw

pytest_plugins = ["tests.support.api_fixtures"]


def fresh_cache() -> dict[str, Any]:
    """CACHES with a local-memory cache of its own: no throttle count of another test."""
    location = f"throttles-{uuid.uuid4().hex}"
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": location,
        }
    }


TOKEN = "/api/token/"
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def own_throttle_counts(settings: Any) -> None:
    """Each test counts its own calls: the default token throttle is on."""
    settings.CACHES = fresh_cache()


@pytest.fixture
def worker(db: None, api_namespace: str) -> User:
    user = User.objects.create_user("worker-7", "w7@example.com", PASSWORD)
    return user


def sign_in(client: APIClient, username: str = "worker-7", password: str = PASSWORD) -> Any:
    return post_json(client, TOKEN, {"username": username, "password": password})


def test_good_credentials_answer_the_users_token(api_anonymous: APIClient, worker: User) -> None:
    response = sign_in(api_anonymous)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    key = response.json()["token"]
    assert response.json() == {"token": Token.objects.get(user=worker).key}
    # The same token again, until it is reset.
    assert sign_in(api_anonymous).json() == {"token": key}
    assert Token.objects.filter(user=worker).count() == 1


def test_the_token_authenticates_api_calls(api_anonymous: APIClient, worker: User) -> None:
    key = sign_in(api_anonymous).json()["token"]
    client = APIClient()
    assert client.get("/api/queues/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/queues/")
    assert response.status_code == 200
    assert response.json() == {"queues": []}  # signed in, but holding no permission


def test_an_existing_token_is_the_one_answered(api_anonymous: APIClient, worker: User) -> None:
    token = Token.objects.create(user=worker)
    assert sign_in(api_anonymous).json() == {"token": token.key}


@pytest.mark.parametrize(
    ("username", "password"),
    [("worker-7", "wrong"), ("nobody", PASSWORD), ("worker-7", "")],
    ids=["wrong-password", "unknown-user", "empty-password"],
)
def test_bad_credentials_are_400_credentials_invalid_and_make_no_token(
    api_anonymous: APIClient, worker: User, username: str, password: str
) -> None:
    response = sign_in(api_anonymous, username, password)
    assert response.status_code == 400
    code = error_code(response)
    assert code == ("invalid" if password == "" else "credentials_invalid")
    assert not Token.objects.exists()


def test_an_inactive_user_gets_no_token(api_anonymous: APIClient, worker: User) -> None:
    worker.is_active = False
    worker.save()
    response = sign_in(api_anonymous)
    assert response.status_code == 400
    assert error_code(response) == "credentials_invalid"
    assert not Token.objects.exists()


def test_unknown_user_and_wrong_password_read_the_same(
    api_anonymous: APIClient, worker: User
) -> None:
    unknown = sign_in(api_anonymous, "nobody").json()
    wrong = sign_in(api_anonymous, password="wrong").json()
    assert unknown == wrong


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"username": "worker-7"},
        {"password": PASSWORD},
        {"username": 7, "password": PASSWORD},
        {"username": "worker-7\x00", "password": PASSWORD},
        {"username": "worker-7", "password": "x" * 4097},
    ],
)
def test_invalid_bodies_are_400_invalid(
    api_anonymous: APIClient, worker: User, body: dict[str, Any]
) -> None:
    response = post_json(api_anonymous, TOKEN, body)
    assert response.status_code == 400
    assert error_code(response) == "invalid"
    assert isinstance(response.json()["error"]["details"], dict)


def test_the_credentials_are_taken_as_typed(api_anonymous: APIClient, worker: User) -> None:
    assert sign_in(api_anonymous, " worker-7").status_code == 400
    assert sign_in(api_anonymous, password=PASSWORD + " ").status_code == 400


def post_form(client: APIClient, fields: dict[str, str]) -> Any:
    """POST ``fields`` as an HTML form does (``application/x-www-form-urlencoded``)."""
    body = urlencode(fields)
    return client.generic("POST", TOKEN, body, content_type="application/x-www-form-urlencoded")


def test_a_form_body_is_accepted_too(api_anonymous: APIClient, worker: User) -> None:
    form = post_form(api_anonymous, {"username": "worker-7", "password": PASSWORD})
    assert form.status_code == 200, form.content
    assert form.json() == {"token": Token.objects.get(user=worker).key}
    wrong = post_form(api_anonymous, {"username": "worker-7", "password": "wrong"})
    assert wrong.status_code == 400 and error_code(wrong) == "credentials_invalid"
    missing = post_form(api_anonymous, {"username": "worker-7"})
    assert missing.status_code == 400 and error_code(missing) == "invalid"
    huge = post_form(api_anonymous, {"username": "x" * 200_000, "password": PASSWORD})
    assert huge.status_code == 413 and error_code(huge) == "body_too_large"


def test_the_token_endpoint_is_throttled_by_default(api_anonymous: APIClient, worker: User) -> None:
    # No rate configured for ledger.token: the default (10 a minute per address) holds.
    answers = [sign_in(api_anonymous, password=f"guess-{i}").status_code for i in range(12)]
    assert answers[:10] == [400] * 10
    assert answers[10:] == [429, 429]
    assert sign_in(api_anonymous).status_code == 429  # good credentials wait too


def test_the_default_token_throttle_can_be_turned_off(
    api_anonymous: APIClient, worker: User, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"ledger.token": None},
    }
    for i in range(15):
        assert sign_in(api_anonymous, password=f"guess-{i}").status_code == 400


def test_refusals_keep_the_apis_error_contract(api_anonymous: APIClient, worker: User) -> None:
    xml = api_anonymous.generic("POST", TOKEN, "<username/>", content_type="application/xml")
    assert xml.status_code == 415
    assert error_code(xml) == "unsupported_media_type"
    get = api_anonymous.get(TOKEN)
    assert get.status_code == 405
    assert error_code(get) == "method_not_allowed"
    broken = post_raw(api_anonymous, TOKEN, '{"username": ')
    assert broken.status_code == 400
    assert error_code(broken) == "parse_error"
    huge = post_raw(api_anonymous, TOKEN, '{"username": "' + "x" * 200_000 + '"}')
    assert huge.status_code == 413
    assert error_code(huge) == "body_too_large"
    assert not Token.objects.exists()


def test_a_stale_token_header_does_not_stand_in_the_way(
    api_anonymous: APIClient, worker: User
) -> None:
    api_anonymous.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert sign_in(api_anonymous).status_code == 200


def test_the_token_endpoint_is_throttled_per_client_address(
    api_anonymous: APIClient, worker: User, settings: Any
) -> None:
    settings.CACHES = fresh_cache()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"ledger.token": "2/min"},
    }
    assert sign_in(api_anonymous, password="guess-1").status_code == 400
    assert sign_in(api_anonymous).status_code == 200
    response = sign_in(api_anonymous)  # even good credentials wait now
    assert response.status_code == 429
    assert error_code(response) == "throttled"
    assert int(response["Retry-After"]) > 0
    # Another address has its own count; other scopes are not touched.
    other = APIClient(REMOTE_ADDR="10.0.0.9")
    assert sign_in(other).status_code == 200
    key = Token.objects.get(user=worker).key
    signed_in = APIClient()
    signed_in.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert signed_in.get("/api/queues/").status_code == 200


def test_other_scopes_rates_leave_the_token_default_alone(
    api_anonymous: APIClient, worker: User, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"ledger.read": "1/min"},
    }
    for _ in range(10):
        assert sign_in(api_anonymous).status_code == 200
    assert sign_in(api_anonymous).status_code == 429


def guess_from(client: APIClient, forwarded_for: str, password: str = "guess") -> int:
    """Sign in through a client that says it forwards for ``forwarded_for``."""
    body = {"username": "worker-7", "password": password}
    answer = post_json(client, TOKEN, body, **{"X-Forwarded-For": forwarded_for})
    status: int = answer.status_code
    return status


def test_a_forwarded_for_header_does_not_reset_the_count(
    api_anonymous: APIClient, worker: User, settings: Any
) -> None:
    # NUM_PROXIES unset (the default): the peer's address counts, whatever the header says.
    assert "NUM_PROXIES" not in settings.REST_FRAMEWORK
    answers = [guess_from(api_anonymous, f"203.0.113.{i}", f"guess-{i}") for i in range(30)]
    assert answers == [400] * 10 + [429] * 20
    assert guess_from(api_anonymous, "198.51.100.7", PASSWORD) == 429
    assert not Token.objects.exists()


@pytest.mark.parametrize("proxies", [0, 1])
def test_behind_configured_proxies_the_forwarded_client_counts(
    api_anonymous: APIClient, worker: User, settings: Any, proxies: int
) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "NUM_PROXIES": proxies,
        "DEFAULT_THROTTLE_RATES": {"ledger.token": "2/min"},
    }
    # One proxy: the address it appended (the header's last) is the client's.
    assert [guess_from(api_anonymous, "203.0.113.1, 10.0.0.1") for _ in range(3)] == [
        400,
        400,
        429,
    ]
    assert guess_from(api_anonymous, "203.0.113.2, 10.0.0.1") == 429
    # Another client behind the proxy has its own count; with no proxy, the peer is one.
    assert guess_from(api_anonymous, "10.0.0.2") == (400 if proxies == 1 else 429)
