"""The API's settings: ``LEDGER["API"]``, defaults in one place, read on every access."""

from __future__ import annotations

from typing import Any

from ..conf import ledger_settings

__all__ = ["API_DEFAULTS", "THROTTLE_DEFAULTS", "THROTTLE_SCOPES", "api_settings"]

#: What the API does unless ``LEDGER["API"]`` says otherwise.
API_DEFAULTS: dict[str, Any] = {
    # Seconds a client is told to wait (Retry-After) when the ledger is full.
    "FULL_RETRY_AFTER": 5,
    # Seconds a client is told to wait (Retry-After) when Redis is unreachable.
    "UNAVAILABLE_RETRY_AFTER": 1,
    # Records per page of a listing, unless the client asks for another number.
    "PAGE_SIZE": 20,
    # The most records one page may hold.
    "MAX_PAGE_SIZE": 100,
}

#: Throttle scope of each kind of call; rates come from REST_FRAMEWORK's
#: DEFAULT_THROTTLE_RATES under these names, else from ``THROTTLE_DEFAULTS`` (a scope
#: with no rate in either is not throttled).
THROTTLE_SCOPES = {
    "admit": "ledger.admit",
    "claim": "ledger.claim",
    "read": "ledger.read",
    "operate": "ledger.operate",
    "token": "ledger.token",
}

#: Rates a scope has unless ``DEFAULT_THROTTLE_RATES`` names it (``None`` there: no
#: limit). Signing in is open to anyone, so passwords are not guessed at speed.
THROTTLE_DEFAULTS: dict[str, str | None] = {
    "ledger.token": "10/min",
}


class ApiSettings:
    """Typed access to ``LEDGER["API"]``."""

    @property
    def raw(self) -> dict[str, Any]:
        return {**API_DEFAULTS, **(ledger_settings.raw.get("API") or {})}

    @property
    def full_retry_after(self) -> int:
        return int(self.raw["FULL_RETRY_AFTER"])

    @property
    def unavailable_retry_after(self) -> int:
        return int(self.raw["UNAVAILABLE_RETRY_AFTER"])

    @property
    def page_size(self) -> int:
        return int(self.raw["PAGE_SIZE"])

    @property
    def max_page_size(self) -> int:
        return int(self.raw["MAX_PAGE_SIZE"])


api_settings = ApiSettings()
