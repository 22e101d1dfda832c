"""Fixtures of the core ledger tests: every test runs in both modes.

Test modules register them with ``pytest_plugins = ["tests.support.ledger_fixtures"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_ledger import Ledger
from tests.support.ledger_helpers import make_ledger

MODES = [pytest.param(True, id="optimized"), pytest.param(False, id="reference")]


@pytest.fixture(params=MODES)
def optimized(request: pytest.FixtureRequest) -> bool:
    """The mode under test: fused scripts (True) or the reference path (False)."""
    value: bool = request.param
    return value


@pytest.fixture
def ledger_factory(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> Callable[..., Ledger]:
    """Build ledgers in the mode under test, in the test's own namespace."""

    def build(**kw: Any) -> Ledger:
        kw.setdefault("optimized", optimized)
        client = kw.pop("client", redis_client)
        return make_ledger(client, namespace, **kw)

    return build


@pytest.fixture
def ledger(ledger_factory: Callable[..., Ledger]) -> Ledger:
    """A ledger with default settings, in the mode under test."""
    return ledger_factory()
