"""A schedule's ``MONITOR`` is checked with the others: E098 for a bad value, E099 for a
Sentry monitor without ``sentry_sdk``; a good one is typed for the scheduler."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_ledger.checks.schedules import check_schedules
from django_ledger.core.schedule.monitor import Monitor
from django_ledger.services import scheduler

TASK = "tests.support.tasks_app.tasks.noop"
HC = "https://hc-ping.com/5b8a4c1e-7d0e-4f55-9a4b-2f1b9e0c1d2a"


def messages(settings: Any, monitor: Any, **entry: Any) -> list[Any]:
    schedule = {"TASK": TASK, "CRON": "0 3 * * *", "MONITOR": monitor, **entry}
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": {"nightly": schedule}}
    return list(check_schedules())


@pytest.mark.parametrize(
    "monitor",
    [
        "https://hc-ping.com/x",  # not a dict
        {},
        {"url": HC},  # keys are upper case
        {"URL": HC, "EMAIL": "ops@example.com"},
        {"URL": 42},
        {"URL": "ftp://hc-ping.com/x"},
        {"URL": "hc-ping.com/x"},
        {"URL": "https:///no-host"},
        {"URL": f"{HC}?rid=1"},
        {"URL": f"{HC}#top"},
        {"URL": f"{HC}/ start"},
        {"URL": f"{HC}\n"},
        {"URL": "https://hc-ping.com:99999/x"},
        {"URL": "https://hc-ping.com/" + "x" * 2000},
        {"SENTRY": ""},
        {"SENTRY": "Nightly Report"},
        {"SENTRY": "x" * 51},
        {"SENTRY": ["nightly"]},
    ],
)
def test_a_bad_monitor_is_error_e098_on_its_setting(settings: Any, monitor: Any) -> None:
    found = messages(settings, monitor)

    assert [m.id for m in found] == ["django_ledger.E098"]
    assert found[0].obj == "LEDGER['SCHEDULES']['nightly']['MONITOR']"
    assert found[0].hint
    with pytest.raises(ImproperlyConfigured, match="E098"):
        scheduler.schedules()


def test_a_bad_url_is_not_repeated_in_the_message(settings: Any) -> None:
    (found,) = messages(settings, {"URL": "https://hc-ping.com/secret-token?x=1"})

    assert "secret-token" not in f"{found.msg} {found.hint}"


def test_a_huge_value_is_cut_short_in_the_message(settings: Any) -> None:
    (found,) = messages(settings, {"SENTRY": "X" * 100_000})

    assert len(found.msg) < 200


def test_a_sentry_monitor_without_sentry_sdk_is_error_e099(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)  # import sentry_sdk: ImportError
    monkeypatch.setitem(sys.modules, "sentry_sdk.crons", None)

    found = messages(settings, {"SENTRY": "nightly-report"})

    assert [m.id for m in found] == ["django_ledger.E099"]
    assert "sentry_sdk" in found[0].msg and "django-task-ledger[sentry]" in found[0].hint
    # A URL monitor needs nothing installed.
    assert messages(settings, {"URL": HC}) == []


def test_good_monitors_are_typed_with_sentrys_view_of_the_schedule(settings: Any) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "SCHEDULES": {
            "nightly": {
                "TASK": TASK,
                "CRON": "@daily",
                "TIMEZONE": "Europe/Paris",
                "MONITOR": {"URL": HC, "SENTRY": "nightly-report"},
            },
            "often": {"TASK": TASK, "EVERY": 7200, "MONITOR": {"SENTRY": "often"}},
            "seconds": {"TASK": TASK, "CRON": "*/10 * * * * *", "MONITOR": {"SENTRY": "s_1"}},
            "odd": {"TASK": TASK, "EVERY": 90, "MONITOR": {"URL": "http://10.0.0.5:8000/ping/"}},
            "plain": {"TASK": TASK, "EVERY": 60},
        },
    }

    assert check_schedules() == []
    found = scheduler.schedules()
    nightly = found["nightly"].monitor
    assert nightly == Monitor(url=HC, sentry="nightly-report")
    assert nightly is not None and nightly.sentry_config == {
        "schedule": {"type": "crontab", "value": "0 0 * * *"},
        "timezone": "Europe/Paris",
    }
    assert "5b8a4c1e" not in repr(nightly)  # a repr shows the host only
    often = found["often"].monitor
    assert often is not None and often.sentry_config == {
        "schedule": {"type": "interval", "value": 2, "unit": "hour"},
        "timezone": "UTC",
    }
    # Sentry cannot say a cron with seconds: the check-ins go without an upsert.
    seconds = found["seconds"].monitor
    assert seconds is not None and seconds.sentry_config is None
    assert found["odd"].monitor == Monitor(url="http://10.0.0.5:8000/ping/")
    assert found["plain"].monitor is None
