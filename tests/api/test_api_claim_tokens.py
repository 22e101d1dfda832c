"""API claim tokens: a forged, altered or foreign token is refused and changes nothing.

A token names its namespace and queue, so one from another queue or another namespace
is refused even where the same id, owner, fence and attempt exist; a token signed under
a ``SECRET_KEY_FALLBACKS`` key still settles.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core import signing
from django.test import override_settings
from rest_framework.test import APIClient

from django_ledger import Ledger, State, get_ledger
from django_ledger.api import tokens
from tests.api.test_api_claims import RENEW, SETTLE, altered, claimed
from tests.support.api_helpers import error_code, post_json, url
from tests.support.redis_server import delete_namespace

pytest_plugins = ["tests.support.api_fixtures"]


@pytest.mark.parametrize("path", [RENEW, SETTLE])
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda token: "forged", id="garbage"),
        pytest.param(lambda token: "", id="empty"),
        pytest.param(altered, id="altered"),
        pytest.param(lambda token: token + "x", id="extended"),
        pytest.param(
            lambda token: signing.dumps(
                {"n": "x", "q": "default", "i": "r0", "o": "w1", "f": 99, "a": 1},
                salt=tokens.SALT,
                key="not-the-secret-key",
            ),
            id="signed-with-another-key",
        ),
        pytest.param(
            lambda token: signing.dumps(signing.loads(token, salt=tokens.SALT), salt="other"),
            id="signed-with-another-salt",
        ),
        pytest.param(
            lambda token: signing.dumps({"i": "r0"}, salt=tokens.SALT), id="signed-but-incomplete"
        ),
    ],
)
def test_a_forged_or_altered_token_is_refused_and_changes_nothing(
    api_root: APIClient, api_ledger: Ledger, path: str, make: Any
) -> None:
    (got,) = claimed(api_root, api_ledger)
    before = api_ledger.resolve("r0")
    response = post_json(api_root, path, {"token": make(got["token"])})
    assert response.status_code == 400
    assert error_code(response) in {"claim_token_invalid", "invalid"}
    if make(got["token"]):
        assert error_code(response) == "claim_token_invalid"
    assert api_ledger.resolve("r0") == before


def test_a_token_of_another_queue_is_refused(api_root: APIClient, api_ledger: Ledger) -> None:
    emails = get_ledger("emails")
    emails.admit("r0", "p")
    token = post_json(api_root, url("emails", "claims/"), {"owner": "w1"}).json()["claims"][0][
        "token"
    ]
    response = post_json(api_root, SETTLE, {"token": token})
    assert response.status_code == 400
    assert error_code(response) == "claim_token_wrong_queue"
    record = emails.resolve("r0")
    assert record is not None and record.state is State.CLAIMED


def test_a_token_of_another_namespace_is_refused(
    api_root: APIClient, api_ledger: Ledger, settings: Any, redis_client: Any
) -> None:
    # The same id, claimed by the same owner, with the same fence and attempt, in two
    # namespaces: only the namespace named in the token tells the claims apart.
    (got,) = claimed(api_root, api_ledger)
    other = f"{api_ledger.namespace}-other"
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": other}
    try:
        twin = get_ledger("default")
        twin.admit("r0", "payload 0")
        # Fence counters start at each queue's first claim's server time: line them up.
        twin.redis.set(twin.fences_key, got["fence"] - 1)
        twin_claim = twin.claim("w1")
        assert twin_claim is not None
        assert (twin_claim.fence, twin_claim.attempt) == (got["fence"], got["attempt"])
        for path in (RENEW, SETTLE):
            response = post_json(api_root, path, {"token": got["token"]})
            assert response.status_code == 400
            assert error_code(response) == "claim_token_wrong_queue"
        record = twin.resolve("r0")
        assert record is not None and record.state is State.CLAIMED
        assert record.lease_until == twin_claim.lease_until
    finally:
        delete_namespace(redis_client, other)
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": api_ledger.namespace}
    assert post_json(api_root, SETTLE, {"token": got["token"]}).status_code == 200


def test_a_token_signed_under_an_old_secret_key_fallback_still_settles(
    api_root: APIClient, api_ledger: Ledger, settings: Any
) -> None:
    (got,) = claimed(api_root, api_ledger)
    with override_settings(SECRET_KEY="rotated-key", SECRET_KEY_FALLBACKS=[settings.SECRET_KEY]):
        assert post_json(api_root, SETTLE, {"token": got["token"]}).status_code == 200
