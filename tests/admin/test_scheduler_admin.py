"""The Schedules page of the admin: words, next fires, dispatches; pause, resume, fire now."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from django_ledger import get_dispatch_registry
from django_ledger.conf import get_ledger
from django_ledger.connections import reset_connections
from django_ledger.core.schedule import state_key
from django_ledger.services import scheduler
from django_ledger.testing.redis import free_port

pytestmark = pytest.mark.django_db

LIST = "/admin/django_ledger/schedule/"
TASK = "tests.support.tasks_app.tasks.noop"


def detail(key: str) -> str:
    return f"{LIST}{key}/change/"


def action(key: str, name: str) -> str:
    return f"{LIST}{key}/do/{name}/"


@pytest.fixture
def schedules(settings: Any, namespace: str, redis_client: redis.Redis) -> Iterator[str]:
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "QUEUES": {"default": {}, "emails": {}, "reports": {"GROUPS": ["ops"]}},
        "SCHEDULES": {
            "nightly": {"TASK": TASK, "CRON": "30 2 * * *", "TIMEZONE": "Europe/Paris"},
            "beat": {"TASK": TASK, "EVERY": 60, "MISFIRE": "all"},
            # tenancy.both is declared for "reports" (a schedule's QUEUE must be, E093).
            "ops-report": {
                "TASK": "tests.support.tasks_app.tenancy.both",
                "ARGS": [1],
                "CRON": "0 * * * *",
                "QUEUE": "reports",
            },
        },
    }
    yield namespace
    redis_client.delete(state_key(namespace))


def fire_beat_once() -> int:
    """Run one tick that admits a fire of ``beat``; return its epoch."""
    store = scheduler.store()
    now = store.server_time_ms() // 1000
    store.set_through("beat", (now // 60 - 1) * 60 - 1)
    report = scheduler.Scheduler("node-test").tick()
    (epoch,) = [e.fire.epoch for e in report.events if e.fire.key == "beat"][-1:]
    return epoch


def test_the_admin_index_links_to_schedules(admin_client: Client, schedules: str) -> None:
    assert f'<a href="{LIST}">Schedules</a>' in admin_client.get("/admin/").content.decode()


def test_the_list_shows_each_schedule_in_words_with_its_next_fire(
    admin_client: Client, schedules: str
) -> None:
    epoch = fire_beat_once()

    text = html.unescape(admin_client.get(LIST).content.decode())

    assert "At 02:30 every day (Europe/Paris)" in text
    assert "Every 1 minute" in text
    for key in ("nightly", "beat", "ops-report"):
        assert f'<a href="{detail(key)}">{key}</a>' in text
    row = re.search(r'data-schedule="beat">(.*?)</tr>', text, re.S)
    assert row is not None and "by node-test (dispatched)" in row.group(1)
    assert get_dispatch_registry().find_dispatch("beat", epoch) is not None
    nightly = re.search(r'data-schedule="nightly">(.*?)</tr>', text, re.S)
    assert nightly is not None and re.search(r"\d\d:\d\d:\d\d UTC", nightly.group(1))
    assert re.search(r"02:30:00 CES?T", nightly.group(1)) or "03:00:00 CEST" in nightly.group(1)


def test_the_detail_shows_next_fires_and_dispatches_linked_to_their_records(
    admin_client: Client, schedules: str
) -> None:
    epoch = fire_beat_once()

    text = html.unescape(admin_client.get(detail("beat")).content.decode())

    fires = re.search(r'<table id="next-fires">(.*?)</table>', text, re.S)
    assert fires is not None and len(re.findall(r"<tr><td>", fires.group(1))) == 10
    dispatches = re.search(r'<table id="dispatches">(.*?)</table>', text, re.S)
    assert dispatches is not None
    assert "node-test" in dispatches.group(1) and "dispatched" in dispatches.group(1)
    link = reverse(
        "admin:django_ledger_record_change", args=(quote(f"default schedule:beat:{epoch}"),)
    )
    assert f'<a href="{link}">schedule:beat:{epoch}</a>' in dispatches.group(1)
    assert admin_client.get(link).status_code == 200  # the record it admitted
    assert 'data-setting="misfire">all<' in text


def test_pause_then_resume_are_kept_in_redis(admin_client: Client, schedules: str) -> None:
    confirm = admin_client.get(action("nightly", "pause"))
    assert confirm.status_code == 200 and b"are you sure?" in confirm.content

    response = admin_client.post(action("nightly", "pause"))

    assert response.status_code == 302
    assert scheduler.state().paused["nightly"].by == "admin"
    page = admin_client.get(detail("nightly")).content.decode()
    assert "paused by admin" in page and 'id="resume-button"' in page
    admin_client.post(action("nightly", "resume"))
    assert "nightly" not in scheduler.state().paused


def next_fire_cells(page: str, key: str) -> list[str]:
    row = re.search(rf'<tr data-schedule="{key}">(.*?)</tr>', page, re.S)
    assert row is not None, key
    return re.findall(r'<span class="ledger-when">([^<]*)</span>', row.group(1))


def test_a_paused_schedule_shows_no_next_fire(admin_client: Client, schedules: str) -> None:
    assert next_fire_cells(admin_client.get(LIST).content.decode(), "nightly")[0] != "-"
    admin_client.post(action("nightly", "pause"))
    assert set(next_fire_cells(admin_client.get(LIST).content.decode(), "nightly")) == {"-"}
    admin_client.post(action("nightly", "resume"))
    assert next_fire_cells(admin_client.get(LIST).content.decode(), "nightly")[0] != "-"


def test_fire_now_admits_one_manual_fire_and_records_it(
    admin_client: Client, schedules: str
) -> None:
    response = admin_client.post(action("nightly", "trigger"), follow=True)

    text = html.unescape(response.content.decode())
    (request_id,) = re.findall(r"(schedule:nightly:manual:\d+) ADMITTED", text)
    assert get_ledger("default").resolve(request_id) is not None
    epoch = int(request_id.rsplit(":", 1)[1])
    manual = get_dispatch_registry().find_dispatch("nightly:manual", epoch)
    assert manual is not None and manual.node_id.endswith("(admin)")
    assert get_dispatch_registry().find_dispatch("nightly", epoch) is None
    assert f">{request_id}</a>" in text and "(manual)" in text


def test_without_view_schedule_the_page_is_forbidden(
    login_as: Callable[..., Client], schedules: str
) -> None:
    assert login_as("view_record").get(LIST).status_code == 403


def test_viewing_is_not_operating(login_as: Callable[..., Client], schedules: str) -> None:
    client = login_as("view_schedule")

    page = client.get(detail("nightly")).content.decode()

    assert "pause-button" not in page and "trigger-button" not in page
    assert client.post(action("nightly", "pause")).status_code == 403
    assert client.post(action("nightly", "trigger")).status_code == 403
    assert "nightly" not in scheduler.state().paused


def test_a_schedule_on_a_queue_of_other_groups_is_hidden(
    login_as: Callable[..., Client], schedules: str
) -> None:
    outsider = login_as("view_schedule", "operate_schedule")
    insider = login_as("view_schedule", "operate_schedule", groups=("ops",))

    assert "ops-report" not in outsider.get(LIST).content.decode()
    assert outsider.get(detail("ops-report")).status_code == 302  # "no such schedule"
    assert outsider.post(action("ops-report", "pause")).status_code == 403
    assert "ops-report" in insider.get(LIST).content.decode()
    assert insider.post(action("ops-report", "pause")).status_code == 302


def test_records_are_linked_only_for_users_who_may_see_them(
    login_as: Callable[..., Client], schedules: str
) -> None:
    epoch = fire_beat_once()

    page = login_as("view_schedule").get(detail("beat")).content.decode()

    assert f"schedule:beat:{epoch}" in page
    assert "/admin/django_ledger/record/" not in page


def test_an_unknown_schedule_or_action_is_not_found(admin_client: Client, schedules: str) -> None:
    assert admin_client.get(detail("nope")).status_code == 302
    assert admin_client.post(action("nightly", "explode")).status_code == 404
    assert admin_client.post(action("nope", "pause")).status_code == 404


@pytest.mark.parametrize(
    ("key", "headings"), [("beat", ["UTC"]), ("nightly", ["UTC", "Europe/Paris"])]
)
def test_next_fires_have_one_column_per_time_zone(
    admin_client: Client, schedules: str, key: str, headings: list[str]
) -> None:
    text = html.unescape(admin_client.get(detail(key)).content.decode())

    fires = re.search(r'<table id="next-fires">(.*?)</table>', text, re.S)
    assert fires is not None
    assert re.findall(r"<th>(.*?)</th>", fires.group(1)) == headings
    first = re.search(r"<tbody>\s*<tr>(.*?)</tr>", fires.group(1), re.S)
    assert first is not None and first.group(1).count("<td>") == len(headings)


def test_the_detail_shows_a_monitor_by_its_host_never_its_token(
    admin_client: Client, schedules: str, settings: Any
) -> None:
    entry = {
        "TASK": TASK,
        "EVERY": 60,
        "MONITOR": {"URL": "https://hc-ping.com/secret-5b8a4c1e", "SENTRY": "beat-check"},
    }
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": {"beat": entry}}

    text = html.unescape(admin_client.get(detail("beat")).content.decode())

    assert 'data-setting="monitor">ping URL on hc-ping.com; Sentry monitor beat-check<' in text
    assert "secret-5b8a4c1e" not in text


@pytest.mark.parametrize("runtime_schedules", [False, True])
def test_acting_on_a_schedule_with_redis_unreachable_gets_a_503_page(
    admin_client: Client, schedules: str, settings: Any, runtime_schedules: bool
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "CONNECTION": f"redis://127.0.0.1:{free_port()}/0",
        "RUNTIME_SCHEDULES": runtime_schedules,
    }
    reset_connections()
    try:
        for response in (
            admin_client.get(action("nightly", "pause")),
            admin_client.post(action("nightly", "pause")),
            admin_client.post(action("nightly", "trigger")),
        ):
            assert response.status_code == 503
            assert "could not read Redis" in response.content.decode()
    finally:
        reset_connections()
