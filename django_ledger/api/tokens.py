"""Claim tokens: what a worker holds between a claim and its renewals and settlement.

A token is signed with Django's ``signing`` (``SECRET_KEY``, with a salt of its own):
it names the namespace, the queue, the request id, the owner and the fence of one
claim. The server renews and settles only claims it issued a token for; a token that
was forged, altered or issued for another queue is refused. A genuine token of a claim
that moved on is not refused here: the ledger answers ``LOST`` for it (fence and owner
no longer match), which the API reports as a lost claim.
"""

from __future__ import annotations

from typing import Any

from django.core import signing
from django.utils.translation import gettext

from ..core.results import Claim
from ..core.sharded import AnyLedger
from .errors import ApiError

__all__ = ["issue_token", "read_token"]

SALT = "django_ledger.api.claim-token"


def issue_token(ledger: AnyLedger, claim: Claim) -> str:
    """Return the signed token of ``claim``."""
    return signing.dumps(
        {
            "n": ledger.namespace,
            "q": ledger.queue,
            "i": claim.request_id,
            "o": claim.owner,
            "f": claim.fence,
            "a": claim.attempt,
        },
        salt=SALT,
    )


def read_token(ledger: AnyLedger, token: object) -> Claim:
    """Return the claim ``token`` names, or raise ``ApiError`` if it is not one of ours."""
    try:
        data: Any = signing.loads(token, salt=SALT) if isinstance(token, str) else None
    except signing.BadSignature:
        data = None
    if not _well_formed(data):
        raise ApiError(
            400,
            "claim_token_invalid",
            gettext("The claim token was not issued by this server, or was altered."),
        )
    if data["n"] != ledger.namespace or data["q"] != ledger.queue:
        raise ApiError(
            400,
            "claim_token_wrong_queue",
            gettext("The claim token belongs to another queue than %(queue)r.")
            % {"queue": ledger.queue},
        )
    return Claim(
        request_id=data["i"],
        payload="",
        owner=data["o"],
        attempt=data["a"],
        fence=data["f"],
        lease_until=0,
    )


def _well_formed(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    texts = all(isinstance(data.get(name), str) for name in ("n", "q", "i", "o"))
    numbers = all(
        isinstance(data.get(name), int) and not isinstance(data.get(name), bool)
        for name in ("f", "a")
    )
    return texts and numbers
