"""Throttles per kind of call, configurable per scope.

Every view action belongs to one scope (``ledger.admit``, ``ledger.claim``,
``ledger.read``, ``ledger.operate``, ``ledger.token``). The rate of a scope comes
from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``, read on every call (so
``override_settings`` works), else from ``THROTTLE_DEFAULTS`` (``ledger.token``:
10 a minute); a scope without a rate, or whose rate is ``None``, is not throttled.
Counts are kept per user (per client address when no user is signed in) in Django's
default cache, as DRF's ``ScopedRateThrottle`` keeps them. The client address is the
peer's (``REMOTE_ADDR``) unless ``REST_FRAMEWORK["NUM_PROXIES"]`` says how many proxies
stand in front: a client cannot pick its own address with ``X-Forwarded-For``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings as drf_settings
from rest_framework.throttling import ScopedRateThrottle

from .conf import THROTTLE_DEFAULTS

__all__ = ["LedgerScopedThrottle"]


class LedgerScopedThrottle(ScopedRateThrottle):
    """DRF's scoped throttle: the ledger's default rates, an unconfigured scope unlimited."""

    def get_rate(self) -> str | None:
        """The scope's rate, read now; ``None`` (not throttled) for a scope with none."""
        rates: dict[Any, Any] = {**THROTTLE_DEFAULTS, **(drf_settings.DEFAULT_THROTTLE_RATES or {})}
        rate: str | None = rates.get(self.scope)
        return rate

    def get_ident(self, request: Request) -> str:
        """Return the client's address: the peer's, unless proxies are configured.

        DRF trusts the whole ``X-Forwarded-For`` header when ``NUM_PROXIES`` is unset,
        so a client sending a new header with every call would never be counted twice.
        """
        if drf_settings.NUM_PROXIES is None:
            return str(request.META.get("REMOTE_ADDR") or "")
        ident: str = super().get_ident(request)
        return ident
