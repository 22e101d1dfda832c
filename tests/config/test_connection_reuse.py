"""``connection()`` per operation: one client per setting, and a changed setting seen.

A task's signal receiver or a view may call ``django_ledger.conf.connection()`` for
every operation, so the client is looked up without parsing the URL or the
``TIMEOUTS`` again; these tests hold that the lookup still follows the setting.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_ledger.conf import connection, ledger_settings, reset_connections
from tests.support.redis_server import RedisServer


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def _ledger(**changes: object) -> dict[str, object]:
    return {**settings.LEDGER, **changes}


def test_the_same_setting_gives_the_same_client(redis_server: RedisServer) -> None:
    with override_settings(LEDGER=_ledger(CONNECTION=redis_server.url)):
        first = connection()
        assert connection() is first
        assert connection().ping()


def test_another_url_or_timeouts_give_another_client(redis_server: RedisServer) -> None:
    with override_settings(LEDGER=_ledger(CONNECTION=redis_server.url)):
        first = connection()
    other = redis_server.url.rstrip("/0123456789") + "/3"
    with override_settings(LEDGER=_ledger(CONNECTION=other)):
        assert connection() is not first
        assert connection().connection_pool.connection_kwargs["db"] == 3
    with override_settings(LEDGER=_ledger(CONNECTION=redis_server.url, TIMEOUTS={"SOCKET": 7})):
        assert connection().connection_pool.connection_kwargs["socket_timeout"] == 7
    with override_settings(LEDGER=_ledger(CONNECTION=redis_server.url)):
        assert connection() is first


def test_timeouts_changed_in_place_are_read_again(redis_server: RedisServer) -> None:
    section: dict[str, object] = {"SOCKET": 4}
    with override_settings(LEDGER=_ledger(CONNECTION=redis_server.url, TIMEOUTS=section)):
        assert ledger_settings.timeouts.socket == 4
        assert connection().connection_pool.connection_kwargs["socket_timeout"] == 4
        section["SOCKET"] = 9
        assert ledger_settings.timeouts.socket == 9
        assert connection().connection_pool.connection_kwargs["socket_timeout"] == 9
        section["SOCKET"] = -1
        with pytest.raises(ImproperlyConfigured, match="TIMEOUTS"):
            ledger_settings.timeouts  # noqa: B018


def test_a_bad_url_is_refused_after_a_good_one_was_used(redis_server: RedisServer) -> None:
    with override_settings(LEDGER=_ledger(CONNECTION=redis_server.url)):
        assert connection().ping()
    bad = redis_server.url.rstrip("/0123456789") + "/abc"
    with (
        override_settings(LEDGER=_ledger(CONNECTION=bad)),
        pytest.raises(ImproperlyConfigured, match="must be a number"),
    ):
        connection()
